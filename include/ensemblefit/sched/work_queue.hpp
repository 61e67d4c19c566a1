// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ef {

/// How work units are handed to ranks ([sched] policy).
enum class SchedPolicy {
    static_blocks,  ///< "static": rank r owns a contiguous block, taken chunk by chunk
    dynamic,        ///< fixed chunks from one shared cursor, to whoever asks
    guided,         ///< chunks of remaining / (2 ranks), never below the chunk size
    weighted,       ///< chunks proportional to each rank's measured throughput
};

SchedPolicy parse_sched_policy(const std::string& name);  ///< throws usage_error
const char* to_string(SchedPolicy p);

/// A unit as positions [begin, end) into the run's list of pending replicas.
struct UnitSpan {
    std::int64_t begin = 0;
    std::int64_t end = 0;
    bool empty() const { return end <= begin; }
    std::int64_t size() const { return end - begin; }
};

/**
 * The scheduler's decision logic, and the only place that decides who does what: given a
 * request from a rank (and that rank's measured throughput, replicas per second of compute),
 * returns the next unit. Pure and single-threaded (the dispatcher serialises calls), so it is
 * tested on its own; every position in [0, total) is handed out exactly once whatever the order
 * of requests.
 *
 * `static` and `dynamic` use the chunk size, grown to at least kMinUnitSeconds of work once
 * the rank's throughput is known (dynamic: at most guided's size, so the end still balances).
 * `weighted` sizes a unit so that it should take about the same time on every rank:
 * size = throughput x T, with T = (estimated time left on all ranks) / 4, so units shrink as the
 * run ends (like guided) but stay proportional to speed, and a GPU rank and a CPU rank each get
 * work in proportion to what they deliver. Before a rank's first measurement it gets `chunk`.
 */
class WorkQueue {
   public:
    /// Shortest unit worth a request (static and dynamic grow their chunks to it once a rank's
    /// throughput is known).
    static constexpr double kMinUnitSeconds = 0.02;

    WorkQueue(SchedPolicy policy, std::int64_t total, int ranks, std::int64_t chunk);
    /// Per-rank chunk sizes (a GPU rank wants thousands of replicas per unit, a CPU rank a few
    /// per thread); `static` uses them to step through each rank's block.
    WorkQueue(SchedPolicy policy, std::int64_t total, const std::vector<std::int64_t>& chunks);

    UnitSpan next(int rank, double throughput);
    std::int64_t remaining() const;
    SchedPolicy policy() const { return policy_; }

   private:
    SchedPolicy policy_;
    std::int64_t total_;
    int ranks_;
    std::vector<std::int64_t> chunk_;  // per rank
    std::int64_t cursor_ = 0;                 // shared policies
    std::vector<std::int64_t> block_cursor_;  // static: per-rank position
    std::vector<std::int64_t> block_end_;
    std::vector<double> throughput_;          // weighted: last known, per rank
};

}  // namespace ef

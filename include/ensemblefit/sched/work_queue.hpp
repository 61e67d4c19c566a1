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
    guided,         ///< shrinking chunks (remaining / (2 ranks)), capped by the rank's share of the time left
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
 * request from a rank (and that rank's measured throughput, replicas per second of compute,
 * or 0 before its first unit is done), returns the next unit. Pure and single-threaded (the
 * dispatcher serialises calls), so it is tested on its own; every position in [0, total) is
 * handed out exactly once whatever the order of requests.
 *
 * For a request from rank r: `left` = positions not yet handed out, P = ranks, `chunk` = the
 * rank's chunk size (a GPU rank's is the batch it needs), `rate` = its last recorded
 * throughput (0 until it has one), `min_unit` = max(chunk, rate x kMinUnitSeconds), the
 * smallest unit of static, dynamic and guided and weighted's probe units. Once every rank has
 * recorded a throughput, `time_left` =
 * left / (sum of the ranks' rates) is when the run would end if every rank worked to the end at
 * its rate, and `share` = rate x time_left is the part of `left` rank r would do by then;
 * `last` is the size of the unit r was handed before this one. Each unit is clipped to `left`.
 *
 * - `static`: rank r owns [total r / P, total (r+1) / P) and takes it in steps of
 *   max(chunk, rate x kMinUnitSeconds). Nothing moves between ranks: the one policy that may
 *   be unbalanced.
 * - `dynamic`: units of kDynamicUnitSeconds of the asking rank's own work, to whoever asks:
 *   max(chunk, min(rate x kDynamicUnitSeconds, left / 2P)) while some rank has no recorded
 *   throughput, then max(min_unit, min(rate x kDynamicUnitSeconds, rate x time_left / 4)): never
 *   more than a quarter of the time left, so the last units still spread over the ranks and a
 *   slow rank's last unit ends with the others'.
 * - `guided`: min_unit while some rank has no recorded throughput (the first units probe each
 *   rank's speed, so a rank of unknown speed never gets a big unit); then
 *   max(min_unit, min(ceil(left / 2P), share / 2 - last)): chunks shrink with the remaining work
 *   as in OpenMP's guided, but a rank is never promised more than half of its share of the time
 *   left, counting the unit it may still hold (a worker rank asks for its next unit when it
 *   starts the current one), so a slow rank gets small units and nobody waits for it.
 * - `weighted`: min_unit while some rank has no recorded throughput; then
 *   max(max(1, rate x kMinUnitSeconds), min(share / 4, share / 2 - last)): every rank's unit
 *   takes about a quarter of the time left, whatever its speed, so a GPU rank and a CPU rank
 *   get work in proportion to what they deliver and units shrink as the run ends; and, as under
 *   guided, no rank is committed to more than half its share. The chunk only sizes the probe
 *   units: a GPU rank's chunk (half an equal share) as the last unit would keep the GPU busy
 *   long after the CPU ranks finish.
 *   Beside batch ranks (a chunk kBatchChunkRatio or more times the smallest: a GPU rank's, whose
 *   unit costs its LM rounds whatever its size, 0.26 s for stats2 on an H100), units are sized
 *   for the worker that takes them: a batch rank's unit is never below its chunk (units of 200
 *   made 4 H100s beside 60 CPU ranks 3x slower: issue 35), and another rank never gets a unit it
 *   would still be computing when the batch ranks, at their rates, would have finished all that
 *   is left (it gets an empty unit, and is done).
 *
 * Why dynamic's units are longer (kDynamicUnitSeconds) than the floor: dynamic hands out every
 * unit but its last few at that size, so its unit count is what its cost per unit (request,
 * reply, result message, store on rank 0's dispatcher thread, which shares rank 0's core) and
 * the reply latency scale with. With 20 ms units on an oversubscribed node (4 ranks on 2 cores,
 * load average ~10) the worker ranks waited for replies despite prefetching; with 50 ms units
 * and a tail cap of left / 2P positions, dynamic made about twice the units of guided and
 * weighted with one rank slowed 4x among 4 (~150 against ~80) and was 6-16 % slower than the
 * best of them, and in a simulation at a quiet machine's rates (10000, 1250, 10000, 8750 per
 * second) its last units, sized in positions rather than time, left the slow rank 50 ms behind
 * (load balance 0.94). The cap of a quarter of the time left ends every rank's last unit
 * together, which lets the units be 100 ms: ~90 in that case, load balance 0.98-0.99.
 */
class WorkQueue {
   public:
    /// Shortest unit worth a request once a rank's throughput is known: every policy's floor,
    /// and static's step.
    static constexpr double kMinUnitSeconds = 0.02;
    /// Dynamic's unit length (see above).
    static constexpr double kDynamicUnitSeconds = 0.1;
    /// A rank whose chunk is this many times the smallest is a batch rank (weighted).
    static constexpr std::int64_t kBatchChunkRatio = 8;

    WorkQueue(SchedPolicy policy, std::int64_t total, int ranks, std::int64_t chunk);
    /// Per-rank chunk sizes (a GPU rank wants thousands of replicas per unit, a CPU rank a few
    /// per thread); `static` uses them to step through each rank's block.
    WorkQueue(SchedPolicy policy, std::int64_t total, const std::vector<std::int64_t>& chunks);

    UnitSpan next(int rank, double throughput);
    std::int64_t remaining() const;
    SchedPolicy policy() const { return policy_; }

   private:
    std::int64_t min_unit(size_t rank) const;
    /// Seconds until the shared positions left run out with every rank at its recorded rate;
    /// 0 while some rank has not recorded one.
    double time_left(std::int64_t left) const;
    std::int64_t shared_unit(size_t rank, std::int64_t left) const;
    std::int64_t sized_for_worker(size_t rank, std::int64_t unit, std::int64_t left) const;

    SchedPolicy policy_;
    std::int64_t total_;
    int ranks_;
    std::vector<std::int64_t> chunk_;  // per rank
    std::int64_t cursor_ = 0;                 // shared policies
    std::vector<std::int64_t> block_cursor_;  // static: per-rank position
    std::vector<std::int64_t> block_end_;
    std::vector<double> throughput_;          // last known, per rank
    std::vector<std::int64_t> last_;          // size of the last unit handed to each rank
};

}  // namespace ef

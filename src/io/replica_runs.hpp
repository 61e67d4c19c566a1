// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace ef {

/**
 * Replica numbers as ascending runs [first, last): the fits a run still has to do. A new run's
 * list is one or two runs, not one number per replica: at 1e8 replicas the list of numbers
 * was 800 MB read back from the file's fill values and broadcast to every rank (2.0-2.4 s of
 * every rank's set-up on 4 x H100), where its runs are a few bytes.
 */
class ReplicaRuns {
   public:
    using Run = std::pair<std::int64_t, std::int64_t>;

    ReplicaRuns() = default;
    /// Adopts `runs` (ascending, non-overlapping, none empty).
    explicit ReplicaRuns(std::vector<Run> runs);

    /// Appends replica `r` (greater than every number in the list).
    void add(std::int64_t r);
    /// Appends the replicas [first, last) (all greater than every number in the list).
    void add(std::int64_t first, std::int64_t last);

    std::int64_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    const std::vector<Run>& runs() const { return runs_; }
    /// The replica numbers at positions [begin, end) of the list, in order.
    std::vector<std::int64_t> slice(std::int64_t begin, std::int64_t end) const;

   private:
    std::vector<Run> runs_;
    std::vector<std::int64_t> starts_;  ///< the list position of each run's first replica
    std::int64_t size_ = 0;
};

}  // namespace ef

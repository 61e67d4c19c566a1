// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <vector>

namespace ef {

/**
 * Which scan positions form each mini-batch of a reconstruction, and which rank computes which
 * (internal; the reconstruction's scheduler, beside the fit's WorkQueue).
 *
 * The scan (N positions in file order) is cut into S = batch size contiguous strata of
 * floor/ceil(N / S) positions. Each iteration shuffles every stratum (Fisher-Yates driven by a
 * hash of seed, iteration, stratum: a pure function, like the fits' Philox streams), and batch
 * t takes the t-th shuffled member of every stratum. So a mini-batch is a random draw spread
 * over the whole scan (PtyRAD's random grouping, stratified), it depends on (seed, iteration)
 * only, never on the number of ranks, and a rank owning a contiguous run of strata (a compact
 * object region) computes exactly its strata count per batch: shares are exact, and weighted
 * shares are whole strata.
 */
class BatchSchedule {
   public:
    BatchSchedule(std::int64_t positions, std::int64_t batch_size, std::uint64_t seed);

    std::int64_t strata() const { return strata_; }
    std::int64_t batches_per_iteration() const { return batches_; }
    std::int64_t stratum_begin(std::int64_t s) const { return s * positions_ / strata_; }
    std::int64_t stratum_size(std::int64_t s) const { return stratum_begin(s + 1) - stratum_begin(s); }

    /// Shuffles strata [s0, s1) for `iteration` (from 1); members() then answers for them.
    void start_iteration(int iteration, std::int64_t s0, std::int64_t s1);
    /// Scan indices of batch t within the strata of the last start_iteration(), in stratum order.
    std::vector<std::int64_t> members(std::int64_t t) const;

    /**
     * Contiguous strata ranges per rank, proportional to `weights` (largest remainders, every
     * rank at least one stratum while there are enough): boundaries, size ranks + 1.
     */
    static std::vector<std::int64_t> partition(std::int64_t strata, const std::vector<double>& weights);

   private:
    std::int64_t positions_, strata_, batches_;
    std::uint64_t seed_;
    std::int64_t s0_ = 0, s1_ = 0;
    std::vector<std::int64_t> order_;  // per stratum of [s0, s1): shuffled offsets, concatenated
};

}  // namespace ef

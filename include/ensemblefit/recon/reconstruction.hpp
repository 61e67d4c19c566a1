// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <vector>

#include <ensemblefit/comm/mpi_context.hpp>

namespace ef {

/// `ensemblefit reconstruct` options that are not config keys.
struct ReconRunOptions {
    std::string config_path;
    std::vector<std::string> overrides;  ///< "--section.key=value" tokens
    bool overwrite = false;
    bool dry_run = false;
    /**
     * `--debug.speeds W0,W1,...[/W0,W1,.../...]`: at the k-th rebalance point, the k-th list
     * (the last repeats) stands in for the ranks' measured speeds, so that tests can force
     * unequal shares (and their mid-run changes) on identical CPU ranks, deterministically.
     */
    std::string debug_speeds;
};

/**
 * One ptychographic reconstruction over all ranks of `ctx` (docs/reconstruction.md).
 *
 * Every rank holds the whole object and probe and a contiguous share of the scan (whole strata
 * of BatchSchedule, read by hyperslab). Each step every rank runs forward and backward on its
 * part of the global mini-batch, the object and probe gradients are summed with MPI_Allreduce
 * (accounted as `sync` for the wait at the barrier before it and `comm` for the transfer), and
 * every rank applies the same Adam update, so all ranks keep identical models. Shares follow
 * each rank's measured throughput (run.balance = throughput), so CPU and GPU ranks can work side
 * by side. A mini-batch depends on (seed, iteration) only, so 1 and N ranks follow the same
 * trajectory up to the order of floating-point sums. Rank 0 writes the output.
 * Throws ef::Error for bad input (identically on every rank).
 */
void run_reconstruct(const ReconRunOptions& options, const MpiContext& ctx);

}  // namespace ef

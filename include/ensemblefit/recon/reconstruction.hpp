// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <vector>

#include <ensemblefit/comm/mpi_context.hpp>
#include <ensemblefit/run/run_args.hpp>

namespace ef {

/// `ensemblefit reconstruct` options: the run layer's (config, overrides, --overwrite,
/// --dry-run, --resume from the output's last checkpoint) and its own.
struct ReconRunOptions : RunArgs {
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
 * of BatchSchedule, src/sched, read by hyperslab). Each step every rank runs forward and
 * backward on its part of the global mini-batch, the object and probe gradients are summed over
 * the ranks (MPI_Allreduce over host buffers, or on the GPUs: run.allreduce; the wait at the
 * barrier before it is `sync`, the sum `comm`), and every rank applies the same Adam update, so all ranks keep identical models. Shares follow
 * each rank's measured throughput (run.balance = throughput), so CPU and GPU ranks can work side
 * by side. A mini-batch depends on (seed, iteration) only, so 1 and N ranks follow the same
 * trajectory up to the order of floating-point sums. Rank 0 writes the output.
 * Throws ef::Error for bad input (identically on every rank).
 */
void run_reconstruct(const ReconRunOptions& options, const MpiContext& ctx);

}  // namespace ef

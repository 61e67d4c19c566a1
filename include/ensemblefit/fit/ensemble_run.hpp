// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <vector>

#include <ensemblefit/comm/mpi_context.hpp>
#include <ensemblefit/run/run_args.hpp>

namespace ef {

/// `ensemblefit fit` options that are not config keys.
struct FitRunOptions : RunArgs {
    std::string shard;  ///< "", "i/n" or "auto"
    double progress_interval = 5.0;  ///< seconds between plain progress lines (non-terminal)
    /// "RANK:FACTOR[,RANK:FACTOR]": those ranks' workers wait (FACTOR - 1) times their real
    /// compute time after each unit, to test load balancing and kills on any machine.
    std::string slowdown;
    /// `--debug.slow-writes S`: rank 0's results writer waits S seconds between a block's
    /// values and its status, so a test can kill a run in the middle of a write.
    double slow_writes = 0.0;
    /// `--debug.hold-creating S`: rank 0 waits S seconds after creating a new output under its
    /// temporary name and before renaming it, so a test can kill a run at that moment.
    double hold_creating = 0.0;
    /// `--debug.unit-sleep S`: every rank sleeps S seconds after each unit's fits (a unit of
    /// that length that holds no core) and reports no speed, so every unit keeps `fit.chunk`
    /// replicas: rank 0's dispatcher and writer under microsecond units (perf/dispatch.sh).
    double unit_sleep = 0.0;
    /// `--ranks N` with --dry-run: the bounds on rank 0 for N ranks rather than this launch's
    /// (0: this launch's).
    int bound_ranks = 0;
    /// A result file of the same problem on fewer ranks: adds computation scalability, global
    /// efficiency and speedup to the timing report.
    std::string baseline;
};

/// The factor `--debug.slowdown` gives `rank` (1 when not named).
double slowdown_factor(const std::string& spec, int rank);

/**
 * One ensemble fit over all ranks of `ctx`: every rank reads the config and data and builds
 * its worker; rank 0 owns the output file. Replica blocks are computed on every rank (rank 0
 * too) and written by rank 0 as they arrive. Throws ef::Error for bad input (identically on
 * every rank, so the caller can exit cleanly); a failure in the middle of the run aborts the
 * job after rank 0's file is flushed.
 */
void run_fit(const FitRunOptions& options, const MpiContext& ctx);

/// `ensemblefit merge`: joins shard files into one file equal to an unsharded run's.
void run_merge(const std::string& output, const std::vector<std::string>& inputs, bool overwrite);

/// i/n from "i/n" or, for "auto", from SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT.
void parse_shard(const std::string& text, int& index, int& count);

}  // namespace ef

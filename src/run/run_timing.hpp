// SPDX-License-Identifier: MIT
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <ensemblefit/comm/mpi_context.hpp>
#include <ensemblefit/report/timing_report.hpp>
#include <ensemblefit/sched/phase_timer.hpp>

#include "src/io/h5.hpp"
#include "src/report/kernel_roofline.hpp"

namespace ef {

/// A run's timing on rank 0: every rank's account, the POP metrics, the problem's column names.
struct GatheredTiming {
    std::vector<RankTiming> ranks;  ///< empty on other ranks
    PopMetrics metrics;
    TimingColumns columns;
};

/**
 * Collective: stops `timer` and gathers every rank's phases, wall time, counts and
 * `columns.extra.size()` problem columns (`mine.extra`) on rank 0, with the POP metrics over
 * them (pop_metrics()). The one place where a run's timing is gathered, for fits and
 * reconstructions alike.
 */
GatheredTiming gather_timing(const MpiContext& ctx, PhaseTimer& timer, RankTiming mine, const TimingColumns& columns);

/// Adds speedup, computation scalability and global efficiency against the run in `baseline`.
void apply_baseline(GatheredTiming& t, const std::string& baseline);

/**
 * Writes this run's timing twice: as /timing (one dataset per phase, wall, counts and columns;
 * placement and metrics as attributes; an earlier run's replaced) and as the next record
 * /timing/runs/<k> (the same layout plus the command line and the date), so that a file that
 * several runs worked on (--resume, merge) keeps every run's account. Returns the record's
 * group; the problem adds its own attributes to both.
 */
std::string write_timing(h5::File& f, const GatheredTiming& t, const std::vector<std::string>& placement);

/// The JSON sidecar (`extra_json_fields`: the problem's own fields, "  \"name\": value" lines).
void write_timing_json(const std::string& path, const GatheredTiming& t, const std::vector<std::string>& placement,
                       const std::string& extra_json_fields);

struct RunState;

/**
 * A problem's part of the end-of-run timing (RunProblem::timing_report): its counts and
 * columns, its worker's kernel tally, its rows of /timing/kernels and its own attributes and
 * lines. report_run_timing() does the rest, the same for every problem.
 */
struct TimingReport {
    RankTiming mine;        ///< this rank's counts and `columns.extra` values
    TimingColumns columns;  ///< the problem's names of the counts and extra columns
    const KernelTally* tally = nullptr;  ///< the worker's (null: none kept)
    bool gpu = false;                    ///< a GPU worker
    double device_transfers = 0;         ///< gather_device_seconds()'s `transfers` (seconds)
    bool single_precision = false;       ///< the GPU's ceilings for float work (gpu_ceilings)
    std::string trace_title;             ///< the --trace file's title
    std::string baseline;                ///< --baseline FILE: speedup and scalability against it
    h5::File* file = nullptr;  ///< rank 0: the open output; null: `path` is opened for /timing
    std::string path;          ///< the output, when `file` is null
    std::string json_path;     ///< the JSON sidecar ("" for none)
    /// Rank 0: the rows of /timing/kernels.
    std::function<std::vector<KernelRecord>(const GatheredTiming&, const std::vector<KernelSum>&, const Ceilings&)>
        kernels;
    /// Rank 0: the problem's attributes of /timing and of this run's record `record`.
    std::function<void(h5::File&, const std::string& record, const GatheredTiming&)> attributes;
    /// Rank 0: the problem's fields of the JSON sidecar.
    std::function<std::string()> json_fields;
    /// Rank 0: the timing table and the problem's lines (before the device split's).
    std::function<void(const GatheredTiming&)> print;
    /// Rank 0: lines after the device split's.
    std::function<void()> print_last;
};

/**
 * The end of every run (collective): stops the clock, gathers every rank's phases, counts and
 * kernels, writes --trace, and on rank 0 writes /timing and this run's record (with the
 * prediction, the kernels, the device split and the problem's attributes), the JSON sidecar,
 * and prints the table. The one place this sequence is written (RunSession calls it).
 */
void report_run_timing(RunState& state, const TimingReport& report);

}  // namespace ef

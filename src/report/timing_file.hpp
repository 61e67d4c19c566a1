// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <vector>

#include <ensemblefit/report/timing_report.hpp>

#include "src/io/h5.hpp"

namespace ef {

/// A run's /timing group read back: per-rank accounts and the placement rows.
struct RunTiming {
    std::string file;
    std::vector<RankTiming> ranks;
    std::vector<std::string> placement;  ///< "rank\thost\tworker\tthreads"
    std::string policy;
    PopMetrics metrics;
    TimingColumns columns;
    std::string command, date;  ///< of a run record (empty for a file from before records)
    /// Why this run's time is no measure of its cores (placement_core_warnings: ranks sharing
    /// cores, more threads than cores), "; "-joined over its records; empty when each rank had its own.
    std::string shared_cores;
    std::string config;  ///< the file's canonical_config (a fit), else its config attribute
    /// What `ensemblefit advise` predicted for the run (--predicted): 0 and empty when nothing.
    double predicted_wall = 0.0;     ///< the whole command
    double predicted_runtime = 0.0;  ///< what /timing measures: compare with metrics.runtime
    double predicted_efficiency = 0.0;
    std::string predicted_placement;
    bool predicted_matches = true;  ///< false: the file held no row for the run's placement
    /// The file's run records (/timing/runs/<k>) in order; the fields above are their sum
    /// when there are several (a resumed or merged file).
    std::vector<RunTiming> runs;
};

/// Throws ef::Error (exit code 3) naming the file when it has no /timing and no run records.
RunTiming read_run_timing(const std::string& path);
/// The groups that hold a file's run accounts, in order: its records /timing/runs/<k>, or
/// /timing alone for a file from before records.
std::vector<std::string> run_record_groups(const h5::File& f);
RunTiming read_run_timing(const h5::File& f);

/// "4 cpu" or "2 gpu + 6 cpu", from the placement rows.
std::string describe_workers(const std::vector<std::string>& placement);

}  // namespace ef

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
};

/// Throws ef::Error (exit code 3) naming the file when it has no /timing.
RunTiming read_run_timing(const std::string& path);
RunTiming read_run_timing(const h5::File& f);

/// "4 cpu" or "2 gpu + 6 cpu", from the placement rows.
std::string describe_workers(const std::vector<std::string>& placement);

}  // namespace ef

// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <vector>

#include <ensemblefit/comm/mpi_context.hpp>
#include <ensemblefit/report/timing_report.hpp>
#include <ensemblefit/sched/phase_timer.hpp>

#include "src/io/h5.hpp"

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

}  // namespace ef

// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ef {

/**
 * What rank 0 can serve: its dispatcher thread's busy time per work unit (answering the
 * request, receiving the result, handing it to the writer) and its results writer's time,
 * a cost per unit's block of rows (sort, hyperslab, flushes) plus the bytes at a rate. Measured
 * by `perf/dispatch.sh curves` (and the byte rate by a large run) on the machines `source`
 * names; a dry run sets a run's demand against them (dispatch_bound_lines). Constants, not a
 * calibration: the figures are a machine's, stated where they are printed.
 */
struct DispatchCapacity {
    double unit_seconds = 0.0;             ///< dispatcher busy seconds per unit
    double writer_block_seconds = 0.0;     ///< writer seconds per unit's block, beyond its bytes
    double writer_bytes_per_second = 0.0;  ///< writer bytes of /replicas per second
    std::string source;                    ///< where the figures were measured
    /// Rows per second of writing for units of `unit_items` rows of `row_bytes` bytes.
    double writer_rows_per_second(double unit_items, double row_bytes) const {
        return 1.0 / (writer_block_seconds / unit_items + row_bytes / writer_bytes_per_second);
    }
};

/// The figures measured on this tree (src/sched/dispatch_bound.cpp says how).
DispatchCapacity measured_dispatch_capacity();

/**
 * A run's demand on rank 0: `ranks` ranks fitting `items` replicas in units of `unit_items`,
 * each replica row `row_bytes` bytes; `item_seconds` a replica fit's time on one rank (< 0:
 * unknown, then the lines give the threshold instead); `min_unit_seconds` the WorkQueue's floor
 * on a unit's length once the ranks' speeds are known.
 */
struct DispatchDemand {
    int ranks = 1;
    std::int64_t items = 0;
    std::int64_t unit_items = 1;
    std::size_t row_bytes = 0;
    double item_seconds = -1.0;
    double min_unit_seconds = 0.0;
    std::string item_seconds_source;  ///< where item_seconds came from
};

/**
 * One line per bound on rank 0, each beginning "bound: ": the dispatcher (units/s needed
 * against units/s it answers) and the writer (rows/s and bytes/s needed against measured; the
 * bytes of the whole output and the least time one writer takes for them). A line ends in
 * "keeps up" or "SATURATED" (and what waits) when the fit's time is known, else names the
 * shortest fit time that keeps up.
 */
std::vector<std::string> dispatch_bound_lines(const DispatchDemand& demand, const DispatchCapacity& capacity);

}  // namespace ef

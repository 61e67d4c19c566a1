// SPDX-License-Identifier: MIT
#include "src/sched/dispatch_bound.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ef {

namespace {

std::string format(const char* fmt, double a) {
    char buf[64];
    std::snprintf(buf, sizeof buf, fmt, a);
    return buf;
}

/// 1.2e+05 style for rates, seconds as ms or us where shorter.
std::string rate(double v) { return format("%.3g", v); }
std::string seconds(double s) {
    if (s >= 1.0) return format("%.3g s", s);
    if (s >= 1e-3) return format("%.3g ms", 1e3 * s);
    return format("%.3g us", 1e6 * s);
}
std::string bytes(double b) {
    if (b >= 1e9) return format("%.3g GB", b / 1e9);
    if (b >= 1e6) return format("%.3g MB", b / 1e6);
    return format("%.3g kB", b / 1e3);
}
std::string percent(double f) { return format(f < 0.1 ? "%.2g %%" : "%.0f %%", 100.0 * f); }

}  // namespace

// unit_seconds and writer_block_seconds: the 16-core device (1 x H200 host, Intel Xeon, 16
// cores), 2026-11-29, tree ec918fc, `bash perf/dispatch.sh device`, sleep mode with 10 ms units
// of one replica at 512 ranks, the largest row that kept up (46,590 units/s of 50,360 asked):
// 3.6 us of the dispatcher thread per unit (2.8-7.0 over 16-512 ranks), the writer 5.4e6 one-row
// blocks per second (0.19 us each). Units of one row: the receive of a large result adds to it
// (docs/scale-model.md). writer_bytes_per_second: rank 0's writer on the 4 x H100 node, spot 1e8
// replicas, 6.87 GB in 3.1-3.4 s of writer time (perf/RESULTS.md, "Scaling on one node", 2026-11-27).
DispatchCapacity measured_dispatch_capacity() {
    DispatchCapacity c;
    c.unit_seconds = 3.6e-6;
    c.writer_block_seconds = 0.19e-6;
    c.writer_bytes_per_second = 2.0e9;
    c.source = "a 16-core H200 host's, 2026-11-29, and the H100 node's writer, docs/scale-model.md";
    return c;
}

std::vector<std::string> dispatch_bound_lines(const DispatchDemand& d, const DispatchCapacity& c) {
    std::vector<std::string> lines;
    const bool known = d.item_seconds > 0;
    const double ranks = std::max(1, d.ranks);
    const std::string from = " (rank 0's figures: " + c.source + ")";

    // Dispatcher: every unit is one request answered and one result received by rank 0's thread.
    // Once speeds are known the WorkQueue grows a unit to min_unit_seconds of the rank's work.
    const double unit_items = known ? std::max(static_cast<double>(d.unit_items), std::ceil(d.min_unit_seconds / d.item_seconds - 1e-9))
                                    : static_cast<double>(d.unit_items);
    const double unit_time = std::max(known ? unit_items * d.item_seconds : 0.0, d.min_unit_seconds);
    const double answers = 1.0 / c.unit_seconds;
    const double needed = unit_time > 0 ? ranks / unit_time : INFINITY;
    const double busy = needed / answers;
    std::string l = "bound: dispatcher: " + std::to_string(d.ranks) + " ranks need " + (known ? "" : "at most ") +
                    rate(needed) + " units/s (units of " + rate(unit_items) + " replica" + (unit_items == 1 ? "" : "s") + ", " +
                    (known ? seconds(unit_time) + " each" : "at least " + seconds(unit_time) + " once speeds are known") +
                    "); rank 0 answers " + rate(answers) + " units/s (" + seconds(c.unit_seconds) + " per unit): " +
                    (known ? "" : "at most ") + percent(busy) + " busy, ";
    if (busy <= 1.0)
        l += "keeps up";
    else
        l += "SATURATED: ranks wait for units; " + std::to_string(std::llround(answers * unit_time)) +
             " ranks keep it busy";
    lines.push_back(l + from);

    // Writer: every replica is one row through rank 0's writer thread, a unit's rows one block.
    const double row_bytes = static_cast<double>(d.row_bytes);
    const double row_rate = c.writer_rows_per_second(unit_items, row_bytes);
    const double total_bytes = static_cast<double>(d.items) * row_bytes;
    const double write_time = static_cast<double>(d.items) / row_rate;
    l = "bound: writer: " + std::to_string(d.items) + " rows of " + std::to_string(d.row_bytes) + " bytes = " +
        bytes(total_bytes) + " through rank 0's writer at " + rate(row_rate) + " rows/s (" +
        bytes(row_rate * row_bytes) + "/s): at least " + seconds(write_time) + "; ";
    if (known) {
        const double rows_needed = ranks / d.item_seconds;
        const double compute_time = static_cast<double>(d.items) * d.item_seconds / ranks;
        l += std::to_string(d.ranks) + " ranks make " + rate(rows_needed) + " rows/s (" +
             bytes(rows_needed * row_bytes) + "/s; a fit " + seconds(d.item_seconds) + " per rank, " +
             d.item_seconds_source + "): " + percent(rows_needed / row_rate) + " busy, ";
        l += rows_needed <= row_rate ? std::string("keeps up")
                                     : "SATURATED: results wait with their ranks, the fits take " +
                                           seconds(compute_time) + " but the output " + seconds(write_time);
    } else {
        l += "keeps up while a replica fit takes at least " + seconds(ranks / row_rate) +
             " per rank (fit time unknown: --baseline F.h5 of a run of this problem gives it)";
    }
    lines.push_back(l + from);
    return lines;
}

}  // namespace ef

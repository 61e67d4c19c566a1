// SPDX-License-Identifier: MIT
#include "src/run/run_timing.hpp"

#include <cstdio>

#include "src/io/output_file.hpp"
#include "src/report/timing_file.hpp"
#include "src/run/environment.hpp"
#include "src/run/predicted_timing.hpp"
#include "src/run/run_state.hpp"
#include "src/run/trace.hpp"

namespace ef {

namespace {

constexpr size_t kCounts = 5;  // wall, items, units, calls, bytes after the phases

/// One rank's account as one row of doubles (phases, wall, counts, the problem's columns).
std::vector<double> to_row(const PhaseTimer& timer, const RankTiming& mine) {
    std::vector<double> row(timer.all().begin(), timer.all().end());
    row.push_back(timer.wall());
    row.push_back(static_cast<double>(mine.replicas));
    row.push_back(static_cast<double>(mine.units));
    row.push_back(static_cast<double>(mine.mpi_calls));
    row.push_back(static_cast<double>(mine.mpi_bytes));
    row.insert(row.end(), mine.extra.begin(), mine.extra.end());
    return row;
}

RankTiming from_row(const double* row, size_t extra) {
    constexpr size_t P = static_cast<size_t>(kPhaseCount);
    RankTiming t;
    for (size_t p = 0; p < P; ++p) t.phase[p] = row[p];
    t.wall = row[P];
    t.replicas = static_cast<std::int64_t>(row[P + 1]);
    t.units = static_cast<std::int64_t>(row[P + 2]);
    t.mpi_calls = static_cast<std::int64_t>(row[P + 3]);
    t.mpi_bytes = static_cast<std::int64_t>(row[P + 4]);
    t.extra.assign(row + P + kCounts, row + P + kCounts + extra);
    return t;
}

template <class T>
void replace(h5::File& f, const std::string& name, const std::vector<T>& v) {
    if (f.exists(name)) H5Ldelete(f.id(), name.c_str(), H5P_DEFAULT);
    f.write(name, v);
}

/// One column over the ranks.
template <class T, class Get>
std::vector<T> column(const std::vector<RankTiming>& ranks, Get get) {
    std::vector<T> v;
    v.reserve(ranks.size());
    for (const RankTiming& r : ranks) v.push_back(static_cast<T>(get(r)));
    return v;
}

}  // namespace

GatheredTiming gather_timing(const MpiContext& ctx, PhaseTimer& timer, RankTiming mine, const TimingColumns& columns) {
    timer.stop();
    mine.extra.resize(columns.extra.size(), 0.0);
    const std::vector<double> row = to_row(timer, mine);
    const size_t W = row.size();
    std::vector<double> all(ctx.is_root() ? W * static_cast<size_t>(ctx.size()) : 0);
    EF_MPI_CHECK(MPI_Gather(row.data(), static_cast<int>(W), MPI_DOUBLE, all.data(), static_cast<int>(W), MPI_DOUBLE,
                            0, ctx.world()));
    GatheredTiming t;
    t.columns = columns;
    if (!ctx.is_root()) return t;
    for (size_t r = 0; r < static_cast<size_t>(ctx.size()); ++r)
        t.ranks.push_back(from_row(all.data() + r * W, columns.extra.size()));
    t.metrics = pop_metrics(t.ranks);
    return t;
}

void apply_baseline(GatheredTiming& t, const std::string& baseline) {
    const RunTiming b = read_run_timing(baseline);
    apply_baseline(t.metrics, t.ranks, b.ranks, b.metrics.runtime);
}

namespace {

/// One run's account under `group` (/timing, or a record /timing/runs/<k>).
void write_timing_at(h5::File& f, const std::string& group, const GatheredTiming& t,
                     const std::vector<std::string>& placement) {
    const std::vector<RankTiming>& ranks = t.ranks;
    const TimingColumns& c = t.columns;
    const std::string g = group + "/";
    for (int p = 0; p < kPhaseCount; ++p)
        replace(f, g + to_string(static_cast<Phase>(p)),
                column<double>(ranks, [p](const RankTiming& r) { return r.phase[static_cast<size_t>(p)]; }));
    replace(f, g + "wall", column<double>(ranks, [](const RankTiming& r) { return r.wall; }));
    replace(f, g + c.items, column<std::int64_t>(ranks, [](const RankTiming& r) { return r.replicas; }));
    replace(f, g + c.units, column<std::int64_t>(ranks, [](const RankTiming& r) { return r.units; }));
    replace(f, g + c.calls, column<std::int64_t>(ranks, [](const RankTiming& r) { return r.mpi_calls; }));
    replace(f, g + c.bytes, column<std::int64_t>(ranks, [](const RankTiming& r) { return r.mpi_bytes; }));
    for (size_t k = 0; k < c.extra.size(); ++k)
        replace(f, g + c.extra[k], column<double>(ranks, [k](const RankTiming& r) { return r.extra[k]; }));
    std::vector<std::string> names{c.items, c.units, c.calls, c.bytes};
    names.insert(names.end(), c.extra.begin(), c.extra.end());
    const PopMetrics& m = t.metrics;
    f.set_attr(group, "columns", names);
    f.set_attr(group, "ranks", static_cast<std::int64_t>(ranks.size()));
    f.set_attr(group, "placement", placement);
    f.set_attr(group, "runtime_seconds", m.runtime);
    f.set_attr(group, "load_balance", m.load_balance);
    f.set_attr(group, "communication_efficiency", m.communication_efficiency);
    f.set_attr(group, "parallel_efficiency", m.parallel_efficiency);
    f.set_attr(group, "transfer_efficiency", m.transfer_efficiency);
    f.set_attr(group, "serialization_efficiency", m.serialization_efficiency);
    if (m.speedup > 0) {
        f.set_attr(group, "speedup", m.speedup);
        f.set_attr(group, "computation_scalability", m.computation_scalability);
        f.set_attr(group, "global_efficiency", m.global_efficiency);
    }
}

}  // namespace

std::string write_timing(h5::File& f, const GatheredTiming& t, const std::vector<std::string>& placement) {
    write_timing_at(f, "/timing", t, placement);
    const std::string record = "/timing/runs/" + std::to_string(f.exists("/timing/runs") ? f.list("/timing/runs").size() : 0);
    write_timing_at(f, record, t, placement);
    f.set_attr(record, "command", command_line());
    f.set_attr(record, "date", utc_timestamp());
    return record;
}

void write_timing_json(const std::string& path, const GatheredTiming& t, const std::vector<std::string>& placement,
                       const std::string& extra_json_fields) {
    // Checked with the output (a companion: RunProblem::output_target); written beside it and
    // renamed over it when complete.
    write_output_file(path, "timing sidecar", timing_json(t.ranks, t.metrics, placement, extra_json_fields, t.columns));
}

}  // namespace ef

namespace ef {

namespace {

/// Rank 0: /timing and this run's record in `f`.
void write_run_timing(h5::File& f, RunState& state, const TimingReport& r, const GatheredTiming& t,
                      const std::vector<KernelSum>& sums, const Ceilings& ceilings, const DeviceSplit& split) {
    const std::string record = write_timing(f, t, state.placement);
    if (r.attributes) r.attributes(f, record, t);
    if (!state.args.predicted.empty()) store_prediction(f, {"/timing", record}, state.args.predicted, state.placement);
    write_kernels(f, {"/timing", record}, r.kernels ? r.kernels(t, sums, ceilings) : std::vector<KernelRecord>{});
    if (split.gpu_ranks > 0) write_device_split(f, {"/timing", record}, split);
    f.flush();
}

}  // namespace

void report_run_timing(RunState& state, const TimingReport& r) {
    const MpiContext& ctx = state.ctx;
    GatheredTiming t = gather_timing(ctx, state.timer, r.mine, r.columns);
    const std::vector<KernelSum> sums = gather_kernel_sums(ctx, r.tally, r.gpu);
    const DeviceTimes device_seconds = gather_device_seconds(ctx, r.tally, r.gpu, r.device_transfers);
    const Ceilings ceilings = gpu_ceilings(ctx, r.gpu ? state.device.device : -1, r.single_precision);
    if (!state.args.trace.empty()) {
        if (r.tally) add_device_intervals(state.timeline, *r.tally);
        write_trace(ctx, state.timeline, state.args.trace, state.placement, r.trace_title);
    }
    if (!ctx.is_root()) return;
    if (!r.baseline.empty()) apply_baseline(t, r.baseline);
    const DeviceSplit split = device_split(t.ranks, device_seconds, t.metrics.runtime, t.metrics.parallel_efficiency);
    if (r.file) {
        write_run_timing(*r.file, state, r, t, sums, ceilings, split);
    } else {
        h5::File f = h5::File::open_write(r.path);
        write_run_timing(f, state, r, t, sums, ceilings, split);
    }
    if (!r.json_path.empty()) write_timing_json(r.json_path, t, state.placement, r.json_fields ? r.json_fields() : "");
    if (r.print) r.print(t);
    if (split.gpu_ranks > 0) std::printf("%s", format_device_split(split).c_str());
    if (r.print_last) r.print_last();
}

}  // namespace ef

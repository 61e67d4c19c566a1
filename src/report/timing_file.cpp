// SPDX-License-Identifier: MIT
#include "src/report/timing_file.hpp"

#include <algorithm>
#include <map>
#include <sstream>

#include <ensemblefit/core/error.hpp>

#include "src/run/placement.hpp"

namespace ef {

namespace {

/// One run's account from `group` (/timing or a record /timing/runs/<k>).
RunTiming read_timing_at(const h5::File& f, const std::string& group) {
    RunTiming t;
    t.file = f.path();
    const auto wall = f.read_double(group + "/wall");
    t.ranks.resize(wall.size());
    for (int p = 0; p < kPhaseCount; ++p) {
        const auto col = f.read_double(group + "/" + to_string(static_cast<Phase>(p)));
        for (size_t r = 0; r < wall.size() && r < col.size(); ++r) t.ranks[r].phase[static_cast<size_t>(p)] = col[r];
    }
    for (size_t r = 0; r < wall.size(); ++r) t.ranks[r].wall = wall[r];
    // The counts under the names the problem gave them (TimingColumns; a fit's by default).
    if (f.has_attr(group, "columns")) {
        const std::vector<std::string> names = f.attr_strings(group, "columns");
        if (names.size() >= 4) {
            t.columns.items = names[0];
            t.columns.units = names[1];
            t.columns.calls = names[2];
            t.columns.bytes = names[3];
            t.columns.extra.assign(names.begin() + 4, names.end());
        }
    }
    auto ints = [&](const std::string& name, std::int64_t RankTiming::*field) {
        if (!f.exists(group + "/" + name)) return;
        const auto v = f.read_int64(group + "/" + name);
        for (size_t r = 0; r < v.size() && r < t.ranks.size(); ++r) t.ranks[r].*field = v[r];
    };
    ints(t.columns.items, &RankTiming::replicas);
    ints(t.columns.units, &RankTiming::units);
    ints(t.columns.calls, &RankTiming::mpi_calls);
    ints(t.columns.bytes, &RankTiming::mpi_bytes);
    for (const std::string& name : t.columns.extra) {
        const auto v = f.exists(group + "/" + name) ? f.read_double(group + "/" + name) : std::vector<double>();
        for (size_t r = 0; r < t.ranks.size(); ++r) t.ranks[r].extra.push_back(r < v.size() ? v[r] : 0.0);
    }
    if (f.has_attr(group, "placement")) t.placement = f.attr_strings(group, "placement");
    for (const std::string& w : placement_core_warnings(t.placement))
        t.shared_cores += (t.shared_cores.empty() ? "" : "; ") + w;
    if (f.has_attr(group, "policy")) t.policy = f.attr_string(group, "policy");
    if (f.has_attr(group, "command")) t.command = f.attr_string(group, "command");
    if (f.has_attr(group, "date")) t.date = f.attr_string(group, "date");
    if (f.has_attr(group, "predicted_wall_seconds")) {
        t.predicted_wall = f.attr_double(group, "predicted_wall_seconds");
        t.predicted_runtime = f.attr_double(group, "predicted_runtime_seconds");
        t.predicted_efficiency = f.attr_double(group, "predicted_parallel_efficiency");
        t.predicted_placement = f.attr_string(group, "predicted_placement");
        t.predicted_matches = f.attr_int64(group, "predicted_placement_matches") != 0;
    }
    t.metrics = pop_metrics(t.ranks);
    return t;
}

/// The sum of several runs' accounts: per rank index, every phase, the wall time and the counts
/// add up; the runtime is the sum of the runs' runtimes. The POP metrics over the sums are
/// those of one run that did all the work, which is what a file's total means.
RunTiming sum_runs(const std::vector<RunTiming>& runs) {
    RunTiming total = runs.back();
    total.ranks.clear();
    double runtime = 0;
    for (const RunTiming& r : runs) {
        if (r.ranks.size() > total.ranks.size()) total.ranks.resize(r.ranks.size());
        for (size_t k = 0; k < r.ranks.size(); ++k) {
            RankTiming& a = total.ranks[k];
            const RankTiming& b = r.ranks[k];
            for (size_t p = 0; p < a.phase.size(); ++p) a.phase[p] += b.phase[p];
            a.wall += b.wall;
            a.replicas += b.replicas;
            a.units += b.units;
            a.mpi_calls += b.mpi_calls;
            a.mpi_bytes += b.mpi_bytes;
            a.extra.resize(std::max(a.extra.size(), b.extra.size()), 0.0);
            for (size_t e = 0; e < b.extra.size(); ++e) a.extra[e] += b.extra[e];
        }
        runtime += r.metrics.runtime;
    }
    total.metrics = pop_metrics(total.ranks);
    total.metrics.runtime = runtime;
    return total;
}

}  // namespace

std::vector<std::string> run_record_groups(const h5::File& f) {
    std::vector<std::string> names = f.exists("/timing/runs") ? f.list("/timing/runs") : std::vector<std::string>();
    std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
        return a.size() != b.size() ? a.size() < b.size() : a < b;  // records are numbered 0, 1, ...
    });
    std::vector<std::string> groups;
    for (const std::string& k : names) groups.push_back("/timing/runs/" + k);
    if (groups.empty() && f.exists("/timing/wall")) groups.push_back("/timing");
    return groups;
}

RunTiming read_run_timing(const h5::File& f) {
    std::vector<RunTiming> runs;
    for (const std::string& g : run_record_groups(f)) runs.push_back(read_timing_at(f, g));
    if (runs.empty()) throw data_error(f.path() + ": no /timing (not a finished ensemblefit run?)");
    RunTiming t = runs.size() == 1 ? runs.front() : sum_runs(runs);
    t.shared_cores.clear();  // any record's (a resumed file's first run may have shared cores)
    for (const RunTiming& r : runs)
        if (!r.shared_cores.empty() && t.shared_cores.find(r.shared_cores) == std::string::npos)
            t.shared_cores += (t.shared_cores.empty() ? "" : "; ") + r.shared_cores;
    for (const char* name : {"canonical_config", "config"})
        if (t.config.empty() && f.has_attr("/", name)) t.config = f.attr_string("/", name);
    t.runs = runs;
    return t;
}

RunTiming read_run_timing(const std::string& path) {
    return read_run_timing(h5::File::open_read(path));
}

std::string describe_workers(const std::vector<std::string>& placement) {
    std::map<std::string, int> kinds;
    for (const auto& row : placement) {
        std::stringstream ss(row);
        std::string rank, host, worker;
        std::getline(ss, rank, '\t');
        std::getline(ss, host, '\t');
        std::getline(ss, worker, '\t');
        kinds[worker.substr(0, worker.find_first_of(" ,:"))] += 1;  // "gpu 0: <name>" -> gpu
    }
    std::string out;
    for (const auto& [k, n] : kinds) out += (out.empty() ? "" : " + ") + std::to_string(n) + " " + k;
    return out.empty() ? "?" : out;
}

}  // namespace ef

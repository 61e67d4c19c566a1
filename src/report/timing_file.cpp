// SPDX-License-Identifier: MIT
#include "src/report/timing_file.hpp"

#include <map>
#include <sstream>

#include <ensemblefit/core/error.hpp>

namespace ef {

RunTiming read_run_timing(const h5::File& f) {
    if (!f.exists("/timing/wall")) throw data_error(f.path() + ": no /timing (not a finished ensemblefit run?)");
    RunTiming t;
    t.file = f.path();
    const auto wall = f.read_double("/timing/wall");
    t.ranks.resize(wall.size());
    for (int p = 0; p < kPhaseCount; ++p) {
        const auto col = f.read_double(std::string("/timing/") + to_string(static_cast<Phase>(p)));
        for (size_t r = 0; r < wall.size() && r < col.size(); ++r) t.ranks[r].phase[static_cast<size_t>(p)] = col[r];
    }
    for (size_t r = 0; r < wall.size(); ++r) t.ranks[r].wall = wall[r];
    // The counts under the names the problem gave them (TimingColumns; a fit's by default).
    if (f.has_attr("/timing", "columns")) {
        const std::vector<std::string> names = f.attr_strings("/timing", "columns");
        if (names.size() >= 4) {
            t.columns.items = names[0];
            t.columns.units = names[1];
            t.columns.calls = names[2];
            t.columns.bytes = names[3];
            t.columns.extra.assign(names.begin() + 4, names.end());
        }
    }
    auto ints = [&](const std::string& name, std::int64_t RankTiming::*field) {
        if (!f.exists("/timing/" + name)) return;
        const auto v = f.read_int64("/timing/" + name);
        for (size_t r = 0; r < v.size() && r < t.ranks.size(); ++r) t.ranks[r].*field = v[r];
    };
    ints(t.columns.items, &RankTiming::replicas);
    ints(t.columns.units, &RankTiming::units);
    ints(t.columns.calls, &RankTiming::mpi_calls);
    ints(t.columns.bytes, &RankTiming::mpi_bytes);
    for (const std::string& name : t.columns.extra) {
        const auto v = f.exists("/timing/" + name) ? f.read_double("/timing/" + name) : std::vector<double>();
        for (size_t r = 0; r < t.ranks.size(); ++r) t.ranks[r].extra.push_back(r < v.size() ? v[r] : 0.0);
    }
    if (f.has_attr("/timing", "placement")) t.placement = f.attr_strings("/timing", "placement");
    if (f.has_attr("/timing", "policy")) t.policy = f.attr_string("/timing", "policy");
    t.metrics = pop_metrics(t.ranks);
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
        kinds[worker.substr(0, worker.find(','))] += 1;
    }
    std::string out;
    for (const auto& [k, n] : kinds) out += (out.empty() ? "" : " + ") + std::to_string(n) + " " + k;
    return out.empty() ? "?" : out;
}

}  // namespace ef

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
    auto ints = [&](const char* name, std::int64_t RankTiming::*field) {
        if (!f.exists(name)) return;
        const auto v = f.read_int64(name);
        for (size_t r = 0; r < v.size() && r < t.ranks.size(); ++r) t.ranks[r].*field = v[r];
    };
    ints("/timing/replicas", &RankTiming::replicas);
    ints("/timing/units", &RankTiming::units);
    ints("/timing/mpi_calls", &RankTiming::mpi_calls);
    ints("/timing/mpi_bytes", &RankTiming::mpi_bytes);
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

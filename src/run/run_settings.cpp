// SPDX-License-Identifier: MIT
#include <ensemblefit/run/run_settings.hpp>

#include <algorithm>
#include <sstream>

#include <ensemblefit/core/error.hpp>

#include "src/config/ini_scan.hpp"
#include "src/core/text.hpp"

namespace ef {

const std::string& RunSettings::workers_of(int rank) const {
    return workers[std::min(static_cast<size_t>(std::max(rank, 0)), workers.size() - 1)];
}

std::string RunSettings::workers_text() const {
    std::string text;
    for (const auto& w : workers) text += (text.empty() ? "" : ",") + w;
    return text;
}

namespace {

std::vector<std::string> read_workers(const SettingsSource& s) {
    std::vector<std::string> workers;
    std::stringstream ss(s.get("run.workers"));
    std::string item;
    while (std::getline(ss, item, ',')) {
        item = trim(item);
        if (item != "auto" && item != "cpu" && item != "gpu")
            throw usage_error(s.where("run.workers") + ": unknown worker kind '" + excerpt(item) +
                              "' (allowed: auto, cpu, gpu, or a comma-separated list of them)");
        workers.push_back(item);
    }
    if (workers.empty()) throw usage_error(s.where("run.workers") + ": empty");
    return workers;
}

std::string read_bind(const SettingsSource& s) {
    const std::string value = trim(s.get("run.bind"));
    if (value == "auto" || value == "none" || value == "cores") return value;
    throw usage_error(s.where("run.bind") + ": unknown binding '" + excerpt(value) + "' (allowed: auto, none, cores)");
}

double read_heartbeat(const SettingsSource& s) {
    const std::string text = trim(s.get("run.heartbeat_timeout"));
    const double t = ini::to_real(text, s.where("run.heartbeat_timeout"));
    if (!(t >= 0) || t > 1e6)
        throw usage_error(s.where("run.heartbeat_timeout") + ": must be seconds in 0..1e6 (0 = never), got '" +
                          excerpt(text) + "'");
    return t;
}

}  // namespace

RunSettings parse_run_settings(const SettingsSource& source) {
    RunSettings run;
    run.workers = read_workers(source);
    run.threads = static_cast<int>(ini::to_integer(trim(source.get("run.threads")), source.where("run.threads"), 0, 4096));
    run.bind = read_bind(source);
    run.heartbeat_timeout = read_heartbeat(source);
    return run;
}

}  // namespace ef

// SPDX-License-Identifier: MIT
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace ef {

/**
 * The `[run]` keys every run command shares (fit and reconstruct): which worker each rank runs,
 * its threads, how its cores are bound, and how long a silent rank is waited for. Read once, by
 * parse_run_settings() (src/run/run_settings.cpp), from either config; each problem reads only
 * its own keys beside them (Ginkgo's common_solver_parse: one parse of the shared part).
 */
struct RunSettings {
    /// auto | cpu | gpu per rank, the last repeating (one entry: every rank alike).
    std::vector<std::string> workers{"auto"};
    int threads = 0;  ///< 0 = automatic (SLURM_CPUS_PER_TASK, OMP_NUM_THREADS, cores / local ranks)
    std::string bind = "auto";  ///< auto | none | cores (src/run/placement.hpp, apply_binding)
    double heartbeat_timeout = 300;  ///< seconds of silence before a rank is reported; 0 = off

    /// The worker kind rank `rank` asked for (the list's last entry for the ranks beyond it).
    const std::string& workers_of(int rank) const;
    /// The list as written in a resolved config: "auto", "gpu,cpu,cpu".
    std::string workers_text() const;
};

/// Where parse_run_settings() reads a config's values: `get` the value of a key (trimmed, its
/// default when not set), `where` the place it came from ("FILE:LINE: key" or "--key").
struct SettingsSource {
    std::function<std::string(const std::string& key)> get;
    std::function<std::string(const std::string& key)> where;
};

/**
 * Reads run.workers, run.threads, run.bind and run.heartbeat_timeout. The one rule for each:
 * workers a comma-separated list of auto | cpu | gpu; threads an integer in 0..4096; bind one
 * of auto | none | cores; heartbeat_timeout seconds in 0..1e6. Throws usage_error naming the
 * source's `where` of the key and the allowed values.
 */
RunSettings parse_run_settings(const SettingsSource& source);

}  // namespace ef

// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <vector>

namespace ef {

/// The command-line options every run command (fit, reconstruct) shares.
struct RunArgs {
    std::string config_path;
    std::vector<std::string> overrides;  ///< "--section.key=value" tokens
    bool overwrite = false;              ///< replace an existing output
    bool resume = false;                 ///< finish an existing output
    bool dry_run = false;                ///< check everything, compute and write nothing
    std::string predicted;               ///< `ensemblefit advise -o` file: stored beside /timing
    std::string trace;                   ///< --trace FILE.json: every rank's timeline (src/run/trace.hpp)
};

}  // namespace ef

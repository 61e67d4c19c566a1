// SPDX-License-Identifier: MIT
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <ensemblefit/run/run_args.hpp>

namespace ef {

/// One option of a command beside the shared ones: `--name VALUE`, `--name=VALUE` or a flag.
struct ArgOption {
    std::string name;  ///< with the dashes: "--shard"
    bool takes_value = true;
    std::function<void(const std::string& value)> apply;  ///< gets "" for a flag
};

/**
 * Parses a run command's arguments: one positional config file, `--overwrite`, `--dry-run`,
 * `--resume` (where `resumable`), the command's own `options`, and `--section.key VALUE` or
 * `--section.key=VALUE` config overrides. Returns false when -h/--help was given (the caller
 * prints its help). Throws usage_error naming the command and the offending argument.
 */
bool parse_run_args(const std::string& command, const std::vector<std::string>& args, bool resumable,
                    const std::vector<ArgOption>& options, RunArgs& out);

/// A finite number from a command-line value; usage_error naming `what` otherwise.
double parse_number_arg(const std::string& what, const std::string& text);

}  // namespace ef

// SPDX-License-Identifier: MIT
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include <ensemblefit/comm/mpi_context.hpp>
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

/**
 * For the commands that read result files (merge, report, summary, predict): parses `args`
 * against `desc` and `positional` into `vm`. Returns false when -h/--help was given (rank 0 has
 * printed `desc`); a parse error is a usage_error prefixed with `command`.
 */
bool parse_program_options(const std::string& command, const std::vector<std::string>& args,
                           const boost::program_options::options_description& desc,
                           const boost::program_options::positional_options_description& positional,
                           boost::program_options::variables_map& vm, const MpiContext& ctx);

/// A finite number from a command-line value; usage_error naming `what` otherwise.
double parse_number_arg(const std::string& what, const std::string& text);

}  // namespace ef

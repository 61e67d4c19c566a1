// SPDX-License-Identifier: MIT
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <ensemblefit/comm/mpi_context.hpp>

namespace ef {

/// A subcommand: gets the arguments after its name, returns the exit code (or throws ef::Error).
using CommandFn = std::function<int(const std::vector<std::string>& args, const MpiContext& ctx)>;

/**
 * Subcommands beyond fit and merge register themselves from their own file in src/cli/:
 *
 *     static const ef::CommandRegistrar reg("report", "tables over runs", &cmd_report);
 *
 * Names with a space ("simulate dis") are sub-subcommands: `ensemblefit simulate dis ...`.
 * This keeps main.cpp free of every later command.
 */
struct CommandRegistrar {
    CommandRegistrar(const std::string& name, const std::string& summary, CommandFn fn);
};

/// Runs a registered command; false if `cmd` (with args[0] for two-word names) is unknown.
bool run_extra_command(const std::string& cmd, const std::vector<std::string>& args,
                       const MpiContext& ctx, int& code);

/// "  name   summary" lines for the usage text.
std::string extra_command_help();

/// `ensemblefit job-check SCRIPT ...`, which main() runs before MPI_Init: a job script calls it
/// beside other jobs' processes, and concurrent MPI singletons race on Open MPI's session folder
/// (/tmp/ompi.HOST.UID/jf.0: "A call to mkdir was unable to create the desired directory").
int run_job_check_without_mpi(const std::vector<std::string>& args);

}  // namespace ef

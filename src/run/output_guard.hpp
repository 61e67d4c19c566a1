// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <vector>

#include <ensemblefit/comm/mpi_context.hpp>

#include "src/io/output_file.hpp"
#include "src/run/run_args.hpp"

namespace ef {

/// What a run does with its output path.
enum class OutputAction { create, replace, resume };

/// A file a run writes beside its output (the --trace file, the JSON timing sidecar, previews):
/// checked with the output, by the same rules (src/io/output_file.hpp).
struct CompanionOutput {
    std::string path;
    std::string where;  ///< the option or key that names it ("--trace")
};

/**
 * The output rules every run command shares, checked before any work (docs/architecture.md,
 * "Output safety"; the rules of one file are check_output_file's, src/io/output_file.hpp):
 * - an output that is the same file as one of `inputs` (config, data, plugin, merge shards;
 *   compared by device and inode, so symlinks, `../` and hard links are caught) is refused
 *   whatever the flags;
 * - one writer per output: rank 0 takes the output's lock (lock_output) and keeps it until the
 *   process ends, so a second run on the same output is refused while this one is alive;
 * - an existing file is refused unless `--overwrite` (replace) or, for a `resumable` command,
 *   `--resume` (finish it; it must be an HDF5 file); a folder is never an output; the folder,
 *   and an existing file, must be writable;
 * - each of `companions` (and `args.trace`) likewise: never an input nor the output itself,
 *   an existing one replaced only under `--overwrite` or `--resume`.
 * Decided on rank 0 and agreed through collective(), so every rank ends with the same error.
 * `where` names the config key ("file:line: output.file"). Returns the same action on every rank.
 */
OutputAction check_output(const MpiContext& ctx, const std::string& path, const std::string& where,
                          const RunArgs& args, bool resumable, const std::vector<std::string>& inputs = {},
                          const std::vector<CompanionOutput>& companions = {});

/**
 * The rules of check_output() on one process, as rank 0 applies them (and the unit tests):
 * refuses an input, a folder, a place it cannot write and an existing file without
 * `--overwrite` or (`resumable`) `--resume`; takes the output's lock. Returns what the run does.
 */
OutputAction decide_output(const std::string& path, const std::string& where, const RunArgs& args, bool resumable,
                           const std::vector<std::string>& inputs,
                           const std::vector<CompanionOutput>& companions = {});

/**
 * The same rules for a command that writes from one process (merge): refuses an output that is
 * an input, takes the lock, and applies the exists/--overwrite rule. Returns create or replace.
 */
OutputAction check_serial_output(const std::string& path, const std::string& where, bool overwrite,
                                 const std::vector<std::string>& inputs);

}  // namespace ef

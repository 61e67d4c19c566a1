// SPDX-License-Identifier: MIT
#pragma once

#include <string>

#include <ensemblefit/comm/mpi_context.hpp>

#include "src/run/run_args.hpp"

namespace ef {

/// What a run does with its output path.
enum class OutputAction { create, replace, resume };

/**
 * The output rules every run command shares, checked before any work: an existing file is
 * refused unless `--overwrite` (replace) or, for a `resumable` command, `--resume` (finish it);
 * the folder, and an existing
 * file, must be writable. Decided on rank 0 and agreed through collective(), so every rank ends
 * with the same error. `where` names the config key ("file:line: output.file"). Returns the same
 * action on every rank.
 */
OutputAction check_output(const MpiContext& ctx, const std::string& path, const std::string& where,
                          const RunArgs& args, bool resumable);

bool file_exists(const std::string& path);

}  // namespace ef

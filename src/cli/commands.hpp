// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <vector>

#include <ensemblefit/comm/mpi_context.hpp>

namespace ef {

/// Subcommands beyond fit and merge (simulate, report, ...). Returns false for an unknown name.
bool run_extra_command(const std::string& cmd, const std::vector<std::string>& args,
                       const MpiContext& ctx, int& code);

}  // namespace ef

// SPDX-License-Identifier: MIT
#include "src/cli/commands.hpp"

namespace ef {

bool run_extra_command(const std::string&, const std::vector<std::string>&, const MpiContext&, int&) {
    return false;
}

}  // namespace ef

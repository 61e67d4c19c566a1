// SPDX-License-Identifier: MIT
#include <map>

#include "src/cli/commands.hpp"

namespace ef {
namespace {

struct Entry {
    std::string summary;
    CommandFn fn;
};

std::map<std::string, Entry>& registry() {
    static std::map<std::string, Entry> r;  // function-local: safe during static initialisation
    return r;
}

}  // namespace

CommandRegistrar::CommandRegistrar(const std::string& name, const std::string& summary, CommandFn fn) {
    registry()[name] = Entry{summary, std::move(fn)};
}

bool run_extra_command(const std::string& cmd, const std::vector<std::string>& args,
                       const MpiContext& ctx, int& code) {
    auto& r = registry();
    if (!args.empty()) {
        const auto two = r.find(cmd + " " + args[0]);
        if (two != r.end()) {
            code = two->second.fn(std::vector<std::string>(args.begin() + 1, args.end()), ctx);
            return true;
        }
    }
    const auto one = r.find(cmd);
    if (one == r.end()) return false;
    code = one->second.fn(args, ctx);
    return true;
}

std::string extra_command_help() {
    std::string out;
    for (const auto& [name, e] : registry()) {
        out += "  " + name;
        out += std::string(name.size() < 15 ? 15 - name.size() : 1, ' ') + e.summary + "\n";
    }
    return out;
}

}  // namespace ef

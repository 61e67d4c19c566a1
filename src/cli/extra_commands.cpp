// SPDX-License-Identifier: MIT
#include <cstdio>
#include <map>

#include <ensemblefit/core/error.hpp>

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

namespace {

/// The two-word commands that start with `prefix` ("simulate" -> "simulate dis", ...).
std::vector<std::string> sub_commands(const std::string& prefix) {
    std::vector<std::string> out;
    for (const auto& [name, e] : registry())
        if (name.rfind(prefix + " ", 0) == 0) out.push_back(name);
    return out;
}

/// `ensemblefit simulate [--help]`: the sub-commands of a prefix, with their summaries; exit 0
/// for --help, 2 without one. An unknown sub-command is a usage error naming the known ones.
int prefix_help(const std::string& prefix, const std::vector<std::string>& subs,
                const std::vector<std::string>& args, const MpiContext& ctx) {
    const bool help = !args.empty() && (args[0] == "--help" || args[0] == "-h" || args[0] == "help");
    if (!args.empty() && !help) {
        std::string known;
        for (const auto& s : subs) known += (known.empty() ? "" : ", ") + s.substr(prefix.size() + 1);
        throw usage_error("unknown command '" + prefix + " " + args[0] + "' (" + prefix + " takes: " + known +
                          "; see ensemblefit " + prefix + " --help)");
    }
    if (ctx.is_root()) {
        std::string out = "usage: ensemblefit " + prefix + " SUBCOMMAND [options]\n\nsubcommands:\n";
        for (const auto& s : subs) {
            out += "  " + s + std::string(s.size() < 24 ? 24 - s.size() : 1, ' ') + registry()[s].summary + "\n";
        }
        out += "\nensemblefit " + prefix + " SUBCOMMAND --help: options of one\n";
        std::fputs(out.c_str(), help ? stdout : stderr);
    }
    return help ? 0 : 2;
}

}  // namespace

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
    if (one != r.end()) {
        code = one->second.fn(args, ctx);
        return true;
    }
    const std::vector<std::string> subs = sub_commands(cmd);
    if (subs.empty()) return false;
    code = prefix_help(cmd, subs, args, ctx);
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

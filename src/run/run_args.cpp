// SPDX-License-Identifier: MIT
#include "src/run/run_args.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iostream>

#include <ensemblefit/core/error.hpp>

#include "src/core/text.hpp"

namespace ef {

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

/// The command's own option `a` names (`--name` or `--name=VALUE`), or nullptr.
const ArgOption* find_option(const std::vector<ArgOption>& options, const std::string& a) {
    for (const ArgOption& o : options)
        if (a == o.name || (o.takes_value && starts_with(a, o.name + "="))) return &o;
    return nullptr;
}

}  // namespace

bool parse_run_args(const std::string& command, const std::vector<std::string>& args, bool resumable,
                    const std::vector<ArgOption>& options, RunArgs& out) {
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= args.size()) throw usage_error(command + ": " + a + " expects a value");
            return args[++i];
        };
        if (a == "-h" || a == "--help") return false;
        if (a == "--overwrite") {
            out.overwrite = true;
        } else if (a == "--dry-run") {
            out.dry_run = true;
        } else if (a == "--resume" && resumable) {
            out.resume = true;
        } else if (a == "--trace" || starts_with(a, "--trace=")) {
            out.trace = a.find('=') != std::string::npos ? a.substr(a.find('=') + 1) : value();
        } else if (a == "--predicted" || starts_with(a, "--predicted=")) {
            out.predicted = a.find('=') != std::string::npos ? a.substr(a.find('=') + 1) : value();
        } else if (const ArgOption* o = find_option(options, a)) {
            const auto eq = a.find('=');
            o->apply(!o->takes_value ? std::string() : eq != std::string::npos ? a.substr(eq + 1) : value());
        } else if (starts_with(a, "--") && a.find('.') != std::string::npos) {
            // --section.key VALUE or --section.key=VALUE: a config override.
            out.overrides.push_back(a.find('=') != std::string::npos ? a : a + "=" + value());
        } else if (starts_with(a, "-")) {
            throw usage_error(command + ": unknown option '" + excerpt(a) + "' (see ensemblefit " + command + " --help)");
        } else if (out.config_path.empty()) {
            out.config_path = a;
        } else {
            throw usage_error(command + ": unexpected argument '" + excerpt(a) + "' (one config file only)");
        }
    }
    if (out.config_path.empty())
        throw usage_error(command + ": no config file given (see ensemblefit " + command + " --help)");
    if (out.resume && out.overwrite) throw usage_error(command + ": --resume and --overwrite exclude each other");
    return true;
}

bool parse_program_options(const std::string& command, const std::vector<std::string>& args,
                           const boost::program_options::options_description& desc,
                           const boost::program_options::positional_options_description& positional,
                           boost::program_options::variables_map& vm, const MpiContext& ctx) {
    namespace po = boost::program_options;
    try {
        po::store(po::command_line_parser(args).options(desc).positional(positional).run(), vm);
        po::notify(vm);
    } catch (const po::error& e) {
        throw usage_error(command + ": " + excerpt(e.what(), 200));
    }
    if (vm.count("help") == 0) return true;
    if (ctx.is_root()) std::cout << desc << "\n";
    return false;
}

double parse_number_arg(const std::string& what, const std::string& text) {
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(v))
        throw usage_error(what + ": expected a number, got '" + excerpt(text) + "'");
    return v;
}

}  // namespace ef

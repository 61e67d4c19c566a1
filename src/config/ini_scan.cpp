// SPDX-License-Identifier: MIT
#include "src/config/ini_scan.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <sys/stat.h>

#include <ensemblefit/core/error.hpp>

#include "src/core/text.hpp"

namespace po = boost::program_options;

namespace ef::ini {

namespace {

/// The value after '=': trimmed, without an inline comment (a '#' after a blank).
std::string value_of(const std::string& rest) {
    for (size_t i = 1; i < rest.size(); ++i)
        if (rest[i] == '#' && (rest[i - 1] == ' ' || rest[i - 1] == '\t')) return trim(rest.substr(0, i));
    return trim(rest);
}

}  // namespace

std::vector<ScannedKey> scan(const std::string& path, const Rules& rules) {
    struct stat st {};
    if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
        throw usage_error(path + ": cannot open config file (it is a folder)");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw usage_error(path + ": cannot open config file (" + std::strerror(errno) + ")");
    std::vector<ScannedKey> keys;
    std::set<std::string> seen;
    std::string section, raw;
    int line = 0;
    bool too_long = false;
    while (read_line(in, raw, kMaxLineLength, too_long)) {
        ++line;
        if (too_long)
            throw usage_error(path + ":" + std::to_string(line) + ": line longer than " +
                              std::to_string(kMaxLineLength) + " characters");
        if (line == 1 && raw.rfind("\xEF\xBB\xBF", 0) == 0) raw.erase(0, 3);  // a UTF-8 byte order mark
        const std::string s = trim(raw);
        if (s.empty() || s[0] == '#' || s[0] == ';') continue;
        const std::string at = path + ":" + std::to_string(line) + ": ";
        if (s.front() == '[') {
            if (s.size() < 2 || s.back() != ']')
                throw usage_error(at + "malformed section header '" + excerpt(s) + "'");
            section = trim(s.substr(1, s.size() - 2));
            rules.section(section, at);
            continue;
        }
        const auto eq = s.find('=');
        if (eq == std::string::npos) throw usage_error(at + "expected 'key = value', got '" + excerpt(s) + "'");
        if (section.empty()) throw usage_error(at + "key outside of any [section]");
        const std::string name = trim(s.substr(0, eq));
        if (name.empty()) throw usage_error(at + "expected 'key = value', got no key before '='");
        const std::string key = section + "." + name;
        rules.key(section, name, at);
        if (!seen.insert(key).second) throw usage_error(at + "key '" + excerpt(key) + "' is set twice");
        keys.push_back({key, value_of(s.substr(eq + 1)), line});
    }
    return keys;
}

po::parsed_options as_parsed_options(const std::vector<ScannedKey>& keys, const po::options_description& desc) {
    po::parsed_options parsed(&desc);
    for (const ScannedKey& k : keys) {
        po::option o(k.key, {k.value});
        o.original_tokens = {k.key, k.value};
        o.unregistered = desc.find_nothrow(k.key, false) == nullptr;
        parsed.options.push_back(o);
    }
    return parsed;
}

void unknown_section(const std::string& at, const std::string& section, const std::string& allowed) {
    throw usage_error(at + "unknown section [" + excerpt(section) + "] (allowed: " + allowed + ")");
}

void unknown_key(const std::string& at,
                 const std::string& name,
                 const std::string& section,
                 const std::string& allowed) {
    throw usage_error(at + "unknown key '" + excerpt(name) + "' in [" + excerpt(section) + "] (allowed: " + allowed + ")");
}

const KeyInfo* find_key(std::span<const KeyInfo> keys, const std::string& key) {
    for (const auto& k : keys)
        if (key == k.key) return &k;
    return nullptr;
}

std::string allowed_keys_of(std::span<const KeyInfo> keys, const std::string& section) {
    std::string out;
    for (const auto& k : keys) {
        const std::string key = k.key;
        if (key.rfind(section + ".", 0) == 0) out += (out.empty() ? "" : ", ") + key.substr(section.size() + 1);
    }
    return out;
}

std::vector<std::string> last_overrides_win(const std::vector<std::string>& given) {
    std::vector<std::string> out;
    std::set<std::string> seen;
    for (auto it = given.rbegin(); it != given.rend(); ++it) {
        const std::string key = it->substr(0, it->find('='));
        if (key.rfind("--", 0) == 0 && !seen.insert(key).second) continue;
        out.insert(out.begin(), *it);
    }
    return out;
}

po::parsed_options parse_overrides(const std::vector<std::string>& overrides, const po::options_description& desc) {
    return po::command_line_parser(overrides)
        .options(desc)
        .style(po::command_line_style::default_style & ~po::command_line_style::allow_guessing)
        .allow_unregistered()
        .run();
}

double to_real(const std::string& value, const std::string& where) {
    const std::string t = trim(value);
    if (t == "inf" || t == "+inf") return std::numeric_limits<double>::infinity();
    if (t == "-inf") return -std::numeric_limits<double>::infinity();
    char* end = nullptr;
    errno = 0;
    const double d = std::strtod(t.c_str(), &end);
    if (t.empty() || end != t.c_str() + t.size() || errno == ERANGE || std::isnan(d) || std::isinf(d))
        throw usage_error(where + ": expected a number, got '" + excerpt(value) + "'");
    return d;
}

long long to_integer(const std::string& value, const std::string& where, long long lo, long long hi) {
    const std::string t = trim(value);
    const auto range = [&] {
        return usage_error(where + ": must be in " + std::to_string(lo) + ".." + std::to_string(hi) + ", got " +
                           excerpt(t));
    };
    char* end = nullptr;
    errno = 0;
    long long i = std::strtoll(t.c_str(), &end, 10);
    const bool whole = !t.empty() && end == t.c_str() + t.size();
    if (whole && errno == ERANGE) throw range();
    if (!whole) {
        // A whole number written with a decimal point or exponent (1e6, 2.5e3) is taken too.
        const bool numeric = !t.empty() && t.find_first_not_of("0123456789+-.eE") == std::string::npos;
        errno = 0;
        const double d = numeric ? std::strtod(t.c_str(), &end) : 0.0;
        if (!numeric || end != t.c_str() + t.size() || !std::isfinite(d) || d != std::floor(d))
            throw usage_error(where + ": expected an integer, got '" + excerpt(value) + "'");
        if (!(std::fabs(d) < 9.2e18)) throw range();
        i = static_cast<long long>(d);
    }
    if (i < lo || i > hi) throw range();
    return i;
}

bool to_bool(const std::string& value, const std::string& where) {
    std::string t = trim(value);
    std::transform(t.begin(), t.end(), t.begin(), ::tolower);
    if (t == "true" || t == "1" || t == "yes" || t == "on") return true;
    if (t == "false" || t == "0" || t == "no" || t == "off") return false;
    throw usage_error(where + ": expected true or false, got '" + excerpt(value) + "'");
}

std::string format_double(double v) {
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    std::ostringstream os;
    os.precision(17);
    os << v;
    return os.str();
}

std::string folder_of(const std::string& path) {
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

void write_key_help(std::ostream& os, std::span<const KeyInfo> keys, size_t name_width, const char* no_default) {
    std::string section;
    for (const auto& k : keys) {
        const std::string key = k.key;
        const std::string sec = key.substr(0, key.find('.'));
        if (sec != section) {
            os << "  [" << sec << "]\n";
            section = sec;
        }
        const std::string name = key.substr(sec.size() + 1);
        os << "    " << name << std::string(name.size() + 2 > name_width ? 2 : name_width - name.size(), ' ')
           << k.help << " (default: " << (*k.def ? k.def : no_default) << ")\n";
    }
}

}  // namespace ef::ini

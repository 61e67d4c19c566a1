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

#include <ensemblefit/core/error.hpp>

#include "src/core/text.hpp"

namespace po = boost::program_options;

namespace ef::ini {

std::vector<ScannedKey> scan(const std::string& path, const Rules& rules) {
    std::ifstream in(path);
    if (!in) throw usage_error(path + ": cannot open config file (" + std::strerror(errno) + ")");
    std::vector<ScannedKey> keys;
    std::set<std::string> seen;
    std::string section, raw;
    int line = 0;
    while (std::getline(in, raw)) {
        ++line;
        const std::string s = trim(raw);
        if (s.empty() || s[0] == '#' || s[0] == ';') continue;
        const std::string at = path + ":" + std::to_string(line) + ": ";
        if (s.front() == '[') {
            if (s.back() != ']') throw usage_error(at + "malformed section header '" + s + "'");
            section = trim(s.substr(1, s.size() - 2));
            rules.section(section, at);
            continue;
        }
        const auto eq = s.find('=');
        if (eq == std::string::npos) throw usage_error(at + "expected 'key = value', got '" + s + "'");
        if (section.empty()) throw usage_error(at + "key outside of any [section]");
        const std::string name = trim(s.substr(0, eq));
        const std::string key = section + "." + name;
        std::string value = trim(s.substr(eq + 1));
        // Inline comments: " # ..." after a value (a formula never contains '#').
        const auto hash = value.find(" #");
        if (hash != std::string::npos) value = trim(value.substr(0, hash));
        rules.key(section, name, at);
        if (!seen.insert(key).second) throw usage_error(at + "key '" + key + "' is set twice");
        keys.push_back({key, value, line});
    }
    return keys;
}

void unknown_section(const std::string& at, const std::string& section, const std::string& allowed) {
    throw usage_error(at + "unknown section [" + section + "] (allowed: " + allowed + ")");
}

void unknown_key(const std::string& at,
                 const std::string& name,
                 const std::string& section,
                 const std::string& allowed) {
    throw usage_error(at + "unknown key '" + name + "' in [" + section + "] (allowed: " + allowed + ")");
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
    if (t.empty() || end != t.c_str() + t.size() || errno == ERANGE || std::isnan(d))
        throw usage_error(where + ": expected a number, got '" + value + "'");
    return d;
}

long long to_integer(const std::string& value, const std::string& where) {
    const std::string t = trim(value);
    char* end = nullptr;
    errno = 0;
    const long long i = std::strtoll(t.c_str(), &end, 10);
    if (t.empty() || end != t.c_str() + t.size() || errno == ERANGE)
        throw usage_error(where + ": expected an integer, got '" + value + "'");
    return i;
}

bool to_bool(const std::string& value, const std::string& where) {
    std::string t = trim(value);
    std::transform(t.begin(), t.end(), t.begin(), ::tolower);
    if (t == "true" || t == "1" || t == "yes" || t == "on") return true;
    if (t == "false" || t == "0" || t == "no" || t == "off") return false;
    throw usage_error(where + ": expected true or false, got '" + value + "'");
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

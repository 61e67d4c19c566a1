// SPDX-License-Identifier: MIT
#pragma once

#include <functional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

namespace ef::ini {

/**
 * What the `fit` and `reconstruct` configs share (internal, not installed): the INI pre-scan
 * that remembers every key's line (Boost.Program_options keeps none) and checks the file's
 * shape, the key tables, the conversions of values, and the help listing. Each config keeps
 * its own sections and keys (Rules) and its own checks of ranges and choices. Every message
 * names where the value came from, as the caller's `where` ("FILE:LINE: key" or "--key").
 */

/// One key of a config's table: "section.name", default (empty = none), help.
struct KeyInfo {
    const char* key;
    const char* def;
    const char* help;
};

/// One `key = value` line of the file: "section.name", the value (trimmed, without an inline
/// " # comment"), its line number.
struct ScannedKey {
    std::string key;
    std::string value;
    int line;
};

/**
 * A config's sections and keys, as checks the scan calls with `at` = "FILE:LINE: " (the prefix
 * of their messages): each throws usage_error for what the config does not know.
 */
struct Rules {
    std::function<void(const std::string& section, const std::string& at)> section;
    std::function<void(const std::string& section, const std::string& name, const std::string& at)> key;
};

/**
 * Reads `path` once: blank lines and `#`/`;` comments skipped, `[section]` headers and
 * `name = value` lines checked (malformed header, no '=', key outside a section, a key set
 * twice) and passed to `rules`. Throws usage_error naming FILE:LINE.
 */
std::vector<ScannedKey> scan(const std::string& path, const Rules& rules);

/// usage_error: at + "unknown section [S] (allowed: LIST)".
[[noreturn]] void unknown_section(const std::string& at, const std::string& section, const std::string& allowed);
/// usage_error: at + "unknown key 'NAME' in [S] (allowed: LIST)".
[[noreturn]] void unknown_key(const std::string& at,
                              const std::string& name,
                              const std::string& section,
                              const std::string& allowed);

/// The key named `key` in `keys`, or nullptr.
const KeyInfo* find_key(std::span<const KeyInfo> keys, const std::string& key);
/// Names of `keys` in `section`, without the section, comma-separated.
std::string allowed_keys_of(std::span<const KeyInfo> keys, const std::string& section);

/// Of repeated "--key=value" overrides, keeps the last (Program_options stores the first).
std::vector<std::string> last_overrides_win(const std::vector<std::string>& given);
/// Program_options over command-line overrides: no abbreviations, unknown keys kept as
/// unregistered for the caller to judge.
boost::program_options::parsed_options parse_overrides(const std::vector<std::string>& overrides,
                                                       const boost::program_options::options_description& desc);

/// A number (also inf, +inf, -inf; not NaN); else usage_error where + ": expected a number, got 'VALUE'".
double to_real(const std::string& value, const std::string& where);
/// A decimal integer; else usage_error where + ": expected an integer, got 'VALUE'".
long long to_integer(const std::string& value, const std::string& where);
/// true/1/yes/on or false/0/no/off, any case; else usage_error where + ": expected true or false, got 'VALUE'".
bool to_bool(const std::string& value, const std::string& where);

/// `v` with 17 digits (round-trips), "inf"/"-inf": for resolved config text and messages.
std::string format_double(double v);
/// The folder of `path` with its trailing '/', or "" (relative paths in a config are taken from there).
std::string folder_of(const std::string& path);

/**
 * One "  [section]" line per section, then "    name<pad>help (default: DEF)" per key, names
 * padded to `name_width` (at least 2 blanks); `no_default` stands for an empty default.
 */
void write_key_help(std::ostream& os, std::span<const KeyInfo> keys, size_t name_width, const char* no_default);

}  // namespace ef::ini

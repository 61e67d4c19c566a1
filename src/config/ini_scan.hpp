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

/// The longest config line read; a longer one is refused (a binary or endless file).
constexpr size_t kMaxLineLength = 1 << 20;

/**
 * Reads `path` once, the only parser of the file: blank lines and lines starting with `#` or
 * `;` skipped, `[section]` headers and `name = value` lines checked (malformed header, no '=',
 * no name, key outside a section, a key set twice, a line over kMaxLineLength) and passed to
 * `rules`. A value ends at an inline comment: a `#` after a blank (space or tab); any other
 * `#` is part of the value (so `a*x#b` reaches the formula compiler, which names the column).
 * Throws usage_error naming FILE:LINE, with echoed text cut to 80 characters.
 */
std::vector<ScannedKey> scan(const std::string& path, const Rules& rules);

/// The scanned keys as Program_options' parsed options, `unregistered` where `desc` lacks the
/// key. Program_options' own file parser is not used: it cuts a value at any '#'.
boost::program_options::parsed_options as_parsed_options(const std::vector<ScannedKey>& keys,
                                                         const boost::program_options::options_description& desc);

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

/// A number (also inf, +inf, -inf; not NaN, not a finite value out of double's range); else
/// usage_error where + ": expected a number, got 'VALUE'".
double to_real(const std::string& value, const std::string& where);
/// An integer in lo..hi, read wide (never wrapped): decimal, or a whole number written 1e6 or
/// 2.5e3; else usage_error where + ": expected an integer, got 'VALUE'" or
/// where + ": must be in LO..HI, got VALUE".
long long to_integer(const std::string& value, const std::string& where, long long lo, long long hi);
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

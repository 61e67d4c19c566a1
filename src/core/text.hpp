// SPDX-License-Identifier: MIT
#pragma once

#include <istream>
#include <string>

namespace ef {

/// `s` without leading and trailing blanks (space, tab, CR, LF): for config and CSV text.
inline std::string trim(const std::string& s) {
    const auto b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return "";
    return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

/// `s` padded with blanks to `width` columns (at least one blank after it): table cells.
inline std::string pad(const std::string& s, size_t width) {
    return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

/// At most `max` characters of `s` for an error message: "..." marks a cut, and control
/// characters (a newline would split the one error line) are shown as '?'.
inline std::string excerpt(const std::string& s, size_t max = 80) {
    std::string out = s.size() > max ? s.substr(0, max) + "..." : s;
    for (char& c : out)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    return out;
}

/// One line of `in` into `line`, without its '\n'; false at the end of the input. Stops at `max`
/// characters with `too_long` set, so a binary or endless file is never read whole.
inline bool read_line(std::istream& in, std::string& line, size_t max, bool& too_long) {
    line.clear();
    too_long = false;
    std::streambuf* buf = in.rdbuf();
    bool any = false;
    for (int c = buf->sbumpc(); c != std::char_traits<char>::eof(); c = buf->sbumpc()) {
        any = true;
        if (c == '\n') return true;
        if (line.size() >= max) {
            too_long = true;
            return true;
        }
        line.push_back(static_cast<char>(c));
    }
    return any;
}

}  // namespace ef

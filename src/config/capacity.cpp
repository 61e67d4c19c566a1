// SPDX-License-Identifier: MIT
#include "src/config/capacity.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include <sys/resource.h>
#include <unistd.h>

namespace ef {
namespace {

/// The control group v2 limit of this process ("max" or absent: none).
std::uint64_t cgroup_limit() {
    std::ifstream self("/proc/self/cgroup");
    std::string line, path;
    while (std::getline(self, line))
        if (line.rfind("0::", 0) == 0) path = line.substr(3);
    std::ifstream in("/sys/fs/cgroup" + path + "/memory.max");
    std::string value;
    if (!(in >> value) || value == "max") return UINT64_MAX;
    try {
        return std::stoull(value);
    } catch (const std::exception&) {
        return UINT64_MAX;
    }
}

std::uint64_t rlimit_of(int resource) {
    struct rlimit r {};
    if (getrlimit(resource, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return UINT64_MAX;
    return static_cast<std::uint64_t>(r.rlim_cur);
}

}  // namespace

std::uint64_t memory_limit_bytes() {
    static const std::uint64_t limit = [] {
        const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
        std::uint64_t m = pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page)
                                                : UINT64_MAX;
        m = std::min({m, cgroup_limit(), rlimit_of(RLIMIT_AS), rlimit_of(RLIMIT_DATA)});
        return m;
    }();
    return limit;
}

std::string format_bytes(double bytes) {
    static const char* const kUnits[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
    int u = 0;
    while (bytes >= 999.5 && u < 8) {
        bytes /= 1000.0;
        ++u;
    }
    char text[48];
    std::snprintf(text, sizeof text, "%.*f %s", u == 0 || bytes >= 9.95 ? 0 : 1, bytes, kUnits[u]);
    return text;
}

double largest_count(double bytes_each, double fixed) {
    const double room = static_cast<double>(memory_limit_bytes()) - fixed;
    return room > 0 && bytes_each > 0 ? std::floor(room / bytes_each) : 0.0;
}

bool exceeds_memory(double bytes) { return !(bytes <= static_cast<double>(memory_limit_bytes())); }

std::string memory_refusal(double bytes, const std::string& what, const std::string& largest) {
    return "needs " + format_bytes(bytes) + " of memory for " + what + "; the largest this machine's memory (" +
           format_bytes(static_cast<double>(memory_limit_bytes())) + ") allows is " + largest;
}

}  // namespace ef

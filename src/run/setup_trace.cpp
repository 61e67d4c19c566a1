// SPDX-License-Identifier: MIT
#include "src/run/setup_trace.hpp"

#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <ensemblefit/core/diagnostics.hpp>

namespace ef {

SetupTrace::SetupTrace(int rank)
    : rank_(rank), on_(diagnostics().setup_trace), last_(std::chrono::steady_clock::now()) {}

void SetupTrace::mark(const char* step) {
    if (!on_) return;
    const auto now = std::chrono::steady_clock::now();
    std::fprintf(stderr, "[%s rank %d] %s: %.3f s\n", stage_, rank_, step,
                 std::chrono::duration<double>(now - last_).count());
    last_ = now;
}

namespace {

/// Seconds since this process was started (exec), or a negative value where /proc says nothing.
double seconds_since_exec() {
    std::ifstream in("/proc/self/stat");
    std::string stat;
    std::getline(in, stat);
    const auto close = stat.rfind(')');  // the command name may hold spaces
    if (close == std::string::npos) return -1.0;
    std::istringstream fields(stat.substr(close + 2));
    std::string field;
    for (int i = 3; i < 22 && fields >> field;) ++i;  // fields 3..21, then 22: starttime in ticks
    unsigned long long start_ticks = 0;
    if (!(fields >> start_ticks)) return -1.0;
    timespec boot{};
    if (clock_gettime(CLOCK_BOOTTIME, &boot) != 0) return -1.0;
    const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
    return static_cast<double>(boot.tv_sec) + 1e-9 * static_cast<double>(boot.tv_nsec) -
           static_cast<double>(start_ticks) / tick;
}

}  // namespace

void trace_process_step(const char* step, double seconds, int rank) {
    if (!diagnostics().setup_trace || rank != 0) return;
    std::fprintf(stderr, "[process] %s: %.3f s (%.2f s since exec)\n", step, seconds, seconds_since_exec());
}

}  // namespace ef

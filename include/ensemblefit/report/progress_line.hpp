// SPDX-License-Identifier: MIT
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace ef {

/// A duration for a person: "42s", "3m05s", "2h10m"; "--" when not finite (no estimate yet).
std::string format_duration(double seconds);

/**
 * Rank 0's progress report on stderr: a live line rewritten in place on a terminal
 * (done/total, replicas/s, ETA), or a plain line every `interval` seconds when stderr is a file
 * or pipe (batch jobs), so logs stay readable.
 */
class ProgressLine {
   public:
    ProgressLine(std::int64_t total, std::FILE* out, double interval_seconds);
    void update(std::int64_t done);
    void finish();

   private:
    void print(std::int64_t done, bool final);
    std::int64_t total_;
    std::FILE* out_;
    bool tty_;
    double interval_;
    std::chrono::steady_clock::time_point start_, last_print_;
    bool printed_ = false;
};

}  // namespace ef

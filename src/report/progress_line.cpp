// SPDX-License-Identifier: MIT
#include <ensemblefit/report/progress_line.hpp>

#include <unistd.h>

#include <cmath>

namespace ef {

std::string format_duration(double s) {
    char buf[32];
    if (!std::isfinite(s)) return "--";
    const long t = std::lround(s);
    if (t >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
    else if (t >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
    else std::snprintf(buf, sizeof buf, "%lds", t);
    return buf;
}

ProgressLine::ProgressLine(std::int64_t total, std::FILE* out, double interval_seconds)
    : total_(total), out_(out), tty_(isatty(fileno(out)) != 0), interval_(interval_seconds),
      start_(std::chrono::steady_clock::now()), last_print_(start_) {}

void ProgressLine::update(std::int64_t done) {
    const auto now = std::chrono::steady_clock::now();
    const double since = std::chrono::duration<double>(now - last_print_).count();
    if (since < (tty_ ? 0.2 : interval_)) return;
    last_print_ = now;
    print(done, false);
}

void ProgressLine::finish() { print(total_, true); }

void ProgressLine::print(std::int64_t done, bool final) {
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double rate = el > 0 ? static_cast<double>(done) / el : 0.0;
    const double eta = rate > 0 ? static_cast<double>(total_ - done) / rate : NAN;
    const std::string eb = format_duration(eta), tb = format_duration(el);
    const double pct = total_ > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total_) : 100.0;
    if (tty_) {
        std::fprintf(out_, "\r[fit] %lld/%lld replicas (%5.1f%%)  %.2f/s  %s %s   ",
                     static_cast<long long>(done), static_cast<long long>(total_), pct, rate,
                     final ? "elapsed" : "ETA", final ? tb.c_str() : eb.c_str());
        if (final) std::fputc('\n', out_);
    } else {
        std::fprintf(out_, "[fit] %lld/%lld replicas (%.1f%%)  %.2f/s  %s %s\n",
                     static_cast<long long>(done), static_cast<long long>(total_), pct, rate,
                     final ? "elapsed" : "ETA", final ? tb.c_str() : eb.c_str());
    }
    std::fflush(out_);
    printed_ = true;
}

}  // namespace ef

// SPDX-License-Identifier: MIT
#include "src/recon/loss_trend.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include <ensemblefit/report/progress_line.hpp>

namespace ef::recon {

double loss_change(const std::vector<double>& loss, int k) {
    const size_t n = loss.size();
    if (k < 1 || n <= static_cast<size_t>(k)) return std::numeric_limits<double>::quiet_NaN();
    const double before = loss[n - 1 - static_cast<size_t>(k)];
    return (loss.back() - before) / std::abs(before);
}

double eta_seconds(const std::vector<double>& iteration_seconds, int remaining, int window) {
    const size_t n = iteration_seconds.size();
    if (n == 0) return std::numeric_limits<double>::quiet_NaN();
    const size_t w = static_cast<size_t>(std::max(window, 1));
    const size_t first = std::max(n > 1 ? size_t{1} : size_t{0}, n > w ? n - w : size_t{0});
    double sum = 0;
    for (size_t i = first; i < n; ++i) sum += iteration_seconds[i];
    return sum / static_cast<double>(n - first) * std::max(remaining, 0);
}

LossStall loss_stall(const std::vector<double>& loss, int window, double tolerance) {
    LossStall s;
    const size_t n = loss.size(), w = static_cast<size_t>(std::max(window, 1));
    if (n <= w || !std::isfinite(loss.back())) return s;
    const auto best = std::min_element(loss.begin(), loss.end() - static_cast<std::ptrdiff_t>(w));
    s.best = *best;
    s.best_iteration = static_cast<int>(best - loss.begin()) + 1;
    const double recent = *std::min_element(loss.end() - static_cast<std::ptrdiff_t>(w), loss.end());
    s.stalled = recent > s.best - tolerance * std::abs(s.best);
    s.rising = s.stalled && loss.back() > s.best + tolerance * std::abs(s.best);
    return s;
}

std::string LossWatch::check(const std::vector<double>& loss) {
    if (warned_) return "";
    const LossStall s = loss_stall(loss);
    if (!s.stalled) return "";
    warned_ = true;
    char buf[400];
    if (s.rising)
        std::snprintf(buf, sizeof buf,
                      "the loss has risen: %.6g after iteration %zu, %+.2f%% from its best %.6g at iteration %d, "
                      "with no new minimum for %d iterations (learning rates too large?)",
                      loss.back(), loss.size(), 100.0 * (loss.back() - s.best) / std::abs(s.best), s.best,
                      s.best_iteration, kStallWindow);
    else
        std::snprintf(buf, sizeof buf,
                      "the loss has stopped falling: no iteration in the last %d went %.1f%% below its best %.6g "
                      "(iteration %d); converged, or learning rates too small",
                      kStallWindow, 100.0 * kStallTolerance, s.best, s.best_iteration);
    return buf;
}

std::string progress_header(bool with_truth) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "  %6s %14s %10s %10s %8s%s", "iter", "loss", "change/10", "s/iter", "ETA",
                  with_truth ? "   phase NRMSE" : "");
    return buf;
}

std::string progress_row(int it, int iterations, const std::vector<double>& loss,
                         const std::vector<double>& iteration_seconds) {
    const double change = loss_change(loss);
    char ch[32];
    if (std::isfinite(change)) std::snprintf(ch, sizeof ch, "%+.2f%%", 100.0 * change);
    else std::snprintf(ch, sizeof ch, "--");
    const std::string eta = format_duration(eta_seconds(iteration_seconds, iterations - it));
    char buf[160];
    std::snprintf(buf, sizeof buf, "  %6d %14.8g %10s %10.4f %8s", it, loss.empty() ? 0.0 : loss.back(), ch,
                  iteration_seconds.empty() ? 0.0 : iteration_seconds.back(), eta.c_str());
    return buf;
}

}  // namespace ef::recon

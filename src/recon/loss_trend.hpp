// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <vector>

/**
 * The loss's recent course, for `reconstruct`'s progress lines (internal): the relative change
 * over the last kChangeWindow iterations, an ETA from the recent seconds per iteration, and a
 * stall rule that the run reports once, as a warning.
 *
 * Stall rule: the loss has not gone below (1 - kStallTolerance) x its best value before the last
 * kStallWindow iterations in any of those kStallWindow iterations (no new minimum by more than
 * 0.1 % for 20 iterations). It is "rising" when the last loss is also more than kStallTolerance
 * above that best. A mini-batch loss with a learning-rate decay is smooth enough that 20
 * iterations without a 0.1 % gain mean convergence (or step sizes too small); a rise means step
 * sizes too large. The rule uses only the loss history, so every rank would decide the same.
 */
namespace ef::recon {

constexpr int kChangeWindow = 10;
constexpr int kStallWindow = 20;
constexpr double kStallTolerance = 1e-3;

/// (L[n-1] - L[n-1-k]) / |L[n-1-k]|; NaN with k or fewer earlier iterations.
double loss_change(const std::vector<double>& loss, int k = kChangeWindow);

/// Seconds left for `remaining` iterations at the mean of the last `window` iteration times
/// (without the first iteration, planning and warm-up, once there are others); NaN without data.
double eta_seconds(const std::vector<double>& iteration_seconds, int remaining, int window = kChangeWindow);

struct LossStall {
    bool stalled = false;
    bool rising = false;
    int best_iteration = 0;  ///< 1-based iteration of the best loss before the window
    double best = 0;
};
LossStall loss_stall(const std::vector<double>& loss, int window = kStallWindow, double tolerance = kStallTolerance);

/// The stall warning, once per run: check() returns its text the first time the rule holds,
/// then "" for ever.
class LossWatch {
   public:
    std::string check(const std::vector<double>& loss);

   private:
    bool warned_ = false;
};

/// The column header of the progress lines and one line (no newline at either end).
std::string progress_header(bool with_truth);
std::string progress_row(int it, int iterations, const std::vector<double>& loss,
                         const std::vector<double>& iteration_seconds);

}  // namespace ef::recon

// SPDX-License-Identifier: MIT
#include "src/recon/step_defaults.hpp"

#include <algorithm>

namespace ef::recon {

int resolve_batch_size(int configured, std::int64_t positions) {
    if (configured > 0) return configured;
    const std::int64_t want = (positions + kAutoStepsPerIteration - 1) / kAutoStepsPerIteration;
    const std::int64_t b = std::clamp(want, kAutoBatchMin, kAutoBatchMax);
    return static_cast<int>(std::max<std::int64_t>(1, std::min(b, positions)));
}

int resolve_positions_start(int configured, int iterations) {
    return configured > 0 ? configured : std::max(1, iterations / 5);
}

double resolve_positions_lr(double configured, int iterations, int start) {
    return configured >= 0 ? configured : 8.0 / std::max(1, iterations - start + 1);
}

}  // namespace ef::recon

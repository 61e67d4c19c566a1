// SPDX-License-Identifier: MIT
#include "src/recon/step_defaults.hpp"

#include <algorithm>
#include <cmath>

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
    return configured >= 0 ? configured : 24.0 / std::max(1, iterations - start + 1);
}

double scan_pitch(const std::vector<double>& yx) {
    const size_t count = yx.size() / 2;
    if (count < 2) return 0;
    double y0 = yx[0], y1 = yx[0], x0 = yx[1], x1 = yx[1];
    for (size_t k = 1; k < count; ++k) {
        y0 = std::min(y0, yx[2 * k]);
        y1 = std::max(y1, yx[2 * k]);
        x0 = std::min(x0, yx[2 * k + 1]);
        x1 = std::max(x1, yx[2 * k + 1]);
    }
    const double area = (y1 - y0) * (x1 - x0);
    if (area > 0) return std::sqrt(area / static_cast<double>(count));
    return std::max(y1 - y0, x1 - x0) / static_cast<double>(count - 1);  // a line
}

double resolve_positions_max_travel(double configured, double pitch) {
    return configured >= 0 ? configured : 2 * pitch;
}

}  // namespace ef::recon

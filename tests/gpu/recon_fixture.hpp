// SPDX-License-Identifier: MIT
// Test data shared by the GPU reconstruction tests, drawn from the caller's generator in a fixed
// order (so each test's data stay what its seed made them).
#pragma once

#include <cmath>
#include <complex>
#include <random>
#include <vector>

namespace ef_test {

/// K probe modes of dp x dp: a Gaussian envelope (mode 0 five times the others) with random
/// amplitude and phase ripples, appended to `probe`.
inline void append_test_probe(std::mt19937_64& rng, int dp, int modes, std::vector<std::complex<double>>& probe) {
    std::uniform_real_distribution<double> u(0, 1);
    const double r2 = dp * dp / 25.0;
    for (int k = 0; k < modes; ++k)
        for (int q = 0; q < dp * dp; ++q) {
            const double y = q / dp - dp / 2.0, x = q % dp - dp / 2.0;
            const double env = std::exp(-(x * x + y * y) / r2) * (k == 0 ? 10.0 : 2.0);
            probe.emplace_back(env * (1 + 0.2 * u(rng)), env * 0.2 * (u(rng) - 0.5));
        }
}

/// Scan position j (y, x) over an object `span` pixels wider than the window: the first at the
/// corner, the second clamped past the edge, the rest uniform; appended to `positions`.
inline void append_test_position(std::mt19937_64& rng, int j, double span, std::vector<double>& positions) {
    std::uniform_real_distribution<double> u(0, 1);
    positions.push_back(j == 0 ? 0.0 : j == 1 ? span + 5.0 : span * u(rng));
    positions.push_back(j == 0 ? 0.0 : j == 1 ? span + 0.3 : span * u(rng));
}

}  // namespace ef_test

// SPDX-License-Identifier: MIT
#include "src/recon/phase_error.hpp"

#include <array>
#include <cmath>

namespace ef::recon {

PhaseError phase_error(const std::vector<std::complex<double>>& rec, const std::vector<std::complex<double>>& truth,
                       int obj_w, int y0, int y1, int x0, int x1) {
    PhaseError out;
    auto idx = [&](int y, int x) { return static_cast<size_t>(y) * static_cast<size_t>(obj_w) + static_cast<size_t>(x); };
    std::complex<double> mean_diff = 0;
    for (int y = y0; y < y1; ++y)
        for (int x = x0; x < x1; ++x) {
            const std::complex<double> d = rec[idx(y, x)] * std::conj(truth[idx(y, x)]);
            if (std::abs(d) > 0) mean_diff += d / std::abs(d);
        }
    const std::complex<double> unrotate = std::abs(mean_diff) > 0 ? std::conj(mean_diff) / std::abs(mean_diff) : 1.0;
    // Least squares e = a + b (y - yc) + c (x - xc) via 3 x 3 normal equations.
    const double yc = 0.5 * (y0 + y1 - 1), xc = 0.5 * (x0 + x1 - 1);
    std::array<double, 9> m{};
    std::array<double, 3> rhs{};
    double sum_t = 0, sum_t2 = 0;
    std::int64_t count = 0;
    for (int y = y0; y < y1; ++y)
        for (int x = x0; x < x1; ++x) {
            const double e = std::arg(rec[idx(y, x)] * std::conj(truth[idx(y, x)]) * unrotate);
            const double basis[3] = {1.0, y - yc, x - xc};
            for (int i = 0; i < 3; ++i) {
                rhs[static_cast<size_t>(i)] += basis[i] * e;
                for (int j = 0; j < 3; ++j) m[static_cast<size_t>(3 * i + j)] += basis[i] * basis[j];
            }
            const double t = std::arg(truth[idx(y, x)]);
            sum_t += t;
            sum_t2 += t * t;
            ++count;
        }
    if (count == 0) return out;
    // Solve by Cramer's rule (the basis is centred, so the system is well conditioned).
    auto det3 = [](const std::array<double, 9>& a) {
        return a[0] * (a[4] * a[8] - a[5] * a[7]) - a[1] * (a[3] * a[8] - a[5] * a[6]) + a[2] * (a[3] * a[7] - a[4] * a[6]);
    };
    const double d = det3(m);
    std::array<double, 3> coef{};
    for (int k = 0; k < 3 && std::abs(d) > 0; ++k) {
        std::array<double, 9> mk = m;
        for (int i = 0; i < 3; ++i) mk[static_cast<size_t>(3 * i + k)] = rhs[static_cast<size_t>(i)];
        coef[static_cast<size_t>(k)] = det3(mk) / d;
    }
    double sse = 0;
    for (int y = y0; y < y1; ++y)
        for (int x = x0; x < x1; ++x) {
            const double e = std::arg(rec[idx(y, x)] * std::conj(truth[idx(y, x)]) * unrotate);
            const double r = e - coef[0] - coef[1] * (y - yc) - coef[2] * (x - xc);
            sse += r * r;
        }
    const double n = static_cast<double>(count);
    const double var_t = sum_t2 / n - (sum_t / n) * (sum_t / n);
    out.pixels = count;
    out.rmse = std::sqrt(sse / n);
    out.nrmse = var_t > 0 ? out.rmse / std::sqrt(var_t) : 0.0;
    return out;
}

}  // namespace ef::recon

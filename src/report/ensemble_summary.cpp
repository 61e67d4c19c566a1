// SPDX-License-Identifier: MIT
#include <ensemblefit/report/ensemble_summary.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

namespace ef {

EnsembleSummary summarize(const std::vector<double>& params, const std::vector<std::int64_t>& status,
                          int P) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    EnsembleSummary s;
    s.P = P;
    s.total = static_cast<std::int64_t>(status.size());
    const size_t Pz = static_cast<size_t>(P);
    std::vector<size_t> rows;
    for (size_t r = 0; r < status.size(); ++r)
        if (status[r] == 0) rows.push_back(r);
    s.used = static_cast<std::int64_t>(rows.size());
    const double m = static_cast<double>(rows.size());
    s.mean.assign(Pz, nan);
    s.std.assign(Pz, nan);
    s.covariance.assign(Pz * Pz, nan);
    s.quantiles.assign(5 * Pz, nan);
    if (rows.empty()) {
        s.correlation.assign(Pz * Pz, nan);
        return s;
    }
    for (size_t q = 0; q < Pz; ++q) {
        double acc = 0.0;
        for (size_t r : rows) acc += params[r * Pz + q];
        s.mean[q] = acc / m;
    }
    if (rows.size() >= 2) {
        for (size_t a = 0; a < Pz; ++a) {
            for (size_t b = 0; b < Pz; ++b) {
                double acc = 0.0;
                for (size_t r : rows)
                    acc += (params[r * Pz + a] - s.mean[a]) * (params[r * Pz + b] - s.mean[b]);
                s.covariance[a * Pz + b] = acc / (m - 1.0);
            }
            s.std[a] = std::sqrt(s.covariance[a * Pz + a]);
        }
    }
    s.correlation = correlation_of(s.covariance, P);
    std::vector<double> col(rows.size());
    for (size_t q = 0; q < Pz; ++q) {
        for (size_t i = 0; i < rows.size(); ++i) col[i] = params[rows[i] * Pz + q];
        const std::array<double, 5> levels = quantiles_of(col);
        for (size_t l = 0; l < 5; ++l) s.quantiles[l * Pz + q] = levels[l];
    }
    return s;
}

std::vector<double> correlation_of(const std::vector<double>& cov, int P) {
    const size_t Pz = static_cast<size_t>(P);
    std::vector<double> rho(Pz * Pz, std::numeric_limits<double>::quiet_NaN());
    auto defined = [&](size_t a) { return std::isfinite(cov[a * Pz + a]) && cov[a * Pz + a] > 0.0; };
    for (size_t a = 0; a < Pz; ++a) {
        if (!defined(a)) continue;
        for (size_t b = 0; b < Pz; ++b) {
            if (!defined(b)) continue;
            rho[a * Pz + b] = a == b ? 1.0 : cov[a * Pz + b] / std::sqrt(cov[a * Pz + a] * cov[b * Pz + b]);
        }
    }
    return rho;
}

std::array<double, 5> quantiles_of(std::vector<double>& col) {
    std::array<double, 5> out;
    out.fill(std::numeric_limits<double>::quiet_NaN());
    if (col.empty()) return out;
    std::sort(col.begin(), col.end());
    const double m = static_cast<double>(col.size());
    for (size_t l = 0; l < 5; ++l) {
        const double h = (m - 1.0) * kQuantileLevels[l] / 100.0;
        const size_t lo = static_cast<size_t>(std::floor(h));
        const size_t hi = std::min(lo + 1, col.size() - 1);
        out[l] = col[lo] + (h - std::floor(h)) * (col[hi] - col[lo]);
    }
    return out;
}

}  // namespace ef

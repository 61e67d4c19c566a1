// SPDX-License-Identifier: MIT
#include <ensemblefit/core/ensemble_summary.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <exception>
#include <limits>

namespace ef {

namespace {

/// Means and the covariance in one pass over the rows, with one accumulator per value, each
/// summed in replica order (the bits of a loop per value over the rows; C_ba is C_ab: the same
/// products, as multiplication commutes).
void moments(const std::vector<double>& params, const std::vector<size_t>& rows, EnsembleSummary& s) {
    const size_t Pz = static_cast<size_t>(s.P);
    const double m = static_cast<double>(rows.size());
    std::vector<double> acc(Pz, 0.0);
    for (size_t r : rows)
        for (size_t q = 0; q < Pz; ++q) acc[q] += params[r * Pz + q];
    for (size_t q = 0; q < Pz; ++q) s.mean[q] = acc[q] / m;
    if (rows.size() < 2) return;
    std::vector<double> cov(Pz * (Pz + 1) / 2, 0.0), d(Pz);
    for (size_t r : rows) {
        for (size_t q = 0; q < Pz; ++q) d[q] = params[r * Pz + q] - s.mean[q];
        size_t k = 0;
        for (size_t a = 0; a < Pz; ++a)
            for (size_t b = a; b < Pz; ++b) cov[k++] += d[a] * d[b];
    }
    size_t k = 0;
    for (size_t a = 0; a < Pz; ++a) {
        for (size_t b = a; b < Pz; ++b, ++k) {
            s.covariance[a * Pz + b] = cov[k] / (m - 1.0);
            s.covariance[b * Pz + a] = s.covariance[a * Pz + b];
        }
        s.std[a] = std::sqrt(s.covariance[a * Pz + a]);
    }
}

/// Rearranges `col` so that col[k] holds its k-th smallest value for every k in `positions`
/// (ascending): selection, O(n) per position, where a full sort is O(n log n).
void place_order_statistics(std::vector<double>& col, const std::vector<size_t>& positions) {
    size_t start = 0;  // invariant: col[0, start) <= col[start, n)
    for (const size_t k : positions) {
        if (k < start) continue;  // placed already (the same position twice)
        if (k == start)
            std::iter_swap(col.begin() + static_cast<std::ptrdiff_t>(k),
                           std::min_element(col.begin() + static_cast<std::ptrdiff_t>(k), col.end()));
        else
            std::nth_element(col.begin() + static_cast<std::ptrdiff_t>(start),
                             col.begin() + static_cast<std::ptrdiff_t>(k), col.end());
        start = k + 1;
    }
}

}  // namespace

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
    s.mean.assign(Pz, nan);
    s.std.assign(Pz, nan);
    s.covariance.assign(Pz * Pz, nan);
    s.quantiles.assign(5 * Pz, nan);
    if (rows.empty()) {
        s.correlation.assign(Pz * Pz, nan);
        return s;
    }
    moments(params, rows, s);
    s.correlation = correlation_of(s.covariance, P);
    // The parameters' quantiles side by side (each its own column): the ensemble's largest step.
    const std::int64_t columns = P;
    std::exception_ptr failed;  // memory for a column ran out: rethrown here, not in a thread
#pragma omp parallel for schedule(dynamic, 1) if (rows.size() >= 65536 && P > 1)
    for (std::int64_t q = 0; q < columns; ++q) {
        try {
            std::vector<double> col(rows.size());
            for (size_t i = 0; i < rows.size(); ++i) col[i] = params[rows[i] * Pz + static_cast<size_t>(q)];
            const std::array<double, 5> levels = quantiles_of(col);
            for (size_t l = 0; l < 5; ++l) s.quantiles[l * Pz + static_cast<size_t>(q)] = levels[l];
        } catch (...) {
#pragma omp critical(ef_summary_failed)
            failed = std::current_exception();
        }
    }
    if (failed) std::rethrow_exception(failed);
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
    const double m = static_cast<double>(col.size());
    std::array<size_t, 5> lo, hi;
    std::vector<size_t> positions;
    for (size_t l = 0; l < 5; ++l) {
        const double h = (m - 1.0) * kQuantileLevels[l] / 100.0;
        lo[l] = static_cast<size_t>(std::floor(h));
        hi[l] = std::min(lo[l] + 1, col.size() - 1);
        positions.push_back(lo[l]);
        positions.push_back(hi[l]);
    }
    // A NaN has no place in an order: such a column is sorted as it always was.
    if (std::any_of(col.begin(), col.end(), [](double v) { return std::isnan(v); }))
        std::sort(col.begin(), col.end());
    else
        place_order_statistics(col, positions);
    for (size_t l = 0; l < 5; ++l) {
        const double h = (m - 1.0) * kQuantileLevels[l] / 100.0;
        out[l] = col[lo[l]] + (h - std::floor(h)) * (col[hi[l]] - col[lo[l]]);
    }
    return out;
}

}  // namespace ef

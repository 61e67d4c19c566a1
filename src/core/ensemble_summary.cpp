// SPDX-License-Identifier: MIT
#include <ensemblefit/core/ensemble_summary.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <utility>

#include <omp.h>

namespace ef {

namespace {

/// Means and the covariance in one pass over the rows, with one accumulator per value, each
/// summed in replica order (the bits of a loop per value over the rows; C_ba is C_ab: the same
/// products, as multiplication commutes).
void moments_serial(const std::vector<double>& params, const std::vector<size_t>& rows, EnsembleSummary& s) {
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

/**
 * The same values with every accumulator a chain of its own on the threads, each over every
 * row: the order within each chain, hence every bit, is moments_serial()'s. It reads the rows
 * once per value rather than twice in all, so it pays only with several threads (the summary of
 * a GPU rank's 1e7 replicas: 20 chains of 5 parameters over 16 threads).
 */
void moments_parallel(const std::vector<double>& params, const std::vector<size_t>& rows, EnsembleSummary& s) {
    const size_t Pz = static_cast<size_t>(s.P);
    const double m = static_cast<double>(rows.size());
#pragma omp parallel for schedule(static, 1)
    for (std::int64_t q = 0; q < static_cast<std::int64_t>(Pz); ++q) {
        double acc = 0.0;
        for (size_t r : rows) acc += params[r * Pz + static_cast<size_t>(q)];
        s.mean[static_cast<size_t>(q)] = acc / m;
    }
    std::vector<std::pair<size_t, size_t>> pairs;  // (a, b), b >= a
    for (size_t a = 0; a < Pz; ++a)
        for (size_t b = a; b < Pz; ++b) pairs.emplace_back(a, b);
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t k = 0; k < static_cast<std::int64_t>(pairs.size()); ++k) {
        const auto [a, b] = pairs[static_cast<size_t>(k)];
        const double ma = s.mean[a], mb = s.mean[b];
        double acc = 0.0;
        for (size_t r : rows) acc += (params[r * Pz + a] - ma) * (params[r * Pz + b] - mb);
        s.covariance[a * Pz + b] = acc / (m - 1.0);
        s.covariance[b * Pz + a] = s.covariance[a * Pz + b];
    }
    for (size_t a = 0; a < Pz; ++a) s.std[a] = std::sqrt(s.covariance[a * Pz + a]);
}

void moments(const std::vector<double>& params, const std::vector<size_t>& rows, EnsembleSummary& s) {
    if (rows.size() >= (std::size_t{1} << 16) && omp_get_max_threads() >= 4) moments_parallel(params, rows, s);
    else moments_serial(params, rows, s);
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

/// Where the k-th smallest value of a column may lie: [lo, hi] (closed), from a sample.
struct Bracket {
    double lo, hi;
};

/// One column's brackets (disjoint, ascending) around the order-statistic positions `ks`
/// (ascending) of its n values, from a strided sample of m rows; empty when the sample holds
/// a NaN. A sample rank's spread is at most sqrt(m) / 2; each bracket reaches 8 of those either
/// side.
std::vector<Bracket> brackets_for(const std::vector<double>& params, const std::vector<size_t>& rows, size_t Pz,
                                  size_t q, const std::vector<size_t>& ks, size_t m) {
    const size_t n = rows.size(), stride = n / m;
    std::vector<double> sample(m);
    for (size_t i = 0; i < m; ++i) sample[i] = params[rows[i * stride] * Pz + q];
    if (std::any_of(sample.begin(), sample.end(), [](double v) { return std::isnan(v); })) return {};
    std::sort(sample.begin(), sample.end());
    const double reach = 4.0 * std::sqrt(static_cast<double>(m)), inf = std::numeric_limits<double>::infinity();
    std::vector<Bracket> out;
    for (size_t k : ks) {
        const double r = static_cast<double>(k) * static_cast<double>(m) / static_cast<double>(n);
        const Bracket b{r - reach < 0 ? -inf : sample[static_cast<size_t>(r - reach)],
                        r + reach >= static_cast<double>(m - 1) ? inf : sample[static_cast<size_t>(r + reach) + 1]};
        if (!out.empty() && b.lo <= out.back().hi) out.back().hi = std::max(out.back().hi, b.hi);
        else out.push_back(b);
    }
    return out;
}

/// What one pass over the rows found for one column: the values in each region (2j: between
/// brackets j - 1 and j; 2j + 1: inside bracket j) and the values inside each bracket.
struct ColumnPass {
    std::vector<std::int64_t> count;
    std::vector<std::vector<double>> inside;
    bool nan = false;
};

/// The pass over the rows for every column at once (rows read once, on every thread).
std::vector<ColumnPass> count_in_brackets(const std::vector<double>& params, const std::vector<size_t>& rows,
                                          size_t Pz, const std::vector<std::vector<Bracket>>& brackets) {
    std::vector<ColumnPass> all(Pz);
    for (size_t q = 0; q < Pz; ++q) {
        all[q].count.assign(2 * brackets[q].size() + 1, 0);
        all[q].inside.resize(brackets[q].size());
    }
#pragma omp parallel
    {
        std::vector<ColumnPass> mine = all;
#pragma omp for schedule(static) nowait
        for (std::int64_t i = 0; i < static_cast<std::int64_t>(rows.size()); ++i) {
            const double* row = &params[rows[static_cast<size_t>(i)] * Pz];
            for (size_t q = 0; q < Pz; ++q) {
                const double v = row[q];
                size_t region = 0;
                for (const Bracket& b : brackets[q]) region += static_cast<size_t>(v >= b.lo) + static_cast<size_t>(v > b.hi);
                mine[q].nan |= v != v;
                ++mine[q].count[region];
                if (region & 1) mine[q].inside[region / 2].push_back(v);
            }
        }
#pragma omp critical(ef_summary_brackets)
        for (size_t q = 0; q < Pz; ++q) {
            all[q].nan |= mine[q].nan;
            for (size_t r = 0; r < all[q].count.size(); ++r) all[q].count[r] += mine[q].count[r];
            for (size_t j = 0; j < all[q].inside.size(); ++j)
                all[q].inside[j].insert(all[q].inside[j].end(), mine[q].inside[j].begin(), mine[q].inside[j].end());
        }
    }
    return all;
}

/// The values at positions `ks` (ascending) from a column's pass; false when one is in no
/// bracket (a sample unlike its column) or a value is NaN.
bool select_in_brackets(ColumnPass& pass, const std::vector<size_t>& ks, std::vector<double>& values) {
    if (pass.nan) return false;
    const size_t J = pass.inside.size();
    std::vector<std::vector<size_t>> local(J);
    std::vector<size_t> owner(ks.size());
    size_t below = 0, at = 0;
    for (size_t j = 0; j < J; ++j) {
        below += static_cast<size_t>(pass.count[2 * j]);
        const size_t end = below + static_cast<size_t>(pass.count[2 * j + 1]);
        for (; at < ks.size() && ks[at] < end; ++at) {
            if (ks[at] < below) return false;
            local[j].push_back(ks[at] - below);
            owner[at] = j;
        }
        below = end;
    }
    if (at < ks.size()) return false;
    std::vector<size_t> next(J, 0);
    for (size_t j = 0; j < J; ++j) place_order_statistics(pass.inside[j], local[j]);
    values.resize(ks.size());
    for (size_t a = 0; a < ks.size(); ++a) values[a] = pass.inside[owner[a]][local[owner[a]][next[owner[a]]++]];
    return true;
}

/**
 * kQuantileLevels of every column over `rows` (5 x P, as EnsembleSummary::quantiles): the bits
 * of quantiles_of() on each column, since a value is the k-th smallest or not whatever finds
 * it. From 2^18 rows on, the 10 order statistics per column come from one pass over the rows
 * for all columns together, on every thread (a strided sample brackets each position; the
 * pass counts the values below each bracket and keeps the few inside; the position is selected
 * among those), where quantiles_of() selects 10 times over each column's copy on one thread.
 * A column whose sample missed a position, or that holds a NaN, takes quantiles_of().
 */
void quantiles_by_column(const std::vector<double>& params, const std::vector<size_t>& rows, size_t Pz,
                         std::vector<double>& quantiles) {
    const size_t n = rows.size();
    std::vector<size_t> ks;
    for (double level : kQuantileLevels) {
        const double h = (static_cast<double>(n) - 1.0) * level / 100.0;
        const size_t lo = static_cast<size_t>(std::floor(h));
        ks.push_back(lo);
        ks.push_back(std::min(lo + 1, n - 1));
    }
    std::vector<ColumnPass> passes;
    if (n >= (std::size_t{1} << 18)) {
        const size_t m = n >= (std::size_t{1} << 23) ? std::size_t{1} << 18 : std::size_t{1} << 16;
        std::vector<std::vector<Bracket>> brackets(Pz);
        for (size_t q = 0; q < Pz; ++q) brackets[q] = brackets_for(params, rows, Pz, q, ks, m);
        passes = count_in_brackets(params, rows, Pz, brackets);
    }
    for (size_t q = 0; q < Pz; ++q) {
        std::vector<double> v;
        std::array<double, 5> levels;
        if (!passes.empty() && !passes[q].inside.empty() && select_in_brackets(passes[q], ks, v)) {
            for (size_t l = 0; l < 5; ++l) {
                const double h = (static_cast<double>(n) - 1.0) * kQuantileLevels[l] / 100.0;
                levels[l] = v[2 * l] + (h - std::floor(h)) * (v[2 * l + 1] - v[2 * l]);
            }
        } else {
            std::vector<double> col(n);
            for (size_t i = 0; i < n; ++i) col[i] = params[rows[i] * Pz + q];
            levels = quantiles_of(col);
        }
        for (size_t l = 0; l < 5; ++l) quantiles[l * Pz + q] = levels[l];
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
    rows.reserve(status.size());
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
    quantiles_by_column(params, rows, Pz, s.quantiles);
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

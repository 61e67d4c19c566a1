// SPDX-License-Identifier: MIT
#include <ensemblefit/core/ensemble_summary.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>

#include <omp.h>

namespace ef {

namespace {

/**
 * Replicas per block of every pass over the rows: fixed, whatever the thread count. A thread
 * takes whole blocks (`omp for schedule(static)`, no barrier per block) and writes each block's
 * partial results to that block's slot; one thread then combines the slots in block order. So
 * every sum is taken in the same order on 1 or 64 threads, hence the same bits, and the rows
 * are in replica order whatever ranks computed them.
 */
constexpr std::size_t kBlockRows = std::size_t{1} << 16;

/// The blocks of R replicas: block b is [b * kBlockRows, min(R, (b + 1) * kBlockRows)).
struct RowBlocks {
    std::size_t rows, count;
    explicit RowBlocks(std::size_t R) : rows(R), count((R + kBlockRows - 1) / kBlockRows) {}
    std::size_t begin(std::size_t b) const { return b * kBlockRows; }
    std::size_t end(std::size_t b) const { return std::min(rows, (b + 1) * kBlockRows); }
};

/// The converged replicas (status 0) before each block: first[b] is the ordinal of block b's
/// first converged row among all converged rows, first[count] their number.
std::vector<std::size_t> converged_before(const std::vector<std::int64_t>& status, const RowBlocks& blocks) {
    std::vector<std::size_t> first(blocks.count + 1, 0);
#pragma omp parallel for schedule(static) if (blocks.count > 1)
    for (std::int64_t bi = 0; bi < static_cast<std::int64_t>(blocks.count); ++bi) {
        const auto b = static_cast<std::size_t>(bi);
        std::size_t n = 0;
        for (std::size_t r = blocks.begin(b); r < blocks.end(b); ++r) n += static_cast<std::size_t>(status[r] == 0);
        first[b + 1] = n;
    }
    for (std::size_t b = 0; b < blocks.count; ++b) first[b + 1] += first[b];
    return first;
}

/**
 * Means and covariance over the converged rows, by the two-pass algorithm over fixed blocks:
 * pass 1 sums each parameter per block, the sums combined in block order give the means; pass 2
 * sums the centred products (x_a - mean_a)(x_b - mean_b) per block, combined likewise (n - 1
 * normalisation; C_ba is C_ab). Two passes rather than one over data shifted by a first row's
 * values: the centred form's error does not grow with how far that row lies from the mean (a
 * converged outlier would cancel catastrophically in S_ab - S_a S_b / n), and block sums of
 * 2^16 terms combined in order are at least as accurate as one chain over all rows. On one
 * block these are the bits of one accumulator per value summed in replica order.
 */
void moments(const std::vector<double>& params, const std::vector<std::int64_t>& status, const RowBlocks& blocks,
             EnsembleSummary& s) {
    const std::size_t Pz = static_cast<std::size_t>(s.P), K = Pz * (Pz + 1) / 2, B = blocks.count;
    const double m = static_cast<double>(s.used);
    std::vector<double> sums(B * Pz, 0.0), products(s.used >= 2 ? B * K : 0, 0.0);
    // Value i summed over the blocks' slots (`width` values per block), in block order.
    auto combined = [B](const std::vector<double>& slots, std::size_t width, std::size_t i) {
        double total = slots[i];
        for (std::size_t b = 1; b < B; ++b) total += slots[b * width + i];
        return total;
    };
#pragma omp parallel if (B > 1)
    {
        std::vector<double> acc(std::max(Pz, K)), d(Pz);
        // Each block's `width` sums over its converged rows (add(r) adds row r's terms to acc),
        // into its slot; the threads take whole blocks.
        auto block_sums = [&](std::vector<double>& slots, std::size_t width, auto&& add) {
#pragma omp for schedule(static)
            for (std::int64_t bi = 0; bi < static_cast<std::int64_t>(B); ++bi) {
                const auto b = static_cast<std::size_t>(bi);
                std::fill(acc.begin(), acc.end(), 0.0);
                for (std::size_t r = blocks.begin(b); r < blocks.end(b); ++r)
                    if (status[r] == 0) add(r);
                std::copy_n(acc.begin(), width, slots.begin() + static_cast<std::ptrdiff_t>(b * width));
            }
        };
        block_sums(sums, Pz, [&](std::size_t r) {
            for (std::size_t q = 0; q < Pz; ++q) acc[q] += params[r * Pz + q];
        });
#pragma omp single
        for (std::size_t q = 0; q < Pz; ++q) s.mean[q] = combined(sums, Pz, q) / m;
        if (s.used >= 2) {
            block_sums(products, K, [&](std::size_t r) {
                for (std::size_t q = 0; q < Pz; ++q) d[q] = params[r * Pz + q] - s.mean[q];
                std::size_t k = 0;
                for (std::size_t a = 0; a < Pz; ++a)
                    for (std::size_t c = a; c < Pz; ++c) acc[k++] += d[a] * d[c];
            });
        }
    }
    if (s.used < 2) return;
    std::size_t k = 0;
    for (std::size_t a = 0; a < Pz; ++a) {
        for (std::size_t c = a; c < Pz; ++c, ++k) {
            s.covariance[a * Pz + c] = combined(products, K, k) / (m - 1.0);
            s.covariance[c * Pz + a] = s.covariance[a * Pz + c];
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

/// Where the k-th smallest value of a column may lie: [lo, hi] (closed), from a sample.
struct Bracket {
    double lo, hi;
};

/**
 * Every column's strided sample of m converged rows (the ordinals 0, n/m, 2 n/m, ... among the
 * n converged rows): samples[q][i]. Taken block by block on the threads, each block starting
 * at its first converged row's ordinal.
 */
std::vector<std::vector<double>> strided_samples(const std::vector<double>& params,
                                                 const std::vector<std::int64_t>& status, std::size_t Pz,
                                                 const RowBlocks& blocks, const std::vector<std::size_t>& first,
                                                 std::size_t m) {
    const std::size_t stride = first[blocks.count] / m;
    std::vector<std::vector<double>> samples(Pz, std::vector<double>(m));
#pragma omp parallel for schedule(static) if (blocks.count > 1)
    for (std::int64_t bi = 0; bi < static_cast<std::int64_t>(blocks.count); ++bi) {
        const auto b = static_cast<std::size_t>(bi);
        std::size_t ordinal = first[b], next = (ordinal + stride - 1) / stride * stride;
        for (std::size_t r = blocks.begin(b); r < blocks.end(b) && next < m * stride; ++r) {
            if (status[r] != 0) continue;
            if (ordinal == next) {
                for (std::size_t q = 0; q < Pz; ++q) samples[q][next / stride] = params[r * Pz + q];
                next += stride;
            }
            ++ordinal;
        }
    }
    return samples;
}

/// One column's brackets (disjoint, ascending) around the order-statistic positions `ks`
/// (ascending) of its n values, from its strided sample of m rows; empty when the sample holds
/// a NaN. A sample rank's spread is at most sqrt(m) / 2; each bracket reaches 8 of those either
/// side. Only the sample ranks the brackets use are selected (not the whole sample sorted).
std::vector<Bracket> brackets_for(std::vector<double>& sample, std::size_t n, const std::vector<size_t>& ks) {
    const size_t m = sample.size();
    if (std::any_of(sample.begin(), sample.end(), [](double v) { return std::isnan(v); })) return {};
    const double reach = 4.0 * std::sqrt(static_cast<double>(m)), inf = std::numeric_limits<double>::infinity();
    std::vector<std::ptrdiff_t> lo_rank, hi_rank;  // -1: unbounded
    std::vector<size_t> used;
    for (size_t k : ks) {
        const double r = static_cast<double>(k) * static_cast<double>(m) / static_cast<double>(n);
        lo_rank.push_back(r - reach < 0 ? -1 : static_cast<std::ptrdiff_t>(r - reach));
        hi_rank.push_back(r + reach >= static_cast<double>(m - 1) ? -1 : static_cast<std::ptrdiff_t>(r + reach) + 1);
        for (std::ptrdiff_t i : {lo_rank.back(), hi_rank.back()})
            if (i >= 0) used.push_back(static_cast<size_t>(i));
    }
    std::sort(used.begin(), used.end());
    place_order_statistics(sample, used);  // sample[i] for i in used: the sorted sample's
    std::vector<Bracket> out;
    for (size_t a = 0; a < ks.size(); ++a) {
        const Bracket b{lo_rank[a] < 0 ? -inf : sample[static_cast<size_t>(lo_rank[a])],
                        hi_rank[a] < 0 ? inf : sample[static_cast<size_t>(hi_rank[a])]};
        if (!out.empty() && b.lo <= out.back().hi) out.back().hi = std::max(out.back().hi, b.hi);
        else out.push_back(b);
    }
    return out;
}

/// What a pass over some rows found for one column: the values in each region (2j: between
/// brackets j - 1 and j; 2j + 1: inside bracket j) and the values inside each bracket.
struct ColumnPass {
    std::vector<std::int64_t> count;
    std::vector<std::vector<double>> inside;
    bool nan = false;
};

/// The pass over the converged rows for every column at once, block by block on the threads:
/// passes[b * Pz + q] is block b's for column q.
std::vector<ColumnPass> count_in_brackets(const std::vector<double>& params, const std::vector<std::int64_t>& status,
                                          size_t Pz, const RowBlocks& blocks,
                                          const std::vector<std::vector<Bracket>>& brackets) {
    std::vector<ColumnPass> passes(blocks.count * Pz);
#pragma omp parallel for schedule(static) if (blocks.count > 1)
    for (std::int64_t bi = 0; bi < static_cast<std::int64_t>(blocks.count); ++bi) {
        const auto b = static_cast<std::size_t>(bi);
        ColumnPass* mine = &passes[b * Pz];
        for (size_t q = 0; q < Pz; ++q) {
            mine[q].count.assign(2 * brackets[q].size() + 1, 0);
            mine[q].inside.resize(brackets[q].size());
        }
        for (std::size_t r = blocks.begin(b); r < blocks.end(b); ++r) {
            if (status[r] != 0) continue;
            const double* row = &params[r * Pz];
            for (size_t q = 0; q < Pz; ++q) {
                const double v = row[q];
                size_t region = 0;
                for (const Bracket& br : brackets[q])
                    region += static_cast<size_t>(v >= br.lo) + static_cast<size_t>(v > br.hi);
                mine[q].nan |= v != v;
                ++mine[q].count[region];
                if (region & 1) mine[q].inside[region / 2].push_back(v);
            }
        }
    }
    return passes;
}

/// Where the positions `ks` (ascending) of one column lie: in bracket owner[a], at local[a]
/// among its values; false when one is in no bracket (a sample unlike its column).
bool locate_in_brackets(const std::vector<std::int64_t>& count, const std::vector<size_t>& ks,
                        std::vector<size_t>& owner, std::vector<size_t>& local) {
    const size_t J = count.size() / 2;
    owner.assign(ks.size(), 0);
    local.assign(ks.size(), 0);
    size_t below = 0, at = 0;
    for (size_t j = 0; j < J; ++j) {
        below += static_cast<size_t>(count[2 * j]);
        const size_t end = below + static_cast<size_t>(count[2 * j + 1]);
        for (; at < ks.size() && ks[at] < end; ++at) {
            if (ks[at] < below) return false;
            owner[at] = j;
            local[at] = ks[at] - below;
        }
        below = end;
    }
    return at == ks.size();
}

/**
 * kQuantileLevels of every column over the converged rows (5 x P, as EnsembleSummary::quantiles):
 * the bits of quantiles_of() on each column, since a value is the k-th smallest or not whatever
 * finds it. From 2^18 converged rows on, the 10 order statistics per column come from one pass
 * over the rows for all columns together, block by block on the threads (a strided sample
 * brackets each position; the pass counts the values below each bracket and keeps the few
 * inside; the position is selected among those, each bracket's selection on a thread of its
 * own), where quantiles_of() selects 10 times over each column's copy on one thread. A column
 * whose sample missed a position, or that holds a NaN, takes quantiles_of().
 */
void quantiles_by_column(const std::vector<double>& params, const std::vector<std::int64_t>& status, size_t Pz,
                         const RowBlocks& blocks, const std::vector<std::size_t>& first,
                         std::vector<double>& quantiles) {
    const size_t n = first[blocks.count];
    std::vector<size_t> ks;
    for (double level : kQuantileLevels) {
        const double h = (static_cast<double>(n) - 1.0) * level / 100.0;
        const size_t lo = static_cast<size_t>(std::floor(h));
        ks.push_back(lo);
        ks.push_back(std::min(lo + 1, n - 1));
    }
    std::vector<bool> done(Pz, false);
    if (n >= (std::size_t{1} << 18)) {
        const size_t m = n >= (std::size_t{1} << 23) ? std::size_t{1} << 18 : std::size_t{1} << 16;
        std::vector<std::vector<double>> samples = strided_samples(params, status, Pz, blocks, first, m);
        std::vector<std::vector<Bracket>> brackets(Pz);
#pragma omp parallel for schedule(dynamic, 1)
        for (std::int64_t q = 0; q < static_cast<std::int64_t>(Pz); ++q)
            brackets[static_cast<size_t>(q)] = brackets_for(samples[static_cast<size_t>(q)], n, ks);
        samples.clear();
        std::vector<ColumnPass> passes = count_in_brackets(params, status, Pz, blocks, brackets);
        // Each column's totals, where its positions lie, and one selection task per bracket.
        std::vector<std::vector<size_t>> owner(Pz), local(Pz);
        std::vector<std::pair<size_t, size_t>> tasks;  // (column, bracket)
        for (size_t q = 0; q < Pz; ++q) {
            if (brackets[q].empty()) continue;
            std::vector<std::int64_t> count(2 * brackets[q].size() + 1, 0);
            bool nan = false;
            for (size_t b = 0; b < blocks.count; ++b) {
                nan |= passes[b * Pz + q].nan;
                for (size_t r = 0; r < count.size(); ++r) count[r] += passes[b * Pz + q].count[r];
            }
            if (nan || !locate_in_brackets(count, ks, owner[q], local[q])) continue;
            done[q] = true;
            for (size_t j = 0; j < brackets[q].size(); ++j)
                if (std::find(owner[q].begin(), owner[q].end(), j) != owner[q].end()) tasks.emplace_back(q, j);
        }
        std::vector<std::vector<double>> picked(Pz, std::vector<double>(ks.size()));
#pragma omp parallel for schedule(dynamic, 1)
        for (std::int64_t t = 0; t < static_cast<std::int64_t>(tasks.size()); ++t) {
            const auto [q, j] = tasks[static_cast<size_t>(t)];
            std::vector<double> values;  // bracket j's values, in block order
            size_t total = 0;
            for (size_t b = 0; b < blocks.count; ++b) total += passes[b * Pz + q].inside[j].size();
            values.reserve(total);
            for (size_t b = 0; b < blocks.count; ++b) {
                std::vector<double>& part = passes[b * Pz + q].inside[j];
                values.insert(values.end(), part.begin(), part.end());
                std::vector<double>().swap(part);
            }
            std::vector<size_t> positions;
            for (size_t a = 0; a < ks.size(); ++a)
                if (owner[q][a] == j) positions.push_back(local[q][a]);
            place_order_statistics(values, positions);
            for (size_t a = 0; a < ks.size(); ++a)
                if (owner[q][a] == j) picked[q][a] = values[local[q][a]];
        }
        for (size_t q = 0; q < Pz; ++q) {
            if (!done[q]) continue;
            for (size_t l = 0; l < 5; ++l) {
                const double h = (static_cast<double>(n) - 1.0) * kQuantileLevels[l] / 100.0;
                const std::vector<double>& v = picked[q];
                quantiles[l * Pz + q] = v[2 * l] + (h - std::floor(h)) * (v[2 * l + 1] - v[2 * l]);
            }
        }
    }
    for (size_t q = 0; q < Pz; ++q) {
        if (done[q]) continue;
        std::vector<double> col;
        col.reserve(n);
        for (size_t r = 0; r < status.size(); ++r)
            if (status[r] == 0) col.push_back(params[r * Pz + q]);
        const std::array<double, 5> levels = quantiles_of(col);
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
    const RowBlocks blocks(status.size());
    const std::vector<std::size_t> first = converged_before(status, blocks);
    s.used = static_cast<std::int64_t>(first[blocks.count]);
    s.mean.assign(Pz, nan);
    s.std.assign(Pz, nan);
    s.covariance.assign(Pz * Pz, nan);
    s.quantiles.assign(5 * Pz, nan);
    if (s.used == 0) {
        s.correlation.assign(Pz * Pz, nan);
        return s;
    }
    moments(params, status, blocks, s);
    s.correlation = correlation_of(s.covariance, P);
    quantiles_by_column(params, status, Pz, blocks, first, s.quantiles);
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

// SPDX-License-Identifier: MIT
// The ensemble summary (issues #27, #35): summarize() computes its quantiles by selection
// (nth_element), which must stay bitwise what a full sort per parameter gives, and its moments by
// block sums (fixed blocks of 2^16 replicas, combined in order), which must agree with a
// long-double two-pass computation to rounding (and, within one block, are the bits of one
// accumulator per value in replica order); the results writer keeps the rows it writes for it,
// which must be the ones the file holds.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <ensemblefit/core/ensemble_summary.hpp>

#include "src/io/replica_writer.hpp"
#include "src/io/results_file.hpp"
#include "temp_dir.hpp"

namespace {

/// The summary as computed before issue #27's changes: the reference the bits must match.
ef::EnsembleSummary reference_summary(const std::vector<double>& params, const std::vector<std::int64_t>& status,
                                      int P) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    ef::EnsembleSummary s;
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
    if (rows.empty()) return s;
    for (size_t q = 0; q < Pz; ++q) {
        double acc = 0.0;
        for (size_t r : rows) acc += params[r * Pz + q];
        s.mean[q] = acc / m;
    }
    if (rows.size() >= 2) {
        for (size_t a = 0; a < Pz; ++a) {
            for (size_t b = 0; b < Pz; ++b) {
                double acc = 0.0;
                for (size_t r : rows) acc += (params[r * Pz + a] - s.mean[a]) * (params[r * Pz + b] - s.mean[b]);
                s.covariance[a * Pz + b] = acc / (m - 1.0);
            }
            s.std[a] = std::sqrt(s.covariance[a * Pz + a]);
        }
    }
    std::vector<double> col(rows.size());
    for (size_t q = 0; q < Pz; ++q) {
        for (size_t i = 0; i < rows.size(); ++i) col[i] = params[rows[i] * Pz + q];
        std::sort(col.begin(), col.end());
        for (size_t l = 0; l < 5; ++l) {
            const double h = (m - 1.0) * ef::kQuantileLevels[l] / 100.0;
            const size_t lo = static_cast<size_t>(std::floor(h));
            const size_t hi = std::min(lo + 1, col.size() - 1);
            s.quantiles[l * Pz + q] = col[lo] + (h - std::floor(h)) * (col[hi] - col[lo]);
        }
    }
    return s;
}

/// Means and covariance in long double, two passes over the converged rows: the independent
/// reference the block sums must meet to rounding.
void long_double_moments(const std::vector<double>& params, const std::vector<std::int64_t>& status, int P,
                         std::vector<long double>& mean, std::vector<long double>& cov) {
    const size_t Pz = static_cast<size_t>(P);
    mean.assign(Pz, 0.0L);
    cov.assign(Pz * Pz, 0.0L);
    long double m = 0;
    for (size_t r = 0; r < status.size(); ++r) {
        if (status[r] != 0) continue;
        m += 1;
        for (size_t q = 0; q < Pz; ++q) mean[q] += params[r * Pz + q];
    }
    for (long double& v : mean) v /= m;
    for (size_t r = 0; r < status.size(); ++r) {
        if (status[r] != 0) continue;
        for (size_t a = 0; a < Pz; ++a)
            for (size_t b = 0; b < Pz; ++b)
                cov[a * Pz + b] += (params[r * Pz + a] - mean[a]) * (params[r * Pz + b] - mean[b]);
    }
    for (long double& v : cov) v /= m - 1;
}

/// The moments within rounding of the long-double reference: means to 1e-13 of their scale
/// (|mean| + std), covariances to 1e-12 of sqrt(C_aa C_bb); NaN and infinity where it has them.
void check_moments_close(const ef::EnsembleSummary& got, const std::vector<double>& params,
                         const std::vector<std::int64_t>& status, int P) {
    std::vector<long double> mean, cov;
    long_double_moments(params, status, P, mean, cov);
    const size_t Pz = static_cast<size_t>(P);
    auto close = [](double x, long double want, long double scale) {
        if (!std::isfinite(static_cast<double>(want))) return std::isnan(static_cast<double>(want)) ? std::isnan(x) : x == want;
        return std::fabs(static_cast<long double>(x) - want) <= scale;
    };
    for (size_t a = 0; a < Pz; ++a) {
        const long double sd = got.used >= 2 ? std::sqrt(std::fabs(cov[a * Pz + a])) : 0.0L;
        INFO("parameter " << a << ": mean " << got.mean[a] << " vs " << static_cast<double>(mean[a]));
        CHECK(close(got.mean[a], mean[a], 1e-13L * (std::fabs(mean[a]) + sd)));
        if (got.used < 2) continue;
        for (size_t b = 0; b < Pz; ++b) {
            const long double scale = 1e-12L * std::sqrt(std::fabs(cov[a * Pz + a] * cov[b * Pz + b]));
            INFO("covariance " << a << "," << b << ": " << got.covariance[a * Pz + b] << " vs "
                               << static_cast<double>(cov[a * Pz + b]));
            CHECK(close(got.covariance[a * Pz + b], cov[a * Pz + b], scale));
        }
        const double sd_got = std::sqrt(got.covariance[a * Pz + a]);
        CHECK(std::memcmp(&got.std[a], &sd_got, sizeof sd_got) == 0);
    }
}

/// Bitwise equality (NaN equal to the same NaN).
bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

/// Quantiles bitwise the full sort's; moments bitwise one chain per value while the replicas fit
/// in one block of the summary's passes (2^16), else within rounding of long double.
void check_same(const std::vector<double>& params, const std::vector<std::int64_t>& status, int P) {
    const ef::EnsembleSummary got = ef::summarize(params, status, P);
    const ef::EnsembleSummary want = reference_summary(params, status, P);
    CHECK(got.used == want.used);
    CHECK(got.total == want.total);
    CHECK(same_bits(got.quantiles, want.quantiles));
    CHECK(same_bits(got.correlation, ef::correlation_of(got.covariance, P)));
    if (status.size() <= (size_t{1} << 16)) {
        CHECK(same_bits(got.mean, want.mean));
        CHECK(same_bits(got.std, want.std));
        CHECK(same_bits(got.covariance, want.covariance));
    }
    check_moments_close(got, params, status, P);
}

/// `rows` replicas of `P` correlated parameters, some failed, some with tied values.
void random_ensemble(size_t rows, int P, unsigned seed, std::vector<double>& params, std::vector<std::int64_t>& status) {
    std::mt19937_64 gen(seed);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::uniform_int_distribution<int> pick(0, 9);
    const size_t Pz = static_cast<size_t>(P);
    params.assign(rows * Pz, 0.0);
    status.assign(rows, 0);
    for (size_t r = 0; r < rows; ++r) {
        const double common = normal(gen);
        for (size_t q = 0; q < Pz; ++q) {
            double v = 3.0 * static_cast<double>(q) + common + 0.1 * normal(gen);
            if (q == 1) v = std::round(v * 4.0) / 4.0;  // many ties
            params[r * Pz + q] = v;
        }
        const int k = pick(gen);
        status[r] = k == 0 ? 2 : k == 1 ? 1 : k == 2 && r % 7 == 0 ? -1 : 0;
        if (status[r] != 0 && r % 3 == 0) params[r * Pz] = std::numeric_limits<double>::quiet_NaN();  // ignored
    }
}

}  // namespace

TEST_CASE("summarize: bitwise the straightforward summary on random ensembles", "[statistics][summary]") {
    std::vector<double> params;
    std::vector<std::int64_t> status;
    for (const size_t rows : {size_t{1}, size_t{2}, size_t{3}, size_t{10}, size_t{257}, size_t{5000}, size_t{150000}}) {
        for (const int P : {1, 2, 5, 7}) {
            INFO(rows << " rows, " << P << " parameters");
            random_ensemble(rows, P, static_cast<unsigned>(rows * 31 + static_cast<size_t>(P)), params, status);
            check_same(params, status, P);
        }
    }
}

TEST_CASE("summarize: bitwise the straightforward summary in the corner cases", "[statistics][summary]") {
    SECTION("no converged replica") { check_same({1.0, 2.0}, {1, 2}, 1); }
    SECTION("one converged replica") { check_same({1.0, 2.0, 5.0, 6.0}, {2, 0}, 2); }
    SECTION("sorted, reversed and constant columns") {
        std::vector<double> params;
        std::vector<std::int64_t> status(1000, 0);
        for (int r = 0; r < 1000; ++r) {
            params.push_back(r);
            params.push_back(1000 - r);
            params.push_back(4.25);
        }
        check_same(params, status, 3);
    }
    SECTION("infinities") {
        std::vector<double> params = {1.0, -INFINITY, 3.0, INFINITY, 2.0, 0.5};
        check_same(params, std::vector<std::int64_t>(6, 0), 1);
    }
    SECTION("a NaN in a converged row: sorted, as before") {
        check_same({1.0, std::nan(""), 3.0, 0.5, 2.0}, std::vector<std::int64_t>(5, 0), 1);
    }
}

TEST_CASE("quantiles_of by selection: the order statistics of a full sort", "[statistics][summary]") {
    std::mt19937_64 gen(11);
    std::uniform_int_distribution<int> small(0, 20);
    for (size_t n = 1; n < 300; n += 7) {
        std::vector<double> col(n);
        for (double& v : col) v = small(gen) * 0.5;  // ties everywhere
        std::vector<double> sorted = col;
        std::sort(sorted.begin(), sorted.end());
        const std::array<double, 5> q = ef::quantiles_of(col);
        for (size_t l = 0; l < 5; ++l) {
            const double h = (static_cast<double>(n) - 1.0) * ef::kQuantileLevels[l] / 100.0;
            const size_t lo = static_cast<size_t>(std::floor(h));
            const size_t hi = std::min(lo + 1, n - 1);
            const double want = sorted[lo] + (h - std::floor(h)) * (sorted[hi] - sorted[lo]);
            INFO(n << " values, level " << l);
            CHECK(std::memcmp(&q[l], &want, sizeof want) == 0);
        }
    }
}

TEST_CASE("the writer keeps the rows it writes: the file's /replicas params and status", "[writer][summary]") {
    ef_test::TempDir dir;
    const std::string path = dir.file("kept.h5");
    const int P = 3;
    const std::int64_t R = 5000;
    ef::RunIdentity id;
    id.canonical_config = "[fit]\nreplicas = 5000\n";
    id.resolved_config = id.canonical_config;
    id.data_checksum = "0";
    id.model = "test";
    id.param_names = {"a", "b", "c"};
    id.replicas_total = R;
    id.span = ef::shard_span(R, ef::ShardSpec{});
    ef::ResultsFile::create(path, id).close();
    ef::ResultsFile out = ef::ResultsFile::resume(path, id);
    ef::ReplicaWriter::Options o;
    o.buffer_rows = 700;  // several blocks, block edges inside units
    o.kept_begin = id.span.begin;
    o.kept_rows = static_cast<size_t>(id.span.size());
    ef::ReplicaWriter writer(out, o);
    std::mt19937_64 gen(5);
    std::normal_distribution<double> normal;
    // Units of 97 replicas (the central fit in the first) handed over out of order.
    std::vector<std::int64_t> firsts;
    for (std::int64_t f = 0; f <= R; f += 97) firsts.push_back(f);
    std::shuffle(firsts.begin(), firsts.end(), gen);
    for (const std::int64_t first : firsts) {
        const std::int64_t count = std::min<std::int64_t>(97, R + 1 - first);
        ef::ReplicaBlock b;
        b.resize(static_cast<size_t>(count), P);
        for (std::int64_t i = 0; i < count; ++i) {
            const auto r = static_cast<size_t>(i);
            b.index[r] = first + i;
            for (size_t q = 0; q < 3; ++q) b.params[r * 3 + q] = normal(gen);
            b.status[r] = (first + i) % 11 == 0 ? 2 : 0;
            b.chi2[r] = 1.0;
        }
        if (first == 0) b.covariance.assign(9, 0.5);
        writer.add(std::move(b));
    }
    writer.finish();
    const ef::ReplicaBlock kept = writer.take_kept_rows();
    const ef::ReplicaBlock file = out.read_replicas();
    REQUIRE(kept.status.size() == static_cast<size_t>(R));
    CHECK(kept.status == file.status);
    CHECK(same_bits(kept.params, file.params));
    const ef::EnsembleSummary a = ef::summarize(kept.params, kept.status, P);
    const ef::EnsembleSummary b = ef::summarize(file.params, file.status, P);
    CHECK(same_bits(a.quantiles, b.quantiles));
    CHECK(same_bits(a.mean, b.mean));
    CHECK(same_bits(a.covariance, b.covariance));
    CHECK(writer.take_kept_rows().status.empty());  // moved out: once only
}

TEST_CASE("a writer without kept rows keeps nothing", "[writer][summary]") {
    ef_test::TempDir dir;
    const std::string path = dir.file("none.h5");
    ef::RunIdentity id;
    id.canonical_config = "[fit]\nreplicas = 10\n";
    id.resolved_config = id.canonical_config;
    id.data_checksum = "0";
    id.model = "test";
    id.param_names = {"a"};
    id.replicas_total = 10;
    id.span = ef::shard_span(10, ef::ShardSpec{});
    ef::ResultsFile::create(path, id).close();
    ef::ResultsFile out = ef::ResultsFile::resume(path, id);
    ef::ReplicaWriter writer(out, ef::ReplicaWriter::Options{});
    ef::ReplicaBlock b;
    b.resize(10, 1);
    for (size_t i = 0; i < 10; ++i) b.index[i] = static_cast<std::int64_t>(i + 1);
    writer.add(std::move(b));
    writer.finish();
    CHECK(writer.take_kept_rows().status.empty());
}

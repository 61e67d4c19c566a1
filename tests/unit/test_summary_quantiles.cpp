// SPDX-License-Identifier: MIT
// The ensemble summary's quantiles from one pass over the rows (src/core/ensemble_summary.cpp,
// from 2^18 converged rows on) against quantiles_of() on each column copied out: the same bits,
// for columns a strided sample describes well and for ones it cannot (sorted, constant, a few
// distinct values, a NaN); and the whole summary on 1, 2 and 3 threads: the same bits (fixed
// blocks, issue #35).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <omp.h>

#include <ensemblefit/core/ensemble_summary.hpp>

namespace {

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

}  // namespace

TEST_CASE("summary quantiles over many rows: the bits of quantiles_of per column", "[statistics]") {
    const std::size_t R = (std::size_t{1} << 18) + 12345, P = 6;
    std::mt19937_64 gen(35);
    std::normal_distribution<double> normal;
    std::vector<double> params(R * P);
    std::vector<std::int64_t> status(R, 0);
    for (std::size_t r = 0; r < R; ++r) {
        params[r * P + 0] = normal(gen);                                  // i.i.d.
        params[r * P + 1] = static_cast<double>(r) * 1e-3;                // sorted: a strided sample is exact
        params[r * P + 2] = 2.5;                                          // constant (a fixed parameter)
        params[r * P + 3] = static_cast<double>(gen() % 3);               // three values, many ties
        params[r * P + 4] = static_cast<double>(R - r) + normal(gen);     // descending with noise
        params[r * P + 5] = r == R / 3 ? std::numeric_limits<double>::quiet_NaN() : normal(gen);  // a NaN
        if (r % 7 == 3) status[r] = 1;  // not converged: left out
    }
    const ef::EnsembleSummary s = ef::summarize(params, status, static_cast<int>(P));
    for (std::size_t q = 0; q < P; ++q) {
        std::vector<double> col;
        for (std::size_t r = 0; r < R; ++r)
            if (status[r] == 0) col.push_back(params[r * P + q]);
        const std::array<double, 5> want = ef::quantiles_of(col);
        for (std::size_t l = 0; l < 5; ++l) {
            INFO("column " << q << " level " << l << ": " << s.quantiles[l * P + q] << " vs " << want[l]);
            CHECK(same_bits(s.quantiles[l * P + q], want[l]));
        }
    }
}

TEST_CASE("summary on 1, 2 and 3 threads: the same bits, over many blocks", "[statistics][summary]") {
    // 20 blocks of the summary's passes (2^16 replicas each) and a part block; failed rows hold
    // values far off (and a NaN) that must not count; column 3 has a NaN in a converged row (777776).
    const std::size_t R = 20 * (std::size_t{1} << 16) + 4321, P = 4;
    std::mt19937_64 gen(3535);
    std::normal_distribution<double> normal;
    std::vector<double> params(R * P);
    std::vector<std::int64_t> status(R, 0);
    for (std::size_t r = 0; r < R; ++r) {
        const double common = normal(gen);
        for (std::size_t q = 0; q < 3; ++q) params[r * P + q] = 1e3 * static_cast<double>(q) + common + 1e-3 * normal(gen);
        params[r * P + 3] = r == 777776 ? std::numeric_limits<double>::quiet_NaN() : normal(gen);
        if (r % 11 == 0 || (r > 300000 && r < 400000 && r % 2 == 0)) {
            status[r] = r % 3 == 0 ? 2 : 1;
            params[r * P] = r % 5 == 0 ? std::numeric_limits<double>::quiet_NaN() : 1e12;
        }
    }
    const int threads = omp_get_max_threads();
    std::vector<ef::EnsembleSummary> runs;
    for (int t : {1, 2, 3}) {
        omp_set_num_threads(t);
        runs.push_back(ef::summarize(params, status, static_cast<int>(P)));
    }
    omp_set_num_threads(threads);

    for (std::size_t t = 1; t < runs.size(); ++t) {
        INFO(t + 1 << " threads against 1");
        CHECK(runs[t].used == runs[0].used);
        CHECK(same_bits(runs[t].mean, runs[0].mean));
        CHECK(same_bits(runs[t].std, runs[0].std));
        CHECK(same_bits(runs[t].covariance, runs[0].covariance));
        CHECK(same_bits(runs[t].correlation, runs[0].correlation));
        CHECK(same_bits(runs[t].quantiles, runs[0].quantiles));
    }
    // Only converged rows count: the failed rows' 1e12 and NaN would show in column 0's mean.
    const ef::EnsembleSummary& s = runs[0];
    std::size_t used = 0;
    for (std::int64_t v : status) used += v == 0;
    CHECK(s.used == static_cast<std::int64_t>(used));
    CHECK(std::fabs(s.mean[0]) < 0.01);
    CHECK(std::fabs(s.mean[2] - 2e3) < 0.01);
    CHECK(std::fabs(s.std[1] - 1.0) < 0.01);
    CHECK(std::fabs(s.covariance[0 * P + 1] - 1.0) < 0.01);  // the common part
    // A NaN in a converged row: its column's mean and covariances are NaN, the others not; its
    // quantiles are quantiles_of()'s on the column (sorted, as before).
    CHECK(std::isnan(s.mean[3]));
    CHECK(std::isnan(s.covariance[3 * P + 3]));
    CHECK(std::isnan(s.covariance[0 * P + 3]));
    CHECK(std::isfinite(s.covariance[2 * P + 2]));
    std::vector<double> col;
    for (std::size_t r = 0; r < R; ++r)
        if (status[r] == 0) col.push_back(params[r * P + 3]);
    const std::array<double, 5> want = ef::quantiles_of(col);
    for (std::size_t l = 0; l < 5; ++l) CHECK(same_bits(s.quantiles[l * P + 3], want[l]));
}

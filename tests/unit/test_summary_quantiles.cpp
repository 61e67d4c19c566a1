// SPDX-License-Identifier: MIT
// The ensemble summary's quantiles from one pass over the rows (src/report/ensemble_summary.cpp,
// from 2^18 converged rows on) against quantiles_of() on each column copied out: the same bits,
// for columns a strided sample describes well and for ones it cannot (sorted, constant, a few
// distinct values, a NaN); and the moments as chains side by side on 4 threads against one
// thread's single pass: the same bits.
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

TEST_CASE("summary moments on 4 threads: the bits of one thread's pass", "[statistics]") {
    const std::size_t R = 100000, P = 5;
    std::mt19937_64 gen(3535);
    std::normal_distribution<double> normal;
    std::vector<double> params(R * P);
    std::vector<std::int64_t> status(R, 0);
    for (std::size_t i = 0; i < params.size(); ++i) params[i] = 1e3 * normal(gen) + static_cast<double>(i % P);
    for (std::size_t r = 0; r < R; r += 11) status[r] = 2;
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const ef::EnsembleSummary one = ef::summarize(params, status, static_cast<int>(P));
    omp_set_num_threads(4);
    const ef::EnsembleSummary four = ef::summarize(params, status, static_cast<int>(P));
    omp_set_num_threads(threads);
    CHECK(same_bits(one.mean, four.mean));
    CHECK(same_bits(one.std, four.std));
    CHECK(same_bits(one.covariance, four.covariance));
    CHECK(same_bits(one.quantiles, four.quantiles));
}

// SPDX-License-Identifier: MIT
// The ensemble summary's quantiles from one pass over the rows (src/report/ensemble_summary.cpp,
// from 2^18 converged rows on) against quantiles_of() on each column copied out: the same bits,
// for columns a strided sample describes well and for ones it cannot (sorted, constant, a few
// distinct values, a NaN).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <ensemblefit/report/ensemble_summary.hpp>

namespace {

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

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

// SPDX-License-Identifier: MIT
// Rank 0's summary statistics (ef::summarize, src/core/ensemble_summary.cpp) on a synthetic
// ensemble: ROWS replicas of P correlated parameters (1 in 20 not converged), timed REPEATS times
// on the OpenMP threads OMP_NUM_THREADS gives. A standalone program (no MPI, no HDF5), so it runs
// from a bundle on the device machine. perf/summary_bench.sh builds it for the working tree and
// for an older revision and runs the two alternated; by hand:
//   g++ -O3 -DNDEBUG -std=c++20 -fopenmp -ffp-contract=off -Iinclude perf/summary_bench.cpp
//       src/core/ensemble_summary.cpp -o summary_bench     (one line; the flags of a Release build)
//   OMP_NUM_THREADS=16 ./summary_bench 10000000 5 5
// One JSON line per run: the seconds of each call, the fastest, and a hash of the summary's bits
// per part (moments, quantiles), so builds and thread counts can be compared bit for bit.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <ensemblefit/core/ensemble_summary.hpp>

namespace {

/// FNV-1a over the bytes of `v`.
std::uint64_t hash_bits(const std::vector<double>& v, std::uint64_t h = 1469598103934665603ull) {
    const auto* p = reinterpret_cast<const unsigned char*>(v.data());
    for (std::size_t i = 0; i < v.size() * sizeof(double); ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

long parse(const char* s, const char* what) {
    char* end = nullptr;
    const long v = std::strtol(s, &end, 10);
    if (*end != '\0' || v < 1) {
        std::fprintf(stderr, "summary_bench: %s: '%s' is not a positive integer\n", what, s);
        std::exit(2);
    }
    return v;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc > 4) {
        std::fprintf(stderr, "usage: summary_bench [ROWS=10000000] [P=5] [REPEATS=5]\n");
        return 2;
    }
    const auto R = static_cast<std::size_t>(argc > 1 ? parse(argv[1], "ROWS") : 10'000'000);
    const auto P = static_cast<std::size_t>(argc > 2 ? parse(argv[2], "P") : 5);
    const int repeats = static_cast<int>(argc > 3 ? parse(argv[3], "REPEATS") : 5);

    // Parameters around different centres and scales, sharing a common part (correlated), as
    // a fit's replicas are; generated on one thread (the same rows whatever the thread count).
    std::vector<double> params(R * P);
    std::vector<std::int64_t> status(R, 0);
    std::mt19937_64 gen(35);
    std::normal_distribution<double> normal;
    for (std::size_t r = 0; r < R; ++r) {
        const double common = normal(gen);
        for (std::size_t q = 0; q < P; ++q)
            params[r * P + q] = 1e3 * static_cast<double>(q + 1) + static_cast<double>(q + 1) * (common + 0.5 * normal(gen));
        if (gen() % 20 == 0) status[r] = 2;
    }

    std::vector<double> seconds;
    ef::EnsembleSummary s;
    for (int k = 0; k < repeats; ++k) {
        const auto t0 = std::chrono::steady_clock::now();
        s = ef::summarize(params, status, static_cast<int>(P));
        seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::string list;
    for (double t : seconds) list += (list.empty() ? "" : ", ") + std::to_string(t);
    std::printf("{\"rows\": %zu, \"P\": %zu, \"threads\": %d, \"used\": %lld, \"seconds\": [%s], "
                "\"best_s\": %.4f, \"moments_bits\": \"%016llx\", \"quantiles_bits\": \"%016llx\"}\n",
                R, P, omp_get_max_threads(), static_cast<long long>(s.used), list.c_str(),
                *std::min_element(seconds.begin(), seconds.end()),
                static_cast<unsigned long long>(hash_bits(s.covariance, hash_bits(s.mean))),
                static_cast<unsigned long long>(hash_bits(s.quantiles)));
    return 0;
}

// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <cstdint>

#include <Random123/philox.h>

#include "kernels/core/dual.hpp"
#include "kernels/core/hd.hpp"

namespace ef {

/**
 * Counter-based random numbers for replica resampling (the reproducibility contract).
 *
 * Replica r of a run with seed s draws from Philox4x64-10 keyed by (s, r) with the data index as
 * the counter, so its resampled data are a pure function of (s, r, i): no state is carried
 * between points, replicas, threads, ranks or restarts. Word 1 of the counter separates the
 * streams of the two resampling methods.
 */
struct ReplicaRng {
    using Philox = r123::Philox4x64_R<10>;

    EF_HD ReplicaRng(std::uint64_t seed, std::uint64_t replica) : key_{{seed, replica}} {}

    /// Two independent uniform doubles in (0, 1] from counter (i, stream).
    EF_HD void uniform2(std::uint64_t i, std::uint64_t stream, double& u1, double& u2) const {
        Philox gen;
        const Philox::ctr_type ctr = {{i, stream, 0, 0}};
        const Philox::ctr_type out = gen(ctr, key_);
        u1 = to_unit(out.v[0]);
        u2 = to_unit(out.v[1]);
    }

    /// A standard normal deviate for data index i (Box-Muller on two uniforms).
    EF_HD double normal(std::uint64_t i) const {
        double u1 = 0, u2 = 0;
        uniform2(i, kSmearStream, u1, u2);
        return sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925 * u2);
    }

    /// Index drawn uniformly from [0, n) for bootstrap draw number k.
    EF_HD std::uint64_t index(std::uint64_t k, std::uint64_t n) const {
        double u1 = 0, u2 = 0;
        uniform2(k, kBootstrapStream, u1, u2);
        std::uint64_t j = static_cast<std::uint64_t>((1.0 - u1) * static_cast<double>(n));
        return j < n ? j : n - 1;
    }

    static constexpr std::uint64_t kSmearStream = 0x736d656172ULL;      // "smear"
    static constexpr std::uint64_t kBootstrapStream = 0x626f6f74ULL;    // "boot"

   private:
    /// 53 random bits to a double in (0, 1].
    EF_HD static double to_unit(std::uint64_t bits) {
        return (static_cast<double>(bits >> 11) + 1.0) * (1.0 / 9007199254740992.0);
    }
    Philox::key_type key_;
};

/**
 * Resampled data for replica r: `y_out` (smear: y_i + sigma_i z_i) and `w_out` (bootstrap:
 * multiplicity of point i among n draws with replacement), point i at index i * stride, stored
 * as Out (computed in double, then rounded). Replica 0 is the data as given. `w_out` may be
 * null when smearing (all weights are 1).
 */
template <class Out>
EF_HD void resample_replica_strided(int method_bootstrap, std::uint64_t seed, std::uint64_t replica, int n,
                                    const double* y, const double* sigma, Out* y_out, Out* w_out, long stride) {
    for (int i = 0; i < n; ++i) {
        y_out[i * stride] = static_cast<Out>(y[i]);
        if (w_out != nullptr) w_out[i * stride] = static_cast<Out>(replica == 0 ? 1.0 : (method_bootstrap ? 0.0 : 1.0));
    }
    if (replica == 0) return;
    const ReplicaRng rng(seed, replica);
    if (method_bootstrap && w_out != nullptr) {
        for (int k = 0; k < n; ++k)
            w_out[static_cast<long>(rng.index(static_cast<std::uint64_t>(k), static_cast<std::uint64_t>(n))) * stride] +=
                Out(1);
    } else {
        for (int i = 0; i < n; ++i)
            y_out[i * stride] = static_cast<Out>(y[i] + sigma[i] * rng.normal(static_cast<std::uint64_t>(i)));
    }
}

/// The same in double, contiguous.
EF_HD inline void resample_replica(int method_bootstrap, std::uint64_t seed, std::uint64_t replica, int n,
                                   const double* y, const double* sigma, double* y_out, double* w_out) {
    resample_replica_strided<double>(method_bootstrap, seed, replica, n, y, sigma, y_out, w_out, 1);
}

}  // namespace ef

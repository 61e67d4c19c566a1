// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>

#include "kernels/fit/lanes.hpp"

namespace ef::cuda {

/// kernels/fit/lanes.hpp's reductions by the 32 threads of a (fully active) warp: lane l sums
/// the elements i with i % 32 == l in ascending i, then the butterfly of __shfl_xor_sync, which
/// combines the partial sums exactly as SerialLanes does.
struct WarpLanes {
    int lane;
    __device__ bool leader() const { return lane == 0; }
    __device__ void sync() const { __syncwarp(); }
    __device__ bool owns(int i) const { return i % kLanes == lane; }
    __device__ int first(int lo) const { return lo + ((lane - lo % kLanes) + kLanes) % kLanes; }

    template <class F>
    __device__ double sum(int lo, int hi, F f) const {
        double s = 0.0;
        for (int i = first(lo); i < hi; i += kLanes) s += f(i);
        for (int off = kLanes / 2; off >= 1; off /= 2) s = s + __shfl_xor_sync(0xffffffffu, s, off);
        return s;
    }
    /// SerialLanes::sums' bits, one sweep per sum: measured on an H200, one sweep for all the
    /// sums (a kMaxFused array per lane) made the LM steps 1.6x slower.
    template <class F>
    __device__ void sums(int lo, int hi, int m, F f, double* out) const {
        for (int j = 0; j < m; ++j) out[j] = sum(lo, hi, [&](int i) { return f(i, j); });
    }
    /// SerialLanes::reflect column by column: each column's dot product and update in two
    /// back-to-back sweeps while it is still in cache (grouping the sweeps of 16 columns made the
    /// LM steps 1.3-1.7x slower on an H200: the Jacobians of a round do not fit in L2).
    __device__ void reflect(int lo, int hi, int g, const double* v, double* c0, long ld, double vtv) const {
        for (int j = 0; j < g; ++j) {
            double* cj = c0 + j * ld;
            const double f = 2.0 * sum(lo, hi, [&](int i) { return v[i] * cj[i]; }) / vtv;
            for (int i = first(lo); i < hi; i += kLanes) cj[i] -= f * v[i];
        }
    }
    template <class F>
    __device__ double max(int lo, int hi, F f) const {
        double m = 0.0;
        for (int i = first(lo); i < hi; i += kLanes) m = fmax(m, f(i));
        for (int off = kLanes / 2; off >= 1; off /= 2) m = fmax(m, __shfl_xor_sync(0xffffffffu, m, off));
        return m;
    }
    template <class F>
    __device__ bool all(int lo, int hi, F pred) const {
        bool ok = true;
        for (int i = first(lo); i < hi; i += kLanes) ok = ok && pred(i);
        return __all_sync(0xffffffffu, ok) != 0;
    }
    template <class F>
    __device__ void for_each(int lo, int hi, F f) const {
        for (int i = first(lo); i < hi; i += kLanes) f(i);
    }
};

}  // namespace ef::cuda

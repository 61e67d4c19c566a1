// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>

#include "kernels/core/hd.hpp"

namespace ef {

/**
 * Deterministic reductions over n values, shared by every backend: the values are dealt to
 * kLanes = 32 lanes by absolute index (lane = i % 32), each lane sums its values in ascending i,
 * and the 32 partial sums are combined by the butterfly s_l + s_{l+16}, then + s_{l+8}, ...
 * (the order of __shfl_xor_sync reductions). SerialLanes does this in one thread (CPU, or one
 * GPU thread per replica); WarpLanes (kernels/cuda/warp_lanes.cuh) with the 32 threads of a
 * warp. Both give the same bits, so the LM built on them (kernels/fit/lm.hpp) gives the same
 * fits whether a replica runs on a CPU core, a GPU thread or a GPU warp.
 *
 * Contract for code written on an Exec: element i of an n-vector is only ever touched by lane
 * i % 32 inside sum/for_each (so no synchronisation is needed between such loops); scalars are
 * computed redundantly by every lane from the same inputs; small in-place work (a P x P QR) runs
 * on the leader between sync() calls.
 */
inline constexpr int kLanes = 32;
/// Sums computed in one pass by sums(): a Householder reflection updates up to this many
/// columns per sweep over the rows instead of one.
inline constexpr int kMaxFused = 16;

struct SerialLanes {
    EF_HD bool leader() const { return true; }
    EF_HD void sync() const {}
    EF_HD bool owns(int /*i*/) const { return true; }

    /// sum over i in [lo, hi) of f(i), lane-split as described above.
    template <class F>
    EF_HD double sum(int lo, int hi, F f) const {
        double s[kLanes];
        for (int l = 0; l < kLanes; ++l) s[l] = 0.0;
        for (int i = lo; i < hi; ++i) s[i % kLanes] += f(i);
        for (int off = kLanes / 2; off >= 1; off /= 2)
            for (int l = 0; l < off; ++l) s[l] = s[l] + s[l + off];
        return s[0];
    }
    /// out[j] = sum over i in [lo, hi) of f(i, j) for j < m <= kMaxFused, in one sweep; each
    /// sum split over the lanes exactly as sum() does, so the bits are sum()'s.
    template <class F>
    EF_HD void sums(int lo, int hi, int m, F f, double* out) const {
        double s[kLanes][kMaxFused];
        for (int l = 0; l < kLanes; ++l)
            for (int j = 0; j < m; ++j) s[l][j] = 0.0;
        for (int i = lo; i < hi; ++i)
            for (int j = 0; j < m; ++j) s[i % kLanes][j] += f(i, j);
        for (int j = 0; j < m; ++j) {
            for (int off = kLanes / 2; off >= 1; off /= 2)
                for (int l = 0; l < off; ++l) s[l][j] = s[l][j] + s[l + off][j];
            out[j] = s[0][j];
        }
    }
    /// max over i in [lo, hi) of f(i) (0 when empty; order does not matter for fmax).
    template <class F>
    EF_HD double max(int lo, int hi, F f) const {
        double m = 0.0;
        for (int i = lo; i < hi; ++i) m = fmax(m, f(i));
        return m;
    }
    /// true when pred(i) holds for every i in [lo, hi).
    template <class F>
    EF_HD bool all(int lo, int hi, F pred) const {
        for (int i = lo; i < hi; ++i)
            if (!pred(i)) return false;
        return true;
    }
    template <class F>
    EF_HD void for_each(int lo, int hi, F f) const {
        for (int i = lo; i < hi; ++i) f(i);
    }
    /// The Householder reflection by v (v^T v = vtv) of the g columns c0 + j ld over rows [lo, hi):
    /// f_j = 2 (v^T c_j) / vtv, c_j -= f_j v. Here kMaxFused columns per two sweeps over the rows
    /// (dot products, then updates); WarpLanes does column by column. Same operations, same bits.
    EF_HD void reflect(int lo, int hi, int g, const double* v, double* c0, long ld, double vtv) const {
        for (int j0 = 0; j0 < g; j0 += kMaxFused) {
            const int gg = g - j0 < kMaxFused ? g - j0 : kMaxFused;
            double* c = c0 + j0 * ld;
            double f[kMaxFused];
            sums(lo, hi, gg, [&](int i, int j) { return v[i] * c[j * ld + i]; }, f);
            for (int j = 0; j < gg; ++j) f[j] = 2.0 * f[j] / vtv;
            for (int i = lo; i < hi; ++i) {
                const double vi = v[i];
                for (int j = 0; j < gg; ++j) c[j * ld + i] -= f[j] * vi;
            }
        }
    }
};

/**
 * Householder QR of the m x n column-major A (leading dimension lda, m >= n) on an Exec, applied
 * to b (length m) at the same time: on return the upper triangle of A's first n rows holds R
 * and b holds Q^T b. Q is never formed. Used for the LM least-squares steps because it works on
 * J itself instead of J^T J, so it does not square the condition number (NIST's Lanczos and
 * MGH problems need that). FLOPs: about 2 n^2 (m - n/3) for A plus 4 m n for b.
 */
template <class Exec>
EF_HD void householder_qr(const Exec& ex, double* a, int m, int n, int lda, double* b) {
    for (int k = 0; k < n; ++k) {
        double* col = a + static_cast<long>(k) * lda;
        // Scaled norm so that tiny or huge columns neither underflow nor overflow.
        const double scale = ex.max(k, m, [&](int i) { return fabs(col[i]); });
        if (scale == 0.0) continue;  // zero column: R_kk = 0, nothing to reflect
        const double ss = ex.sum(k, m, [&](int i) {
            const double t = col[i] / scale;
            return t * t;
        });
        const double norm = scale * sqrt(ss);
        const double ck = col[k];
        const double alpha = ck > 0 ? -norm : norm;
        const double v0 = ck - alpha;
        // v = (v0, col[k+1..m)); v^T v = norm^2 - col[k]^2 + v0^2 = -2 alpha v0
        const double vtv = -2.0 * alpha * v0;
        ex.sync();
        if (ex.owns(k)) col[k] = v0;
        ex.sync();
        // The later columns: v^T c_j, then c_j -= (2 v^T c_j / v^T v) v (Exec::reflect).
        ex.reflect(k, m, n - (k + 1), col, a + static_cast<long>(k + 1) * lda, lda, vtv);
        if (b != nullptr) {
            const double s = ex.sum(k, m, [&](int i) { return col[i] * b[i]; });
            const double f = 2.0 * s / vtv;
            ex.for_each(k, m, [&](int i) { b[i] -= f * col[i]; });
        }
        ex.sync();
        if (ex.owns(k)) col[k] = alpha;
        ex.sync();
    }
}

}  // namespace ef

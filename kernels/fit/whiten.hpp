// SPDX-License-Identifier: MIT
#pragma once

#include "kernels/core/hd.hpp"

namespace ef {

/// Most correlated sources (systematic columns plus normalised datasets) of the structured form.
inline constexpr int kMaxCorrelatedSources = 256;

/**
 * The Cholesky factor L of a fit's data covariance C = L L^T, as the LM applies it: residuals and
 * Jacobian columns are whitened, z = L^-1 r, so chi^2 = z^T z = r^T C^-1 r and every LM path
 * stays as it is (src/fit/correlated.cpp builds it once per run). Two forms, views of host
 * memory (never owned):
 *
 *  - structured, C = D^1/2 (I + A A^T) D^1/2 with D = diag(sigma^2) and A = D^-1/2 B (n x K,
 *    B the correlated shifts: systematic columns and dataset normalisations). The Cholesky
 *    factor of I + A A^T is semiseparable, L_jj = d_j and L_ij = a_i . v_j (i > j), with
 *        S_0 = I_K,  d_j^2 = 1 + a_j^T S_j a_j,  v_j = S_j a_j / d_j,  S_{j+1} = S_j - v_j v_j^T
 *    (S_j = (I + sum_{k<j} a_k a_k^T)^-1 by Sherman-Morrison), so L is stored in O(n K) and
 *    applied in O(n K): z_j = (r_j / sigma_j - a_j . h) / d_j, h += v_j z_j.
 *  - dense (`dense` not null): L itself, n x n lower triangular, row-major (a full covariance
 *    from a file); applied by forward substitution in O(n^2).
 */
struct WhitenView {
    int n = 0;
    int K = 0;                          ///< structured: sources
    const double* inv_sigma = nullptr;  ///< structured: n
    const double* a = nullptr;          ///< structured: n x K, row-major
    const double* v = nullptr;          ///< structured: n x K, row-major
    const double* d = nullptr;          ///< structured: n
    const double* dense = nullptr;      ///< dense: n x n lower triangular, row-major
};

/// r <- L^-1 r in place (n values, stride 1). FLOPs: dense n^2, structured n (4 K + 2).
EF_HD inline void whiten_in_place(const WhitenView& w, double* r) {
    const int n = w.n;
    if (w.dense != nullptr) {
        for (int j = 0; j < n; ++j) {
            const double* row = w.dense + static_cast<long>(j) * n;
            double s = r[j];
            for (int k = 0; k < j; ++k) s -= row[k] * r[k];
            r[j] = s / row[j];
        }
        return;
    }
    double h[kMaxCorrelatedSources];
    const int K = w.K;
    for (int k = 0; k < K; ++k) h[k] = 0.0;
    for (int j = 0; j < n; ++j) {
        const double* aj = w.a + static_cast<long>(j) * K;
        const double* vj = w.v + static_cast<long>(j) * K;
        double s = r[j] * w.inv_sigma[j];
        for (int k = 0; k < K; ++k) s -= aj[k] * h[k];
        const double z = s / w.d[j];
        for (int k = 0; k < K; ++k) h[k] += vj[k] * z;
        r[j] = z;
    }
}

}  // namespace ef

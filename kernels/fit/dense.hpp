// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>

#include "kernels/core/hd.hpp"

namespace ef {

/**
 * Householder QR of the m x n column-major matrix A (leading dimension lda, m >= n), applied at
 * the same time to the right-hand side b (length m): on return the upper triangle of A's first n
 * rows holds R and b holds Q^T b. Q is never formed. Used for the LM least-squares steps because
 * it works on J itself instead of J^T J, so it does not square the condition number (NIST's
 * Lanczos and MGH problems need that).
 * FLOPs: about 2 n^2 (m - n/3) for A plus 4 m n for b.
 */
EF_HD inline void householder_qr(double* a, int m, int n, int lda, double* b) {
    for (int k = 0; k < n; ++k) {
        double* col = a + static_cast<long>(k) * lda;
        // Scaled norm so that tiny or huge columns neither underflow nor overflow.
        double scale = 0.0;
        for (int i = k; i < m; ++i) scale = fmax(scale, fabs(col[i]));
        if (scale == 0.0) continue;  // zero column: R_kk = 0, nothing to reflect
        double ss = 0.0;
        for (int i = k; i < m; ++i) {
            const double t = col[i] / scale;
            ss += t * t;
        }
        const double norm = scale * sqrt(ss);
        const double alpha = col[k] > 0 ? -norm : norm;
        const double v0 = col[k] - alpha;
        // v = (v0, col[k+1..m)); v^T v = norm^2 - col[k]^2 + v0^2 = -2 alpha v0
        const double vtv = -2.0 * alpha * v0;
        col[k] = v0;
        for (int j = k + 1; j < n; ++j) {
            double* cj = a + static_cast<long>(j) * lda;
            double s = 0.0;
            for (int i = k; i < m; ++i) s += col[i] * cj[i];
            const double f = 2.0 * s / vtv;
            for (int i = k; i < m; ++i) cj[i] -= f * col[i];
        }
        if (b != nullptr) {
            double s = 0.0;
            for (int i = k; i < m; ++i) s += col[i] * b[i];
            const double f = 2.0 * s / vtv;
            for (int i = k; i < m; ++i) b[i] -= f * col[i];
        }
        col[k] = alpha;
    }
}

/// Solves R x = b for the n x n upper-triangular R (column-major, leading dimension ldr).
/// Returns false when a diagonal entry is zero.
EF_HD inline bool back_substitute(const double* r, int n, int ldr, const double* b, double* x) {
    for (int i = n - 1; i >= 0; --i) {
        double s = b[i];
        for (int j = i + 1; j < n; ++j) s -= r[i + static_cast<long>(j) * ldr] * x[j];
        const double d = r[i + static_cast<long>(i) * ldr];
        if (d == 0.0) return false;
        x[i] = s / d;
    }
    return true;
}

}  // namespace ef

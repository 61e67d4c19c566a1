// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>

#include "kernels/core/dual.hpp"
#include "kernels/core/hd.hpp"
#include "kernels/fit/lanes.hpp"
#include "kernels/fit/lm_batched.hpp"
#include "kernels/fit/lm_normal.hpp"
#include "kernels/fit/resample.hpp"

namespace ef::gram {

/**
 * The normal-equations LM for table-linear models (dis-mellin with `[fit] solver = normal`),
 * single source for the CPU and the CUDA worker.
 *
 * The model is F = T u(p) with the (points x Kt) table T and the moment vector u. With smeared
 * replicas every replica has the same weights W = 1 / sigma^2, so G = T^T W T (Kt x Kt) is
 * computed once per run, and for replica r, with the start point's moments u0 as the origin
 * (e_r = y_r - T u0, b_r = T^T W e_r, c_r = e_r^T W e_r, v = u - u0):
 *
 *     chi^2 = v^T G v - 2 v^T b_r + c_r,   g = J^T W r = D^T (G v - b_r),   A = J^T W J = D^T G D
 *
 * where D (Kt x nfree) holds the moments' derivatives. A round needs H = G [v | D] for every
 * requesting replica: one GEMM of the Kt x Kt Gram matrix instead of the points x Kt table
 * (5000 -> 1088 rows for stats2), and no replica's residuals or Jacobian are ever formed; each
 * LM step is a 16 x 16 Cholesky solve (kernels/fit/lm_normal.hpp's state machine).
 *
 * What it costs: chi^2 is a difference of terms as large as the data's own sum of squares
 * (measured from the start point to reduce it), and A and g square the table's cancellation;
 * the fits agree with the QR path's to the accuracy stated in README and tested in
 * tests/unit/test_dis_fit.cpp, not bit for bit. CPU and GPU still agree bit for bit with each
 * other: the GEMMs accumulate in ascending k with fma on both and every dot product is a
 * kernels/fit/lanes.hpp reduction.
 *
 * The driver (kernels/cpu/fit_kernels.cpp, kernels/cuda/fit_batched.cu) uses lm_batched.hpp's
 * round structure: prepare_slot, node_columns (value columns minus u0), the GEMM with G and
 * store_h as its epilogue, then finish_slot.
 */
inline constexpr int kWidth = batched::kDualWidth;
using State = NormalLmState<double, kWidth>;
using batched::JDual;
using batched::JNorm;
using batched::kJacobian;
using batched::kResiduals;
using batched::VNorm;

/// Pointers of one batch (host or device memory, never owned).
struct GramView {
    int P = 0;
    int nfree = 0;
    long Kt = 0;
    ParamBoundsView bounds;
    LmSettings settings;
    const int* free_idx = nullptr;  ///< nfree: the parameter in slot j
    const double* start = nullptr;  ///< P
    const double* u0 = nullptr;     ///< Kt: the start point's moments, the origin of v
    double* params = nullptr;       ///< slots x P: the request point (and the result at the end)
    State* state = nullptr;         ///< slots
    int* request = nullptr;         ///< slots: LmRequest as int
    JDual* pd = nullptr;            ///< slots x P
    JNorm* jnorm = nullptr;         ///< slots
    VNorm* vnorm = nullptr;         ///< slots
    double* H = nullptr;            ///< slots x Kt x (1 + nfree): G times the slot's columns
    double* vh = nullptr;           ///< slots x 2 Kt: v and G v at the current point
    const double* b = nullptr;      ///< slots x Kt: T^T W e_r
    const double* c = nullptr;      ///< slots: e_r^T W e_r
    double* cov = nullptr;          ///< P x P, for the slot of replica 0
    int cov_slot = -1;

    EF_HD double* slot_params(int s) const { return params + static_cast<long>(s) * P; }
    EF_HD double* slot_h(int s) const { return H + static_cast<long>(s) * Kt * (1 + nfree); }
    EF_HD const double* slot_b(int s) const { return b + static_cast<long>(s) * Kt; }
    EF_HD double* slot_vh(int s) const { return vh + static_cast<long>(s) * 2 * Kt; }
};

/**
 * Replica r's origin-shifted data for b = T^T E: E_i = w_i (y_ri - f0_i) with w = 1 / sigma^2,
 * and c = sum_i w_i (y_ri - f0_i)^2 (a lanes sum). `E` (n) is also the scratch for y_r.
 */
EF_HD inline void replica_columns(int n, std::uint64_t seed, std::int64_t replica, const double* y0,
                                  const double* sigma, const double* f0, const double* winv, double* E, double& c) {
    resample_replica_strided<double>(0, seed, static_cast<std::uint64_t>(replica), n, y0, sigma, E, nullptr, 1);
    for (int i = 0; i < n; ++i) E[i] -= f0[i];
    c = SerialLanes{}.sum(0, n, [&](int i) { return E[i] * E[i] * winv[i]; });
    for (int i = 0; i < n; ++i) E[i] *= winv[i];
}

/// Columns of W (and of H) one slot needs for a request of this kind.
EF_HD inline int columns_for(const GramView& v, int kind) { return kind == kJacobian ? 1 + v.nfree : 1; }

/// Writes the request point (the current point or the trial) into the slot's params row.
EF_HD inline void write_point(const GramView& v, int s) {
    const State& st = v.state[s];
    const bool trial = st.phase == lm_normal_detail::kTrial;
    double* x = v.slot_params(s);
    for (int j = 0; j < v.nfree; ++j) x[v.free_idx[j]] = static_cast<double>(trial ? st.pt[j] : st.p[j]);
}

/// Slot j = free parameter free_idx[j], the start clamped into the box; the first request.
EF_HD inline void start_slot(const GramView& v, int s) {
    State& st = v.state[s];
    double* x = v.slot_params(s);
    for (int q = 0; q < v.P; ++q) x[q] = v.start[q];
    for (int j = 0; j < kWidth; ++j) {
        if (j < v.nfree) {
            const int q = v.free_idx[j];
            normal_set_slot(st, j, v.start[q], v.bounds.lower[q], v.bounds.upper[q], true);
        } else {
            normal_set_slot(st, j, 0.0, 0.0, 0.0, false);
        }
    }
    v.request[s] = static_cast<int>(normal_begin(st, v.settings));
    write_point(v, s);
}

/// The request point's normalisation (and, for a Jacobian, the point as seeded duals).
template <class Model>
EF_HD void prepare_slot(const Model& m, const GramView& v, int s, int kind) {
    const double* x = v.slot_params(s);
    if (kind == kJacobian) {
        JDual* pd = v.pd + static_cast<long>(s) * v.P;
        for (int q = 0; q < v.P; ++q) pd[q] = JDual(x[q]);
        for (int j = 0; j < v.nfree; ++j) pd[v.free_idx[j]].d[j] = 1.0;
        v.jnorm[s] = m.normalisation(pd);
    } else {
        v.vnorm[s] = m.normalisation(x);
    }
}

/// The node-k entries of the slot's W columns: v = u - u0 in column col0, du/dp_j in col0 + 1 + j.
template <class Model>
EF_HD void node_columns(const Model& m, const GramView& v, int s, int kind, int k, double* W, long col0) {
    const long Kt = v.Kt;
    const int nw = m.node_width();
    if (kind == kJacobian) {
        JDual out[Model::kMaxNodeWidth];
        m.prepare_node(v.pd + static_cast<long>(s) * v.P, v.jnorm[s], k, out);
        for (int e = 0; e < nw; ++e) {
            const long kk = Model::table_column_source(k * nw + e);
            W[col0 * Kt + kk] = out[e].v - v.u0[kk];
            for (int j = 0; j < v.nfree; ++j) W[(col0 + 1 + j) * Kt + kk] = out[e].d[j];
        }
    } else {
        double out[Model::kMaxNodeWidth];
        m.prepare_node(v.slot_params(s), v.vnorm[s], k, out);
        for (int e = 0; e < nw; ++e) {
            const long kk = Model::table_column_source(k * nw + e);
            W[col0 * Kt + kk] = out[e] - v.u0[kk];
        }
    }
}

/// GEMM epilogue: H(kk, j) of slot s (j = 0 from v, j >= 1 from du/dp_{j-1}).
EF_HD inline void store_h(const GramView& v, int s, int j, long kk, double h) { v.slot_h(s)[j * v.Kt + kk] = h; }

/**
 * chi^2 (and for a Jacobian g and A) from the slot's W columns and H, then the LM up to its
 * next request, on an Exec (SerialLanes or WarpLanes: the same bits). When the replica is done
 * its parameters (and, for replica 0, the covariance) are written.
 */
template <class Exec>
EF_HD void finish_slot(const Exec& ex, const GramView& v, int s, int kind, const double* W, long col0) {
    const int Kt = static_cast<int>(v.Kt);
    const int nf = v.nfree;
    const double* u = W + col0 * Kt;
    const double* H = v.slot_h(s);
    const double* bs = v.slot_b(s);
    State st = v.state[s];
    double t[kMaxFused];
    ex.sums(0, Kt, 2, [&](int k, int j) { return j == 0 ? u[k] * H[k] : u[k] * bs[k]; }, t);
    const double chi2 = t[0] - 2.0 * t[1] + v.c[s];
    LmRequest q;
    if (kind == kJacobian) {
        st.chi2 = chi2;
        bool ok = isfinite(chi2);
        // g_j = D_j . (H_0 - b), then row a of A: D_a . H_{1+b} for b <= a.
        ex.sums(0, Kt, nf, [&](int k, int j) { return W[(col0 + 1 + j) * Kt + k] * (H[k] - bs[k]); }, t);
        for (int j = 0; j < kWidth; ++j) st.g[j] = j < nf ? t[j] : 0.0;
        for (int a = 0; a < kWidth; ++a) {
            if (a < nf) {
                const double* Da = W + (col0 + 1 + a) * Kt;
                ex.sums(0, Kt, a + 1, [&](int k, int j) { return Da[k] * H[(1 + j) * static_cast<long>(Kt) + k]; }, t);
            }
            for (int b = 0; b <= a; ++b) st.A[lm_normal_detail::tri(a, b)] = a < nf ? t[b] : 0.0;
        }
        for (int j = 0; j < nf; ++j) ok = ok && isfinite(st.g[j]) && isfinite(st.A[lm_normal_detail::tri(j, j)]);
        // Keep v and G v of this point: trials measure their reduction against them.
        double* vh = v.slot_vh(s);
        ex.for_each(0, Kt, [&](int k) {
            vh[k] = u[k];
            vh[Kt + k] = H[k];
        });
        q = normal_on_jacobian(st, v.settings, ok);
    } else {
        // chi2(v) - chi2(vt) = (v - vt)^T (G v + G vt - 2 b): small differences times sums, as
        // the QR path's sum (r - r')(r + r'), where the difference of the two totals would
        // lose every digit below their rounding.
        const double* vh = v.slot_vh(s);
        const double red =
            ex.sum(0, Kt, [&](int k) { return (vh[k] - u[k]) * ((vh[Kt + k] + H[k]) - 2.0 * bs[k]); });
        q = normal_on_residuals(st, isfinite(chi2), chi2, red);
    }
    ex.sync();
    if (ex.leader()) {
        v.state[s] = st;
        v.request[s] = static_cast<int>(q);
        if (q == LmRequest::done) {
            double* x = v.slot_params(s);
            for (int j = 0; j < nf; ++j) {
                const int p = v.free_idx[j];
                x[p] = normal_result(st, j, v.bounds.lower[p], v.bounds.upper[p]);
            }
            if (s == v.cov_slot && v.cov != nullptr) {
                double cs[kWidth * kWidth];
                normal_covariance(st, cs);
                for (long e = 0; e < static_cast<long>(v.P) * v.P; ++e) v.cov[e] = 0.0;
                for (int a = 0; a < nf; ++a)
                    for (int b = 0; b < nf; ++b)
                        v.cov[v.free_idx[a] + static_cast<long>(v.free_idx[b]) * v.P] = cs[a + b * kWidth];
            }
        } else {
            write_point(v, s);
        }
    }
}

}  // namespace ef::gram

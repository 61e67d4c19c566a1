// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>

#include "kernels/core/dual.hpp"
#include "kernels/core/hd.hpp"
#include "kernels/fit/lm.hpp"
#include "kernels/fit/resample.hpp"
#include "kernels/models/dis_mellin.hpp"

namespace ef::batched {

/**
 * Batched LM for table-linear models (today: dis-mellin), single source for the CPU and the
 * CUDA worker. A batch of replicas ("slots") advances in rounds; in each round every slot that
 * needs a Jacobian or trial residuals gets them from
 *
 *   1. moments: the model's parameter-dependent vector u (one column for the value, one per
 *      free parameter from dual numbers) for each slot, written as columns of W
 *      (table_width x columns, column-major);
 *   2. one GEMM F = T W with the parameter-independent table T (points x table_width), each
 *      output accumulated in ascending k with fused multiply-adds on both backends, so the CPU
 *      and the GPU produce the same bits; the epilogue scales F into the slot's residuals and
 *      Jacobian (store_output);
 *   3. finish_slot: chi^2 and the LM state machine (kernels/fit/lm.hpp) up to its next request.
 *
 * Everything per slot lives in flat arrays so that the same code runs on host and device.
 */
inline constexpr int kDualWidth = 16;  ///< free parameters a batched fit supports (one pass)
using JDual = Dual<double, kDualWidth>;
using JNorm = dis_mellin::Normalisation<JDual>;
using VNorm = dis_mellin::Normalisation<double>;

enum Kind : int { kJacobian = 0, kResiduals = 1 };

/// Pointers of one batch (host or device memory, never owned).
struct BatchView {
    int n = 0;                  ///< data points
    int P = 0;                  ///< parameters
    int nfree = 0;              ///< free parameters (the same for every replica)
    long stride = 0;            ///< doubles of LM scratch per slot (LmScratchLayout(n, P).total)
    int bootstrap = 0;          ///< weights from bootstrap multiplicities, else smearing
    std::uint64_t seed = 0;
    ParamBoundsView bounds;
    LmSettings settings;
    const double* y0 = nullptr;     ///< central data, n
    const double* sigma = nullptr;  ///< n
    const double* start = nullptr;  ///< P
    double* work = nullptr;         ///< slots x stride
    double* params = nullptr;       ///< slots x P
    double* y = nullptr;            ///< slots x n, the replica's data
    double* w = nullptr;            ///< slots x n, bootstrap multiplicities
    LmState* state = nullptr;       ///< slots
    int* request = nullptr;         ///< slots: LmRequest as int
    std::int64_t* replica = nullptr;  ///< slots: replica numbers
    JDual* pd = nullptr;            ///< slots x P: the request point as duals (Jacobian slots)
    JNorm* jnorm = nullptr;         ///< slots
    VNorm* vnorm = nullptr;         ///< slots
    double* cov = nullptr;          ///< P x P, for the slot of replica 0
    int cov_slot = -1;

    EF_HD double* slot_work(int s) const { return work + s * stride; }
    EF_HD double* slot_params(int s) const { return params + static_cast<long>(s) * P; }
    EF_HD const double* slot_weights(int s) const { return bootstrap ? w + static_cast<long>(s) * n : nullptr; }
};

/// Columns of W (and of F) one slot needs for a request of this kind.
EF_HD inline int columns_for(const BatchView& b, int kind) { return kind == kJacobian ? 1 + b.nfree : 1; }

/// Resample the slot's replica, start at the configured point, ask for the first Jacobian.
EF_HD inline void start_slot(const BatchView& b, int s) {
    const std::uint64_t r = static_cast<std::uint64_t>(b.replica[s]);
    double* y = b.y + static_cast<long>(s) * b.n;
    double* w = b.w + static_cast<long>(s) * b.n;
    resample_replica(b.bootstrap, b.seed, r, b.n, b.y0, b.sigma, y, w);
    double* p = b.slot_params(s);
    for (int q = 0; q < b.P; ++q) p[q] = b.start[q];
    b.request[s] = static_cast<int>(lm_begin(b.state[s], b.bounds, p, b.slot_work(s), b.n, s == b.cov_slot));
}

/// The request point's normalisation (and, for a Jacobian, the point as duals seeded on the
/// free parameters), stored per slot for the per-node moments.
template <class Model>
EF_HD void prepare_slot(const Model& m, const BatchView& b, int s, int kind) {
    double* work = b.slot_work(s);
    const double* x = lm_request_point(b.state[s], b.slot_params(s), work, b.n, b.P);
    if (kind == kJacobian) {
        JDual* pd = b.pd + static_cast<long>(s) * b.P;
        const int* free_idx = lm_free_index(work, b.n, b.P);
        for (int q = 0; q < b.P; ++q) pd[q] = JDual(x[q]);
        for (int j = 0; j < b.nfree; ++j) pd[free_idx[j]].d[j] = 1.0;
        b.jnorm[s] = m.normalisation(pd);
    } else {
        b.vnorm[s] = m.normalisation(x);
    }
}

/**
 * The node-k entries of the slot's W columns (column `col0` the value, col0 + 1 + j the
 * derivative along free parameter j): u_kk = ws[kk ^ 1] within the node's block.
 */
template <class Model>
EF_HD void node_columns(const Model& m, const BatchView& b, int s, int kind, int k, double* W, long col0) {
    const long Kt = m.table_width();
    const int nw = m.node_width();
    if (kind == kJacobian) {
        JDual out[Model::kMaxNodeWidth];
        m.prepare_node(b.pd + static_cast<long>(s) * b.P, b.jnorm[s], k, out);
        for (int e = 0; e < nw; ++e) {
            const long kk = Model::table_column_source(k * nw + e);
            W[col0 * Kt + kk] = out[e].v;
            for (int j = 0; j < b.nfree; ++j) W[(col0 + 1 + j) * Kt + kk] = out[e].d[j];
        }
    } else {
        double out[Model::kMaxNodeWidth];
        const double* x = lm_request_point(b.state[s], b.slot_params(s), b.slot_work(s), b.n, b.P);
        m.prepare_node(x, b.vnorm[s], k, out);
        for (int e = 0; e < nw; ++e) W[col0 * Kt + Model::table_column_source(k * nw + e)] = out[e];
    }
}

/// GEMM epilogue: output F(i, j) of slot s (j = 0 the value, j >= 1 derivative j - 1) into
/// the slot's residuals / Jacobian / trial residuals, scaled as lm_detail::jacobian and
/// lm_detail::residuals scale them.
EF_HD inline void store_output(const BatchView& b, int s, int kind, int j, int i, double f) {
    double* work = b.slot_work(s);
    const double* wt = b.slot_weights(s);
    const double w = wt ? wt[i] : 1.0;
    const double yi = b.y[static_cast<long>(s) * b.n + i];
    if (kind == kJacobian) {
        double* dst = j == 0 ? lm_residuals_ptr(work, b.n, b.P) + i
                             : lm_jacobian_ptr(work, b.n, b.P) + static_cast<long>(j - 1) * b.n + i;
        if (w == 0.0) {
            *dst = 0.0;
            return;
        }
        const double sc = sqrt(w) / b.sigma[i];
        *dst = j == 0 ? sc * (f - yi) : sc * f;
    } else {
        double* dst = lm_trial_residuals_ptr(work, b.n, b.P) + i;
        *dst = w == 0.0 ? 0.0 : sqrt(w) * (f - yi) / b.sigma[i];
    }
}

/**
 * chi^2 of the evaluated request, then the LM up to its next request, on an Exec (SerialLanes:
 * one thread per slot; WarpLanes: the 32 threads of a warp, each with its own copy of the
 * state, the leader writing it back). Same bits either way (kernels/fit/lanes.hpp).
 */
template <class Exec>
EF_HD void finish_slot(const Exec& ex, const BatchView& b, int s, int kind) {
    double* work = b.slot_work(s);
    double* p = b.slot_params(s);
    const int n = b.n;
    LmState st = b.state[s];
    LmRequest q;
    if (kind == kJacobian) {
        const double* r = lm_residuals_ptr(work, n, b.P);
        const double c2 = ex.sum(0, n, [&](int i) { return r[i] * r[i]; });
        const double* J = lm_jacobian_ptr(work, n, b.P);
        bool ok = isfinite(c2);
        for (int j = 0; ok && j < b.nfree; ++j)
            ok = ex.all(0, n, [&](int i) { return isfinite(J[static_cast<long>(j) * n + i]); });
        q = lm_on_jacobian(ex, st, b.settings, b.bounds, p, work, n, ok, c2, s == b.cov_slot ? b.cov : nullptr);
    } else {
        const double* rt = lm_trial_residuals_ptr(work, n, b.P);
        const double c2 = ex.sum(0, n, [&](int i) { return rt[i] * rt[i]; });
        q = lm_on_residuals(ex, st, b.settings, b.bounds, p, work, n, isfinite(c2));
    }
    ex.sync();
    if (ex.leader()) {
        b.state[s] = st;
        b.request[s] = static_cast<int>(q);
    }
}

}  // namespace ef::batched

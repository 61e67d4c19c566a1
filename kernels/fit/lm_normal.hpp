// SPDX-License-Identifier: MIT
#pragma once

#include <cfloat>
#include <vector>

#include "kernels/core/dual.hpp"
#include "kernels/core/hd.hpp"
#include "kernels/fit/lm.hpp"

namespace ef {

/**
 * The bookkeeping between two passes over the points (normal_on_jacobian, normal_on_residuals)
 * and each damped solve (damped_step) are calls on the device, not inlined: the replica's state
 * then lies in the thread's local memory (read and written O(K^2) times per iteration, against
 * O(n K^2) arithmetic per pass), and the registers go to what each part needs at once: the
 * accumulators and the model's duals in a pass, the Cholesky factor in a solve. Inlined, all
 * of it was live together and a 16-parameter float fit spilled (255 registers, 3.5 KB of spill
 * stores; perf/RESULTS.md). The host inlines as before; the bits are the same either way.
 */
#ifdef __CUDACC__
#define EF_NORMAL_OUT_OF_LINE __noinline__
#else
#define EF_NORMAL_OUT_OF_LINE inline
#endif

/// Most parameters (fixed ones included) the normal-equations solver takes.
inline constexpr int kNormalMaxParams = 16;

/**
 * The normal-equations LM (`[fit] solver = normal`, and every `precision = float` fit): the same
 * bounded Levenberg–Marquardt as lm.hpp (Moré scaling, active set at the bounds, projected trials,
 * Nielsen's damping, MINPACK's three tests), but each Jacobian is never stored. One pass over the
 * points accumulates chi^2, g = J^T W r and A = J^T W J (K (K + 1) / 2 numbers) from dual numbers,
 * and steps solve (A + lambda D^2) step = -g by Cholesky. A replica's whole state is a few hundred
 * numbers at most, so a GPU thread keeps it in registers and local memory and a million replicas
 * need no scratch beyond their data: this is the solver for many small fits. The price is the
 * squared condition number of A. In double that still left all 27 NIST problems at 6 certified
 * digits or more; in float the stiff ones (Lanczos, Bennett5, Hahn1, ENSO) fall below 4, so the QR
 * solver stays the default.
 *
 * Real is double or float; arithmetic on the data, the Jacobian and the normal equations is in
 * Real, the damping bookkeeping in double. Transcendentals in float come from ef::math's double
 * kernels rounded to float (dual.hpp; exp through math::exp_float), so host and device give the
 * same bits in both precisions. With float the tolerances are raised to what float can resolve:
 * ftol >= 8 eps, xtol >= 16 eps.
 */
template <class Real>
struct NormalFitData {
    int n = 0;
    int nx = 0;
    const double* x = nullptr;        ///< n x nx row-major, shared by all replicas
    const Real* inv_sigma = nullptr;  ///< n: 1 / sigma_i, shared
    const Real* y = nullptr;          ///< this replica's y_i at index i * stride
    const Real* w = nullptr;          ///< bootstrap multiplicity of point i at i * stride, or nullptr
    long stride = 1;
};

/// 1 / sigma_i rounded to Real (the data's shared scale; host code).
template <class Real, class Vec>
std::vector<Real> normal_inv_sigma(const Vec& sigma) {
    std::vector<Real> v(sigma.size());
    for (std::size_t i = 0; i < sigma.size(); ++i) v[i] = static_cast<Real>(1.0 / sigma[i]);
    return v;
}

/**
 * One replica's normal-equations LM between model evaluations, in "slot" space: slot j holds one
 * parameter (the driver decides which; fixed parameters may sit in non-free slots). Plain data
 * indexed by compile-time slot numbers, so a GPU thread keeps it in registers or local memory
 * (EF_NORMAL_OUT_OF_LINE), and a batched driver keeps one per replica in memory. The protocol
 * mirrors lm.hpp's: normal_begin, then for LmRequest::jacobian the caller writes chi2, A (packed
 * lower triangle) and g at p and calls normal_on_jacobian; for LmRequest::residuals it computes
 * chi^2 at pt and calls normal_on_residuals.
 */
template <class Real, int K>
struct NormalLmState {
    Real p[K], pt[K], lo[K], hi[K];
    Real A[K * (K + 1) / 2], g[K], dsc[K], step[K];
    Real chi2;
    bool free[K], act[K];
    double lambda, nu, pnorm, dnorm, pred, ftol, xtol;
    int nfree, iterations, status, phase, solved, last_ok;
};

namespace lm_normal_detail {

/// Index of (a, b), b <= a, in a packed lower triangle.
EF_HD constexpr int tri(int a, int b) { return a * (a + 1) / 2 + b; }

/**
 * chi^2, g and A at p, in one pass over the points: the model is evaluated on duals at every
 * point and its Jacobian row folded into local accumulators (registers on the device, where
 * the replica's state lies in local memory: EF_NORMAL_OUT_OF_LINE), stored into A and g at the
 * end. Dual slot q is parameter q; fixed parameters (and slots past P) are not seeded, so
 * their rows of A and g stay zero. False if anything is non-finite.
 */
template <class Real, int K, class Model>
EF_HD bool accumulate(const Model& m, const NormalFitData<Real>& d, const Real* p, const bool* free, Real* A,
                      Real* g, Real& chi2) {
    using D = Dual<Real, K>;
    D pd[K];
EF_UNROLL
    for (int q = 0; q < K; ++q) {
        pd[q].v = p[q];
EF_UNROLL
        for (int k = 0; k < K; ++k) pd[q].d[k] = (k == q && free[q]) ? Real(1) : Real(0);
    }
    m.prepare(pd, static_cast<D*>(nullptr));
    Real a_sum[K * (K + 1) / 2], g_sum[K];
EF_UNROLL
    for (int a = 0; a < K * (K + 1) / 2; ++a) a_sum[a] = 0;
EF_UNROLL
    for (int a = 0; a < K; ++a) g_sum[a] = 0;
    Real s = 0;
    for (int i = 0; i < d.n; ++i) {
        const Real wi = d.w ? d.w[i * d.stride] : Real(1);
        if (wi == Real(0)) continue;
        const D f = m.value(pd, static_cast<const D*>(nullptr), d.x + static_cast<long>(i) * d.nx, i);
        const Real sc = d.inv_sigma[i];
        const Real r = sc * (f.v - d.y[i * d.stride]);
        const Real wr = wi * r;
        s += wr * r;
        Real j[K];
EF_UNROLL
        for (int a = 0; a < K; ++a) j[a] = sc * f.d[a];
EF_UNROLL
        for (int a = 0; a < K; ++a) {
            const Real wj = wi * j[a];
            g_sum[a] += wj * r;
EF_UNROLL
            for (int b = 0; b <= a; ++b) a_sum[tri(a, b)] += wj * j[b];
        }
    }
EF_UNROLL
    for (int a = 0; a < K * (K + 1) / 2; ++a) A[a] = a_sum[a];
EF_UNROLL
    for (int a = 0; a < K; ++a) g[a] = g_sum[a];
    chi2 = s;
    bool ok = isfinite(s);
EF_UNROLL
    for (int a = 0; a < K; ++a) ok = ok && isfinite(g[a]) && isfinite(A[tri(a, a)]);
    return ok;
}

/// chi^2 at p on plain Real (no derivatives). False if non-finite.
template <class Real, int K, class Model>
EF_HD bool chi2_at(const Model& m, const NormalFitData<Real>& d, const Real* p, Real& chi2) {
    m.prepare(p, static_cast<Real*>(nullptr));
    Real s = 0;
    for (int i = 0; i < d.n; ++i) {
        const Real wi = d.w ? d.w[i * d.stride] : Real(1);
        if (wi == Real(0)) continue;
        const Real f = m.value(p, static_cast<const Real*>(nullptr), d.x + static_cast<long>(i) * d.nx, i);
        const Real r = d.inv_sigma[i] * (f - d.y[i * d.stride]);
        s += wi * r * r;
    }
    chi2 = s;
    return isfinite(s);
}

/**
 * Solves M x = rhs for the symmetric positive definite M (packed, overwritten by its Cholesky
 * factor). False when M is not numerically positive definite.
 */
template <class Real, int K>
EF_HD bool cholesky_solve(Real* M, const Real* rhs, Real* x) {
EF_UNROLL
    for (int j = 0; j < K; ++j) {
        Real s = M[tri(j, j)];
EF_UNROLL
        for (int k = 0; k < j; ++k) s -= M[tri(j, k)] * M[tri(j, k)];
        if (!(s > Real(0))) return false;
        const Real l = sqrt(s);
        M[tri(j, j)] = l;
EF_UNROLL
        for (int i = j + 1; i < K; ++i) {
            Real t = M[tri(i, j)];
EF_UNROLL
            for (int k = 0; k < j; ++k) t -= M[tri(i, k)] * M[tri(j, k)];
            M[tri(i, j)] = t / l;
        }
    }
    Real z[K];
EF_UNROLL
    for (int i = 0; i < K; ++i) {
        Real t = rhs[i];
EF_UNROLL
        for (int k = 0; k < i; ++k) t -= M[tri(i, k)] * z[k];
        z[i] = t / M[tri(i, i)];
    }
EF_UNROLL
    for (int i = K - 1; i >= 0; --i) {
        Real t = z[i];
EF_UNROLL
        for (int k = i + 1; k < K; ++k) t -= M[tri(k, i)] * x[k];
        x[i] = t / M[tri(i, i)];
    }
    return true;
}

/// (A + lambda D^2) over the active slots, identity elsewhere; solves for -g. False if singular.
template <class Real, int K>
EF_HD EF_NORMAL_OUT_OF_LINE bool damped_step(const Real* A, const Real* g, const Real* dsc, const bool* act,
                                             double lambda, Real* step) {
    Real M[K * (K + 1) / 2];
    Real rhs[K];
EF_UNROLL
    for (int a = 0; a < K; ++a) {
EF_UNROLL
        for (int b = 0; b <= a; ++b)
            M[tri(a, b)] = (act[a] && act[b]) ? A[tri(a, b)] : (a == b ? Real(1) : Real(0));
        if (act[a]) M[tri(a, a)] += static_cast<Real>(lambda) * dsc[a] * dsc[a];
        rhs[a] = act[a] ? -g[a] : Real(0);
    }
    return cholesky_solve<Real, K>(M, rhs, step);
}

}  // namespace lm_normal_detail

/**
 * One replica's fit: `p` (P doubles, P <= K) holds the start on entry and the result on exit
 * (fixed parameters untouched);
 * `cov`, when non-null, receives (J^T W J)^-1 over the free parameters at the result (zeros for
 * fixed parameters, NaN when singular). Iterations count Jacobian evaluations, as in lm_fit.
 */
/// Slot j: value, bounds and whether it is fitted (a driver calls this for every j < K).
template <class Real, int K>
EF_HD EF_INLINE void normal_set_slot(NormalLmState<Real, K>& st, int j, double value, double lower, double upper,
                                     bool free) {
    st.lo[j] = static_cast<Real>(lower);
    st.hi[j] = static_cast<Real>(upper);
    st.p[j] = static_cast<Real>(lm_detail::clamp(value, lower, upper));
    st.free[j] = free;
}

namespace lm_normal_detail {

enum Phase : int { kIterate = 0, kTrial = 1, kFinal = 2, kDone = 3 };

/// The trial at the current damping; false when the damped system is singular.
template <class Real, int K>
EF_HD EF_INLINE bool make_trial(NormalLmState<Real, K>& st) {
    st.solved = damped_step<Real, K>(st.A, st.g, st.dsc, st.act, st.lambda, st.step) ? 1 : 0;
    st.dnorm = 0.0;
    st.pred = -1.0;
    if (!st.solved) return false;
    // Project the trial point into the box; the step taken is pt - p.
    double dn = 0.0;
    EF_UNROLL
    for (int q = 0; q < K; ++q) {
        st.pt[q] = st.act[q] ? static_cast<Real>(lm_detail::clamp(st.p[q] + st.step[q], st.lo[q], st.hi[q])) : st.p[q];
        st.step[q] = st.pt[q] - st.p[q];
        const double w = static_cast<double>(st.dsc[q]) * static_cast<double>(st.step[q]);
        dn += w * w;
    }
    st.dnorm = sqrt(dn);
    // Predicted reduction of the linear model: -(2 g.step + step' A step).
    Real gs = 0, sas = 0;
    EF_UNROLL
    for (int a = 0; a < K; ++a) {
        gs += st.g[a] * st.step[a];
        Real row = 0;
        EF_UNROLL
        for (int b = 0; b < K; ++b) row += st.A[a >= b ? tri(a, b) : tri(b, a)] * st.step[b];
        sas += st.step[a] * row;
    }
    st.pred = -(2.0 * static_cast<double>(gs) + static_cast<double>(sas));
    return true;
}

/// Judges a trial (chi2t when `finite`), updates the damping, accepts or not, and says what
/// comes next: another trial, a Jacobian at the new point, or the end.
template <class Real, int K>
EF_HD EF_INLINE LmRequest judge(NormalLmState<Real, K>& st, bool finite, Real chi2t, double reduction) {
    while (true) {
        const double actual = !finite ? -1.0
                              : reduction == reduction ? reduction
                                                       : static_cast<double>(st.chi2) - static_cast<double>(chi2t);
        const double pred = st.pred;
        const double rho = (finite && pred > 0.0) ? actual / pred : -1.0;
        const bool accepted = rho > 1e-4;
        if (accepted) {
            EF_UNROLL
            for (int q = 0; q < K; ++q) st.p[q] = st.pt[q];
        }
        lm_detail::nielsen_update(accepted, rho, st.lambda, st.nu);
        const ReplicaStatus verdict =
            lm_detail::trial_verdict(finite, actual, pred, rho, static_cast<double>(st.chi2), st.ftol, st.solved != 0, st.dnorm,
                          st.xtol, st.pnorm, accepted, st.lambda);
        const bool stop = verdict != ReplicaStatus::not_done;
        if (stop) st.status = static_cast<int>(verdict);
        if (accepted) {
            ++st.iterations;
            st.phase = stop ? kFinal : kIterate;
            return LmRequest::jacobian;
        }
        if (stop) {
            st.phase = kDone;
            return LmRequest::done;
        }
        if (make_trial(st)) {
            st.phase = kTrial;
            return LmRequest::residuals;
        }
        finite = false;  // an unsolvable trial is judged like a non-finite one
        reduction = NAN;
    }
}

/// One iteration from fresh A, g, chi2: scaling, active set, the gtol, iteration and
/// Gauss-Newton tests, then the first trial.
template <class Real, int K>
EF_HD EF_INLINE LmRequest iterate(NormalLmState<Real, K>& st, const LmSettings& s) {
    auto done = [&](ReplicaStatus status) {
        st.status = static_cast<int>(status);
        st.phase = kDone;
        return LmRequest::done;
    };
    if (st.nfree == 0 || st.chi2 == Real(0)) return done(ReplicaStatus::converged);
    const double rnorm = sqrt(static_cast<double>(st.chi2));
    double gcos = 0.0, pnorm = 0.0;
    int na = 0;
    EF_UNROLL
    for (int q = 0; q < K; ++q) {
        const Real cn = sqrt(st.A[tri(q, q)]);
        st.dsc[q] = st.dsc[q] > cn ? st.dsc[q] : cn;
        const bool held = (st.p[q] <= st.lo[q] && st.g[q] > Real(0)) || (st.p[q] >= st.hi[q] && st.g[q] < Real(0));
        st.act[q] = st.free[q] && !held;
        if (st.act[q]) {
            ++na;
            if (cn > Real(0)) gcos = fmax(gcos, fabs(static_cast<double>(st.g[q])) / (static_cast<double>(cn) * rnorm));
            const double w = static_cast<double>(st.dsc[q]) * static_cast<double>(st.p[q]);
            pnorm += w * w;
        }
    }
    st.pnorm = sqrt(pnorm);
    if (na == 0 || gcos <= s.gtol) return done(ReplicaStatus::converged);
    if (st.iterations >= s.max_iterations) return done(ReplicaStatus::max_iterations);
    // Gauss-Newton step: when even it is negligible the fit is done.
    if (damped_step<Real, K>(st.A, st.g, st.dsc, st.act, 0.0, st.step)) {
        double gn = 0.0;
        EF_UNROLL
        for (int q = 0; q < K; ++q) {
            const double w = st.act[q] ? static_cast<double>(st.dsc[q]) * static_cast<double>(st.step[q]) : 0.0;
            gn += w * w;
        }
        if (sqrt(gn) <= st.xtol * (st.pnorm + st.xtol)) return done(ReplicaStatus::converged);
    }
    if (make_trial(st)) {
        st.phase = kTrial;
        return LmRequest::residuals;
    }
    return judge(st, false, Real(0), NAN);
}

}  // namespace lm_normal_detail

/// Starts a replica whose slots are set (normal_set_slot): asks for the first Jacobian. With
/// float the tolerances are raised to what float resolves (ftol >= 8 eps, xtol >= 16 eps).
template <class Real, int K>
EF_HD EF_INLINE LmRequest normal_begin(NormalLmState<Real, K>& st, const LmSettings& s) {
    constexpr double eps = sizeof(Real) == sizeof(float) ? FLT_EPSILON : DBL_EPSILON;
    st.ftol = fmax(s.ftol, 8 * eps);
    st.xtol = fmax(s.xtol, 16 * eps);
    st.nfree = 0;
    EF_UNROLL
    for (int q = 0; q < K; ++q) {
        st.dsc[q] = 0;
        st.nfree += st.free[q] ? 1 : 0;
    }
    st.lambda = 1e-3;
    st.nu = 2.0;
    st.chi2 = 0;
    st.iterations = 1;
    st.status = static_cast<int>(ReplicaStatus::max_iterations);
    st.phase = lm_normal_detail::kIterate;
    st.solved = 0;
    st.last_ok = 1;
    return LmRequest::jacobian;
}

/// After a requested Jacobian: st.chi2, st.A, st.g hold the values at st.p; `ok` = all finite.
template <class Real, int K>
EF_HD EF_NORMAL_OUT_OF_LINE LmRequest normal_on_jacobian(NormalLmState<Real, K>& st, const LmSettings& s, bool ok) {
    using namespace lm_normal_detail;
    st.last_ok = ok ? 1 : 0;
    if (!ok) st.status = static_cast<int>(ReplicaStatus::failed);
    if (!ok || st.phase == kFinal) {
        st.phase = kDone;
        return LmRequest::done;
    }
    return iterate(st, s);
}

/// After requested trial chi^2 at st.pt (`finite`: it is). `reduction`, when not NaN, is the
/// caller's more accurate chi2 - chi2t (computed from differences, not from the two totals).
template <class Real, int K>
EF_HD EF_NORMAL_OUT_OF_LINE LmRequest normal_on_residuals(NormalLmState<Real, K>& st, bool finite, Real chi2t,
                                              double reduction = NAN) {
    return lm_normal_detail::judge(st, finite, chi2t, reduction);
}

/**
 * (J^T W J)^-1 over the free slots from the last A into cov_slots (K x K, column-major; zeros
 * in rows and columns of non-free slots); false, and NaNs, when singular or not finite.
 */
template <class Real, int K>
EF_HD bool normal_covariance(const NormalLmState<Real, K>& st, double* cov_slots) {
    using lm_normal_detail::tri;
    for (int a = 0; a < K * K; ++a) cov_slots[a] = 0.0;
    bool singular = !st.last_ok;
    for (int c = 0; c < K && !singular; ++c) {
        if (!st.free[c]) continue;
        Real M[K * (K + 1) / 2], e[K], col[K];
        for (int a = 0; a < K; ++a) {
            for (int b = 0; b <= a; ++b)
                M[tri(a, b)] = (st.free[a] && st.free[b]) ? st.A[tri(a, b)] : (a == b ? Real(1) : Real(0));
            e[a] = a == c ? Real(1) : Real(0);
        }
        if (!lm_normal_detail::cholesky_solve<Real, K>(M, e, col)) singular = true;
        for (int a = 0; a < K && !singular; ++a)
            if (st.free[a]) cov_slots[a + static_cast<long>(c) * K] = static_cast<double>(col[a]);
    }
    if (singular)
        for (int a = 0; a < K * K; ++a) cov_slots[a] = NAN;
    return !singular;
}

/// The replica's status, iterations and chi^2 as lm_fit reports them.
template <class Real, int K>
EF_HD EF_INLINE LmOutcome normal_outcome(const NormalLmState<Real, K>& st) {
    LmOutcome o;
    o.status = static_cast<ReplicaStatus>(st.status);
    o.iterations = st.iterations;
    o.chi2 = static_cast<double>(st.chi2);
    return o;
}

/// A slot's value widened back to double: the (double) bound itself when on its Real-rounded
/// bound, else kept inside [lower, upper].
template <class Real, int K>
EF_HD EF_INLINE double normal_result(const NormalLmState<Real, K>& st, int j, double lower, double upper) {
    return st.p[j] <= st.lo[j]   ? lower
           : st.p[j] >= st.hi[j] ? upper
                                 : lm_detail::clamp(static_cast<double>(st.p[j]), lower, upper);
}

/**
 * One replica's fit with the model's own evaluation: slot q is parameter q (P <= K), driven
 * through the state machine above. `p` (P doubles) holds the start on entry and the result on
 * exit (fixed parameters untouched); `cov`, when non-null, receives (J^T W J)^-1 over the free
 * parameters at the result (zeros for fixed parameters, NaN when singular). Iterations count
 * Jacobian evaluations, as in lm_fit.
 */
template <class Real, int K, class Model>
EF_HD LmOutcome lm_normal_fit(const Model& m, const NormalFitData<Real>& d, const ParamBoundsView& bounds,
                              const LmSettings& s, double* p_io, double* cov) {
    const int P = bounds.P;
    NormalLmState<Real, K> st;
    EF_UNROLL
    for (int q = 0; q < K; ++q) {
        if (q < P) normal_set_slot(st, q, p_io[q], bounds.lower[q], bounds.upper[q], !bounds.fixed[q]);
        else normal_set_slot(st, q, 0.0, 0.0, 0.0, false);
    }
    LmRequest req = normal_begin(st, s);
    while (req != LmRequest::done) {
        if (req == LmRequest::jacobian) {
            const bool ok = lm_normal_detail::accumulate<Real, K>(m, d, st.p, st.free, st.A, st.g, st.chi2);
            req = normal_on_jacobian(st, s, ok);
        } else {
            Real c2 = 0;
            const bool finite = lm_normal_detail::chi2_at<Real, K>(m, d, st.pt, c2);
            req = normal_on_residuals(st, finite, c2);
        }
    }
    const LmOutcome out = normal_outcome(st);
    for (int q = 0; q < P; ++q)
        if (!bounds.fixed[q]) p_io[q] = normal_result(st, q, bounds.lower[q], bounds.upper[q]);
    if (cov != nullptr) {
        double cs[K * K];
        normal_covariance(st, cs);
        for (int a = 0; a < P; ++a)
            for (int b = 0; b < P; ++b) cov[a + static_cast<long>(b) * P] = cs[a + b * K];
    }
    return out;
}

}  // namespace ef

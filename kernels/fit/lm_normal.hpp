// SPDX-License-Identifier: MIT
#pragma once

#include <cfloat>
#include <vector>

#include "kernels/core/dual.hpp"
#include "kernels/core/hd.hpp"
#include "kernels/fit/lm.hpp"

namespace ef {

/// Most parameters (fixed ones included) the normal-equations solver takes.
inline constexpr int kNormalMaxParams = 16;

/**
 * The normal-equations LM (`[fit] solver = normal`, and every `precision = float` fit): the
 * same bounded Levenberg–Marquardt as lm.hpp (Moré scaling, active set at the bounds, projected
 * trials, Nielsen's damping, MINPACK's three tests), but each Jacobian is never stored. One pass
 * over the points accumulates chi^2, g = J^T W r and A = J^T W J (K (K + 1) / 2 numbers) from
 * dual numbers, and steps solve (A + lambda D^2) step = -g by Cholesky. A replica's whole state
 * is a few dozen numbers, so a GPU thread keeps it in registers and a million replicas need no
 * scratch beyond their data: this is the solver for many small fits. The price is the squared
 * condition number of A: ill-conditioned problems (NIST's higher-difficulty ones) belong to the
 * QR solver, which stays the default.
 *
 * Real is double or float; arithmetic on the data, the Jacobian and the normal equations is in
 * Real, the damping bookkeeping in double. Transcendentals in float are double ef::math rounded
 * to float (dual.hpp), so host and device give the same bits in both precisions. With float the
 * tolerances are raised to what float can resolve: ftol >= 8 eps, xtol >= 16 eps.
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

namespace lm_normal_detail {

/// Index of (a, b), b <= a, in a packed lower triangle.
EF_HD constexpr int tri(int a, int b) { return a * (a + 1) / 2 + b; }

/**
 * chi^2, g and A at p. Dual slot q is parameter q; fixed parameters (and slots past P) are not
 * seeded, so their rows of A and g stay zero. False if anything is non-finite.
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
EF_UNROLL
    for (int a = 0; a < K * (K + 1) / 2; ++a) A[a] = 0;
EF_UNROLL
    for (int a = 0; a < K; ++a) g[a] = 0;
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
            g[a] += wj * r;
EF_UNROLL
            for (int b = 0; b <= a; ++b) A[tri(a, b)] += wj * j[b];
        }
    }
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
EF_HD bool damped_step(const Real* A, const Real* g, const Real* dsc, const bool* act, double lambda, Real* step) {
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
template <class Real, int K, class Model>
EF_HD LmOutcome lm_normal_fit(const Model& m, const NormalFitData<Real>& d, const ParamBoundsView& bounds,
                              const LmSettings& s, double* p_io, double* cov) {
    using namespace lm_normal_detail;
    constexpr double eps = sizeof(Real) == sizeof(float) ? FLT_EPSILON : DBL_EPSILON;
    const double ftol = fmax(s.ftol, 8 * eps);
    const double xtol = fmax(s.xtol, 16 * eps);
    const int P = bounds.P;
    // Everything is indexed by parameter (loops over K unrolled), so a GPU thread keeps it in
    // registers; slots past P are fixed zeros.
    Real p[K], pt[K], lo[K], hi[K], A[K * (K + 1) / 2], g[K], dsc[K], step[K];
    bool free[K], act[K];
    int nfree = 0;
EF_UNROLL
    for (int q = 0; q < K; ++q) {
        free[q] = q < P && !bounds.fixed[q];
        lo[q] = q < P ? static_cast<Real>(bounds.lower[q]) : Real(0);
        hi[q] = q < P ? static_cast<Real>(bounds.upper[q]) : Real(0);
        p[q] = q < P ? static_cast<Real>(lm_detail::clamp(p_io[q], bounds.lower[q], bounds.upper[q])) : Real(0);
        dsc[q] = 0;
        nfree += free[q] ? 1 : 0;
    }
    LmOutcome out;
    out.iterations = 1;
    out.status = ReplicaStatus::max_iterations;
    Real chi2 = 0;
    bool ok = accumulate<Real, K>(m, d, p, free, A, g, chi2);
    double lambda = 1e-3;
    double nu = 2.0;
    bool stop = !ok;
    if (!ok) out.status = ReplicaStatus::failed;
    while (!stop) {
        if (nfree == 0 || chi2 == Real(0)) {
            out.status = ReplicaStatus::converged;
            break;
        }
        // Scaling, active set and the gradient's cosine.
        const double rnorm = sqrt(static_cast<double>(chi2));
        double gcos = 0.0, pnorm = 0.0;
        int na = 0;
EF_UNROLL
        for (int q = 0; q < K; ++q) {
            const Real cn = sqrt(A[tri(q, q)]);
            dsc[q] = dsc[q] > cn ? dsc[q] : cn;
            const bool held = (p[q] <= lo[q] && g[q] > Real(0)) || (p[q] >= hi[q] && g[q] < Real(0));
            act[q] = free[q] && !held;
            if (act[q]) {
                ++na;
                if (cn > Real(0)) gcos = fmax(gcos, fabs(static_cast<double>(g[q])) / (static_cast<double>(cn) * rnorm));
                const double w = static_cast<double>(dsc[q]) * static_cast<double>(p[q]);
                pnorm += w * w;
            }
        }
        pnorm = sqrt(pnorm);
        if (na == 0 || gcos <= s.gtol) {
            out.status = ReplicaStatus::converged;
            break;
        }
        if (out.iterations >= s.max_iterations) break;  // status stays max_iterations
        // Gauss-Newton step: when even it is negligible the fit is done.
        if (damped_step<Real, K>(A, g, dsc, act, 0.0, step)) {
            double gn = 0.0;
EF_UNROLL
            for (int q = 0; q < K; ++q) {
                const double w = act[q] ? static_cast<double>(dsc[q]) * static_cast<double>(step[q]) : 0.0;
                gn += w * w;
            }
            if (sqrt(gn) <= xtol * (pnorm + xtol)) {
                out.status = ReplicaStatus::converged;
                break;
            }
        }
        // Trials at increasing damping until one reduces chi^2 or a test says stop.
        while (true) {
            const bool solved = damped_step<Real, K>(A, g, dsc, act, lambda, step);
            double dnorm = 0.0, pred = -1.0, actual = -1.0;
            Real chi2t = 0;
            bool finite = false;
            if (solved) {
                // Project the trial point into the box; the step taken is pt - p.
EF_UNROLL
                for (int q = 0; q < K; ++q) {
                    pt[q] = act[q] ? static_cast<Real>(lm_detail::clamp(p[q] + step[q], lo[q], hi[q])) : p[q];
                    step[q] = pt[q] - p[q];
                    const double w = static_cast<double>(dsc[q]) * static_cast<double>(step[q]);
                    dnorm += w * w;
                }
                dnorm = sqrt(dnorm);
                // Predicted reduction of the linear model: -(2 g.step + step' A step).
                Real gs = 0, sas = 0;
EF_UNROLL
                for (int a = 0; a < K; ++a) {
                    gs += g[a] * step[a];
                    Real row = 0;
EF_UNROLL
                    for (int b = 0; b < K; ++b) row += A[a >= b ? tri(a, b) : tri(b, a)] * step[b];
                    sas += step[a] * row;
                }
                pred = -(2.0 * static_cast<double>(gs) + static_cast<double>(sas));
                finite = chi2_at<Real, K>(m, d, pt, chi2t);
                if (finite) actual = static_cast<double>(chi2) - static_cast<double>(chi2t);
            }
            const double rho = (finite && pred > 0.0) ? actual / pred : -1.0;
            const bool accepted = rho > 1e-4;
            if (accepted) {
EF_UNROLL
                for (int q = 0; q < K; ++q) p[q] = pt[q];
                const double t3 = 2.0 * rho - 1.0;
                lambda *= fmax(1.0 / 3.0, 1.0 - t3 * t3 * t3);
                nu = 2.0;
            } else {
                lambda *= nu;
                nu *= 2.0;
            }
            // MINPACK's tests, relative to chi^2 before the step.
            const double c2 = static_cast<double>(chi2);
            if (finite && fabs(actual) <= ftol * c2 && pred >= 0.0 && pred <= ftol * c2 && rho <= 2.0) {
                out.status = ReplicaStatus::converged;
                stop = true;
            } else if (solved && dnorm <= xtol * pnorm) {
                out.status = ReplicaStatus::converged;
                stop = true;
            } else if (!accepted && lambda > 1e300) {
                out.status = ReplicaStatus::failed;
                stop = true;
            }
            if (accepted) {
                ++out.iterations;
                ok = accumulate<Real, K>(m, d, p, free, A, g, chi2);
                if (!ok) {
                    out.status = ReplicaStatus::failed;
                    stop = true;
                }
                break;
            }
            if (stop) break;
        }
    }
    out.chi2 = static_cast<double>(chi2);
    // Fixed parameters keep their exact start; one on its (Real-rounded) bound reports the
    // bound itself; the others, widened from Real, stay in the box.
    for (int q = 0; q < P; ++q) {
        if (bounds.fixed[q]) continue;
        p_io[q] = p[q] <= lo[q] ? bounds.lower[q]
                  : p[q] >= hi[q] ? bounds.upper[q]
                                  : lm_detail::clamp(static_cast<double>(p[q]), bounds.lower[q], bounds.upper[q]);
    }
    if (cov != nullptr) {
        // (J^T W J)^-1 over the free parameters, a column per solve.
        for (int a = 0; a < P * P; ++a) cov[a] = 0.0;
        bool singular = !ok;
        for (int c = 0; c < P && !singular; ++c) {
            if (!free[c]) continue;
            Real M[K * (K + 1) / 2], e[K], col[K];
            for (int a = 0; a < K; ++a) {
                for (int b = 0; b <= a; ++b)
                    M[tri(a, b)] = (free[a] && free[b]) ? A[tri(a, b)] : (a == b ? Real(1) : Real(0));
                e[a] = a == c ? Real(1) : Real(0);
            }
            if (!cholesky_solve<Real, K>(M, e, col)) {
                singular = true;
                break;
            }
            for (int a = 0; a < P; ++a)
                if (free[a]) cov[a + static_cast<long>(c) * P] = static_cast<double>(col[a]);
        }
        if (singular)
            for (int a = 0; a < P * P; ++a) cov[a] = NAN;
    }
    return out;
}

}  // namespace ef

// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <cstddef>

#include "kernels/core/dual.hpp"
#include "kernels/core/hd.hpp"
#include "kernels/fit/dense.hpp"

namespace ef {

/// Per-replica outcome codes, as stored in /replicas/status.
enum class ReplicaStatus : int {
    not_done = -1,       ///< not fitted yet (only ever seen in a partial output file)
    converged = 0,       ///< a convergence test passed
    max_iterations = 1,  ///< stopped at [fit] max_iterations
    failed = 2,          ///< non-finite model or chi^2 at the start, or no descent possible
};

/// Most parameters a model may have: small-array bounds for host and device code.
inline constexpr int kMaxParams = 64;

struct LmSettings {
    int max_iterations = 1000;
    double ftol = 1e-15;  ///< relative chi^2: actual and predicted reduction both below it
    double xtol = 1e-10;  ///< relative scaled length of the Gauss-Newton (or trial) step
    double gtol = 1e-12;  ///< cosine between the residual and any Jacobian column
};

/// The data one replica fits: views, never owned. Weight w_i multiplies point i's chi^2 term
/// (bootstrap multiplicities); nullptr means all ones.
struct FitDataView {
    int n = 0;
    int nx = 0;
    const double* x = nullptr;      ///< n x nx, row-major
    const double* y = nullptr;      ///< n
    const double* sigma = nullptr;  ///< n
    const double* weight = nullptr; ///< n or nullptr
};

/// Parameter bounds and fixed flags (size P).
struct ParamBoundsView {
    int P = 0;
    const double* lower = nullptr;
    const double* upper = nullptr;
    const unsigned char* fixed = nullptr;
};

struct LmOutcome {
    ReplicaStatus status = ReplicaStatus::not_done;
    int iterations = 0;  ///< Jacobian evaluations (accepted steps + 1)
    double chi2 = 0.0;
};

/**
 * Scratch memory for one LM fit, carved from one double buffer so that the CPU worker can keep a
 * buffer per thread and a GPU worker a slice per replica. All sizes in doubles.
 */
template <int K>
struct LmWorkspaceLayout {
    std::size_t jac, resid, resid_trial, aug, rhs, small, model_ws, dual_params, dual_ws, total;

    EF_HD LmWorkspaceLayout(int n, int P, int model_ws_size) {
        constexpr std::size_t dual_size = K + 1;
        std::size_t off = 0;
        jac = off;            off += static_cast<std::size_t>(n) * P;
        resid = off;          off += static_cast<std::size_t>(n);
        resid_trial = off;    off += static_cast<std::size_t>(n);
        aug = off;            off += static_cast<std::size_t>(2 * P) * P;
        rhs = off;            off += static_cast<std::size_t>(2 * P);
        small = off;          off += static_cast<std::size_t>(10) * P;
        model_ws = off;       off += static_cast<std::size_t>(model_ws_size);
        dual_params = off;    off += dual_size * P;
        dual_ws = off;        off += dual_size * model_ws_size;
        total = off;
    }
};

namespace lm_detail {

/// chi^2 and scaled residuals r_i = sqrt(w_i) (f_i - y_i) / sigma_i at p. False if non-finite.
template <class Model>
EF_HD bool residuals(const Model& m, const FitDataView& d, const double* p, double* model_ws,
                     double* r, double& chi2) {
    m.prepare(p, model_ws);
    double s = 0.0;
    for (int i = 0; i < d.n; ++i) {
        const double w = d.weight ? d.weight[i] : 1.0;
        if (w == 0.0) {
            r[i] = 0.0;
            continue;
        }
        const double f = m.value(p, model_ws, d.x + static_cast<long>(i) * d.nx, i);
        r[i] = sqrt(w) * (f - d.y[i]) / d.sigma[i];
        s += r[i] * r[i];
    }
    chi2 = s;
    return isfinite(s);
}

/**
 * Residuals and the Jacobian columns of the `nfree` parameters listed in free_idx, from dual
 * numbers, K columns per pass. J is n x nfree column-major. False if anything is non-finite.
 */
template <int K, class Model>
EF_HD bool jacobian(const Model& m, const FitDataView& d, const double* p, int P,
                    const int* free_idx, int nfree, Dual<double, K>* pd, Dual<double, K>* dws,
                    double* J, double* r, double& chi2) {
    using D = Dual<double, K>;
    double s = 0.0;
    const int passes = nfree == 0 ? 1 : (nfree + K - 1) / K;
    for (int pass = 0; pass < passes; ++pass) {
        const int b0 = pass * K;
        for (int q = 0; q < P; ++q) pd[q] = D(p[q]);
        for (int j = b0; j < nfree && j < b0 + K; ++j) pd[free_idx[j]].d[j - b0] = 1.0;
        m.prepare(pd, dws);
        for (int i = 0; i < d.n; ++i) {
            const double w = d.weight ? d.weight[i] : 1.0;
            if (w == 0.0) {
                if (pass == 0) r[i] = 0.0;
                for (int j = b0; j < nfree && j < b0 + K; ++j) J[static_cast<long>(j) * d.n + i] = 0.0;
                continue;
            }
            const D f = m.value(pd, dws, d.x + static_cast<long>(i) * d.nx, i);
            const double sc = sqrt(w) / d.sigma[i];
            if (pass == 0) {
                r[i] = sc * (f.v - d.y[i]);
                s += r[i] * r[i];
            }
            for (int j = b0; j < nfree && j < b0 + K; ++j) {
                const double v = sc * f.d[j - b0];
                if (!isfinite(v)) return false;
                J[static_cast<long>(j) * d.n + i] = v;
            }
        }
    }
    chi2 = s;
    return isfinite(s);
}

EF_HD inline double clamp(double v, double lo, double hi) { return v < lo ? lo : (v > hi ? hi : v); }

}  // namespace lm_detail

/**
 * Bounded Levenberg–Marquardt for one replica, single source for host and device.
 *
 * Steps solve min ||J d + r||^2 + lambda ||D d||^2 by Householder QR of J (once per Jacobian)
 * and of the small [R; sqrt(lambda) D] (once per trial), D being Moré's running column-norm
 * scaling. Bounds are handled by projection with an active set: a parameter sitting on a bound
 * whose gradient points outward is held for that iteration, and trial points are clipped into
 * the box. lambda follows Nielsen's update. Converges on (i) relative actual and predicted chi^2
 * reduction below ftol, (ii) relative scaled step below xtol, or (iii) cosine of the gradient
 * below gtol; a non-finite model at the start, or a step that cannot reduce chi^2 even at huge
 * damping, fails the replica without stopping the run.
 *
 * `p` (size P) holds the start on entry and the result on exit. When `cov` is non-null it
 * receives the P x P covariance (J^T W J)^-1 over the free parameters (zeros for fixed ones, NaN
 * if singular), from one extra Jacobian at the optimum.
 */
template <int K, class Model>
EF_HD LmOutcome lm_fit(const Model& m, const FitDataView& d, const ParamBoundsView& bounds,
                       const LmSettings& s, double* p, double* work, double* cov) {
    using D = Dual<double, K>;
    const int P = bounds.P;
    const int n = d.n;
    const LmWorkspaceLayout<K> L(n, P, m.workspace_size());
    double* J = work + L.jac;
    double* r = work + L.resid;
    double* rt = work + L.resid_trial;
    double* aug = work + L.aug;
    double* rhs = work + L.rhs;
    double* dsc = work + L.small;         // D scaling, per free parameter
    double* g = dsc + P;                  // gradient J^T r, per free parameter
    double* c = g + P;                    // Q^T r over the active columns
    double* step = c + P;                 // step over the active columns
    double* pt = step + P;                // trial point, all P
    double* colnorm = pt + P;             // column norms of J
    int* free_idx = reinterpret_cast<int*>(colnorm + P);   // P ints in P doubles
    int* act = reinterpret_cast<int*>(colnorm + 2 * P);    // active positions into free_idx
    double* mws = work + L.model_ws;
    D* pd = reinterpret_cast<D*>(work + L.dual_params);
    D* dws = reinterpret_cast<D*>(work + L.dual_ws);

    LmOutcome out;
    int nfree = 0;
    for (int q = 0; q < P; ++q) {
        p[q] = lm_detail::clamp(p[q], bounds.lower[q], bounds.upper[q]);
        if (!bounds.fixed[q]) free_idx[nfree++] = q;
    }

    double chi2 = 0.0;
    if (!lm_detail::jacobian<K>(m, d, p, P, free_idx, nfree, pd, dws, J, r, chi2)) {
        out.status = ReplicaStatus::failed;
        out.iterations = 1;
        out.chi2 = chi2;
        return out;
    }
    for (int j = 0; j < nfree; ++j) dsc[j] = 0.0;
    double lambda = 1e-3;
    double nu = 2.0;
    int iterations = 1;
    ReplicaStatus status = ReplicaStatus::max_iterations;

    while (true) {
        if (nfree == 0 || chi2 == 0.0) {
            status = ReplicaStatus::converged;
            break;
        }
        // Gradient, column norms, scaling, and the active set.
        const double rnorm = sqrt(chi2);
        double gcos = 0.0;
        int na = 0;
        for (int j = 0; j < nfree; ++j) {
            const double* col = J + static_cast<long>(j) * n;
            double gj = 0.0, cn = 0.0;
            for (int i = 0; i < n; ++i) {
                gj += col[i] * r[i];
                cn += col[i] * col[i];
            }
            g[j] = gj;
            colnorm[j] = sqrt(cn);
            dsc[j] = fmax(dsc[j], colnorm[j]);
            const int q = free_idx[j];
            const bool held = (p[q] <= bounds.lower[q] && gj > 0.0) ||
                              (p[q] >= bounds.upper[q] && gj < 0.0);
            if (!held) {
                act[na++] = j;
                if (colnorm[j] > 0.0) gcos = fmax(gcos, fabs(gj) / (colnorm[j] * rnorm));
            }
        }
        if (na == 0 || gcos <= s.gtol) {
            status = ReplicaStatus::converged;
            break;
        }
        if (iterations >= s.max_iterations) {
            status = ReplicaStatus::max_iterations;
            break;
        }
        // QR of the active columns (moved to the front of J), c = Q^T r.
        for (int t = 0; t < na; ++t) {
            if (act[t] == t) continue;
            const double* src = J + static_cast<long>(act[t]) * n;
            double* dst = J + static_cast<long>(t) * n;
            for (int i = 0; i < n; ++i) dst[i] = src[i];
        }
        for (int i = 0; i < n; ++i) rt[i] = r[i];
        householder_qr(J, n, na, n, rt);
        double cc = 0.0;
        for (int t = 0; t < na; ++t) {
            c[t] = rt[t];
            cc += c[t] * c[t];
        }
        double pnorm = 0.0;
        for (int t = 0; t < na; ++t) {
            const double v = dsc[act[t]] * p[free_idx[act[t]]];
            pnorm += v * v;
        }
        pnorm = sqrt(pnorm);
        // Gauss-Newton step (lambda = 0): when even it is negligible the fit is done. Tested on
        // the step, not on chi^2, because poorly determined parameters (NIST's ENSO) move chi^2
        // by less than its rounding long before they reach six digits.
        for (int t = 0; t < na; ++t) rhs[t] = -c[t];
        if (back_substitute(J, na, n, rhs, step)) {
            double gn = 0.0;
            for (int t = 0; t < na; ++t) {
                const double v = dsc[act[t]] * step[t];
                gn += v * v;
            }
            if (sqrt(gn) <= s.xtol * (pnorm + s.xtol)) {
                status = ReplicaStatus::converged;
                break;
            }
        }

        // Trials at increasing damping until one reduces chi^2 or a test says stop.
        bool accepted = false;
        bool stop = false;
        while (!accepted && !stop) {
            const int m2 = 2 * na;
            const double sl = sqrt(lambda);
            for (int j = 0; j < na; ++j) {
                double* col = aug + static_cast<long>(j) * m2;
                for (int i = 0; i < na; ++i) col[i] = i <= j ? J[i + static_cast<long>(j) * n] : 0.0;
                for (int i = 0; i < na; ++i) col[na + i] = i == j ? sl * dsc[act[j]] : 0.0;
            }
            for (int i = 0; i < na; ++i) rhs[i] = -c[i];
            for (int i = 0; i < na; ++i) rhs[na + i] = 0.0;
            householder_qr(aug, m2, na, m2, rhs);
            const bool solved = back_substitute(aug, na, m2, rhs, step);
            // Project the trial point into the box; the step actually taken is pt - p.
            for (int q = 0; q < P; ++q) pt[q] = p[q];
            double dnorm = 0.0;
            if (solved) {
                for (int t = 0; t < na; ++t) {
                    const int q = free_idx[act[t]];
                    pt[q] = lm_detail::clamp(p[q] + step[t], bounds.lower[q], bounds.upper[q]);
                    step[t] = pt[q] - p[q];
                    const double v = dsc[act[t]] * step[t];
                    dnorm += v * v;
                }
            }
            dnorm = sqrt(dnorm);
            // Predicted reduction from the linear model: ||c||^2 - ||R step + c||^2.
            double rs = 0.0;
            for (int i = 0; i < na; ++i) {
                double v = c[i];
                for (int j = i; j < na; ++j) v += J[i + static_cast<long>(j) * n] * step[j];
                rs += v * v;
            }
            const double pred = solved ? cc - rs : -1.0;
            double chi2t = 0.0;
            const bool finite = solved && lm_detail::residuals(m, d, pt, mws, rt, chi2t);
            // Actual reduction as sum (r - r')(r + r'): exact to the rounding of each residual,
            // where chi2 - chi2' would lose everything below chi2's last digit.
            double actual = -1.0;
            if (finite) {
                actual = 0.0;
                for (int i = 0; i < n; ++i) actual += (r[i] - rt[i]) * (r[i] + rt[i]);
            }
            const double rho = (finite && pred > 0.0) ? actual / pred : -1.0;

            if (rho > 1e-4) {
                accepted = true;
                for (int q = 0; q < P; ++q) p[q] = pt[q];
                const double t3 = 2.0 * rho - 1.0;
                lambda *= fmax(1.0 / 3.0, 1.0 - t3 * t3 * t3);
                nu = 2.0;
            } else {
                lambda *= nu;
                nu *= 2.0;
            }
            // Convergence tests (MINPACK's), relative to the chi^2 before the step.
            if (finite && fabs(actual) <= s.ftol * chi2 && pred >= 0.0 && pred <= s.ftol * chi2 &&
                rho <= 2.0) {
                status = ReplicaStatus::converged;
                stop = true;
            } else if (solved && dnorm <= s.xtol * pnorm) {
                status = ReplicaStatus::converged;
                stop = true;
            } else if (!accepted && lambda > 1e300) {
                status = ReplicaStatus::failed;
                stop = true;
            }
        }
        if (accepted) {
            ++iterations;
            if (!lm_detail::jacobian<K>(m, d, p, P, free_idx, nfree, pd, dws, J, r, chi2)) {
                status = ReplicaStatus::failed;
                break;
            }
        }
        if (stop) break;
    }

    out.status = status;
    out.iterations = iterations;
    out.chi2 = chi2;

    if (cov != nullptr) {
        for (long q = 0; q < static_cast<long>(P) * P; ++q) cov[q] = 0.0;
        double c2 = 0.0;
        if (nfree > 0 && lm_detail::jacobian<K>(m, d, p, P, free_idx, nfree, pd, dws, J, r, c2)) {
            householder_qr(J, n, nfree, n, nullptr);
            // cov = R^-1 R^-T over the free parameters: invert R column by column into aug.
            bool singular = false;
            for (int j = 0; j < nfree && !singular; ++j) {
                for (int i = 0; i < nfree; ++i) rhs[i] = i == j ? 1.0 : 0.0;
                double* xcol = aug + static_cast<long>(j) * nfree;  // column j of R^-1
                for (int i = nfree - 1; i >= 0; --i) {
                    double v = rhs[i];
                    for (int k = i + 1; k < nfree; ++k) v -= J[i + static_cast<long>(k) * n] * xcol[k];
                    const double dd = J[i + static_cast<long>(i) * n];
                    if (dd == 0.0) {
                        singular = true;
                        break;
                    }
                    xcol[i] = v / dd;
                }
            }
            for (int a = 0; a < nfree; ++a) {
                for (int b = 0; b < nfree; ++b) {
                    double v = 0.0;
                    // (R^-1 R^-T)_ab = sum_k Rinv_ak Rinv_bk, Rinv upper triangular.
                    for (int k = (a > b ? a : b); k < nfree; ++k)
                        v += aug[a + static_cast<long>(k) * nfree] * aug[b + static_cast<long>(k) * nfree];
                    cov[free_idx[a] + static_cast<long>(free_idx[b]) * P] = singular ? NAN : v;
                }
            }
        } else {
            for (long q = 0; q < static_cast<long>(P) * P; ++q) cov[q] = NAN;
        }
    }
    return out;
}

}  // namespace ef

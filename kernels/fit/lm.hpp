// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <cstddef>

#include "kernels/core/dual.hpp"
#include "kernels/core/hd.hpp"
#include "kernels/fit/dense.hpp"
#include "kernels/fit/lanes.hpp"
#include "kernels/fit/whiten.hpp"

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
    /// Correlated data (src/fit/correlated.cpp): residuals are L^-1 f(p) - y with y already
    /// whitened, sigma all ones and no weights. Host memory: the CPU qr path only.
    const WhitenView* white = nullptr;
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
 * The LM's own scratch (everything but the model's), carved from one double buffer so that the
 * CPU worker can keep a buffer per thread and a GPU worker a slice per replica. Sizes in
 * doubles. The residuals come right before the Jacobian so that [r | J] is one n x (1 + nfree)
 * column-major block: the batched table-model path (kernels/fit/lm_batched.hpp) writes a
 * replica's prediction and derivative columns there with one GEMM.
 */
struct LmScratchLayout {
    std::size_t resid, jac, resid_trial, aug, rhs, small, total;

    EF_HD LmScratchLayout(int n, int P) {
        std::size_t off = 0;
        resid = off;          off += static_cast<std::size_t>(n);
        jac = off;            off += static_cast<std::size_t>(n) * P;
        resid_trial = off;    off += static_cast<std::size_t>(n);
        aug = off;            off += static_cast<std::size_t>(2 * P) * P;
        rhs = off;            off += static_cast<std::size_t>(2 * P);
        small = off;          off += static_cast<std::size_t>(10) * P;
        total = off;
    }
};

/// LmScratchLayout plus the model's workspace and the dual-number copies used by lm_fit.
template <int K>
struct LmWorkspaceLayout {
    std::size_t resid, jac, resid_trial, aug, rhs, small, model_ws, dual_params, dual_ws, total;

    EF_HD LmWorkspaceLayout(int n, int P, int model_ws_size) {
        const LmScratchLayout s(n, P);
        resid = s.resid;
        jac = s.jac;
        resid_trial = s.resid_trial;
        aug = s.aug;
        rhs = s.rhs;
        small = s.small;
        constexpr std::size_t dual_size = K + 1;
        std::size_t off = s.total;
        model_ws = off;       off += static_cast<std::size_t>(model_ws_size);
        dual_params = off;    off += dual_size * P;
        dual_ws = off;        off += dual_size * model_ws_size;
        total = off;
    }
};

/// What an LM replica needs next from its caller.
enum class LmRequest : int {
    jacobian = 0,   ///< residuals r and Jacobian J (free columns) at p, then lm_on_jacobian
    residuals = 1,  ///< residuals r_trial at the trial point, then lm_on_residuals
    done = 2,       ///< finished: status, iterations and chi2 are final
};

/**
 * The state of one replica's LM between model evaluations. With lm_begin / lm_on_jacobian /
 * lm_on_residuals the solver is a resumable state machine, so a caller can evaluate the model
 * for many replicas at once (one GEMM for all of them) between steps; lm_fit() drives the same
 * machine for one replica with the model's own evaluation. Plain data: lives in device memory.
 */
struct LmState {
    int phase = 0;
    int nfree = 0;
    int na = 0;
    int iterations = 0;
    int status = static_cast<int>(ReplicaStatus::not_done);
    int solved = 0;
    int want_cov = 0;
    double chi2 = 0.0;
    double lambda = 1e-3;
    double nu = 2.0;
    double cc = 0.0;
    double pnorm = 0.0;
    double pred = 0.0;
    double dnorm = 0.0;
};

namespace lm_detail {

enum Phase : int { kMain = 0, kTrial = 1, kFinal = 2, kCovariance = 3, kDone = 4 };

/// Pointers into the LM scratch of one replica.
struct LmView {
    double* r;
    double* J;
    double* rt;
    double* aug;
    double* rhs;
    double* dsc;       // D scaling, per free parameter
    double* g;         // gradient J^T r, per free parameter
    double* c;         // Q^T r over the active columns
    double* step;      // step over the active columns
    double* pt;        // trial point, all P
    double* colnorm;   // column norms of J
    int* free_idx;     // P ints in P doubles
    int* act;          // active positions into free_idx

    EF_HD LmView(double* work, int n, int P) {
        const LmScratchLayout L(n, P);
        r = work + L.resid;
        J = work + L.jac;
        rt = work + L.resid_trial;
        aug = work + L.aug;
        rhs = work + L.rhs;
        dsc = work + L.small;
        g = dsc + P;
        c = g + P;
        step = c + P;
        pt = step + P;
        colnorm = pt + P;
        free_idx = reinterpret_cast<int*>(colnorm + P);
        act = reinterpret_cast<int*>(colnorm + 2 * P);
    }
};

/// r <- r - y over the whitened model values, chi^2 = |r|^2 (correlated data).
EF_HD inline bool subtract_white(const FitDataView& d, double* r, double& chi2) {
    whiten_in_place(*d.white, r);
    double s = 0.0;
    for (int i = 0; i < d.n; ++i) {
        r[i] -= d.y[i];
        s += r[i] * r[i];
    }
    chi2 = s;
    return isfinite(s);
}

/// residuals() for correlated data (d.white): r = L^-1 f(p) - y.
template <class Model>
EF_HD bool residuals_white(const Model& m, const FitDataView& d, const double* p, double* model_ws,
                           double* r, double& chi2) {
    m.prepare(p, model_ws);
    for (int i = 0; i < d.n; ++i) r[i] = m.value(p, model_ws, d.x + static_cast<long>(i) * d.nx, i);
    return subtract_white(d, r, chi2);
}

/// chi^2 and scaled residuals r_i = sqrt(w_i) (f_i - y_i) / sigma_i at p (whitened instead for
/// correlated data). False if non-finite.
template <class Model>
EF_HD bool residuals(const Model& m, const FitDataView& d, const double* p, double* model_ws,
                     double* r, double& chi2) {
#ifndef __CUDA_ARCH__  // host memory, CPU only (make_worker refuses a GPU worker for it)
    if (d.white != nullptr) return residuals_white(m, d, p, model_ws, r, chi2);
#endif
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

/// jacobian() for correlated data (d.white): the model's values and derivative columns, each
/// whitened as a whole, then r = L^-1 f - y.
template <int K, class Model>
EF_HD bool jacobian_white(const Model& m, const FitDataView& d, const double* p, int P,
                          const int* free_idx, int nfree, Dual<double, K>* pd, Dual<double, K>* dws,
                          double* J, double* r, double& chi2) {
    using D = Dual<double, K>;
    const int passes = nfree == 0 ? 1 : (nfree + K - 1) / K;
    for (int pass = 0; pass < passes; ++pass) {
        const int b0 = pass * K;
        for (int q = 0; q < P; ++q) pd[q] = D(p[q]);
        for (int j = b0; j < nfree && j < b0 + K; ++j) pd[free_idx[j]].d[j - b0] = 1.0;
        m.prepare(pd, dws);
        for (int i = 0; i < d.n; ++i) {
            const D f = m.value(pd, dws, d.x + static_cast<long>(i) * d.nx, i);
            if (pass == 0) r[i] = f.v;
            for (int j = b0; j < nfree && j < b0 + K; ++j) J[static_cast<long>(j) * d.n + i] = f.d[j - b0];
        }
    }
    for (int j = 0; j < nfree; ++j) {
        double* col = J + static_cast<long>(j) * d.n;
        whiten_in_place(*d.white, col);
        for (int i = 0; i < d.n; ++i)
            if (!isfinite(col[i])) return false;
    }
    return subtract_white(d, r, chi2);
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
#ifndef __CUDA_ARCH__
    if (d.white != nullptr) return jacobian_white<K>(m, d, p, P, free_idx, nfree, pd, dws, J, r, chi2);
#endif
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

/// Nielsen's damping update after a trial with gain ratio rho (accepted or not).
EF_HD inline void nielsen_update(bool accepted, double rho, double& lambda, double& nu) {
    if (accepted) {
        const double t3 = 2.0 * rho - 1.0;
        lambda *= fmax(1.0 / 3.0, 1.0 - t3 * t3 * t3);
        nu = 2.0;
    } else {
        lambda *= nu;
        nu *= 2.0;
    }
}

/**
 * MINPACK's tests after a trial, relative to chi^2 before it (shared by the QR and the normal-
 * equations LM): converged when actual and predicted relative reductions are both below ftol,
 * or the scaled step below xtol of the scaled parameters; failed when no step helps even at
 * huge damping; not_done otherwise.
 */
EF_HD inline ReplicaStatus trial_verdict(bool finite, double actual, double pred, double rho, double chi2,
                                         double ftol, bool solved, double dnorm, double xtol, double pnorm,
                                         bool accepted, double lambda) {
    if (finite && fabs(actual) <= ftol * chi2 && pred >= 0.0 && pred <= ftol * chi2 && rho <= 2.0)
        return ReplicaStatus::converged;
    if (solved && dnorm <= xtol * pnorm) return ReplicaStatus::converged;
    if (!accepted && lambda > 1e300) return ReplicaStatus::failed;
    return ReplicaStatus::not_done;
}

/// The trial at the current damping: solve [R; sqrt(lambda) D] step = [-c; 0], project into
/// the box, predicted reduction. Sets st.solved, st.pred, st.dnorm; pt holds the trial point.
/// The small in-place solve runs on the leader; every lane then derives the same scalars.
template <class Exec>
EF_HD void make_trial(const Exec& ex, LmState& st, const ParamBoundsView& bounds, const double* p, int n,
                      const LmView& v) {
    const int na = st.na;
    const int P = bounds.P;
    const int m2 = 2 * na;
    ex.sync();
    if (ex.leader()) {
        const double sl = sqrt(st.lambda);
        for (int j = 0; j < na; ++j) {
            double* col = v.aug + static_cast<long>(j) * m2;
            for (int i = 0; i < na; ++i) col[i] = i <= j ? v.J[i + static_cast<long>(j) * n] : 0.0;
            for (int i = 0; i < na; ++i) col[na + i] = i == j ? sl * v.dsc[v.act[j]] : 0.0;
        }
        for (int i = 0; i < na; ++i) v.rhs[i] = -v.c[i];
        for (int i = 0; i < na; ++i) v.rhs[na + i] = 0.0;
        householder_qr(v.aug, m2, na, m2, v.rhs);
        const bool ok = back_substitute(v.aug, na, m2, v.rhs, v.step);
        // Project the trial point into the box; the step actually taken is pt - p.
        for (int q = 0; q < P; ++q) v.pt[q] = p[q];
        if (ok) {
            for (int t = 0; t < na; ++t) {
                const int q = v.free_idx[v.act[t]];
                v.pt[q] = clamp(p[q] + v.step[t], bounds.lower[q], bounds.upper[q]);
                v.step[t] = v.pt[q] - p[q];
            }
        }
    }
    ex.sync();
    // back_substitute fails exactly when a diagonal entry of R is zero.
    bool solved = true;
    for (int i = 0; i < na; ++i)
        if (v.aug[i + static_cast<long>(i) * m2] == 0.0) solved = false;
    double dnorm = 0.0;
    if (solved) {
        for (int t = 0; t < na; ++t) {
            const double w = v.dsc[v.act[t]] * v.step[t];
            dnorm += w * w;
        }
    }
    st.dnorm = sqrt(dnorm);
    // Predicted reduction from the linear model: ||c||^2 - ||R step + c||^2.
    double rs = 0.0;
    for (int i = 0; i < na; ++i) {
        double w = v.c[i];
        for (int j = i; j < na; ++j) w += v.J[i + static_cast<long>(j) * n] * v.step[j];
        rs += w * w;
    }
    st.solved = solved ? 1 : 0;
    st.pred = solved ? st.cc - rs : -1.0;
}

/// The end of a replica: a covariance Jacobian when asked for, else done.
EF_HD inline LmRequest finish(LmState& st) {
    if (st.want_cov) {
        st.phase = kCovariance;
        return LmRequest::jacobian;
    }
    st.phase = kDone;
    return LmRequest::done;
}

/// Judges the trial (its residuals in rt when finite), updates lambda, accepts or not, and
/// says what comes next: another trial, a Jacobian at the new point, or the end.
template <class Exec>
EF_HD LmRequest judge_trial(const Exec& ex, LmState& st, const LmSettings& s, const ParamBoundsView& bounds,
                            double* p, int n, const LmView& v, bool finite) {
    const int P = bounds.P;
    while (true) {
        // Actual reduction as sum (r - r')(r + r'): exact to the rounding of each residual,
        // where chi2 - chi2' would lose everything below chi2's last digit.
        double actual = -1.0;
        if (finite) actual = ex.sum(0, n, [&](int i) { return (v.r[i] - v.rt[i]) * (v.r[i] + v.rt[i]); });
        const double pred = st.pred;
        const double rho = (finite && pred > 0.0) ? actual / pred : -1.0;
        const bool accepted = rho > 1e-4;
        if (accepted)
            for (int q = 0; q < P; ++q) p[q] = v.pt[q];
        nielsen_update(accepted, rho, st.lambda, st.nu);
        const ReplicaStatus verdict = trial_verdict(finite, actual, pred, rho, st.chi2, s.ftol, st.solved != 0,
                                                    st.dnorm, s.xtol, st.pnorm, accepted, st.lambda);
        const bool stop = verdict != ReplicaStatus::not_done;
        if (stop) st.status = static_cast<int>(verdict);
        if (accepted) {
            ++st.iterations;
            st.phase = stop ? kFinal : kMain;
            return LmRequest::jacobian;
        }
        if (stop) return finish(st);
        make_trial(ex, st, bounds, p, n, v);
        if (st.solved) {
            st.phase = kTrial;
            return LmRequest::residuals;
        }
        finite = false;  // an unsolvable trial is judged like a non-finite one
    }
}

/// One LM iteration from a fresh Jacobian: gradient, scaling, active set, the gtol, iteration
/// and Gauss-Newton step tests, QR of the active columns, then the first trial.
template <class Exec>
EF_HD LmRequest iterate(const Exec& ex, LmState& st, const LmSettings& s, const ParamBoundsView& bounds,
                        double* p, int n, const LmView& v) {
    const int nfree = st.nfree;
    if (nfree == 0 || st.chi2 == 0.0) {
        st.status = static_cast<int>(ReplicaStatus::converged);
        return finish(st);
    }
    // Gradient, column norms, scaling, and the active set.
    const double rnorm = sqrt(st.chi2);
    double gcos = 0.0;
    int na = 0;
    // J^T r and the column norms, kMaxFused / 2 columns per sweep over the rows.
    for (int j = 0; j < nfree; ++j) {
        const int grp = kMaxFused / 2;
        if (j % grp == 0) {
            const int g = nfree - j < grp ? nfree - j : grp;
            const double* c0 = v.J + static_cast<long>(j) * n;
            double out[kMaxFused];
            ex.sums(0, n, 2 * g, [&](int i, int t) {
                const double x = c0[static_cast<long>(t >> 1) * n + i];
                return (t & 1) ? x * x : x * v.r[i];
            }, out);
            for (int t = 0; t < g; ++t) {
                v.g[j + t] = out[2 * t];
                v.colnorm[j + t] = out[2 * t + 1];  // squared here, rooted below
            }
        }
        ex.sync();
        const double gj = v.g[j];
        const double cn = v.colnorm[j];
        ex.sync();
        v.g[j] = gj;
        v.colnorm[j] = sqrt(cn);
        v.dsc[j] = fmax(v.dsc[j], v.colnorm[j]);
        const int q = v.free_idx[j];
        const bool held = (p[q] <= bounds.lower[q] && gj > 0.0) || (p[q] >= bounds.upper[q] && gj < 0.0);
        if (!held) {
            v.act[na++] = j;
            if (v.colnorm[j] > 0.0) gcos = fmax(gcos, fabs(gj) / (v.colnorm[j] * rnorm));
        }
    }
    st.na = na;
    if (na == 0 || gcos <= s.gtol) {
        st.status = static_cast<int>(ReplicaStatus::converged);
        return finish(st);
    }
    if (st.iterations >= s.max_iterations) {
        st.status = static_cast<int>(ReplicaStatus::max_iterations);
        return finish(st);
    }
    // QR of the active columns (moved to the front of J), c = Q^T r.
    for (int t = 0; t < na; ++t) {
        if (v.act[t] == t) continue;
        const double* src = v.J + static_cast<long>(v.act[t]) * n;
        double* dst = v.J + static_cast<long>(t) * n;
        ex.for_each(0, n, [&](int i) { dst[i] = src[i]; });
    }
    ex.for_each(0, n, [&](int i) { v.rt[i] = v.r[i]; });
    householder_qr(ex, v.J, n, na, n, v.rt);
    double cc = 0.0;
    for (int t = 0; t < na; ++t) {
        v.c[t] = v.rt[t];
        cc += v.c[t] * v.c[t];
    }
    st.cc = cc;
    double pnorm = 0.0;
    for (int t = 0; t < na; ++t) {
        const double w = v.dsc[v.act[t]] * p[v.free_idx[v.act[t]]];
        pnorm += w * w;
    }
    st.pnorm = sqrt(pnorm);
    // Gauss-Newton step (lambda = 0): when even it is negligible the fit is done. Tested on the
    // step, not on chi^2, because poorly determined parameters (NIST's ENSO) move chi^2 by less
    // than its rounding long before they reach six digits.
    for (int t = 0; t < na; ++t) v.rhs[t] = -v.c[t];
    if (back_substitute(v.J, na, n, v.rhs, v.step)) {
        double gn = 0.0;
        for (int t = 0; t < na; ++t) {
            const double w = v.dsc[v.act[t]] * v.step[t];
            gn += w * w;
        }
        if (sqrt(gn) <= s.xtol * (st.pnorm + s.xtol)) {
            st.status = static_cast<int>(ReplicaStatus::converged);
            return finish(st);
        }
    }
    // Trials at increasing damping until one reduces chi^2 or a test says stop.
    make_trial(ex, st, bounds, p, n, v);
    if (st.solved) {
        st.phase = kTrial;
        return LmRequest::residuals;
    }
    return judge_trial(ex, st, s, bounds, p, n, v, false);
}

/// cov = (J^T W J)^-1 = R^-1 R^-T over the free parameters from the Jacobian in J.
template <class Exec>
EF_HD void covariance(const Exec& ex, const LmState& st, int P, int n, const LmView& v, bool ok, double* cov) {
    const int nfree = st.nfree;
    if (!(nfree > 0 && ok)) {
        ex.sync();
        if (ex.leader())
            for (long q = 0; q < static_cast<long>(P) * P; ++q) cov[q] = NAN;
        ex.sync();
        return;
    }
    householder_qr(ex, v.J, n, nfree, n, nullptr);
    if (!ex.leader()) return;
    for (long q = 0; q < static_cast<long>(P) * P; ++q) cov[q] = 0.0;
    // Invert R column by column into aug.
    bool singular = false;
    for (int j = 0; j < nfree && !singular; ++j) {
        for (int i = 0; i < nfree; ++i) v.rhs[i] = i == j ? 1.0 : 0.0;
        double* xcol = v.aug + static_cast<long>(j) * nfree;  // column j of R^-1
        for (int i = nfree - 1; i >= 0; --i) {
            double w = v.rhs[i];
            for (int k = i + 1; k < nfree; ++k) w -= v.J[i + static_cast<long>(k) * n] * xcol[k];
            const double dd = v.J[i + static_cast<long>(i) * n];
            if (dd == 0.0) {
                singular = true;
                break;
            }
            xcol[i] = w / dd;
        }
    }
    for (int a = 0; a < nfree; ++a) {
        for (int b = 0; b < nfree; ++b) {
            double w = 0.0;
            // (R^-1 R^-T)_ab = sum_k Rinv_ak Rinv_bk, Rinv upper triangular.
            for (int k = (a > b ? a : b); k < nfree; ++k)
                w += v.aug[a + static_cast<long>(k) * nfree] * v.aug[b + static_cast<long>(k) * nfree];
            cov[v.free_idx[a] + static_cast<long>(v.free_idx[b]) * P] = singular ? NAN : w;
        }
    }
}

}  // namespace lm_detail

/**
 * Bounded Levenberg–Marquardt, single source for host and device, as a state machine.
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
 * Protocol: lm_begin() clamps the start `p` (size P) into the box and asks for a Jacobian. For
 * LmRequest::jacobian the caller writes the residuals into r and the free parameters' columns
 * into J (lm_residuals_ptr / lm_jacobian_ptr, at the point lm_request_point) and calls
 * lm_on_jacobian with chi^2 = sum r_i^2 and whether all of it is finite; for
 * LmRequest::residuals it writes the trial's residuals into lm_trial_residuals_ptr and calls
 * lm_on_residuals. `work` is the LmScratchLayout(n, P) of this replica, untouched by the
 * caller otherwise. With `want_cov` a last Jacobian at the optimum gives the covariance
 * (J^T W J)^-1 over the free parameters (zeros for fixed ones, NaN if singular).
 */
EF_HD inline LmRequest lm_begin(LmState& st, const ParamBoundsView& bounds, double* p, double* work, int n,
                                bool want_cov) {
    // (one thread per replica: lm_begin has no O(n) loop)
    const lm_detail::LmView v(work, n, bounds.P);
    st = LmState{};
    st.want_cov = want_cov ? 1 : 0;
    int nfree = 0;
    for (int q = 0; q < bounds.P; ++q) {
        p[q] = lm_detail::clamp(p[q], bounds.lower[q], bounds.upper[q]);
        if (!bounds.fixed[q]) v.free_idx[nfree++] = q;
    }
    st.nfree = nfree;
    for (int j = 0; j < nfree; ++j) v.dsc[j] = 0.0;
    st.iterations = 1;
    st.status = static_cast<int>(ReplicaStatus::max_iterations);
    st.phase = lm_detail::kMain;
    return LmRequest::jacobian;
}

/// Where the requested evaluation happens: p for a Jacobian, the trial point for residuals.
EF_HD inline const double* lm_request_point(const LmState& st, const double* p, double* work, int n, int P) {
    return st.phase == lm_detail::kTrial ? lm_detail::LmView(work, n, P).pt : p;
}
EF_HD inline const int* lm_free_index(double* work, int n, int P) { return lm_detail::LmView(work, n, P).free_idx; }
EF_HD inline double* lm_residuals_ptr(double* work, int n, int P) { return lm_detail::LmView(work, n, P).r; }
EF_HD inline double* lm_jacobian_ptr(double* work, int n, int P) { return lm_detail::LmView(work, n, P).J; }
EF_HD inline double* lm_trial_residuals_ptr(double* work, int n, int P) { return lm_detail::LmView(work, n, P).rt; }

/// After a requested Jacobian (r, J filled; `ok`: all finite; chi2 = sum r^2). `cov` (P x P)
/// receives the covariance when that Jacobian was the covariance's.
template <class Exec>
EF_HD LmRequest lm_on_jacobian(const Exec& ex, LmState& st, const LmSettings& s, const ParamBoundsView& bounds,
                               double* p, double* work, int n, bool ok, double chi2, double* cov) {
    using namespace lm_detail;
    const LmView v(work, n, bounds.P);
    switch (st.phase) {
        case kCovariance:
            if (cov != nullptr) covariance(ex, st, bounds.P, n, v, ok, cov);
            st.phase = kDone;
            return LmRequest::done;
        case kFinal:
            st.chi2 = chi2;
            if (!ok) st.status = static_cast<int>(ReplicaStatus::failed);
            return finish(st);
        default:
            st.chi2 = chi2;
            if (!ok) {
                st.status = static_cast<int>(ReplicaStatus::failed);
                return finish(st);
            }
            return iterate(ex, st, s, bounds, p, n, v);
    }
}

/// After requested trial residuals (in the trial buffer; `ok`: finite).
template <class Exec>
EF_HD LmRequest lm_on_residuals(const Exec& ex, LmState& st, const LmSettings& s, const ParamBoundsView& bounds,
                                double* p, double* work, int n, bool ok) {
    const lm_detail::LmView v(work, n, bounds.P);
    return lm_detail::judge_trial(ex, st, s, bounds, p, n, v, ok);
}

EF_HD inline LmOutcome lm_outcome(const LmState& st) {
    LmOutcome o;
    o.status = static_cast<ReplicaStatus>(st.status);
    o.iterations = st.iterations;
    o.chi2 = st.chi2;
    return o;
}

/**
 * One replica's fit with the model's own evaluation (dual numbers, K columns per pass): the
 * state machine above driven by lm_detail::jacobian / residuals. `p` holds the start on entry
 * and the result on exit; `cov`, when non-null, receives the covariance.
 */
template <int K, class Model>
EF_HD LmOutcome lm_fit(const Model& m, const FitDataView& d, const ParamBoundsView& bounds,
                       const LmSettings& s, double* p, double* work, double* cov) {
    using D = Dual<double, K>;
    const int P = bounds.P;
    const int n = d.n;
    const LmWorkspaceLayout<K> L(n, P, m.workspace_size());
    const lm_detail::LmView v(work, n, P);
    double* mws = work + L.model_ws;
    D* pd = reinterpret_cast<D*>(work + L.dual_params);
    D* dws = reinterpret_cast<D*>(work + L.dual_ws);

    LmState st;
    LmRequest q = lm_begin(st, bounds, p, work, n, cov != nullptr);
    while (q != LmRequest::done) {
        if (q == LmRequest::jacobian) {
            // A Jacobian that stops half-way leaves chi^2 as it was.
            double c2 = st.chi2;
            const bool ok = lm_detail::jacobian<K>(m, d, p, P, v.free_idx, st.nfree, pd, dws, v.J, v.r, c2);
            q = lm_on_jacobian(SerialLanes{}, st, s, bounds, p, work, n, ok, c2, cov);
        } else {
            double c2 = 0.0;
            const bool ok = lm_detail::residuals(m, d, v.pt, mws, v.rt, c2);
            q = lm_on_residuals(SerialLanes{}, st, s, bounds, p, work, n, ok);
        }
    }
    return lm_outcome(st);
}

}  // namespace ef

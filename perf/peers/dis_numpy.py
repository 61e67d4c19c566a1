#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""numpy/scipy peer of ensemblefit's `dis-mellin` bootstrap fit (issue #3's benchmark peer).

Fits the same replicas as `ensemblefit fit` with the same model and the same solver, written
the way a strong numpy user would: everything batched over replicas.

Input: a table from `ensemblefit export dis-table CONFIG --out TABLE.h5 --replicas R` (the
parameter-independent theory table C, contour nodes, data, parameter starts/bounds/fixed flags,
LM settings and the Philox-resampled data of replicas 0..R, so the replicas are bit-identical).

Model (port of kernels/models/dis_mellin.hpp):
  shape_f(N) = G(N+a) + d G(N+a) (N+a)/(N+a+b+1) + c G(N+a+1/2),  G(z) = Gamma(z)/Gamma(z+b+1)
  (scipy.special.loggamma on complex arrays; a term whose coefficient is fixed at 0 is skipped,
  as in C++), sum-rule normalisation (u_v: 2, d_v: 1 valence numbers; gluon by the momentum
  sum rule; sea by sea_N), q_b(N_k) = scale_b shape_b(N_k), and
  F2_i = sum_{k,b} Im(C[i,k,b] q_b(N_k)) = one real GEMM  table(n x 2KB) @ V(2KB x replicas),
  V holding (Im q, Re q) interleaved to match the table's (re, im) layout.

Jacobian: analytic (default): d shape / d(a, b) through digamma (scipy.special.psi), d/dc and
d/dd directly, chained through the sum-rule normalisations; values and all free-parameter
columns of all replicas in ONE GEMM table @ [q, dq/dp_1 .. dq/dp_nfree] per LM round.

Solver (port of kernels/fit/lm.hpp, batched): Householder QR of the active Jacobian columns
(numpy's stacked LAPACK qr of [J | r], giving R and Q^T r), Moré scaling D = running max of
column norms, Nielsen damping, bounds by projection + active set (a parameter on a bound whose
gradient points outward is held: its column is moved out and padded with identity, which gives
exactly the compact problem's step), Gauss-Newton-step xtol test, ftol / xtol / gtol tests as
MINPACK's, trial steps from QR of [R; sqrt(lambda) D]. Each replica runs its own state machine;
one "round" does, for every live replica, one Jacobian (if its last trial was accepted) and one
trial step, so replicas converge independently but share every GEMM.

Run with Debian's /usr/bin/python3 (python3-numpy, python3-scipy, python3-h5py).
"""
import argparse
import json
import os
import sys
import time

import h5py
import numpy as np

try:
    import scipy.special as sps
except ImportError:  # dis_torch.py imports compare() without scipy
    sps = None

NB = 4  # basis moments u_v, d_v, S, g
FLAV = {"uv": (0, None), "dv": (4, None), "sea": (9, 8), "g": (13, None)}
ORDER = ["uv", "dv", "sea", "g"]  # basis index 0..3


class DisTable:
    def __init__(self, path):
        with h5py.File(path, "r") as f:
            nodes = f["/nodes"][...]
            self.nodes = nodes[:, 0] + 1j * nodes[:, 1]
            self.table = np.ascontiguousarray(f["/table"][...])  # (n, 2*K*NB)
            self.sigma = f["/data/sigma"][...]
            self.start = f["/params/start"][...]
            self.lower = f["/params/lower"][...]
            self.upper = f["/params/upper"][...]
            self.fixed = f["/params/fixed"][...].astype(bool)
            self.names = [s.decode() if isinstance(s, bytes) else str(s) for s in f["/params"].attrs["names"]]
            self.rep_index = f["/replicas/index"][...]
            self.rep_y = f["/replicas/y"][...]
            self.rep_w = f["/replicas/weight"][...]
            a = f.attrs
            self.max_iterations = int(a["max_iterations"])
            self.ftol, self.xtol, self.gtol = float(a["ftol"]), float(a["xtol"]), float(a["gtol"])
            self.flops_per_iteration = float(a["flops_per_iteration"])
            self.flops_per_evaluation = float(a["flops_per_evaluation"])
        self.n = self.table.shape[0]
        self.K = self.nodes.size
        assert self.table.shape[1] == 2 * self.K * NB
        self.P = self.start.size
        self.free = np.flatnonzero(~self.fixed)
        self.nfree = self.free.size
        # Contour nodes plus N = 1 and N = 2 for the sum rules.
        self.nall = np.concatenate([self.nodes, [1.0 + 0j, 2.0 + 0j]])


# ---- Model
def shape_moments(tab, p, f0, deriv):
    """shape(N) of one flavour at all nodes + N=1, 2, for params p (R, P); flavour params at
    p[:, f0:f0+4]. Returns S (R, M) and, if deriv, a dict {param index: dS (R, M)} for the free
    shape parameters of this flavour."""
    a, b, c, d = (p[:, f0 + j][:, None] for j in range(4))
    fixed = tab.fixed
    use_c = (not fixed[f0 + 2]) or bool(np.any(c != 0.0))
    use_d = (not fixed[f0 + 3]) or bool(np.any(d != 0.0))
    z = tab.nall[None, :] + a
    beta = b + 1.0
    zb = z + beta
    g0 = np.exp(sps.loggamma(z) - sps.loggamma(zb))
    s = g0.copy()
    if use_d:
        ratio = z / zb
        s += d * (g0 * ratio)
    if use_c:
        zh = z + 0.5
        zhb = zh + beta
        gh = np.exp(sps.loggamma(zh) - sps.loggamma(zhb))
        s += c * gh
    if not deriv:
        return s, None
    ds = {}
    psi_zb = sps.psi(zb)
    dg0a = g0 * (sps.psi(z) - psi_zb)
    dg0b = -g0 * psi_zb
    da, db = dg0a, dg0b
    if use_d:
        zb2 = zb * zb
        da = da + d * (dg0a * ratio + g0 * beta / zb2)
        db = db + d * (dg0b * ratio - g0 * z / zb2)
    if use_c:
        psi_hb = sps.psi(zhb)
        da = da + c * gh * (sps.psi(zh) - psi_hb)
        db = db - c * gh * psi_hb
    for j, v in ((0, da), (1, db)):
        if not fixed[f0 + j]:
            ds[f0 + j] = v
    if not fixed[f0 + 2]:
        ds[f0 + 2] = gh
    if not fixed[f0 + 3]:
        ds[f0 + 3] = g0 * ratio
    return s, ds


def moments(tab, p, deriv=False):
    """q (R, K, NB) complex at the contour nodes; with deriv also dq (R, nfree, K, NB)."""
    R = p.shape[0]
    K = tab.K
    S, dS = {}, {}
    for name in ORDER:
        S[name], dS[name] = shape_moments(tab, p, FLAV[name][0], deriv)
    re1 = {k: S[k][:, K].real for k in S}
    re2 = {k: S[k][:, K + 1].real for k in S}
    seaN = p[:, 8]
    sc_uv = 2.0 / re1["uv"]
    sc_dv = 1.0 / re1["dv"]
    x_uv = sc_uv * re2["uv"]
    x_dv = sc_dv * re2["dv"]
    sc_sea = seaN / re2["sea"]
    x_g = 1.0 - x_uv - x_dv - seaN
    sc_g = x_g / re2["g"]
    scale = {"uv": sc_uv, "dv": sc_dv, "sea": sc_sea, "g": sc_g}
    q = np.empty((R, K, NB), dtype=complex)
    for bi, name in enumerate(ORDER):
        q[:, :, bi] = scale[name][:, None] * S[name][:, :K]
    if not deriv:
        return q, None
    dq = np.zeros((R, tab.nfree, K, NB), dtype=complex)
    col = {int(q_): j for j, q_ in enumerate(tab.free)}
    g_over = S["g"][:, :K] / re2["g"][:, None]  # d q_g / d x_g
    for name, num in (("uv", 2.0), ("dv", 1.0)):
        bi = ORDER.index(name)
        for pi, dsv in dS[name].items():
            j = col[pi]
            dsc = -num * dsv[:, K].real / re1[name] ** 2
            dx = dsc * re2[name] + scale[name] * dsv[:, K + 1].real
            dq[:, j, :, bi] = dsc[:, None] * S[name][:, :K] + scale[name][:, None] * dsv[:, :K]
            dq[:, j, :, 3] = -dx[:, None] * g_over
    if 8 in col:
        j = col[8]
        dq[:, j, :, 2] = S["sea"][:, :K] / re2["sea"][:, None]
        dq[:, j, :, 3] = -g_over
    for name, norm in (("sea", seaN), ("g", x_g)):
        bi = ORDER.index(name)
        for pi, dsv in dS[name].items():
            j = col[pi]
            dsc = -norm * dsv[:, K + 1].real / re2[name] ** 2
            dq[:, j, :, bi] = dsc[:, None] * S[name][:, :K] + scale[name][:, None] * dsv[:, :K]
    return q, dq


def to_columns(q):
    """complex (..., K, NB) -> real (..., 2 K NB) interleaved (Im, Re), so that
    table[i] . v = sum Re(C) Im(q) + Im(C) Re(q) = Im(C q)."""
    qf = q.reshape(q.shape[:-2] + (-1,))
    return np.stack([qf.imag, qf.real], axis=-1).reshape(qf.shape[:-1] + (-1,))


def predict(tab, p):
    """F2 (R, n) for params p (R, P): one GEMM."""
    q, _ = moments(tab, p)
    V = np.ascontiguousarray(to_columns(q).T)  # (2KB, R)
    return (tab.table @ V).T


def predict_with_jacobian(tab, p):
    """F2 (R, n) and dF2/dp_free (R, n, nfree): one GEMM over [q, dq_1..dq_nfree] of every replica."""
    R = p.shape[0]
    nf = tab.nfree
    q, dq = moments(tab, p, deriv=True)
    cols = np.concatenate([q[:, None], dq], axis=1)  # (R, 1+nf, K, NB)
    V = to_columns(cols).reshape(R * (1 + nf), -1).T
    out = tab.table @ np.ascontiguousarray(V)  # (n, R*(1+nf))
    out = out.reshape(tab.n, R, 1 + nf).transpose(1, 0, 2)
    return out[:, :, 0], out[:, :, 1:]


# ---- Batched bounded Levenberg-Marquardt (kernels/fit/lm.hpp)
CONVERGED, MAXIT, FAILED, RUNNING = 0, 1, 2, -1


def back_substitute(Rm, b):
    """Solves R x = b for stacked upper-triangular R (B, m, m); ok[B] False on a zero diagonal."""
    B, m, _ = Rm.shape
    x = np.zeros((B, m))
    diag = np.diagonal(Rm, axis1=1, axis2=2)
    ok = np.all(diag != 0.0, axis=1)
    safe = np.where(diag != 0.0, diag, 1.0)
    for i in range(m - 1, -1, -1):
        s = b[:, i] - np.einsum("bj,bj->b", Rm[:, i, i + 1:], x[:, i + 1:])
        x[:, i] = s / safe[:, i]
    return x, ok


class Stats:
    def __init__(self):
        self.rounds = 0
        self.jac_evals = 0
        self.trial_evals = 0
        self.t_jac = 0.0
        self.t_trial = 0.0
        self.t_linalg = 0.0


def lm_fit_batch(tab, y, w, stats):
    """Fits replicas with data y (R, n), weights w (R, n). Returns params, chi2, status, iters."""
    R, n = y.shape
    nf = tab.nfree
    free = tab.free
    lo, hi = tab.lower, tab.upper
    sw = np.sqrt(w) / tab.sigma[None, :]  # sqrt(w_i) / sigma_i
    p = np.clip(np.repeat(tab.start[None, :], R, axis=0), lo, hi)
    chi2 = np.zeros(R)
    r = np.zeros((R, n))
    J = np.zeros((R, n, nf))
    dsc = np.zeros((R, nf))
    lam = np.full(R, 1e-3)
    nu = np.full(R, 2.0)
    iters = np.ones(R, dtype=np.int64)
    status = np.full(R, RUNNING, dtype=np.int64)
    reason = np.full(R, "", dtype=object)  # which test ended the fit
    need_jac = np.ones(R, dtype=bool)
    finish_after_jac = np.zeros(R, dtype=bool)  # stopped on an accepted step: Jacobian, then done
    in_trial = np.zeros(R, dtype=bool)
    # Per-replica trial state (in the permuted order: active columns first).
    perm = np.tile(np.arange(nf), (R, 1))
    na = np.zeros(R, dtype=np.int64)
    Rf = np.zeros((R, nf, nf))
    cvec = np.zeros((R, nf))
    cc = np.zeros(R)
    pnorm = np.zeros(R)
    dperm = np.zeros((R, nf))
    lfree, ufree = lo[free], hi[free]
    ar = np.arange(nf)

    while True:
        live = status == RUNNING
        if not live.any():
            break
        stats.rounds += 1
        # ---- Jacobians (start, and after every accepted step) --------------------------------
        idx = np.flatnonzero(live & need_jac)
        if idx.size:
            t0 = time.perf_counter()
            f, df = predict_with_jacobian(tab, p[idx])
            stats.t_jac += time.perf_counter() - t0
            stats.jac_evals += idx.size
            sc = sw[idx]
            ri = sc * (f - y[idx])
            ri[w[idx] == 0.0] = 0.0
            Ji = df * sc[:, :, None]
            Ji[w[idx] == 0.0] = 0.0
            c2 = np.einsum("rn,rn->r", ri, ri)
            ok = np.isfinite(c2) & np.all(np.isfinite(Ji), axis=(1, 2))
            r[idx], J[idx], chi2[idx] = ri, Ji, c2
            need_jac[idx] = False
            status[idx[~ok]] = FAILED
            reason[idx[~ok]] = "failed_jacobian"
            done = idx[ok & finish_after_jac[idx]]
            status[done] = CONVERGED
            a_idx = idx[ok & ~finish_after_jac[idx]]
            # ---- Phase A: gradient, scaling, active set, tests, QR, Gauss-Newton test ----------
            t0 = time.perf_counter()
            if a_idx.size:
                zero = chi2[a_idx] == 0.0
                status[a_idx[zero]] = CONVERGED
                reason[a_idx[zero]] = "chi2_zero"
                a_idx = a_idx[~zero]
            if a_idx.size:
                Ja, ra = J[a_idx], r[a_idx]
                g = np.einsum("rni,rn->ri", Ja, ra)
                cn = np.sqrt(np.einsum("rni,rni->ri", Ja, Ja))
                dsc[a_idx] = np.maximum(dsc[a_idx], cn)
                pf = p[a_idx][:, free]
                held = ((pf <= lfree) & (g > 0.0)) | ((pf >= ufree) & (g < 0.0))
                act = ~held
                rnorm = np.sqrt(chi2[a_idx])
                with np.errstate(divide="ignore", invalid="ignore"):
                    cosv = np.where(act & (cn > 0.0), np.abs(g) / (cn * rnorm[:, None]), 0.0)
                gcos = cosv.max(axis=1)
                nact = act.sum(axis=1)
                conv = (nact == 0) | (gcos <= tab.gtol)
                status[a_idx[conv]] = CONVERGED
                reason[a_idx[conv]] = "gtol"
                mx = ~conv & (iters[a_idx] >= tab.max_iterations)
                status[a_idx[mx]] = MAXIT
                reason[a_idx[mx]] = "max_iterations"
                keep = ~conv & ~mx
                a_idx, act, nact, Ja, ra = a_idx[keep], act[keep], nact[keep], Ja[keep], ra[keep]
            if a_idx.size:
                # Active columns first (stable), held columns zeroed: R of [J_perm | r] then has
                # R_active top-left and Q^T r in its last column; pad the held part with I.
                pm = np.argsort(~act, axis=1, kind="stable")
                actp = np.take_along_axis(act, pm, axis=1)
                Jp = np.take_along_axis(Ja, pm[:, None, :], axis=2) * actp[:, None, :]
                A = np.concatenate([Jp, ra[:, :, None]], axis=2)
                Rfull = np.linalg.qr(A, mode="r")  # (B, nf+1, nf+1)
                Ra = Rfull[:, :nf, :nf] * (actp[:, :, None] & actp[:, None, :])
                Ra[:, ar, ar] = np.where(actp, Ra[:, ar, ar], 1.0)
                ca = np.where(actp, Rfull[:, :nf, nf], 0.0)
                dp = np.take_along_axis(dsc[a_idx], pm, axis=1)
                pp = np.take_along_axis(p[a_idx][:, free], pm, axis=1)
                pn = np.sqrt(np.sum(np.where(actp, dp * pp, 0.0) ** 2, axis=1))
                gn, solved = back_substitute(Ra, -ca)
                gnorm = np.sqrt(np.sum(np.where(actp, dp * gn, 0.0) ** 2, axis=1))
                conv = solved & (gnorm <= tab.xtol * (pn + tab.xtol))
                status[a_idx[conv]] = CONVERGED
                reason[a_idx[conv]] = "xtol_gauss_newton"
                k = ~conv
                t_idx = a_idx[k]
                perm[t_idx], na[t_idx], Rf[t_idx], cvec[t_idx] = pm[k], nact[k], Ra[k], ca[k]
                cc[t_idx] = np.sum(ca[k] ** 2, axis=1)
                pnorm[t_idx] = pn[k]
                dperm[t_idx] = np.where(actp[k], dp[k], 1.0)
                in_trial[t_idx] = True
            stats.t_linalg += time.perf_counter() - t0

        # ---- Phase B: one damped trial step per live replica in trial state -----------------
        t_idx = np.flatnonzero((status == RUNNING) & in_trial)
        if t_idx.size == 0:
            continue
        t0 = time.perf_counter()
        B = t_idx.size
        Rt, ct, dt = Rf[t_idx], cvec[t_idx], dperm[t_idx]
        aug = np.zeros((B, 2 * nf, nf + 1))
        aug[:, :nf, :nf] = Rt
        aug[:, :nf, nf] = -ct
        aug[:, nf + ar, ar] = np.sqrt(lam[t_idx])[:, None] * dt
        R2 = np.linalg.qr(aug, mode="r")
        stp, solved = back_substitute(R2[:, :nf, :nf], R2[:, :nf, nf])
        actp = ar[None, :] < na[t_idx][:, None]
        stp = np.where(actp & solved[:, None], stp, 0.0)
        pm = perm[t_idx]
        qidx = free[pm]  # (B, nf) parameter index of each permuted column
        p0 = np.take_along_axis(p[t_idx], qidx, axis=1)
        pt_perm = np.where(actp, np.clip(p0 + stp, lo[qidx], hi[qidx]), p0)
        stp = pt_perm - p0
        pt = p[t_idx].copy()
        np.put_along_axis(pt, qidx, pt_perm, axis=1)
        dnorm = np.sqrt(np.sum(np.where(actp, dt * stp, 0.0) ** 2, axis=1))
        v = ct + np.einsum("bij,bj->bi", Rt, stp)
        rs = np.sum(np.where(actp, v, 0.0) ** 2, axis=1)
        pred = np.where(solved, cc[t_idx] - rs, -1.0)
        stats.t_linalg += time.perf_counter() - t0
        # Trial residuals of the solved ones, one GEMM.
        t0 = time.perf_counter()
        finite = np.zeros(B, dtype=bool)
        actual = np.full(B, -1.0)
        s_idx = np.flatnonzero(solved)
        if s_idx.size:
            gi = t_idx[s_idx]
            ft = predict(tab, pt[s_idx])
            rt = sw[gi] * (ft - y[gi])
            rt[w[gi] == 0.0] = 0.0
            c2t = np.einsum("rn,rn->r", rt, rt)
            finite[s_idx] = np.isfinite(c2t)
            act_red = np.einsum("rn,rn->r", r[gi] - rt, r[gi] + rt)
            actual[s_idx] = np.where(finite[s_idx], act_red, -1.0)
            stats.trial_evals += s_idx.size
        stats.t_trial += time.perf_counter() - t0
        with np.errstate(divide="ignore", invalid="ignore"):
            rho = np.where(finite & (pred > 0.0), actual / np.where(pred > 0.0, pred, 1.0), -1.0)
        acc = rho > 1e-4
        t3 = 2.0 * rho - 1.0
        lam[t_idx] = np.where(acc, lam[t_idx] * np.maximum(1.0 / 3.0, 1.0 - t3 ** 3), lam[t_idx] * nu[t_idx])
        nu[t_idx] = np.where(acc, 2.0, nu[t_idx] * 2.0)
        c2 = chi2[t_idx]
        stop1 = finite & (np.abs(actual) <= tab.ftol * c2) & (pred >= 0.0) & (pred <= tab.ftol * c2) & (rho <= 2.0)
        stop2 = ~stop1 & solved & (dnorm <= tab.xtol * pnorm[t_idx])
        fail = ~stop1 & ~stop2 & ~acc & (lam[t_idx] > 1e300)
        stop = stop1 | stop2
        a_ = t_idx[acc]
        p[a_] = pt[acc]
        iters[a_] += 1
        need_jac[a_] = True
        in_trial[a_] = False
        finish_after_jac[t_idx[acc & stop]] = True
        status[t_idx[~acc & stop]] = CONVERGED
        status[t_idx[fail]] = FAILED
        reason[t_idx[stop1]] = "ftol"
        reason[t_idx[stop2]] = "xtol_step"
        reason[t_idx[fail]] = "failed_damping"
    return p, chi2, status, iters, reason


def compare(tab, ref_path, index, params, chi2, status, iters):
    with h5py.File(ref_path, "r") as f:
        rp = {int(i): row for i, row in zip(f["/replicas/index"][...], f["/replicas/params"][...])}
        rc = {int(i): v for i, v in zip(f["/replicas/index"][...], f["/replicas/chi2"][...])}
        rs = {int(i): v for i, v in zip(f["/replicas/index"][...], f["/replicas/status"][...])}
        ri = {int(i): v for i, v in zip(f["/replicas/index"][...], f["/replicas/iterations"][...])}
        err = None
        if "/central/params" in f:
            err = np.sqrt(np.abs(np.diagonal(f["/central/covariance"][...])))
            rp[0] = f["/central/params"][...]
            rc[0] = f["/central/chi2"][0]
            rs[0] = f["/central/status"][0]
            ri[0] = f["/central/iterations"][0]
    rows = [(k, int(rr)) for k, rr in enumerate(index) if int(rr) in rp]
    relmax, per_rep, chi2rel, same_iter, same_status, iter_diff = 0.0, [], 0.0, 0, 0, []
    absmax, sigmax = 0.0, 0.0
    worst = None
    for k, rr in rows:
        a, b = params[k], rp[rr]
        rel = np.abs(a - b) / np.maximum(np.abs(b), 1e-300)
        rel[(a == b)] = 0.0
        m = float(rel.max())
        per_rep.append(m)
        absmax = max(absmax, float(np.max(np.abs(a - b))))
        if err is not None:
            ok = err > 0
            sigmax = max(sigmax, float(np.max(np.abs(a - b)[ok] / err[ok])))
        if m > relmax:
            relmax = m
            worst = (rr, tab.names[int(np.argmax(rel))])
        chi2rel = max(chi2rel, abs(chi2[k] - rc[rr]) / rc[rr])
        same_iter += int(iters[k] == ri[rr])
        iter_diff.append(int(iters[k] - ri[rr]))
        same_status += int(status[k] == rs[rr])
    per_rep = np.array(per_rep)
    return {
        "reference": ref_path,
        "replicas_compared": len(rows),
        "max_rel_diff_params": relmax,
        "worst": {"replica": worst[0], "param": worst[1]} if worst else None,
        "median_rel_diff_params": float(np.median(per_rep)) if len(rows) else None,
        "max_abs_diff_params": absmax,
        "max_diff_in_units_of_central_fit_error": sigmax if err is not None else None,
        "replicas_agree_1e-5": int(np.sum(per_rep <= 1e-5)),
        "replicas_agree_1e-6": int(np.sum(per_rep <= 1e-6)),
        "replicas_agree_1e-8": int(np.sum(per_rep <= 1e-8)),
        "max_rel_diff_chi2": chi2rel,
        "same_iterations": same_iter,
        "iteration_diff_min_max": [min(iter_diff), max(iter_diff)] if iter_diff else None,
        "same_status": same_status,
    }


def check_jacobian(tab, p):
    """Analytic Jacobian against central differences at p (R, P): max relative column error."""
    _, Ja = predict_with_jacobian(tab, p)
    worst = 0.0
    for j, q_ in enumerate(tab.free):
        h = 1e-4 * max(1.0, float(np.max(np.abs(p[:, q_]))))
        pp, pm = p.copy(), p.copy()
        pp[:, q_] += h
        pm[:, q_] -= h
        fd = (predict(tab, pp) - predict(tab, pm)) / (2 * h)
        err = np.max(np.abs(fd - Ja[:, :, j])) / np.max(np.abs(fd))
        worst = max(worst, err)
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("table", help="TABLE.h5 from `ensemblefit export dis-table`")
    ap.add_argument("--replicas", type=int, default=None, help="fit replicas 0..R (default: all in the table)")
    ap.add_argument("--batch", type=int, default=256, help="replicas per batch (memory cap)")
    ap.add_argument("--compare", help="ensemblefit output .h5 of the same replicas")
    ap.add_argument("--check-jacobian", action="store_true", help="analytic vs central differences first")
    ap.add_argument("--json", help="write results here")
    ap.add_argument("--out", help="write params/chi2/status/iterations here (.npz)")
    args = ap.parse_args()

    t0 = time.perf_counter()
    tab = DisTable(args.table)
    t_load = time.perf_counter() - t0
    R = tab.rep_index.size if args.replicas is None else min(args.replicas + 1, tab.rep_index.size)
    index = tab.rep_index[:R]
    if args.check_jacobian:
        err = check_jacobian(tab, np.repeat(tab.start[None, :], 2, axis=0))
        print(f"jacobian check: analytic vs central differences, max rel error {err:.2e}")

    stats = Stats()
    params = np.zeros((R, tab.P))
    chi2 = np.zeros(R)
    status = np.zeros(R, dtype=np.int64)
    iters = np.zeros(R, dtype=np.int64)
    reason = np.full(R, "", dtype=object)
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    for b0 in range(0, R, args.batch):
        sl = slice(b0, min(R, b0 + args.batch))
        params[sl], chi2[sl], status[sl], iters[sl], reason[sl] = lm_fit_batch(
            tab, tab.rep_y[sl], tab.rep_w[sl], stats)
    t_fit = time.perf_counter() - t0
    cpu_fit = time.process_time() - cpu0

    total_iters = int(iters.sum())
    res = {
        "implementation": "numpy peer (perf/peers/dis_numpy.py)",
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "scipy": __import__("scipy").__version__,
        "jacobian": "analytic",
        "replicas_fitted": int(R),
        "replica_range": [int(index[0]), int(index[-1])],
        "load_seconds": t_load,
        "compute_seconds": t_fit,
        "cpu_seconds": cpu_fit,
        "replicas_per_second": R / t_fit,
        "rounds": stats.rounds,
        "jacobian_evaluations": stats.jac_evals,
        "trial_evaluations": stats.trial_evals,
        "seconds_jacobian": stats.t_jac,
        "seconds_trial": stats.t_trial,
        "seconds_linalg": stats.t_linalg,
        "iterations_total": total_iters,
        "iterations_mean": total_iters / R,
        "status_counts": {str(s): int(np.sum(status == s)) for s in np.unique(status)},
        "stop_reasons": {str(s): int(np.sum(reason == s)) for s in sorted(set(reason))},
        "flops_per_iteration_counted": tab.flops_per_iteration,
        "gflops_counted": tab.flops_per_iteration * total_iters / t_fit / 1e9,
        # What this implementation's GEMMs do: 2 n (2 K NB) per column, (1 + nfree) columns per
        # Jacobian, 1 per trial (the dominant work; moments and QR are < 2% of it).
        "gemm_flops": 2.0 * tab.n * tab.table.shape[1] *
                      ((1 + tab.nfree) * stats.jac_evals + stats.trial_evals),
    }
    res["gemm_gflops"] = res["gemm_flops"] / t_fit / 1e9
    if args.compare:
        res["comparison"] = compare(tab, args.compare, index, params, chi2, status, iters)
    print(json.dumps(res, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)
    if args.out:
        np.savez(args.out, index=index, params=params, chi2=chi2, status=status, iterations=iters,
                 reason=reason.astype(str))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""PyTorch peer of ensemblefit's `dis-mellin` bootstrap fit (issue #5's GPU benchmark peer).

A port of perf/peers/dis_numpy.py (read its docstring for the model and the solver) to torch,
written the way a strong PyTorch user would: every replica of the batch on the device at once,
the same precomputed table, one GEMM per Jacobian, batched torch.linalg, no Python loop over
replicas (only over LM rounds).

Input: TABLE.h5 from `ensemblefit export dis-table CONFIG --out TABLE.h5 --replicas R` (theory
table C, contour nodes, data, parameter starts/bounds/fixed flags, LM settings and the
Philox-resampled data of replicas 0..R, so the replicas are bit-identical to `ensemblefit fit`'s).

Model (dis_numpy's), as torch does it:
  - torch has no complex lgamma/digamma: lgamma_digamma() computes both for complex tensors
    (principal-branch log-Gamma, as scipy.special.loggamma): Stirling series (10 Bernoulli terms)
    wherever Re z >= 10 or |Im z| >= 10, elsewhere first the recurrence shift z -> z + m to
    Re z >= 10 (m from the contour and the parameter bounds, fixed per run, masked per element).
    `--check-special` compares with scipy.special.loggamma/psi over the run's contour nodes.
  - all four flavours and the four Gamma arguments (z, z+b+1, z+1/2, z+b+3/2) in one tensor
    (R, 4, 4, nodes), so a moment evaluation is a fixed, small number of element-wise kernels
    whatever the batch; the c and d terms are also computed where the config fixes them at 0
    (adding exact zeros: the values equal the skipping numpy/C++ code's).
  - analytic Jacobian through digamma, chained through the sum rules; F2 and all 13 free-parameter
    columns of every replica in ONE GEMM per round: [q, dq/dp..] (B*14 x 2*4*136) @ table^T.
    The table's columns are permuted once at load so that view_as_real() of the complex moment
    tensor is the GEMM operand without a copy.

Solver: dis_numpy's batched bounded Levenberg-Marquardt (kernels/fit/lm.hpp), the same tests and
settings (from the table file), each replica's state machine vectorized with masks and index
tensors (three small host syncs per round: any-live and the two nonzero()s).
R factors: `--qr householder` is torch.linalg.qr(mode="r") (LAPACK on CPU; on CUDA torch loops
cuSOLVER geqrf over the batch, which is slow for thousands of 5000 x 14 matrices); `--qr cholqr2`
is CholeskyQR2 on the column-equilibrated matrix (Gram by bmm, cholesky_ex, solve_triangular,
twice), all batched kernels, the same R up to row signs (which the solver is invariant to) at
condition numbers < 1e7 or so; a replica whose Cholesky fails falls back to Householder.
Default `auto`: householder on CPU, cholqr2 on CUDA.

Checked on CPU (Debian's torch 1.13, 2 cores, replicas 0..16 of inputs/stats2.ini): lgamma and
digamma agree with scipy to 9e-14 / 4e-14 relative (float32: 5e-5 / 1.5e-5); the analytic
Jacobian agrees with central differences to 1.8e-8 (h = 1e-4, the differences' own error);
with either --qr all 17 fits converge like ensemblefit's and dis_numpy's, chi2 equal to 1e-13,
parameters within 1e-5 of the central fit's errors (max relative 3e-4, in the flat dv_c
direction; dis_numpy vs ensemblefit is 1e-3 there): the ports differ only in rounding, which
moves the LM stop by a few iterations. float32 runs, but is not usable for this fit: the ftol
test passes on rounding noise after ~14 iterations instead of ~31, leaving the parameters up to
1.9 central-fit errors off (chi2 2e-4). CUDA and --compile were not run here (no GPU).

`--compile` (torch >= 2 only) wraps the element-wise moment code (special functions, shapes,
sum rules, derivative assembly) in torch.compile(dynamic=True); if compiling fails, it warns
and runs eagerly (the JSON says which). A warm-up fit of a few replicas (untimed, reported
separately) precedes the timed run on CUDA, so compile/cuBLAS/cuSOLVER start-up is not timed.
The device is synchronized before every timer read.

Run on the GPU machine (its own PyTorch, h5py, numpy; scipy not needed):
  python3 perf/peers/dis_torch.py TABLE.h5 --device cuda --json out.json --compare ef.h5
  [--compile] [--dtype float32] [--replicas R] [--batch B] [--qr householder|cholqr2]
Locally (CPU, Debian's python3-torch): /usr/bin/python3 perf/peers/dis_torch.py TABLE.h5
  --device cpu --compare ef.h5 [--check-special] [--check-jacobian]
Output: JSON (replicas/s, wall and compute seconds, rounds, iterations, counted FLOPs per
iteration from the table file and achieved GFLOP/s, per-phase seconds, agreement with
ensemblefit's fits from --compare), --out FILE.npz with params/chi2/status/iterations.
"""
import argparse
import json
import math
import sys
import time
import warnings

import h5py
import numpy as np
import torch

sys.dont_write_bytecode = True  # no __pycache__ in perf/peers
from dis_numpy import compare  # noqa: E402  (the agreement with ensemblefit's fits; this folder)

NB = 4  # basis moments u_v, d_v, S, g (flavour order of the parameters and of the table)
FLAV0 = (0, 4, 9, 13)  # first shape parameter (a) of u_v, d_v, sea, g; then b, c, d
SEA_N = 8
CONVERGED, MAXIT, FAILED, RUNNING = 0, 1, 2, -1
REASONS = ["", "failed_jacobian", "chi2_zero", "gtol", "max_iterations", "xtol_gauss_newton",
           "ftol", "xtol_step", "failed_damping"]
R_FAILJ, R_CHI0, R_GTOL, R_MAXIT, R_XTOLGN, R_FTOL, R_XTOLS, R_FAILD = range(1, 9)


# ---- Complex log-Gamma and digamma
# Bernoulli numbers B_2k, k = 1..10.
_B2K = [1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510, 43867 / 798,
        -174611 / 330]
_LG_C = [b / (2 * k * (2 * k - 1)) for k, b in enumerate(_B2K, 1)]  # lgamma: / w^(2k-1)
_PS_C = [b / (2 * k) for k, b in enumerate(_B2K, 1)]  # digamma: / w^(2k)
_STIRLING_X = 10.0  # Stirling wherever Re z >= X or |Im z| >= X
_CHUNK = 8  # recurrence factors per log


class ShiftPlan:
    """The recurrence shift of a run: the first `nsub` entries of the last axis (the nodes with
    |Im N| < X, ordered first at load) are shifted by `steps`, enough for the smallest Re z the
    run can meet there (from the nodes and the parameters' lower bounds); the others have
    |Im z| >= X and take Stirling directly (as scipy's loggamma does)."""

    def __init__(self, nsub, min_re):
        self.nsub = nsub
        self.steps = max(0, math.ceil(_STIRLING_X - min_re))
        self.half_log_2pi = 0.5 * math.log(2 * math.pi)


def lgamma_digamma(z, plan, want_psi):
    """log Gamma(z) (principal branch up to multiples of 2 pi i, which exp() of the model's
    differences does not see) and, if want_psi, digamma(z), of a complex tensor whose last axis
    is ordered as `plan` says. lgamma(z) = lgamma(z + m) - log P, digamma(z) = digamma(z + m)
    - P'/P with P = prod_{j<m} (z + j): the shift costs complex multiplies and one log and one
    division per _CHUNK factors (P in chunks keeps |P|^2 finite in float32: torch's complex
    division does not rescale)."""
    ns = plan.nsub
    if ns and plan.steps:
        zs = z[..., :ns]
        logP = dlogP = None
        w = zs
        for c0 in range(0, plan.steps, _CHUNK):
            P = torch.ones_like(zs)
            dP = torch.zeros_like(zs) if want_psi else None
            for _ in range(c0, min(plan.steps, c0 + _CHUNK)):
                if want_psi:
                    dP = torch.addcmul(P, dP, w)  # (P w)' = P' w + P
                P = P * w
                w = w + 1.0
            logP = torch.log(P) if logP is None else logP + torch.log(P)
            if want_psi:
                dlogP = dP / P if dlogP is None else dlogP + dP / P
        w = torch.cat([w, z[..., ns:]], dim=-1)
    else:
        w = z
    iw = w.reciprocal()
    iw2 = iw * iw
    logw = torch.log(w)
    s = _LG_C[-1]
    for c in reversed(_LG_C[:-1]):
        s = s * iw2 + c
    lg = (w - 0.5) * logw - w + plan.half_log_2pi + s * iw
    if ns and plan.steps:
        lg[..., :ns] -= logP
    if not want_psi:
        return lg, None
    t = _PS_C[-1]
    for c in reversed(_PS_C[:-1]):
        t = t * iw2 + c
    ps = logw - 0.5 * iw - t * iw2
    if ns and plan.steps:
        ps[..., :ns] -= dlogP
    return lg, ps


# ---- Table and model
class DisTable:
    def __init__(self, path, device, dtype):
        cdtype = torch.complex128 if dtype == torch.float64 else torch.complex64
        with h5py.File(path, "r") as f:
            nodes = f["/nodes"][...]
            table = f["/table"][...]  # (n, K*NB*2): column (k*NB + b)*2 + (0: Re C, 1: Im C)
            self.sigma_np = f["/data/sigma"][...]
            self.start_np = f["/params/start"][...]
            self.lower_np = f["/params/lower"][...]
            self.upper_np = f["/params/upper"][...]
            self.fixed_np = f["/params/fixed"][...].astype(bool)
            self.names = [s.decode() if isinstance(s, bytes) else str(s) for s in f["/params"].attrs["names"]]
            self.rep_index = f["/replicas/index"][...]
            self.rep_y = f["/replicas/y"][...]
            self.rep_w = f["/replicas/weight"][...]
            a = f.attrs
            self.max_iterations = int(a["max_iterations"])
            self.ftol, self.xtol, self.gtol = float(a["ftol"]), float(a["xtol"]), float(a["gtol"])
            self.flops_per_iteration = float(a["flops_per_iteration"])
            self.flops_per_evaluation = float(a["flops_per_evaluation"])
        self.device, self.dtype, self.cdtype = device, dtype, cdtype
        self.n = table.shape[0]
        self.K = nodes.shape[0]
        assert table.shape[1] == 2 * self.K * NB
        self.P = self.start_np.size
        self.free_np = np.flatnonzero(~self.fixed_np)
        self.nfree = self.free_np.size
        # Moment nodes: N = 1, 2 (sum rules) first, then the contour nodes with |Im N| < X (the
        # ones log-Gamma may have to shift), then the rest. The table's columns follow that node
        # order and are permuted to (b, k, c), c = 0 multiplying Re q (= Im C) and c = 1 Im q
        # (= Re C): then F2 = table_row . view_as_real(q[b, k]) and V needs no copy.
        cn = nodes[:, 0] + 1j * nodes[:, 1]
        order = np.argsort(np.abs(cn.imag) >= _STIRLING_X, kind="stable")
        nall = np.concatenate([[1.0 + 0j, 2.0 + 0j], cn[order]])
        t = table.reshape(self.n, self.K, NB, 2)[:, order].transpose(0, 2, 1, 3)[..., ::-1]
        self.table = torch.from_numpy(np.ascontiguousarray(t.reshape(self.n, -1))).to(device, dtype)
        self.nall = torch.from_numpy(nall).to(device, cdtype)
        T = lambda v: torch.as_tensor(np.ascontiguousarray(v), device=device)
        self.sigma = T(self.sigma_np).to(dtype)
        self.lower, self.upper = T(self.lower_np).to(dtype), T(self.upper_np).to(dtype)
        self.start = T(self.start_np).to(dtype)
        self.free = T(self.free_np).long()
        # Shape-parameter index (flavour f, a/b/c/d j) = FLAV0[f] + j; dq/dp lands in flavour f,
        # and for u_v, d_v also in the gluon (momentum sum rule).
        self.shape_idx = T(np.array(FLAV0)[:, None] + np.arange(4)[None, :]).long()  # (4, 4)
        # Smallest Re z the Gamma functions can see: nodes near the real axis + lowest a.
        nsub = int(np.sum(np.abs(nall.imag) < _STIRLING_X))
        amin = min(self.lower_np[f0] for f0 in FLAV0)
        self.plan = ShiftPlan(nsub, float(nall.real[:nsub].min()) + amin)


def moments_impl(p, nall, shape_idx, free, plan, K, deriv):
    """Complex moment columns for params p (B, P): (B, 1, NB, K) [q] or, with deriv,
    (B, 1 + nfree, NB, K) [q, dq/dp_free...]."""
    B = p.shape[0]
    ps = p[:, shape_idx]  # (B, 4 flavours, 4 = a, b, c, d)
    a, b, c, d = (ps[:, :, j, None] for j in range(4))  # (B, 4, 1) real
    z = nall + a  # (B, 4, M) complex
    beta = b + 1.0
    zb = z + beta
    zh = z + 0.5
    zhb = zh + beta
    lg, psi = lgamma_digamma(torch.stack([z, zb, zh, zhb], dim=2), plan, deriv)  # (B, 4, 4, M)
    g0 = torch.exp(lg[:, :, 0] - lg[:, :, 1])
    gh = torch.exp(lg[:, :, 2] - lg[:, :, 3])
    ratio = z / zb
    S = g0 + d * (g0 * ratio)
    S = S + c * gh  # (B, 4, M): same association as dis_numpy / the C++ code
    re1 = S[:, :, 0].real  # (B, 4) shape at N = 1
    re2 = S[:, :, 1].real  # N = 2
    seaN = p[:, SEA_N]
    sc_uv = 2.0 / re1[:, 0]
    sc_dv = 1.0 / re1[:, 1]
    x_uv = sc_uv * re2[:, 0]
    x_dv = sc_dv * re2[:, 1]
    sc_sea = seaN / re2[:, 2]
    x_g = 1.0 - x_uv - x_dv - seaN
    sc_g = x_g / re2[:, 3]
    scale = torch.stack([sc_uv, sc_dv, sc_sea, sc_g], dim=1)  # (B, 4)
    SK = S[:, :, 2:]  # the contour nodes
    q = scale[:, :, None] * SK  # (B, NB, K)
    if not deriv:
        return q[:, None]
    # d shape / d(a, b, c, d): (B, 4 flavours, 4 params, M)
    psi_z, psi_zb, psi_zh, psi_zhb = (psi[:, :, j] for j in range(4))
    dg0a = g0 * (psi_z - psi_zb)
    dg0b = -g0 * psi_zb
    zb2 = zb * zb
    da = dg0a + d * (dg0a * ratio + g0 * beta / zb2)
    db = dg0b + d * (dg0b * ratio - g0 * z / zb2)
    da = da + c * gh * (psi_zh - psi_zhb)
    db = db - c * gh * psi_zhb
    dS = torch.stack([da, db, gh, g0 * ratio], dim=2)
    # Normalisations: u_v, d_v through N = 1 (valence numbers 2, 1); sea, g through N = 2.
    one = torch.ones_like(seaN)
    numer = torch.stack([2.0 * one, one, seaN, x_g], dim=1)  # (B, 4)
    den = torch.stack([re1[:, 0], re1[:, 1], re2[:, 2], re2[:, 3]], dim=1)
    dSn = torch.cat([dS[:, :2, :, 0].real, dS[:, 2:, :, 1].real], dim=1)  # (B, 4, 4)
    dsc = (-numer[:, :, None] * dSn) / (den * den)[:, :, None]
    dq_own = dsc[..., None] * SK[:, :, None, :] + scale[:, :, None, None] * dS[:, :, :, 2:]
    g_over = SK[:, 3] / re2[:, 3, None]  # d q_g / d x_g, (B, K)
    dx = dsc[:, :2] * re2[:, :2, None] + scale[:, :2, None] * dS[:, :2, :, 1].real  # (B, 2, 4)
    dq_glu = -dx[..., None] * g_over[:, None, None, :]  # (B, 2, 4, K)
    # Scatter into (B, P, NB, K), then keep the free parameters.
    P = p.shape[1]
    dq = torch.zeros((B, P, NB, K), dtype=q.dtype, device=q.device)
    fl = torch.arange(NB, device=p.device)[:, None].expand(NB, 4)
    dq[:, shape_idx, fl] = dq_own
    dq[:, shape_idx[:2], 3] = dq_glu
    dq[:, SEA_N, 2] = SK[:, 2] / re2[:, 2, None]
    dq[:, SEA_N, 3] = -g_over
    return torch.cat([q[:, None], dq[:, free]], dim=1)


class Model:
    def __init__(self, tab, compile_):
        self.tab = tab
        self.fn = moments_impl
        self.compile_state = "off"
        if compile_:
            if not hasattr(torch, "compile"):
                self.compile_state = f"unavailable (torch {torch.__version__})"
                warnings.warn("--compile: this torch has no torch.compile; running eagerly")
            else:
                self.fn = torch.compile(moments_impl, dynamic=True)
                self.compile_state = "on"

    def moments(self, p, deriv):
        t = self.tab
        if self.compile_state == "on":
            try:
                return self.fn(p, t.nall, t.shape_idx, t.free, t.plan, t.K, deriv)
            except Exception as e:  # noqa: BLE001 (any compiler failure: fall back, say so)
                warnings.warn(f"torch.compile failed ({type(e).__name__}: {e}); running eagerly")
                self.compile_state = f"failed, eager: {type(e).__name__}: {str(e)[:200]}"
                self.fn = moments_impl
        return self.fn(p, t.nall, t.shape_idx, t.free, t.plan, t.K, deriv)

    def gemm(self, cols):
        """cols (B, X, NB, K) complex -> F2 (B, X, n): one GEMM."""
        B, X = cols.shape[:2]
        V = torch.view_as_real(cols).reshape(B * X, -1)
        return (V @ self.tab.table.T).view(B, X, self.tab.n)

    def predict(self, p):
        return self.gemm(self.moments(p, False))[:, 0]

    def predict_with_jacobian(self, p):
        """F2 (B, n) and dF2/dp_free (B, n, nfree) (a transposed view: column-major per replica)."""
        out = self.gemm(self.moments(p, True))
        return out[:, 0], out[:, 1:].transpose(1, 2)


# ---- Batched linear algebra
def qr_r(A, method, counts):
    """R factor (B, m, m) of A (B, rows, m), rows >= m. Row signs are arbitrary."""
    if method == "householder":
        return torch.linalg.qr(A, mode="r")[1]
    # CholeskyQR2 on column-equilibrated A (zero columns get a unit pivot: the solver pads them).
    s = torch.linalg.vector_norm(A, dim=1)  # (B, m)
    zero = s == 0
    s = torch.where(zero, torch.ones_like(s), s)
    As = A / s[:, None, :]
    eye = torch.diag_embed(zero.to(A.dtype))
    G = As.transpose(1, 2) @ As + eye
    L, info = torch.linalg.cholesky_ex(G)
    R1 = L.transpose(1, 2)
    Q1 = torch.linalg.solve_triangular(R1, As, upper=True, left=False)
    G2 = Q1.transpose(1, 2) @ Q1 + eye
    L2, info2 = torch.linalg.cholesky_ex(G2)
    R = (L2.transpose(1, 2) @ R1) * s[:, None, :]
    bad = (info != 0) | (info2 != 0) | ~torch.isfinite(R).flatten(1).all(dim=1)
    if bool(bad.any()):  # rank-deficient or too ill-conditioned for CholeskyQR2: Householder
        bi = bad.nonzero().squeeze(1)
        R[bi] = torch.linalg.qr(A[bi], mode="r")[1]
        counts["cholqr2_fallbacks"] += int(bi.numel())
    return R


def back_substitute(Rm, b):
    """Solves R x = b for stacked upper-triangular R (B, m, m); ok[B] False on a zero diagonal
    (those rows are solved with the zero pivot replaced by 1, as dis_numpy does)."""
    diag = torch.diagonal(Rm, dim1=1, dim2=2)
    nz = diag != 0.0
    ok = nz.all(dim=1)
    safe = Rm + torch.diag_embed(torch.where(nz, torch.zeros_like(diag), torch.ones_like(diag)))
    x = torch.linalg.solve_triangular(safe, b[:, :, None], upper=True)[:, :, 0]
    return x, ok


# ---- Batched bounded Levenberg-Marquardt (kernels/fit/lm.hpp, as perf/peers/dis_numpy.py)
class Stats:
    def __init__(self, device):
        self.device = device
        self.rounds = 0
        self.jac_evals = 0
        self.trial_evals = 0
        self.trial_gemm_columns = 0
        self.t = {"jacobian": 0.0, "trial": 0.0, "linalg": 0.0}
        self.counts = {"cholqr2_fallbacks": 0}
        self._t0 = None

    def sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def start(self):
        self.sync()
        self._t0 = time.perf_counter()

    def stop(self, key):
        self.sync()
        self.t[key] += time.perf_counter() - self._t0


def lm_fit_batch(model, y, w, qr, stats):
    """Fits replicas with data y (R, n), weights w (R, n) on the device. Returns params, chi2,
    status, iterations, reason code (torch tensors)."""
    tab = model.tab
    dev, dt = tab.device, tab.dtype
    R, n = y.shape
    nf = tab.nfree
    free = tab.free
    lo, hi = tab.lower, tab.upper
    lfree, ufree = lo[free], hi[free]
    sw = torch.sqrt(w) / tab.sigma[None, :]
    wzero = w == 0.0
    p = torch.minimum(torch.maximum(tab.start[None, :].repeat(R, 1), lo), hi)
    z = lambda *s: torch.zeros(s, dtype=dt, device=dev)
    chi2, r, dsc = z(R), z(R, n), z(R, nf)
    lam = torch.full((R,), 1e-3, dtype=dt, device=dev)
    nu = torch.full((R,), 2.0, dtype=dt, device=dev)
    iters = torch.ones(R, dtype=torch.int64, device=dev)
    status = torch.full((R,), RUNNING, dtype=torch.int64, device=dev)
    reason = torch.zeros(R, dtype=torch.int64, device=dev)
    need_jac = torch.ones(R, dtype=torch.bool, device=dev)
    finish_after_jac = torch.zeros(R, dtype=torch.bool, device=dev)
    in_trial = torch.zeros(R, dtype=torch.bool, device=dev)
    perm = torch.arange(nf, device=dev).repeat(R, 1)
    na = torch.zeros(R, dtype=torch.int64, device=dev)
    Rf, cvec, cc, pnorm, dperm = z(R, nf, nf), z(R, nf), z(R), z(R), z(R, nf)
    ar = torch.arange(nf, device=dev)
    W = torch.where  # brevity

    while True:
        live = status == RUNNING
        if not bool(live.any()):
            break
        stats.rounds += 1
        # ---- Jacobians (start, and after every accepted step) --------------------------------
        idx = (live & need_jac).nonzero().squeeze(1)
        if idx.numel():
            stats.start()
            f, df = model.predict_with_jacobian(p[idx])
            stats.stop("jacobian")
            stats.jac_evals += idx.numel()
            stats.start()
            sc, wz = sw[idx], wzero[idx]
            ri = W(wz, 0.0, sc * (f - y[idx]))
            Ji = W(wz[:, :, None], 0.0, df * sc[:, :, None])
            c2 = (ri * ri).sum(dim=1)
            cn = torch.linalg.vector_norm(Ji, dim=1)  # column norms: finite iff the column is
            ok = torch.isfinite(c2) & torch.isfinite(cn).all(dim=1)
            r[idx], chi2[idx] = ri, c2
            need_jac[idx] = False
            fin = finish_after_jac[idx]
            st = status[idx]
            rs = reason[idx]
            st = W(~ok, FAILED, st)
            rs = W(~ok, R_FAILJ, rs)
            st = W(ok & fin, CONVERGED, st)
            go = ok & ~fin
            # ---- Phase A: gradient, scaling, active set, tests, QR, Gauss-Newton test ------
            zero = go & (c2 == 0.0)
            st, rs = W(zero, CONVERGED, st), W(zero, R_CHI0, rs)
            go = go & ~zero
            g = torch.einsum("rni,rn->ri", Ji, ri)
            dsc_i = torch.maximum(dsc[idx], cn)
            dsc[idx] = W(go[:, None], dsc_i, dsc[idx])
            pf = p[idx][:, free]
            held = ((pf <= lfree) & (g > 0.0)) | ((pf >= ufree) & (g < 0.0))
            act = ~held
            rnorm = torch.sqrt(c2)
            okc = act & (cn > 0.0)
            cosv = W(okc, g.abs() / W(okc, cn * rnorm[:, None], 1.0), 0.0)
            gcos = cosv.max(dim=1).values
            nact = act.sum(dim=1)
            conv = go & ((nact == 0) | (gcos <= tab.gtol))
            st, rs = W(conv, CONVERGED, st), W(conv, R_GTOL, rs)
            go = go & ~conv
            mx = go & (iters[idx] >= tab.max_iterations)
            st, rs = W(mx, MAXIT, st), W(mx, R_MAXIT, rs)
            go = go & ~mx
            # Active columns first (stable), held columns zeroed: R of [J_perm | r] has R_active
            # top-left and Q^T r in its last column; the held part is padded with I.
            pm = torch.sort((~act).to(torch.uint8), dim=1, stable=True).indices
            actp = torch.gather(act, 1, pm)
            # (Failed replicas carry NaN/inf: zeroed here so that the batched QR sees finite input.)
            keep = (actp & ok[:, None])[:, None, :]
            Jp = W(keep, torch.gather(Ji, 2, pm[:, None, :].expand(-1, n, -1)), 0.0)
            A = torch.cat([Jp, W(ok[:, None], ri, 0.0)[:, :, None]], dim=2)
            del Jp, Ji
            Rfull = qr_r(A, qr, stats.counts)
            del A
            both = actp[:, :, None] & actp[:, None, :]
            Ra = W(both, Rfull[:, :nf, :nf], 0.0)
            Ra = Ra + torch.diag_embed((~actp).to(dt))
            ca = W(actp, Rfull[:, :nf, nf], 0.0)
            dp = torch.gather(dsc[idx], 1, pm)
            pp = torch.gather(pf, 1, pm)
            pn = torch.sqrt((W(actp, dp * pp, 0.0) ** 2).sum(dim=1))
            gn, solved = back_substitute(Ra, -ca)
            gnorm = torch.sqrt((W(actp, dp * gn, 0.0) ** 2).sum(dim=1))
            conv = go & solved & (gnorm <= tab.xtol * (pn + tab.xtol))
            st, rs = W(conv, CONVERGED, st), W(conv, R_XTOLGN, rs)
            go = go & ~conv
            status[idx], reason[idx] = st, rs
            g2 = go[:, None]
            perm[idx] = W(g2, pm, perm[idx])
            na[idx] = W(go, nact, na[idx])
            Rf[idx] = W(go[:, None, None], Ra, Rf[idx])
            cvec[idx] = W(g2, ca, cvec[idx])
            cc[idx] = W(go, (ca * ca).sum(dim=1), cc[idx])
            pnorm[idx] = W(go, pn, pnorm[idx])
            dperm[idx] = W(g2, W(actp, dp, 1.0), dperm[idx])
            in_trial[idx] = in_trial[idx] | go
            stats.stop("linalg")

        # ---- Phase B: one damped trial step per live replica in trial state -----------------
        t_idx = ((status == RUNNING) & in_trial).nonzero().squeeze(1)
        if t_idx.numel() == 0:
            continue
        stats.start()
        B = t_idx.numel()
        Rt, ct, dtp = Rf[t_idx], cvec[t_idx], dperm[t_idx]
        lt = lam[t_idx]
        aug = z(B, 2 * nf, nf + 1)
        aug[:, :nf, :nf] = Rt
        aug[:, :nf, nf] = -ct
        aug[:, nf + ar, ar] = torch.sqrt(lt)[:, None] * dtp
        R2 = qr_r(aug, qr, stats.counts)
        stp, solved = back_substitute(R2[:, :nf, :nf], R2[:, :nf, nf])
        actp = ar[None, :] < na[t_idx][:, None]
        stp = W(actp & solved[:, None], stp, 0.0)
        pm = perm[t_idx]
        qidx = free[pm]  # (B, nf) parameter index of each permuted column
        pt = p[t_idx]
        p0 = torch.gather(pt, 1, qidx)
        clipped = torch.minimum(torch.maximum(p0 + stp, lo[qidx]), hi[qidx])
        pt_perm = W(actp, clipped, p0)
        stp = pt_perm - p0
        pt = pt.scatter(1, qidx, pt_perm)
        dnorm = torch.sqrt((W(actp, dtp * stp, 0.0) ** 2).sum(dim=1))
        v = ct + torch.einsum("bij,bj->bi", Rt, stp)
        rsum = (W(actp, v, 0.0) ** 2).sum(dim=1)
        pred = W(solved, cc[t_idx] - rsum, -1.0)
        stats.stop("linalg")
        # Trial residuals: one GEMM over all of them (an unsolved one has pt = p and is
        # discarded below, instead of a host sync to leave it out).
        stats.start()
        ft = model.predict(pt)
        rt = W(wzero[t_idx], 0.0, sw[t_idx] * (ft - y[t_idx]))
        c2t = (rt * rt).sum(dim=1)
        rr = r[t_idx]
        finite = solved & torch.isfinite(c2t)
        actual = W(finite, ((rr - rt) * (rr + rt)).sum(dim=1), -1.0)
        stats.trial_evals += int(solved.sum())
        stats.trial_gemm_columns += B
        stats.stop("trial")
        stats.start()
        posp = pred > 0.0
        rho = W(finite & posp, actual / W(posp, pred, 1.0), -1.0)
        acc = rho > 1e-4
        t3 = 2.0 * rho - 1.0
        lam_new = W(acc, lt * torch.clamp(1.0 - t3 ** 3, min=1.0 / 3.0), lt * nu[t_idx])
        nu[t_idx] = W(acc, 2.0, nu[t_idx] * 2.0)
        lam[t_idx] = lam_new
        c2 = chi2[t_idx]
        stop1 = finite & (actual.abs() <= tab.ftol * c2) & (pred >= 0.0) & (pred <= tab.ftol * c2) & (rho <= 2.0)
        stop2 = ~stop1 & solved & (dnorm <= tab.xtol * pnorm[t_idx])
        fail = ~stop1 & ~stop2 & ~acc & (lam_new > 1e300)
        stop = stop1 | stop2
        a2 = acc[:, None]
        p[t_idx] = W(a2, pt, p[t_idx])
        iters[t_idx] += acc.long()
        need_jac[t_idx] = need_jac[t_idx] | acc
        in_trial[t_idx] = in_trial[t_idx] & ~acc
        finish_after_jac[t_idx] = finish_after_jac[t_idx] | (acc & stop)
        st = status[t_idx]
        st = W(~acc & stop, CONVERGED, st)
        st = W(fail, FAILED, st)
        status[t_idx] = st
        rs = reason[t_idx]
        rs = W(stop1, R_FTOL, rs)
        rs = W(stop2, R_XTOLS, rs)
        rs = W(fail, R_FAILD, rs)
        reason[t_idx] = rs
        stats.stop("linalg")
    return p, chi2, status, iters, reason


def check_special(tab):
    """lgamma/digamma here vs scipy over every Gamma argument the run can meet (contour nodes and
    N = 1, 2, a over its bounds, b + 1 over [1, 21])."""
    import scipy.special as sps
    N = tab.nall.cpu().to(torch.complex128).numpy()
    amin = min(tab.lower_np[f0] for f0 in FLAV0)
    a = np.linspace(amin, 10.0, 41)
    z = N[None, :] + a[:, None]  # (41, nodes): the node axis last, in the plan's order
    b1 = np.linspace(1.0, 21.0, 11)[:, None, None]
    Z = np.concatenate([z, z + 0.5, (z + b1).reshape(-1, N.size), (z + 0.5 + b1).reshape(-1, N.size)])
    lg, ps = lgamma_digamma(torch.from_numpy(Z).to(tab.device, tab.cdtype), tab.plan, True)
    lg, ps = lg.cpu().to(torch.complex128).numpy(), ps.cpu().to(torch.complex128).numpy()
    ref = sps.loggamma(Z)
    d = lg - ref
    d = d.real + 1j * (np.mod(d.imag + np.pi, 2 * np.pi) - np.pi)  # (branch: equal mod 2 pi i)
    rp = sps.psi(Z)
    return {"points": int(Z.size), "lgamma_max_abs_diff_mod_2pi_i": float(np.abs(d).max()),
            "lgamma_max_rel_diff_mod_2pi_i": float((np.abs(d) / np.maximum(np.abs(ref), 1.0)).max()),
            "gamma_max_rel_diff": float(np.abs(np.expm1(d)).max()),
            "digamma_max_rel_diff": float((np.abs(ps - rp) / np.abs(rp)).max())}


def check_jacobian(model, p):
    """Analytic Jacobian against central differences at p (B, P): max relative column error."""
    tab = model.tab
    _, Ja = model.predict_with_jacobian(p)
    worst = 0.0
    for j, q_ in enumerate(tab.free_np):
        h = 1e-4 * max(1.0, float(p[:, q_].abs().max()))
        pp, pm = p.clone(), p.clone()
        pp[:, q_] += h
        pm[:, q_] -= h
        fd = (model.predict(pp) - model.predict(pm)) / (2 * h)
        worst = max(worst, float((fd - Ja[:, :, j]).abs().max() / fd.abs().max()))
    return worst


def fit_all(model, tab, R, batch, qr, stats):
    dev = tab.device
    out = {k: [] for k in ("params", "chi2", "status", "iters", "reason")}
    for b0 in range(0, R, batch):
        sl = slice(b0, min(R, b0 + batch))
        y = torch.from_numpy(tab.rep_y[sl]).to(dev, tab.dtype)
        w = torch.from_numpy(tab.rep_w[sl]).to(dev, tab.dtype)
        res = lm_fit_batch(model, y, w, qr, stats)
        for k, v in zip(out, res):
            out[k].append(v)
    stats.sync()
    return {k: torch.cat(v).cpu().numpy() for k, v in out.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("table", help="TABLE.h5 from `ensemblefit export dis-table`")
    ap.add_argument("--replicas", type=int, default=None, help="fit replicas 0..R (default: all in the table)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    ap.add_argument("--batch", type=int, default=None,
                    help="replicas per batch (memory cap; default: all on cuda, 256 on cpu)")
    ap.add_argument("--qr", choices=["auto", "householder", "cholqr2"], default="auto",
                    help="R factors by torch.linalg.qr or CholeskyQR2 (auto: cholqr2 on cuda)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the element-wise moment code")
    ap.add_argument("--warmup", type=int, default=None,
                    help="replicas of an untimed warm-up fit first (default 8 on cuda, 0 on cpu)")
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (cpu)")
    ap.add_argument("--compare", help="ensemblefit output .h5 of the same replicas")
    ap.add_argument("--check-special", action="store_true", help="lgamma/digamma vs scipy first")
    ap.add_argument("--check-jacobian", action="store_true", help="analytic vs central differences first")
    ap.add_argument("--json", help="write results here")
    ap.add_argument("--out", help="write params/chi2/status/iterations here (.npz)")
    args = ap.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dtype = torch.float64 if args.dtype == "float64" else torch.float32
    qr = args.qr if args.qr != "auto" else ("cholqr2" if device.type == "cuda" else "householder")
    t0 = time.perf_counter()
    tab = DisTable(args.table, device, dtype)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t_load = time.perf_counter() - t0
    R = tab.rep_index.size if args.replicas is None else min(args.replicas + 1, tab.rep_index.size)
    index = tab.rep_index[:R]
    batch = args.batch or (R if device.type == "cuda" else 256)
    model = Model(tab, args.compile)
    res = {"implementation": "PyTorch peer (perf/peers/dis_torch.py)",
           "python": sys.version.split()[0], "torch": torch.__version__, "numpy": np.__version__,
           "device": (torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"),
           "torch_threads": torch.get_num_threads(), "dtype": args.dtype, "qr": qr,
           "batch": batch, "jacobian": "analytic"}
    if args.check_special:
        res["check_special"] = check_special(tab)
        print("special functions vs scipy:", res["check_special"])
    if args.check_jacobian:
        res["check_jacobian_max_rel_err"] = check_jacobian(model, tab.start[None, :].repeat(2, 1))
        print(f"jacobian check: analytic vs central differences, max rel error {res['check_jacobian_max_rel_err']:.2e}")

    nwarm = args.warmup if args.warmup is not None else (8 if device.type == "cuda" else 0)
    if nwarm:
        ws = Stats(device)
        ws.start()
        fit_all(model, tab, min(nwarm, R), min(nwarm, R), qr, ws)
        ws.stop("jacobian")
        res["warmup"] = {"replicas": min(nwarm, R), "seconds": ws.t["jacobian"]}

    stats = Stats(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    stats.sync()
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    fit = fit_all(model, tab, R, batch, qr, stats)
    t_fit = time.perf_counter() - t0  # fit_all synchronized the device
    cpu_fit = time.process_time() - cpu0
    params, chi2, status, iters, reason = (fit[k] for k in ("params", "chi2", "status", "iters", "reason"))
    reason = np.array([REASONS[int(c)] for c in reason])

    total_iters = int(iters.sum())
    res.update({
        "compile": model.compile_state,
        "replicas_fitted": int(R),
        "replica_range": [int(index[0]), int(index[-1])],
        "load_seconds": t_load,
        "compute_seconds": t_fit,
        "cpu_seconds": cpu_fit,
        "replicas_per_second": R / t_fit,
        "rounds": stats.rounds,
        "jacobian_evaluations": stats.jac_evals,
        "trial_evaluations": stats.trial_evals,
        "seconds_jacobian": stats.t["jacobian"],
        "seconds_trial": stats.t["trial"],
        "seconds_linalg": stats.t["linalg"],
        "cholqr2_fallbacks": stats.counts["cholqr2_fallbacks"],
        "iterations_total": total_iters,
        "iterations_mean": total_iters / R,
        "status_counts": {str(s): int(np.sum(status == s)) for s in np.unique(status)},
        "stop_reasons": {str(s): int(np.sum(reason == s)) for s in sorted(set(reason))},
        "flops_per_iteration_counted": tab.flops_per_iteration,
        "gflops_counted": tab.flops_per_iteration * total_iters / t_fit / 1e9,
        # This implementation's GEMM work: 2 n (2 K NB) per column, 1 + nfree columns per
        # Jacobian, 1 per trial (every trial of a round, solved or not).
        "gemm_flops": 2.0 * tab.n * tab.table.shape[1] * ((1 + tab.nfree) * stats.jac_evals + stats.trial_gemm_columns),
    })
    res["gemm_gflops"] = res["gemm_flops"] / t_fit / 1e9
    if device.type == "cuda":
        res["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2 ** 30
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

#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Plots the replica ensemble of one fit result: a histogram of every free parameter on the
diagonal and the pairwise scatter of the replicas below it (with the correlation coefficient
above it), the central fit (replica 0) in red and the 16/84 % quantiles dashed. For the
dis-mellin model also the parton distributions x f(x) at the input scale Q0^2 with their 68 %
and 95 % bands over the replicas (log x, linear x, and the bands relative to the central fit).

  plot_ensemble.py results/example.h5 [-o ensemble.png] [--params a,k] [--max-points 5000]
  plot_ensemble.py results/dis-mellin-fit.h5 -o ensemble.png [--bands pdfs.png]

Only converged replicas (/replicas/status 0) are used; fixed parameters (no spread) are left
out. Uses Debian's python3-h5py and python3-matplotlib (Agg backend); writes PNG.
"""
import argparse
import math
import os
import sys

import h5py
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def text_attr(f, name, default=""):
    v = f.attrs.get(name, default)
    return v.decode() if isinstance(v, bytes) else str(v)


def config_value(config, section, key, default=None):
    """A value from the resolved config text that the result file stores (INI, 'key = value')."""
    current = None
    for line in config.splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1].strip()
        elif current == section and "=" in line:
            k, v = (s.strip() for s in line.split("=", 1))
            if k == key:
                return v
    return default


def load(path):
    with h5py.File(path, "r") as f:
        if "replicas" not in f:
            sys.exit(f"plot_ensemble: {path}: no /replicas group")
        params = f["replicas/params"][()]
        status = f["replicas/status"][()]
        names = f["replicas/params"].attrs.get("param_names")
        if names is None:
            names = f.attrs.get("param_names")
        names = [n.decode() if isinstance(n, bytes) else str(n) for n in names]
        central = f["central/params"][()] if "central/params" in f else None
        if central is not None and "central/status" in f and f["central/status"][0] < 0:
            central = None
        info = {"model": text_attr(f, "model"), "config": text_attr(f, "config")}
    ok = status == 0
    return names, params[ok], central, info, int(ok.sum()), len(status)


def corner(path, names, reps, central, info, n_ok, n_all, out, select, max_points):
    spread = reps.std(axis=0) > 0 if len(reps) else np.zeros(len(names), bool)
    idx = [i for i, n in enumerate(names) if (n in select if select else spread[i])]
    if select:
        unknown = set(select) - set(names)
        if unknown:
            sys.exit(f"plot_ensemble: no parameter(s) {', '.join(sorted(unknown))} in {path}; "
                     f"there are {', '.join(names)}")
    if not idx:
        sys.exit(f"plot_ensemble: {path}: no parameter with a spread to plot")
    k = len(idx)
    size = max(2.0, min(2.6, 16.0 / k))
    fig, axes = plt.subplots(k, k, figsize=(size * k + 0.6, size * k + 0.6), squeeze=False)
    rng = np.random.default_rng(0)
    shown = reps if len(reps) <= max_points else reps[rng.choice(len(reps), max_points, replace=False)]
    alpha = float(np.clip(300.0 / max(len(shown), 1), 0.05, 0.8))
    dot = float(np.clip(2000.0 / max(len(shown), 1), 3.0, 16.0))   # few replicas: bigger dots
    bins = int(np.clip(np.sqrt(len(reps)) * 1.5, 10, 60))
    for row, i in enumerate(idx):
        for col, j in enumerate(idx):
            ax = axes[row, col]
            if col > row:   # upper triangle: correlation coefficient
                ax.axis("off")
                if len(reps) > 2:
                    rho = np.corrcoef(reps[:, i], reps[:, j])[0, 1]
                    ax.text(0.5, 0.5, f"ρ = {rho:+.2f}", ha="center", va="center",
                            fontsize=9 if k > 6 else 11, transform=ax.transAxes,
                            color=plt.cm.coolwarm(0.5 + rho / 2))
                continue
            if row == col:
                ax.hist(reps[:, i], bins=bins, color="#1565c0", alpha=0.8)
                for q in np.percentile(reps[:, i], [16, 84]):
                    ax.axvline(q, color="k", ls="--", lw=0.8)
                if central is not None:
                    ax.axvline(central[i], color="#c62828", lw=1.2)
                ax.set_yticks([])
            else:
                ax.scatter(shown[:, j], shown[:, i], s=dot, alpha=alpha, color="#1565c0", lw=0)
                if central is not None:
                    ax.plot(central[j], central[i], "o", color="#c62828", ms=4)
            if row == k - 1:
                ax.set_xlabel(names[j])
            else:
                ax.set_xticklabels([])
            if col == 0 and row > 0:
                ax.set_ylabel(names[i])
            elif col > 0:
                ax.set_yticklabels([])
            ax.tick_params(labelsize=7)
            for lab in ax.get_xticklabels():
                lab.set_rotation(45)
    fig.suptitle(f"{os.path.basename(path)}: {info['model'] or 'model'}, {n_ok} of {n_all} "
                 f"replicas converged (red: central fit; dashed: 16/84 %)")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    print(f"plot_ensemble: {k} parameters, {n_ok} replicas -> {out}")


# --- dis-mellin: x f(x) at Q0^2, from the parameterisation in kernels/models/dis_mellin.hpp ---
# f(x) = M x^a (1-x)^b (1 + c sqrt(x) + d x) / n_N, n_N = the shape's N-th Mellin moment:
# u_v and d_v normalised to 2 and 1 valence quarks (N = 1), the sea S to its momentum fraction
# sea_N and the gluon to 1 - <x>_uv - <x>_dv - sea_N (N = 2, the momentum sum rule).
FLAVOURS = [("uv", "x u_v", "#1565c0"), ("dv", "x d_v", "#2e7d32"),
            ("sea", "x S (sea)", "#ef6c00"), ("g", "x g / 10", "#c62828")]


def beta(p, q):
    return math.exp(math.lgamma(p) + math.lgamma(q) - math.lgamma(p + q))


def shape_moment(n, a, b, c, d):
    return beta(n + a, b + 1) + c * beta(n + a + 0.5, b + 1) + d * beta(n + a + 1, b + 1)


def shape(x, a, b, c, d):
    return x ** a * (1 - x) ** b * (1 + c * np.sqrt(x) + d * x)


def pdfs(p, x):
    """x f(x) for u_v, d_v, S and g/10 from one parameter dict."""
    s = {fl: [p[f"{fl}_{k}"] for k in "abcd"] for fl in ("uv", "dv", "sea", "g")}
    uv = 2.0 * shape(x, *s["uv"]) / shape_moment(1, *s["uv"])
    dv = 1.0 * shape(x, *s["dv"]) / shape_moment(1, *s["dv"])
    mom_uv = 2.0 * shape_moment(2, *s["uv"]) / shape_moment(1, *s["uv"])
    mom_dv = 1.0 * shape_moment(2, *s["dv"]) / shape_moment(1, *s["dv"])
    sea = p["sea_N"] * shape(x, *s["sea"]) / shape_moment(2, *s["sea"])
    g = (1.0 - mom_uv - mom_dv - p["sea_N"]) * shape(x, *s["g"]) / shape_moment(2, *s["g"])
    return {"uv": x * uv, "dv": x * dv, "sea": x * sea, "g": x * g / 10.0}


def bands(path, names, reps, central, info, out):
    need = [f"{fl}_{k}" for fl in ("uv", "dv", "sea", "g") for k in "abcd"] + ["sea_N"]
    missing = [n for n in need if n not in names]
    if missing:
        sys.exit(f"plot_ensemble: {path}: dis-mellin parameters missing: {', '.join(missing)}")
    x = np.logspace(-3, np.log10(0.95), 200)
    curves = {fl: [] for fl, _, _ in FLAVOURS}
    for row in reps:
        v = pdfs(dict(zip(names, row)), x)
        for fl in curves:
            curves[fl].append(v[fl])
    q0 = config_value(info["config"], "model", "q0")
    ref = pdfs(dict(zip(names, central)), x) if central is not None else None
    fig, axes = plt.subplots(1, 3, figsize=(18, 5.4))
    for ax, xscale in zip(axes[:2], ("log", "linear")):
        for fl, label, colour in FLAVOURS:
            c = np.array(curves[fl])
            lo95, lo68, mid, hi68, hi95 = np.percentile(c, [2.5, 16, 50, 84, 97.5], axis=0)
            ax.fill_between(x, lo95, hi95, color=colour, alpha=0.18, lw=0)
            ax.fill_between(x, lo68, hi68, color=colour, alpha=0.40, lw=0,
                            label=f"{label} 68 % / 95 %")
            ax.plot(x, ref[fl] if ref is not None else mid, color=colour, lw=1.2)
        ax.set_xscale(xscale)
        ax.set_xlabel("x")
        ax.set_ylabel("x f(x)")
        ax.set_xlim(x[0] if xscale == "log" else 0.0, 1.0)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=9)
    # The bands relative to the central curve (the median where there is no central fit), up to
    # x = 0.8: beyond it the distributions vanish and the ratio means nothing.
    r = axes[2]
    keep = x <= 0.8
    for fl, label, colour in FLAVOURS:
        c = np.array(curves[fl])[:, keep]
        lo95, lo68, mid, hi68, hi95 = np.percentile(c, [2.5, 16, 50, 84, 97.5], axis=0)
        base = ref[fl][keep] if ref is not None else mid
        with np.errstate(divide="ignore", invalid="ignore"):
            r.fill_between(x[keep], lo95 / base, hi95 / base, color=colour, alpha=0.15, lw=0)
            r.fill_between(x[keep], lo68 / base, hi68 / base, color=colour, alpha=0.40, lw=0,
                           label=label.replace(" / 10", ""))
    r.axhline(1.0, color="k", lw=0.8)
    r.set_xscale("log")
    r.set_xlim(x[0], 0.8)
    r.set_xlabel("x")
    r.set_ylabel("band / central fit")
    r.set_title("relative uncertainty (68 % dark, 95 % light)", fontsize=10)
    r.grid(alpha=0.3)
    r.legend(fontsize=9)
    scale = f"Q0 = {q0} GeV" if q0 else "Q0"
    fig.suptitle(f"{os.path.basename(path)}: parton distributions at {scale} over "
                 f"{len(reps)} replicas (line: central fit; bands: 68 % and 95 %)")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    print(f"plot_ensemble: x f(x) bands of u_v, d_v, S, g over {len(reps)} replicas -> {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", help="ensemblefit result (.h5)")
    ap.add_argument("-o", "--output", default="ensemble.png", help="PNG (ensemble.png)")
    ap.add_argument("--params", help="comma-separated parameters to show (default: the free ones)")
    ap.add_argument("--max-points", type=int, default=5000, help="replicas drawn per scatter")
    ap.add_argument("--bands", help="dis-mellin: PNG of the x f(x) bands "
                                    "(default: OUTPUT with -pdfs before .png)")
    a = ap.parse_args()

    names, reps, central, info, n_ok, n_all = load(a.file)
    if n_ok < 2:
        sys.exit(f"plot_ensemble: {a.file}: {n_ok} converged replicas; need at least 2")
    select = [s.strip() for s in a.params.split(",")] if a.params else None
    corner(a.file, names, reps, central, info, n_ok, n_all, a.output, select, a.max_points)
    if info["model"] == "dis-mellin" or a.bands:
        stem, ext = os.path.splitext(a.output)
        bands(a.file, names, reps, central, info, a.bands or f"{stem}-pdfs{ext or '.png'}")


if __name__ == "__main__":
    main()

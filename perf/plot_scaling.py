#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Plots a scaling study: speedup and efficiency against ranks, with the ideal lines, and where
the efficiency went.

  plot_scaling.py results/scaling/report.csv [-o scaling.png] [--title TEXT]
  plot_scaling.py results/scaling/ranks-*.h5 [--baseline FILE.h5] [-o scaling.png]

Input: the CSV of `ensemblefit report --csv` (columns file, ranks, wall_s, speedup,
parallel_efficiency, load_balance, communication_efficiency, and when present
computation_scalability and the phase shares setup..io), or the result files themselves, from
which the same numbers are computed (baseline: the file given, else the run with the fewest
ranks).

Panels: (a) speedup against the baseline, ideal = ranks / baseline ranks; (b) scaling efficiency
(speedup / ideal) and parallel efficiency (load balance x communication efficiency), ideal 1;
(c) the global efficiency stacked with what each POP factor lost: global = load balance x
communication efficiency x computation scalability, and 1 - global is split between the factors
in proportion to -log(factor), so the bar adds up to 100%; (d) where the ranks' time went, per
phase. Uses Debian's python3-matplotlib (Agg backend) and python3-h5py; writes PNG.
"""
import argparse
import csv
import math
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

PHASES = ["setup", "compute", "comm", "sync", "sched", "idle", "io"]
PHASE_COLOURS = {"setup": "#9e9e9e", "compute": "#2e7d32", "comm": "#1565c0", "sync": "#6a1b9a",
                 "sched": "#ef6c00", "idle": "#c62828", "io": "#795548"}
FACTORS = [("load_balance", "load balance", "#c62828"),
           ("communication_efficiency", "communication", "#1565c0"),
           ("computation_scalability", "computation scalability", "#ef6c00")]


def read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"plot_scaling: {path}: no rows")
    need = {"ranks", "wall_s", "speedup", "parallel_efficiency", "load_balance",
            "communication_efficiency"}
    missing = need - set(rows[0])
    if missing:
        sys.exit(f"plot_scaling: {path}: missing columns {', '.join(sorted(missing))}")
    out = []
    for r in rows:
        run = {"file": r.get("file", "")}
        for k, v in r.items():
            if k in ("file", "workers", "policy") or v is None or v == "":
                continue
            try:
                run[k] = float(v)
            except ValueError:
                pass
        out.append(run)
    return out


def read_h5(paths, baseline=None):
    import h5py

    runs = []
    for p in paths:
        with h5py.File(p, "r") as f:
            if "timing" not in f:
                sys.exit(f"plot_scaling: {p}: no /timing group")
            t = f["timing"]
            run = {"file": p, "ranks": float(t.attrs["ranks"]),
                   "wall_s": float(t.attrs["runtime_seconds"]),
                   "parallel_efficiency": float(t.attrs["parallel_efficiency"]),
                   "load_balance": float(t.attrs["load_balance"]),
                   "communication_efficiency": float(t.attrs["communication_efficiency"])}
            sums = {ph: float(np.sum(t[ph][()])) for ph in PHASES + ["wall"] if ph in t}
        run["_compute_total"] = sums.get("compute", float("nan"))
        total = sums.get("wall") or sum(sums.get(ph, 0.0) for ph in PHASES)
        for ph in PHASES:
            if ph in sums and total > 0:
                run[ph] = sums[ph] / total
        runs.append(run)
    if baseline:
        base = read_h5([baseline])[0]
    else:
        base = min(runs, key=lambda r: (r["ranks"], r["wall_s"]))
    for r in runs:
        r["speedup"] = base["wall_s"] / r["wall_s"]
        r["scaling_efficiency"] = r["speedup"] / (r["ranks"] / base["ranks"])
        if base["_compute_total"] > 0 and r["_compute_total"] > 0:
            r["computation_scalability"] = base["_compute_total"] / r["_compute_total"]
            r["global_efficiency"] = r["parallel_efficiency"] * r["computation_scalability"]
    return runs, base


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", help="report CSV, or result .h5 files")
    ap.add_argument("-o", "--output", default="scaling.png", help="PNG to write (scaling.png)")
    ap.add_argument("--baseline", help="with .h5 inputs: the run to compare against")
    ap.add_argument("--title", help="figure title")
    a = ap.parse_args()

    if len(a.inputs) == 1 and a.inputs[0].endswith(".csv"):
        runs = read_csv(a.inputs[0])
        base = min(runs, key=lambda r: r["ranks"])
        for r in runs:   # older reports may lack these columns
            r.setdefault("scaling_efficiency", r["speedup"] / (r["ranks"] / base["ranks"]))
    else:
        runs, base = read_h5(a.inputs, a.baseline)
    runs.sort(key=lambda r: r["ranks"])
    ranks = np.array([r["ranks"] for r in runs])
    speedup = np.array([r["speedup"] for r in runs])
    base_ranks = base["ranks"]

    fig, ax = plt.subplots(2, 2, figsize=(11, 9.5))
    fig.suptitle(a.title or f"strong scaling, {len(runs)} runs "
                 f"(baseline {base_ranks:g} rank(s), {base['wall_s']:.3f} s)")

    # (a) speedup
    s = ax[0, 0]
    ideal_x = np.array([ranks.min(), ranks.max()])
    s.plot(ideal_x, ideal_x / base_ranks, "k--", lw=1, label="ideal")
    s.plot(ranks, speedup, "o-", color="#1565c0", label="measured")
    for x, y in zip(ranks, speedup):
        s.annotate(f"{y:.2f}", (x, y), textcoords="offset points", xytext=(-8, 8), fontsize=8)
    s.set_xscale("log", base=2)
    s.set_yscale("log", base=2)
    s.set_xlabel("ranks")
    s.set_ylabel("speedup")
    s.set_title("(a) speedup")
    s.legend()

    # (b) efficiencies
    e = ax[0, 1]
    e.axhline(1.0, color="k", ls="--", lw=1, label="ideal")
    e.plot(ranks, [r["scaling_efficiency"] for r in runs], "o-", color="#1565c0",
           label="scaling efficiency (speedup / ideal)")
    e.plot(ranks, [r["parallel_efficiency"] for r in runs], "s-", color="#2e7d32",
           label="parallel efficiency (LB x comm)")
    if all("global_efficiency" in r for r in runs):
        e.plot(ranks, [r["global_efficiency"] for r in runs], "^-", color="#ef6c00",
               label="global efficiency (PE x comp. scal.)")
    e.set_xscale("log", base=2)
    e.set_ylim(0, 1.1)
    e.set_xlabel("ranks")
    e.set_ylabel("efficiency")
    e.set_title("(b) efficiency")
    e.legend(fontsize=8, loc="lower left")

    # (c) global efficiency and the factors' losses, stacked to 100 %
    c = ax[1, 0]
    pos = np.arange(len(runs))
    bottom = np.zeros(len(runs))
    glob = []
    losses = {k: [] for k, _, _ in FACTORS}
    for r in runs:
        f = {k: min(max(r.get(k, 1.0), 1e-9), 1.0) for k, _, _ in FACTORS}
        g = math.prod(f.values())
        logs = {k: -math.log(v) for k, v in f.items()}
        tot = sum(logs.values())
        glob.append(g)
        for k in f:
            losses[k].append((1 - g) * logs[k] / tot if tot > 0 else 0.0)
    c.bar(pos, glob, color="#2e7d32", label="global efficiency")
    bottom += np.array(glob)
    for k, label, colour in FACTORS:
        vals = np.array(losses[k])
        c.bar(pos, vals, bottom=bottom, color=colour, alpha=0.75, label=f"lost: {label}")
        bottom += vals
    for x, g in zip(pos, glob):
        c.text(x, g / 2, f"{100 * g:.0f}%", ha="center", va="center", color="white", fontsize=8)
    c.set_xticks(pos, [f"{x:g}" for x in ranks])
    c.set_ylim(0, 1.0)
    c.set_xlabel("ranks")
    c.set_ylabel("share of ideal")
    c.set_title("(c) efficiency factors: global = LB x comm x comp. scal.")
    c.legend(fontsize=8, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.14))

    # (d) phase shares
    d = ax[1, 1]
    bottom = np.zeros(len(runs))
    have = [ph for ph in PHASES if all(ph in r for r in runs)]
    for ph in have:
        vals = np.array([r[ph] for r in runs])
        d.bar(pos, vals, bottom=bottom, color=PHASE_COLOURS[ph], label=ph)
        bottom += vals
    d.set_xticks(pos, [f"{x:g}" for x in ranks])
    d.set_ylim(0, max(1.0, bottom.max() if len(bottom) else 1.0))
    d.set_xlabel("ranks")
    d.set_ylabel("share of the ranks' total time")
    d.set_title("(d) where the time went")
    if have:
        d.legend(fontsize=8, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    else:
        d.text(0.5, 0.5, "no phase shares in the input", ha="center", transform=d.transAxes)

    fig.tight_layout()
    fig.savefig(a.output, dpi=110)
    print(f"plot_scaling: {len(runs)} runs -> {a.output}")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Plots a scaling study: speedup and efficiency against ranks, with the ideal lines, and where
the efficiency and the time went; strong and weak scaling, GPU ranks, CPU ranks and mixed runs.

  plot_scaling.py results/scaling/report.csv [-o scaling.png] [--title TEXT]
  plot_scaling.py results/scaling/ranks-*.h5 [--baseline FILE.h5] [--weak|--strong] [-o scaling.png]

Input: the CSV of `ensemblefit report --csv` (columns file, ranks, wall_s, speedup,
scaling_efficiency, parallel_efficiency, load_balance, communication_efficiency, and when present
computation_scalability, the phase shares setup..io, and mode (strong, weak, other, mixed) and
group (gpu, cpu, mixed) of each run), or the result files themselves, from which the same numbers
are computed the way `report` does (per group of workers; baseline: the file given, else the
group's run with the fewest ranks; strong or weak from the items per rank unless --weak/--strong).

With a report CSV the x axis counts cores (CPU ranks x threads) and GPU ranks, as report does, and
runs whose ranks shared cores (column shared_cores) are drawn hollow with a red x, off the lines.
Panels: (a) speedup against the group's baseline: strong T1/TN, weak the scaled speedup
N x T1/TN, ideal = ranks / baseline ranks for both; (b) efficiency (strong: speedup / N, weak:
T1/TN, mixed: throughput against the parts' own) and parallel efficiency (load balance x
communication efficiency), ideal 1; (c) the global efficiency stacked with what each POP factor
lost: global = load balance x communication efficiency x computation scalability, and 1 - global
is split between the factors in proportion to -log(factor), so the bar adds up to 100%; (d)
where the ranks' time went, per phase. Uses Debian's python3-matplotlib (Agg backend) and
python3-h5py (run it with /usr/bin/python3); writes PNG.
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


GROUP_STYLE = {"gpu": ("#6a1b9a", "o"), "cpu": ("#1565c0", "s"), "mixed": ("#c62828", "*"),
               "all": ("#1565c0", "o")}
STRINGS = ("file", "workers", "policy", "mode", "group", "baseline")


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
        run = {k: r.get(k) or "" for k in STRINGS}
        for k, v in r.items():
            if k in STRINGS or v is None or v == "":
                continue
            try:
                run[k] = float(v)
            except ValueError:
                pass
        out.append(run)
    # a report from before groups and modes: one strong-scaling study
    base = min(out, key=lambda r: r["ranks"])
    for r in out:
        r["group"] = r["group"] or "all"
        r["mode"] = r["mode"] or "strong"
        r.setdefault("scaling_efficiency", r["speedup"] / (r["ranks"] / base["ranks"]))
    return out


def detect(work, units):
    """report's rule: strong when the work ratio is within 10 % of 1, weak within 10 % of N."""
    strong = abs(math.log(work)) if work > 0 else float("inf")
    weak = abs(math.log(work / units)) if work > 0 and units > 0 else float("inf")
    if strong <= math.log(1.1) and strong <= weak:
        return "strong"
    return "weak" if weak <= math.log(1.1) else "other"


def read_one_h5(p):
    import h5py

    with h5py.File(p, "r") as f:
        if "timing" not in f:
            sys.exit(f"plot_scaling: {p}: no /timing group")
        t = f["timing"]
        rows = [x.decode() if isinstance(x, bytes) else str(x) for x in t.attrs.get("placement", [])]
        gpus = sum(1 for x in rows if x.split("\t")[2:3] and x.split("\t")[2].startswith("gpu"))
        cols = [x.decode() if isinstance(x, bytes) else str(x) for x in t.attrs.get("columns", [])]
        items = cols[0] if cols else "replicas"
        run = {"file": p, "ranks": float(t.attrs["ranks"]),
               "wall_s": float(t.attrs["runtime_seconds"]),
               "parallel_efficiency": float(t.attrs["parallel_efficiency"]),
               "load_balance": float(t.attrs["load_balance"]),
               "communication_efficiency": float(t.attrs["communication_efficiency"]),
               "items": float(np.sum(t[items][()])) if items in t else float("nan")}
        sums = {ph: float(np.sum(t[ph][()])) for ph in PHASES + ["wall"] if ph in t}
    cpus = int(run["ranks"]) - gpus
    run["group"] = "mixed" if gpus and cpus else "gpu" if gpus else "cpu"
    run["gpus"] = gpus
    run["_compute_total"] = sums.get("compute", float("nan"))
    total = sums.get("wall") or sum(sums.get(ph, 0.0) for ph in PHASES)
    for ph in PHASES:
        if ph in sums and total > 0:
            run[ph] = sums[ph] / total
    return run


def read_h5(paths, baseline=None, forced=None):
    runs = [read_one_h5(p) for p in paths]
    bases = {}
    for r in sorted(runs, key=lambda r: r["ranks"]):
        bases.setdefault(r["group"], r)
    if baseline:
        b = read_one_h5(baseline)
        bases[b["group"]] = b
    def ratios(r):
        base = bases[r["group"]]
        work = r["items"] / base["items"] if base["items"] > 0 else float("nan")
        return work, r["ranks"] / base["ranks"]

    # a group's mode: the one its runs larger than the baseline agree on (report's rule)
    study = {}
    for g in bases:
        seen = {detect(*ratios(r)) for r in runs if r["group"] == g and r["ranks"] != bases[g]["ranks"]}
        study[g] = forced or (seen.pop() if len(seen) == 1 and "other" not in seen else None)
    for r in runs:
        base = bases[r["group"]]
        work, n = ratios(r)
        r["mode"] = "mixed" if r["group"] == "mixed" else study[r["group"]] or detect(work, n)
        w = {"strong": 1.0, "weak": n}.get(r["mode"], work)
        r["speedup"] = w * base["wall_s"] / r["wall_s"]
        r["scaling_efficiency"] = r["speedup"] / n
        if base["_compute_total"] > 0 and r["_compute_total"] > 0:
            # against the compute the baseline would spend on this run's work (weak: N times)
            r["computation_scalability"] = w * base["_compute_total"] / r["_compute_total"]
            r["global_efficiency"] = r["parallel_efficiency"] * r["computation_scalability"]
    # mixed runs as report sets them: against the GPU-only run with as many GPU ranks (speedup)
    # and against their parts' per-rank throughputs from the gpu and cpu baselines (efficiency)
    thr = lambda r: r["items"] / r["wall_s"] if r["wall_s"] > 0 else float("nan")  # noqa: E731
    per_rank = {g: thr(bases[g]) / bases[g]["ranks"] for g in ("gpu", "cpu") if g in bases}
    for r in runs:
        if r["group"] != "mixed":
            continue
        alone = [o for o in runs if o["group"] == "gpu" and o["ranks"] == r["gpus"]]
        r["speedup"] = thr(r) / thr(alone[-1]) if alone else float("nan")
        ideal = r["gpus"] * per_rank.get("gpu", 0.0) + (r["ranks"] - r["gpus"]) * per_rank.get("cpu", 0.0)
        r["scaling_efficiency"] = thr(r) / ideal if ideal > 0 else float("nan")
    return runs, bases


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", help="report CSV, or result .h5 files")
    ap.add_argument("-o", "--output", default="scaling.png", help="PNG to write (scaling.png)")
    ap.add_argument("--baseline", help="with .h5 inputs: the run to compare its group against")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--weak", action="store_const", const="weak", dest="mode",
                      help="with .h5 inputs: weak scaling (default: detected)")
    mode.add_argument("--strong", action="store_const", const="strong", dest="mode",
                      help="with .h5 inputs: strong scaling (default: detected)")
    ap.add_argument("--title", help="figure title")
    a = ap.parse_args()

    if len(a.inputs) == 1 and a.inputs[0].endswith(".csv"):
        runs = read_csv(a.inputs[0])
    else:
        runs, _ = read_h5(a.inputs, a.baseline, a.mode)
    order = {"gpu": 0, "cpu": 1, "mixed": 2}
    for r in runs:  # report counts cores (CPU ranks x threads) and GPU ranks; older CSVs ranks
        r["x"] = r.get("cores") or r["ranks"]
        r["shared"] = r.get("shared_cores", 0) == 1
    xname = "cores / GPU ranks" if any("cores" in r for r in runs) else "ranks"
    runs.sort(key=lambda r: (order.get(r["group"], 1), r["x"]))
    groups = list(dict.fromkeys(r["group"] for r in runs))
    modes = sorted({r["mode"] for r in runs if r["group"] != "mixed"})
    labels = [(f"{r['group']} " if len(groups) > 1 else "") + f"{r['x']:g}" + ("*" if r["shared"] else "")
              for r in runs]

    fig, ax = plt.subplots(2, 2, figsize=(11, 9.5))
    fig.suptitle(a.title or f"{' and '.join(modes) or 'mixed'} scaling, {len(runs)} runs "
                 f"({', '.join(groups)})")

    # (a) speedup per group, ideal = ranks / baseline ranks (scaled speedup for weak scaling)
    s = ax[0, 0]
    e = ax[0, 1]
    e.axhline(1.0, color="k", ls="--", lw=1, label="ideal")
    for g in groups:
        rs = [r for r in runs if r["group"] == g]
        colour, marker = GROUP_STYLE.get(g, ("#1565c0", "o"))
        # Runs whose ranks shared cores (report's shared_cores): drawn apart, hollow with a red x,
        # off the lines, as report leaves them out of its baseline, mode and claims.
        shared = [r for r in rs if r["shared"]]
        rs = [r for r in rs if not r["shared"]] or rs
        x = np.array([r["x"] for r in rs])
        what = "/".join(sorted({r["mode"] for r in rs}))
        if shared:
            sx = [r["x"] for r in shared]
            for ax_, key in ((s, "speedup"), (e, "scaling_efficiency")):
                if ax_ is s and g == "mixed":
                    continue
                ax_.plot(sx, [r[key] for r in shared], marker, color=colour, mfc="none", ms=9, ls="none")
                ax_.plot(sx, [r[key] for r in shared], "x", color="#c62828", ms=7, ls="none",
                         label=f"{g}: ranks shared cores (left out)")
        if g != "mixed":
            y = np.array([r["speedup"] for r in rs])
            x0 = x.min()
            ideal_x = np.array([x0, max([x.max()] + [r["x"] for r in shared])])
            s.plot(ideal_x, ideal_x / x0, "--", color=colour, lw=1, alpha=0.6, label=f"{g}: ideal")
            s.plot(x, y, marker + "-", color=colour,
                   label=f"{g}, {what}" + (" (scaled speedup)" if what == "weak" else ""))
            for xi, yi in zip(x, y):
                s.annotate(f"{yi:.2f}", (xi, yi), textcoords="offset points", xytext=(-8, 8), fontsize=8)
        e.plot(x, [r["scaling_efficiency"] for r in rs], marker + ("" if g == "mixed" else "-"),
               color=colour, ms=12 if g == "mixed" else 6,
               label=f"{g}: " + ("throughput / its parts' (mixed)" if g == "mixed"
                                 else "T1/TN (weak)" if what == "weak" else "speedup / N (strong)"
                                 if what == "strong" else f"{what} efficiency"))
        e.plot(x, [r["parallel_efficiency"] for r in rs], marker + ":", color=colour, alpha=0.5,
               mfc="none", label=f"{g}: parallel efficiency (LB x comm)")
    s.set_xscale("log", base=2)
    s.set_yscale("log", base=2)
    s.set_xlabel(xname)
    s.set_ylabel("speedup")
    s.set_title("(a) speedup")
    s.legend(fontsize=8)
    e.set_xscale("log", base=2)
    effs = [r["scaling_efficiency"] for r in runs if math.isfinite(r["scaling_efficiency"])]
    e.set_ylim(0, min(max([1.1] + [1.05 * v for v in effs]), 3.0))
    e.set_xlabel(xname)
    e.set_ylabel("efficiency")
    e.set_title("(b) efficiency")
    e.legend(fontsize=7, loc="lower left")

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
    c.set_xticks(pos, labels, fontsize=7)
    c.set_ylim(0, 1.0)
    c.set_xlabel(xname + (" (* ranks shared cores)" if any(r["shared"] for r in runs) else ""))
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
    d.set_xticks(pos, labels, fontsize=7)
    d.set_ylim(0, max(1.0, bottom.max() if len(bottom) else 1.0))
    d.set_xlabel(xname)
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

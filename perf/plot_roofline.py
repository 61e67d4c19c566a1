#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The roofline of runs' model work: one point per kernel of each result file's /timing/kernels
(arithmetic intensity = counted FLOPs / bytes against the achieved FLOP/s), under the ceilings
the run stored (its GPU rows: the device probed at the end of the run) or those given here (--peak-gflops, --peak-gbs, e.g. from
`ensemblefit devices` on the machine that ran). Kernels with no counted FLOPs (a
reconstruction's gradient: bytes only) are drawn at their bandwidth on the right axis' scale
as a horizontal tick instead.

    perf/plot_roofline.py run1.h5 run2.h5 -o roofline.png [--peak-gflops 51000 --peak-gbs 3350]
"""
import argparse
import sys

import h5py
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def kernels(path):
    with h5py.File(path, "r") as f:
        if "/timing/kernels" not in f:
            return []
        out = []
        for name, g in f["/timing/kernels"].items():
            a = {k: float(v) for k, v in g.attrs.items() if k != "what"}
            a["name"] = name
            out.append(a)
        return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("-o", "--output", default="roofline.png")
    ap.add_argument("--peak-gflops", type=float, default=0.0)
    ap.add_argument("--peak-gbs", type=float, default=0.0)
    args = ap.parse_args()
    fig, ax = plt.subplots(figsize=(7, 5))
    peak_f = args.peak_gflops * 1e9
    peak_b = args.peak_gbs * 1e9
    points = 0
    for path in args.files:
        for k in kernels(path):
            peak_f = peak_f or k["ceiling_flops_per_second"]
            peak_b = peak_b or k["ceiling_bytes_per_second"]
            label = f"{path}: {k['name']}"
            if k["flops"] > 0 and k["bytes"] > 0:  # GPU rows (gpu_*) as squares, CPU rows as circles
                marker = "s" if k["name"].startswith("gpu_") else "o"
                ax.loglog(k["arithmetic_intensity"], k["achieved_flops_per_second"], marker, label=label)
                points += 1
            elif k["bytes"] > 0:
                print(f"{label}: {k['achieved_bytes_per_second'] / 1e9:.3g} GB/s, FLOPs not counted")
    if points == 0:
        print("no kernel with counted FLOPs and bytes in", " ".join(args.files), file=sys.stderr)
        return 1
    ai = np.logspace(-2, 3, 200)
    if peak_f > 0 and peak_b > 0:
        ax.loglog(ai, np.minimum(peak_f, ai * peak_b), "k-", lw=1, label="measured ceilings")
    elif peak_f > 0:
        ax.axhline(peak_f, color="k", lw=1, label="FLOP/s ceiling")
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("achieved FLOP/s")
    ax.set_title("ensemblefit model work on the roofline")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print("written:", args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())

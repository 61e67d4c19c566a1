#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""An independent reader of LHAPDF 6 lhagrid1 sets (no LHAPDF library): reads NAME.info and
NAME_0000.dat, interpolates x f log-bicubically (splines in ln x and ln Q^2 per subgrid) and
compares with the `mean` column of an `ensemblefit pdf` CSV (member 0 is the replica mean).

usage: lhapdf_check.py DIR/NAME PDF.csv [TOL]     exit 0 when every value above 1e-6 agrees to TOL

It also checks the .info against the LHAPDF 6 format and the grid: Particle 2212 (a proton set),
NumMembers = the .dat files, QMin and QMax = the grid's ends, NumFlavors = 3 + the quark masses
below QMax in a variable-flavour set, AlphaS_Qs and AlphaS_Vals one per Q knot, and no subgrid
narrower in ln Q than the widest knot spacing of the others.
"""
import csv
import math
import os
import sys

import numpy as np
import yaml
from scipy.interpolate import RectBivariateSpline

# dis_pdf_names() order -> PDG id (g, u, ubar, d, dbar, s, c, b)
PID_OF = {0: 21, 1: 2, 2: -2, 3: 1, 4: -1, 5: 3, 6: 4, 7: 5}


def read_member(path):
    with open(path) as f:
        text = f.read()
    parts = text.split("---")
    blocks = []
    for part in parts[1:]:
        lines = [l for l in part.strip().split("\n") if l.strip()]
        if len(lines) < 4:
            continue
        xs = np.array([float(v) for v in lines[0].split()])
        qs = np.array([float(v) for v in lines[1].split()])
        pids = [int(v) for v in lines[2].split()]
        vals = np.array([[float(v) for v in l.split()] for l in lines[3:]])
        assert vals.shape == (len(xs) * len(qs), len(pids)), vals.shape
        grid = vals.reshape(len(xs), len(qs), len(pids))  # x outer, Q inner
        blocks.append((xs, qs, pids, grid))
    return blocks


def xf(blocks, pid, x, q2):
    q = math.sqrt(q2)
    for xs, qs, pids, grid in blocks:
        if qs[0] <= q <= qs[-1]:
            spline = RectBivariateSpline(np.log(xs), np.log(qs ** 2), grid[:, :, pids.index(pid)], kx=3, ky=3)
            return float(spline(math.log(x), math.log(q2))[0, 0])
    raise ValueError("Q = %g outside the grid" % q)


def check_info(target, name, blocks):
    """Problems with the .info, as a list of strings (empty: none)."""
    info = yaml.safe_load(open(os.path.join(target, name + ".info")))
    bad = []
    members = len([f for f in os.listdir(target) if f.startswith(name + "_") and f.endswith(".dat")])
    if info.get("Particle") != 2212:
        bad.append("Particle is %r, not 2212" % info.get("Particle"))
    if info.get("Format") != "lhagrid1":
        bad.append("Format is not lhagrid1")
    if info.get("NumMembers") != members:
        bad.append("NumMembers %r, %d .dat files" % (info.get("NumMembers"), members))
    knots = [q for _, qs, _, _ in blocks for q in qs]
    if abs(info["QMin"] - knots[0]) > 1e-9 * knots[0] or abs(info["QMax"] - knots[-1]) > 1e-9 * knots[-1]:
        bad.append("QMin/QMax %r/%r, grid %r..%r" % (info["QMin"], info["QMax"], knots[0], knots[-1]))
    if info.get("FlavorScheme") == "variable":
        masses = [info[k] for k in ("MCharm", "MBottom", "MTop") if k in info]
        want = 3 + sum(1 for m in masses if m < info["QMax"])
        if info.get("NumFlavors") != want:
            bad.append("NumFlavors %r, the masses below QMax give %d" % (info.get("NumFlavors"), want))
    if len(info.get("AlphaS_Qs", [])) != len(knots) or len(info.get("AlphaS_Vals", [])) != len(knots):
        bad.append("AlphaS_Qs/AlphaS_Vals not one per Q knot")
    if "SetIndex" in info and not (isinstance(info["SetIndex"], int) and info["SetIndex"] > 0):
        bad.append("SetIndex %r is not a positive integer" % info["SetIndex"])
    widths = [math.log(qs[-1] / qs[0]) for _, qs, _, _ in blocks]
    for i, (_, qs, _, _) in enumerate(blocks):
        others = [max(np.diff(np.log(q))) for j, (_, q, _, _) in enumerate(blocks) if j != i]
        if others and widths[i] < max(others) * (1 - 1e-9):
            bad.append("subgrid %d spans %.3g in ln Q, less than the knot spacing %.3g of another" % (i, widths[i], max(others)))
    return bad


def main():
    target, csv_path = sys.argv[1], sys.argv[2]
    tol = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-3
    name = os.path.basename(target)
    info = open(os.path.join(target, name + ".info")).read()
    assert "Format: lhagrid1" in info and "NumMembers:" in info, "bad .info"
    blocks = read_member(os.path.join(target, name + "_0000.dat"))
    problems = check_info(target, name, blocks)
    for p in problems:
        print("lhapdf_check: %s.info: %s" % (name, p))
    worst, checked = 0.0, 0
    with open(csv_path) as f:
        for row in csv.DictReader(f):
            n = int(float(row["pdf"]))
            if n not in PID_OF:
                continue
            want = float(row["mean"])
            got = xf(blocks, PID_OF[n], float(row["x"]), float(row["Q2"]))
            if abs(want) > 1e-6:
                worst = max(worst, abs(got - want) / abs(want))
                checked += 1
    print("lhapdf_check: %d values, worst relative deviation %.2e" % (checked, worst))
    return 0 if checked > 0 and worst < tol and not problems else 1


if __name__ == "__main__":
    sys.exit(main())

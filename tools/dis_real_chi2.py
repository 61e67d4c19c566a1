#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""chi2 per data set of a dis-mellin fit to NNPDF commondata ([data] commondata), computed
independently of ensemblefit's reader: the YAML read with PyYAML, the cuts and covariance
rebuilt here, the central fit's F2 from `ensemblefit predict`.

    tools/dis_real_chi2.py RESULT.h5 [ENSEMBLEFIT]

C = diag(UNCORR sources^2) + sum_k b_k b_k^T, b_k = a CORR source of one set or a named type
shared across sets; MULT sources scaled to t0 = the central fit's prediction (ensemblefit uses
the model at the start values: equal after the t0 iteration docs/models.md describes, so the
total printed here and the fit's own chi2 agree to that iteration's convergence). chi2 of a set
uses its own block of C (as NNPDF reports chi2 per data set); the total uses the whole C.
"""
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np
import yaml

res = sys.argv[1]
exe = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "build", "ensemblefit")
with h5py.File(res, "r") as f:
    config = f.attrs["config"].decode()
    chi2_fit = float(f["/central/chi2"][0])
keys = {}
for line in config.splitlines():
    if line.startswith("[") and line != "[data]":
        break
    if " = " in line and not line.startswith("#"):
        k, v = line.split(" = ", 1)
        keys[k] = v
folder, sets = keys["commondata"], keys["sets"].split(",")
q2min, w2min, xmin, xmax = (float(keys[k]) for k in ("q2_min", "w2_min", "x_min", "x_max"))


def load(path):
    with open(path) as fh:
        return yaml.safe_load(fh)


rows = []  # (set index, x, Q2, target, F2, [(column, value, mult)], uncorr variance)
for d, name in enumerate(sets):
    base = os.path.join(folder, name)
    meta = load(os.path.join(base, "metadata.yaml"))
    obs = [o for o in meta["implemented_observables"] if os.path.exists(os.path.join(base, o["data_central"]))][0]
    unc = obs.get("data_uncertainties") or obs["variants"]["legacy"]["data_uncertainties"]
    central = load(os.path.join(base, obs["data_central"]))["data_central"]
    kin = load(os.path.join(base, obs["kinematics"]["file"]))["bins"]
    srcs = []
    for u in unc:
        doc = load(os.path.join(base, u))
        srcs.append((doc["definitions"], doc["bins"]))
    target = 1 if name.endswith("_P") else 3
    for i, (c, b) in enumerate(zip(central, kin)):
        x, q2 = b["x"]["mid"], b["Q2"]["mid"]
        if not (q2 > q2min and q2 * (1 - x) / x > w2min and xmin <= x <= xmax):
            continue
        var, corr = 0.0, []
        for defs, bins in srcs:
            for s, dfn in defs.items():
                v = bins[i][s]
                if dfn["type"] == "UNCORR":
                    var += v * v
                else:
                    col = f"{name}/{s}" if dfn["type"] == "CORR" else dfn["type"]
                    corr.append((col, v / c if dfn["treatment"] == "MULT" else v, dfn["treatment"] == "MULT"))
        rows.append((d, x, q2, target, c, corr, var))

with tempfile.TemporaryDirectory() as tmp:
    pts = os.path.join(tmp, "points.csv")
    with open(pts, "w") as fh:
        fh.write("x,Q2,target\n" + "".join(f"{r[1]!r},{r[2]!r},{r[3]}\n" for r in rows))
    out = os.path.join(tmp, "pred.csv")
    subprocess.run([exe, "predict", res, "--at", pts, "-o", out], check=True, stdout=subprocess.DEVNULL)
    pred = np.genfromtxt(out, delimiter=",", names=True)["central"]

cols = sorted({c for r in rows for c, _, _ in r[5]})
n, K = len(rows), len(cols)
B = np.zeros((n, K))
for i, r in enumerate(rows):
    for c, v, mult in r[5]:
        B[i, cols.index(c)] = v * pred[i] if mult else v
C = np.diag([r[6] for r in rows]) + B @ B.T
resid = np.array([r[4] for r in rows]) - pred
ds = np.array([r[0] for r in rows])
print(f"{'data set':24s} {'N':>5s} {'chi2':>9s} {'chi2/N':>7s}")
for d, name in enumerate(sets):
    m = ds == d
    rs = resid[m]
    c2 = float(rs @ np.linalg.solve(C[np.ix_(m, m)], rs))
    print(f"{name:24s} {m.sum():5d} {c2:9.1f} {c2 / m.sum():7.3f}")
tot = float(resid @ np.linalg.solve(C, resid))
print(f"{'total (full C)':24s} {n:5d} {tot:9.1f} {tot / n:7.3f}   (the fit's own chi2: {chi2_fit:.1f})")

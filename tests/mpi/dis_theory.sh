#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue 37, theory side: the resolved config stored in a result file runs again (with
# [normalisation.NAME] sections); a dis-mellin point below Q0^2 is refused with one line naming
# the file and its 1-based row; `pdf CONFIG` takes --section.key overrides; `export lhapdf`
# writes an LHAPDF 6 .info checked by an independent parser (tests/tools/lhapdf_check.py);
# /quality (chi2 per data set, nuisance shifts and pulls, replicas' chi2) against numpy, and
# through shards and `merge` bitwise the single run's; a parameter on its bound flagged by
# `summary`; [lhapdf] set_index in the config, --set-index over it, junk refused.
source "$(dirname "$0")/../tools/mpi_common.sh"

# --- the stored config runs again -------------------------------------------------------------
/usr/bin/python3 - <<'PY'
import math
rows = ["x,y,s,tilt,set"]
for i in range(30):
    x = i / 29
    rows.append(f"{x},{1 + 2 * x + 0.05 * math.sin(7 * i)},0.05,{0.04 * (x - 0.5)},{1 if i < 15 else 2}")
open("corr.csv", "w").write("\n".join(rows) + "\n")
PY
cat > corr.ini <<'INI'
[data]
file = corr.csv
x = x
y = y
sigma = s
systematics = tilt
dataset = set

[normalisation.1]
sigma = 0.05

[normalisation.2]
sigma = 0.03

[model]
name = formula
formula = a + b*x

[param.a]
start = 1

[param.b]
start = 2

[fit]
replicas = 4
seed = 9

[lhapdf]
set_index = 7
INI
run_np 2 fit corr.ini --output.file first.h5 --fit.chunk 2 > first.log  # 2 ranks: /quality from rank 0
/usr/bin/python3 -c "
import h5py
c = h5py.File('first.h5', 'r').attrs['config']
open('again.ini', 'w').write(c.decode() if isinstance(c, bytes) else c)"
grep -q "^\[normalisation.2\]" again.ini || fail "the stored config has no normalisation section"
grep -A1 "^\[lhapdf\]" again.ini | grep -q "^set_index = 7$" || fail "the stored config has no [lhapdf] set_index"
run_np 1 fit again.ini --output.file second.h5 > second.log 2>&1 || { cat second.log; fail "the stored config does not run"; }
$H5CHECK equal first.h5 second.h5 /central /replicas || fail "the stored config fits differently"
ok "the resolved config stored in a result file runs again, to the same bits"

# --- fit quality: chi2 per data set, nuisance shifts and pulls, replicas' chi2 -------------------
# checked against an independent dense calculation (numpy) from the CSV and the stored parameters
/usr/bin/python3 - <<'PY' || fail "/quality differs from the independent calculation"
import h5py, numpy as np
d = np.genfromtxt("corr.csv", delimiter=",", names=True)
x, y, s, tilt, ds = d["x"], d["y"], d["s"], d["tilt"], d["set"]
t0 = 1 + 2 * x                                   # the model at the start values (t0)
B = np.stack([tilt, 0.05 * t0 * (ds == 1), 0.03 * t0 * (ds == 2)], axis=1)
C = np.diag(s * s) + B @ B.T
Ci = np.linalg.inv(C)
f = h5py.File("first.h5", "r")
q = f["quality"]
a, b = f["central/params"][:]
r = y - (a + b * x)
def close(u, v, what, tol=1e-9):
    u, v = np.atleast_1d(u), np.atleast_1d(v)
    if not np.allclose(u, v, rtol=tol, atol=tol):
        raise SystemExit(f"{what}: {u} != {v}")
chi2 = r @ Ci @ r
close(q.attrs["chi2"], chi2, "total chi2")
close(f["central/chi2"][0], chi2, "the central fit's own chi2")
assert q.attrs["n"] == 30
names = [n.decode() if isinstance(n, bytes) else n for n in q["dataset_chi2"].attrs["names"]]
assert names == ["dataset 1", "dataset 2"], names
for k, v in enumerate([1, 2]):
    m = ds == v
    close(q["dataset_chi2"][k], r[m] @ np.linalg.inv(C[np.ix_(m, m)]) @ r[m], f"chi2 of dataset {v}")
    assert q["dataset_n"][k] == m.sum()
lam = B.T @ Ci @ r
wtw = np.diag(B.T @ Ci @ B)
close(q["shift"][:], lam, "shifts")
close(q["shift_error"][:], np.sqrt(1 - wtw), "shift errors")
close(q["pull"][:], lam / np.sqrt(wtw), "pulls")
src = [n.decode() if isinstance(n, bytes) else n for n in q["shift"].attrs["names"]]
assert src == ["tilt", "normalisation.1", "normalisation.2"], src
P = f["replicas/params"][:]
st = f["replicas/status"][:]
close(q["replica_index"][:], f["replicas/index"][:], "replica rows")
for k in range(len(P)):
    rr = y - (P[k, 0] + P[k, 1] * x)
    if st[k] in (0, 1):
        close(q["replica_chi2"][k], rr @ Ci @ rr, f"replica {k + 1} chi2")
PY
# the same with a full covariance file (the dense factor): C = Cfile + B B^T
/usr/bin/python3 - <<'PY'
import h5py, numpy as np
x = np.linspace(0, 1, 30)
Cf = np.diag(np.full(30, 0.05 ** 2)) + 0.0004 * np.exp(-np.abs(x[:, None] - x[None, :]) / 0.2)
h5py.File("cov.h5", "w")["C"] = Cf
PY
run_np 1 fit corr.ini --data.covariance cov.h5:/C --output.file dense.h5 > dense.log
/usr/bin/python3 - <<'PY' || fail "/quality with a covariance file differs from numpy"
import h5py, numpy as np
d = np.genfromtxt("corr.csv", delimiter=",", names=True)
x, y, tilt, ds = d["x"], d["y"], d["tilt"], d["set"]
t0 = 1 + 2 * x
B = np.stack([tilt, 0.05 * t0 * (ds == 1), 0.03 * t0 * (ds == 2)], axis=1)
C = h5py.File("cov.h5", "r")["C"][:] + B @ B.T
f = h5py.File("dense.h5", "r")
q = f["quality"]
a, b = f["central/params"][:]
r = y - (a + b * x)
assert np.isclose(q.attrs["chi2"], r @ np.linalg.solve(C, r), rtol=1e-9)
for k, v in enumerate([1, 2]):
    m = ds == v
    assert np.isclose(q["dataset_chi2"][k], r[m] @ np.linalg.solve(C[np.ix_(m, m)], r[m]), rtol=1e-9), k
assert np.allclose(q["shift"][:], B.T @ np.linalg.solve(C, r), rtol=1e-9, atol=1e-12)
assert np.allclose(q["shift_error"][:], np.sqrt(1 - np.diag(B.T @ np.linalg.solve(C, B))), rtol=1e-9)
PY
"$EF" summary first.h5 > first.txt
grep -Eq "^  dataset 2 +15 " first.txt || { cat first.txt; fail "summary: no chi2 line for dataset 2"; }
grep -Eq "^  normalisation.1 " first.txt || fail "summary: no shift line for normalisation.1"
grep -q "replicas' chi2 against the central data (4)" first.txt || fail "summary: no replicas' chi2"
"$EF" summary first.h5 --format json > first.json
/usr/bin/python3 - <<'PY' || fail "summary --json: /quality not as the file holds it"
import json, h5py, numpy as np
j, q = json.load(open("first.json"))["quality"], h5py.File("first.h5", "r")["quality"]
assert j["chi2"] == q.attrs["chi2"] and j["n"] == 30, j
assert j["datasets"] == ["dataset 1", "dataset 2"] and j["dataset_n"] == [15, 15], j
assert np.array_equal(j["pull"], q["pull"][:]) and j["sources"][0] == "tilt", j
PY
# a file from before /quality: summary still works, and prints no quality
cp first.h5 old.h5
/usr/bin/python3 -c "import h5py; del h5py.File('old.h5', 'r+')['quality']"
"$EF" summary old.h5 > old.txt || fail "summary of a file without /quality"
grep -q "fit quality" old.txt && fail "summary: a quality section for a file without /quality"
grep -q "^  a " old.txt || fail "summary of a file without /quality lost the parameters"
ok "fit quality (chi2 per data set, shifts and pulls, replicas' chi2; structured and dense factor) matches numpy"

# --- merge carries /quality: the central shard's part, every shard's replicas' chi2 ------------
run_np 1 fit corr.ini --shard 0/3 --output.file q0.h5 > q0.log
run_np 2 fit corr.ini --shard 1/3 --output.file q1.h5 > q1.log
run_np 1 fit corr.ini --shard 2/3 --output.file q2.h5 > q2.log
"$EF" merge -o qm.h5 q2.h5 q0.h5 q1.h5 > qm.log
$H5CHECK equal-attrs first.h5 qm.h5 /quality || fail "merged /quality differs from the single run's"
"$EF" summary qm.h5 | grep -q "replicas' chi2 against the central data (4)" || fail "summary of the merged file: no replicas' chi2"
# a shard from before shards wrote their replicas' chi2: the central part alone, said once
cp q1.h5 q1old.h5
/usr/bin/python3 -c "import h5py; del h5py.File('q1old.h5', 'r+')['quality']"
"$EF" merge -o qold.h5 q0.h5 q1old.h5 q2.h5 > qold.log 2> qold.err
grep -q "q1old.h5 holds no replicas' chi2" qold.err || fail "merge: no note for a shard without replicas' chi2"
$H5CHECK equal qold.h5 first.h5 /quality/dataset_chi2 /quality/shift /quality/pull || fail "merge: central part not carried"
/usr/bin/python3 -c "import h5py, sys; sys.exit('replica_chi2' in h5py.File('qold.h5', 'r')['quality'])" ||
    fail "merge: a partial replicas' chi2 in the merged file"
# a shard whose /quality rows are not its replicas: refused, exit 3, naming it
cp q1.h5 q1bad.h5
/usr/bin/python3 -c "import h5py; h5py.File('q1bad.h5', 'r+')['quality/replica_index'][0] = 1"
expect_error 3 "q1bad.h5: /quality/replica_index and replica_chi2 do not match its replicas" -- "$EF" merge -o qbad.h5 q0.h5 q1bad.h5 q2.h5
[ ! -e qbad.h5 ] || fail "a refused merge left its output"
ok "merge: /quality bitwise the single run's (3 shards on 1 and 2 ranks); an older shard, a changed one"

# --- a parameter that ends on its bound is flagged -------------------------------------------
run_np 1 fit corr.ini --param.b.upper 1.5 --param.b.start 1.4 --output.file bound.h5 > bound.log
"$EF" summary bound.h5 > bound.txt
grep -Eq "^  b .*1\.5 .*\* at its upper bound$" bound.txt || { cat bound.txt; fail "summary: b on its upper bound not flagged"; }
grep -Eq "^  a .*bound" bound.txt && fail "summary: a flagged though inside its bounds"
grep -q "one-sided at the" bound.txt || fail "summary: no note on what the bound's +-fit means"
"$EF" summary first.h5 | grep -q "bound" && fail "summary: a bound flagged in a fit inside its bounds"
ok "summary flags a parameter that ended on its bound and says what its +-fit means"

# --- Q^2 below Q0^2 refused, rows numbered from 1 -----------------------------------------------
"$EF" simulate dis --truth "$SRC/inputs/dis-mellin-nlo.ini" --out low.h5 --points 40 --seed 5 > sim.log
/usr/bin/python3 - <<'PY'
import h5py
with h5py.File("low.h5", "r+") as f:
    q2 = f["Q2"][:]
    q2[4] = 1.5  # Q0 = sqrt(2) GeV in dis-mellin-nlo.ini: Q0^2 = 2 GeV^2
    f["Q2"][...] = q2
PY
sed -e 's/^file = dis-mellin-nlo.h5/file = low.h5/' "$SRC/inputs/dis-mellin-nlo.ini" > low.ini
expect_error 3 "low.h5: data row 5: Q2 = 1\.5 GeV\^2 is below Q0\^2 = 2 GeV" -- run_np 1 fit low.ini --output.file never.h5
[ ! -e never.h5 ] || fail "a refused fit left an output"
ok "a point below Q0^2 is refused with the file and its 1-based row"

# --- pdf CONFIG --section.key -------------------------------------------------------------------
"$EF" pdf "$SRC/inputs/lh-toy.ini" --q2 100 --x 0.1 -o nlo.csv 2> /dev/null
"$EF" pdf "$SRC/inputs/lh-toy.ini" --q2 100 --x 0.1 --model.order LO -o lo.csv 2> /dev/null
"$EF" pdf "$SRC/inputs/lh-toy.ini" --q2 100 --x 0.1 --model.order=NLO -o nlo2.csv 2> /dev/null
cmp -s nlo.csv nlo2.csv || fail "pdf: --model.order=NLO changed an NLO config's values"
cmp -s nlo.csv lo.csv && fail "pdf: --model.order LO changed nothing"
expect_error 2 "model.order" -- "$EF" pdf "$SRC/inputs/lh-toy.ini" --q2 100 --x 0.1 --model.order NNLO
expect_error 2 "overrides apply to a CONFIG.ini" -- "$EF" pdf first.h5 --q2 100 --x 0.1 --model.order LO
ok "pdf CONFIG takes --section.key overrides"

# --- export lhapdf: the .info of LHAPDF 6 --------------------------------------------------------
"$EF" simulate dis --truth "$SRC/inputs/dis-mellin-nlo.ini" --out ok.h5 --points 120 --seed 6 > sim2.log
sed -e 's/^file = dis-mellin-nlo.h5/file = ok.h5/' "$SRC/inputs/dis-mellin-nlo.ini" > ok.ini
# two data sets and a systematic column, for the fit quality checked below
/usr/bin/python3 - <<'PY'
import h5py, numpy as np
with h5py.File("ok.h5", "r+") as f:
    n = len(f["x"])
    f["set"] = np.where(np.arange(n) < n // 2, 1.0, 2.0)
    f["sys"] = 0.02 * f["F2"][:] * np.where(np.arange(n) % 3 == 0, 1.0, -0.5)
PY
# no top (the config has mt = 175); charm 0.025 in ln Q above Q0 = sqrt(2) GeV, less than one knot spacing
run_np 1 fit ok.ini --fit.replicas 2 --model.mt 0 --model.mc 1.45 --data.systematics sys --data.dataset set \
    --lhapdf.set_index 92000 --output.file ok-fit.h5 > ok.log
grep -q "dis-mellin: NLO F2 of p/n" ok.log || fail "the run banner does not say NLO for an NLO fit"
"$EF" export lhapdf ok-fit.h5 -o lh/EFTEST 2> lh.log
info=lh/EFTEST/EFTEST.info
grep -q "^Particle: 2212$" $info || fail ".info: no Particle: 2212"
grep -q "^SetIndex: 92000$" $info || fail ".info: SetIndex not from the fit's [lhapdf] set_index"
grep -q "^QMax: 10000$" $info || fail ".info: QMax is not the default 1e4 GeV"
grep -q "^MTop" $info && fail ".info: MTop written for a set without top"
grep -q "^QMin: 1.45$" $info || fail ".info: a threshold within one knot spacing of Q0 does not start the grid"
"$EF" pdf ok-fit.h5 --q2 3.3,47.5,1234,5e7 --x 0.000123,0.0123,0.234,0.57 -o off.csv 2> /dev/null
/usr/bin/python3 "$SRC/tests/tools/lhapdf_check.py" lh/EFTEST off.csv 1e-3 || fail "LHAPDF set"
"$EF" export lhapdf ok-fit.h5 -o lh/ZERO --qmax 50 --set-index 0 2> /dev/null
grep -q "^SetIndex: 0$" lh/ZERO/ZERO.info || fail ".info: --set-index 0 (an ID) does not override the config's"
grep -q "^NumFlavors: 5$" lh/ZERO/ZERO.info || fail ".info: NumFlavors for QMax 50 GeV"
expect_error 2 "export lhapdf: --set-index: must be in 0\.\.99999999, got -3" -- "$EF" export lhapdf ok-fit.h5 -o lh/BAD --set-index -3
expect_error 2 "export lhapdf: --set-index: expected an integer, got '12ab'" -- "$EF" export lhapdf ok-fit.h5 -o lh/BAD --set-index 12ab
# [lhapdf] set_index junk: one line naming the key (and the file's line), exit 2, nothing written
# (one process without mpirun: a refused mpirun job takes 2.4 s to end, the config check 0.1 s)
expect_error 2 "^ensemblefit: error: --lhapdf.set_index: expected an integer, got '9x'" -- \
    "$EF" fit ok.ini --lhapdf.set_index 9x --output.file never.h5
printf '\n[lhapdf]\nset_index = 2.5\n' | cat ok.ini - > badidx.ini
line=$(grep -n "^set_index = 2.5" badidx.ini | cut -d: -f1)
expect_error 2 "badidx.ini:$line: lhapdf.set_index: expected an integer, got '2.5'" -- "$EF" fit badidx.ini --output.file never.h5
expect_error 2 "lhapdf.set_index: must be in 0\.\.99999999, got 100000000" -- \
    "$EF" fit ok.ini --lhapdf.set_index 100000000 --output.file never.h5
[ ! -e never.h5 ] || fail "a refused set_index left an output"
# a stored value that is not an ID: the file was changed (exit 3, naming the file and attribute)
cp ok-fit.h5 tampered.h5
/usr/bin/python3 -c "
import h5py
f = h5py.File('tampered.h5', 'r+')
c = f.attrs['config']
f.attrs['config'] = (c.decode() if isinstance(c, bytes) else c).replace('set_index = 92000', 'set_index = -5')"
expect_error 3 "tampered.h5: attribute config: lhapdf.set_index: must be in" -- "$EF" export lhapdf tampered.h5 -o lh/BAD
[ ! -e lh/BAD ] || fail "a refused export lhapdf left files"
ok "export lhapdf: an LHAPDF 6 .info (Particle, SetIndex from [lhapdf] set_index or --set-index, QMax, NumFlavors, no MTop), read back independently"
# --- fit quality on the whitened-table path (the NLO fit above: a systematic, two data sets) ---
"$EF" predict ok-fit.h5 --at ok.h5 -o pred.h5 > /dev/null
/usr/bin/python3 - <<'PY' || fail "/quality of a dis-mellin fit differs from the independent calculation"
import h5py, numpy as np
d, p, f = h5py.File("ok.h5", "r"), h5py.File("pred.h5", "r"), h5py.File("ok-fit.h5", "r")
r = d["F2"][:] - p["prediction/central"][:]
B = d["sys"][:][:, None]
C = np.diag(d["dF2"][:] ** 2) + B @ B.T
q = f["quality"]
chi2 = r @ np.linalg.solve(C, r)
assert np.isclose(q.attrs["chi2"], chi2, rtol=1e-8), (q.attrs["chi2"], chi2)
assert np.isclose(f["central/chi2"][0], chi2, rtol=1e-8), (f["central/chi2"][0], chi2)
ds = d["set"][:]
for k, v in enumerate([1.0, 2.0]):
    m = ds == v
    c = r[m] @ np.linalg.solve(C[np.ix_(m, m)], r[m])
    assert np.isclose(q["dataset_chi2"][k], c, rtol=1e-8), (k, q["dataset_chi2"][k], c)
lam = (B.T @ np.linalg.solve(C, r))[0]
assert np.isclose(q["shift"][0], lam, rtol=1e-8), (q["shift"][0], lam)
PY
ok "fit quality of a dis-mellin NLO fit with a systematic (whitened tables) matches numpy on predict's values"

echo "dis_theory: all checks passed"

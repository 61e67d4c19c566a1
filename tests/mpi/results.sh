#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# After the run: `summary` on a finished, a partial (killed: replicas with status -1) and a
# merged file, in its three formats, against the file's own datasets; correlations stored as the
# covariance normalised; [fit] error_scale = chi2 against NIST's certified standard deviations
# and through a merge; zero converged replicas in words; `predict` against a direct evaluation
# (formula model) and against the fit's own chi2 (dis-mellin), on 1 and 3 ranks; --help of every
# command prefix and of every model key.
source "$(dirname "$0")/../tools/mpi_common.sh"
cp "$SRC/inputs/example.ini" "$SRC/inputs/decay.csv" .
ARGS="--fit.replicas 30 --fit.chunk 4"
PY=/usr/bin/python3

# --- summary on a finished file ---------------------------------------------------------------
run_np 2 fit example.ini $ARGS --output.file full.h5 > full.log
grep -q "full.h5: one run, complete" full.log || { cat full.log; fail "the end-of-run table is the summary table"; }
"$EF" summary full.h5 > full.txt
grep -q "replicas: 30 in this file: 30 converged, 0 at max_iterations, 0 failed, 0 not done" full.txt ||
    { cat full.txt; fail "summary: replica counts"; }
grep -q "not scaled by chi2/ndf" full.txt || fail "summary does not say the errors are unscaled"
grep -q "strongest correlations (3 of 3 pairs" full.txt || { cat full.txt; fail "summary: correlations"; }
"$EF" summary full.h5 --correlations > corr.txt
grep -q "correlation matrix of the ensemble (30 converged replicas)" corr.txt || fail "--correlations: ensemble matrix"
grep -q "correlation matrix of the central fit" corr.txt || fail "--correlations: central matrix"
"$EF" summary full.h5 --format json > full.json
"$EF" summary full.h5 --format csv > full.csv
# JSON is valid and says what the file says, to the last bit (17 digits); CSV has one row per
# parameter; both correlation datasets are their covariance normalised.
$PY - <<'EOF' || fail "summary json/csv against the file"
import csv, json, h5py, numpy as np
d = json.load(open("full.json"))
f = h5py.File("full.h5", "r")
assert d["complete"] and d["replicas"]["converged"] == 30 and d["param_names"] == ["a", "k", "c"], d
assert np.array_equal(d["central"]["params"], f["/central/params"][()])
assert np.array_equal(d["ensemble"]["mean"], f["/summary/mean"][()])
assert np.array_equal(d["ensemble"]["std"], f["/summary/std"][()])
assert np.array_equal(d["ensemble"]["quantiles"]["16"], f["/summary/quantiles"][1])
assert np.array_equal(d["central"]["errors"], np.sqrt(np.diag(f["/central/covariance"][()])))
assert d["central"]["error_scale"] == "none" and d["central"]["ndf"] == 57
for cov, rho in (("/central/covariance", "/central/correlation"), ("/summary/covariance", "/summary/correlation")):
    c = f[cov][()]
    s = np.sqrt(np.diag(c))
    assert np.allclose(f[rho][()], c / np.outer(s, s), rtol=1e-14, atol=0), rho
    assert np.array_equal(np.diag(f[rho][()]), np.ones(3)), rho
rows = list(csv.DictReader(open("full.csv")))
assert [r["parameter"] for r in rows] == ["a", "k", "c"], rows
assert float(rows[1]["central"]) == f["/central/params"][1] and float(rows[2]["q84"]) == f["/summary/quantiles"][3][2]
print("summary json and csv match full.h5")
EOF
ok "summary of a finished file: table, --correlations, json and csv agree with the file"

# --- summary on a partial file: a run killed after some units (status -1 rows), then resumed --
cp full.h5 partial.h5
$PY -c "
import h5py
f = h5py.File('partial.h5', 'r+')
s = f['/replicas/status']; s[4:12] = -1      # replicas 5..12 not done, as a kill leaves them
" || fail "crafting a partial file"
"$EF" summary partial.h5 > partial.txt
grep -q "partial: 8 of 31 replica fits not done" partial.txt || { cat partial.txt; fail "summary: partial file"; }
grep -q "22 converged, 0 at max_iterations, 0 failed, 8 not done; statistics over the 22 converged" partial.txt ||
    { cat partial.txt; fail "summary: partial counts"; }
"$EF" summary partial.h5 --format json > partial.json
$PY - <<'EOF' || fail "partial summary statistics"
import json, h5py, numpy as np
d = json.load(open("partial.json"))
f = h5py.File("partial.h5", "r")
ok = f["/replicas/status"][()] == 0
p = f["/replicas/params"][()][ok]
assert not d["complete"] and d["pending_fits"] == 8
assert np.allclose(d["ensemble"]["mean"], p.mean(axis=0), rtol=1e-14, atol=0)
assert np.allclose(d["ensemble"]["std"], p.std(axis=0, ddof=1), rtol=1e-12, atol=0)
assert np.allclose(d["ensemble"]["quantiles"]["84"], np.quantile(p, 0.84, axis=0), rtol=1e-14, atol=0)
EOF
run_np 2 fit example.ini $ARGS --output.file partial.h5 --resume > resumed.log
grep -q "partial.h5: one run, complete" resumed.log || { cat resumed.log; fail "resumed run's table"; }
$H5CHECK equal full.h5 partial.h5 /central /replicas /summary || fail "resumed partial file differs"
ok "summary of a partial file: counts and statistics over the 22 converged; --resume completes it"

# --- summary on shards and on a merged file -----------------------------------------------------
for i in 0 1; do run_np 2 fit example.ini $ARGS --shard $i/2 --output.file s$i.h5 > s$i.log; done
"$EF" summary s1.h5 > s1.txt
grep -q "s1.h5: shard 1/2 (replicas 16..30), complete" s1.txt || { cat s1.txt; fail "summary of shard 1"; }
grep -q "central fit (replica 0): not in this file" s1.txt || fail "summary of shard 1: central"
"$EF" merge -o merged.h5 s1.h5 s0.h5 > merge.log
grep -q "merged.h5: merged from 2 shard file(s), complete" merge.log || { cat merge.log; fail "merge prints no summary"; }
grep -q "statistics over the 30 converged" merge.log || { cat merge.log; fail "merge summary statistics"; }
$H5CHECK equal full.h5 merged.h5 /central /replicas /summary || fail "merged differs from the single run"
"$EF" summary merged.h5 --format json > merged.json
$PY -c "
import json
a, b = json.load(open('full.json')), json.load(open('merged.json'))
assert a['central'] == b['central'] and a['ensemble'] == b['ensemble'], 'merged summary differs'
assert b['merged_from'] == ['s1.h5', 's0.h5']
" || fail "merged summary"
ok "summary of shards and of a merged file; merge ends with the merged file's summary"

# --- zero converged replicas: words, not nan --------------------------------------------------
run_np 2 fit example.ini $ARGS --fit.max_iterations 2 --output.file none.h5 > none.log
grep -q "no replica converged, so there are no ensemble statistics" none.log || { cat none.log; fail "end-of-run table, 0 converged"; }
"$EF" summary none.h5 > none.txt
"$EF" summary none.h5 --format csv > none.csv
"$EF" summary none.h5 --format json > none.json
grep -q "0 converged, 30 at max_iterations" none.txt || { cat none.txt; fail "summary, 0 converged"; }
if grep -qi "nan" none.log none.txt none.csv none.json; then fail "nan printed with zero converged replicas"; fi
$PY -c "import json; assert json.load(open('none.json'))['ensemble'] is None" || fail "json ensemble with 0 converged"
ok "zero converged replicas: the end-of-run table, summary table, csv and json say so without nan"

# --- error_scale = chi2: NIST MGH09 (the issue's +-1.73 against a certified 0.0114) -------------
cp "$SRC"/inputs/nist/MGH09.* .
run_np 1 fit MGH09.start2.ini --output.file mgh_none.h5 > mgh_none.log
run_np 2 fit MGH09.start2.ini --fit.error_scale chi2 --output.file mgh.h5 > mgh.log
grep -q "scaled: \[fit\] error_scale = chi2" mgh.log || { cat mgh.log; fail "the table does not say the errors are scaled"; }
"$EF" summary mgh.h5 --format json > mgh.json
$PY - "$SRC/inputs/nist/certified.csv" <<'EOF' || fail "MGH09 standard deviations"
import csv, json, sys, h5py, numpy as np
cert = [float(r["stddev"]) for r in csv.DictReader(open(sys.argv[1])) if r["problem"] == "MGH09"]
d = json.load(open("mgh.json"))
err = np.array(d["central"]["errors"])
assert d["central"]["error_scale"] == "chi2" and d["central"]["ndf"] == 7
assert np.all(np.abs(err / cert - 1) < 1e-3), (err, cert)
a, b = h5py.File("mgh_none.h5", "r"), h5py.File("mgh.h5", "r")
assert np.array_equal(a["/central/covariance"][()], b["/central/covariance_unscaled"][()])
assert np.array_equal(a["/central/correlation"][()], b["/central/correlation"][()])
assert a["/central/covariance"].attrs["error_scale"] in (b"none", "none")
print("MGH09 errors", err, "certified", cert)
EOF
run_np 1 fit MGH09.start2.ini --fit.error_scale chi2 --fit.replicas 6 --shard 0/2 --output.file m0.h5 > m0.log
run_np 1 fit MGH09.start2.ini --fit.error_scale chi2 --fit.replicas 6 --shard 1/2 --output.file m1.h5 > m1.log
run_np 1 fit MGH09.start2.ini --fit.error_scale chi2 --fit.replicas 6 --output.file m.h5 > m.log
"$EF" merge -o mm.h5 m0.h5 m1.h5 > mm.log
$H5CHECK equal m.h5 mm.h5 /central /replicas /summary || fail "error_scale = chi2: merged differs from the single run"
expect_error 2 "different config" -- "$EF" merge -o bad.h5 m0.h5 mgh_none.h5
expect_error 2 "fit.error_scale: unknown error scale 'both' \(allowed: none, chi2\)" -- \
    run_np 1 fit MGH09.start2.ini --fit.error_scale both --output.file bad.h5
ok "error_scale = chi2: MGH09's certified standard deviations, correlation unchanged, merge bitwise"

# --- summary errors -----------------------------------------------------------------------------
expect_error 2 "absent.h5: no such file" -- "$EF" summary absent.h5
expect_error 2 "decay.csv: not an HDF5 file" -- "$EF" summary decay.csv
expect_error 2 "unknown format 'xml'" -- "$EF" summary full.h5 --format xml

# --- predict: a formula model against a direct evaluation ---------------------------------------
cat > curve.ini <<'INI'
[data]
file = decay.csv
x = t
y = counts
sigma = sigma
[model]
name = formula
formula = a*exp(-k*t) + c + d*sin(t)
[param.a]
start = 10
[param.k]
start = 0.5
[param.c]
start = 1
[param.d]
start = 0
[fit]
replicas = 25
seed = 5
[output]
file = curve.h5
INI
run_np 2 fit curve.ini > curve.log
printf 't\n-0.5\n0\n0.25\n3\n7.5\n20\n' > at.csv
run_np 3 predict curve.h5 --at at.csv -o band3.csv --replicas 2> p3.log
run_np 1 predict curve.h5 --at at.csv -o band1.csv --replicas 2> p1.log
cmp -s band1.csv band3.csv || fail "predict: 3 ranks differ from 1"
grep -q "6 points: the central fit and 25 converged replicas of curve.h5" p3.log || { cat p3.log; fail "predict report"; }
"$EF" predict curve.h5 --at at.csv -o band.h5 2> ph5.log
$PY - <<'EOF' || fail "predict against the formula evaluated from the stored parameters"
import csv, h5py, numpy as np
f = h5py.File("curve.h5", "r")
t = np.array([-0.5, 0, 0.25, 3, 7.5, 20])
model = lambda p: p[0] * np.exp(-p[1] * t) + p[2] + p[3] * np.sin(t)
ok = f["/replicas/status"][()] == 0
reps = np.array([model(p) for p in f["/replicas/params"][()][ok]])
rows = list(csv.DictReader(open("band1.csv")))
col = lambda k: np.array([float(r[k]) for r in rows])
close = lambda a, b: np.allclose(a, b, rtol=1e-12, atol=1e-14)
assert close(col("central"), model(f["/central/params"][()]))
assert close(col("mean"), reps.mean(axis=0)) and close(col("std"), reps.std(axis=0, ddof=1))
for q, l in (("q2.5", 0.025), ("q16", 0.16), ("q50", 0.5), ("q84", 0.84), ("q97.5", 0.975)):
    assert close(col(q), np.quantile(reps, l, axis=0)), q
idx = f["/replicas/index"][()][ok]
assert all(close(col("r%d" % r), reps[k]) for k, r in enumerate(idx))
h = h5py.File("band.h5", "r")
assert np.array_equal(h["/t"][()], t) and np.array_equal(h["/prediction/central"][()], col("central"))
assert np.array_equal(h["/prediction/quantiles"][3], col("q84")) and "/prediction/replicas" not in h
print("predict matches numpy on", len(idx), "replicas")
EOF
expect_error 2 "band.h5' exists; pass --overwrite" -- "$EF" predict curve.h5 --at at.csv -o band.h5
printf 'time\n1\n' > wrong.csv
expect_error 3 "wrong.csv:1: no column 't'" -- run_np 2 predict curve.h5 --at wrong.csv -o bad.csv
expect_error 2 "--at POINTS.csv\|POINTS.h5 is required" -- "$EF" predict curve.h5
[ ! -e bad.csv ] || fail "a failing predict wrote its output"
ok "predict (formula): central, mean, std, quantiles and replicas equal numpy's; 1 rank = 3 ranks"

# --- predict: dis-mellin at its data points reproduces the central fit's chi2 ---------------------
"$EF" simulate dis --out small.h5 --points 300 --seed 4 --noise 0.03 > sim.log
sed -e 's/^file = dis-mellin-lo.h5/file = small.h5/' "$SRC/inputs/stats2.ini" > small.ini
run_np 2 fit small.ini --fit.replicas 4 --output.file dis.h5 > dis.log
run_np 2 predict dis.h5 --at small.h5 -o dis_band.h5 2> dpred.log
$PY - <<'EOF' || fail "dis-mellin predictions against the fit's own chi2"
import h5py, numpy as np
d, f, p = h5py.File("small.h5", "r"), h5py.File("dis.h5", "r"), h5py.File("dis_band.h5", "r")
central = p["/prediction/central"][()]
chi2 = np.sum(((central - d["F2"][()]) / d["dF2"][()]) ** 2)
want = f["/central/chi2"][0]
assert abs(chi2 / want - 1) < 1e-11, (chi2, want)
assert np.array_equal(p["/Q2"][()], d["Q2"][()]) and p["/prediction"].attrs["replicas_used"] == 4
print("dis-mellin chi2 from predictions", chi2, "fit", want)
EOF
expect_error 2 "small.h5: not an ensemblefit result file" -- "$EF" summary small.h5
expect_error 2 "small.h5: not an ensemblefit result file" -- "$EF" predict small.h5 --at small.h5
printf 'x,Q2,target\n0.01,10,1\n0.3,100,2\n' > kin.csv
"$EF" predict dis.h5 --at kin.csv > kin.out 2>/dev/null
[ "$(wc -l < kin.out)" = 3 ] || { cat kin.out; fail "predict to standard output"; }
ok "predict (dis-mellin): the central fit's chi2 from the predicted values at the data points"

# --- --help for command prefixes and every model key ----------------------------------------------
"$EF" simulate --help > sim_help.txt
grep -q "simulate dis" sim_help.txt && grep -q "simulate ptycho" sim_help.txt || fail "simulate --help"
"$EF" export --help | grep -q "export dis-table" || fail "export --help"
expect_error 2 "unknown command 'simulate nope'" -- "$EF" simulate nope
"$EF" fit --help > fit_help.txt
for key in error_scale q0 alphas_mz mc mb mz strange_fraction contour_c contour_phi_deg contour_nodes contour; do
    grep -Eq "^    $key " fit_help.txt || fail "fit --help does not list $key"
done
"$EF" summary --help | grep -q -- "--correlations" || fail "summary --help"
"$EF" predict --help | grep -q -- "--replicas" || fail "predict --help"
ok "--help: command prefixes list their sub-commands; fit --help lists every dis-mellin key"
echo "results: all checks passed"

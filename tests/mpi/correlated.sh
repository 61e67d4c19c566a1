#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Correlated systematics, normalisations and a full covariance, end to end: replicas that draw
# the correlated shifts are bitwise identical on 1 and 3 ranks (a formula model on the CPU qr
# path, dis-mellin on its table and Gram paths); bad inputs are one line, exit 2 or 3.
source "$(dirname "$0")/../tools/mpi_common.sh"

# A line with two systematics (one multiplicative) and two normalised datasets.
/usr/bin/python3 - <<'PY'
import math
rows = ["x,y,s,tilt,slope,set,bad"]
for i in range(40):
    x = i / 39
    y = 1 + 2 * x + 0.05 * math.sin(7 * i) + 0.03 * (x - 0.5)
    rows.append(f"{x},{y},0.05,{0.04 * (x - 0.5)},{0.02 * x},{1 if i < 20 else 2},{'nan' if i == 17 else 0.1}")
open("corr.csv", "w").write("\n".join(rows) + "\n")
PY
cat > corr.ini <<'INI'
[data]
file = corr.csv
x = x
y = y
sigma = s
systematics = tilt, slope:mult
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
replicas = 30
seed = 9

[output]
file = out.h5
INI
run_np 1 fit corr.ini --output.file one.h5 > one.log
run_np 3 fit corr.ini --output.file three.h5 --fit.chunk 4 > three.log
[ "$($H5CHECK status three.h5)" = "31 0" ] || fail "three.h5 incomplete"
$H5CHECK equal one.h5 three.h5 /central /replicas /summary || fail "correlated formula fit: 1 and 3 ranks differ"
ok "correlated systematics (formula, qr path): 1 and 3 ranks bitwise equal"
grep -v "^systematics" corr.ini > nosys.ini
run_np 1 fit nosys.ini --output.file plain.h5 > plain.log 2>&1 || fail "without systematics (normalisations only)"
$H5CHECK equal one.h5 plain.h5 /central > /dev/null 2>&1 && fail "the systematics changed nothing"
ok "systematics change the central fit"

# dis-mellin: pseudo-data with 3 systematics and 2 normalised datasets; table and Gram paths.
"$EF" simulate dis --out dsys.h5 --points 300 --seed 4 --syst 3 --datasets 2 --norm-sigma 0.02 > sim.log
grep -q "3 systematic(s)" sim.log || fail "simulate dis with systematics"
grep -v -E "^(systematics|dataset|order) =" "$SRC/inputs/dis-mellin.ini" |
    sed -e 's/^file = dis-mellin.h5/file = dsys.h5/' -e '/^sigma = dF2/a systematics = sys1, sys2:mult, sys3\ndataset = dataset' |
    awk '/^\[normalisation/ {skip = 1} /^\[/ && !/^\[normalisation/ {skip = 0} !skip' > dsys.ini
printf '[normalisation.1]\nsigma = 0.02\n[normalisation.2]\nsigma = 0.03\n' >> dsys.ini
grep -q "^systematics = sys1" dsys.ini || fail "dsys.ini has no systematics"
for solver in qr normal; do
    run_np 1 fit dsys.ini --fit.replicas 5 --fit.solver $solver --output.file d1.h5 --overwrite > d1.log
    run_np 3 fit dsys.ini --fit.replicas 5 --fit.solver $solver --output.file d3.h5 --overwrite > d3.log
    [ "$($H5CHECK status d3.h5)" = "6 0" ] || fail "dis-mellin $solver: d3.h5 incomplete"
    $H5CHECK equal d1.h5 d3.h5 /central /replicas /summary || fail "dis-mellin $solver: 1 and 3 ranks differ"
    ok "correlated dis-mellin ($solver): 1 and 3 ranks bitwise equal"
done

# A full covariance from a file (not positive definite: the pivot is named).
/usr/bin/python3 - <<'PY'
import h5py, numpy as np
n = 40
x = np.arange(n) / 39
C = np.diag(np.full(n, 0.05 ** 2)) + 0.02 ** 2 * np.outer(1 + 2 * x, 1 + 2 * x)
bad = C.copy(); bad[5, 5] = -1.0
with h5py.File("cov.h5", "w") as f:
    f["C"] = C
    f["bad"] = bad
    f["short"] = C[:10, :10]
PY
run_np 3 fit corr.ini --data.covariance cov.h5:/C --output.file cov3.h5 > cov3.log
run_np 1 fit corr.ini --data.covariance cov.h5:/C --output.file cov1.h5 > cov1.log
$H5CHECK equal cov1.h5 cov3.h5 /central /replicas /summary || fail "covariance file: 1 and 3 ranks differ"
ok "full covariance: 1 and 3 ranks bitwise equal"

expect_error 3 "not positive definite: Cholesky pivot 6" -- run_np 2 fit corr.ini --data.covariance cov.h5:/bad --output.file bad.h5
expect_error 3 "must be 40 x 40" -- "$EF" fit corr.ini --data.covariance cov.h5:/short --output.file bad.h5
expect_error 3 "row 18: systematic column 'bad': NaN" -- run_np 2 fit corr.ini --data.systematics tilt,bad --output.file bad.h5
expect_error 3 "no column 'nosuch'" -- "$EF" fit corr.ini --data.systematics nosuch --output.file bad.h5
expect_error 2 "normalisation.1.sigma.*positive" -- "$EF" fit corr.ini --normalisation.1.sigma 0 --output.file bad.h5
expect_error 2 "normalisation.2.sigma.*positive" -- "$EF" fit corr.ini --normalisation.2.sigma -0.1 --output.file bad.h5
grep -v "^dataset" corr.ini > noset.ini
expect_error 2 "needs \[data\] dataset" -- "$EF" fit noset.ini --output.file bad.h5
sed -e 's/^\[normalisation.2\]/[normalisation.7]/' corr.ini > seven.ini
expect_error 3 "normalisation.7.*no row .* has dataset 7" -- run_np 2 fit seven.ini --output.file bad.h5
expect_error 2 "bootstrap with correlated" -- "$EF" fit corr.ini --fit.resample bootstrap --output.file bad.h5
expect_error 2 "solver = normal .* cannot whiten" -- "$EF" fit corr.ini --fit.solver normal --output.file bad.h5
expect_error 2 "not NAME, NAME:add or NAME:mult" -- "$EF" fit corr.ini --data.systematics tilt:times --output.file bad.h5
[ ! -e bad.h5 ] || fail "a refused run wrote bad.h5"
echo "correlated: all checks passed"

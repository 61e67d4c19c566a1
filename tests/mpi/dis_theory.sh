#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue 37, theory side: the resolved config stored in a result file runs again (with
# [normalisation.NAME] sections); a dis-mellin point below Q0^2 is refused with one line naming
# the file and its 1-based row; `pdf CONFIG` takes --section.key overrides; `export lhapdf`
# writes an LHAPDF 6 .info checked by an independent parser (tests/tools/lhapdf_check.py).
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
INI
run_np 1 fit corr.ini --output.file first.h5 --fit.chunk 2 > first.log
/usr/bin/python3 -c "import h5py; open('again.ini', 'w').write(h5py.File('first.h5', 'r').attrs['config'])"
grep -q "^\[normalisation.2\]" again.ini || fail "the stored config has no normalisation section"
run_np 1 fit again.ini --output.file second.h5 > second.log 2>&1 || { cat second.log; fail "the stored config does not run"; }
$H5CHECK equal first.h5 second.h5 /central /replicas || fail "the stored config fits differently"
ok "the resolved config stored in a result file runs again, to the same bits"

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
expect_error 3 "low.h5: data row 5: Q2 = 1.5 GeV^2 is below Q0^2 = 2" -- run_np 1 fit low.ini --output.file never.h5
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
# no top (the config has mt = 175); charm 0.025 in ln Q above Q0 = sqrt(2) GeV, less than one knot spacing
run_np 1 fit ok.ini --fit.replicas 2 --model.mt 0 --model.mc 1.45 --output.file ok-fit.h5 > ok.log
"$EF" export lhapdf ok-fit.h5 -o lh/EFTEST --set-index 91000 2> lh.log
info=lh/EFTEST/EFTEST.info
grep -q "^Particle: 2212$" $info || fail ".info: no Particle: 2212"
grep -q "^SetIndex: 91000$" $info || fail ".info: SetIndex not from --set-index"
grep -q "^QMax: 10000$" $info || fail ".info: QMax is not the default 1e4 GeV"
grep -q "^MTop" $info && fail ".info: MTop written for a set without top"
grep -q "^QMin: 1.45$" $info || fail ".info: a threshold within one knot spacing of Q0 does not start the grid"
"$EF" pdf ok-fit.h5 --q2 3.3,47.5,1234,5e7 --x 0.000123,0.0123,0.234,0.57 -o off.csv 2> /dev/null
/usr/bin/python3 "$SRC/tests/tools/lhapdf_check.py" lh/EFTEST off.csv 1e-3 || fail "LHAPDF set"
"$EF" export lhapdf ok-fit.h5 -o lh/NOINDEX --qmax 50 2> /dev/null
grep -q "^SetIndex" lh/NOINDEX/NOINDEX.info && fail ".info: SetIndex without --set-index"
grep -q "^NumFlavors: 5$" lh/NOINDEX/NOINDEX.info || fail ".info: NumFlavors for QMax 50 GeV"
expect_error 2 "set-index" -- "$EF" export lhapdf ok-fit.h5 -o lh/BAD --set-index -3
ok "export lhapdf: an LHAPDF 6 .info (Particle, SetIndex, QMax, NumFlavors, no MTop), read back independently"
echo "dis_theory: all checks passed"

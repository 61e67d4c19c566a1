#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# NNPDF commondata through the program, on files from an independent writer
# (tests/tools/commondata_writer.py): the good sets give bitwise the fit of the same data laid
# out by hand for the generic correlated path (CSV, systematics, dataset), so cuts, UNCORR in
# quadrature, CORR per set, shared types across sets and MULT relative to t0 are what the reader
# makes of them; each malformed set is one error line naming file, line and key, exit 2 or 3,
# with no output file left. Then a small real-data subset (inputs/dis-real) fitted at NLO on 1
# and 2 ranks and as two merged shards: bitwise equal, /quality included.
source "$(dirname "$0")/../tools/mpi_common.sh"

/usr/bin/python3 "$SRC/tests/tools/commondata_writer.py" .
cat > toy.ini <<'INI'
[data]
commondata = sets
sets = TOY_P, TOY_D
q2_min = 2
w2_min = 5

[model]
name = formula
formula = a * x^b * (1 - x)^3 * (1 + c * log(Q2))
compile = interpret

[param.a]
start = 0.8

[param.b]
start = 0.3

[param.c]
start = 0.05

[fit]
replicas = 6
seed = 3

[output]
file = toy.h5
INI
sed -e '/^commondata =/,/^w2_min =/d' toy.ini |
    sed -e "/^\[data\]/a file = toy.csv\nx = x, Q2, target\ny = F2\nsigma = sigma\nsystematics = $(cat toy_systematics.txt)\ndataset = dataset" \
        -e 's/^file = toy.h5/file = csv.h5/' > csv.ini
run_np 1 fit toy.ini > toy.log
run_np 1 fit csv.ini > csv.log
[ "$($H5CHECK status toy.h5)" = "7 0" ] || fail "toy.h5 incomplete"
$H5CHECK equal toy.h5 csv.h5 /central /replicas /summary || fail "commondata and the hand-made CSV differ"
ok "commondata (cuts, UNCORR, CORR, shared MULT type, 2 sets) = the same data on the generic path, bitwise"
sed -e 's/^w2_min = 5/w2_min = 12.5/' toy.ini > cut.ini
run_np 1 fit cut.ini --output.file cut.h5 > cut.log
$H5CHECK equal toy.h5 cut.h5 /central > /dev/null 2>&1 && fail "the W2 cut changed nothing"
ok "a tighter W2 cut changes the fit"

# Malformed sets: one line naming the file and line, the documented exit code, nothing written.
while IFS='|' read -r set code pattern; do
    sets=$set
    [ "$set" = MIXED_D ] && sets="TOY_P, MIXED_D"
    expect_error "$code" "$pattern" -- "$EF" fit toy.ini --data.sets "$sets" --output.file bad.h5
    [ -e bad.h5 ] && fail "$set: an output file was written"
done < cases.txt
[ "$(wc -l < cases.txt)" -ge 10 ] || fail "the writer made too few malformed sets"

# Real data: BCDMS p and d at x >= 0.35 (the shared BCDMS types across the two sets), NLO, on 1
# and 2 ranks: the same bits; t0 from the example's starts.
sed -e 's/^sets = .*/sets = BCDMS_NC_NOTFIXED_P, BCDMS_NC_NOTFIXED_D/' -e "s|^commondata = dis-real|commondata = $SRC/inputs/dis-real|" \
    "$SRC/inputs/dis-real-nlo.ini" > real.ini
common=(--data.x_min 0.35 --model.contour_nodes 4 --fit.replicas 3 --fit.max_iterations 60)
run_np 1 fit real.ini "${common[@]}" --output.file r1.h5 > r1.log
run_np 2 fit real.ini "${common[@]}" --output.file r2.h5 > r2.log
[ "$($H5CHECK status r2.h5)" = "4 0" ] || fail "r2.h5 incomplete"
$H5CHECK equal r1.h5 r2.h5 /central /replicas /summary || fail "real BCDMS subset: 1 and 2 ranks differ"
ok "real BCDMS p + d subset at NLO: 1 and 2 ranks bitwise equal"
# The same as two partial runs (a Slurm array's shards) merged: /quality (chi2 per set, shifts and
# pulls of the BCDMS sources, replicas' chi2; the whitened-table path) bitwise the one run's.
run_np 1 fit real.ini "${common[@]}" --shard 0/2 --output.file rs0.h5 > rs0.log
run_np 1 fit real.ini "${common[@]}" --shard 1/2 --output.file rs1.h5 > rs1.log
"$EF" merge -o rm.h5 rs1.h5 rs0.h5 > rm.log
$H5CHECK equal-attrs r2.h5 rm.h5 /quality || fail "real BCDMS subset: merged /quality differs from the one run's"
ok "real BCDMS subset: two shards merged give the one run's /quality, bitwise"
# --resume names a changed cut (the sets and cuts are part of the run's identity).
expect_error 2 "r1.h5: --resume: the file was written with a different config: data.x_min = 0.4" -- \
    "$EF" fit real.ini "${common[@]}" --data.x_min 0.4 --output.file r1.h5 --resume

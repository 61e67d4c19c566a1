#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# dis-mellin end to end: simulate pseudo-data, --dry-run prints the FLOP counts, a 2-rank fit
# with replicas completes and matches a 1-rank run bitwise, bad settings are refused clearly.
source "$(dirname "$0")/../tools/mpi_common.sh"
"$EF" simulate dis --out small.h5 --points 400 --seed 3 --noise 0.03 > sim.log
grep -q "400 points (200 proton, 200 neutron)" sim.log || fail "simulate dis summary"
expect_error 2 "exists; pass --overwrite" -- "$EF" simulate dis --out small.h5
sed -e 's/^file = dis-mellin-lo.h5/file = small.h5/' "$SRC/inputs/stats2.ini" > small.ini
cp small.h5 "$(dirname small.ini)/" 2>/dev/null || true
"$EF" fit small.ini --dry-run --output.file dry.h5 > dry.log
grep -Eq "FLOP per data point, .* per replica LM iteration" dry.log || { cat dry.log; fail "dry run shows no FLOP counts"; }
[ ! -e dry.h5 ] || fail "--dry-run wrote an output"
run_np 2 fit small.ini --fit.replicas 6 --output.file two.h5 > two.log
run_np 1 fit small.ini --fit.replicas 6 --output.file one.h5 > one.log
[ "$($H5CHECK status two.h5)" = "7 0" ] || fail "two.h5 incomplete"
$H5CHECK equal one.h5 two.h5 /central /replicas /summary || fail "1 and 2 ranks differ"
ok "dis-mellin: 1 and 2 ranks bitwise equal"
expect_error 2 "model.alphas_mz" -- "$EF" fit small.ini --model.alphas_mz -1 --output.file bad.h5
expect_error 2 "param.g_a.lower" -- "$EF" fit small.ini --param.g_a.lower -2.5 --output.file bad.h5
expect_error 2 "three x columns" -- "$EF" fit small.ini --data.x x,Q2 --output.file bad.h5
# NLO: pseudo-data from an NLO truth, a fit at NLO bitwise equal on 1 and 2 ranks, bad keys
"$EF" simulate dis --truth "$SRC/inputs/dis-mellin-nlo.ini" --out nlo.h5 --points 200 --seed 5 > simn.log
grep -q "200 points" simn.log || fail "simulate dis at NLO"
sed -e 's/^file = dis-mellin-nlo.h5/file = nlo.h5/' "$SRC/inputs/dis-mellin-nlo.ini" > nlo.ini
run_np 2 fit nlo.ini --fit.replicas 3 --output.file nlo2.h5 > nlo2.log
run_np 1 fit nlo.ini --fit.replicas 3 --output.file nlo1.h5 > nlo1.log
[ "$($H5CHECK status nlo2.h5)" = "4 0" ] || fail "nlo2.h5 incomplete"
$H5CHECK equal nlo1.h5 nlo2.h5 /central /replicas /summary || fail "NLO: 1 and 2 ranks differ"
ok "dis-mellin NLO: 1 and 2 ranks bitwise equal"
"$EF" pdf nlo2.h5 --q2 2,100 --x 0.001,0.1,0.5 -o pdf.csv 2> pdf.log
[ "$(wc -l < pdf.csv)" = "67" ] || fail "pdf: expected 1 + 2 x 11 x 3 lines"
head -1 pdf.csv | grep -q "^x,Q2,pdf,central,mean,std" || fail "pdf header"
expect_error 2 "below Q0" -- "$EF" pdf nlo2.h5 --q2 1.5 --x 0.1
ok "dis-mellin pdf: bands on a grid, Q2 below Q0 refused"
"$EF" export lhapdf nlo2.h5 -o lh/NLOTEST 2> lh.log
[ -f lh/NLOTEST/NLOTEST.info ] && [ -f lh/NLOTEST/NLOTEST_0000.dat ] && [ -f lh/NLOTEST/NLOTEST_0003.dat ] ||
    fail "export lhapdf: files missing"
grep -q "^SetIndex" lh/NLOTEST/NLOTEST.info && fail ".info: SetIndex without --set-index or [lhapdf] set_index"
expect_error 2 "exists; pass --overwrite" -- "$EF" export lhapdf nlo2.h5 -o lh/NLOTEST
"$EF" pdf nlo2.h5 --q2 3.3,17,47.5,1234 --x 0.000123,0.0123,0.234,0.57 -o off.csv 2> /dev/null
/usr/bin/python3 "$SRC/tests/tools/lhapdf_check.py" lh/NLOTEST off.csv 1e-3 || fail "LHAPDF grid off the pdf values"
ok "dis-mellin export lhapdf: read back independently, within 1e-3 of pdf off the grid"
expect_error 2 "model.order" -- "$EF" fit nlo.ini --model.order NNLO --output.file bad.h5
expect_error 2 "model.mt" -- "$EF" fit nlo.ini --model.mt 3 --output.file bad.h5
expect_error 2 "model.alphas_ref" -- "$EF" fit nlo.ini --model.alphas_ref -0.1 --output.file bad.h5
expect_error 2 "model.nf" -- "$EF" fit nlo.ini --model.nf 2 --output.file bad.h5
echo "dis_mellin: all checks passed"

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# dis-mellin with the split sea ([model] sea = split: ubar, dbar and s + sbar each with its own
# shape, 6 basis moments per contour node): a fit on 1 and 3 ranks gives the same bits, on the
# Gram path (the default) and on the QR table path, at LO and NLO; pdf and export lhapdf take
# the split fit; bad input for the new keys is one line, exit 2.
source "$(dirname "$0")/../tools/mpi_common.sh"
"$EF" simulate dis --out small.h5 --points 300 --seed 7 --noise 0.03 > sim.log
sed -e 's/^file = dis-mellin-lo.h5/file = small.h5/' "$SRC/inputs/stats2.ini" > sym.ini
bash "$SRC/tools/make_split_config.sh" sym.ini split.ini
grep -q "^sea = split" split.ini || fail "make_split_config.sh: no sea = split"
"$EF" fit split.ini --dry-run --output.file dry.h5 > dry.log 2>&1 || { cat dry.log; fail "split dry run"; }
for order in LO NLO; do
    for solver in auto qr; do  # auto: the Gram path (smeared, <= 16 free)
        run_np 3 fit split.ini --model.order $order --fit.solver $solver --fit.replicas 5 --output.file three.h5 --overwrite > three.log
        run_np 1 fit split.ini --model.order $order --fit.solver $solver --fit.replicas 5 --output.file one.h5 --overwrite > one.log
        [ "$($H5CHECK status three.h5)" = "6 0" ] || { cat three.log; fail "split $order $solver: three.h5 incomplete"; }
        $H5CHECK equal one.h5 three.h5 /central /replicas /summary || fail "split $order $solver: 1 and 3 ranks differ"
        ok "split sea, $order, solver $solver: 1 and 3 ranks bitwise equal"
    done
done
# the fitted split sea is a different fit from the symmetric one (dbar and s free of ubar)
"$EF" pdf one.h5 --q2 10,100 --x 0.01,0.1 -o pdf.csv 2> pdf.log || { cat pdf.log; fail "pdf of a split fit"; }
[ "$(wc -l < pdf.csv)" = "45" ] || fail "pdf: expected 1 + 2 x 11 x 2 lines"
"$EF" export lhapdf one.h5 -o lh/SPLIT 2> lh.log || { cat lh.log; fail "export lhapdf of a split fit"; }
"$EF" pdf one.h5 --q2 3.3,47.5 --x 0.000123,0.0123,0.234 -o off.csv 2> /dev/null
/usr/bin/python3 "$SRC/tests/tools/lhapdf_check.py" lh/SPLIT off.csv 1e-3 || fail "split: LHAPDF grid off the pdf values"
ok "split sea: pdf and export lhapdf agree to 1e-3 off the grid"
expect_error 2 "model.sea: 'both' is not allowed" -- "$EF" fit split.ini --model.sea both --output.file bad.h5
expect_error 2 "model.pdf_norm" -- "$EF" fit split.ini --model.pdf_norm none --output.file bad.h5
expect_error 2 "missing section \[param.ubar_N\]" -- "$EF" fit sym.ini --model.sea split --output.file bad.h5
expect_error 2 "missing section \[param.sea_N\]" -- "$EF" fit split.ini --model.sea symmetric --output.file bad.h5
expect_error 2 "param.dbar_a.lower" -- "$EF" fit split.ini --param.dbar_a.lower -2.5 --param.dbar_a.fixed false \
    --param.dbar_b.fixed true --output.file bad.h5
echo "dis_sea: all checks passed"

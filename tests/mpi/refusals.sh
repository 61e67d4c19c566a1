#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Refuse instead of hang, and a clear end instead of a bug's (issue 39): a reconstruction that
# diverges ends with exit 3 and one line on any number of ranks (exit 1 means a bug); sizes and
# factors beyond the documented limits are refused with one line naming the option (pdf grids,
# --debug.slowdown, simulate ptycho --dose, export lhapdf --qmax); `simulate` without a kind
# prints its usage and exits 2.
source "$(dirname "$0")/../tools/mpi_common.sh"

# 1. A diverging reconstruction (learning rates of 1e30): exit 3, one line, on 1 and 2 ranks.
"$EF" simulate ptycho --out sim.h5 --scan 8 --dp 32 --seed 3 > sim.log
cat > wild.ini <<'INI'
[data]
file = sim.h5
[object]
lr_amplitude = 1e30
lr_phase = 1e30
[probe]
lr = 1e30
defocus = 0
[solver]
iterations = 5
batch_size = 16
[output]
file = wild.h5
previews = false
INI
expect_error 3 "reconstruction diverged: the loss is .* at iteration 1 \(lower the learning rates\)" -- \
    run_np 1 reconstruct wild.ini
expect_error 3 "reconstruction diverged" -- run_np 2 reconstruct wild.ini --output.file wild2.h5
[ "$(grep -c 'diverged' err.txt)" = 1 ] || { cat err.txt; fail "a divergence on 2 ranks printed more than one line"; }
ok "a diverged reconstruction: exit 3, one line (1 and 2 ranks)"

# 2. pdf: the documented grid limits (--x-grid <= 100000, 1e7 points), named, before any work.
cp "$SRC/inputs/lh-toy.ini" toy.ini
expect_error 2 "pdf: --x-grid must be in 2..100000, got 1000000000" -- "$EF" pdf toy.ini --q2 10 --x-grid 1000000000
expect_error 2 "pdf: --x-grid must be in 2..100000, got -5" -- "$EF" pdf toy.ini --q2 10 --x-grid -5
q2=$(seq -s, 10 10 1000)  # 100 Q2 values x 200000 x values x 11 distributions
expect_error 2 "pdf: --x/--x-grid and --q2 ask for 200000 x values x 100 Q2 values x 11 distributions = 2.2e\+08 points; at most 1e7" \
    -- "$EF" pdf toy.ini --q2 "$q2" --x-grid 100000

# 3. --debug.slowdown: a finite factor beyond 1000 would only hang the run.
write_line_problem
expect_error 2 "--debug.slowdown: expected RANK:FACTOR\[,RANK:FACTOR\] with a FACTOR in 1..1000, got '1:1e300'" -- \
    run_np 2 fit good.ini --debug.slowdown 1:1e300
expect_error 2 "--debug.slowdown: .* got '0:inf'" -- run_np 1 fit good.ini --debug.slowdown 0:inf

# 4. simulate without a kind: its usage on stderr, exit 2; simulate ptycho --dose beyond 1e15.
rc=0
"$EF" simulate > out.txt 2> err.txt || rc=$?
[ "$rc" = 2 ] || fail "simulate without a kind: exit $rc, wanted 2"
grep -q "usage: ensemblefit simulate SUBCOMMAND" err.txt && grep -q "simulate ptycho" err.txt ||
    { cat err.txt; fail "simulate without a kind printed no usage"; }
ok "simulate without a kind: usage, exit 2"
expect_error 2 "simulate ptycho: --dose must be at most 1e15" -- "$EF" simulate ptycho --out d.h5 --scan 8 --dp 32 --dose 1e30
[ ! -e d.h5 ] || fail "a refused simulate wrote its output"

# 5. export lhapdf --qmax: finite, at most 1e6 GeV (an infinite one never ends).
"$EF" simulate dis --out dis.h5 --points 60 --seed 3 --noise 0.03 > simd.log
sed -e 's/^file = dis-mellin-lo.h5/file = dis.h5/' "$SRC/inputs/stats2.ini" > dis.ini
"$EF" fit dis.ini --fit.replicas 2 --output.file lo.h5 > lo.log 2>&1 || { cat lo.log; fail "dis-mellin fit"; }
expect_error 2 "export lhapdf: --qmax must exceed Q0 = .* and be at most 1e6 GeV" -- "$EF" export lhapdf lo.h5 -o lh/A --qmax inf
expect_error 2 "export lhapdf: --qmax must exceed" -- "$EF" export lhapdf lo.h5 -o lh/A --qmax 1e300

echo "refusals: all checks passed"

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Bad input: one clear error line naming the file and line, key or formula column, exit code 2
# (usage/config) or 3 (data), under mpirun too, and an existing output file left untouched.
source "$(dirname "$0")/../tools/mpi_common.sh"
cat > data.csv <<'CSV'
x,y,s
1,2.1,0.1
2,3.9,0.1
3,6.2,0.1
4,7.8,0.1
CSV
cat > good.ini <<'INI'
[data]
file = data.csv
x = x
y = y
sigma = s

[model]
name = formula
formula = a + b*x

[param.a]
start = 0

[param.b]
start = 1

[fit]
replicas = 5

[output]
file = out.h5
INI
# A finished result that no failing run may damage.
run_np 2 fit good.ini > good.log
sum_before=$(md5sum out.h5)
variant() {  # variant NAME SED-EXPRESSION: good.ini edited
    sed -e "$2" good.ini > "$1.ini"
}

expect_error 2 "nope.ini: cannot open config file" -- run_np 2 fit nope.ini
variant missingdata 's/^file = data.csv/file = absent.csv/'
expect_error 2 "missingdata.ini:2: data.file: cannot open data file" -- run_np 2 fit missingdata.ini
variant section 's/^\[fit\]/[fitt]/'
expect_error 2 "section.ini:17: unknown section \[fitt\]" -- run_np 2 fit section.ini
variant key 's/^replicas = 5/replica = 5/'
expect_error 2 "key.ini:18: unknown key 'replica' in \[fit\]" -- run_np 2 fit key.ini
expect_error 2 "unknown option '--fit.replica'" -- run_np 1 fit good.ini --fit.replica 3
variant model 's/^name = formula/name = cubic/'
expect_error 2 "model.ini:8: model.name: unknown model 'cubic'" -- run_np 2 fit model.ini
variant syntax 's/^formula = a + b\*x/formula = a + b*(x/'
expect_error 2 "syntax.ini:9: model.formula: column 9: missing '\)'" -- run_np 2 fit syntax.ini
variant name 's/^formula = a + b\*x/formula = a + q*x/'
expect_error 2 "name.ini:9: model.formula: column 5: unknown name 'q'" -- run_np 2 fit name.ini
sed 's/^3,6.2,0.1/3,six,0.1/' data.csv > text.csv; variant text 's/data.csv/text.csv/'
expect_error 3 "text.csv:4: column 'y': not a number: 'six'" -- run_np 2 fit text.ini
variant column 's/^y = y/y = z/'
expect_error 3 "data.csv:1: no column 'z'" -- run_np 2 fit column.ini
sed 's/^2,3.9,0.1/2,nan,0.1/' data.csv > nan.csv; variant nan 's/data.csv/nan.csv/'
expect_error 3 "nan.csv:3: column 'y': NaN" -- run_np 2 fit nan.ini
sed 's/^4,7.8,0.1/4,7.8,0/' data.csv > zero.csv; variant zero 's/data.csv/zero.csv/'
expect_error 3 "zero.csv:5: column 's': uncertainties must be positive" -- run_np 2 fit zero.ini
variant sigma 's/^sigma = s/sigma = -0.5/'
expect_error 2 "sigma.ini:5: data.sigma: a constant sigma must be positive" -- run_np 2 fit sigma.ini
variant bounds '/^\[param.a\]/a lower = 3\nupper = 1'
expect_error 2 "bounds.ini:12: param.a.lower: lower bound 3 is above upper bound 1" -- run_np 2 fit bounds.ini
variant outside '/^\[param.b\]/a upper = 0.5'
expect_error 2 "outside.ini:16: param.b.start: start 1 is outside \[-inf, 0.5\]" -- run_np 2 fit outside.ini
expect_error 2 "--fit.replicas: must be in 0..2147483646, got -4" -- run_np 2 fit good.ini --fit.replicas -4
expect_error 2 "output.file: cannot write '/nonexistent/dir/out.h5'" -- \
    run_np 2 fit good.ini --output.file /nonexistent/dir/out.h5
expect_error 2 "out.h5' exists; pass --resume" -- run_np 2 fit good.ini
expect_error 2 "run.workers = gpu: (no CUDA device|ensemblefit was built without CUDA)" -- \
    run_np 2 fit good.ini --run.workers gpu --output.file gpu.h5
expect_error 2 "unknown parameter|has no parameter 'k'" -- \
    run_np 1 fit good.ini --model.name linear --param.k.start 1 --output.file lin.h5
expect_error 2 "does not appear in the formula" -- \
    run_np 1 fit good.ini --param.c.start 1 --output.file unused.h5
expect_error 2 "--shard: shard index 3 is outside 0..2" -- run_np 1 fit good.ini --shard 3/3
expect_error 2 "fit.precision: unknown precision 'half' \(allowed: double, float\)" -- \
    run_np 2 fit good.ini --fit.precision half --output.file half.h5
expect_error 2 "fit.solver: the QR solver runs in double only" -- \
    run_np 2 fit good.ini --fit.precision float --fit.solver qr --output.file half.h5
[ "$(md5sum out.h5)" = "$sum_before" ] || fail "a failing run changed out.h5"
ok "out.h5 untouched by every failing run"
for f in gpu.h5 lin.h5 unused.h5 half.h5; do [ ! -e "$f" ] || fail "a failing run created $f"; done

# More ranks than replicas is fine: idle ranks are reported.
run_np 4 fit good.ini --fit.replicas 1 --output.file few.h5 > few.log
grep -q "rank(s) had no replicas" few.log || fail "idle ranks not reported"
[ "$($H5CHECK status few.h5)" = "2 0" ] || fail "few.h5 incomplete"
ok "4 ranks, 2 fits: idle ranks reported, file complete"
echo "errors: all checks passed"

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# [model] compile: a formula compiled at run time (jit, and auto where a compiler works) gives
# the interpreter's bits on both solvers and both precisions, on 1 and 2 ranks; auto falls back
# to the interpreter when compiling is impossible, jit then refuses with one error line (exit
# 2), and values other than auto | jit | interpret are usage errors (exit 2).
source "$(dirname "$0")/../tools/mpi_common.sh"
export XDG_CACHE_HOME="$WORK/cache"

cp "$SRC/inputs/spot.csv" .
cat > spot.ini <<'INI'
[data]
file = spot.csv
x = px, py
y = counts
sigma = sigma

[model]
name = formula
formula = c + a * exp(-((px - u)^2 + (py - v)^2) / (2 * s^2))

[param.a]
start = 80
lower = 0
[param.u]
start = 7
[param.v]
start = 7
[param.s]
start = 2.5
lower = 0.1
[param.c]
start = 5

[fit]
replicas = 40
seed = 7

[output]
file = out.h5
INI
SETS="replicas/params replicas/chi2 replicas/iterations replicas/status central/params central/covariance"

for solver in "--fit.solver qr" "--fit.solver normal" "--fit.precision float"; do
    # shellcheck disable=SC2086
    "$EF" fit spot.ini $solver --model.compile interpret --output.file interp.h5 > /dev/null
    for np in 1 2; do
        # shellcheck disable=SC2086
        run_np $np fit spot.ini $solver --model.compile jit --output.file jit$np.h5 > /dev/null
        $H5CHECK equal interp.h5 jit$np.h5 $SETS || fail "jit on $np rank(s) differs ($solver)"
    done
    # shellcheck disable=SC2086
    "$EF" fit spot.ini $solver --output.file auto.h5 > /dev/null
    $H5CHECK equal interp.h5 auto.h5 $SETS || fail "auto differs ($solver)"
    rm -f jit1.h5* jit2.h5* auto.h5* interp.h5*  # with their timing sidecars, outputs of their own
    ok "compile = jit (1 and 2 ranks) and auto give the interpreter's bits ($solver)"
done
ls cache/ensemblefit/formula/formula-*.so > /dev/null || fail "no compiled formula in the cache"
ok "the compiled formula is cached under \$XDG_CACHE_HOME/ensemblefit/formula"

# No usable cache folder: auto interprets (same bits), jit refuses.
"$EF" fit spot.ini --model.compile interpret --output.file interp.h5 > /dev/null
XDG_CACHE_HOME=/proc/ef-no-cache "$EF" fit spot.ini --output.file auto.h5 > /dev/null
$H5CHECK equal interp.h5 auto.h5 $SETS || fail "auto without a cache differs"
ok "auto without a usable cache runs the interpreter"
XDG_CACHE_HOME=/proc/ef-no-cache expect_error 2 "model.compile: compile = jit, but the formula could not be compiled: cannot create the formula cache" \
    -- "$EF" fit spot.ini --model.compile jit --output.file jit.h5
[ ! -e jit.h5 ] || fail "a refused run wrote its output"

expect_error 2 "unknown value 'fast' \(allowed: auto, jit, interpret\)" -- "$EF" fit spot.ini --model.compile fast --output.file bad.h5
sed 's/^name = formula/name = formula\ncompile = JIT/' spot.ini > bad.ini
expect_error 2 "bad.ini:9: model.compile: unknown value 'JIT'" -- run_np 2 fit bad.ini --output.file bad.h5
[ ! -e bad.h5 ] || fail "a refused run wrote its output"

# Without HOME and XDG_CACHE_HOME there is no private cache: auto interprets (same bits), jit
# refuses saying why, and nothing is created under the temporary folder (a shared one).
mkdir -p tmp
env -u HOME -u XDG_CACHE_HOME TMPDIR="$WORK/tmp" "$EF" fit spot.ini --output.file nohome.h5 > /dev/null
$H5CHECK equal interp.h5 nohome.h5 $SETS || fail "auto without HOME differs"
(
    unset HOME XDG_CACHE_HOME
    export TMPDIR="$WORK/tmp"
    expect_error 2 "model.compile: compile = jit, but the formula could not be compiled: no private folder for compiled formulas: HOME and XDG_CACHE_HOME are unset" \
        -- "$EF" fit spot.ini --model.compile jit --output.file jit.h5
) || exit 1
[ -z "$(ls -A tmp)" ] || fail "the temporary folder was used: $(ls -A tmp)"
ok "without HOME: auto interprets, jit refuses, the temporary folder is untouched"

# A cache folder others can write is never used.
mkdir -p shared/ensemblefit/formula && chmod 777 shared/ensemblefit/formula
XDG_CACHE_HOME="$WORK/shared" expect_error 2 "is writable by others \(mode 0777\)" \
    -- "$EF" fit spot.ini --model.compile jit --output.file jit.h5
[ -z "$(ls -A shared/ensemblefit/formula)" ] || fail "a shared cache folder was written"

# Formulas of 10,000 and 200,000 characters are refused before any compile, naming the limit and
# the key, under jit and auto alike.
for n in 10000 200000; do
    /usr/bin/python3 - "$n" > long.ini <<'PY'
import sys
n = int(sys.argv[1])
f = "c + a * exp(-((px - u)^2 + (py - v)^2) / (2 * s^2))"
while len(f) < n:
    f += " + 0*px"
for line in open("spot.ini"):
    print("formula = " + f if line.startswith("formula = ") else line, end="")
PY
    for mode in jit auto; do
        expect_error 2 "long.ini:9: model.formula: column 4097: formula too long \([0-9]+ characters; the limit is 4096\)" \
            -- run_np 2 fit long.ini --model.compile $mode --output.file long.h5
    done
    [ ! -e long.h5 ] || fail "a refused run wrote its output"
done
ok "formulas of 10,000 and 200,000 characters refused at once (jit and auto)"

# A compile that outlives [model] compile_timeout is stopped: auto interprets (same bits), jit
# refuses naming the key; the cache keeps no temporary file. (A new formula: never cached.)
sed 's/^formula = .*/&  + 0 * px/' spot.ini > slow.ini
"$EF" fit slow.ini --model.compile interpret --output.file slow-interp.h5 > /dev/null
"$EF" fit slow.ini --model.compile_timeout 0.001 --output.file slow-auto.h5 > /dev/null
$H5CHECK equal slow-interp.h5 slow-auto.h5 $SETS || fail "auto after a stopped compile differs"
expect_error 2 "compile = jit, but the formula could not be compiled: .* did not finish .* within 0.001 s and was stopped \(\[model\] compile_timeout\)" \
    -- "$EF" fit slow.ini --model.compile jit --model.compile_timeout 0.001 --output.file slow-jit.h5
expect_error 2 "model.compile_timeout: must be a positive number of seconds, got '-1'" \
    -- "$EF" fit slow.ini --model.compile_timeout -1 --output.file slow-jit.h5
[ -z "$(find cache -name '*.tmp*' -o -name '.tmp-*')" ] || fail "temporary files left in the cache: $(find cache -name '*tmp*')"
ok "a compile past compile_timeout is stopped: auto interprets, jit refuses, nothing left behind"

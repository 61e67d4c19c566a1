#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every read of a result file validates shapes, types and codes before use (issue 39): summary,
# predict, pdf and export lhapdf of malformed copies of real result files, made by an independent
# writer (tests/tools/tamper_results.py, h5py), exit 3 with one line naming the file and the
# dataset or attribute, and print no numbers; the untampered files still read.
source "$(dirname "$0")/../tools/mpi_common.sh"
TAMPER="/usr/bin/python3 $SRC/tests/tools/tamper_results.py"

write_line_problem
run_np 1 fit good.ini > fit.log
printf 'x\n1.5\n2.5\n' > at.csv
"$EF" summary out.h5 > summary.txt || fail "summary of a good file"
"$EF" predict out.h5 --at at.csv > predict.csv 2> /dev/null || fail "predict of a good file"

# check KIND PATTERN command...: a tampered copy of out.h5 read by `command` (FILE stands for it).
check() {
    local kind=$1 pattern=$2; shift 2
    $TAMPER "$kind" out.h5 "bad-$kind.h5"
    local args=("${@//FILE/bad-$kind.h5}")
    expect_error 3 "bad-$kind.h5: $pattern" -- "${args[@]}"
    [ ! -s out.txt ] || { cat out.txt; fail "$kind: numbers printed before the refusal: ${args[*]}"; }
}
for cmd in summary predict; do
    extra=()
    [ $cmd = predict ] && extra=(--at at.csv)
    check params-wide "dataset /replicas/params has shape 5 x 3, expected 5 x 2" "$EF" $cmd FILE "${extra[@]}"
    check index-short "dataset /replicas/index has shape 4, expected 5" "$EF" $cmd FILE "${extra[@]}"
    check status-unknown "dataset /replicas/status: row 2 has status 7" "$EF" $cmd FILE "${extra[@]}"
    check central-status "dataset /central/status: row 1 has status -5" "$EF" $cmd FILE "${extra[@]}"
    check names-fixed "attribute 'param_names' on '/' is not a list of variable-length strings" "$EF" $cmd FILE \
        "${extra[@]}"
    check seed-text "attribute 'replicas_total' on '/' is not one number" "$EF" $cmd FILE "${extra[@]}"
done
check correlation-wide "dataset /central/correlation has shape 3 x 3, expected 2 x 2" "$EF" summary FILE
ok "summary and predict: every malformed dataset and attribute refused, exit 3, nothing printed"

# predict rebuilds the model from the stored config: its parameters must be the datasets'.
check drop-param "its stored config \(attribute canonical_config\) has 2 parameters, its datasets .* 1" \
    "$EF" predict FILE --at at.csv
check config-param "its stored config \(attribute canonical_config\) has 3 parameters, its datasets .* 2" \
    "$EF" predict FILE --at at.csv -o p.csv
[ ! -e p.csv ] || fail "a refused predict wrote its output"
ok "predict: a stored config with more parameters than the datasets (either way) refused"

# pdf and export lhapdf: the same for a dis-mellin fit's stored parameter layout.
"$EF" simulate dis --out dis.h5 --points 60 --seed 3 --noise 0.03 > sim.log
sed -e 's/^file = dis-mellin-lo.h5/file = dis.h5/' "$SRC/inputs/stats2.ini" > dis.ini
"$EF" fit dis.ini --fit.replicas 2 --output.file lo.h5 > lo.log 2>&1 || { cat lo.log; fail "dis-mellin fit"; }
$TAMPER drop-param lo.h5 lo-drop.h5
expect_error 3 "lo-drop.h5: its stored config \(attribute canonical_config\) has [0-9]+ dis-mellin parameters" -- \
    "$EF" pdf lo-drop.h5 --q2 10 --x 0.1
expect_error 3 "lo-drop.h5: its stored config" -- "$EF" export lhapdf lo-drop.h5 -o lh/BAD
[ ! -e lh/BAD/BAD.info ] || fail "a refused export wrote its set"
$TAMPER status-unknown lo.h5 lo-status.h5
expect_error 3 "lo-status.h5: dataset /replicas/status: row 2 has status 7" -- "$EF" pdf lo-status.h5 --q2 10 --x 0.1
"$EF" pdf lo.h5 --q2 10 --x 0.1 > /dev/null 2>&1 || fail "pdf of the good file"
ok "pdf and export lhapdf: a stored layout unlike the datasets, a bad status refused"

echo "result_checks: all checks passed"

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The one output guard (src/io/output_file.hpp; docs/architecture.md, "Output safety"; issue 39)
# on every file a command writes beside the run commands' own outputs (tests/mpi/output_safety.sh):
# --trace, the JSON timing sidecar, advise -o, report --csv, pdf/predict -o, export lhapdf.
# Never an input of the run (compared by device and inode: symlinks and hard links too), never
# an existing file without --overwrite, never the output itself; a full disk (the file size
# limit, SIGXFSZ ignored so that write fails with EFBIG; a small tmpfs where one can be mounted)
# exits 3 with one line naming the file, leaves the previous file byte for byte and no
# temporary file.
source "$(dirname "$0")/../tools/mpi_common.sh"
digest() { sha256sum "$@" | cut -d' ' -f1; }
# limited BLOCKS -- command...: the command under `ulimit -f BLOCKS` with SIGXFSZ ignored; its
# stderr in err.txt (written outside the limit); returns its exit code.
limited() {
    local blocks=$1; shift 2
    local rc=0
    set +e +o pipefail
    bash -c 'trap "" XFSZ; ulimit -f "$0"; exec "$@"' "$blocks" "$@" 2>&1 >/dev/null | cat > err.txt
    rc=${PIPESTATUS[0]}
    set -e -o pipefail
    return "$rc"
}
# full_disk_case CODE PATTERN BLOCKS -- command...: exit CODE and one error line matching PATTERN.
full_disk_case() {
    local code=$1 pattern=$2 blocks=$3; shift 4
    local rc=0
    limited "$blocks" -- "$@" || rc=$?
    [ "$rc" = "$code" ] || { cat err.txt >&2; fail "exit $rc, wanted $code under ulimit -f $blocks: $*"; }
    [ "$(grep -c '^ensemblefit: error:' err.txt)" = 1 ] || { cat err.txt >&2; fail "wanted one error line: $*"; }
    grep -E -q -e "$pattern" err.txt || { cat err.txt >&2; fail "message does not match '$pattern': $*"; }
    ok "full disk: exit $code, $(grep '^ensemblefit: error:' err.txt)"
}
no_temp_left() {
    local left
    left=$(find . -name '*.creating*' | head -5)
    [ -z "$left" ] || fail "temporary files left behind: $left"
}

write_line_problem
run_np 1 fit good.ini > fit.log
inputs_before=$(digest good.ini data.csv out.h5)

# 1. --trace: never the config, the data (also through a symlink or a hard link), an existing
# result file without --overwrite, nor the run's own output.
ln -s good.ini link.ini
ln data.csv hard.csv
expect_error 2 "--trace: 'good.ini' is the input 'good.ini'" -- "$EF" fit good.ini --output.file t1.h5 --trace good.ini
expect_error 2 "--trace: 'link.ini' is the input 'good.ini'" -- "$EF" fit good.ini --output.file t1.h5 --trace link.ini
expect_error 2 "--trace: 'hard.csv' is the input 'data.csv'" -- "$EF" fit good.ini --output.file t1.h5 --trace hard.csv \
    --overwrite
expect_error 2 "--trace: 'out.h5' exists; pass --overwrite" -- "$EF" fit good.ini --output.file t1.h5 --trace out.h5
expect_error 2 "--trace: 't1.h5' is also the output 't1.h5'" -- "$EF" fit good.ini --output.file t1.h5 --trace t1.h5
expect_error 2 "--trace: 't1.h5' is also the output" -- "$EF" fit good.ini --output.file ./t1.h5 --trace t1.h5
[ "$(digest good.ini data.csv out.h5)" = "$inputs_before" ] || fail "a refused --trace changed an input"
[ ! -e t1.h5 ] || fail "a refused run wrote its output"
"$EF" fit good.ini --output.file t2.h5 --trace t.json > /dev/null 2>&1 || fail "fit with a new trace"
expect_error 2 "--trace: 't.json' exists; pass --overwrite" -- "$EF" fit good.ini --output.file t3.h5 --trace t.json
"$EF" fit good.ini --output.file t2.h5 --trace t.json --overwrite > /dev/null 2>&1 || fail "--overwrite of a trace"
ok "--trace: inputs, the output and existing files refused; --overwrite replaces"

# Devices, pipes and sockets are never outputs (an output is renamed over its target: -o /dev/null
# would replace the device with a plain file); a pipe stands in for /dev/null here.
mkfifo pipe
expect_error 2 "--output.file: 'pipe' is not a regular file" -- "$EF" fit good.ini --output.file pipe --overwrite
expect_error 2 "--trace: 'pipe' is not a regular file" -- "$EF" fit good.ini --output.file t6.h5 --trace pipe --overwrite
expect_error 2 "predict: -o: 'pipe' is not a regular file" -- "$EF" predict out.h5 --at data.csv -o pipe --overwrite
[ -p pipe ] || fail "a refused output replaced the pipe"
ok "a pipe (as /dev/null) is never an output"

# 2. The JSON timing sidecar (OUTPUT.timing.json) is an output like the others: never the config.
cp good.ini side.h5.timing.json
expect_error 2 "side.h5.timing.json' is the input" -- "$EF" fit side.h5.timing.json --output.file side.h5
grep -q "^formula = a + b\*x" side.h5.timing.json || fail "the sidecar replaced the config"
echo stale > t4.h5.timing.json
expect_error 2 "t4.h5.timing.json' exists; pass --overwrite" -- "$EF" fit good.ini --output.file t4.h5
ok "the timing sidecar: never an input, an existing one only with --overwrite"

# 3. advise -o (refused before the calibration): never the config, an existing file only with --overwrite.
expect_error 2 "advise: -o: 'good.ini' is the input 'good.ini'" -- "$EF" advise good.ini -o good.ini
echo old > pred.tsv
expect_error 2 "advise: -o: 'pred.tsv' exists; pass --overwrite" -- "$EF" advise good.ini -o pred.tsv
[ "$(cat pred.tsv)" = old ] && [ "$(digest good.ini data.csv out.h5)" = "$inputs_before" ] || fail "advise -o changed a file"
ok "advise -o: the config and existing files refused"

# 4. report --csv: never a result file it reads, an existing one only with --overwrite; a full
# disk keeps the previous table.
expect_error 2 "report: --csv: 'out.h5' is the input 'out.h5'" -- "$EF" report out.h5 --csv out.h5 --overwrite
"$EF" report out.h5 --csv r.csv > /dev/null || fail "report --csv"
expect_error 2 "report: --csv: 'r.csv' exists; pass --overwrite" -- "$EF" report out.h5 --csv r.csv
before=$(digest r.csv)
full_disk_case 3 "report: --csv: writing 'r.csv' failed \(File too large\); the previous file is unchanged" 0 -- \
    "$EF" report out.h5 t2.h5 --csv r.csv --overwrite
[ "$(digest r.csv)" = "$before" ] || fail "a failed report --csv changed the previous table"
no_temp_left
ok "report --csv: inputs and existing files refused; a full disk keeps the previous table"

# 5. pdf and export lhapdf of a small dis-mellin fit: -o never the result file, a full disk
# keeps the previous CSV and the previous set (every member written before any is renamed).
"$EF" simulate dis --out dis.h5 --points 100 --seed 3 --noise 0.03 > sim.log
sed -e 's/^file = dis-mellin-lo.h5/file = dis.h5/' "$SRC/inputs/stats2.ini" > dis.ini
"$EF" fit dis.ini --fit.replicas 3 --output.file lo.h5 > lo.log 2>&1 || { cat lo.log; fail "dis-mellin fit"; }
ln -s lo.h5 lo-link.h5
expect_error 2 "pdf: -o: 'lo-link.h5' is the input 'lo.h5'" -- "$EF" pdf lo.h5 --q2 10 -o lo-link.h5 --overwrite
"$EF" pdf lo.h5 --q2 10 -o p.csv 2> /dev/null || fail "pdf -o"
before=$(digest p.csv)
full_disk_case 3 "writing 'p.csv' failed \(File too large\); the previous file is unchanged" 1 -- \
    "$EF" pdf lo.h5 --q2 10,20 -o p.csv --overwrite
[ "$(digest p.csv)" = "$before" ] || fail "a failed pdf -o changed the previous CSV"
no_temp_left
"$EF" export lhapdf lo.h5 -o lh/LO 2> lh.log || { cat lh.log; fail "export lhapdf"; }
before=$(digest lh/LO/*)
full_disk_case 3 "export lhapdf: -o: writing 'lh/LO/LO_0000.dat' failed \(File too large\)" 100 -- \
    "$EF" export lhapdf lo.h5 -o lh/LO --overwrite
[ "$(digest lh/LO/*)" = "$before" ] || fail "a failed export lhapdf changed the previous set"
[ "$(ls lh/LO | wc -l)" = 5 ] || { ls lh/LO; fail "export lhapdf left files behind"; }
no_temp_left
ok "pdf -o and export lhapdf: the result file refused; a full disk keeps the previous files"

# 6. A full disk under the trace only (a small tmpfs in a mount namespace of our own, where the
# system lets one be made): exit 3 naming the trace, the previous trace byte for byte.
if unshare -rm true 2>/dev/null; then
    mkdir small
    rc=0
    unshare -rm bash -c 'mount -t tmpfs -o size=4k tmpfs small && cp t.json small/t.json && sha256sum small/t.json > before.txt &&
        "$0" fit good.ini --output.file t5.h5 --trace small/t.json --overwrite --fit.replicas 200 > /dev/null 2> err.txt;
        echo $? > rc.txt; sha256sum small/t.json > after.txt; ls -a small > left.txt' "$EF" || true
    [ "$(cat rc.txt)" = 3 ] || { cat err.txt; fail "a full disk under --trace: exit $(cat rc.txt), wanted 3"; }
    grep -q "^ensemblefit: error: .*--trace: writing 'small/t.json' failed (No space left on device)" err.txt ||
        { cat err.txt; fail "the error line does not name the trace"; }
    cmp -s before.txt after.txt || fail "a failed trace changed the previous trace"
    [ "$(grep -c creating left.txt)" = 0 ] || fail "a failed trace left its temporary file"
    ok "full disk under --trace: exit 3 naming it, the previous trace kept"
else
    echo "note: no mount namespace here (unshare -rm); the tmpfs case is not run"
fi

echo "output_guard: all checks passed"

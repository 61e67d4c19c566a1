#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A file that several runs worked on: each run's timing is kept as a record (/timing/runs/<k>)
# and `report` sums them; a --resume with nothing left changes nothing; --resume with more
# replicas grows the ensemble to exactly what a fresh run gives; --dry-run applies the output
# checks; a changed config names every differing key.
source "$(dirname "$0")/../tools/mpi_common.sh"
cp "$SRC/inputs/example.ini" "$SRC/inputs/decay.csv" .
ARGS="--fit.chunk 4"

# Growing: 24 replicas, then --resume with 40 = a fresh run with 40 (bitwise), on 2 ranks.
run_np 2 fit example.ini $ARGS --fit.replicas 24 --output.file grown.h5 > small.log
run_np 2 fit example.ini $ARGS --fit.replicas 40 --output.file grown.h5 --resume > grow.log
grep -q "resume: 16 of 41 replica fits left" grow.log || { cat grow.log; fail "growing did not fit replicas 25..40"; }
run_np 1 fit example.ini $ARGS --fit.replicas 40 --output.file fresh.h5 > fresh.log
$H5CHECK equal fresh.h5 grown.h5 /central /replicas /summary || fail "the grown ensemble differs from a fresh one"
ok "24 replicas grown to 40 with --resume == a fresh run of 40 (bitwise /central, /replicas, /summary)"

# Two run records; report sums them (its runtime is the sum of the records').
/usr/bin/python3 - <<'PY' || fail "run records"
import h5py
f = h5py.File("grown.h5", "r")
runs = f["/timing/runs"]
assert sorted(runs.keys()) == ["0", "1"], list(runs.keys())
reps = [int(runs[k]["replicas"][...].sum()) for k in ("0", "1")]
assert reps == [25, 16], reps
text = lambda v: v.decode() if isinstance(v, bytes) else str(v)
for k in ("0", "1"):
    a = runs[k].attrs
    assert "fit example.ini" in text(a["command"]) and text(a["date"]).endswith("Z"), dict(a)
    assert a["ranks"] == 2 and len(a["placement"]) == 2
print("records:", reps)
PY
"$EF" report grown.h5 --runs > report.log
grep -q "grown.h5 (2 runs)" report.log || { cat report.log; fail "report does not sum the two runs"; }
[ "$(grep -c '^  run [01]' report.log)" = 2 ] || { cat report.log; fail "report --runs lists no per-run rows"; }
ok "two run records, report sums them and lists them with --runs"

# Nothing left to do: the file stays byte for byte as it is, and the run says so.
sum=$(md5sum grown.h5)
run_np 2 fit example.ini $ARGS --fit.replicas 40 --output.file grown.h5 --resume > noop.log
grep -q "nothing to fit, the file is unchanged" noop.log || { cat noop.log; fail "no-op resume says nothing"; }
[ "$(md5sum grown.h5)" = "$sum" ] || fail "a --resume with nothing to do changed the file"
ok "--resume of a complete file: byte-identical, said so"

# A changed config names every differing key with both values; fewer replicas do not shrink.
expect_error 2 "fit.seed = 9 here, 2026 in the file; fit.xtol = [0-9.e-]+ here, 1e-10 in the file" -- \
    run_np 1 fit example.ini $ARGS --fit.replicas 40 --fit.seed 9 --fit.xtol 1e-9 --output.file grown.h5 --resume
expect_error 2 "fit.replicas = 30 here, 40 in the file \(an ensemble grows only" -- \
    run_np 1 fit example.ini $ARGS --fit.replicas 30 --output.file grown.h5 --resume
[ "$(md5sum grown.h5)" = "$sum" ] || fail "a refused resume changed the file"

# --dry-run runs the output checks too: an existing output is refused as a real run would.
expect_error 2 "grown.h5' exists; pass --resume" -- "$EF" fit example.ini --output.file grown.h5 --dry-run
"$EF" fit example.ini --output.file grown.h5 --fit.replicas 40 $ARGS --resume --dry-run > dry.log
grep -q "dry run: every check passed" dry.log || { cat dry.log; fail "dry run of a valid resume"; }

# Merge keeps every shard's records; report on the merged file sums them.
for i in 0 1; do run_np 2 fit example.ini $ARGS --fit.replicas 20 --shard $i/2 --output.file s$i.h5 > s$i.log; done
"$EF" merge -o merged.h5 s0.h5 s1.h5 > merge.log
"$EF" report merged.h5 > mreport.log
grep -q "merged.h5 (2 runs)" mreport.log || { cat mreport.log; fail "report on a merged file"; }
/usr/bin/python3 -c "
import h5py
f = h5py.File('merged.h5', 'r')
assert sum(int(f['/timing/runs'][k]['replicas'][...].sum()) for k in f['/timing/runs']) == 21
" || fail "merged records do not add up to the 21 replica fits"
ok "merged file: both shards' records, report sums them"
echo "runs: all checks passed"

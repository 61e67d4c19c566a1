#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The reproducibility contract: the same config with 1 and 3 ranks, with several threads, as 3
# shards merged, and resumed after a kill -9 gives bitwise identical /central, /replicas and
# /summary.
source "$(dirname "$0")/../tools/mpi_common.sh"
cp "$SRC/inputs/example.ini" "$SRC/inputs/decay.csv" .
ARGS="--fit.replicas 90 --fit.chunk 4"

run_np 1 fit example.ini $ARGS --output.file np1.h5 > np1.log
run_np 3 fit example.ini $ARGS --output.file np3.h5 > np3.log
OMP_NUM_THREADS=2 run_np 2 fit example.ini $ARGS --fit.chunk 7 --output.file np2t2.h5 > np2t2.log
for i in 0 1 2; do run_np 2 fit example.ini $ARGS --shard $i/3 --output.file shard$i.h5 > shard$i.log; done
"$EF" merge -o merged.h5 shard2.h5 shard0.h5 shard1.h5 > merge.log
# Same through Slurm's variables (--shard auto), array indices starting at 1.
SLURM_ARRAY_TASK_ID=2 SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_COUNT=3 \
    run_np 1 fit example.ini $ARGS --shard auto --output.file auto1.h5 > auto.log
$H5CHECK equal shard1.h5 auto1.h5 /replicas || fail "--shard auto differs from --shard 1/3"

for f in np3.h5 np2t2.h5 merged.h5; do
    $H5CHECK equal np1.h5 $f /central /replicas /summary || fail "$f differs from np1.h5"
    ok "$f == np1.h5 bitwise (/central, /replicas, /summary)"
done
[ "$($H5CHECK status np1.h5)" = "91 0" ] || fail "np1.h5 incomplete"
# The same contract in single precision (the normal-equations solver): 1 rank = 3 ranks, bitwise;
# and merging a float shard with a double one is refused (their configs differ).
run_np 1 fit example.ini $ARGS --fit.precision float --output.file f1.h5 > f1.log
run_np 3 fit example.ini $ARGS --fit.precision float --output.file f3.h5 > f3.log
$H5CHECK equal f1.h5 f3.h5 /central /replicas /summary || fail "float: 3 ranks differ from 1"
if $H5CHECK equal np1.h5 f1.h5 /replicas 2>/dev/null; then fail "float run equals the double run"; fi
ok "precision = float: 3 ranks == 1 rank bitwise, and not the double results"
grep -q "replicas 31..60" shard1.log || fail "shard 1/3 should hold replicas 31..60"

# Merge refuses gaps, overlaps and mismatched configs, and never overwrites.
expect_error 2 "replicas 31..60 are in no file" -- "$EF" merge -o bad.h5 shard0.h5 shard2.h5
expect_error 2 "overlaps" -- "$EF" merge -o bad.h5 shard0.h5 shard1.h5 shard1.h5
run_np 1 fit example.ini $ARGS --fit.seed 7 --shard 1/3 --output.file other1.h5 > other.log
expect_error 2 "different config" -- "$EF" merge -o bad.h5 shard0.h5 other1.h5 shard2.h5
expect_error 2 "exists" -- "$EF" merge -o merged.h5 shard0.h5 shard1.h5 shard2.h5
[ ! -e bad.h5 ] || fail "a refused merge left bad.h5 behind"

# Resume after kill -9: a slow run (one replica per unit, 3-peak Gaussian model, 4000 points)
# is killed once part of it is on disk, then finished with --resume.
write_peaks_problem 4000 150 1 full.h5
run_np 2 fit peaks.ini > full.log
run_np 2 fit peaks.ini --output.file killed.h5 --debug.slowdown 0:40,1:40 > killed.log 2>&1 &
pid=$!
for _ in $(seq 1 200); do
    sleep 0.1
    if [ -e killed.h5 ]; then
        read -r done left < <(HDF5_USE_FILE_LOCKING=FALSE $H5CHECK status killed.h5 2>/dev/null || echo "0 0")
        [ "${done:-0}" -ge 20 ] && break
    fi
done
pkill -9 -f "ensemblefit fit peaks.ini --output.file killed.h5" 2>/dev/null || true
kill -9 $pid 2>/dev/null || true
wait $pid 2>/dev/null || true
read -r done left < <($H5CHECK status killed.h5)
echo "after kill: $done done, $left left"
[ "$left" -gt 0 ] || fail "the run finished before it was killed; the resume test proves nothing"
run_np 3 fit peaks.ini --output.file killed.h5 --resume > resumed.log
grep -q "resume: $left of 151 replica fits left" resumed.log || { cat resumed.log; fail "resume did not report $left left"; }
$H5CHECK equal full.h5 killed.h5 /central /replicas /summary || fail "resumed file differs from the uninterrupted run"
ok "kill -9 at $done/151, --resume: bitwise equal to the uninterrupted run"
# A resume with a changed config is refused and leaves the file alone.
sum_before=$(md5sum killed.h5)
expect_error 2 "different config" -- run_np 1 fit peaks.ini --output.file killed.h5 --resume --fit.seed 9
[ "$(md5sum killed.h5)" = "$sum_before" ] || fail "a refused resume changed the file"
echo "decomposition: all checks passed"

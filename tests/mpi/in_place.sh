#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Rows written in place by every rank ([output] in_place, docs/parallel-output.md): the results
# (/central, /replicas, /summary) are the bits of rank 0's writes (in_place = off) on 1 to 4
# ranks; the file is made for it (chunks allocated at creation, never filled: read by h5py, an
# independent reader); a run killed with kill -9 while rows are on disk whose status is not yet
# written, or stopped by SIGUSR1, is finished by --resume bitwise; an ensemble grown by --resume,
# and shards merged, are bitwise too; auto keeps small runs on rank 0's writes and writes 1e6
# rows (the threshold) in place, or through rank 0 with a note when a rank does not see the
# file; a bad value, the file size limit, a read-only file system, a rank that does not see the
# file and a file made for rank 0's writes resumed with on are one error line with their exit
# code, the previous file untouched.
source "$(dirname "$0")/../tools/mpi_common.sh"
export HDF5_USE_FILE_LOCKING=FALSE  # lets the probe below read the file a live run is writing
cp "$SRC/inputs/example.ini" "$SRC/inputs/decay.csv" .
# 600 rows in chunks of 256: units of 7 replicas cross chunk boundaries and share chunks between ranks.
ARGS="--fit.replicas 600 --fit.chunk 7"
SETS="/central /replicas /summary"
digest() { sha256sum "$1" | cut -d' ' -f1; }
# layout FILE: "ALLOC FILL" of /replicas/params (h5py: alloc time 1 early, 3 incremental; fill
# time 1 never, 2 if set).
layout() {
    /usr/bin/python3 - "$1" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    p = f["/replicas/params"].id.get_create_plist()
    print(p.get_alloc_time(), p.get_fill_time())
PY
}

run_np 1 fit example.ini $ARGS --output.file ref.h5 --output.in_place off > ref.log
[ "$(layout ref.h5)" = "3 2" ] || fail "in_place = off: /replicas/params not allocated chunk by chunk ($(layout ref.h5))"
for np in 1 2 3 4; do
    run_np $np fit example.ini $ARGS --output.file on$np.h5 --output.in_place on > on$np.log
    $H5CHECK equal ref.h5 on$np.h5 $SETS || fail "in_place = on, $np rank(s): results differ from rank 0's writes"
    [ "$(layout on$np.h5)" = "1 1" ] || fail "in_place = on: /replicas/params not allocated early, never filled"
    [ "$($H5CHECK get on$np.h5 /timing rows_in_place)" = 1 ] || fail "/timing says nothing of rows in place"
done
writers=$(/usr/bin/python3 -c "
import h5py
t = h5py.File('on4.h5', 'r')['/timing']
print(sum(1 for n, s in zip(t['replicas'][()], t['rows_write_seconds'][()]) if n > 0 and s > 0), int(t['replicas'][()].sum()))")
[ "$writers" = "4 601" ] || fail "4 ranks wrote 601 rows, but /timing says (ranks with writer seconds, rows) $writers"
grep -q "rows written in place by every rank" on4.log || fail "the timing table does not say rows went in place"
grep -q "^output: every rank writes its replica rows into on4.h5 itself" on4.log || fail "the plan does not say rows go in place"
! grep -q "^output: every rank writes" ref.log || fail "in_place = off announced rows in place"
ok "in_place = on, 1-4 ranks: /central, /replicas, /summary bitwise those of rank 0's writes; each rank's writer thread in /timing"

# auto: a small run stays on rank 0's writes (and their layout).
run_np 2 fit example.ini $ARGS --output.file auto.h5 > auto.log
[ "$(layout auto.h5)" = "3 2" ] || fail "auto wrote a small run in place"
$H5CHECK equal ref.h5 auto.h5 $SETS || fail "auto differs"
ok "auto: a run of 600 rows goes through rank 0 (the threshold is 1e6 rows)"

# kill -9 while rows are on disk in place and their status is not yet written (each rank's
# writer waits 2 s between its fdatasync and its receipts), then --resume on 3 ranks.
setsid bash -c "exec $MPIEXEC --oversubscribe -np 2 $EF fit example.ini $ARGS --output.file killed.h5 \
    --output.in_place on --debug.slowdown 0:300,1:300 --debug.slow-writes 2" > killed.log 2>&1 &
pid=$!
probe() {  # "DONE WRITTEN": rows with a status; rows with values on disk (chi2 > 0) and status -1
    /usr/bin/python3 - "$1" 2>/dev/null <<'PY' || echo "0 0"
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    s = f["/replicas/status"][...]
    c = f["/replicas/chi2"][...]
print(int((s >= 0).sum()), int(((s < 0) & (c > 0)).sum()))
PY
}
caught=0
kill_when_caught $pid killed.h5 probe && caught=1
[ "$caught" = 1 ] || { cat killed.log; fail "never saw rows written in place without their status"; }
read -r _ left < <($H5CHECK status killed.h5)
zeros=$(/usr/bin/python3 -c "
import h5py, numpy as np
f = h5py.File('killed.h5', 'r'); s = f['/replicas/status'][...]; p = f['/replicas/params'][...]
print(int((s < 0).sum()), int(((s < 0) & (p == 0).all(axis=1)).sum()), int(np.isnan(p).sum()))")
echo "after kill: $left fits left; rows not done / of them reading 0 / NaN values: $zeros"
read -r notdone zero nan <<< "$zeros"
[ "$left" -gt 0 ] && [ "$nan" = 0 ] && [ "$zero" -ge 1 ] || fail "a killed in-place file should read 0 (not NaN) where rows are not done"
run_np 3 fit example.ini $ARGS --output.file killed.h5 --output.in_place on --resume > resumed.log
grep -q "resume: $left of 601 replica fits left" resumed.log || { cat resumed.log; fail "resume did not report $left left"; }
$H5CHECK equal ref.h5 killed.h5 $SETS || fail "resumed in-place file differs from the uninterrupted run"
ok "kill -9 with rows on disk before their status, --resume on 3 ranks: bitwise equal ($notdone rows not done read 0, not NaN)"

# A graceful stop (SIGUSR1 to mpirun) while rows are written in place: every unit handed out is
# written and stored, exit 75; --resume finishes the file bitwise.
"$MPIEXEC" --oversubscribe -np 2 "$EF" fit example.ini $ARGS --output.file stopped.h5 --output.in_place on \
    --debug.slowdown 0:300,1:300 > stopped.out 2> stopped.log &
pid=$!
for _ in $(seq 1 600); do
    sleep 0.05
    read -r done _ < <($H5CHECK status stopped.h5 2>/dev/null || echo "0 0")
    [ "${done:-0}" -ge 1 ] && break
done
kill -USR1 $pid
for _ in $(seq 1 600); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
kill -0 $pid 2>/dev/null && { kill_run $pid; fail "the stopped in-place run did not end within 60 s"; }
rc=0
wait $pid || rc=$?
[ "$rc" = 75 ] || { cat stopped.log; fail "exit $rc after SIGUSR1, wanted 75"; }
read -r done left < <($H5CHECK status stopped.h5)
[ "$left" -gt 0 ] || fail "the run finished before the stop"
run_np 3 fit example.ini $ARGS --output.file stopped.h5 --output.in_place on --resume > stopped_resumed.log
$H5CHECK equal ref.h5 stopped.h5 $SETS || fail "an in-place run stopped by SIGUSR1 and resumed differs"
ok "SIGUSR1 while writing in place: exit 75 with $done fits stored, --resume on 3 ranks bitwise equal"

# An ensemble grown by --resume: new chunks allocated by the extension, the table read again.
run_np 2 fit example.ini --fit.replicas 300 --fit.chunk 7 --output.file grown.h5 --output.in_place on > small.log
run_np 2 fit example.ini $ARGS --output.file grown.h5 --output.in_place on --resume > grown.log
$H5CHECK equal ref.h5 grown.h5 $SETS || fail "an in-place file grown from 300 to 600 replicas differs"
run_np 2 fit example.ini --fit.replicas 300 --fit.chunk 7 --output.file grown_off.h5 --output.in_place on > small.log
run_np 2 fit example.ini $ARGS --output.file grown_off.h5 --output.in_place off --resume > grown_off.log
$H5CHECK equal ref.h5 grown_off.h5 $SETS || fail "an in-place file grown by rank 0's writes differs"
ok "--resume growing 300 -> 600 replicas, in place and by rank 0's writes into the in-place layout: bitwise equal"

# A file made for rank 0's writes, resumed (and grown) with in_place = on: refused (2) before it
# is opened for writing, byte for byte as it was.
run_np 2 fit example.ini --fit.replicas 300 --fit.chunk 7 --output.file rank0.h5 --output.in_place off > rank0.log
sum=$(digest rank0.h5)
expect_error 2 "in_place: on, but rank0.h5's /replicas were made for rows written by rank 0" -- \
    run_np 2 fit example.ini $ARGS --output.file rank0.h5 --output.in_place on --resume
[ "$(digest rank0.h5)" = "$sum" ] || fail "a refused in-place --resume changed the file"
ok "a file made with in_place = off, resumed with on: refused, unchanged"

# Shards written in place, merged (rank 0 of merge writes every row itself).
for i in 0 1; do run_np 2 fit example.ini $ARGS --shard $i/2 --output.file s$i.h5 --output.in_place on > s$i.log; done
"$EF" merge -o merged.h5 s0.h5 s1.h5 > merge.log
$H5CHECK equal ref.h5 merged.h5 $SETS || fail "merge of in-place shards differs"
ok "two shards written in place, merged: bitwise equal"

# Refusals: a bad value (2); a full disk (the file size limit, 3), the previous file untouched.
expect_error 2 "output.in_place.*unknown value 'sometimes'" -- run_np 2 fit example.ini $ARGS --output.in_place sometimes
cp on2.h5 keep.h5
sum=$(digest keep.h5)
expect_error 3 "keep.h5.creating: .*File too large.*the previous 'keep.h5' is unchanged" -- \
    "$MPIEXEC" --oversubscribe -np 2 bash -c 'trap "" XFSZ; ulimit -f 16384; exec "$0" "$@"' "$EF" fit example.ini \
    --output.file keep.h5 --overwrite --output.in_place on --fit.replicas 4000000
[ "$(digest keep.h5)" = "$sum" ] && [ ! -e keep.h5.creating ] || fail "a failed in-place --overwrite changed keep.h5"
# A read-only file system (a tmpfs remounted read-only, where mounting is allowed; root writes
# into a chmod 555 folder anyway): the output check refuses it, 2, before anything is written.
if mkdir -p ro && mount -t tmpfs -o size=4M tmpfs ro 2>/dev/null; then
    trap 'umount "$WORK/ro" 2>/dev/null || true; rm -rf "$WORK"' EXIT
    cp on2.h5 ro/keep.h5 && mount -o remount,ro ro
    for flag in --overwrite --resume; do
        expect_error 2 "cannot write 'ro/keep.h5' \(Read-only file system\)" -- \
            run_np 2 fit example.ini $ARGS --output.file ro/keep.h5 $flag --output.in_place on
    done
    [ "$(digest ro/keep.h5)" = "$(digest on2.h5)" ] || fail "a refused run on a read-only file system changed the file"
    umount ro
else
    echo "skip: no tmpfs mount here (the read-only case)"
fi
# A rank on a "node" that does not share the output folder: rank 1 in a mount namespace of its
# own with an empty tmpfs over out/ (no file there), or with another file at the new file's
# name. in_place = on: one line naming rank 1, exit 2, before the new file replaces the previous.
mkdir -p out && cp on2.h5 out/keep.h5
other_node() {  # other_node SETUP -- FIT-ARGS...: ensemblefit on 2 ranks, rank 1 after SETUP in its own mount namespace
    local setup=$1; shift 2
    "$MPIEXEC" --oversubscribe -np 2 bash -c '
        if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then
            exec unshare -m bash -c "mount -t tmpfs tmpfs out && $0 && exec \"\$@\"" _ "$@"
        fi
        exec "$@"' "$setup" "$EF" "$@"
}
ON=(fit example.ini $ARGS --output.file out/keep.h5 --overwrite --output.in_place on)
if unshare -m true 2>/dev/null; then
    expect_error 2 "in_place: on, but rank 1 .*cannot open out/keep.h5.creating for writing \(No such file" -- other_node true -- "${ON[@]}"
    expect_error 2 "in_place: on, but rank 1 .*sees another file at out/keep.h5.creating" -- \
        other_node "head -c 1048576 /dev/zero > out/keep.h5.creating" -- "${ON[@]}"
    [ "$(digest out/keep.h5)" = "$(digest on2.h5)" ] && [ "$(ls out)" = keep.h5 ] ||
        fail "a refused in-place run changed out/ ($(ls out))"
    # auto from 1e6 rows on 2+ ranks (a straight line, one iteration per fit: ~1 s): in place;
    # with rank 1 on a node that does not see the file, a note and every row through rank 0.
    write_line_problem
    BIG=(fit good.ini --fit.replicas 1000000 --fit.max_iterations 1)
    run_np 2 "${BIG[@]}" --output.file big_off.h5 --output.in_place off > big_off.log
    run_np 2 "${BIG[@]}" --output.file big_auto.h5 > big_auto.log
    [ "$(layout big_auto.h5)" = "1 1" ] && [ "$($H5CHECK get big_auto.h5 /timing rows_in_place)" = 1 ] ||
        fail "auto did not write 1e6 rows on 2 ranks in place"
    $H5CHECK equal big_off.h5 big_auto.h5 $SETS || fail "auto (in place) differs from off at 1e6 rows"
    other_node true -- "${BIG[@]}" --output.file out/big.h5 > fallback.log 2> fallback.err ||
        { cat fallback.err; fail "auto with a rank that does not see the file"; }
    grep -q "note: replica rows go through rank 0: rank 1 .*cannot open out/big.h5.creating" fallback.err ||
        { cat fallback.err; fail "auto fell back without saying why"; }
    [ "$(layout out/big.h5)" = "1 1" ] && $H5CHECK equal big_off.h5 out/big.h5 $SETS ||
        fail "auto through rank 0 into the in-place layout differs"
    ok "auto at 1e6 rows on 2 ranks: in place; with a rank that does not see the file, a note and rank 0's writes; bitwise off's"
else
    echo "skip: no mount namespace here (a rank that does not see the file; auto's fallback)"
fi
ok "refusals: a bad value (2), the file size limit (3), a read-only file system (2), a rank that does not see the file (2)"
echo "in_place: all checks passed"

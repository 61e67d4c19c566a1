#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Output safety (docs/architecture.md, "Output safety"; issue 20): one writer per output (a second
# run is refused while the first is alive, and the first run's file comes out intact); a lock left
# by kill -9 is taken over; a run killed while its output is being created leaves nothing at the
# output and --resume completes bitwise equal to an uninterrupted run; an --overwrite that fails
# (config error, disk full) keeps the previous file byte for byte; an output that is an input
# (data, config, merge shard; also through a symlink or ../) is refused whatever the flags; a disk
# that fills before the summary leaves a file that --resume finishes; merge refuses tampered
# shards (exit 3, naming shard and dataset) before writing anything.
source "$(dirname "$0")/../tools/mpi_common.sh"
export HDF5_USE_FILE_LOCKING=FALSE  # lets the checks below read files a live run is writing

# wait_done FILE N: until FILE has at least N replica fits on disk (at most 60 s).
wait_done() {
    for _ in $(seq 1 600); do
        sleep 0.1
        [ -e "$1" ] || continue
        read -r done _ < <($H5CHECK status "$1" 2>/dev/null || echo "0 0")
        [ "${done:-0}" -ge "$2" ] && return 0
    done
    fail "$1 never reached $2 replica fits"
}
digest() { sha256sum "$1" | cut -d' ' -f1; }

write_peaks_problem 2000 40 1 ref.h5
run_np 2 fit peaks.ini > ref.log
SLOW="--debug.slowdown 0:150,1:150"  # long enough for three refused runs (mpirun start-up included)

# 1. One writer: a second run of any kind on a live output is refused; the first ends intact.
setsid bash -c "exec $MPIEXEC --oversubscribe -np 2 $EF fit peaks.ini --output.file live.h5 $SLOW" > live.log 2>&1 &
live=$!
wait_done live.h5 3
[ -e live.h5.lock ] || fail "no lock file beside a live output"
expect_error 2 "live.h5' is being written by another ensemblefit run \(pid [0-9]+ on " -- \
    run_np 1 fit peaks.ini --output.file live.h5 --overwrite
expect_error 2 "being written by another ensemblefit run" -- run_np 2 fit peaks.ini --output.file live.h5 --resume
expect_error 2 "being written by another ensemblefit run" -- "$EF" predict ref.h5 --at peaks.csv -o live.h5 --overwrite
wait "$live" || { cat live.log; fail "the first run failed after a second run was refused"; }
$H5CHECK equal ref.h5 live.h5 /central /replicas /summary || fail "the first run's file is not intact"
[ ! -e live.h5.lock ] || fail "a run that ended left its lock file"
ok "a second run on a live output is refused (--overwrite, --resume, predict); the first run's file is intact"

# 2. Stale lock: kill -9 mid-run leaves the lock file; --resume takes it over and finishes bitwise.
# (Slower than SLOW, each block's write held 1 s: a slow machine must not finish before the kill.)
setsid bash -c "exec $MPIEXEC --oversubscribe -np 2 $EF fit peaks.ini --output.file stale.h5 \
    --debug.slowdown 0:400,1:400 --debug.slow-writes 1" > stale.log 2>&1 &
pid=$!
wait_done stale.h5 5
kill_run $pid
[ -e stale.h5.lock ] || fail "kill -9 left no lock file (the stale-lock test proves nothing)"
read -r done left < <($H5CHECK status stale.h5)
[ "$left" -gt 0 ] || fail "the run finished before it was killed"
run_np 2 fit peaks.ini --output.file stale.h5 --resume > stale2.log 2> stale2.err || { cat stale2.err; fail "resume after kill -9"; }
grep -q "taking over the lock left by a run that ended without releasing it (pid" stale2.err ||
    { cat stale2.err; fail "no note about the stale lock"; }
$H5CHECK equal ref.h5 stale.h5 /central /replicas /summary || fail "resumed file differs"
ok "kill -9 at $done/41: the stale lock is taken over, --resume bitwise equal to an uninterrupted run"

# 3. Killed while its output is being created (held there by --debug.hold-creating, so that no
# machine is fast enough to rename it first): nothing at the output; --resume removes the leftover
# and completes bitwise.
setsid bash -c "exec $MPIEXEC --oversubscribe -np 2 $EF fit peaks.ini --output.file big.h5 --debug.hold-creating 120" \
    > big.log 2>&1 &
pid=$!
for _ in $(seq 1 1200); do sleep 0.05; [ -e big.h5.creating ] && break; done
[ -e big.h5.creating ] || { cat big.log; fail "never saw big.h5.creating"; }
kill_run $pid
[ ! -e big.h5 ] || fail "a run killed while creating its output left a file at the output"
run_np 2 fit peaks.ini --output.file big.h5 --resume > big2.log 2>&1 || { cat big2.log; fail "resume after a kill during creation"; }
[ ! -e big.h5.creating ] || fail "the leftover big.h5.creating was not removed"
$H5CHECK equal ref.h5 big.h5 /central /replicas /summary || fail "resumed file differs"
ok "kill -9 while the output is created: no file at the output, --resume completes bitwise equal"

# A kill while the summary is written leaves replicas done and the summary incomplete (its last
# attribute, the marker, not yet written): --resume fits nothing and writes the summary.
cp ref.h5 half.h5
/usr/bin/python3 -c "
import h5py
with h5py.File('half.h5', 'r+') as f:
    del f['/summary'].attrs['replicas_used']
    f['/summary/mean'][...] = 0
" || fail "emulating a kill during the summary"
run_np 2 fit peaks.ini --output.file half.h5 --resume > half.log || { cat half.log; fail "resume of a half-written summary"; }
grep -q "resume: 0 of 41 replica fits left" half.log || { cat half.log; fail "resume did not see 0 fits left"; }
$H5CHECK equal ref.h5 half.h5 /central /replicas /summary || fail "summary rewritten by --resume differs"
ok "a summary cut short: --resume writes it, bitwise equal"

# 4. A failing --overwrite keeps the previous file byte for byte.
cp ref.h5 keep.h5
sum=$(digest keep.h5)
expect_error 2 "fit.replicas" -- run_np 2 fit peaks.ini --output.file keep.h5 --overwrite --fit.replicas -5
[ "$(digest keep.h5)" = "$sum" ] || fail "a refused --overwrite changed the previous file"
# The file size limit (ulimit -f 16 MiB, in the ranks only; MPI_Init needs a few MiB) stands in for a full disk: the
# writer ignores SIGXFSZ, so the write fails with EFBIG. /replicas takes room only as rows arrive, and a new file
# holds the replica numbers alone: 4e6 replicas (32 MB of them) overflow the limit while the file is created.
expect_error 3 "keep.h5.creating: .*File too large.*the previous 'keep.h5' is unchanged" -- \
    "$MPIEXEC" --oversubscribe -np 2 bash -c 'ulimit -f 16384; exec "$0" "$@"' "$EF" fit peaks.ini \
    --output.file keep.h5 --overwrite --fit.replicas 4000000
[ "$(digest keep.h5)" = "$sum" ] || fail "a failed --overwrite (file size limit) changed the previous file"
[ ! -e keep.h5.creating ] || fail "a failed run left its partial new file"
ok "a failing --overwrite (config error, file size limit) keeps the previous file byte for byte, no partial file"

# 5. An output that is an input is refused whatever the flags (inode, not string).
mkdir -p sub
for out in peaks.csv peaks.ini "../$(basename "$PWD")/peaks.csv" sub/../peaks.ini; do
    expect_error 2 "is the input" -- run_np 2 fit peaks.ini --output.file "$out" --overwrite
done
ln -s peaks.csv link.h5
expect_error 2 "'link.h5' is the input 'peaks.csv'" -- run_np 1 fit peaks.ini --output.file link.h5 --overwrite
ln peaks.ini hard.h5
expect_error 2 "is the input" -- run_np 1 fit peaks.ini --output.file hard.h5 --resume
ok "output = data or config (direct, ../, symlink, hard link) refused"
for i in 0 1; do run_np 2 fit peaks.ini --shard $i/2 --output.file s$i.h5 > s$i.log; done
s1=$(digest s1.h5)
expect_error 2 "'s1.h5' is the input 's1.h5'" -- "$EF" merge -o s1.h5 s0.h5 s1.h5 --overwrite
expect_error 2 "is the input 's0.h5'" -- "$EF" merge -o sub/../s0.h5 s0.h5 s1.h5 --overwrite
[ "$(digest s1.h5)" = "$s1" ] || fail "a refused merge changed its input"
ok "merge -o equal to a shard (also via ../) refused, the shard unchanged"
"$EF" simulate ptycho --out scan.h5 --scan 6 --dp 16 --modes 1 --seed 3 > scan.log
[ -e scan.h5 ] && [ ! -e scan.h5.creating ] && [ ! -e scan.h5.lock ] || fail "simulate ptycho output or leftovers"
expect_error 2 "'scan.h5' exists; pass --overwrite" -- "$EF" simulate ptycho --out scan.h5 --scan 6 --dp 16
printf '[data]\nfile = scan.h5\n[solver]\niterations = 2\nbatch_size = 8\n[output]\nfile = r.h5\n' > r.ini
expect_error 2 "'scan.h5' is the input 'scan.h5'" -- run_np 2 reconstruct r.ini --output.file scan.h5 --overwrite
expect_error 2 "'./r.ini' is the input 'r.ini'" -- run_np 1 reconstruct r.ini --output.file ./r.ini --overwrite
run_np 2 reconstruct r.ini --output.previews false > r.log || { cat r.log; fail "reconstruction"; }
[ -e r.h5 ] && [ ! -e r.h5.creating ] && [ ! -e r.h5.lock ] || fail "reconstruction output, temporary or lock file"
ok "reconstruct: output = data or config refused; its output created without leftovers"
mkdir -p outdir
expect_error 2 "'outdir' is a folder" -- run_np 1 fit peaks.ini --output.file outdir --overwrite
echo "not hdf5" > junk.h5
expect_error 3 "'junk.h5' is not an HDF5 file, so --resume cannot finish it" -- \
    run_np 2 fit peaks.ini --output.file junk.h5 --resume
ok "a folder as output (exit 2), a non-HDF5 file with --resume (exit 3)"

# 6. Merge validates every shard before writing: tampered datasets give exit 3 naming them.
/usr/bin/python3 - <<'PY' || fail "tampering"
import shutil, h5py, numpy as np
def tamper(name, fn):
    shutil.copy("s1.h5", name)
    with h5py.File(name, "r+") as f:
        fn(f)
def resize(f):
    p = f["/replicas/params"][()]
    del f["/replicas/params"]
    f["/replicas/params"] = p[:-3]
def retype(f):
    s = f["/replicas/status"][()]
    del f["/replicas/status"]
    f["/replicas/status"] = s.astype(np.float64)
def index(f):
    f["/replicas/index"][3] = 10**9
def status(f):
    f["/replicas/status"][2] = 7
def missing(f):
    del f["/replicas/chi2"]
def span(f):
    f.attrs["range_end"] = np.int64(10**6)
for name, fn in [("t_resize", resize), ("t_retype", retype), ("t_index", index), ("t_status", status),
                 ("t_missing", missing), ("t_span", span)]:
    tamper(name + ".h5", fn)
PY
expect_error 3 "t_resize.h5: dataset /replicas/params has shape 17 x 10, expected 20 x 10" -- \
    "$EF" merge -o m.h5 s0.h5 t_resize.h5
expect_error 3 "t_retype.h5: dataset /replicas/status is not of type int64" -- "$EF" merge -o m.h5 s0.h5 t_retype.h5
expect_error 3 "t_index.h5: dataset /replicas/index: row 4 holds replica 1000000000" -- \
    "$EF" merge -o m.h5 s0.h5 t_index.h5
expect_error 3 "t_status.h5: dataset /replicas/status: row 3 has status 7" -- "$EF" merge -o m.h5 s0.h5 t_status.h5
expect_error 3 "t_missing.h5: dataset /replicas/chi2 is missing" -- "$EF" merge -o m.h5 s0.h5 t_missing.h5
expect_error 3 "t_span.h5: attributes range_begin, range_end, has_central do not match" -- \
    "$EF" merge -o m.h5 s0.h5 t_span.h5
[ ! -e m.h5 ] && [ ! -e m.h5.creating ] || fail "a refused merge wrote something"
cp ref.h5 m.h5
sum=$(digest m.h5)
expect_error 3 "t_resize.h5" -- "$EF" merge -o m.h5 s0.h5 t_resize.h5 --overwrite
[ "$(digest m.h5)" = "$sum" ] || fail "a refused merge --overwrite changed the previous output"
"$EF" merge -o m.h5 s0.h5 s1.h5 --overwrite > merge.log
$H5CHECK equal ref.h5 m.h5 /central /replicas /summary || fail "merge of good shards"
ok "merge: tampered shards (resized, retyped, index, status, missing, range) exit 3, nothing written"

# 7. A disk that fills before the summary (a 2 MiB tmpfs, where mounting is allowed): exit 3
# saying the file is kept for --resume; with room again --resume completes bitwise.
if mkdir -p disk && mount -t tmpfs -o size=2M tmpfs disk 2>/dev/null; then
    trap 'umount "$WORK/disk" 2>/dev/null || true; rm -rf "$WORK"' EXIT
    expect_error 3 "disk/full.h5.creating: .*No space left on device.*nothing was written" -- \
        run_np 2 fit peaks.ini --output.file disk/full.h5 --fit.replicas 400000  # 3.2 MB of replica numbers
    [ -z "$(ls disk)" ] || fail "a run on a full disk left $(ls disk)"
    setsid bash -c "exec $MPIEXEC --oversubscribe -np 2 $EF fit peaks.ini --output.file disk/sum.h5 $SLOW" \
        > sum.log 2>&1 &
    pid=$!
    wait_done disk/sum.h5 5
    kill_run $pid
    echo "an earlier prediction" > disk/pred.csv
    "$EF" predict ref.h5 --at peaks.csv -o disk/pred.h5 2> /dev/null || fail "predict on a disk with room"
    cp disk/pred.csv pred.csv.orig && cp disk/pred.h5 pred.h5.orig
    head -c 16384 /dev/zero > disk/room   # freed below: room for the lock files, not a prediction
    dd if=/dev/zero of=disk/filler bs=64k 2>/dev/null || true
    rm disk/room
    # predict on a full disk: exit 3, the earlier files of those names as they were, no temporary.
    for f in pred.csv pred.h5; do
        expect_error 3 "disk/$f" -- "$EF" predict ref.h5 --at peaks.csv -o "disk/$f" --overwrite --replicas
        cmp -s "disk/$f" "$f.orig" || fail "predict on a full disk changed disk/$f"
        [ ! -e "disk/$f.creating" ] || fail "predict on a full disk left disk/$f.creating"
    done
    rm disk/pred.csv disk/pred.h5
    dd if=/dev/zero of=disk/filler2 bs=4k 2>/dev/null || true
    # A failure mid-run ends the job from rank 0 (abort_run names the rank and host).
    rc=0
    run_np 2 fit peaks.ini --output.file disk/sum.h5 --resume > full.out 2> full.err || rc=$?
    [ "$rc" = 3 ] || { cat full.err; fail "disk full before the summary: exit $rc, wanted 3"; }
    [ "$(grep -c '^ensemblefit: error' full.err)" = 1 ] &&
        grep -q "^ensemblefit: error: rank 0 ([^)]*): disk/sum.h5: no room to write the summary and the timing .*No space left on device); disk/sum.h5 keeps every finished replica: run again with --resume to finish it" full.err ||
        { cat full.err; fail "disk full before the summary: not one line saying the file is resumable"; }
    rm disk/filler disk/filler2
    run_np 2 fit peaks.ini --output.file disk/sum.h5 --resume > sum2.log 2>&1 || { cat sum2.log; fail "resume after disk full"; }
    $H5CHECK equal ref.h5 disk/sum.h5 /central /replicas /summary || fail "resumed file differs"
    umount disk
    ok "disk full at creation: exit 3, nothing left; full before the summary: exit 3, --resume completes bitwise"
else
    echo "skip: cannot mount a tmpfs here (not root); the file size limit above stands in for a full disk"
fi
echo "output_safety: all checks passed"

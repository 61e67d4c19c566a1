#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The results writer (issue #27; src/io/replica_writer.*): rank 0 gathers finished units and
# writes them in large blocks from a thread of its own, values first, status last. A run with
# slow writes (--debug.slow-writes) gives the same datasets as one without; a run killed with
# kill -9 in the middle of a buffered write (its values on disk, its status not yet) is finished
# by --resume, on another number of ranks, bitwise equal to an uninterrupted run.
source "$(dirname "$0")/../tools/mpi_common.sh"
export HDF5_USE_FILE_LOCKING=FALSE  # lets the probe below read the file a live run is writing
cp "$SRC/inputs/example.ini" "$SRC/inputs/decay.csv" .
ARGS="--fit.replicas 400 --fit.chunk 2"

# probe FILE: "DONE WRITTEN": rows with a status, and rows whose values are on disk but whose
# status is still -1 (a write in progress). A row's replica number is written with its values
# (a row not written reads 0), whichever way the rows are written: a NaN probe of params would
# count every row not done of a file whose rows are written in place (they read 0 there).
probe() {
    /usr/bin/python3 - "$1" 2>/dev/null <<'PY' || echo "0 0"
import sys
import h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    s = f["/replicas/status"][...]
    i = f["/replicas/index"][...]
print(int((s >= 0).sum()), int(((s < 0) & (i != 0)).sum()))
PY
}

run_np 2 fit example.ini $ARGS --output.file full.h5 > full.log
run_np 2 fit example.ini $ARGS --output.file slow.h5 --debug.slow-writes 0.3 > slow.log
$H5CHECK equal full.h5 slow.h5 /central /replicas /summary || fail "slow writes changed the results"
ok "--debug.slow-writes 0.3: the same /central, /replicas, /summary"
[ "$($H5CHECK get full.h5 /timing writer_blocks)" -ge 1 ] || fail "/timing has no writer_blocks"
[ "$($H5CHECK get full.h5 /central/status)" = "[0]" ] || fail "central fit missing"

# Kill during a buffered write: units arrive over ~8 s (slowed workers), each write waits 2 s
# between its values and its status; kill as soon as a block's values are on disk without its
# status.
setsid bash -c "exec $MPIEXEC --oversubscribe -np 2 $EF fit example.ini $ARGS --output.file killed.h5 \
    --debug.slowdown 0:400,1:400 --debug.slow-writes 2" > killed.log 2>&1 &
pid=$!
caught=0
kill_when_caught $pid killed.h5 probe && caught=1
[ "$caught" = 1 ] || { cat killed.log; fail "never saw a write in progress"; }
read -r done written < <(probe killed.h5)
read -r _ left < <($H5CHECK status killed.h5)
echo "after kill: $done rows done, $written rows with values but no status, $left replica fits left"
[ "$written" -ge 1 ] || fail "the kill missed the write in progress; the test proves nothing"
[ "$left" -gt 0 ] || fail "the run finished before it was killed"
run_np 3 fit example.ini $ARGS --output.file killed.h5 --resume > resumed.log
grep -q "resume: $left of 401 replica fits left" resumed.log || { cat resumed.log; fail "resume did not report $left left"; }
$H5CHECK equal full.h5 killed.h5 /central /replicas /summary || fail "resumed file differs from the uninterrupted run"
ok "kill -9 during a buffered write ($written rows written, status not yet), --resume on 3 ranks: bitwise equal"
echo "writer: all checks passed"

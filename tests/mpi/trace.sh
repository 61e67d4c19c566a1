#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `--trace FILE.json`: a Chrome trace-event file (Perfetto, chrome://tracing) with one track per
# rank whose phase events add up to that rank's wall time in /timing within 1 %, for a fit and
# a reconstruction; bounded in size; an unwritable trace path is a usage error.
source "$(dirname "$0")/../tools/mpi_common.sh"
cp "$SRC/inputs/example.ini" "$SRC/inputs/decay.csv" "$SRC/inputs/ptycho.ini" "$SRC/inputs/ptycho_small.h5" .

check_trace() {  # TRACE.json RESULT.h5 RANKS
    /usr/bin/python3 - "$@" <<'PY'
import json, sys, h5py
path, result, ranks = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(path) as f:
    doc = json.load(f)  # a parser: the whole file must be valid JSON
events = doc["traceEvents"]
names = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"}
assert sorted(names) == list(range(ranks)), names
phases = {"setup", "compute", "comm", "sync", "sched", "idle", "io"}
wall = h5py.File(result, "r")["/timing/wall"][...]
for r in range(ranks):
    mine = sorted((e for e in events if e.get("ph") == "X" and e["tid"] == r), key=lambda e: e["ts"])
    assert mine, f"rank {r}: no events"
    for e in mine:
        assert e["name"] in phases and e["cat"] == "phase" and e["pid"] == 0 and e["dur"] >= 0, e
        assert abs(sum(e["args"].values()) * 1e6 - e["dur"]) <= 1e-3 * e["dur"] + 0.01, e
    for a, b in zip(mine, mine[1:]):  # one phase at a time: the events tile the rank's time
        assert abs(a["ts"] + a["dur"] - b["ts"]) < 0.01, (a, b)
    total = sum(e["dur"] for e in mine) / 1e6
    assert abs(total - wall[r]) <= 0.01 * wall[r], (r, total, wall[r])
    print(f"rank {r}: {len(mine)} events, {total:.4f} s of {wall[r]:.4f} s wall; {names[r]}")
PY
}

run_np 2 fit example.ini --fit.replicas 60 --fit.chunk 2 --trace fit.json --output.file fit.h5 > fit.log
check_trace fit.json fit.h5 2 || fail "fit trace"
ok "fit on 2 ranks: one track per rank, phases add up to each rank's wall time"

run_np 2 reconstruct ptycho.ini --solver.iterations 3 --output.previews false --trace recon.json \
    --output.file recon.h5 > recon.log
check_trace recon.json recon.h5 2 || fail "reconstruction trace"
ok "reconstruction on 2 ranks: one track per rank, phases add up to each rank's wall time"

# The roofline rows of each problem's model work: /timing/kernels and report --roofline.
/usr/bin/python3 - <<'PY' || fail "roofline rows"
import h5py
for path, name in (("fit.h5", "lm"), ("recon.h5", "gradient")):
    for g in ("/timing/kernels/" + name, "/timing/runs/0/kernels/" + name):
        a = h5py.File(path, "r")[g].attrs
        assert a["seconds"] > 0 and a["bytes"] > 0, (path, dict(a))
        assert abs(a["achieved_bytes_per_second"] - a["bytes"] / a["seconds"]) <= 1e-9 * a["bytes"] / a["seconds"]
    print(path, name, dict(h5py.File(path, "r")["/timing/kernels/" + name].attrs))
assert h5py.File("fit.h5", "r")["/timing/kernels/lm"].attrs["flops"] > 0
PY
"$EF" report fit.h5 recon.h5 --roofline > roof.log
grep -q "^  lm  " roof.log && grep -q "^  gradient  " roof.log || { cat roof.log; fail "report --roofline rows"; }
ok "roofline rows: lm (fit) and gradient (reconstruction) in /timing/kernels and report --roofline"

# Bounded: thousands of short units (one replica each) stay under the per-rank event cap.
run_np 2 fit example.ini --fit.replicas 3000 --fit.chunk 1 --trace many.json --output.file many.h5 > many.log
check_trace many.json many.h5 2 || fail "trace of many units"
size=$(stat -c %s many.json)
[ "$size" -lt 8000000 ] || fail "trace of 3000 units is $size bytes"
ok "3000 one-replica units: $size bytes"

mkdir ro && chmod 555 ro
if [ "$(id -u)" != 0 ]; then
    expect_error 2 "cannot write the trace file" -- run_np 1 fit example.ini --trace ro/t.json --output.file ro2.h5
fi
expect_error 2 "cannot write the trace file" -- run_np 1 fit example.ini --trace nofolder/t.json --output.file t2.h5

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `--trace FILE.json`: a Chrome trace-event file (Perfetto, chrome://tracing) with one track per
# rank whose phase events add up to that rank's wall time in /timing within 1 %, for a fit and
# a reconstruction; bounded in size; an unwritable trace path is a usage error. Roofline rows
# (/timing/kernels) for every phase of model work of the fit's paths and the reconstruction's
# sequences. GPU ranks (device track, gpu_* rows, host/device split): tests/gpu/trace_gpu.sh.
source "$(dirname "$0")/../tools/mpi_common.sh"
cp "$SRC/inputs/example.ini" "$SRC/inputs/decay.csv" "$SRC/inputs/ptycho.ini" "$SRC/inputs/ptycho_small.h5" \
    "$SRC/inputs/stats2.ini" "$SRC/inputs/dis-mellin-lo.h5" .

# check_rows FILE ROW[:fb] ...: each row in /timing/kernels and the run's record, timed (seconds
# > 0), its achieved rates consistent; f: FLOPs counted, b: bytes counted; gpu_* rows against
# the probed ceilings.
check_rows() {
    /usr/bin/python3 - "$@" <<'PY'
import sys, h5py
path, rows = sys.argv[1], sys.argv[2:]
f = h5py.File(path, "r")
have = sorted(f["/timing/kernels"])
print(path, "rows:", " ".join(have))
for spec in rows:
    name, _, want = spec.partition(":")
    assert name in have, (path, name, have)
    for g in ("/timing/kernels/" + name, "/timing/runs/0/kernels/" + name):
        a = f[g].attrs
        assert a["seconds"] > 0, (path, g, dict(a))
        if "f" in want:
            assert a["flops"] > 0 and abs(a["achieved_flops_per_second"] - a["flops"] / a["seconds"]) <= 1e-9 * a["flops"] / a["seconds"], (g, dict(a))
        if "b" in want:
            assert a["bytes"] > 0 and abs(a["achieved_bytes_per_second"] - a["bytes"] / a["seconds"]) <= 1e-9 * a["bytes"] / a["seconds"], (g, dict(a))
        if name.startswith("gpu_"):
            assert a["ceiling_flops_per_second"] > 0 and a["ceiling_bytes_per_second"] > 0, (g, dict(a))
            assert "f" not in want or a["fraction_of_ceiling"] > 0, (g, dict(a))
PY
}

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

# The roofline rows of each problem's model work: /timing/kernels and report --roofline. The
# fit above runs the per-replica path (one row, lm); stats2 the batched table path; the
# reconstruction the FFTW sequence (with position correction) and the window-resident passes.
check_rows fit.h5 lm:fb || fail "roofline rows of the per-replica path"
run_np 1 fit stats2.ini --fit.replicas 3 --run.threads 2 --output.file table.h5 > table.log
check_rows table.h5 resample:b moments:fb gemm:fb lm_steps:fb || fail "roofline rows of the batched path"
check_rows recon.h5 gradient:b stage exit_waves_fft:fb modulus ifft_far_field:fb patch_gradients object_gradient \
    object_step:fb probe_step:fb || fail "roofline rows of the reconstruction"
run_np 1 reconstruct ptycho.ini --solver.iterations 2 --output.previews false --positions.correct true \
    --tuning.window on --output.file window.h5 > window.log
check_rows window.h5 window_forward:fb window_backward:fb probe_spectrum object_step:fb || fail "window passes' rows"
run_np 1 reconstruct ptycho.ini --solver.iterations 2 --output.previews false --positions.correct true \
    --output.file positions.h5 > positions.log
check_rows positions.h5 fft_probe_gradient:fb probe_spectrum_positions || fail "position correction's rows"
"$EF" report fit.h5 table.h5 recon.h5 window.h5 --roofline --different-work > roof.log
for row in lm gemm moments lm_steps gradient exit_waves_fft window_forward object_step; do
    grep -q "^  $row  " roof.log || { cat roof.log; fail "report --roofline: no row $row"; }
done
ok "roofline rows for every phase of model work (fit: both paths; reconstruction: both sequences) and report --roofline"

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

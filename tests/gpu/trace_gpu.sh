#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# GPU ranks' roofline, trace and host/device split (issue #26), end to end through the CLI:
# a batched fit (stats2, 2 ranks sharing GPU 0), a per-replica fit (example, 1 rank) and a
# reconstruction (ptycho, 2 ranks): each rank's device track in the --trace JSON (CUDA events,
# tid 1000 + rank), gpu_* rows in `report --roofline` with a fraction of the probed ceiling, and
# the host/device split in the run's table. Needs only the programs and a python3 with the
# standard library (json), so it runs from the bundle on the GPU machine:
#   source .gpu-run/env.sh && source perf/recon/bench_config.sh && gpu_machine_env
#   bash tests/gpu/trace_gpu.sh "$(command -v ensemblefit)" mpirun
# Exits 77 (skipped) where no GPU is visible.
source "$(dirname "$0")/../tools/mpi_common.sh"
PY=${EF_TEST_PYTHON:-python3}
command -v "$EF" > /dev/null || fail "no program $EF"
"$EF" devices --no-probe | grep -q "SMs" || { echo "no CUDA device visible: skipped"; exit 77; }
cp "$SRC/inputs/example.ini" "$SRC/inputs/decay.csv" "$SRC/inputs/ptycho.ini" "$SRC/inputs/ptycho_small.h5" \
    "$SRC/inputs/stats2.ini" "$SRC/inputs/dis-mellin-lo.h5" .

check_device_track() {  # TRACE.json RANKS: every rank's device track, named, with kernel intervals
    "$PY" - "$@" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
ranks = int(sys.argv[2])
ev = doc["traceEvents"]
names = {e["tid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e["name"] == "thread_name"}
for r in range(ranks):
    assert "device" in names.get(1000 + r, ""), (r, names)
    dev = [e for e in ev if e.get("ph") == "X" and e["tid"] == 1000 + r]
    assert dev and all(e["cat"] == "device" and e["dur"] >= 0 for e in dev), (r, dev[:3])
    print(f"rank {r}: {len(dev)} device intervals of {sorted(set(e['name'] for e in dev))}")
PY
}

# check_roofline RESULT.h5 ROW...: each row in report --roofline, with a fraction of the ceiling.
check_roofline() {
    local file=$1; shift
    "$EF" report "$file" --roofline > roof.log
    cat roof.log
    for row in "$@"; do
        awk -v r="$row" '$1 == r && $8 != "n/a" && $8 + 0 > 0 { found = 1 } END { exit !found }' roof.log ||
            fail "$file: no row $row with a fraction of the ceiling"
    done
}

run_np 2 fit stats2.ini --fit.replicas 64 --run.workers gpu --trace gfit.json --output.file gfit.h5 > gfit.log
check_device_track gfit.json 2 || fail "GPU batched fit: device track"
check_roofline gfit.h5 gpu_moments gpu_gemm gpu_lm_steps
grep -A3 "host/device split" gfit.log || fail "GPU batched fit: no host/device split"
ok "GPU batched fit on 2 ranks: device tracks, gpu_* rows against the probed ceilings, host/device split"

run_np 1 fit example.ini --run.workers gpu --trace gqr.json --output.file gqr.h5 > gqr.log
check_device_track gqr.json 1 || fail "GPU per-replica fit: device track"
check_roofline gqr.h5 gpu_lm
ok "GPU per-replica fit: the LM kernel's row and device track"

run_np 2 reconstruct ptycho.ini --solver.iterations 3 --output.previews false --run.workers gpu \
    --trace grecon.json --output.file grecon.h5 > grecon.log
check_device_track grecon.json 2 || fail "GPU reconstruction: device track"
check_roofline grecon.h5 gpu_window_forward gpu_window_backward
grep -A3 "host/device split" grecon.log || fail "GPU reconstruction: no host/device split"
ok "GPU reconstruction on 2 ranks: device tracks, gpu_* rows, host/device split"

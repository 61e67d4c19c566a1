#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The cost of streaming the patterns (run.stream; issue 25, data larger than the GPU) at the
# tBL-WSe2 shape on one GPU: the benchmark of perf/recon/gpu_run.sh (16384 patterns 128 x 128, 12
# modes, object 592 x 592, batch 256, position correction on; 1.0 GiB of patterns, resident by
# default) with run.stream = off (resident) and on (streamed), in rounds (off, on, off, on, ...:
# drift of the machine falls on both alike). Per run: seconds per iteration (/timing, mean without
# the first), and for the streamed ones the uploads' copy time and the compute stream's wait for
# them (upload_seconds, upload_wait_seconds). Then the overhead (median on / median off - 1; goal
# < 10 %), the default run's s/iteration (goal: not above 0.097 s on one H100) and whether on and
# off reconstructed the same bits (/object, /probe, /positions, /loss).
#   on the GPU machine, from the repository root with .gpu-run carried (perf/recon/gpu_run.sh prepare):
#   source .gpu-run/env.sh && OUT=$OUT bash perf/recon/stream_overhead.sh [ROUNDS] [ITERATIONS]
# Writes $OUT/stream.log and $OUT/stream.json.
set -uo pipefail
cd "${EF_REPO:-$(dirname "$0")/../..}"
ROUNDS=${1:-3}
ITERS=${2:-12}
OUT=${OUT:-$PWD/perf/recon/out}
mkdir -p "$OUT"
W=$(mktemp -d /tmp/ef-stream.XXXXXX)
source perf/recon/bench_config.sh
gpu_machine_env
write_bench_ini "$W/bench.ini" "$ITERS"
cd "$W"
{
nvidia-smi -L
simulate_bench > /dev/null || echo "!! simulate failed"
for round in $(seq "$ROUNDS"); do
    for mode in off on; do
        ensemblefit reconstruct bench.ini --run.stream "$mode" --output.file "${mode}_$round.h5" --overwrite \
            > "${mode}_$round.log" 2>&1 || { echo "!! run.stream = $mode failed"; tail -5 "${mode}_$round.log"; continue; }
        grep -E "^(gpu 0: patterns streamed|streamed patterns:|per iteration:)" "${mode}_$round.log" | sed "s/^/round $round, $mode: /"
    done
done
# A run with the default (auto: resident here) and the phase trace of one streamed run (where the
# compute stream waits: the "stream wait" phase; the trace's events cost a little, so not timed).
ensemblefit reconstruct bench.ini --output.file default.h5 --overwrite > default.log 2>&1 || echo "!! default run failed"
grep -q "patterns streamed" default.log && echo "!! run.stream = auto streamed the 1 GiB benchmark"
EF_RECON_PHASES=1 ensemblefit reconstruct bench.ini --run.stream on --solver.iterations 3 --output.file phases.h5 \
    --overwrite > phases.log 2>&1 || echo "!! phase trace failed"
grep -E "stream wait|window forward|stage|total" phases.log
py - "$OUT/stream.json" "$ROUNDS" <<'PY'
import glob, json, statistics, sys, h5py, numpy as np
out, rounds = sys.argv[1], int(sys.argv[2])
def timing(f):
    t = h5py.File(f, "r")["/timing"]
    cols = {k: float(t[k][0]) for k in ("upload_seconds", "upload_wait_seconds") if k in t}
    return float(t.attrs["seconds_per_iteration"]), cols
res = {"runs": []}
spi = {"off": [], "on": []}
for r in range(1, rounds + 1):
    for mode in ("off", "on"):
        try:
            s, cols = timing(f"{mode}_{r}.h5")
        except Exception as e:
            print(f"round {r} {mode}: no result ({e})")
            continue
        spi[mode].append(s)
        res["runs"].append({"round": r, "stream": mode, "seconds_per_iteration": s, **cols})
        print(json.dumps(res["runs"][-1]))
if spi["off"] and spi["on"]:
    off, on = statistics.median(spi["off"]), statistics.median(spi["on"])
    res.update(off_median=off, on_median=on, overhead=on / off - 1)
    print(f"streaming overhead: {100 * (on / off - 1):.1f} % (median {on:.4f} vs {off:.4f} s/iteration; goal < 10 %)")
try:
    d, _ = timing("default.h5")
    res["default_seconds_per_iteration"] = d
    print(f"default (run.stream = auto): {d:.4f} s/iteration (goal: <= 0.097 s on one H100)")
except Exception as e:
    print(f"default run: no result ({e})")
try:
    a, b = h5py.File("off_1.h5", "r"), h5py.File("on_1.h5", "r")
    same = {k: bool(np.array_equal(a[k][...], b[k][...])) for k in ("/object", "/probe", "/positions", "/loss")}
    res["bitwise_on_vs_off"] = same
    print("run.stream on vs off: " + ", ".join(f"{k} {'bitwise' if v else 'DIFFERENT'}" for k, v in same.items()))
except Exception as e:
    print(f"on vs off: not compared ({e})")
json.dump(res, open(out, "w"), indent=1)
PY
} 2>&1 | grep --line-buffered -vE "pmix|dlopen|Perhaps" | tee "$OUT/stream.log"
rm -rf "$W"

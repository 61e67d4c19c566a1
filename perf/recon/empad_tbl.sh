#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue 38: a reconstruction from an EMPAD raw file at the tBL-WSe2 benchmark's shape, end to end
# from the raw file: `simulate ptycho --format empad` writes tbl.raw (16384 frames of 128 x 128
# float32 + 2 rows, in scan order: 1.09 GB) and tbl.truth.h5; `reconstruct` reads the raw file with
# the scan's shape and step from the config (no positions in the file), 12 probe modes and
# otherwise the defaults (batch auto = 256 at this size, 50 iterations, probe.defocus = auto,
# the detector preprocessing on). Prints the whole command's seconds (exec to exit, one rank)
# and the phase NRMSE against the truth.
#
#   bash perf/recon/empad_tbl.sh            # GPU machine, repository root, the bundle of
#                                           # `perf/recon/gpu_run.sh prepare` as .gpu-run: one GPU
#   LOCAL=1 bash perf/recon/empad_tbl.sh    # a CPU machine with ensemblefit on PATH: SCAN=16
#                                           # (256 frames), CPU workers, the same config otherwise
# SCAN, MODES and ITERS override the scan side (128), the modes (12) and the iterations (50).
# Output: $OUT/empad_tbl.log and a TSV line (device, scan, modes, iterations, whole seconds,
# s/iteration, phase NRMSE %).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/perf/recon/out-empad}
mkdir -p "$OUT"
W=$(mktemp -d /tmp/ef-empad.XXXXXX)
SCAN=${SCAN:-128} MODES=${MODES:-12} ITERS=${ITERS:-50} WORKERS=gpu
if [ "${LOCAL:-0}" = 1 ]; then
    SCAN=${SCAN_LOCAL:-16} WORKERS=cpu
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    py() { /usr/bin/python3 "$@"; }
    DEVICE="CPU $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
else
    source perf/recon/bench_config.sh
    source .gpu-run/env.sh
    gpu_machine_env
    export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
    DEVICE="$(nvidia-smi -L | head -1)"
fi
cd "$W"
{
echo "== EMPAD raw at the tBL-WSe2 shape: scan $SCAN x $SCAN, 128 x 128 frames, $MODES modes, $ITERS iterations ($(date -u +%FT%TZ))"
echo "device: $DEVICE"
# The benchmark's data (perf/recon/bench_config.sh simulate_bench): a raster of step 2.87 px
# (0.4290 A / 0.1494 A per pixel) with 0.15 px of jitter, 1e6 counts per pattern, object 592 x 592
# at SCAN 128 (derived from the scan otherwise).
obj=()
[ "$SCAN" = 128 ] && obj=(--object-size 592)
ensemblefit simulate ptycho --format empad --out tbl.raw --scan "$SCAN" --dp 128 --modes 12 --dose 1e6 \
    --jitter 0.15 --scan-pattern raster --step 2.87 "${obj[@]}" --threads "$(nproc)" --overwrite || echo "!! simulate failed"
ls -l tbl.raw tbl.truth.h5
cat > tbl.ini <<INI
[data]
file = tbl.raw
scan_shape = $SCAN,$SCAN
scan_step = 2.87
truth = tbl.truth.h5
[model]
modes = $MODES
[solver]
iterations = $ITERS
[run]
workers = $WORKERS
[output]
file = tbl_out.h5
INI
cat tbl.ini
t0=$(date +%s.%N)
ensemblefit reconstruct tbl.ini > reconstruct.log 2>&1
rc=$?
t1=$(date +%s.%N)
grep -v '^ *[0-9]* *[0-9.]* ' reconstruct.log
secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
echo "whole command (exec to exit): $secs s, exit $rc"
py - "$DEVICE" "$SCAN" "$MODES" "$ITERS" "$secs" "$OUT/empad_tbl.tsv" <<'PY'
import sys, h5py
device, scan, modes, iters, secs, tsv = sys.argv[1:7]
f = h5py.File("tbl_out.h5", "r")
row = [device, scan, modes, iters, secs, "%.4f" % f["/timing"].attrs["seconds_per_iteration"],
       "%.3f" % (100 * f.attrs["phase_nrmse"])]
print("tsv:", "\t".join(row))
open(tsv, "a").write("\t".join(row) + "\n")
PY
} 2>&1 | tee -a "$OUT/empad_tbl.log"
cp "$W"/tbl_out*.png "$OUT"/ 2>/dev/null
rm -rf "$W"

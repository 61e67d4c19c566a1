#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Variants of the N-GPU benchmark side by side in one run (issue 6's scaling): the
# tBL-WSe2-shaped benchmark, for each variant, on 1 GPU at batch 256, on 1 GPU at one GPU's share
# of it on M GPUs (SHARE=M: batch 256 / M, the M-GPU step without the sum over GPUs) and on N
# GPUs, in rounds (variants interleaved, so drift of the machine falls on all of them alike). A
# variant is NAME or NAME:--KEY=VALUE[,--KEY=VALUE...] (config overrides, e.g. [tuning] keys, for
# that variant's runs only).
#   source .gpu-run/env.sh && OUT=$OUT VARIANTS="base apart:--tuning.window_clusters=false" \
#       SHARE=4 bash perf/recon/ab_scaling.sh [N] [ROUNDS]
# Prints seconds per iteration and efficiency (against the variant's 1-GPU run of the round) per
# variant and round; with SHARE=M also the bound on M GPUs' efficiency with a free sum over GPUs
# (1 GPU at batch 256 against 1 GPU at 256 / M, per iteration: the same positions in M times the
# steps) and the step's time alone; $OUT/ab.log.
set -uo pipefail
cd "${EF_REPO:-$(dirname "$0")/../..}"
N=${1:-4}
ROUNDS=${2:-2}
OUT=${OUT:-$PWD/perf/recon/out}
mkdir -p "$OUT"
W=$(mktemp -d /tmp/ef-ab.XXXXXX)
source perf/recon/bench_config.sh
gpu_machine_env
write_bench_ini "$W/bench.ini" "${ITERATIONS:-12}"
cd "$W"
# seconds per iteration of the last run's output file
spi() { py -c "import h5py, sys; print(h5py.File(sys.argv[1], 'r')['/timing'].attrs['seconds_per_iteration'])" "$1"; }
{
nvidia-smi -L
simulate_bench > /dev/null
share=$((256 / ${SHARE:-1}))
for round in $(seq "$ROUNDS"); do
    for v in ${VARIANTS:-base}; do
        name=${v%%:*}
        opts=()
        [ "$name" != "$v" ] && IFS=, read -r -a opts <<< "${v#*:}"
        ensemblefit reconstruct bench.ini "${opts[@]}" --output.file one.h5 --overwrite > one.log 2>&1 \
            || { echo "!! $name failed on 1 GPU"; tail -5 one.log; continue; }
        one=$(spi one.h5)
        if [ "${SHARE:-0}" -gt 0 ]; then
            ensemblefit reconstruct bench.ini "${opts[@]}" --solver.batch_size "$share" --output.file share.h5 \
                --overwrite > share.log 2>&1 || { echo "!! $name failed at batch $share"; tail -5 share.log; continue; }
            part=$(spi share.h5)
        fi
        mpirun --bind-to none --oversubscribe -np "$N" ensemblefit reconstruct bench.ini "${opts[@]}" \
            --output.file "v_$name.h5" --overwrite > "v_$name.log" 2>&1 || { echo "!! $name failed"; tail -5 "v_$name.log"; continue; }
        s=$(spi "v_$name.h5")
        # steps per iteration: 16384 / 256 on N GPUs, 16384 / share alone
        py -c "
import sys
r, name, n, one, s, part, m = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), sys.argv[6], int(sys.argv[7])
line = f'round {r}: {name:<12} 1 GPU {one:.4f}, {n} GPUs {s:.4f} s/iter, {100 * one / (n * s):.1f} %'
if part:
    part = float(part)
    line += (f'; 1 GPU at batch {256 // m} {part:.4f} s/iter: {m} GPUs with a free sum {100 * one / part:.1f} %; '
             f'step {1e6 * one / 64:.0f} us at 256, {1e6 * part / (16384 / (256 // m)):.0f} us at {256 // m}, '
             f'{1e6 * s / 64:.0f} us on {n} GPUs')
print(line)" "$round" "$name" "$N" "$one" "$s" "${part:-}" "${SHARE:-1}"
    done
done
# each variant's reconstruction against the first's: the same bits?
py - ${VARIANTS:-base} <<'PY'
import sys, h5py, numpy as np
names = [v.split(":")[0] for v in sys.argv[1:]]
ref = h5py.File(f"v_{names[0]}.h5", "r")
for n in names[1:]:
    f = h5py.File(f"v_{n}.h5", "r")
    out = []
    for k in ("/object", "/probe", "/loss"):
        x, y = f[k][...], ref[k][...]
        out.append(f"{k} {'bitwise' if np.array_equal(x, y) else f'{np.abs(x - y).max() / np.abs(y).max():.2e}'}")
    print(f"{n} vs {names[0]}: " + ", ".join(out))
PY
} 2>&1 | grep -vE "pmix|dlopen|Perhaps" | tee "$OUT/ab.log"
rm -rf "$W"

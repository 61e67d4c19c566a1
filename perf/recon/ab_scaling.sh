#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Variants of the N-GPU benchmark side by side in one run (issue 6's scaling): the
# tBL-WSe2-shaped benchmark on 1 GPU and, for each variant, on N GPUs, in rounds (variants
# interleaved, so drift of the machine falls on all of them alike). A variant is NAME or
# NAME:VAR=VALUE[,VAR=VALUE...] (environment for that run only).
#   source .gpu-run/env.sh && OUT=$OUT VARIANTS="base late:EF_RECON_LATE_OBJECT_SUM=1" \
#       bash perf/recon/ab_scaling.sh [N] [ROUNDS]
# Prints seconds per iteration and efficiency (against the round's 1-GPU run) per variant and
# round; $OUT/ab.log.
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
ensemblefit simulate ptycho --out bench.h5 --scan 128 --dp 128 --modes 12 --dose 1e6 --object-size 592 \
    --jitter 0.15 --threads "$(nproc)" > /dev/null
for round in $(seq "$ROUNDS"); do
    ensemblefit reconstruct bench.ini --output.file one.h5 --overwrite > /dev/null 2>&1
    one=$(spi one.h5)
    echo "round $round: 1 GPU $one s/iter"
    for v in ${VARIANTS:-base}; do
        name=${v%%:*}
        envs=()
        [ "$name" != "$v" ] && IFS=, read -r -a envs <<< "${v#*:}"
        env "${envs[@]}" mpirun --bind-to none --oversubscribe -np "$N" ensemblefit reconstruct bench.ini \
            --output.file "v_$name.h5" --overwrite > "v_$name.log" 2>&1 || { echo "!! $name failed"; tail -5 "v_$name.log"; continue; }
        s=$(spi "v_$name.h5")
        py -c "import sys; s, one = float(sys.argv[2]), float(sys.argv[3]); print(f'round {sys.argv[1]}: {sys.argv[4]:<12} {s:.4f} s/iter, {100 * one / ($N * s):.1f} %')" \
            "$round" "$s" "$one" "$name"
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

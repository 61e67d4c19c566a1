#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Time, grid and block of every kernel of one deferred benchmark-shaped step (issue 6), with
# Nsight Compute (base clocks, caches flushed: proportions, not run times). BATCHES picks the
# batch sizes (64: the share of one GPU of four at batch 256). On the GPU machine:
#   source .gpu-run/env.sh && OUT=$OUT BATCHES="64 256" bash perf/recon/ncu_kernels.sh
# The last step's kernels are the last ~25 rows of $OUT/ncu_kernels_b<B>.csv.
set -uo pipefail
cd "${EF_REPO:-$(dirname "$0")/../..}"
OUT=${OUT:-$PWD/perf/recon/out}
mkdir -p "$OUT"
ORIG_LD=${LD_LIBRARY_PATH:-}
py() { LD_LIBRARY_PATH="$ORIG_LD" python3 "$@"; }
export EF_SOURCE_DIR=$PWD
source perf/recon/bench_config.sh
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/usr/local/cuda/lib64:$(nvidia_wheel_libs)
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
[ -n "$NCU" ] || { echo "no ncu on this machine"; exit 1; }
nvidia-smi -L
for b in ${BATCHES:-64}; do
    EF_RECON_BENCH_BATCH=$b EF_RECON_BENCH_REPS=1 timeout 300 "$NCU" \
        --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size --csv --print-units base \
        gpu_tests "recon: deferred steps on a benchmark-shaped batch*" > "$OUT/ncu_kernels_b$b.csv" 2> "$OUT/ncu_kernels_b$b.err"
done

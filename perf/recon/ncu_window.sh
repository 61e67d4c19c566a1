#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Where the window-resident passes stall (issue 6): Nsight Compute's throughput, warp-state,
# scheduler and memory sections for the forward and backward window kernels of one
# benchmark-shaped batch (perf/gpu/bench_recon_batch.cpp, in the bundle of gpu_run.sh prepare),
# after that batch's time (1024 threads per window block: the 512-thread kernels were removed,
# being slower). On the GPU machine:
#   source .gpu-run/env.sh && OUT=$OUT bash perf/recon/ncu_window.sh
# With the argument `kernels`: instead, the time, grid and block of every kernel of one deferred
# benchmark-shaped step (base clocks, caches flushed: proportions, not run times) at each batch
# size of BATCHES (64: the share of one GPU of four at batch 256), into
# $OUT/ncu_kernels_b<B>.csv (the step's kernels are its last ~25 rows).
set -uo pipefail
cd "${EF_REPO:-$(dirname "$0")/../..}"
OUT=${OUT:-$PWD/perf/recon/out}
mkdir -p "$OUT"
source perf/recon/bench_config.sh
gpu_machine_env
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
if [ "${1:-}" = kernels ]; then
    [ -n "$NCU" ] || { echo "no ncu on this machine"; exit 1; }
    for b in ${BATCHES:-64}; do
        EF_RECON_BENCH_BATCH=$b EF_RECON_BENCH_REPS=1 timeout "${NCU_TIMEOUT:-300}" "$NCU" \
            --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size --csv --print-units base \
            bench_recon_batch deferred > "$OUT/ncu_kernels_b$b.csv" 2> "$OUT/ncu_kernels_b$b.err"
    done
    exit 0
fi
{
nvidia-smi -L
echo "== batch time"
bench_recon_batch 2>&1 | grep -E "recon batch|deferred"
if [ -n "$NCU" ]; then
    echo "== ncu, window kernels (${NCU_KERNELS:-window_kernel})"
    timeout "${NCU_TIMEOUT:-300}" "$NCU" --kernel-name "regex:${NCU_KERNELS:-window_kernel}" --launch-count "${NCU_COUNT:-2}" \
        --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
        --section LaunchStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
        bench_recon_batch 2>&1 | grep -vE "^gpu: |pmix|dlopen|Perhaps"
else
    echo "== no ncu on this machine"
fi
} 2>&1 | tee "$OUT/ncu_window.log"

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Where a benchmark batch's GPU time goes at the share one GPU of N does (issue 6's scaling):
# EF_RECON_PHASES=1 on one GPU at batch 256 and at 256 / N, with the mode groups the engine
# picks and forced ones, then the N-GPU run with phases per rank (and EF_RECON_PEER_TRACE).
# PROFILE_SPECS="256:auto 64:2" picks the one-GPU runs (batch:mode groups).
#   source .gpu-run/env.sh && OUT=$OUT bash perf/recon/profile_batch.sh [N]
set -uo pipefail
cd "${EF_REPO:-$(dirname "$0")/../..}"
N=${1:-4}
OUT=${OUT:-$PWD/perf/recon/out}
mkdir -p "$OUT"
W=$(mktemp -d /tmp/ef-prof.XXXXXX)
source perf/recon/bench_config.sh
gpu_machine_env
share=$(( 256 / N ))
write_bench_ini "$W/bench.ini" 3
cd "$W"
{
nvidia-smi -L
simulate_bench > /dev/null
for spec in ${PROFILE_SPECS:-"256:auto" "$share:auto" "$share:1" "$share:4"}; do
    set -- ${spec/:/ }
    echo "== 1 GPU, batch $1, mode groups $2"
    groups=$2
    [ "$groups" = auto ] && groups=0
    EF_RECON_PHASES=1 ensemblefit reconstruct bench.ini --solver.batch_size "$1" --tuning.window_groups "$groups" \
        --output.file p.h5 --overwrite 2>&1 | grep -vE "pmix|dlopen|Perhaps"
done
if [ "$(nvidia-smi -L | wc -l)" -ge "$N" ]; then
    echo "== $N GPUs, phases per rank"
    EF_RECON_PEER_TRACE=1 EF_RECON_PHASES=1 EF_RECON_COMM_TRACE=1 mpirun --bind-to none --oversubscribe -np "$N" ensemblefit reconstruct bench.ini \
        --output.file q.h5 --overwrite 2>&1 | grep -vE "pmix|dlopen|Perhaps"
fi
} 2>&1 | tee "$OUT/profile.log"
rm -rf "$W"

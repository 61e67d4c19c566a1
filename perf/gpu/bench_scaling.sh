#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Strong scaling of inputs/stats2.ini (2561 fits) over the GPUs of one machine (issue #5): one
# rank per GPU, 1, 2, 4 (and 8) GPUs where present, then `ensemblefit report` for speedup and
# parallel efficiency (from the scheduler's own timing) against the 1-GPU run.
#
#   bash perf/gpu/bench_scaling.sh            # GPU machine, repository root, .gpu-run carried
#   FIT_ARGS="--fit.solver normal" ...        # extra fit options (here: the Gram path)
#   TAG=normal ...                            # names the outputs scaling-TAG.{log,csv}
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/perf/gpu/out}
mkdir -p "$OUT"
W=$(mktemp -d /tmp/ef-scale.XXXXXX)
[ -n "${OPAL_PREFIX:-}" ] || source .gpu-run/env.sh
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/usr/local/cuda/lib64
NGPU=$(nvidia-smi -L | wc -l)
{
nvidia-smi -L
files=()
for g in 1 2 4 8; do
    [ "$g" -le "$NGPU" ] || continue
    echo "== stats2 on $g GPU(s)"
    # shellcheck disable=SC2086
    mpirun --bind-to none --oversubscribe -np "$g" ensemblefit fit inputs/stats2.ini --run.workers gpu ${FIT_ARGS:-} \
        --output.file "$W/stats2_${g}gpu.h5" --overwrite 2>&1 | grep -E "^timing|^  rank|^  [0-9] |placement|gpu [0-9]:" | head -20
    files+=("$W/stats2_${g}gpu.h5")
done
echo "== report"
ensemblefit report "${files[@]}" --csv "$OUT/scaling${TAG:+-$TAG}.csv"
} 2>&1 | tee "$OUT/scaling${TAG:+-$TAG}.log"
rm -rf "$W"

#!/bin/bash
# SPDX-License-Identifier: MIT
# Submits array.sbatch (one shard per task) and merge.sbatch with --dependency=afterok on the
# whole array, and prints both job ids.
#
#   jobs/submit-array.sh my.ini [fit options]
#   EF_SHARDS=16 EF_CONCURRENT=8 EF_OUTDIR=runs/a jobs/submit-array.sh my.ini --fit.replicas 50000
#   EF_RETRY=5,9 EF_SHARDS=16 EF_OUTDIR=runs/a jobs/submit-array.sh my.ini --fit.replicas 50000
#
# The last line re-submits only tasks 5 and 9 (after a failure; their shards finish with
# --resume) and a new merge that waits for them. Give the same EF_SHARDS, EF_OUTDIR and fit
# options as the first submission.
#
# Environment:
#   EF_SHARDS       shards = array tasks 0..N-1 (default 8)
#   EF_CONCURRENT   tasks running at once (default 4)
#   EF_RETRY        re-submit only these task ids (Slurm --array syntax: 5,9 or 3-4)
#   EF_OUTDIR       result folder (default results): shards in $EF_OUTDIR/shards, logs in
#                   $EF_OUTDIR/logs (%x_%A_%a.out), the merged file $EF_OUTDIR/<config name>.h5
#   EF_BINARY, EF_ARGS, EF_SRUN_ARGS   handed to the jobs (see rank-per-core.sbatch)
#   EF_SBATCH_ARGS  more sbatch options for both jobs, split at spaces (--account=..., -p ...)
# Output: the two ids on the last line as "array=ID merge=ID".
set -euo pipefail

[ $# -ge 1 ] || { sed -n '3,24p' "$0" >&2; exit 2; }
config=$1
shift
jobs_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
shards=${EF_SHARDS:-8}
concurrent=${EF_CONCURRENT:-4}
export EF_OUTDIR=${EF_OUTDIR:-results}
read -r -a sbatch_args <<< "${EF_SBATCH_ARGS:-}"
mkdir -p "$EF_OUTDIR/logs" "$EF_OUTDIR/shards"   # Slurm does not create log folders

if [ -n "${EF_RETRY:-}" ]; then
    spec=$EF_RETRY
    export EF_SHARDS=$shards        # a partial array's _COUNT is not the shard count
else
    spec="0-$((shards - 1))%$concurrent"
    unset EF_SHARDS                 # the whole array: --shard auto
fi

array=$(sbatch --parsable --array="$spec" --output="$EF_OUTDIR/logs/%x_%A_%a.out" \
    "${sbatch_args[@]}" "$jobs_dir/array.sbatch" "$config" "$@")
array=${array%%;*}                  # "id;cluster" on multi-cluster sites
merge=$(sbatch --parsable --dependency=afterok:"$array" --output="$EF_OUTDIR/logs/%x_%j.out" \
    "${sbatch_args[@]}" "$jobs_dir/merge.sbatch" "$config")
merge=${merge%%;*}
echo "submitted array job $array (tasks $spec of $shards shards) and merge job $merge" \
     "(afterok:$array) -> $EF_OUTDIR/$(basename "$config" .ini).h5"
echo "array=$array merge=$merge"

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
#   EF_REQUEUE      1: a task that stops with exit 75 (time limit, preemption) requeues itself;
#                   the merge waits for it (see array.sbatch)
#   EF_MAX_ARRAY_SIZE  the site's limit on array task ids (default: MaxArraySize of
#                   `scontrol show config`, else 1001). More shards than that: several arrays of
#                   at most that many tasks each (EF_SHARD_BASE tells a task its first shard),
#                   each with EF_CONCURRENT tasks at once, and one merge after all of them.
# Output: the ids on the last line as "array=ID merge=ID" (several arrays: array=ID,ID,...).
set -euo pipefail

[ $# -ge 1 ] || { sed -n '3,30p' "$0" >&2; exit 2; }
config=$1
shift
jobs_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
shards=${EF_SHARDS:-8}
unset EF_SHARD_BASE                 # set per array below, where the shards need several
concurrent=${EF_CONCURRENT:-4}
export EF_OUTDIR=${EF_OUTDIR:-results}
read -r -a sbatch_args <<< "${EF_SBATCH_ARGS:-}"
mkdir -p "$EF_OUTDIR/logs" "$EF_OUTDIR/shards"   # Slurm does not create log folders

# The site's MaxArraySize: task ids must stay below it (Slurm's bare "Invalid job array
# specification" otherwise).
max_size=${EF_MAX_ARRAY_SIZE:-$(scontrol show config 2> /dev/null | awk -F= '/^MaxArraySize/ { gsub(/ /, "", $2); print $2 }')}
max_size=${max_size:-1001}

# submit SPEC [VAR=VALUE...]: one array job of array.sbatch; prints its id.
submit() {
    local spec=$1 id
    shift
    id=$(env "$@" sbatch --parsable --array="$spec" --output="$EF_OUTDIR/logs/%x_%A_%a.out" \
        "${sbatch_args[@]}" "$jobs_dir/array.sbatch" "$config" "${fit_opts[@]}")
    echo "${id%%;*}"                # "id;cluster" on multi-cluster sites
}
# ids SPEC: the task ids of a Slurm --array list (5,9 or 3-4 or 0-15:2; a %N limit dropped)
ids() {
    local part a b step parts
    IFS=, read -r -a parts <<< "${1%\%*}"
    for part in "${parts[@]}"; do
        step=1
        [[ "$part" == *:* ]] && { step=${part#*:}; part=${part%:*}; }
        a=${part%-*} b=${part#*-}
        seq "$a" "$step" "$b"
    done
}

fit_opts=("$@")
arrays=()
if [ "$shards" -le "$max_size" ]; then  # task ids 0..shards-1: one array
    if [ -n "${EF_RETRY:-}" ]; then
        spec=$EF_RETRY
        export EF_SHARDS=$shards    # a partial array's _COUNT is not the shard count
    else
        spec="0-$((shards - 1))%$concurrent"
        unset EF_SHARDS             # the whole array: --shard auto
    fi
    arrays+=("$(submit "$spec")")
else
    # More shards than one array may hold: one array per block of max_size shards, its task ids
    # counted from the block's first shard (EF_SHARD_BASE), the shard count given (EF_SHARDS).
    echo "submit-array.sh: $shards shards > MaxArraySize=$max_size (task ids 0..$((max_size - 1))):" \
         "one array per $max_size shards, one merge after all. For one array, the site's" \
         "administrators raise MaxArraySize in slurm.conf above $((shards - 1)) (scontrol reconfigure)" >&2
    export EF_SHARDS=$shards
    unset EF_SHARD_BASE
    spec=
    for ((base = 0; base < shards; base += max_size)); do
        if [ -n "${EF_RETRY:-}" ]; then
            list=$(ids "$EF_RETRY" | awk -v lo="$base" -v hi="$((base + max_size))" '$1 >= lo && $1 < hi { printf "%s%d", n++ ? "," : "", $1 - lo }')
            [ -n "$list" ] || continue
        else
            last=$(( base + max_size < shards ? max_size - 1 : shards - base - 1 ))
            list="0-$last%$concurrent"
        fi
        arrays+=("$(submit "$list" EF_SHARD_BASE="$base")")
        spec="$spec${spec:+ }$list(+$base)"
    done
fi
[ ${#arrays[@]} -gt 0 ] || { echo "submit-array.sh: EF_RETRY=$EF_RETRY names no shard below $shards" >&2; exit 2; }
after=$(IFS=:; echo "${arrays[*]}")
merge=$(sbatch --parsable --dependency=afterok:"$after" --output="$EF_OUTDIR/logs/%x_%j.out" \
    "${sbatch_args[@]}" "$jobs_dir/merge.sbatch" "$config")
merge=${merge%%;*}
array=$(IFS=,; echo "${arrays[*]}")
echo "submitted array job(s) $array (tasks $spec of $shards shards) and merge job $merge" \
     "(afterok:$after) -> $EF_OUTDIR/$(basename "$config" .ini).h5"
echo "array=$array merge=$merge"

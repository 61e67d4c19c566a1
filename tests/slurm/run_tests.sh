#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The jobs/ scripts under a real Slurm, against the bundled example (inputs/example.ini):
#   - rank-per-core.sbatch gives the same /central, /replicas, /summary as a plain mpirun run;
#   - every job script's ranks run on distinct cores, read from the placement each run stores
#     under /timing (whether or not this Slurm binds tasks: TaskPlugin=task/none leaves it to
#     ensemblefit's [run] bind = auto), and no run warns about shared cores;
#   - two ranks forced onto one core (--cpu-bind=map_cpu:0,0 and a one-core mask) are warned
#     about, and under --run.bind none the warning appears exactly when the stored cores overlap;
#   - submit-array.sh (array.sbatch, --shard auto, + merge.sbatch afterok) gives the same;
#   - an array task that fails (a corrupt leftover shard file) blocks the merge: Slurm cancels
#     it or leaves it pending (DependencyNeverSatisfied), it never runs; re-submitting the
#     failed task (EF_RETRY) with a new merge completes the result, again bitwise equal;
#   - EF_ARGS=--overwrite starts over; a run stopped with SIGUSR1 names its resubmission, which
#     finishes it; EF_REQUEUE=1 requeues the stopped job, its log appended; more shards than
#     MaxArraySize become several arrays with one merge; each bitwise equal to mpirun's result;
#   - scaling-study.sbatch runs every rank count, each on distinct cores, and `ensemblefit
#     report` has one row each;
#   - with GPUs in the cluster (the local one has pretend GPUs): rank-per-gpu.sbatch gives each
#     rank its own GPU and hybrid.sbatch GPU and CPU ranks, both with CPU workers here;
#   - perf/plot_scaling.py and tools/plot_ensemble.py draw the real runs (PNGs kept in
#     $EF_BUILD_DIR/slurm-plots, or EF_SLURM_PLOTS).
#
#   run_tests.sh ENSEMBLEFIT [MPIEXEC] [--start-slurm]
#
# Uses the Slurm controller that answers; with --start-slurm and none answering, installs and
# starts a local single-node cluster (root, Debian: tests/slurm/slurm-local.sh) and stops the
# daemons it started, by PID, when it ends, however it ends. Without a controller it exits 77
# (skipped). Work folder: under the current directory (it must be visible to the compute
# nodes), removed after a pass. EF_TEST_SBATCH_ARGS: more sbatch options (account, partition).
set -euo pipefail
EF=${1:?usage: run_tests.sh ENSEMBLEFIT [MPIEXEC] [--start-slurm]}
EF=$(readlink -f "$EF")
MPIEXEC=${2:-mpirun}
START=0
for a in "${@:3}"; do
    case "$a" in
        --start-slurm) START=1 ;;
        *) echo "run_tests.sh: unknown option $a" >&2; exit 2 ;;
    esac
done
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=${EF_SOURCE_DIR:-$(cd "$HERE/../.." && pwd)}
BUILD=${EF_BUILD_DIR:-$(dirname "$EF")}
JOBS=$SRC/jobs
CONFIG=$SRC/inputs/example.ini
PY=/usr/bin/python3
H5CHECK="$PY $SRC/tests/tools/h5check.py"
place() { "$PY" "$HERE/placement_check.py" "$@"; }
PLOTS=${EF_SLURM_PLOTS:-$BUILD/slurm-plots}
JOBLIST=$BUILD/slurm-test.jobs        # our job ids, so a later run can cancel leftovers
TIMEOUT=${EF_SLURM_TIMEOUT:-300}      # seconds to wait for one batch of jobs
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
export EF_BINARY=$EF
unset EF_CONFIG EF_OUTDIR EF_OUTPUT EF_ARGS EF_SHARDS EF_RETRY EF_RANKS EF_SBATCH_ARGS

T0=$SECONDS
PASS=0
FAIL=0
SKIP=0
log() { printf '[slurm-test %3ds] %s\n' $((SECONDS - T0)) "$*"; }
ok() { PASS=$((PASS + 1)); log "ok   - $*"; }
bad() { FAIL=$((FAIL + 1)); log "FAIL - $*"; }
skip() { SKIP=$((SKIP + 1)); log "skip - $*"; }
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; return 1; fi; }

# cancel_ours: scancel the jobs in $JOBLIST that are still queued or running and were submitted
# from a work folder of this test (a restarted controller may have given their ids to others).
cancel_ours() {
    local id
    [ -s "$JOBLIST" ] && command -v scontrol > /dev/null || return 0
    while read -r id; do
        scontrol -o show job "$id" 2> /dev/null | grep -q 'WorkDir=[^ ]*/slurm-test\.[^ /]*\( \|$\)' \
            && scancel "$id" 2> /dev/null
    done < <(sort -u "$JOBLIST")
    return 0
}
STARTED=$(mktemp "${TMPDIR:-/tmp}/ef-slurm-started.XXXXXX")
WORK=
cleanup() {
    local rc=$?
    set +e
    cancel_ours   # whatever of ours is still queued or running
    if [ -s "$STARTED" ]; then
        log "stopping the daemons this test started: $(tr '\n' ' ' < "$STARTED")"
        SLURM_LOCAL_STARTED=$STARTED bash "$HERE/slurm-local.sh" down
    fi
    rm -f "$STARTED"
    if [ -n "$WORK" ] && [ -d "$WORK" ]; then
        if [ "$rc" = 0 ] && [ "$FAIL" = 0 ]; then rm -rf "$WORK"; else log "work folder kept: $WORK"; fi
    fi
    log "took $((SECONDS - T0)) s"
    exit "$rc"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM HUP

controller_up() { command -v scontrol > /dev/null && timeout 10 scontrol ping 2> /dev/null | grep -q 'is UP'; }

# ---------------------------------------------------------------- the cluster
if controller_up; then
    log "using the Slurm controller that is up ($(scontrol ping | head -n 1))"
elif [ "$START" = 1 ]; then
    if [ "$(id -u)" != 0 ] || ! command -v apt-get > /dev/null; then
        echo "run_tests.sh: no Slurm controller answers, and starting one needs root on Debian" >&2
        exit 77
    fi
    log "no Slurm controller answers: starting a local one"
    SLURM_LOCAL_STARTED=$STARTED bash "$HERE/slurm-local.sh" up
else
    echo "run_tests.sh: no Slurm controller answers (pass --start-slurm, as root on Debian, to start one)" >&2
    exit 77
fi
cancel_ours   # jobs left over from an earlier run of this test that was killed
: > "$JOBLIST"

# The default partition's first node: CPUs and GPUs (gres gpu:N).
read -r CPUS GRES < <(sinfo -h -o '%c %G' | head -n 1)
GPUS=$(sed -n 's/.*gpu:\([0-9][0-9]*\).*/\1/p' <<< "$GRES")
GPUS=${GPUS:-0}
[ "$CPUS" -ge 2 ] || { echo "run_tests.sh: the node has $CPUS CPU(s); 2 are needed" >&2; exit 77; }
log "node: $CPUS CPUs, $GPUS GPU(s); slurm $(sinfo -V | awk '{print $2}')"

WORK=$(mktemp -d "$PWD/slurm-test.XXXXXX")
cd "$WORK"
mkdir -p logs
read -r -a SITE_ARGS <<< "${EF_TEST_SBATCH_ARGS:-}"
export EF_SBATCH_ARGS="${EF_TEST_SBATCH_ARGS:-}"

# submit NAME sbatch-args... : prints the job id, remembers it
submit() {
    local name=$1 id
    shift
    id=$(sbatch --parsable -o "logs/$name-%j.out" "${SITE_ARGS[@]}" "$@")
    id=${id%%;*}
    echo "$id" >> "$JOBLIST"
    echo "$id"
}
# records ID: one line per job record (array tasks too) of scontrol -o show job
records() { scontrol -o show job "$1" 2> /dev/null || true; }
field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p"; }
# settled ID: every record has ended, or waits on a dependency that can never be met
settled() {
    local r st
    r=$(records "$1")
    [ -n "$r" ] || return 0   # purged: long over
    while read -r line; do
        st=$(field JobState <<< "$line")
        case "$st" in
            PENDING) [ "$(field Reason <<< "$line")" = DependencyNeverSatisfied ] || return 1 ;;
            RUNNING | CONFIGURING | COMPLETING | SUSPENDED | REQUEUED* | RESIZING | SIGNALING | STAGE_OUT) return 1 ;;
        esac
    done <<< "$r"
}
wait_for() {  # wait_for ID... : until every job has settled (at most $TIMEOUT s)
    local id t=$SECONDS
    while [ $((SECONDS - t)) -lt "$TIMEOUT" ]; do
        for id in "$@"; do settled "$id" || { sleep 0.5; continue 2; }; done
        return 0
    done
    log "timed out after $TIMEOUT s waiting for jobs $*"
    squeue >&2 || true
    return 1
}
# states ID: the JobState of every record, sorted, space-separated
states() { records "$1" | field JobState | sort | tr '\n' ' ' | sed 's/ $//'; }
completed() { [ "$(states "$1" | tr ' ' '\n' | sort -u)" = COMPLETED ]; }
task_state() { records "$1" | grep "ArrayTaskId=$2 " | field JobState; }
show_log() { local f; for f in "$@"; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 30 "$f" >&2; }; done; return 0; }
no_share_warning() { ! grep -H "share cores" "$@"; }
same() {  # same A B: /central /replicas /summary bitwise equal
    [ -f "$2" ] || { log "$2 missing"; return 1; }
    $H5CHECK equal "$1" "$2" /central /replicas /summary
}

# ---------------------------------------------------------------- reference: plain mpirun
log "reference: $MPIEXEC -np 2 ensemblefit fit inputs/example.ini"
"$MPIEXEC" --oversubscribe -np 2 "$EF" fit "$CONFIG" --output.file ref.h5 > logs/reference.out 2>&1 \
    || { show_log logs/reference.out; bad "plain mpirun reference run"; exit 1; }

# ---------------------------------------------------------------- submit everything at once
RANKS=""
for r in 1 2 4; do [ "$r" -le "$CPUS" ] && RANKS="$RANKS $r"; done
RANKS=${RANKS# }
MAXR=${RANKS##* }

J_CORE=$(EF_OUTDIR=core submit rank-per-core --ntasks-per-node=2 "$JOBS/rank-per-core.sbatch" "$CONFIG")

# Two ranks forced onto core 0: by Slurm where it binds (map_cpu:0,0), and by a one-core mask
# (taskset -c 0 around ensemblefit) where it does not. ensemblefit must warn.
printf '#!/bin/sh\nexec taskset -c 0 "%s" "$@"\n' "$EF" > one-core.sh
chmod +x one-core.sh
J_ONE=$(EF_OUTDIR=one EF_BINARY=$WORK/one-core.sh EF_SRUN_ARGS=--cpu-bind=map_cpu:0,0 \
    submit one-core --ntasks-per-node=2 "$JOBS/rank-per-core.sbatch" "$CONFIG")
# --run.bind none keeps whatever masks Slurm gave: shared under task/none (then warned about),
# distinct where Slurm binds (then no warning).
J_NONE=$(EF_OUTDIR=none EF_ARGS="--run.bind none" \
    submit bind-none --ntasks-per-node=2 "$JOBS/rank-per-core.sbatch" "$CONFIG")

# shellcheck disable=SC2034
read -r _ A_OK M_OK < <(EF_SHARDS=4 EF_CONCURRENT=2 EF_OUTDIR=array EF_SBATCH_ARGS="--ntasks=2 $EF_SBATCH_ARGS" \
    "$JOBS/submit-array.sh" "$CONFIG" | tail -n 1 | sed 's/array=\([0-9]*\) merge=\([0-9]*\)/x \1 \2/')
printf '%s\n' "$A_OK" "$M_OK" >> "$JOBLIST"

# A corrupt leftover shard file makes task 2 fail (its --resume cannot open it).
mkdir -p failed/shards
echo "not an HDF5 file" > failed/shards/example-2.h5
read -r _ A_BAD M_BAD < <(EF_SHARDS=4 EF_CONCURRENT=4 EF_OUTDIR=failed EF_SBATCH_ARGS="--ntasks=1 $EF_SBATCH_ARGS" \
    "$JOBS/submit-array.sh" "$CONFIG" | tail -n 1 | sed 's/array=\([0-9]*\) merge=\([0-9]*\)/x \1 \2/')
printf '%s\n' "$A_BAD" "$M_BAD" >> "$JOBLIST"

# advise inside a job of 2 CPUs: the sbatch line it prints is submitted in the second wave (the
# named script's own check and Slurm must accept it). hybrid.sbatch in an allocation without
# GPUs: refused by the script's check (the same rule), exit 2.
J_ADV=$(submit advise --ntasks=1 --cpus-per-task=2 --wrap "$EF advise $CONFIG --budget 3")
J_NOGPU=$(EF_OUTDIR=nogpu submit hybrid-nogpu --ntasks-per-node=2 --cpus-per-task=1 --gpus-per-node=0 \
    "$JOBS/hybrid.sbatch" "$CONFIG")

# The CPU studies only: this Slurm's pretend GPUs (SLURM_GPUS_ON_NODE) would start the GPU and
# mixed studies, which need a CUDA build.
J_SCALE=$(EF_OUTDIR=scaling EF_RANKS="$RANKS" EF_STUDIES="cpu-strong cpu-weak" submit scaling --ntasks="$MAXR" \
    "$JOBS/scaling-study.sbatch" "$CONFIG" --fit.replicas 20000)

GPU_JOBS=()
if [ "$GPUS" -ge 1 ]; then
    G=$((GPUS < 2 ? GPUS : 2))
    J_GPU=$(EF_OUTDIR=gpu EF_WORKERS=cpu submit rank-per-gpu --ntasks-per-node="$G" --cpus-per-task=1 \
        "$JOBS/rank-per-gpu.sbatch" "$CONFIG")
    GPU_JOBS+=("$J_GPU")
    if [ "$CPUS" -ge 4 ]; then
        J_HYB=$(EF_OUTDIR=hybrid EF_GPU_WORKERS=cpu submit hybrid --ntasks-per-node=2 --cpus-per-task=2 \
            --gpus-per-node=1 "$JOBS/hybrid.sbatch" "$CONFIG")
        GPU_JOBS+=("$J_HYB")
    fi
fi
log "submitted: rank-per-core $J_CORE, one-core $J_ONE, bind-none $J_NONE, array $A_OK + merge $M_OK, failing array $A_BAD + merge $M_BAD," \
    "scaling $J_SCALE (ranks $RANKS)${GPU_JOBS[*]:+, gpu/hybrid ${GPU_JOBS[*]}}"

# dis-mellin (when the model and its example are there): a small real ensemble for the x f(x)
# bands of plot_ensemble.py.
if [ -f "$SRC/inputs/dis-mellin.ini" ] && "$EF" fit "$SRC/inputs/dis-mellin.ini" --dry-run > logs/dis-dry-run.out 2>&1; then
    J_DIS=$(EF_OUTDIR=dis submit dis-mellin --ntasks-per-node=2 "$JOBS/rank-per-core.sbatch" \
        "$SRC/inputs/dis-mellin.ini" --fit.replicas 8)
    log "submitted: dis-mellin example with 8 replicas $J_DIS"
fi

wait_for "$J_ADV" "$J_NOGPU" "$J_CORE" "$J_ONE" "$J_NONE" "$A_OK" "$M_OK" "$A_BAD" "$M_BAD" "$J_SCALE" "${GPU_JOBS[@]}" ${J_DIS:+"$J_DIS"} || true
set +e   # from here on every check runs, failed or not

# ---------------------------------------------------------------- rank-per-core
check "rank-per-core job completed" completed "$J_CORE" || show_log logs/rank-per-core-"$J_CORE".out
check "rank-per-core result == mpirun result (bitwise)" same ref.h5 core/example.h5
check "rank-per-core: 2 ranks on distinct cores (stored placement)" place distinct 2 core/example.h5
check "rank-per-core: no shared-cores warning" no_share_warning "logs/rank-per-core-$J_CORE.out"

# ---------------------------------------------------------------- forced onto one core
olog=logs/one-core-$J_ONE.out
check "one-core job completed" completed "$J_ONE" || show_log "$olog"
check "one-core: both ranks stored on core 0" test "$(place cores one/example.h5 | tr '\n' ' ')" = "0 0 "
check "one-core: ensemblefit warns that ranks 0, 1 share core 0" \
    grep -q "warning: ranks 0, 1 on .* share cores 0 " "$olog"
nlog=logs/bind-none-$J_NONE.out
check "bind-none job completed" completed "$J_NONE" || show_log "$nlog"
if place distinct 2 none/example.h5; then
    log "bind none: Slurm bound the tasks, distinct cores kept"
    check "bind none, distinct cores: no shared-cores warning" no_share_warning "$nlog"
else
    log "bind none: Slurm did not bind the tasks, the shared mask kept"
    check "bind none, shared cores: ensemblefit warns naming ranks 0, 1" grep -q "warning: ranks 0, 1 on .* share cores" "$nlog"
fi

# ---------------------------------------------------------------- advise's lines, the scripts' rule
check "advise job completed" completed "$J_ADV" || show_log "logs/advise-$J_ADV.out"
aline=$(sed -n 's/^  Slurm: sbatch //p' "logs/advise-$J_ADV.out")
log "advise's sbatch line in a 2-CPU job: $aline"
check "advise names a jobs/ script in its sbatch line" bash -c "[[ '$aline' == *' jobs/'*'.sbatch '* ]]"
read -r -a AOPTS <<< "${aline%% jobs/*}"
ascript=$(sed 's/.* jobs\/\([a-z-]*\.sbatch\) .*/\1/' <<< "$aline")
read -r -a AARGS <<< "${aline#* jobs/$ascript }"
check "sbatch --test-only accepts advise's line" sbatch --test-only "${SITE_ARGS[@]}" "${AOPTS[@]}" "$JOBS/$ascript" "${AARGS[@]}"
if [ "$CPUS" -lt 32 ]; then
    check "sbatch refuses the line advise printed before (--ntasks with the script's 32 tasks per node)" \
        bash -c "! sbatch --test-only ${SITE_ARGS[*]} --nodes=1 --ntasks=2 --cpus-per-task=1 $JOBS/rank-per-core.sbatch $CONFIG 2> /dev/null"
fi
glog=logs/hybrid-nogpu-$J_NOGPU.out
check "hybrid.sbatch without GPUs exits 2" test "$(records "$J_NOGPU" | field ExitCode)" = 2:0 || show_log "$glog"
check "hybrid.sbatch without GPUs: one line saying why, from the shared rule" \
    grep -q "error: hybrid.sbatch: no GPUs in this allocation (--gpus-per-node)" "$glog"
check "hybrid.sbatch without GPUs ran nothing" test ! -e nogpu/example.h5
# ---------------------------------------------------------------- array + merge
check "array job: 4 tasks completed" completed "$A_OK" || show_log array/logs/*_"$A_OK"_*.out
check "merge job completed after the array" completed "$M_OK" || show_log array/logs/ef-merge_"$M_OK".out
check "merged shards == mpirun result (bitwise)" same ref.h5 array/example.h5
check "array logs are named %x_%A_%a" test -f "array/logs/ef-shard_${A_OK}_3.out"
check "array: each shard's 2 ranks on distinct cores" place distinct 2 array/shards/example-{0,1,2,3}.h5
check "array: no shared-cores warning" no_share_warning array/logs/ef-shard_"$A_OK"_*.out

# ---------------------------------------------------------------- failed task blocks the merge
check "array task 2 failed" test "$(task_state "$A_BAD" 2)" = FAILED || show_log failed/logs/*_"$A_BAD"_2.out
check "the other array tasks completed" test "$(states "$A_BAD")" = "COMPLETED COMPLETED COMPLETED FAILED"
m_state=$(states "$M_BAD")
m_reason=$(records "$M_BAD" | field Reason)
log "merge after the failed task: $m_state ($m_reason)"
if [ "$m_state" = PENDING ]; then   # a cluster without kill_invalid_depend
    check "merge waits on a dependency that can never be met" test "$m_reason" = DependencyNeverSatisfied
    scancel "$M_BAD"
else
    check "merge was cancelled, not run" test "$m_state" = CANCELLED
fi
check "no merged file after the failure" test ! -e failed/example.h5
check "the merge never ran (no log)" test ! -e "failed/logs/ef-merge_$M_BAD.out"

log "re-submitting task 2 after removing the corrupt file (EF_RETRY=2)"
rm -f failed/shards/example-2.h5
read -r _ A_RETRY M_RETRY < <(EF_RETRY=2 EF_SHARDS=4 EF_OUTDIR=failed EF_SBATCH_ARGS="--ntasks=1 $EF_SBATCH_ARGS" \
    "$JOBS/submit-array.sh" "$CONFIG" | tail -n 1 | sed 's/array=\([0-9]*\) merge=\([0-9]*\)/x \1 \2/')
printf '%s\n' "$A_RETRY" "$M_RETRY" >> "$JOBLIST"
wait_for "$A_RETRY" "$M_RETRY" || true
check "re-submitted task completed" completed "$A_RETRY" || show_log failed/logs/*_"$A_RETRY"_2.out
check "its merge completed" completed "$M_RETRY" || show_log failed/logs/ef-merge_"$M_RETRY".out
check "re-submitted shard 2 is shard 2/4" grep -q "shard 2/4 holds replicas 251..375" "failed/logs/ef-shard_${A_RETRY}_2.out"
check "merged after the retry == mpirun result (bitwise)" same ref.h5 failed/example.h5

# ---------------------------------------------------------------- overwrite, stop, requeue, split arrays
# EF_ARGS=--overwrite starts over (the scripts leave --resume out); a run stopped with SIGUSR1
# (exit 75) names its resubmission, without --overwrite, and that line finishes it; with
# EF_REQUEUE=1 the job requeues itself (the same job id, its log appended) and finishes; more
# shards than MaxArraySize (EF_MAX_ARRAY_SIZE=3 here) become several arrays and one merge.
# All bitwise equal to the plain mpirun run.
SLOW="--debug.slowdown 0:500,1:500"   # about 15 s of fitting: time to stop it part-way
J_OVER=$(EF_OUTDIR=core EF_ARGS=--overwrite submit overwrite --ntasks-per-node=2 "$JOBS/rank-per-core.sbatch" "$CONFIG")
J_REQ=$(EF_OUTDIR=requeue EF_REQUEUE=1 EF_ARGS="$SLOW" submit requeue --ntasks-per-node=2 "$JOBS/rank-per-core.sbatch" "$CONFIG")
J_STOP=$(EF_OUTDIR=stop EF_ARGS="--overwrite $SLOW" submit stop --ntasks-per-node=2 "$JOBS/rank-per-core.sbatch" "$CONFIG")
read -r _ A_SPLIT M_SPLIT < <(EF_MAX_ARRAY_SIZE=3 EF_SHARDS=4 EF_CONCURRENT=2 EF_OUTDIR=split \
    EF_SBATCH_ARGS="--ntasks=1 $EF_SBATCH_ARGS" "$JOBS/submit-array.sh" "$CONFIG" 2> split.err \
    | tail -n 1 | sed 's/array=\([0-9,]*\) merge=\([0-9]*\)/x \1 \2/')
IFS=, read -r -a SPLIT_IDS <<< "$A_SPLIT"
# Array tasks: task 0 of one array requeues itself (its merge must wait for it), task 1 of
# another stops and names its resubmission (EF_RETRY=1 ... submit-array.sh).
read -r _ A_RQ M_RQ < <(EF_REQUEUE=1 EF_SHARDS=2 EF_OUTDIR=arq EF_ARGS="$SLOW" EF_SBATCH_ARGS="--ntasks=1 $EF_SBATCH_ARGS" \
    "$JOBS/submit-array.sh" "$CONFIG" | tail -n 1 | sed 's/array=\([0-9]*\) merge=\([0-9]*\)/x \1 \2/')
read -r _ A_ST M_ST < <(EF_SHARDS=2 EF_OUTDIR=ast EF_ARGS="$SLOW" EF_SBATCH_ARGS="--ntasks=1 $EF_SBATCH_ARGS" \
    "$JOBS/submit-array.sh" "$CONFIG" | tail -n 1 | sed 's/array=\([0-9]*\) merge=\([0-9]*\)/x \1 \2/')
printf '%s\n' "$J_OVER" "$J_REQ" "$J_STOP" "${SPLIT_IDS[@]}" "$M_SPLIT" "$A_RQ" "$M_RQ" "$A_ST" "$M_ST" >> "$JOBLIST"
log "submitted: overwrite $J_OVER, requeue $J_REQ, stop $J_STOP, split arrays $A_SPLIT + merge $M_SPLIT," \
    "array with a requeued task $A_RQ + merge $M_RQ, array with a stopped task $A_ST + merge $M_ST"
# stop_when_fitting ID FILE: SIGUSR1 to the job's steps once its fit has created FILE
stop_when_fitting() {
    local t=$SECONDS
    until [ -s "$2" ]; do [ $((SECONDS - t)) -lt "$TIMEOUT" ] || return 1; sleep 0.2; done
    sleep 1
    scancel --signal=USR1 "$1"
}
stop_when_fitting "$J_REQ" requeue/example.h5 || bad "requeue job never started fitting"
stop_when_fitting "$J_STOP" stop/example.h5 || bad "stop job never started fitting"
stop_when_fitting "${A_RQ}_0" arq/shards/example-0.h5 || bad "array task ${A_RQ}_0 never started fitting"
stop_when_fitting "${A_ST}_1" ast/shards/example-1.h5 || bad "array task ${A_ST}_1 never started fitting"
# The requeued job waits out Slurm's requeue delay (about 2 min). Not cut short: a requeued job
# started at once (scontrol update StartTime=now) was marked COMPLETED by its first run's
# late exit, with its second run's step aborted (Slurm 22.05).
wait_for "$J_OVER" "$J_REQ" "$J_STOP" "${SPLIT_IDS[@]}" "$M_SPLIT" "$A_RQ" "$M_RQ" "$A_ST" "$M_ST" || true
check "EF_ARGS=--overwrite job completed" completed "$J_OVER" || show_log "logs/overwrite-$J_OVER.out"
check "EF_ARGS=--overwrite: no '--resume and --overwrite' refusal" \
    bash -c "! grep -q 'exclude each other' logs/overwrite-$J_OVER.out"
check "EF_ARGS=--overwrite result == mpirun result (bitwise)" same ref.h5 core/example.h5
rlog=logs/requeue-$J_REQ.out
check "EF_REQUEUE=1: the stopped job requeued itself once and completed" \
    test "$(states "$J_REQ") $(records "$J_REQ" | field Restarts)" = "COMPLETED 1" || show_log "$rlog"
check "EF_REQUEUE=1: the log says so and keeps the first run's lines (appended)" \
    grep -q "stopped (exit 75): requeueing it (requeue 1 of at most 5)" "$rlog"
check "EF_REQUEUE=1: the log holds both runs" test "$(grep -c '^output: ' "$rlog")" = 2 || show_log "$rlog"
check "requeued result == mpirun result (bitwise)" same ref.h5 requeue/example.h5
slog2=logs/stop-$J_STOP.out
check "the stopped job exited 75" test "$(records "$J_STOP" | field ExitCode)" = 75:0 || show_log "$slog2"
again=$(grep -A1 'to finish, submit it again' "$slog2" | tail -n 1 | sed 's/^ *//')
log "stop hint: $again"
check "the stop hint names the resubmission of rank-per-core.sbatch without --overwrite" \
    bash -c "[[ '$again' == *'sbatch $JOBS/rank-per-core.sbatch $CONFIG'* && '$again' != *overwrite* ]]"
J_AGAIN=$(eval "${again/ sbatch / sbatch --parsable -o logs/stop-again-%j.out --ntasks-per-node=2 ${SITE_ARGS[*]} }")
J_AGAIN=${J_AGAIN%%;*}
echo "$J_AGAIN" >> "$JOBLIST"
wait_for "$J_AGAIN" || true
check "the stop hint's resubmission completed" completed "$J_AGAIN" || show_log "logs/stop-again-$J_AGAIN.out"
check "stopped + resubmitted result == mpirun result (bitwise)" same ref.h5 stop/example.h5
check "EF_REQUEUE=1: array task 0 requeued itself once, the array completed" \
    test "$(records "$A_RQ" | grep 'ArrayTaskId=0 ' | field Restarts) $(states "$A_RQ")" = "1 COMPLETED COMPLETED" \
    || show_log arq/logs/*_"$A_RQ"_0.out
check "the merge waited for the requeued task and completed" completed "$M_RQ" || show_log arq/logs/ef-merge_"$M_RQ".out
check "array with a requeued task, merged == mpirun result (bitwise)" same ref.h5 arq/example.h5
check "the stopped array task exited 75, its merge never ran" \
    test "$(task_state "$A_ST" 1) $(states "$M_ST")" = "FAILED CANCELLED" || show_log ast/logs/*_"$A_ST"_1.out
again=$(grep -h -A1 'to finish, submit it again' ast/logs/*_"$A_ST"_1.out | tail -n 1 | sed 's/^ *//')
log "array stop hint: $again"
check "the array task's hint is EF_RETRY=1 with submit-array.sh" \
    bash -c "[[ '$again' == 'EF_RETRY=1 EF_SHARDS=2 EF_OUTDIR=ast '*'submit-array.sh $CONFIG' ]]"
read -r _ A_ST2 M_ST2 < <(export EF_SBATCH_ARGS="--ntasks=1 $EF_SBATCH_ARGS"; eval "$again" | tail -n 1 \
    | sed 's/array=\([0-9]*\) merge=\([0-9]*\)/x \1 \2/')
printf '%s\n' "$A_ST2" "$M_ST2" >> "$JOBLIST"
wait_for "$A_ST2" "$M_ST2" || true
check "the array task's resubmission completed" completed "$A_ST2" || show_log ast/logs/*_"$A_ST2"_1.out
check "its merge completed" completed "$M_ST2" || show_log ast/logs/ef-merge_"$M_ST2".out
check "stopped array task resubmitted, merged == mpirun result (bitwise)" same ref.h5 ast/example.h5
check "4 shards, MaxArraySize 3: two arrays and the limit named" \
    bash -c "[[ '$A_SPLIT' == *,* ]] && grep -q 'MaxArraySize=3' split.err"
for a in "${SPLIT_IDS[@]}"; do check "split array $a completed" completed "$a"; done
check "the merge after both arrays completed" completed "$M_SPLIT" || show_log split/logs/ef-merge_"$M_SPLIT".out
check "split arrays merged == mpirun result (bitwise)" same ref.h5 split/example.h5

# ---------------------------------------------------------------- one-CPU jobs side by side
# Two one-CPU jobs at once, on an otherwise idle node: under task/none every job sees the whole
# node, and bind = auto takes the CPU_IDs Slurm gave each job (scontrol show job -d), so they run
# on CPUs 0 and 1, not both on the first.
J_ID1=$(EF_OUTDIR=ids1 EF_ARGS="--debug.slowdown 0:100" submit ids1 --ntasks-per-node=1 "$JOBS/rank-per-core.sbatch" "$CONFIG")
J_ID2=$(EF_OUTDIR=ids2 EF_ARGS="--debug.slowdown 0:100" submit ids2 --ntasks-per-node=1 "$JOBS/rank-per-core.sbatch" "$CONFIG")
# advise's sbatch line (from the first wave), after them: it takes the node's other CPUs.
J_ADVISED=$(EF_OUTDIR=advised submit advised "${AOPTS[@]}" "$JOBS/$ascript" "${AARGS[@]}")
wait_for "$J_ID1" "$J_ID2" "$J_ADVISED" || true
check "advise's sbatch line ran to completion" completed "$J_ADVISED" || show_log "logs/advised-$J_ADVISED.out"
check "advise's line: the script's check accepted it" grep -q "^job-check: $ascript: .*: accepted" "logs/advised-$J_ADVISED.out"
check "advise's line result == mpirun result (bitwise)" same ref.h5 advised/example.h5
for j in "$J_ID1" "$J_ID2"; do check "one-CPU job $j completed" completed "$j" || show_log logs/ids*-"$j".out; done
c1=$(place cores ids1/example.h5) c2=$(place cores ids2/example.h5)
tp=$(scontrol show config | sed -n 's/^TaskPlugin *= *//p')
ilogs=("logs/ids1-$J_ID1.out" "logs/ids2-$J_ID2.out")
if [[ "$tp" != *task/none* ]]; then
    skip "one-CPU jobs: TaskPlugin=$tp binds the tasks to the job's CPUs itself"
elif [ "$(grep -l "of Slurm job's CPU_IDs" "${ilogs[@]}" | wc -l)" = 2 ]; then
    if [ "$c1" != "$c2" ]; then
        ok "two one-CPU jobs at once under $tp: cores $c1 and $c2, each its job's CPU_IDs"
    else
        log "the two one-CPU jobs did not overlap in time (both got CPU $c1): distinctness not checked"
    fi
elif grep -q "(Slurm's numbering) are not 1 of them" "${ilogs[@]}"; then
    skip "one-CPU jobs: Slurm gave CPU_IDs this machine does not have (the node declares $CPUS CPUs), warned"
else
    bad "one-CPU jobs under $tp: the placement line does not say the cores came from the job's CPU_IDs (cores $c1, $c2)"
    show_log "${ilogs[@]}"
fi

# ---------------------------------------------------------------- GPU binding (pretend GPUs)
if [ -n "${J_GPU:-}" ]; then
    glog=logs/rank-per-gpu-$J_GPU.out
    check "rank-per-gpu job completed" completed "$J_GPU" || show_log "$glog"
    check "rank-per-gpu: each rank sees its own GPU" \
        test "$(grep -c '^rank [0-9]* on .*: GPU [0-9]' "$glog")" = "$G" -a \
        "$(grep '^rank [0-9]* on ' "$glog" | sed 's/.*GPU \([^,]*\),.*/\1/' | sort -u | wc -l)" = "$G"
    check "rank-per-gpu result == mpirun result (bitwise)" same ref.h5 gpu/example.h5
    check "rank-per-gpu: $G ranks on distinct cores" place distinct "$G" gpu/example.h5
else
    skip "rank-per-gpu.sbatch: the cluster has no GPUs"
fi
if [ -n "${J_HYB:-}" ]; then
    hlog=logs/hybrid-$J_HYB.out
    check "hybrid job completed" completed "$J_HYB" || show_log "$hlog"
    check "hybrid: rank 0 is the GPU rank with GPU 0" grep -q '^rank 0 on .*: GPU rank .*GPU 0,' "$hlog"
    check "hybrid: rank 1 is a CPU rank with 2 threads and no GPU" \
        grep -q '^rank 1 on .*: CPU rank .*GPU none, .*2 threads' "$hlog"
    check "hybrid: ensemblefit runs 2 threads per rank" grep -q 'cpu, 2 threads' "$hlog"
    check "hybrid result == mpirun result (bitwise)" same ref.h5 hybrid/example.h5
    check "hybrid: 2 ranks on distinct cores" place distinct 2 hybrid/example.h5
else
    skip "hybrid.sbatch: the cluster has no GPUs or fewer than 4 CPUs"
fi

# ---------------------------------------------------------------- scaling study + report
slog=logs/scaling-$J_SCALE.out
check "scaling-study job completed" completed "$J_SCALE" || show_log "$slog"
# More ranks than the node's real cores (the local cluster offers 4 CPUs on 2 cores) must share
# and be warned about; otherwise each rank has its own cores and nothing is warned.
REAL=$(getconf _NPROCESSORS_ONLN)
for r in $RANKS; do
    f=$(printf 'scaling/ranks-%04d.h5' "$r")
    awk -v h="=== $r rank(s) ->" 'index($0, h) == 1 { p = 1; next } /^=== / { p = 0 } p' "$slog" > "logs/scaling-$r.out"
    if [ "$r" -le "$REAL" ] || [ "$r" -le 1 ]; then
        check "scaling study, $r rank(s): the run's ranks on distinct cores" place distinct "$r" "$f"
        check "scaling study, $r rank(s): no shared-cores warning" no_share_warning "logs/scaling-$r.out"
    elif place distinct "$r" "$f"; then
        check "scaling study, $r ranks on $REAL cores: distinct cores, no warning" no_share_warning "logs/scaling-$r.out"
    else
        check "scaling study, $r ranks on $REAL cores: the shared cores are warned about" \
            grep -q "warning: ranks .* share cores" "logs/scaling-$r.out"
    fi
done
mkdir -p "$PLOTS"
if "$EF" report --help > /dev/null 2>&1; then
    check "report CSV: header has the scaling columns" \
        grep -q '^file,ranks,.*wall_s,speedup,.*parallel_efficiency,load_balance,communication_efficiency' scaling/report.csv
    check "report CSV: one row per rank count" \
        test "$(tail -n +2 scaling/report.csv | cut -d, -f2 | tr '\n' ' ' | sed 's/ $//')" = "$RANKS"
    check "plot_scaling.py draws the report CSV" $PY "$SRC/perf/plot_scaling.py" scaling/report.csv \
        -o "$PLOTS/scaling.png" --title "example.ini, 20000 replicas, ranks $RANKS (local Slurm)"
else
    skip "report CSV: this ensemblefit has no 'report' command yet"
    check "plot_scaling.py draws the result files" $PY "$SRC/perf/plot_scaling.py" scaling/ranks-*.h5 \
        -o "$PLOTS/scaling.png"
fi
check "plot_scaling.py draws the .h5 files directly" $PY "$SRC/perf/plot_scaling.py" scaling/ranks-*.h5 \
    -o "$PLOTS/scaling-from-h5.png"
check "plot_ensemble.py draws the merged array result" $PY "$SRC/tools/plot_ensemble.py" \
    array/example.h5 -o "$PLOTS/ensemble.png"
pngs=(scaling.png scaling-from-h5.png ensemble.png)
if [ -n "${J_DIS:-}" ]; then
    check "dis-mellin job completed" completed "$J_DIS" || show_log "logs/dis-mellin-$J_DIS.out"
    check "dis-mellin: 2 ranks on distinct cores" place distinct 2 dis/dis-mellin.h5
    check "plot_ensemble.py draws the dis-mellin ensemble and its x f(x) bands" $PY \
        "$SRC/tools/plot_ensemble.py" dis/dis-mellin.h5 -o "$PLOTS/ensemble-dis-mellin.png"
    pngs+=(ensemble-dis-mellin.png ensemble-dis-mellin-pdfs.png)
else
    skip "dis-mellin bands: no inputs/dis-mellin.ini, or this ensemblefit has no dis-mellin model"
fi
for png in "${pngs[@]}"; do
    check "$png is a PNG of a sensible size" bash -c \
        "[ \"\$(head -c 8 '$PLOTS/$png' | od -An -tx1 | tr -d ' ')\" = 89504e470d0a1a0a ] && [ \$(stat -c %s '$PLOTS/$png') -gt 20000 ]"
done

log "plots in $PLOTS: ${pngs[*]}"
echo "$PASS passed, $FAIL failed, $SKIP skipped"
[ "$FAIL" = 0 ]

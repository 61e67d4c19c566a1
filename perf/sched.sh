#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Scheduling and placement benchmarks, one subcommand each (notes above each one's function):
#   perf/sched.sh dispatch [BUILD_DIR]      the scheduler's dispatch cost per unit (issue #4)
#   perf/sched.sh policies BINARY [REPS]    the policies with one rank slowed (issue #21)
#   perf/sched.sh slurm BINARY [REPS]       strong scaling under Slurm, 1 and 2 ranks (issue #21)
#   perf/sched.sh advise [BUILD_DIR]        `ensemblefit advise` against measured walls (issue #26)

# ---- dispatch
# Dispatch cost per work unit and instrumentation overhead of the scheduler (issue #4).
# Usage: perf/sched.sh dispatch [BUILD_DIR]   (prints a JSON summary; raw files in a temp dir)
cmd_dispatch() (
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
build=${1:-$src/build}
EF=$(cd "$build" && pwd)/ensemblefit  # absolute: the runs cd into a temporary folder
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
g++ -O2 -std=c++20 -I"$src/include" "$here/phase_timer_bench.cpp" -o phase_timer_bench
./phase_timer_bench > timer.json
printf 'x,y\n0,1\n1,3\n2,5.1\n3,6.9\n' > line.csv
printf '[data]\nfile = line.csv\nx = x\ny = y\nsigma = 0.1\n[model]\nname = linear\n[param.a]\nstart = 0\n[param.b]\nstart = 1\n[fit]\nreplicas = %s\nchunk = 1\n[output]\nfile = out.h5\n' "${REPLICAS:-40000}" > line.ini
echo "{\"machine\": \"$(lscpu | sed -n 's/^Model name: *//p')\", \"cores\": $(nproc --all), \"date\": \"$(date -u +%F)\","
echo " \"phase_timer\": $(cat timer.json),"
echo " \"runs\": ["
first=1
# Tiny units (a 4-point line fit, ~5 us) show the raw round trip; "1ms" units (the same fits
# made 200x slower with --debug.slowdown on every rank) show what prefetching hides.
for unit in tiny 1ms; do
 for np in 2 4; do
  for policy in dynamic static; do
    rm -f out.h5*
    slow=""
    reps=${REPLICAS:-40000}
    if [ $unit = 1ms ]; then slow="--debug.slowdown $(seq -s, -f '%g:200' 0 $((np - 1)))"; reps=$((reps / 20)); fi
    mpirun --oversubscribe -np $np "$EF" fit line.ini --policy $policy --fit.replicas $reps $slow > run.log 2>&1
    /usr/bin/python3 - "$np" "$policy" "$first" "$unit" <<'PY'
import sys, h5py
np_, policy, first, unit = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4]
with h5py.File("out.h5", "r") as h:
    t = h["/timing"]
    units = t["units"][()].sum()
    wall = t.attrs["runtime_seconds"]
    sched = t["sched"][()]
    compute = t["compute"][()]
    worker_units = t["units"][()][1:].sum()
    print(("" if first else ",") + '  {"unit": "%s", "ranks": %s, "policy": "%s", "units": %d, "runtime_s": %.4f,'
          ' "dispatcher_us_per_request": %.3f, "worker_sched_us_per_unit": %.3f,'
          ' "compute_us_per_unit": %.3f, "sched_share_of_wall": %.5f}'
          % (unit, np_, policy, units, wall, t.attrs["dispatch_microseconds_per_request"],
             1e6 * sched[1:].sum() / max(1, worker_units), 1e6 * compute.sum() / max(1, units),
             sched.sum() / (wall * len(sched))))
PY
    first=0
  done
 done
done
echo " ]}"
)

# ---- policies
# Scheduling policies with one rank slowed (issue #21): the README's example fit (inputs/example.ini,
# an exponential on 60 points) with 20000 replicas on 4 ranks, rank 1 made 4x slower by
# --debug.slowdown (a sleep of 3x each unit's compute time after the unit), under static, dynamic,
# guided and weighted; REPS repetitions, the policies interleaved (in a shuffled order each
# repetition, seeded by its number, so no policy always follows the same one), so slow and busy
# moments of a shared machine fall on every policy alike.
# Wall time and load balance of each run come from the output's /timing attributes.
#
# Usage: perf/sched.sh policies BINARY [REPS]          (builds nothing; REPS default 5)
#   env: REPLICAS (20000), NP (4), SLOWDOWN (1:4), MACHINE (a name for the JSON file),
#        OUT (default perf/out/MACHINE-DATE-policies.json), NOTE (a remark kept in it)
# Prints one line per run and a summary per policy (median wall, median load balance); writes
# the JSON with every run, the machine load (uptime) before each run, and the summary.
cmd_policies() (
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
[ $# -ge 1 ] || { echo "usage: $0 policies BINARY [REPS]" >&2; exit 2; }
EF=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
[ -x "$EF" ] || { echo "$0: $EF is not an executable" >&2; exit 2; }
reps=${2:-5}
replicas=${REPLICAS:-20000}
np=${NP:-4}
slowdown=${SLOWDOWN:-1:4}
machine=${MACHINE:-$(lscpu | sed -n 's/^Model name: *//p' | tr 'A-Z ' 'a-z-' | tr -cd 'a-z0-9-')-$(nproc --all)core}
date=$(date -u +%F)
out=${OUT:-$src/perf/out/$machine-$date-policies.json}
mkdir -p "$(dirname "$out")" && out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")  # cd below
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$src/inputs/example.ini" "$src/inputs/decay.csv" "$work/"
cd "$work"
policies=(static dynamic guided weighted)
load1() { cut -d' ' -f1 /proc/loadavg; }
: > runs.jsonl
echo "# $EF, $replicas replicas, $np ranks, --debug.slowdown $slowdown, $reps repetitions; uptime:$(uptime)"
for ((rep = 0; rep < reps; ++rep)); do
    RANDOM=$((rep + 1))
    order=("${policies[@]}")
    for ((k = ${#order[@]} - 1; k > 0; --k)); do
        j=$((RANDOM % (k + 1)))
        t=${order[k]} && order[k]=${order[j]} && order[j]=$t
    done
    for p in "${order[@]}"; do
        before=$(load1)
        rm -f run.h5 run.h5.timing.json
        mpirun --oversubscribe -np "$np" "$EF" fit example.ini --fit.replicas "$replicas" --policy "$p" \
            --output.file run.h5 --debug.slowdown "$slowdown" > run.log 2>&1 || { cat run.log >&2; exit 1; }
        [ -s placement.txt ] || awk '/^ *rank +host/ { t = 1; print; next } t && /^ *[0-9]+ / { print; next } { t = 0 }' run.log > placement.txt
        /usr/bin/python3 - "$rep" "$p" "$before" >> runs.jsonl <<'PY'
import json, sys, h5py
rep, policy, load = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
with h5py.File("run.h5", "r") as h:
    t = h["/timing"]
    run = {"rep": rep, "policy": policy, "wall_s": round(float(t.attrs["runtime_seconds"]), 4),
           "load_balance": round(float(t.attrs["load_balance"]), 4),
           "replicas_per_rank": [int(x) for x in t["replicas"][()]],
           "units_per_rank": [int(x) for x in t["units"][()]],
           "compute_s_per_rank": [round(float(x), 4) for x in t["compute"][()]],
           "sched_s_per_rank": [round(float(x), 4) for x in t["sched"][()]],
           "load_before": load}
print(json.dumps(run))
PY
        tail -1 runs.jsonl | /usr/bin/python3 -c 'import json,sys; r=json.load(sys.stdin); print("rep %d %-8s wall %.3f s  load balance %.3f  replicas %s  (load %.2f)" % (r["rep"], r["policy"], r["wall_s"], r["load_balance"], r["replicas_per_rank"], r["load_before"]))'
    done
done
tree="$(git -C "$src" rev-parse --short HEAD)"
git -C "$src" diff --quiet HEAD -- src include kernels CMakeLists.txt || tree="$tree + uncommitted changes"
/usr/bin/python3 - runs.jsonl "$out" "$(lscpu | sed -n 's/^Model name: *//p'), $(nproc --all) cores" "$date" \
    "perf/sched.sh policies $1 $reps" "$tree" \
    "inputs/example.ini, $replicas replicas, $np ranks (mpirun --oversubscribe), --debug.slowdown $slowdown" \
    "$(uptime)" "${NOTE:-}" <<'PY'
import json, statistics, sys
runs_file, out, device, date, command, tree, setup, uptime_end, note = sys.argv[1:10]
runs = [json.loads(line) for line in open(runs_file)]
summary = {}
for p in ["static", "dynamic", "guided", "weighted"]:
    mine = [r for r in runs if r["policy"] == p]
    summary[p] = {"runs": len(mine), "median_wall_s": round(statistics.median(r["wall_s"] for r in mine), 3),
                  "min_wall_s": min(r["wall_s"] for r in mine), "max_wall_s": max(r["wall_s"] for r in mine),
                  "median_load_balance": round(statistics.median(r["load_balance"] for r in mine), 3),
                  "median_units": statistics.median(sum(r["units_per_rank"]) for r in mine),
                  "min_load_balance": min(r["load_balance"] for r in mine)}
best = min(summary[p]["median_wall_s"] for p in ["dynamic", "guided", "weighted"])
for p in ["dynamic", "guided", "weighted"]:
    s = summary[p]
    s["wall_over_best"] = round(s["median_wall_s"] / best, 3)
    s["goal_met"] = s["median_load_balance"] >= 0.95 and s["median_wall_s"] <= 1.10 * best
doc = {"benchmark": "scheduling policies with one rank slowed", "device": device, "date": date,
       "command": command, "tree": tree, "setup": setup,
       "goal": "dynamic, guided, weighted: load balance >= 0.95 and median wall within 10 % of the best of them",
       "uptime_end": uptime_end.strip(), "note": note,
       "placement": [line.rstrip() for line in open("placement.txt") if line.strip()],
       "summary": summary, "runs": runs}
with open(out, "w") as f:  # one line per run
    head = json.dumps({k: v for k, v in doc.items() if k != "runs"}, indent=1)
    f.write(head[:-2] + ',\n "runs": [\n  ' + ",\n  ".join(json.dumps(r) for r in runs) + "\n ]\n}\n")
print("policy    runs  median wall s  (min-max)       median LB  (min)   units  wall/best  goal")
for p, s in summary.items():
    print("%-9s %4d  %13.3f  (%.3f-%.3f)  %9.3f  (%.3f)  %5d  %9s  %s" % (
        p, s["runs"], s["median_wall_s"], s["min_wall_s"], s["max_wall_s"], s["median_load_balance"],
        s["min_load_balance"], s["median_units"], s.get("wall_over_best", "-"), s.get("goal_met", "-")))
PY
echo "wrote $out"
)

# ---- slurm
# Strong scaling on a Slurm node through jobs/scaling-study.sbatch (issue #21): the README's
# example fit (inputs/example.ini, an exponential on 60 points; CPU-bound, one thread per rank)
# with REPLICAS replicas on 1 and 2 ranks, REPS jobs, each running both rank counts in one
# allocation (--exclusive), the order alternating between jobs (1 2, 2 1, ...) so that drift in
# the machine's load falls on both alike. A benchmark, not a test: nothing is asserted.
#
# Per run: the srun step's wall time (launch and MPI start-up included, from the job log),
# ensemblefit's runtime_seconds and the slowest rank's setup phase (from /timing), start-up =
# step wall - (runtime - setup), i.e. everything before the first unit; the stored placement
# (cores per rank). Speedup of 2 ranks = median step wall of 1 rank / median step wall of 2
# ranks (and the same over runtime_seconds). Goal (issue #21): > 1.5 on a 2-core node, with
# start-up under 10 % of the run.
#
# Usage: perf/sched.sh slurm BINARY [REPS]                   (REPS default 3)
#   env: REPLICAS (default 200000), RANKS (default "1 2"), MACHINE (name for the JSON file),
#        OUT (default perf/out/MACHINE-DATE-scaling.json), NOTE (a remark kept in it),
#        SBATCH_ARGS (more sbatch options: account, partition), START_SLURM=1 (no controller
#        answering: start the local one of tests/slurm/slurm-local.sh, root on Debian, and stop
#        what it started at the end).
cmd_slurm() (
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
[ $# -ge 1 ] || { echo "usage: $0 slurm BINARY [REPS]" >&2; exit 2; }
EF=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
[ -x "$EF" ] || { echo "$0: $EF is not an executable" >&2; exit 2; }
reps=${2:-3}
replicas=${REPLICAS:-200000}
read -r -a ranks <<< "${RANKS:-1 2}"
maxr=$(printf '%s\n' "${ranks[@]}" | sort -n | tail -n 1)
machine=${MACHINE:-$(lscpu | sed -n 's/^Model name: *//p' | tr 'A-Z ' 'a-z-' | tr -cd 'a-z0-9-')-$(nproc --all)core}
date=$(date -u +%F)
out=${OUT:-$src/perf/out/$machine-$date-scaling.json}
mkdir -p "$(dirname "$out")" && out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
read -r -a sbatch_args <<< "${SBATCH_ARGS:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset EF_CONFIG EF_OUTDIR EF_OUTPUT EF_ARGS EF_SRUN_ARGS OMP_NUM_THREADS OMP_PLACES OMP_PROC_BIND

started=$(mktemp)
work=$(mktemp -d "$PWD/slurm-scaling.XXXXXX")   # visible to the node: under the current folder
cleanup() {
    rm -rf "$work"
    if [ -s "$started" ]; then SLURM_LOCAL_STARTED=$started bash "$src/tests/slurm/slurm-local.sh" down; fi
    rm -f "$started"
}
trap cleanup EXIT
if ! timeout 10 scontrol ping 2> /dev/null | grep -q 'is UP'; then
    [ "${START_SLURM:-0}" = 1 ] || { echo "$0: no Slurm controller answers (START_SLURM=1 starts the local one)" >&2; exit 2; }
    SLURM_LOCAL_STARTED=$started bash "$src/tests/slurm/slurm-local.sh" up
fi
cp "$src/inputs/example.ini" "$src/inputs/decay.csv" "$work/"
cd "$work"
echo "# $EF: $replicas replicas, ranks ${ranks[*]}, $reps job(s); $(sinfo -h -o '%n %c CPUs' | head -n 1); uptime:$(uptime)"

for ((rep = 0; rep < reps; ++rep)); do
    order=("${ranks[@]}")
    if ((rep % 2 == 1)); then mapfile -t order < <(printf '%s\n' "${ranks[@]}" | sort -rn); fi
    load=$(cut -d' ' -f1 /proc/loadavg)
    id=$(EF_BINARY=$EF EF_OUTDIR=rep$rep EF_RANKS="${order[*]}" sbatch --parsable --exclusive --ntasks="$maxr" \
        -o "rep$rep.log" "${sbatch_args[@]}" "$src/jobs/scaling-study.sbatch" example.ini --fit.replicas "$replicas")
    id=${id%%;*}
    while squeue -h -j "$id" 2> /dev/null | grep -q .; do sleep 0.5; done
    grep -q "^=== report" "rep$rep.log" || { cat "rep$rep.log" >&2; echo "$0: job $id failed" >&2; exit 1; }
    for r in "${order[@]}"; do
        step=$(sed -n "s/^=== $r rank(s): srun step \([0-9.]*\) s$/\1/p" "rep$rep.log")
        /usr/bin/python3 - "$rep" "$r" "$step" "$load" "$(printf 'rep%d/ranks-%04d.h5' "$rep" "$r")" >> runs.jsonl <<'PY'
import json, sys, h5py
rep, ranks, step, load, path = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
with h5py.File(path, "r") as h:
    t = h["/timing"]
    runtime = float(t.attrs["runtime_seconds"])
    setup = max(float(x) for x in t["setup"][()])
    placement = [(p.decode() if isinstance(p, bytes) else p).split("\t") for p in t.attrs["placement"]]
    balance = float(t.attrs["load_balance"])
print(json.dumps({"rep": rep, "ranks": ranks, "step_wall_s": step, "runtime_s": round(runtime, 4),
                  "setup_s": round(setup, 4), "startup_s": round(step - (runtime - setup), 4),
                  "startup_share": round((step - (runtime - setup)) / step, 4),
                  "load_balance": round(balance, 4),
                  "cores": [p[4] for p in placement], "binding": [p[5] for p in placement],
                  "load_before": load}))
PY
        tail -n 1 runs.jsonl
    done
done

tree="$(git -C "$src" rev-parse --short HEAD)"
git -C "$src" diff --quiet HEAD -- src include kernels jobs CMakeLists.txt || tree="$tree + uncommitted changes"
/usr/bin/python3 - runs.jsonl "$out" "$(lscpu | sed -n 's/^Model name: *//p'), $(nproc --all) cores" "$date" \
    "perf/sched.sh slurm $1 $reps" "$tree" "$replicas" "$(sinfo -V) ($(scontrol show config | sed -n 's/^TaskPlugin *= *//p'))" \
    "$(uptime)" "${NOTE:-}" <<'PY'
import json, statistics, sys
runs_file, out, device, date, command, tree, replicas, slurm, uptime_end, note = sys.argv[1:11]
runs = [json.loads(line) for line in open(runs_file)]
med = lambda xs: round(statistics.median(xs), 3)
summary = {}
for r in sorted({x["ranks"] for x in runs}):
    mine = [x for x in runs if x["ranks"] == r]
    summary[r] = {"runs": len(mine), "median_step_wall_s": med(x["step_wall_s"] for x in mine),
                  "median_runtime_s": med(x["runtime_s"] for x in mine),
                  "median_startup_share": med(x["startup_share"] for x in mine),
                  "max_startup_share": max(x["startup_share"] for x in mine)}
base = summary[min(summary)]
for r, s in summary.items():
    s["speedup_step_wall"] = round(base["median_step_wall_s"] / s["median_step_wall_s"], 3)
    s["speedup_runtime"] = round(base["median_runtime_s"] / s["median_runtime_s"], 3)
doc = {"benchmark": "strong scaling under Slurm (jobs/scaling-study.sbatch)", "device": device, "date": date,
       "command": command, "tree": tree, "slurm": slurm,
       "setup": f"inputs/example.ini, {replicas} replicas, 1 thread per rank, sbatch --exclusive",
       "goal": "speedup > 1.5 at 2 ranks on a 2-core node, start-up under 10 % of the run",
       "uptime_end": uptime_end.strip(), "note": note, "summary": summary, "runs": runs}
with open(out, "w") as f:
    head = json.dumps({k: v for k, v in doc.items() if k != "runs"}, indent=1)
    f.write(head[:-2] + ',\n "runs": [\n  ' + ",\n  ".join(json.dumps(x) for x in runs) + "\n ]\n}\n")
print("ranks  runs  median step wall s  median runtime s  start-up share (max)  speedup (step wall)  speedup (runtime)")
for r, s in summary.items():
    print("%5d  %4d  %18.3f  %16.3f  %12.3f (%.3f)  %19.3f  %17.3f" % (
        r, s["runs"], s["median_step_wall_s"], s["median_runtime_s"], s["median_startup_share"],
        s["max_startup_share"], s["speedup_step_wall"], s["speedup_runtime"]))
PY
echo "wrote $out"
)

# ---- advise
# Is `ensemblefit advise` right? For three problems (the stats2 dis-mellin fit, the spot
# ensemble of many small fits, the ptychography example): advise with -o, then the recommended
# placement and one other (the predicted runner-up, or 1 rank when that is the pick), each timed
# as users time it (the whole `mpirun ... ensemblefit` command) with --predicted. Prints and
# writes a TSV: problem, placement, recommended, predicted and measured seconds, error.
# Goals (issue #26): |error| <= 25 %; the recommended measured <= 1.10 x the other.
#   perf/sched.sh advise [BUILD_DIR]   (EF_BENCH_SIZE=small|full; default small;
#                                             EF_BENCH_ROWS=all: every placement of the table)
# small sizes keep the whole script to a few minutes on 2 cores; full uses the issue's sizes.
# On the GPU machine (no build tree, no Python needed): the bundle that `perf/recon/gpu_run.sh
# prepare` makes here, carried as .gpu-run, from the repository root:
#   EF_BUNDLE=.gpu-run EF_BENCH_ROWS=all perf/sched.sh advise
# (every row: CPU ranks on all cores, the GPU with 1, 2 and 4 ranks, both together).
cmd_advise() (
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${EF_BUNDLE:-}" ]; then
    # shellcheck disable=SC1090,SC1091
    source "$(cd "$EF_BUNDLE" && pwd)/env.sh"
    # shellcheck disable=SC1091
    source "$SRC/perf/recon/bench_config.sh"
    gpu_machine_env  # cuFFT from the machine's toolkit (or PyTorch's wheels, where Python is)
    EF=$(command -v ensemblefit)
else
    BUILD=${1:-$SRC/build}
    EF=$BUILD/ensemblefit
fi
[ -x "$EF" ] || { echo "no ensemblefit at '$EF' (give BUILD_DIR, or EF_BUNDLE on the GPU machine)" >&2; exit 2; }
OUTDIR=$SRC/perf/out
mkdir -p "$OUTDIR"
HOST=$(hostname -s 2>/dev/null || cat /proc/sys/kernel/hostname)
STAMP=$(date -u +%Y%m%dT%H%MZ)
TSV=$OUTDIR/$HOST-$STAMP.tsv
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ef-advise-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cp "$SRC"/inputs/{stats2.ini,dis-mellin-lo.h5,spot.ini,spot.csv,ptycho.ini,ptycho_small.h5} "$WORK"
cd "$WORK"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

if [ "${EF_BENCH_SIZE:-small}" = full ]; then
    STATS2="" SPOT="--fit.replicas 100000" PTYCHO="--output.previews false"
else
    STATS2="--fit.replicas 48" SPOT="--fit.replicas 20000" PTYCHO="--solver.iterations 15 --output.previews false"
fi
BUDGET=${EF_ADVISE_BUDGET:-20}

# run_row PROBLEM CMD CONFIG ARGS PRED.tsv ROW_LINE RECOMMENDED: one timed run of a row's placement.
run_row() {
    local problem=$1 cmd=$2 config=$3 args=$4 pred=$5 row=$6 rec=$7
    IFS=$'\t' read -r label ranks cpu_ranks threads gpus rpg wall runtime eff flag <<< "$row"
    local common="$config $args --predicted $pred --output.file run.h5 --overwrite"
    local t0 t1 rc=0
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    if [ "$gpus" -gt 0 ] && [ "$cpu_ranks" -gt 0 ]; then  # CPU ranks must not see the GPU (advise prints the same)
        mpirun --bind-to none --oversubscribe -np $((ranks - cpu_ranks)) "$EF" "$cmd" $common --run.workers gpu \
            --run.threads 1 : -np "$cpu_ranks" -x CUDA_VISIBLE_DEVICES= "$EF" "$cmd" $common --run.workers cpu \
            --run.threads "$threads" > run.log 2>&1 || rc=$?
    else
        mpirun --bind-to none --oversubscribe -np "$ranks" "$EF" "$cmd" $common \
            --run.workers "$([ "$gpus" -gt 0 ] && echo gpu || echo cpu)" --run.threads "$threads" > run.log 2>&1 || rc=$?
    fi
    [ "$rc" = 0 ] || { cat run.log; echo "run failed: $label"; exit 1; }
    t1=$(date +%s.%N)
    local measured err
    measured=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
    err=$(awk -v p="$wall" -v m="$measured" 'BEGIN { print 100 * (p - m) / m }')
    printf '%s\t%s\t%s\t%.2f\t%.2f\t%+.1f\t%s\n' "$problem" "$label" "$rec" "$wall" "$measured" "$err" \
        "$(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$TSV"
}

# bench PROBLEM CMD CONFIG ARGS
bench() {
    local problem=$1 cmd=$2 config=$3 args=$4
    # shellcheck disable=SC2086
    "$EF" advise "$config" $args --budget "$BUDGET" -o "$problem.tsv" > "$problem.advice.log"
    sed -n '/^placement/,/^recommended/p' "$problem.advice.log" >&2
    cp "$problem.advice.log" "${TSV%.tsv}-$problem.advice.log"  # its calibration points, beside the table
    local rec other
    rec=$(awk -F'\t' '!/^#/ && $10 == 1' "$problem.tsv")
    # The other: the best-predicted row that is not the pick.
    other=$(awk -F'\t' '!/^#/ && $10 == 0 && $1 != "placement"' "$problem.tsv" | sort -t$'\t' -k7,7g | head -1)
    run_row "$problem" "$cmd" "$config" "$args" "$problem.tsv" "$rec" yes
    if [ "${EF_BENCH_ROWS:-two}" != all ]; then
        run_row "$problem" "$cmd" "$config" "$args" "$problem.tsv" "$other" no
        return
    fi
    local row
    awk -F'\t' '!/^#/ && $10 == 0 && $1 != "placement"' "$problem.tsv" > "$problem.others"
    while IFS= read -r row; do
        run_row "$problem" "$cmd" "$config" "$args" "$problem.tsv" "$row" no < /dev/null
    done < "$problem.others"
}

printf 'problem\tplacement\trecommended\tpredicted_s\tmeasured_s\terror_pct\tload\n' | tee "$TSV"
bench stats2 fit stats2.ini "$STATS2"
bench spot fit spot.ini "$SPOT"
bench ptycho reconstruct ptycho.ini "$PTYCHO"
echo "written: $TSV ($(nproc) cores, $("$EF" --version | head -1))"
)

sub=${1:-}
case "$sub" in
    dispatch|policies|slurm|advise) shift; "cmd_${sub//-/_}" "$@" ;;
    *) sed -n '3,/^$/p' "$0" >&2; exit 2 ;;
esac

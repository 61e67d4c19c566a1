#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
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
# Usage: perf/slurm/scaling.sh BINARY [REPS]                   (REPS default 3)
#   env: REPLICAS (default 200000), RANKS (default "1 2"), MACHINE (name for the JSON file),
#        OUT (default perf/slurm/results/MACHINE-DATE-scaling.json), NOTE (a remark kept in it),
#        SBATCH_ARGS (more sbatch options: account, partition), START_SLURM=1 (no controller
#        answering: start the local one of tests/slurm/slurm-local.sh, root on Debian, and stop
#        what it started at the end).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
[ $# -ge 1 ] || { sed -n '3,20p' "$0" >&2; exit 2; }
EF=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
[ -x "$EF" ] || { echo "$0: $EF is not an executable" >&2; exit 2; }
reps=${2:-3}
replicas=${REPLICAS:-200000}
read -r -a ranks <<< "${RANKS:-1 2}"
maxr=$(printf '%s\n' "${ranks[@]}" | sort -n | tail -n 1)
machine=${MACHINE:-$(lscpu | sed -n 's/^Model name: *//p' | tr 'A-Z ' 'a-z-' | tr -cd 'a-z0-9-')-$(nproc --all)core}
date=$(date -u +%F)
out=${OUT:-$src/perf/slurm/results/$machine-$date-scaling.json}
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
    "perf/slurm/scaling.sh $1 $reps" "$tree" "$replicas" "$(sinfo -V) ($(scontrol show config | sed -n 's/^TaskPlugin *= *//p'))" \
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

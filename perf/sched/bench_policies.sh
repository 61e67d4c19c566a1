#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Scheduling policies with one rank slowed (issue #21): the README's example fit (inputs/example.ini,
# an exponential on 60 points) with 20000 replicas on 4 ranks, rank 1 made 4x slower by
# --debug.slowdown (a sleep of 3x each unit's compute time after the unit), under static, dynamic,
# guided and weighted; REPS repetitions, the policies interleaved (in a shuffled order each
# repetition, seeded by its number, so no policy always follows the same one), so slow and busy
# moments of a shared machine fall on every policy alike.
# Wall time and load balance of each run come from the output's /timing attributes.
#
# Usage: perf/sched/bench_policies.sh BINARY [REPS]          (builds nothing; REPS default 5)
#   env: REPLICAS (20000), NP (4), SLOWDOWN (1:4), MACHINE (a name for the JSON file),
#        OUT (default perf/sched/results/MACHINE-DATE-policies.json), NOTE (a remark kept in it)
# Prints one line per run and a summary per policy (median wall, median load balance); writes
# the JSON with every run, the machine load (uptime) before each run, and the summary.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
[ $# -ge 1 ] || { echo "usage: $0 BINARY [REPS]" >&2; exit 2; }
EF=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
[ -x "$EF" ] || { echo "$0: $EF is not an executable" >&2; exit 2; }
reps=${2:-5}
replicas=${REPLICAS:-20000}
np=${NP:-4}
slowdown=${SLOWDOWN:-1:4}
machine=${MACHINE:-$(lscpu | sed -n 's/^Model name: *//p' | tr 'A-Z ' 'a-z-' | tr -cd 'a-z0-9-')-$(nproc --all)core}
date=$(date -u +%F)
out=${OUT:-$src/perf/sched/results/$machine-$date-policies.json}
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
    "perf/sched/bench_policies.sh $1 $reps" "$tree" \
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

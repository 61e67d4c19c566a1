#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Dispatch cost per work unit and instrumentation overhead of the scheduler (issue #4).
# Usage: perf/sched/bench_dispatch.sh [BUILD_DIR]   (prints a JSON summary; raw files in a temp dir)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${1:-$src/build}
EF=$build/ensemblefit
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

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What the silence watch costs: the same CPU reconstruction and fit with [run] heartbeat_timeout
# 0 (blocking MPI_Barrier/MPI_Allreduce, blocking MPI_Recv for a unit) and 300 (nonblocking
# collectives waited for by MPI_Test, the dispatcher's silence checks), alternated, REPS each.
#   perf/heartbeat/bench_heartbeat.sh ENSEMBLEFIT [RANKS] [THREADS] [REPS]
# Prints one JSON line per run: what, timeout, ranks, wall seconds, median seconds per iteration.
set -euo pipefail
EF=$1; NP=${2:-4}; T=${3:-4}; REPS=${4:-3}
W=$(mktemp -d); cd "$W"
export OMP_NUM_THREADS=$T OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$EF" simulate ptycho --out sim.h5 --scan 32 --dp 64 --dose 1e7 --seed 3 > /dev/null
printf '[data]\nfile = sim.h5\n[solver]\niterations = 40\nbatch_size = 32\n[output]\nfile = r.h5\nreport_every = 1\npreviews = false\n[run]\nbalance = equal\n' > r.ini
printf 'x,y\n' > d.csv; for i in $(seq 0 1999); do echo "$i,$(( (i * 7919) % 1000 ))" >> d.csv; done
printf '[data]\nfile = d.csv\nx = x\ny = y\nsigma = 10\n[model]\nname = polynomial\norder = 3\n[param.c0]\nstart = 1\n[param.c1]\nstart = 0\n[param.c2]\nstart = 0\n[param.c3]\nstart = 0\n[fit]\nreplicas = 20000\nchunk = 50\n[output]\nfile = f.h5\n' > f.ini
for rep in $(seq 1 "$REPS"); do
    for hb in 0 300; do
        rm -f r.h5* f.h5*
        t0=$(date +%s.%N)
        mpirun --bind-to none -np "$NP" "$EF" reconstruct r.ini --run.heartbeat_timeout $hb > r.log 2>&1
        t1=$(date +%s.%N)
        med=$(awk '$1 ~ /^[0-9]+$/ && NF >= 3 && $1 > 5 {print $3}' r.log | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
        echo "{\"what\": \"reconstruct\", \"timeout\": $hb, \"ranks\": $NP, \"threads\": $T, \"wall\": $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}'), \"median_s_per_iter\": $med}"
        t0=$(date +%s.%N)
        mpirun --bind-to none -np "$NP" "$EF" fit f.ini --run.heartbeat_timeout $hb > f.log 2>&1
        t1=$(date +%s.%N)
        echo "{\"what\": \"fit\", \"timeout\": $hb, \"ranks\": $NP, \"threads\": $T, \"wall\": $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')}"
    done
done

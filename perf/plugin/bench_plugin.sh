#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A model plugin against the same model built in (issue #23's goal: within 5 %): the 15x15 spot
# of inputs/spot.ini, REPLICAS smeared replicas on 1 rank and 1 thread, fitted with the built-in
# gaussian2d and with perf/plugin/spot_plugin.hpp (the same formula) built by
# ensemblefit_add_model against the package installed from BUILD, alternated REPS times, on the
# qr path in double and the normal path in float. Prints one JSON line per run: model, solver,
# the rank's compute seconds (the timing report) and the process's CPU seconds (user + system:
# less sensitive than wall time to other programs sharing the cores), and fits per second of each.
#   perf/plugin/bench_plugin.sh BUILD [REPLICAS] [REPS]
set -euo pipefail
BUILD=$(realpath "$1"); R=${2:-20000}; REPS=${3:-3}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cmake --install "$BUILD" --prefix "$W/prefix" > /dev/null
cmake -S "$SRC/perf/plugin" -B "$W/plugin" -DCMAKE_PREFIX_PATH="$W/prefix" > /dev/null
cmake --build "$W/plugin" > /dev/null
EF=$W/prefix/bin/ensemblefit
for rep in $(seq 1 "$REPS"); do
    for solver in qr float; do
        extra=(); [ "$solver" = float ] && extra=(--fit.precision=float)
        for model in builtin plugin; do
            if [ "$model" = builtin ]; then m=(--model.name=gaussian2d)
            else m=(--model.name=plugin --model.plugin="$W/plugin/libspot_plugin.so"); fi
            /usr/bin/time -f "%U %S" -o "$W/cpu" "$EF" fit "$SRC/inputs/spot.ini" "${m[@]}" "${extra[@]}" \
                --fit.replicas="$R" --run.threads=1 --output.file="$W/out.h5" > "$W/log" 2>&1
            cpu=$(awk '{ printf "%.3f", $1 + $2 }' "$W/cpu")
            # The timing table's row of rank 0 (after its header): rank setup compute ...
            compute=$(awk '/^ *rank +setup +compute/ { t = 1; next } t && $1 == "0" { print $3; exit }' "$W/log")
            echo "{\"model\": \"$model\", \"solver\": \"$solver\", \"replicas\": $R, \"compute_s\": $compute, \"fits_per_s\": $(awk -v r="$R" -v c="$compute" 'BEGIN { printf "%.0f", (r + 1) / c }'), \"process_cpu_s\": $cpu, \"fits_per_cpu_s\": $(awk -v r="$R" -v c="$cpu" 'BEGIN { printf "%.0f", (r + 1) / c }')}"
            rm -f "$W"/out.h5*
        done
    done
done

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Cost of multislice: seconds per iteration of the same reconstruction with model.slices = 1 and
# 4 (and 2), on the CPU worker, on one 4-slice dataset (10 x 10 positions, 64 x 64 patterns, one
# mode; the conditions of tests/mpi/multislice.sh). Prints a JSON line per run (the mean
# iteration time without the first, /timing seconds_per_iteration) and the load average.
# usage: perf/recon/multislice_cost.sh BUILD/ensemblefit [ITERATIONS] [THREADS] > RESULT.json
set -euo pipefail
EF=$(realpath "$1")
ITS=${2:-30}
THREADS=${3:-2}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ef-mscost.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
"$EF" simulate ptycho --out ms4.h5 --scan 10 --dp 64 --modes 1 --dose 1e7 --aperture 16 --probe-radius 18 \
    --step 6 --lattice 6 --atom-sigma 1.2 --phase-max 1.5 --slices 4 --slice-thickness 2.5e-9 --seed 2 \
    --store-probe --threads "$THREADS" > /dev/null
cat > ms.ini <<INI
[data]
file = ms4.h5
[model]
slice_thickness = 2.5e-9
[object]
lr_amplitude = 5e-3
lr_phase = 5e-3
[probe]
lr = 0
[solver]
iterations = $ITS
batch_size = 5
[run]
threads = $THREADS
[output]
file = out.h5
previews = false
INI
for slices in 1 4 2 1 4; do
    load=$(cut -d' ' -f1 /proc/loadavg)
    "$EF" reconstruct ms.ini --model.slices "$slices" --overwrite > run.log
    /usr/bin/python3 - "$slices" "$load" "$ITS" "$THREADS" <<'PY'
import h5py, json, sys
f = h5py.File("out.h5", "r")
print(json.dumps({"slices": int(sys.argv[1]), "iterations": int(sys.argv[3]), "threads": int(sys.argv[4]),
                  "seconds_per_iteration": float(f["/timing"].attrs["seconds_per_iteration"]),
                  "load_before": float(sys.argv[2])}))
PY
done
echo "{\"load_after\": $(cut -d' ' -f1 /proc/loadavg), \"cpu\": \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)\", \"cores\": $(nproc)}"

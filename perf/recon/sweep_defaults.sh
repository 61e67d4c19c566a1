#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue #25's default-convergence sweep: simulated datasets over the range dose 1e5..1e9 counts
# per pattern, scan 16..64, patterns 64..128 px, 1..4 probe modes, overlap 60..85 %, each
# reconstructed with a minimal config (the data file and the output, nothing else: every step
# size, the batch and the schedule are defaults) for ITERATIONS iterations, the phase NRMSE
# against the simulated truth read at every iteration. Minimal config: 4 probe modes, the
# amplitude data term and simulate's Fermat-spiral scan are defaults too.
#   bash perf/recon/sweep_defaults.sh [GRID] [ITERATIONS]        (from the repository root)
# GRID: corners  the 2^5 = 32 corners of the range (the default)
#       small    the 4 corners of tests/mpi/recon_defaults.sh (scan 16, 64 px: CPU-sized)
#       full     corners plus the middle of each axis (3^5 = 243 cases: a GPU machine's job)
# Overlap is 1 - mean nearest-neighbour step / probe diameter (the geometric disc, diameter
# dp / 4 with simulate's default probe radius dp / 8): step = (1 - overlap) x dp / 4 pixels.
# Environment: EF (the program; build/ensemblefit), MPIRUN ("" = one rank, else e.g.
# "mpirun -np 2 --oversubscribe"), EXTRA (more reconstruct options, e.g. "--run.workers gpu";
# anything but the worker kind changes what is measured), OUT (folder, perf/recon/out/sweep),
# DOSES (a subset of the grid's doses, e.g. "1e5", to split a grid over several calls),
# EF_BUNDLE (a runtime bundle from `perf/recon/gpu_run.sh prepare`, e.g. .gpu-run: the GPU
# machine, which has no MPI or HDF5 of its own; EF is then the bundle's ensemblefit).
# The scan is simulate's default, a Fermat spiral whose mean nearest-neighbour step is `step`
# (SCAN_PATTERN=raster measures the regular grid and its ambiguity instead). Needs only bash,
# awk and the program: ensemblefit prints the NRMSE itself, no Python.
# On the GPU machine (carry .gpu-run; 16 cases a call, one call per dose to stay within a
# command's time limit):
#   EF_BUNDLE=.gpu-run DOSES=1e5 OUT=$OUT/sweep-1e5 EXTRA="--run.workers gpu" \
#       bash perf/recon/sweep_defaults.sh corners 200
# Prints one row per case and writes $OUT/sweep.tsv: the case, the final NRMSE, the first
# iteration whose NRMSE is below 5 % (- if none), the noise floor estimate (below), seconds.
#
# Noise floor: with C counts per pattern spread over the probe's disc (A = pi (dp/8)^2 pixels)
# and a pixel inside A / step^2 discs, a pixel sees about C / step^2 counts; a phase measured
# from n counts has an rms error of at least 1 / (2 sqrt(n)) rad (the shot-noise bound of a
# weak phase object); over the truth's phase std (0.116 rad for simulate's default object) this
# is the NRMSE no unregularised reconstruction beats on average.
set -uo pipefail
cd "${EF_REPO:-$(dirname "$0")/../..}"
GRID=${1:-corners}
ITERATIONS=${2:-200}
if [ -n "${EF_BUNDLE:-}" ]; then
    # shellcheck disable=SC1090,SC1091
    source "$EF_BUNDLE/env.sh" && source perf/recon/bench_config.sh && gpu_machine_env
    EF=${EF:-$(command -v ensemblefit)}
fi
EF=${EF:-$PWD/build/ensemblefit}
OUT=${OUT:-$PWD/perf/recon/out/sweep}
MPIRUN=${MPIRUN:-}
EXTRA=${EXTRA:-}
SCAN_PATTERN=${SCAN_PATTERN:-}
mkdir -p "$OUT"
W=$(mktemp -d /tmp/ef-sweep.XXXXXX)
trap 'rm -rf "$W"' EXIT

case "$GRID" in
    corners) doses="1e5 1e9"; scans="16 64"; dps="64 128"; modes_list="1 4"; overlaps="60 85" ;;
    small) doses="1e5 1e9"; scans="16"; dps="64"; modes_list="1 4"; overlaps="60 85" ;;
    full) doses="1e5 1e7 1e9"; scans="16 32 64"; dps="64 96 128"; modes_list="1 2 4"; overlaps="60 72 85" ;;
    *) echo "sweep_defaults.sh: GRID is corners, small or full, not '$GRID'" >&2; exit 2 ;;
esac
doses=${DOSES:-$doses}

# small: only the corners where dose and overlap go together or apart with 1 and 4 modes
keep() {  # dose overlap modes
    [ "$GRID" != small ] && return 0
    case "$1/$2/$3" in 1e5/60/1 | 1e5/85/4 | 1e9/60/4 | 1e9/85/1) return 0 ;; esac
    return 1
}

printf 'dose\tscan\tdp\tmodes\toverlap\tstep\tnrmse_final\tfirst_below_5\tnoise_floor\tseconds\n' > "$OUT/sweep.tsv"
printf '%-6s %4s %4s %5s %7s %6s %12s %13s %11s %8s\n' dose scan dp modes overlap step "NRMSE end" "it to < 5 %" "floor" seconds
for dose in $doses; do for scan in $scans; do for dp in $dps; do for modes in $modes_list; do for ov in $overlaps; do
    keep "$dose" "$ov" "$modes" || continue
    step=$(awk -v o="$ov" -v d="$dp" 'BEGIN { printf "%.4g", (1 - o / 100) * d / 4 }')
    floor=$(awk -v c="$dose" -v s="$step" 'BEGIN { printf "%.2f", 100 * 0.5 / sqrt(c / (s * s)) / 0.116 }')
    name="d${dose}_s${scan}_p${dp}_m${modes}_o${ov}"
    "$EF" simulate ptycho --out "$W/$name.h5" --scan "$scan" --dp "$dp" --modes "$modes" --dose "$dose" \
        --step "$step" ${SCAN_PATTERN:+--scan-pattern "$SCAN_PATTERN"} > "$W/$name.sim.log" 2>&1 || { echo "!! $name: simulate failed"; continue; }
    printf '[data]\nfile = %s.h5\n[output]\nfile = %s/%s.out.h5\npreviews = false\n' "$name" "$W" "$name" > "$W/$name.ini"
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    $MPIRUN "$EF" reconstruct "$W/$name.ini" --solver.iterations "$ITERATIONS" --output.report_every 1 $EXTRA \
        > "$W/$name.log" 2>&1 || { echo "!! $name: reconstruct failed"; tail -3 "$W/$name.log"; continue; }
    t1=$(date +%s.%N)
    cp "$W/$name.log" "$OUT/"
    # progress rows: iteration first, the NRMSE (%) last
    read -r final first < <(awk '$1 ~ /^[0-9]+$/ && $NF ~ /%$/ { v = $NF; sub(/%/, "", v); last = v;
        if (first == "" && v + 0 < 5) first = $1 } END { print last, (first == "" ? "-" : first) }' "$W/$name.log")
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", b - a }')
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$dose" "$scan" "$dp" "$modes" "$ov" "$step" "$final" "$first" \
        "$floor" "$secs" >> "$OUT/sweep.tsv"
    printf '%-6s %4s %4s %5s %6s%% %6s %11s%% %13s %10s%% %8s\n' "$dose" "$scan" "$dp" "$modes" "$ov" "$step" "$final" \
        "$first" "$floor" "$secs"
    rm -f "$W/$name.h5" "$W/$name.out.h5"
done; done; done; done; done
echo "table: $OUT/sweep.tsv"

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Is `ensemblefit advise` right? For three problems (the stats2 dis-mellin fit, the spot
# ensemble of many small fits, the ptychography example): advise with -o, then the recommended
# placement and one other (the predicted runner-up, or 1 rank when that is the pick), each timed
# as users time it (the whole `mpirun ... ensemblefit` command) with --predicted. Prints and
# writes a TSV: problem, placement, recommended, predicted and measured seconds, error.
# Goals (issue #26): |error| <= 25 %; the recommended measured <= 1.10 x the other.
#   perf/advise/bench_advise.sh [BUILD_DIR]   (EF_BENCH_SIZE=small|full; default small;
#                                             EF_BENCH_ROWS=all: every placement of the table)
# small sizes keep the whole script to a few minutes on 2 cores; full uses the issue's sizes.
# On the GPU machine (no build tree, no Python needed): the bundle that `perf/recon/gpu_run.sh
# prepare` makes here, carried as .gpu-run, from the repository root:
#   EF_BUNDLE=.gpu-run EF_BENCH_ROWS=all perf/advise/bench_advise.sh
# (every row: CPU ranks on all cores, the GPU with 1, 2 and 4 ranks, both together).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
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
OUTDIR=$SRC/perf/advise/results
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

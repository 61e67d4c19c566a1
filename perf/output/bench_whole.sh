#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The whole process, phase by phase (issue #27): many spot fits (inputs/spot.ini with the compiled
# gaussian2d, solver = normal; results in the HDF5 file) timed as a user times them
# (/usr/bin/time), with every step from exec to exit named from EF_SETUP_TRACE:
#   pre-main (exec to main: loading and relocating the libraries), MPI_Init, set-up (config and
#   data, model, worker; on a GPU the context, its share of the worker), creating the output, the
#   fit, the writer's last blocks, the summary (rows, statistics, written), the timing, closing
#   the file, the rest of the command (arguments, the config, freeing the run's objects),
#   MPI_Finalize, and exit (after MPI_Finalize to the end: wall - the last "since exec" mark;
#   under mpirun it includes mpirun's own start and end).
# and the bounds: `ensemblefit --version` (process start, MPI_Init and exit alone) and an empty
# run (--fit.replicas 0: the central fit only; on a GPU its context creation), so the best
# possible fits/s of the whole process is known. Needs no python or h5py (the GPU machine has
# neither): the phases come from the trace lines, /timing from `ensemblefit report --csv`.
#
# usage: perf/output/bench_whole.sh [SIZES (default "1000000 10000000")] [REPEATS (default 2)]
#   BIN=path          the ensemblefit (default build/ensemblefit, else the one on PATH)
#   WORKERS=cpu|gpu   default auto
#   PRECISIONS="float double"  (default both)
#   LAUNCH=plain|mpirun|both   without mpirun (a singleton), under `mpirun -np 1`, or both (default plain)
#   EXTRA="..."       more fit arguments (on a CPU, --fit.max_iterations 1 makes the run output-bound)
#   OUT=dir           keeps the files (default a temporary folder); the tables go to $OUT/phases.tsv
#                     and $OUT/bounds.tsv, and are printed
# On the GPU machine (the bundle of perf/recon/gpu_run.sh prepare carried as .gpu-run):
#   source .gpu-run/env.sh && WORKERS=gpu LAUNCH=both OUT=$OUT/whole perf/output/bench_whole.sh "1000000 10000000" 3
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
SIZES=${1:-"1000000 10000000"}
N=${2:-2}
case "$N" in ''|*[!0-9]*) echo "usage: $0 [SIZES] [REPEATS]" >&2; exit 2 ;; esac
for R in $SIZES; do case "$R" in ''|*[!0-9]*) echo "usage: $0 [SIZES] [REPEATS]: '$R' is not a count" >&2; exit 2 ;; esac; done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
BIN=${BIN:-$root/build/ensemblefit}
[ -x "$BIN" ] || BIN=$(command -v ensemblefit || true)
[ -x "$BIN" ] || { echo "no ensemblefit (build first, or BIN=...)" >&2; exit 2; }
PRECISIONS=${PRECISIONS:-"float double"}
LAUNCH=${LAUNCH:-plain}
case "$LAUNCH" in plain) launches=plain ;; mpirun) launches=mpirun ;; both) launches="plain mpirun" ;;
    *) echo "LAUNCH: plain, mpirun or both" >&2; exit 2 ;; esac
OUT=${OUT:-$(mktemp -d /tmp/ef-whole-bench.XXXXXX)}
mkdir -p "$OUT"
cp "$root/inputs/spot.ini" "$root/inputs/spot.csv" "$OUT/"
cd "$OUT"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
cpu=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
echo "whole-process benchmark: ${gpu:-$cpu}, $(nproc) cores, $(date -u +%F), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "  $BIN ($("$BIN" --version | head -1)); workers ${WORKERS:-auto}; files in $OUT"

# timed NAME LAUNCHER ARGS...: one traced, timed run; NAME.time holds "wall user sys maxrss_kB".
timed() {
    local name=$1 how=$2; shift 2
    local pre=()
    [ "$how" = mpirun ] && pre=(mpirun --bind-to none -np 1)
    sync
    EF_SETUP_TRACE=1 /usr/bin/time -f '%e %U %S %M' -o "$name.time" "${pre[@]}" "$BIN" "$@" > "$name.log" 2>&1 || {
        echo "FAILED: ${pre[*]} $BIN $*" >&2; tail -20 "$name.log" >&2; exit 1; }
}

# phases NAME FITS: one TSV row from NAME.log (trace lines) and NAME.time.
phases() {
    awk -v name="$1" -v fits="$2" -v t="$(cat "$1.time")" '
        function step(pattern,   v) { return (pattern in s) ? s[pattern] : 0 }
        /^\[setup rank 0\]|^\[end rank 0\]|^\[setup gpu 0\]|^\[process\]/ {
            line = $0; sub(/^\[[^]]*\] /, "", line)
            key = line; sub(/: [0-9.]+ s.*$/, "", key)
            val = line; sub(/^.*: /, "", val); sub(/ s.*$/, "", val)
            tag = $1 == "[setup" && $3 == "0]" && $2 == "gpu" ? "gpu " key : key
            s[tag] += val
            if ($0 ~ /since exec/) { e = $0; sub(/^.*\(/, "", e); sub(/ s since exec.*$/, "", e); last = e
                                     if (key == "MPI_Init") main_at = e - val }
        }
        END {
            split(t, w, " ")
            setup = step("config and data") + step("model (tables)") + step("covariance (Cholesky, whitening)") + step("worker")
            summary = step("rows for the summary") + step("summary statistics") + step("summary written and printed")
            tail = step("the writer'"'"'s last blocks") + step("barrier")
            named = setup + step("output file") + step("plan printed, every unit fitted") + tail + summary + \
                    step("timing gathered, written and printed") + step("output closed")
            printf "%s\t%s\t%.3f\t%.3g\t%.2f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.2f\t%.2f\t%d\n", \
                name, fits, w[1], fits / w[1], main_at, step("MPI_Init"), setup, step("gpu context"), step("output file"), \
                step("plan printed, every unit fitted"), tail, summary, step("timing gathered, written and printed"), \
                step("output closed"), step("the command (its objects freed)") - named, step("MPI_Finalize"), \
                w[1] - last, w[2] + w[3], w[4] / 1024
        }' "$1.log"
}
header="run\tfits\twall_s\tfits_per_s\tpre_main_s\tmpi_init_s\tsetup_s\tgpu_context_s\tcreate_output_s\tfit_s\twriter_tail_s\tsummary_s\ttiming_s\tclose_s\tother_s\tmpi_finalize_s\texit_s\tcpu_s\tmax_rss_MiB"

# Bounds: the process alone, and an empty run (the central fit only).
args0=(spot.ini --model.name gaussian2d --fit.solver normal --overwrite --progress-interval 1000)
[ -n "${WORKERS:-}" ] && args0+=(--workers "$WORKERS")
printf "what\tlaunch\twall_s (each repeat)\n" > bounds.tsv
for how in $launches; do
    v=(); e=()
    for rep in $(seq 1 "$N"); do
        timed "version-$how-$rep" "$how" --version; v+=("$(cut -d' ' -f1 "version-$how-$rep.time")")
        timed "empty-$how-$rep" "$how" fit "${args0[@]}" --fit.replicas 0 --output.file "empty-$how.h5"
        e+=("$(cut -d' ' -f1 "empty-$how-$rep.time")")
    done
    printf "ensemblefit --version\t%s\t%s\n" "$how" "${v[*]}" >> bounds.tsv
    printf "fit --fit.replicas 0 (central fit only)\t%s\t%s\n" "$how" "${e[*]}" >> bounds.tsv
done

echo -e "$header" > phases.tsv
for how in $launches; do
    phases "empty-$how-$N" 1 >> phases.tsv
done
# shellcheck disable=SC2206  # EXTRA is split into words on purpose
extra=(${EXTRA:-})
for R in $SIZES; do
    for p in $PRECISIONS; do
        for how in $launches; do
            for rep in $(seq 1 "$N"); do
                name=spot-$R-$p-$how-$rep
                timed "$name" "$how" fit "${args0[@]}" --fit.replicas "$R" --fit.precision "$p" "${extra[@]}" \
                    --output.file "$name.h5"
                phases "$name" $((R + 1)) >> phases.tsv
                "$BIN" report "$name.h5" --csv "$name.report.csv" > "$name.report.txt" 2>&1 || true
                echo "  $name: $(cut -d' ' -f1 "$name.time") s wall"
                [ "$rep" -lt "$N" ] && rm -f "$name.h5"  # 1e7 replicas: 0.7 GB each; the last one stays
            done
        done
    done
done
echo
column -t -s $'\t' bounds.tsv 2>/dev/null || cat bounds.tsv
echo
column -t -s $'\t' phases.tsv 2>/dev/null || cat phases.tsv
echo "(tables in $OUT/phases.tsv and $OUT/bounds.tsv; /timing per run in *.report.txt)"

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Rank 0's dispatcher thread and results writer at many ranks, by simulation (issue 36), one
# subcommand each (notes above each one's function):
#   perf/dispatch.sh curves BINARY [RANKS...]   units/s, writer rows/s and MB/s, wait per unit
#                                               against the rank count (TSV under $OUT)
#   perf/dispatch.sh prepare [BUILD_DIR]        here: bundle BUILD_DIR/ensemblefit with mpirun
#                                               for the device machine (.dispatch-run.tar.xz)
#   perf/dispatch.sh device                     there: unpack the bundle, run `curves` at
#                                               16..1024 ranks on the machine's cores
# Reads only the run's JSON timing sidecar (python3 standard library: the device machine has
# no h5py). Figures and what they mean: docs/scale-model.md.

# ---- curves
# One `mpirun --oversubscribe` per mode and rank count, a 4-point line fit (2 parameters,
# replicas of ~5 us each) on every rank:
#  sleep:   `--debug.unit-sleep S` (UNIT_SLEEP, 0.001) and `fit.chunk 1`: every unit is one
#           replica fit and then S seconds of sleep that hold no core, and no rank reports a
#           speed, so units stay one replica. N ranks ask for N / S units/s: the dispatcher's
#           capacity, measured where the cores are not taken by the ranks themselves (ranks
#           oversubscribed 64x on cores would otherwise bound it by context switches).
#           UNITS (20000) units in all, at least 20 per rank (a run that falls behind, as
#           1,024 ranks on 16 cores may, still ends within TIMEOUT_S). CHUNK (1) replicas per
#           unit: CHUNK 500 sends results of 500 rows (24 kB), whose receive rank 0 pays too.
#  default: the program's defaults (units sized by the WorkQueue from the ranks' speeds,
#           `dynamic`: 0.1 s of a rank's work, never under 20 ms once speeds are known), every
#           rank computing: the headroom a real run has, and the writer under 1e7 rows.
#           DEFAULT_PER_RANK (10000) replicas per rank.
# Columns of the TSV (one row per run; seconds, rates per second):
#   units_per_s       units over rank 0's window (its wall less set-up and the final write)
#   demand_units_per_s  sum over ranks of units / compute seconds: what the ranks would ask
#                     for if they never waited (compute includes the sleep)
#   disp_us_request   rank 0's dispatcher, its own timer, per answered request (answer only)
#   disp_us_unit      the same thread's answer + receive + store seconds per unit, /timing
#   disp_units_per_s_max  1 / disp_us_unit: what the thread could answer given a core of its own
#   disp_busy         those seconds over the window (1 = the thread never idles: saturated)
#   wait_us_mean/p95/max  a rank's `sched` seconds per unit (asking and waiting for the next
#                     unit: prefetch hides the round trip while the dispatcher keeps up)
#   writer_rows_per_s, writer_MB_per_s  rows (and /replicas bytes: 8 x (P + 4) per row) per
#                     second of the writer thread's own write time; writer_busy: that time over
#                     the window
#   ctxt_per_s        context switches of the whole machine per second of the mpirun (/proc/stat)
#   disp_us_recv, disp_us_store  disp_us_unit's parts: the thread's seconds in MPI calls receiving
#                     results, and storing them (handing them to the writer, the progress line),
#                     per unit (the rest is answering requests)
# Usage: perf/dispatch.sh curves BINARY [RANKS...]   (default ranks: 4 8 16 32 64)
#   env: MODES ("sleep default"), UNIT_SLEEP, UNITS, DEFAULT_PER_RANK, OUT (folder,
#        default perf/out), MPIRUN (mpirun), TIMEOUT_S (per run, 120), DEADLINE (date +%s after
#        which the remaining runs are skipped)
cmd_curves() (
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { echo "usage: $0 curves BINARY [RANKS...]" >&2; exit 2; }
EF=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
[ -x "$EF" ] || { echo "$0: $EF is not an executable" >&2; exit 2; }
shift
ranks=("$@")
[ ${#ranks[@]} -gt 0 ] || ranks=(4 8 16 32 64)
modes=(${MODES:-sleep default})
sleep_s=${UNIT_SLEEP:-0.001}
chunk=${CHUNK:-1}
units_total=${UNITS:-20000}
default_per_rank=${DEFAULT_PER_RANK:-10000}
out=${OUT:-$here/out}
mkdir -p "$out" && out=$(cd "$out" && pwd)
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
machine="$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores"  # before OMP_NUM_THREADS: nproc reads it
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true  # mpirun keeps pipes to every rank
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
printf 'x,y\n0,1\n1,3\n2,5.1\n3,6.9\n' > line.csv
printf '[data]\nfile = line.csv\nx = x\ny = y\nsigma = 0.1\n[model]\nname = linear\n[param.a]\nstart = 0\n[param.b]\nstart = 1\n[output]\nfile = out.h5\n' > line.ini
tsv=$out/dispatch-curves.tsv
{
    echo "# perf/dispatch.sh curves $(basename "$EF") ${ranks[*]}; $machine; $(date -u +%FT%TZ); UNIT_SLEEP=$sleep_s CHUNK=$chunk UNITS=$units_total DEFAULT_PER_RANK=$default_per_rank$(env | grep '^OMPI_MCA_btl' | sed 's/^/ /' | tr -d '\n')"
    printf 'mode\tranks\tunit_sleep_s\treplicas\tunits\tmpirun_wall_s\twindow_s\tunits_per_s\tdemand_units_per_s\t'
    printf 'disp_us_request\tdisp_us_unit\tdisp_units_per_s_max\tdisp_busy\twait_us_mean\twait_us_p95\twait_us_max\twriter_rows\t'
    printf 'writer_s\twriter_rows_per_s\twriter_MB_per_s\twriter_busy\tctxt_per_s\tdisp_us_recv\tdisp_us_store\n'
} > "$tsv"
ctxt() { awk '/^ctxt/ {print $2}' /proc/stat; }
for mode in "${modes[@]}"; do
    for n in "${ranks[@]}"; do
        if [ -n "${DEADLINE:-}" ] && [ "$(date +%s)" -ge "$DEADLINE" ]; then
            echo "$mode $n ranks: skipped, past DEADLINE (date +%s = $DEADLINE)" >&2
            continue
        fi
        if [ "$mode" = sleep ]; then
            per_rank=$((units_total / n > 20 ? units_total / n : 20))  # fewer per rank at many ranks
            args=(--fit.replicas $((n * per_rank * chunk)) --fit.chunk "$chunk" --debug.unit-sleep "$sleep_s")
        elif [ "$mode" = default ]; then
            args=(--fit.replicas $((n * default_per_rank)))
        else
            echo "$0: unknown mode '$mode' (sleep, default)" >&2; exit 2
        fi
        rm -f out.h5 out.h5.timing.json
        c0=$(ctxt); t0=$(date +%s.%N)
        if ! timeout "${TIMEOUT_S:-120}" ${MPIRUN:-mpirun} --oversubscribe --bind-to none -np "$n" "$EF" fit line.ini \
            --workers cpu --overwrite --progress-interval 0 "${args[@]}" > run.log 2>&1; then
            echo "$mode $n ranks: failed or timed out (last lines below, all in $out/failed-$mode-$n.log); row skipped" >&2
            tail -5 run.log >&2
            tail -200 run.log > "$out/failed-$mode-$n.log"
            continue
        fi
        t1=$(date +%s.%N); c1=$(ctxt)
        $PY - "$mode" "$n" "$([ "$mode" = sleep ] && echo "$sleep_s" || echo 0)" "$t0" "$t1" "$c0" "$c1" >> "$tsv" <<'PY'
import json, sys
mode, n, sleep_s, t0, t1, c0, c1 = sys.argv[1:8]
d = json.load(open("out.h5.timing.json"))
ranks = d["per_rank"]
r0 = ranks[0]
window = r0["wall"] - r0["setup"] - r0["io"]
units = sum(r["units"] for r in ranks)
rows = sum(r["replicas"] for r in ranks)
demand = sum(r["units"] / r["compute"] for r in ranks if r["compute"] > 0)
disp = d["dispatcher"]
busy_s = disp["io_seconds"] + disp["comm_seconds"] + disp["sched_seconds"]
waits = sorted(1e6 * r["sched"] / r["units"] for r in ranks[1:] if r["units"] > 0) or [0.0]
p95 = waits[min(len(waits) - 1, int(0.95 * len(waits)))]
w = d["writer"]["seconds"]
P = 2  # the line's parameters; a /replicas row is 8 x (P + 4) bytes
wall = float(t1) - float(t0)
row = [mode, n, sleep_s, rows, units, "%.3f" % wall, "%.4f" % window, "%.4g" % (units / window),
       "%.4g" % demand, "%.3f" % disp["microseconds_per_request"], "%.3f" % (1e6 * busy_s / max(1, units)),
       "%.4g" % (units / busy_s if busy_s > 0 else 0), "%.3f" % (busy_s / window), "%.1f" % (sum(waits) / len(waits)), "%.1f" % p95, "%.1f" % waits[-1], rows,
       "%.4f" % w, "%.4g" % (rows / w if w > 0 else 0), "%.4g" % (rows * 8 * (P + 4) / w / 1e6 if w > 0 else 0),
       "%.3f" % (w / window), "%.4g" % ((int(c1) - int(c0)) / wall),
       "%.3f" % (1e6 * disp["comm_seconds"] / max(1, units)), "%.3f" % (1e6 * disp["io_seconds"] / max(1, units))]
print("\t".join(str(x) for x in row))
PY
        tail -1 "$tsv" | awk -F'\t' '{printf "%-8s %5d ranks: %9s units/s (asked %9s), dispatcher %s us/unit (max %s units/s), busy %s; wait/unit %s us (p95 %s); writer %s rows/s %s MB/s\n", $1, $2, $8, $9, $11, $12, $13, $14, $15, $19, $20}'
    done
done
$PY - "$tsv" > "$out/dispatch-saturation.txt" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if not l.startswith("#")]
head, rows = rows[0], rows[1:]
col = {h: i for i, h in enumerate(head)}
for mode in dict.fromkeys(r[0] for r in rows):
    mine = sorted((r for r in rows if r[0] == mode), key=lambda r: int(r[1]))
    get = lambda r, k: float(r[col[k]])
    behind = [r for r in mine if get(r, "units_per_s") < 0.8 * get(r, "demand_units_per_s")]
    busy = [r for r in mine if get(r, "disp_busy") > 0.8]
    peak = max(mine, key=lambda r: get(r, "units_per_s"))
    print("%s: dispatcher peak %.4g units/s at %s ranks; falls below 80%% of the units asked for at %s; "
          "busy over 80%% at %s; writer at most %.0f%% busy, %.4g rows/s of writing" %
          (mode, get(peak, "units_per_s"), peak[1], behind[0][1] + " ranks" if behind else "no rank count measured",
           busy[0][1] + " ranks" if busy else "no rank count measured",
           100 * max(get(r, "writer_busy") for r in mine), min(get(r, "writer_rows_per_s") for r in mine)))
PY
cat "$out/dispatch-saturation.txt"
echo "TSV: $tsv"
)

# ---- prepare
# Here (the build machine): the CPU build's ensemblefit with a relocatable Open MPI runtime
# (BUNDLER, else bundle-runtime.sh from tools/gpu/, ../shared/gpu/ or ../../shared/gpu/),
# stripped and packed as .dispatch-run.tar.xz in the repository root, for `run`'s carry.
# Usage: perf/dispatch.sh prepare [BUILD_DIR]
cmd_prepare() (
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
bundler=${BUNDLER:-}
for b in "$root/tools/gpu" "$root/../shared/gpu" "$root/../../shared/gpu"; do
    [ -n "$bundler" ] || [ ! -f "$b/bundle-runtime.sh" ] || bundler=$b/bundle-runtime.sh
done
[ -n "$bundler" ] || { echo "$0: no bundle-runtime.sh found (set BUNDLER)" >&2; exit 2; }
[ -x "$build/ensemblefit" ] || { echo "$0: $build/ensemblefit not built" >&2; exit 2; }
cd "$root"
rm -rf .dispatch-run
bash "$bundler" .dispatch-run "$build/ensemblefit"
strip .dispatch-run/bin/* .dispatch-run/usr/lib/x86_64-linux-gnu/*.so* 2>/dev/null || true
tar -cJf .dispatch-run.tar.xz .dispatch-run
rm -rf .dispatch-run
echo "bundle: .dispatch-run.tar.xz ($(du -h .dispatch-run.tar.xz | cut -f1)); carry it and run: bash perf/dispatch.sh device"
)

# ---- device
# There (the device machine, no MPI of its own): unpacks .dispatch-run.tar.xz and runs
# `curves` with the bundle's mpirun, four series: sleep mode with 10 ms units at 16 64 256
# 512 1024 ranks (RANKS_10MS: up to ~1e5 units/s asked, 100 wake-ups a second per rank, which
# 16 cores host at 64 ranks a core), sleep mode with 1 ms units at 16 64 256 (RANKS_1MS: up
# to ~2.5e5 asked), sleep mode with 10 ms units of 500 fits at 16 64 (RANKS_CHUNK: the
# receive of 24 kB results), default mode at 64 256 1024 (DEFAULT_RANKS). Under $OUT:
# dispatch-curves-{sleep10ms,sleep1ms,sleep10ms-chunk500,default}.tsv, their saturation lines, lscpu.txt and
# run.txt (mpirun version, /dev/shm, the fd and process limits, seccomp), failed-MODE-N.log
# for a run that failed. SERIES (all four: "sleep10ms sleep1ms sleep10ms-chunk500 default")
# picks series. Runs not started within BUDGET_S (420) seconds are skipped, so the command ends
# within about 8 minutes whatever 1,024 ranks cost.
cmd_device() (
set -uo pipefail
cd "$(dirname "$0")/.."
[ -d .dispatch-run ] || tar -xJf .dispatch-run.tar.xz || exit 2
source .dispatch-run/env.sh
export OUT=${OUT:-$PWD/perf/out}
mkdir -p "$OUT"
export DEADLINE=$(($(date +%s) + ${BUDGET_S:-420}))
lscpu > "$OUT/lscpu.txt" 2>&1
# Whether Open MPI can copy between processes itself (CMA: process_vm_readv, refused by a
# container's seccomp filter without CAP_SYS_PTRACE): without it a result over 4 kB arrives only
# while its sender is inside MPI (docs/scale-model.md).
{ mpirun --version | head -1; df -h /dev/shm /tmp; ulimit -n -H; ulimit -u; grep -E '^(CapEff|Seccomp):' /proc/self/status
  cat /proc/sys/kernel/yama/ptrace_scope /proc/sys/kernel/pid_max; } > "$OUT/run.txt" 2>&1
# Open MPI's shared-memory segments (one per rank) go to /dev/shm; a container's is often small.
shm_free=$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 {print $4}')
if [ "${shm_free:-0}" -lt $((8 << 20)) ]; then
    export OMPI_MCA_btl_vader_backing_directory=/tmp
    echo "/dev/shm has ${shm_free:-0} kB free: shared-memory segments in /tmp" | tee -a "$OUT/run.txt"
fi
series() {  # NAME MODE UNIT_SLEEP RANKS...
    local name=$1 mode=$2 sleep_s=$3
    shift 3
    MODES=$mode UNIT_SLEEP=$sleep_s bash perf/dispatch.sh curves .dispatch-run/bin/ensemblefit "$@"
    mv "$OUT/dispatch-curves.tsv" "$OUT/dispatch-curves-$name.tsv"
    mv "$OUT/dispatch-saturation.txt" "$OUT/dispatch-saturation-$name.txt"
}
want() { case " ${SERIES:-sleep10ms sleep1ms sleep10ms-chunk500 default} " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
! want sleep10ms || series sleep10ms sleep 0.01 ${RANKS_10MS:-16 64 256 512 1024}
! want sleep1ms || series sleep1ms sleep 0.001 ${RANKS_1MS:-16 64 256}
! want sleep10ms-chunk500 || CHUNK=500 UNITS=5000 series sleep10ms-chunk500 sleep 0.01 ${RANKS_CHUNK:-16 64}
! want default || series default default 0 ${DEFAULT_RANKS:-64 256 1024}
)

cmd=${1:-}
shift || true
case "$cmd" in
    curves) cmd_curves "$@" ;;
    prepare) cmd_prepare "$@" ;;
    device) cmd_device "$@" ;;
    *) sed -n '3,10p' "$0" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fit benchmarks for the GPU machine (repository root, the .gpu-run bundle of
# perf/recon/gpu_run.sh prepare), one subcommand each (notes and options above each function):
#   bash perf/gpu/bench.sh many-fits [N]          many small fits on one GPU against the CPU worker
#   WORKERS=gpu perf/gpu/bench.sh whole [SIZES] [REPEATS]   the whole process, exec to exit
#   WORKERS=gpu perf/gpu/bench.sh disk [REPLICAS] [NP]      the output phase against the disk
# (bench_recon_batch.cpp here is a program: CMake builds it with the CUDA worker.)

# ---- many-fits
# Many small fits (issue #5): N smeared replicas (default 1e6) of one 15 x 15 spot image, a
# 2-D Gaussian on a constant (5 parameters, inputs/spot.ini), fits per second on one GPU, in
# five variants: the user's formula (interpreted on the device) with the QR solver in double,
# with the normal-equations solver in double and in float, and the compiled-in gaussian2d model
# with the normal solver in double and in float. The CPU worker on all cores fits the first
# NCPU_FITS replicas (default 1e5) of each variant; the shared replicas are compared (GPU vs
# CPU: same bits expected), and each variant is compared with the double QR fits (float's loss).
#
#   bash perf/gpu/bench.sh many-fits [N]     # GPU machine, repository root, .gpu-run carried
cmd_many_fits() (
set -uo pipefail
cd "$(dirname "$0")/../.."
N=${1:-1000000}
NC=${NCPU_FITS:-100000}
OUT=${OUT:-$PWD/perf/gpu/out}
mkdir -p "$OUT"
W=$(mktemp -d /tmp/ef-spot.XXXXXX)
ORIG_LD=${LD_LIBRARY_PATH:-}
py() { LD_LIBRARY_PATH="$ORIG_LD" python3 "$@"; }
[ -n "${OPAL_PREFIX:-}" ] || source .gpu-run/env.sh
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/usr/local/cuda/lib64
NCPU=$(nproc)
cfg=inputs/spot.ini
VARIANTS=${VARIANTS:-"formula-qr-double formula-normal-double formula-normal-float gaussian2d-normal-double gaussian2d-normal-float"}
{
for v in $VARIANTS; do
  IFS=- read -r model solver prec <<<"$v"
  args=(--model.name "$model" --fit.solver "$solver" --fit.precision "$prec")
  echo "== $v: GPU, $N fits"
  EF_GPU_STATS=1 ensemblefit fit $cfg "${args[@]}" --fit.replicas "$N" --run.workers gpu --output.file "$W/$v-gpu.h5" --overwrite 2>&1 | grep -E "^(timing|  0 |\[gpu)"
  echo "== $v: CPU, 1 rank x $NCPU threads, $NC fits"
  ensemblefit fit $cfg "${args[@]}" --fit.replicas "$NC" --run.workers cpu --run.threads "$NCPU" --output.file "$W/$v-cpu.h5" --overwrite 2>&1 | grep -E "^(timing|  0 )"
done
py - "$W" "$OUT" "$VARIANTS" <<'PY'
import json, sys
import h5py, numpy as np
w, out, variants = sys.argv[1], sys.argv[2], sys.argv[3].split()
res = {"problem": "inputs/spot.ini: 2-D Gaussian + constant, 5 parameters, 15 x 15 pixels, smeared replicas",
       "variants": {}}
def load(path):
    with h5py.File(path, "r") as f:
        return (f["/replicas/params"][...], f["/replicas/status"][...], f["/replicas/iterations"][...],
                float(max(f["/timing/compute"][...])), float(max(f["/timing/wall"][...])))
ref = None
for v in variants:
    g, c = load(f"{w}/{v}-gpu.h5"), load(f"{w}/{v}-cpu.h5")
    r = {}
    for k, d in (("gpu", g), ("cpu", c)):
        fits = int(d[0].shape[0]) + 1
        r[k] = {"fits": fits, "compute_seconds": d[3], "wall_seconds": d[4], "fits_per_second": fits / d[3],
                "fits_per_second_wall": fits / d[4], "iterations_mean": float(d[2].mean()),
                "status_counts": {str(s): int((d[1] == s).sum()) for s in np.unique(d[1])}}
    m = c[0].shape[0]
    pg, pc = g[0][:m], c[0][:m]
    r["gpu_vs_cpu"] = {"replicas": int(m), "same_status": bool((g[1][:m] == c[1]).all()),
                       "same_iterations": bool((g[2][:m] == c[2]).all()),
                       "bitwise_identical_params": bool(np.array_equal(pg, pc)),
                       "max_rel_diff_params": float((np.abs(pg - pc) / np.maximum(np.abs(pc), 1e-300)).max())}
    r["gpu_speedup_over_cpu"] = r["gpu"]["fits_per_second"] / r["cpu"]["fits_per_second"]
    if ref is None:
        ref = g[0]
    else:
        sd = ref.std(axis=0)
        d = np.abs(g[0] - ref)
        r["vs_" + variants[0]] = {"max_diff_in_ensemble_sd": (d / sd).max(axis=0).tolist(),
                                  "median_rel_diff": np.median(d / np.abs(ref), axis=0).tolist(),
                                  "max_rel_diff": (d / np.abs(ref)).max(axis=0).tolist()}
    res["variants"][v] = r
json.dump(res, open(f"{out}/many_fits.json", "w"), indent=1)
print(json.dumps(res, indent=1))
PY
} 2>&1 | tee "$OUT/many_fits.log"
rm -rf "$W"
)

# ---- whole
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
# usage: perf/gpu/bench.sh whole [SIZES (default "1000000 10000000")] [REPEATS (default 2)]
#   BIN=path          the ensemblefit (default build/ensemblefit, else the one on PATH)
#   WORKERS=cpu|gpu   default auto
#   PRECISIONS="float double"  (default both)
#   LAUNCH=plain|mpirun|both   without mpirun (a singleton), under `mpirun -np 1`, or both (default plain)
#   EXTRA="..."       more fit arguments (on a CPU, --fit.max_iterations 1 makes the run output-bound)
#   OUT=dir           keeps the files (default a temporary folder); the tables go to $OUT/phases.tsv
#                     and $OUT/bounds.tsv, and are printed
# On the GPU machine (the bundle of perf/recon/gpu_run.sh prepare carried as .gpu-run):
#   source .gpu-run/env.sh && WORKERS=gpu LAUNCH=both OUT=$OUT/whole perf/gpu/bench.sh whole "1000000 10000000" 3
cmd_whole() (
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
SIZES=${1:-"1000000 10000000"}
N=${2:-2}
case "$N" in ''|*[!0-9]*) echo "usage: $0 whole [SIZES] [REPEATS]" >&2; exit 2 ;; esac
for R in $SIZES; do case "$R" in ''|*[!0-9]*) echo "usage: $0 whole [SIZES] [REPEATS]: '$R' is not a count" >&2; exit 2 ;; esac; done
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
                "$BIN" report "$name.h5" --csv "$name.report.csv" --overwrite > "$name.report.txt" 2>&1 || true
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
)

# ---- disk
# The output phase against the disk (issue #35): measures the write bandwidth of the disk that
# holds the output folder (dd, one writer and NP writers side by side, each through the page cache
# and with fdatasync, i.e. to the device), then runs one spot ensemble (inputs/spot.ini, gaussian2d,
# solver normal, float) on NP ranks and shows, from its /timing: the replicas and compute per rank
# (load balance), the bytes of /replicas, the writer thread's seconds and throughput, rank 0's io
# phase (what the run waited for the output: the writer's backlog at the end, the summary, the
# timing), each against the time the disk needs for those bytes; once with [output] in_place =
# off (rank 0 writes every row) and once with on (every rank its own rows: their writer threads'
# seconds too), IN_PLACE="off on" by default.
#
# usage: perf/gpu/bench.sh disk [REPLICAS (default 1000000)] [NP (default 1)]
#   EF=bin (default build/ensemblefit); WORKERS=cpu|gpu (default auto); OUT=dir (default: a temporary
#   folder in $TMPDIR, i.e. the disk measured); EXTRA="..." more fit arguments (on a CPU,
#   --fit.max_iterations 1 makes the run output-bound); DD_MB=size of each dd write (default: the
#   output's size, at least 256, at most 8192).
# On the 4-GPU node: WORKERS=gpu perf/gpu/bench.sh disk 100000000 4
cmd_disk() (
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
R=${1:-1000000}
NP=${2:-1}
case "$R$NP" in ''|*[!0-9]*) echo "usage: $0 disk [REPLICAS] [NP]" >&2; exit 2 ;; esac
EF=${EF:-$root/build/ensemblefit}
[ -x "$EF" ] || { echo "no $EF (build first)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/ef-disk.XXXXXX")}
mkdir -p "$OUT" "$root/perf/out"
cp "$root/inputs/spot.ini" "$root/inputs/spot.csv" "$OUT/"
P=5
bytes=$(( (R + 1) * (P + 4) * 8 ))  # /replicas index, params, chi2, status, iterations (8 bytes each)
mb=${DD_MB:-$(( bytes / 1048576 ))}
[ "$mb" -lt 256 ] && mb=256
[ "$mb" -gt 8192 ] && mb=8192

# dd_rate N SYNC: MB/s of N writers of $mb MiB each side by side (SYNC=1: each ends with fdatasync).
dd_rate() {
    local n=$1 sync=$2 t0 t1 k
    sync
    t0=$(date +%s.%N)
    for k in $(seq 1 "$n"); do
        if [ "$sync" = 1 ]; then dd if=/dev/zero of="$OUT/dd.$k" bs=1M count="$mb" conv=fdatasync status=none &
        else dd if=/dev/zero of="$OUT/dd.$k" bs=1M count="$mb" status=none & fi
    done
    wait
    t1=$(date +%s.%N)
    rm -f "$OUT"/dd.*
    echo "$n $mb $t0 $t1" | awk '{printf "%.0f", $1 * $2 / ($4 - $3)}'
}
cache1=$(dd_rate 1 0); disk1=$(dd_rate 1 1); cacheN=$(dd_rate "$NP" 0); diskN=$(dd_rate "$NP" 1)
echo "disk of $OUT ($(df -h "$OUT" | awk 'NR==2 {print $1}')): ${mb} MiB per writer"
echo "  1 writer:  ${cache1} MB/s into the page cache, ${disk1} MB/s with fdatasync"
echo "  $NP writer(s): ${cacheN} MB/s into the page cache, ${diskN} MB/s with fdatasync (all together)"

model=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
day=$(date +%F)
tsv=$root/perf/out/disk-vs-output-$(echo "${gpu:-$model}" | tr 'A-Z' 'a-z' | tr -cs 'a-z0-9' '-' | sed 's/-$//')-$day.tsv
# One run per [output] in_place value (IN_PLACE="off on" by default): rank 0 writing every row,
# then every rank writing its own (docs/parallel-output.md).
for mode in ${IN_PLACE:-off on}; do
args=(fit spot.ini --fit.replicas "$R" --model.name gaussian2d --fit.solver normal --fit.precision float
      --overwrite --progress-interval 1000 --output.file "out-$mode.h5" --output.in_place "$mode")
[ -n "${WORKERS:-}" ] && args+=(--workers "$WORKERS")
# shellcheck disable=SC2206  # EXTRA is split into words on purpose
[ -n "${EXTRA:-}" ] && args+=($EXTRA)
sync
(cd "$OUT" && EF_SETUP_TRACE=1 /usr/bin/time -f '%e' -o "run-$mode.time" mpirun --oversubscribe -np "$NP" "$EF" \
    "${args[@]}" > "run-$mode.log" 2>&1) || { tail -20 "$OUT/run-$mode.log" >&2; exit 1; }
/usr/bin/python3 - "$OUT" "$bytes" "$cache1" "$disk1" "$cacheN" "$diskN" "$NP" "$R" "$tsv" "${gpu:-$model}" \
    "${IN_PLACE:+IN_PLACE=\"$IN_PLACE\" }${EXTRA:+EXTRA=\"$EXTRA\" }${WORKERS:+WORKERS=$WORKERS }$0 disk $*" "$mode" <<'PY'
import os, sys, h5py
out, nbytes, c1, d1, cN, dN, NP, R, tsv, device, cmd, mode = sys.argv[1:]
nbytes, c1, d1, cN, dN = int(nbytes), float(c1), float(d1), float(cN), float(dN)
wall = float(open(f"{out}/run-{mode}.time").read().split()[0])
with h5py.File(f"{out}/out-{mode}.h5", "r") as f:
    t = f["/timing"]; a = t.attrs
    reps = [int(x) for x in t["replicas"][()]]
    comp = [float(x) for x in t["compute"][()]]
    io = [float(x) for x in t["io"][()]]
    lb = float(a["load_balance"]) if "load_balance" in a else float(t["load_balance"][()])
    ws, ww = float(a["writer_seconds"]), float(a["writer_wait_seconds"])
    in_place = int(a.get("rows_in_place", 0))
    rows_s = [float(x) for x in t["rows_write_seconds"][()]] if in_place else []
mb = nbytes / 1e6
print(f"run, in_place = {mode} ({'rows written by every rank' if in_place else 'every row written by rank 0'}): "
      f"{R} replicas on {NP} rank(s), {wall:.2f} s whole command, file {os.path.getsize(f'{out}/out-{mode}.h5') / 1e6:.0f} MB")
print(f"  replicas per rank {reps}; compute s {[round(c, 2) for c in comp]}; load balance {lb:.3f}")
print(f"  /replicas {mb:.0f} MB: rank 0's writer thread {ws:.2f} s ({mb / ws if ws > 0 else 0:.0f} MB/s of the whole) "
      f"beside the fit; the run waited for it {ww:.2f} s; io phase per rank {[round(x, 2) for x in io]}")
if in_place:
    print(f"  each rank's writer thread (pwrite + fdatasync of its rows) s {[round(x, 3) for x in rows_s]}")
print(f"  the disk for those bytes: {mb / c1:.2f} s into the page cache, {mb / d1:.2f} s to the device (1 writer); "
      f"{mb / cN:.2f} s / {mb / dN:.2f} s with {NP} writers")
new = not os.path.exists(tsv)
with open(tsv, "a") as o:
    if new:
        o.write("device\treplicas\tranks\twall_s\tload_balance\treplicas_per_rank\toutput_MB\twriter_s\twriter_MBps\t"
                "writer_wait_s\trank0_io_s\tcache_MBps_1\tdisk_MBps_1\tcache_MBps_N\tdisk_MBps_N\tin_place\t"
                "rows_write_s_max\tio_s_max\tcommand\n")
    o.write(f"{device}\t{R}\t{NP}\t{wall:.3f}\t{lb:.4f}\t{'/'.join(map(str, reps))}\t{mb:.1f}\t{ws:.3f}\t"
            f"{mb / ws if ws > 0 else 0:.0f}\t{ww:.3f}\t{io[0]:.3f}\t{c1:.0f}\t{d1:.0f}\t{cN:.0f}\t{dN:.0f}\t"
            f"{mode}\t{max(rows_s) if rows_s else 0:.3f}\t{max(io):.3f}\t{cmd.strip()}\n")
print(f"raw: {tsv}")
PY
done
)

sub=${1:-}
case "$sub" in
    many-fits|whole|disk) shift; "cmd_${sub//-/_}" "$@" ;;
    *) sed -n '3,/^$/p' "$0" >&2; exit 2 ;;
esac

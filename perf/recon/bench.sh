#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Reconstruction benchmarks, one subcommand each (notes and options above each one's function;
# gpu_run.sh runs the main one, whole_command.sh and ncu_window.sh stand beside it):
#   OUT=$OUT bash perf/recon/bench.sh stream [ROUNDS] [ITERATIONS]    streamed patterns (GPU)
#   OUT=$OUT bash perf/recon/bench.sh ab [N] [ROUNDS]        variants side by side on N GPUs
#   OUT=$OUT bash perf/recon/bench.sh profile [N]            a batch's GPU time at one GPU's share
#   bash perf/recon/bench.sh sweep [GRID] [ITERATIONS]       the defaults' convergence over a range
#   perf/recon/bench.sh multislice BINARY [ITERATIONS] [THREADS]   the cost of slices (CPU)

# ---- stream
# The cost of streaming the patterns (run.stream; issue 25, data larger than the GPU) at the
# tBL-WSe2 shape on one GPU: the benchmark of perf/recon/gpu_run.sh (16384 patterns 128 x 128, 12
# modes, object 592 x 592, batch 256, position correction on; 1.0 GiB of patterns, resident by
# default) with run.stream = off (resident) and on (streamed), in rounds (off, on, off, on, ...:
# drift of the machine falls on both alike). Per run: seconds per iteration (/timing, mean without
# the first), and for the streamed ones the uploads' copy time and the compute stream's wait for
# them (upload_seconds, upload_wait_seconds). Then the overhead (median on / median off - 1; goal
# < 10 %), the default run's s/iteration (goal: not above 0.097 s on one H100) and whether on and
# off reconstructed the same bits (/object, /probe, /positions, /loss).
#   on the GPU machine, from the repository root with .gpu-run carried (perf/recon/gpu_run.sh prepare):
#   source .gpu-run/env.sh && OUT=$OUT bash perf/recon/bench.sh stream [ROUNDS] [ITERATIONS]
# Writes $OUT/stream.log and $OUT/stream.json.
cmd_stream() (
set -uo pipefail
cd "${EF_REPO:-$(dirname "$0")/../..}"
ROUNDS=${1:-3}
ITERS=${2:-12}
OUT=${OUT:-$PWD/perf/recon/out}
mkdir -p "$OUT"
W=$(mktemp -d /tmp/ef-stream.XXXXXX)
source perf/recon/bench_config.sh
gpu_machine_env
write_bench_ini "$W/bench.ini" "$ITERS"
cd "$W"
{
nvidia-smi -L
simulate_bench > /dev/null || echo "!! simulate failed"
for round in $(seq "$ROUNDS"); do
    for mode in off on; do
        ensemblefit reconstruct bench.ini --run.stream "$mode" --output.file "${mode}_$round.h5" --overwrite \
            > "${mode}_$round.log" 2>&1 || { echo "!! run.stream = $mode failed"; tail -5 "${mode}_$round.log"; continue; }
        grep -E "^(gpu 0: patterns streamed|streamed patterns:|per iteration:)" "${mode}_$round.log" | sed "s/^/round $round, $mode: /"
    done
done
# A run with the default (auto: resident here) and the phase trace of one streamed run (where the
# compute stream waits: the "stream wait" phase; the trace's events cost a little, so not timed).
ensemblefit reconstruct bench.ini --output.file default.h5 --overwrite > default.log 2>&1 || echo "!! default run failed"
grep -q "patterns streamed" default.log && echo "!! run.stream = auto streamed the 1 GiB benchmark"
EF_RECON_PHASES=1 ensemblefit reconstruct bench.ini --run.stream on --solver.iterations 3 --output.file phases.h5 \
    --overwrite > phases.log 2>&1 || echo "!! phase trace failed"
grep -E "stream wait|window forward|stage|total" phases.log
py - "$OUT/stream.json" "$ROUNDS" <<'PY'
import glob, json, statistics, sys, h5py, numpy as np
out, rounds = sys.argv[1], int(sys.argv[2])
def timing(f):
    t = h5py.File(f, "r")["/timing"]
    cols = {k: float(t[k][0]) for k in ("upload_seconds", "upload_wait_seconds") if k in t}
    return float(t.attrs["seconds_per_iteration"]), cols
res = {"runs": []}
spi = {"off": [], "on": []}
for r in range(1, rounds + 1):
    for mode in ("off", "on"):
        try:
            s, cols = timing(f"{mode}_{r}.h5")
        except Exception as e:
            print(f"round {r} {mode}: no result ({e})")
            continue
        spi[mode].append(s)
        res["runs"].append({"round": r, "stream": mode, "seconds_per_iteration": s, **cols})
        print(json.dumps(res["runs"][-1]))
if spi["off"] and spi["on"]:
    off, on = statistics.median(spi["off"]), statistics.median(spi["on"])
    res.update(off_median=off, on_median=on, overhead=on / off - 1)
    print(f"streaming overhead: {100 * (on / off - 1):.1f} % (median {on:.4f} vs {off:.4f} s/iteration; goal < 10 %)")
try:
    d, _ = timing("default.h5")
    res["default_seconds_per_iteration"] = d
    print(f"default (run.stream = auto): {d:.4f} s/iteration (goal: <= 0.097 s on one H100)")
except Exception as e:
    print(f"default run: no result ({e})")
try:
    a, b = h5py.File("off_1.h5", "r"), h5py.File("on_1.h5", "r")
    same = {k: bool(np.array_equal(a[k][...], b[k][...])) for k in ("/object", "/probe", "/positions", "/loss")}
    res["bitwise_on_vs_off"] = same
    print("run.stream on vs off: " + ", ".join(f"{k} {'bitwise' if v else 'DIFFERENT'}" for k, v in same.items()))
except Exception as e:
    print(f"on vs off: not compared ({e})")
json.dump(res, open(out, "w"), indent=1)
PY
} 2>&1 | grep --line-buffered -vE "pmix|dlopen|Perhaps" | tee "$OUT/stream.log"
rm -rf "$W"
)

# ---- ab
# Variants of the N-GPU benchmark side by side in one run (issue 6's scaling): the
# tBL-WSe2-shaped benchmark, for each variant, on 1 GPU at batch 256, on 1 GPU at one GPU's share
# of it on M GPUs (SHARE=M: batch 256 / M, the M-GPU step without the sum over GPUs) and on N
# GPUs, in rounds (variants interleaved, so drift of the machine falls on all of them alike). A
# variant is NAME or NAME:--KEY=VALUE[,--KEY=VALUE...] (config overrides, e.g. [tuning] keys, for
# that variant's runs only).
#   source .gpu-run/env.sh && OUT=$OUT VARIANTS="base apart:--tuning.window_clusters=false" \
#       SHARE=4 bash perf/recon/bench.sh ab [N] [ROUNDS]
# Prints seconds per iteration and efficiency (against the variant's 1-GPU run of the round) per
# variant and round; with SHARE=M also the bound on M GPUs' efficiency with a free sum over GPUs
# (1 GPU at batch 256 against 1 GPU at 256 / M, per iteration: the same positions in M times the
# steps) and the step's time alone; $OUT/ab.log.
cmd_ab() (
set -uo pipefail
cd "${EF_REPO:-$(dirname "$0")/../..}"
N=${1:-4}
ROUNDS=${2:-2}
OUT=${OUT:-$PWD/perf/recon/out}
mkdir -p "$OUT"
W=$(mktemp -d /tmp/ef-ab.XXXXXX)
source perf/recon/bench_config.sh
gpu_machine_env
write_bench_ini "$W/bench.ini" "${ITERATIONS:-12}"
cd "$W"
# seconds per iteration of the last run's output file
spi() { py -c "import h5py, sys; print(h5py.File(sys.argv[1], 'r')['/timing'].attrs['seconds_per_iteration'])" "$1"; }
{
nvidia-smi -L
simulate_bench > /dev/null
share=$((256 / ${SHARE:-1}))
for round in $(seq "$ROUNDS"); do
    for v in ${VARIANTS:-base}; do
        name=${v%%:*}
        opts=()
        [ "$name" != "$v" ] && IFS=, read -r -a opts <<< "${v#*:}"
        ensemblefit reconstruct bench.ini "${opts[@]}" --output.file one.h5 --overwrite > one.log 2>&1 \
            || { echo "!! $name failed on 1 GPU"; tail -5 one.log; continue; }
        one=$(spi one.h5)
        if [ "${SHARE:-0}" -gt 0 ]; then
            ensemblefit reconstruct bench.ini "${opts[@]}" --solver.batch_size "$share" --output.file share.h5 \
                --overwrite > share.log 2>&1 || { echo "!! $name failed at batch $share"; tail -5 share.log; continue; }
            part=$(spi share.h5)
        fi
        mpirun --bind-to none --oversubscribe -np "$N" ensemblefit reconstruct bench.ini "${opts[@]}" \
            --output.file "v_$name.h5" --overwrite > "v_$name.log" 2>&1 || { echo "!! $name failed"; tail -5 "v_$name.log"; continue; }
        s=$(spi "v_$name.h5")
        # steps per iteration: 16384 / 256 on N GPUs, 16384 / share alone
        py -c "
import sys
r, name, n, one, s, part, m = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), sys.argv[6], int(sys.argv[7])
line = f'round {r}: {name:<12} 1 GPU {one:.4f}, {n} GPUs {s:.4f} s/iter, {100 * one / (n * s):.1f} %'
if part:
    part = float(part)
    line += (f'; 1 GPU at batch {256 // m} {part:.4f} s/iter: {m} GPUs with a free sum {100 * one / part:.1f} %; '
             f'step {1e6 * one / 64:.0f} us at 256, {1e6 * part / (16384 / (256 // m)):.0f} us at {256 // m}, '
             f'{1e6 * s / 64:.0f} us on {n} GPUs')
print(line)" "$round" "$name" "$N" "$one" "$s" "${part:-}" "${SHARE:-1}"
    done
done
# each variant's reconstruction against the first's: the same bits?
py - ${VARIANTS:-base} <<'PY'
import sys, h5py, numpy as np
names = [v.split(":")[0] for v in sys.argv[1:]]
ref = h5py.File(f"v_{names[0]}.h5", "r")
for n in names[1:]:
    f = h5py.File(f"v_{n}.h5", "r")
    out = []
    for k in ("/object", "/probe", "/loss"):
        x, y = f[k][...], ref[k][...]
        out.append(f"{k} {'bitwise' if np.array_equal(x, y) else f'{np.abs(x - y).max() / np.abs(y).max():.2e}'}")
    print(f"{n} vs {names[0]}: " + ", ".join(out))
PY
} 2>&1 | grep -vE "pmix|dlopen|Perhaps" | tee "$OUT/ab.log"
rm -rf "$W"
)

# ---- profile
# Where a benchmark batch's GPU time goes at the share one GPU of N does (issue 6's scaling):
# EF_RECON_PHASES=1 on one GPU at batch 256 and at 256 / N, with the mode groups the engine
# picks and forced ones, then the N-GPU run with phases per rank (and EF_RECON_PEER_TRACE).
# PROFILE_SPECS="256:auto 64:2" picks the one-GPU runs (batch:mode groups).
#   source .gpu-run/env.sh && OUT=$OUT bash perf/recon/bench.sh profile [N]
cmd_profile() (
set -uo pipefail
cd "${EF_REPO:-$(dirname "$0")/../..}"
N=${1:-4}
OUT=${OUT:-$PWD/perf/recon/out}
mkdir -p "$OUT"
W=$(mktemp -d /tmp/ef-prof.XXXXXX)
source perf/recon/bench_config.sh
gpu_machine_env
share=$(( 256 / N ))
write_bench_ini "$W/bench.ini" 3
cd "$W"
{
nvidia-smi -L
simulate_bench > /dev/null
for spec in ${PROFILE_SPECS:-"256:auto" "$share:auto" "$share:1" "$share:4"}; do
    set -- ${spec/:/ }
    echo "== 1 GPU, batch $1, mode groups $2"
    groups=$2
    [ "$groups" = auto ] && groups=0
    EF_RECON_PHASES=1 ensemblefit reconstruct bench.ini --solver.batch_size "$1" --tuning.window_groups "$groups" \
        --output.file p.h5 --overwrite 2>&1 | grep -vE "pmix|dlopen|Perhaps"
done
if [ "$(nvidia-smi -L | wc -l)" -ge "$N" ]; then
    echo "== $N GPUs, phases per rank"
    EF_RECON_PEER_TRACE=1 EF_RECON_PHASES=1 EF_RECON_COMM_TRACE=1 mpirun --bind-to none --oversubscribe -np "$N" ensemblefit reconstruct bench.ini \
        --output.file q.h5 --overwrite 2>&1 | grep -vE "pmix|dlopen|Perhaps"
fi
} 2>&1 | tee "$OUT/profile.log"
rm -rf "$W"
)

# ---- sweep
# Issue #25's default-convergence sweep: simulated datasets over the range dose 1e5..1e9 counts
# per pattern, scan 16..64, patterns 64..128 px, 1..4 probe modes, overlap 60..85 %, each
# reconstructed with a minimal config (the data file and the output, nothing else: every step
# size, the batch and the schedule are defaults) for ITERATIONS iterations, the phase NRMSE
# against the simulated truth read at every iteration. Minimal config: 4 probe modes, the
# amplitude data term and simulate's Fermat-spiral scan are defaults too.
#   bash perf/recon/bench.sh sweep [GRID] [ITERATIONS]        (from the repository root)
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
#       bash perf/recon/bench.sh sweep corners 200
# Prints one row per case and writes $OUT/sweep.tsv: the case, the final NRMSE, the first
# iteration whose NRMSE is below 5 % (- if none), the noise floor estimate (below), seconds.
#
# Noise floor: with C counts per pattern spread over the probe's disc (A = pi (dp/8)^2 pixels)
# and a pixel inside A / step^2 discs, a pixel sees about C / step^2 counts; a phase measured
# from n counts has an rms error of at least 1 / (2 sqrt(n)) rad (the shot-noise bound of a
# weak phase object); over the truth's phase std (0.116 rad for simulate's default object) this
# is the NRMSE no unregularised reconstruction beats on average.
cmd_sweep() (
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
    *) echo "perf/recon/bench.sh sweep: GRID is corners, small or full, not '$GRID'" >&2; exit 2 ;;
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
)

# ---- multislice
# Cost of multislice: seconds per iteration of the same reconstruction with model.slices = 1 and
# 4 (and 2), on the CPU worker, on one 4-slice dataset (10 x 10 positions, 64 x 64 patterns, one
# mode; the conditions of tests/mpi/multislice.sh). Prints a JSON line per run (the mean
# iteration time without the first, /timing seconds_per_iteration) and the load average.
# usage: perf/recon/bench.sh multislice BUILD/ensemblefit [ITERATIONS] [THREADS] > RESULT.json
cmd_multislice() (
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
)

sub=${1:-}
case "$sub" in
    stream|ab|profile|sweep|multislice) shift; "cmd_${sub//-/_}" "$@" ;;
    *) sed -n '3,/^$/p' "$0" >&2; exit 2 ;;
esac

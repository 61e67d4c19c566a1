#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue #23's CPU goals on one core, all in one run: inputs/spot.ini (the 15x15 spot as a
# formula) compiled at run time (compile = jit), interpreted, and as the built-in gaussian2d, on
# the qr, normal and float solvers; and gaussian2d normal float against the peer
# perf/peers/lm_gauss2d.cpp (a minimal Cpufit-like LM, built here with the same compiler, with
# libm's expf and with ef::math's exp_float).
#
#   perf/formula/bench_formula.sh BUILD_DIR [REPLICAS=20000]
#   bash perf/formula/bench_formula.sh --gpu [REPLICAS=1000000]   # GPU machine, .gpu-run carried
#
# --gpu: issue #23's GPU goal on one GPU: the spot as a formula whose solver kernel NVRTC
# compiles at run time (compile = jit), interpreted (compile = interpret), and gaussian2d, with
# the normal solver in float and double; fits per second of /timing/compute (the worker's
# time, set-up and NVRTC excluded: a warm-up run compiles the kernel first, and its compile
# time is reported), and the ratio gaussian2d / formula jit (goal <= 1.3). Output: a table and
# perf/formula/results/<host>-gpu-<date>.json.
#
# Throughput is replicas per CPU-second of the whole process (user + sys from /usr/bin/time,
# start-up included), one thread: on a shared machine CPU time is steadier than wall time, but a
# busy machine still slows every run alike (caches, frequency). The load average is recorded.
# Output: a table on stdout and perf/formula/results/<host>-<date>.json.
set -euo pipefail
if [ "${1:-}" = "--gpu" ]; then
    R=${2:-1000000}
    SRC=$(cd "$(dirname "$0")/../.." && pwd)
    cd "$SRC"
    [ -n "${OPAL_PREFIX:-}" ] || source .gpu-run/env.sh
    export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/cuda/lib64
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/ef-bench-formula-gpu.XXXXXX")
    trap 'rm -rf "$WORK"' EXIT
    export XDG_CACHE_HOME="$WORK/cache"
    EF=${EF:-ensemblefit}
    rows=()
    # gpu_run NAME ARGS...: one GPU run of R replicas; fits per second of the worker's compute.
    gpu_run() {
        local name=$1; shift
        EF_GPU_STATS=1 EF_SETUP_TRACE=1 "$EF" fit inputs/spot.ini --fit.replicas "$R" --fit.solver normal \
            --run.workers gpu --output.file "$WORK/out.h5" --overwrite "$@" > "$WORK/run.out" 2>&1 ||
            { cat "$WORK/run.out" >&2; exit 1; }
        grep -E "formula|warning" "$WORK/run.out" | grep -v "^\[setup" | head -3 | sed 's/^/    /'
        local fps
        fps=$(env -u LD_LIBRARY_PATH /usr/bin/python3 -c "import h5py; f = h5py.File('$WORK/out.h5'); \
print(round((f['replicas/iterations'].shape[0]) / float(max(f['timing/compute'][()]))))")
        printf "%-34s %12s fits/s\n" "$name" "$fps"
        rows+=("{\"run\": \"$name\", \"replicas\": $R, \"fits_per_second\": $fps}")
        eval "FPS_${name//[^a-z0-9]/_}=$fps"
    }
    for prec in float double; do
        echo "== $prec: warm-up (NVRTC compiles the formula's kernel once; later runs load it from the cache)"
        EF_SETUP_TRACE=1 "$EF" fit inputs/spot.ini --fit.replicas 1000 --fit.solver normal --fit.precision "$prec" \
            --run.workers gpu --model.compile jit --output.file "$WORK/warm.h5" --overwrite 2>&1 |
            grep -E "formula|warning" | sed 's/^/    /'
        gpu_run "formula jit $prec" --fit.precision "$prec" --model.compile jit
        gpu_run "formula interpret $prec" --fit.precision "$prec" --model.compile interpret
        gpu_run "gaussian2d $prec" --fit.precision "$prec" --model.name gaussian2d
        jit=$(eval echo "\$FPS_formula_jit_$prec")
        g2d=$(eval echo "\$FPS_gaussian2d_$prec")
        printf "%-34s %12.3f (goal <= 1.3)\n" "gaussian2d / formula jit, $prec" "$(echo "$g2d / $jit" | bc -l)"
    done
    out="$SRC/perf/formula/results/$(hostname -s)-gpu-$(date -u +%Y%m%dT%H%MZ).json"
    {
        echo "{\"host\": \"$(hostname -s)\", \"gpu\": \"$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)\","
        echo " \"date\": \"$(date -u +%FT%TZ)\", \"commit\": \"$(git -C "$SRC" describe --always --dirty 2>/dev/null || echo unknown)\","
        echo " \"runs\": ["
        (IFS=,; echo "  ${rows[*]}")
        echo "]}"
    } > "$out"
    echo "wrote $out"
    exit 0
fi
BUILD=$(cd "${1:?usage: bench_formula.sh BUILD_DIR [REPLICAS]}" && pwd)
R=${2:-20000}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
EF=$BUILD/ensemblefit
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ef-bench-formula.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
cp "$SRC/inputs/spot.ini" "$SRC/inputs/spot.csv" .
export OMP_NUM_THREADS=1 XDG_CACHE_HOME="$WORK/cache"
CXX=${CXX:-c++}
$CXX -O3 -std=c++20 -ffp-contract=off -o peer "$SRC/perf/peers/lm_gauss2d.cpp"
$CXX -O3 -std=c++20 -ffp-contract=off -DPEER_EF_EXP -I"$SRC" -o peer_ef "$SRC/perf/peers/lm_gauss2d.cpp"

rows=()
# run NAME ARGS...: one ensemblefit run of R replicas; prints and records fits per CPU-second.
run() {
    local name=$1; shift
    rm -f out.h5
    /usr/bin/time -f "%U %S" -o cpu.txt "$EF" fit spot.ini --fit.replicas "$R" --run.threads 1 \
        --output.file out.h5 "$@" > /dev/null 2> run.err || { cat run.err >&2; exit 1; }
    local cpu its
    cpu=$(awk '{print $1 + $2}' cpu.txt)
    its=$(/usr/bin/python3 -c "import h5py; print(round(float(h5py.File('out.h5')['replicas/iterations'][()].mean()), 3))")
    printf "%-34s %8.2f CPU s %10.0f fits/CPU-s  %6.3f iterations\n" "$name" "$cpu" "$(echo "$R / $cpu" | bc -l)" "$its"
    rows+=("{\"run\": \"$name\", \"cpu_s\": $cpu, \"replicas\": $R, \"mean_iterations\": $its}")
}
"$EF" fit spot.ini --fit.replicas 1 --model.compile jit --output.file warm.h5 > /dev/null  # compile once
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for solver in qr normal float; do
    case $solver in
        qr) args=(--fit.solver qr) ;;
        normal) args=(--fit.solver normal) ;;
        float) args=(--fit.precision float) ;;
    esac
    run "formula jit, $solver" "${args[@]}" --model.compile jit
    run "gaussian2d, $solver" "${args[@]}" --model.name gaussian2d
    run "formula interpret, $solver" "${args[@]}" --model.compile interpret
done
run "gaussian2d, float, ftol 1e-4" --fit.precision float --model.name gaussian2d --fit.ftol 1e-4
for p in peer peer_ef; do
    line=$(./$p spot.csv "$R" 1e-4)
    echo "$line"
    rows+=("$line")
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
echo "load average before: $load_before, after: $load_after ($(nproc) CPUs)"
out="$SRC/perf/formula/results/$(hostname -s)-$(date -u +%Y%m%dT%H%MZ).json"
{
    echo "{\"host\": \"$(hostname -s)\", \"cpu\": \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)\","
    echo " \"date\": \"$(date -u +%FT%TZ)\", \"commit\": \"$(git -C "$SRC" describe --always --dirty)\","
    echo " \"load_before\": \"$load_before\", \"load_after\": \"$load_after\", \"runs\": ["
    (IFS=,; echo "  ${rows[*]}")
    echo "]}"
} > "$out"
echo "wrote $out"

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Formula models' benchmarks, one subcommand each (notes above each one's function); ef::math
# against glibc is perf/bench_ef_math.cpp (its header says how to build and run it):
#   perf/formula.sh cpu BUILD_DIR [REPLICAS]    compiled, interpreted and built-in, and the LM peer
#   perf/formula.sh ptxas BUILD_DIR [ARCH]      registers and spills of the GPU kernels at 16 parameters

# ---- cpu
# Issue #23's CPU goals on one core, all in one run: inputs/spot.ini (the 15x15 spot as a
# formula) compiled at run time (compile = jit), interpreted, and as the built-in gaussian2d, on
# the qr, normal and float solvers; and gaussian2d normal float against the peer
# perf/peers/lm_gauss2d.cpp (a minimal Cpufit-like LM, built here with the same compiler, with
# libm's expf and with ef::math's exp_float).
#
#   perf/formula.sh cpu BUILD_DIR [REPLICAS=20000]
# (The GPU goal of issue #23 is measured by perf/gpu/bench.sh many-fits; this script's former
# --gpu mode: `git show a5ec5f7:perf/formula/bench_formula.sh`.)
#
# Throughput is replicas per CPU-second of the whole process (user + sys from /usr/bin/time,
# start-up included), one thread: on a shared machine CPU time is steadier than wall time, but a
# busy machine still slows every run alike (caches, frequency). The load average is recorded.
# Output: a table on stdout and perf/out/<host>-<date>.json.
cmd_cpu() (
set -euo pipefail
BUILD=$(cd "${1:?usage: perf/formula.sh cpu BUILD_DIR [REPLICAS]}" && pwd)
R=${2:-20000}
SRC=$(cd "$(dirname "$0")/.." && pwd)
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
mkdir -p "$SRC/perf/out"
out="$SRC/perf/out/$(hostname -s)-$(date -u +%Y%m%dT%H%MZ).json"
{
    echo "{\"host\": \"$(hostname -s)\", \"cpu\": \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)\","
    echo " \"date\": \"$(date -u +%FT%TZ)\", \"commit\": \"$(git -C "$SRC" describe --always --dirty)\","
    echo " \"load_before\": \"$load_before\", \"load_after\": \"$load_after\", \"runs\": ["
    (IFS=,; echo "  ${rows[*]}")
    echo "]}"
} > "$out"
echo "wrote $out"
)

# ---- ptxas
# Registers, spills and stack frame of the GPU per-replica fitting kernels at 16 parameters:
# ptxas -v on the build's own normal_fit_kernel (float and double, the normal solver) and
# lm_fit_kernel (the qr solver) of kernels/cuda/replica_kernels.cuh (the header nvcc, plugins
# and NVRTC all compile, included here, so this never runs a stale copy), instantiated for a formula of 16 parameters compiled as generated code
# (the JIT's model, src/model/formula_jit.cpp), interpreted (FormulaModel), and, for comparison,
# the built-in gaussian2d; --fmad=false as in the build. Needs nvcc and a build tree for the
# generator (BUILD_DIR/libef_core.so), no GPU.
#   perf/formula.sh ptxas BUILD_DIR [ARCH=sm_90]
# Prints one line per kernel: registers, stack frame, spill stores / loads (bytes).
cmd_ptxas() (
set -euo pipefail
BUILD=$(cd "${1:?usage: perf/formula.sh ptxas BUILD_DIR [ARCH]}" && pwd)
ARCH=${2:-sm_90}
SRC=$(cd "$(dirname "$0")/.." && pwd)
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ef-ptxas.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
FORMULA="p0 + p1*x + p2*y + p3*x*y + p4*x^2 + p5*y^2 + p6*exp(-p7*x) + p8*sin(p9*y) + p10*cos(p11*x) + p12*atan(p13*y) + p14*sqrt(abs(p15*x))"
PARAMS=$(seq -s, -f 'p%g' 0 15)
c++ -std=c++20 -I"$SRC" -I"$SRC/include" -I"$BUILD/generated" -o "$WORK/formula_source" \
    "$SRC/perf/formula_source.cpp" -L"$BUILD" -lef_core -Wl,-rpath,"$BUILD"

NORMAL_ARGS='NormalFitData<REAL>, ParamBoundsView, LmSettings, int, std::uint64_t, const double*, const double*, const std::int64_t*, int, const double*, REAL*, REAL*, double*, double*, std::int64_t*, std::int64_t*, double*'
QR_ARGS='FitDataView, ParamBoundsView, LmSettings, int, std::uint64_t, const std::int64_t*, int, const double*, double*, double*, double*, size_t, double*, double*, std::int64_t*, std::int64_t*, double*'
normal() {  # normal REAL K MODEL
    echo "template __global__ void normal_fit_kernel<$1, $2, $3>($3, ${NORMAL_ARGS//REAL/$1});"
}
{
    echo '#include <cstdint>'
    echo '#include "kernels/cuda/replica_kernels.cuh"'
    echo '#include "kernels/models/builtin_models.hpp"'
    echo '#include "kernels/models/formula_model.hpp"'
    echo 'namespace ef {'
    "$WORK/formula_source" cuda-model "$FORMULA" "$PARAMS" x,y
    echo '}  // namespace ef'
    echo 'namespace ef::cuda {'
    for model in FormulaJitModel FormulaModel; do
        for real in float double; do normal "$real" 16 "$model"; done
        echo "template __global__ void lm_fit_kernel<16, $model>($model, $QR_ARGS);"
    done
    for real in float double; do normal "$real" 5 Gaussian2DModel; done
    echo "template __global__ void lm_fit_kernel<8, Gaussian2DModel>(Gaussian2DModel, $QR_ARGS);"
    echo '}  // namespace ef::cuda'
} > "$WORK/fit16.cu"
RANDOM123=$(dirname "$(dirname "$(find /usr/include /usr/local/include -name philox.h -path '*Random123*' | head -1)")")
"$NVCC" -std=c++20 --fmad=false --expt-relaxed-constexpr -arch="$ARCH" -Xptxas -v -c \
    -I"$SRC" -I"$SRC/include" -I"$BUILD/generated" -I"$RANDOM123" -o "$WORK/fit16.o" "$WORK/fit16.cu" \
    > "$WORK/ptxas.log" 2>&1 || { cat "$WORK/ptxas.log" >&2; exit 1; }
# One line per kernel: its name and template arguments, then the figures ptxas gives for it.
c++filt < "$WORK/ptxas.log" | awk '
    function num(re) { return match($0, re) ? substr($0, RSTART, RLENGTH) + 0 : "?" }
    /Compiling entry function/ {
        name = $0; sub(/.*Compiling entry function .void ef::cuda::/, "", name); sub(/\(.*/, "", name); next }
    /Function properties for/ { entry = index($0, name) > 0 && index($0, "void ef::cuda::") > 0; next }
    entry && /bytes stack frame/ {
        frame = num("[0-9]+ bytes stack frame"); st = num("[0-9]+ bytes spill stores"); ld = num("[0-9]+ bytes spill loads")
        next }
    /Used [0-9]+ registers/ {
        printf "%-48s %4d registers %6d B stack frame %6d / %d B spill stores / loads\n", name, num("[0-9]+ registers"), frame, st, ld }'
# Functions kept out of line (lm_normal.hpp's bookkeeping on the device) have their own spills.
c++filt < "$WORK/ptxas.log" | awk '
    /Function properties for/ && !/void ef::cuda::/ { f = $0; sub(/.*Function properties for /, "", f); sub(/\(.*/, "", f); next }
    f != "" && /spill/ { if ($0 !~ / 0 bytes spill stores, 0 bytes spill loads/) print "  out of line: " f ":" $0; f = "" }' | sort -u
)

sub=${1:-}
case "$sub" in
    cpu|ptxas) shift; "cmd_${sub//-/_}" "$@" ;;
    *) sed -n '3,/^$/p' "$0" >&2; exit 2 ;;
esac

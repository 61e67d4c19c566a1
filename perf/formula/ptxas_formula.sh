#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Registers, spills and stack frame of the GPU per-replica fitting kernels at 16 parameters:
# ptxas -v on the build's own normal_fit_kernel (float and double, the normal solver) and
# lm_fit_kernel (the qr solver) of kernels/cuda/replica_kernels.cuh (the header nvcc, plugins
# and NVRTC all compile, included here, so this never runs a stale copy), instantiated for a formula of 16 parameters compiled as generated code
# (the JIT's model, src/model/formula_jit.cpp), interpreted (FormulaModel), and, for comparison,
# the built-in gaussian2d; --fmad=false as in the build. Needs nvcc and a build tree for the
# generator (BUILD_DIR/libef_core.so), no GPU.
#   perf/formula/ptxas_formula.sh BUILD_DIR [ARCH=sm_90]
# Prints one line per kernel: registers, stack frame, spill stores / loads (bytes).
set -euo pipefail
BUILD=$(cd "${1:?usage: ptxas_formula.sh BUILD_DIR [ARCH]}" && pwd)
ARCH=${2:-sm_90}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ef-ptxas.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
FORMULA="p0 + p1*x + p2*y + p3*x*y + p4*x^2 + p5*y^2 + p6*exp(-p7*x) + p8*sin(p9*y) + p10*cos(p11*x) + p12*atan(p13*y) + p14*sqrt(abs(p15*x))"
PARAMS=$(seq -s, -f 'p%g' 0 15)
c++ -std=c++20 -I"$SRC" -I"$SRC/include" -I"$BUILD/generated" -o "$WORK/formula_source" \
    "$SRC/perf/formula/formula_source.cpp" -L"$BUILD" -lef_core -Wl,-rpath,"$BUILD"

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

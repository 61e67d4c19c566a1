#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Registers and spills of the GPU normal-equations kernel in float (K = 16 slots) for a formula
# of 16 parameters compiled as generated code (the JIT's model, src/model/formula_jit.cpp) and,
# for comparison, interpreted (FormulaModel) and the built-in gaussian2d (K = 5): ptxas -v on
# the same kernel body as kernels/cuda/fit_kernels.cu's normal_fit_kernel, --fmad=false as in
# the build. Needs nvcc, no GPU.
#   perf/formula/ptxas_formula.sh BUILD_DIR [ARCH=sm_90]
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
{
    echo '#include "kernels/fit/lm_normal.hpp"'
    echo '#include "kernels/fit/resample.hpp"'
    echo '#include "kernels/models/builtin_models.hpp"'
    echo '#include "kernels/models/formula_model.hpp"'
    echo 'namespace ef {'
    "$WORK/formula_source" cuda-model "$FORMULA" "$PARAMS" x,y
    cat <<'CU'
template <class Real, int K, class Model>
__global__ void normal_fit_kernel(Model model, NormalFitData<Real> data, ParamBoundsView bounds, LmSettings settings,
                                  int bootstrap, std::uint64_t seed, const double* y0, const double* sigma,
                                  const std::int64_t* replicas, int count, const double* start, Real* ybuf,
                                  Real* wbuf, double* params, double* chi2, std::int64_t* status,
                                  std::int64_t* iterations, double* central_cov) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count) return;
    const std::int64_t r = replicas[t];
    resample_replica_strided<Real>(bootstrap, seed, static_cast<std::uint64_t>(r), data.n, y0, sigma, ybuf + t,
                                   bootstrap ? wbuf + t : nullptr, count);
    NormalFitData<Real> view = data;
    view.y = ybuf + t;
    view.w = bootstrap ? wbuf + t : nullptr;
    view.stride = count;
    double* p = params + static_cast<size_t>(t) * bounds.P;
    for (int q = 0; q < bounds.P; ++q) p[q] = start[q];
    const LmOutcome o = lm_normal_fit<Real, K>(model, view, bounds, settings, p, r == 0 ? central_cov : nullptr);
    chi2[t] = o.chi2;
    status[t] = static_cast<std::int64_t>(o.status);
    iterations[t] = o.iterations;
}
template __global__ void normal_fit_kernel<float, 16, FormulaJitModel>(FormulaJitModel, NormalFitData<float>, ParamBoundsView, LmSettings, int, std::uint64_t, const double*, const double*, const std::int64_t*, int, const double*, float*, float*, double*, double*, std::int64_t*, std::int64_t*, double*);
template __global__ void normal_fit_kernel<float, 16, FormulaModel>(FormulaModel, NormalFitData<float>, ParamBoundsView, LmSettings, int, std::uint64_t, const double*, const double*, const std::int64_t*, int, const double*, float*, float*, double*, double*, std::int64_t*, std::int64_t*, double*);
template __global__ void normal_fit_kernel<float, 5, Gaussian2DModel>(Gaussian2DModel, NormalFitData<float>, ParamBoundsView, LmSettings, int, std::uint64_t, const double*, const double*, const std::int64_t*, int, const double*, float*, float*, double*, double*, std::int64_t*, std::int64_t*, double*);
}  // namespace ef
CU
} > "$WORK/normal16.cu"
RANDOM123=$(dirname "$(dirname "$(find /usr/include /usr/local/include -name philox.h -path '*Random123*' | head -1)")")
"$NVCC" -std=c++20 --fmad=false --expt-relaxed-constexpr -arch="$ARCH" -Xptxas -v -c \
    -I"$SRC" -I"$SRC/include" -I"$BUILD/generated" -I"$RANDOM123" -o "$WORK/normal16.o" "$WORK/normal16.cu" 2>&1 |
    grep -E "Compiling entry|registers|spill" |
    c++filt

// SPDX-License-Identifier: MIT
#pragma once
// The per-replica solver kernels (one thread per replica), shared by every compiler that builds
// them: nvcc for the built-in models (kernels/cuda/fit_kernels.cu) and for model plugins
// (cmake/EfModelPluginSdk.cmake), and NVRTC for formulas compiled at run time
// (src/model/formula_jit.cpp embeds this header and the ones it includes). So a formula or a
// plugin runs exactly the code a built-in runs: only the Model type differs.
//
// Under NVRTC the std headers below are libcu++ shims (formula_nvrtc_headers()); nothing here
// may need the host's C++ library.

#include <cstddef>
#include <cstdint>

#include "kernels/fit/lm.hpp"
#include "kernels/fit/lm_normal.hpp"
#include "kernels/fit/resample.hpp"

namespace ef::cuda {

/**
 * The qr path: each thread resamples replica replicas[t] into its rows of ybuf/wbuf (n each)
 * and fits it with the per-replica LM (lm.hpp) in its slice of `work` (work_stride doubles:
 * the Jacobian n x P dominates). One launch fits `count` replicas; the host uses 64 threads
 * per block. Replica 0 writes its covariance to central_cov (P x P).
 */
template <int K, class Model>
__global__ void lm_fit_kernel(Model model, FitDataView data, ParamBoundsView bounds, LmSettings settings,
                              int bootstrap, std::uint64_t seed, const std::int64_t* replicas, int count,
                              const double* start, double* ybuf, double* wbuf, double* work, std::size_t work_stride,
                              double* params, double* chi2, std::int64_t* status, std::int64_t* iterations,
                              double* central_cov) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count) return;
    const int n = data.n;
    const int P = bounds.P;
    const std::int64_t r = replicas[t];
    double* y = ybuf + static_cast<std::size_t>(t) * n;
    double* w = wbuf + static_cast<std::size_t>(t) * n;
    resample_replica(bootstrap, seed, static_cast<std::uint64_t>(r), n, data.y, data.sigma, y, w);
    FitDataView view = data;
    view.y = y;
    view.weight = bootstrap ? w : nullptr;
    double* p = params + static_cast<std::size_t>(t) * P;
    for (int q = 0; q < P; ++q) p[q] = start[q];
    const LmOutcome o = lm_fit<K>(model, view, bounds, settings, p, work + static_cast<std::size_t>(t) * work_stride,
                                  r == 0 ? central_cov : nullptr);
    chi2[t] = o.chi2;
    status[t] = static_cast<std::int64_t>(o.status);
    iterations[t] = o.iterations;
}

/**
 * The normal-equations LM, one thread per replica with its whole state in registers: the
 * thread resamples its replica into column t of the point-major y (and w) arrays, so that a
 * warp's 32 replicas read consecutive addresses at every point, then fits.
 */
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
    double* p = params + static_cast<std::size_t>(t) * bounds.P;
    for (int q = 0; q < bounds.P; ++q) p[q] = start[q];
    const LmOutcome o = lm_normal_fit<Real, K>(model, view, bounds, settings, p, r == 0 ? central_cov : nullptr);
    chi2[t] = o.chi2;
    status[t] = static_cast<std::int64_t>(o.status);
    iterations[t] = o.iterations;
}

}  // namespace ef::cuda

// SPDX-License-Identifier: MIT
// cuFFT LTO load callbacks of the CUDA reconstruction worker (kernels/cuda/recon_worker.cu).
// Compiled to LTO-IR (nvcc -dc -fatbin, code=lto_90), embedded with bin2c, and linked into the
// cuFFT kernels at plan time (cufftXtSetJITCallback, nvJitLink): each FFT computes its input
// element by the load functor of kernels/recon/ptycho_math.hpp instead of reading a buffer that
// an element-wise pass wrote. callerInfo points to the functor (device memory).
#include <cufftXt.h>

#include "kernels/cuda/lto/load_slot.hpp"
#include "kernels/recon/ptycho_math.hpp"

namespace {

template <class Load>
__device__ __forceinline__ cufftComplex ef_apply_load(unsigned long long offset, void* info) {
    const ef::recon::LoadSlot<Load>& slot = *static_cast<const ef::recon::LoadSlot<Load>*>(info);
    const unsigned n = static_cast<unsigned>(slot.load.d.h) * static_cast<unsigned>(slot.load.d.w);
    unsigned long long r;
    if ((n & (n - 1)) == 0) r = offset >> (__ffs(static_cast<int>(n)) - 1);
    else r = offset / n;
    const ef::recon::Cx<float> v =
        slot.load(slot.row0 + static_cast<std::int64_t>(r), static_cast<int>(offset - r * n));
    return make_cuComplex(v.re, v.im);
}

}  // namespace

__device__ cufftComplex ef_load_shifted_probe(void*, unsigned long long offset, void* info, void*) {
    return ef_apply_load<ef::recon::LoadShiftedProbe<float>>(offset, info);
}
__device__ cufftComplex ef_load_exit_wave(void*, unsigned long long offset, void* info, void*) {
    return ef_apply_load<ef::recon::LoadExitWave<float>>(offset, info);
}
__device__ cufftComplex ef_load_scaled(void*, unsigned long long offset, void* info, void*) {
    return ef_apply_load<ef::recon::LoadScaled<float>>(offset, info);
}
__device__ cufftComplex ef_load_conj_object(void*, unsigned long long offset, void* info, void*) {
    return ef_apply_load<ef::recon::LoadConjObject<float>>(offset, info);
}

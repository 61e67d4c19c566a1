// SPDX-License-Identifier: MIT
// Measured device ceilings: FP64/FP32 FMA throughput (independent FMA chains in every thread),
// device memory bandwidth (a large device-to-device copy) and pinned host-to-device bandwidth.
#include <cuda_runtime.h>

#include <exception>
#include <vector>

#include <ensemblefit/worker/device_probe.hpp>
#include <ensemblefit/worker/worker_kind.hpp>

#include <cublas_v2.h>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/fit_batched.cuh"

namespace ef {
namespace {

using cuda::DeviceBuffer;
constexpr int kChains = 8;
constexpr int kIters = 4096;

template <class T>
__global__ void fma_kernel(T* out, T b, T c) {
    T a[kChains];
    for (int k = 0; k < kChains; ++k) a[k] = static_cast<T>(threadIdx.x + k);
    for (int i = 0; i < kIters; ++i)
#pragma unroll
        for (int k = 0; k < kChains; ++k) a[k] = fma(a[k], b, c);
    T s = 0;
    for (int k = 0; k < kChains; ++k) s += a[k];
    if (s == static_cast<T>(-1.2345)) out[0] = s;  // keeps the work alive
}

/// Seconds per call of `launch` (asynchronous work on the default stream): one warm-up call,
/// then `reps` calls between two events.
template <class F>
double seconds_per_call(F&& launch, int reps) {
    launch();
    EF_CUDA_CHECK(cudaDeviceSynchronize());
    cudaEvent_t e0, e1;
    EF_CUDA_CHECK(cudaEventCreate(&e0));
    EF_CUDA_CHECK(cudaEventCreate(&e1));
    EF_CUDA_CHECK(cudaEventRecord(e0));
    for (int r = 0; r < reps; ++r) launch();
    EF_CUDA_CHECK(cudaEventRecord(e1));
    EF_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    EF_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return ms * 1e-3 / reps;
}

template <class T>
double fma_tflops(int sms) {
    DeviceBuffer<T> out(1);
    const int blocks = sms * 16, threads = 256;
    const double s = seconds_per_call(
        [&] { fma_kernel<T><<<blocks, threads>>>(out.data(), static_cast<T>(0.999), static_cast<T>(0.001)); }, 5);
    return 2.0 * kChains * kIters * static_cast<double>(blocks) * threads / s / 1e12;
}

double copy_gbs(size_t bytes, cudaMemcpyKind kind) {
    DeviceBuffer<char> a(bytes), b(bytes);
    char* host = nullptr;
    if (kind == cudaMemcpyHostToDevice) EF_CUDA_CHECK(cudaMallocHost(&host, bytes));
    const void* src = kind == cudaMemcpyHostToDevice ? static_cast<const void*>(host) : a.data();
    const double s = seconds_per_call([&] { EF_CUDA_CHECK(cudaMemcpy(b.data(), src, bytes, kind)); }, 5);
    if (host) cudaFreeHost(host);
    // A device-to-device copy reads and writes every byte.
    return static_cast<double>(bytes) * (kind == cudaMemcpyDeviceToDevice ? 2.0 : 1.0) / s / 1e9;
}

/// TFLOP/s of the table GEMM kernel and of cublasDgemm on the same operands.
void gemm_tflops(double& mine, double& blas) {
    const int n = 5000, K = 1088;
    const long cols = 14L * 2560;
    // Zeroed operands (DeviceBuffer(n) zeroes).
    DeviceBuffer<double> T(static_cast<size_t>(n) * K), W(static_cast<size_t>(K) * cols), F(static_cast<size_t>(n) * cols);
    const double flops = 2.0 * n * K * static_cast<double>(cols);
    mine = flops / seconds_per_call([&] { cuda::launch_table_gemm(T.data(), W.data(), F.data(), n, K, cols); }, 3) / 1e12;
    cublasHandle_t h;
    if (cublasCreate(&h) == CUBLAS_STATUS_SUCCESS) {
        const double one = 1.0, zero = 0.0;
        // F = T W with T row-major n x K = (K x n column-major)^T.
        blas = flops / seconds_per_call([&] {
            cublasDgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, n, static_cast<int>(cols), K, &one, T.data(), K, W.data(), K, &zero,
                        F.data(), n);
        }, 3) / 1e12;
        cublasDestroy(h);
    }
}

}  // namespace

std::vector<DeviceInfo> probe_devices(bool measure) {
    std::vector<DeviceInfo> out;
    const int n = cuda_device_count();
    for (int d = 0; d < n; ++d) {
        EF_CUDA_CHECK(cudaSetDevice(d));
        cudaDeviceProp p{};
        EF_CUDA_CHECK(cudaGetDeviceProperties(&p, d));
        DeviceInfo info;
        info.ordinal = d;
        info.name = p.name;
        info.memory_gib = static_cast<double>(p.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0);
        info.sms = p.multiProcessorCount;
        if (measure) {
            info.fp64_tflops = fma_tflops<double>(info.sms);
            info.fp32_tflops = fma_tflops<float>(info.sms);
            info.device_bandwidth_gbs = copy_gbs(size_t(1) << 30, cudaMemcpyDeviceToDevice);
            info.h2d_bandwidth_gbs = copy_gbs(size_t(1) << 28, cudaMemcpyHostToDevice);
            gemm_tflops(info.table_gemm_tflops, info.cublas_dgemm_tflops);
        }
        out.push_back(info);
    }
    return out;
}

DeviceInfo probe_ceilings(int ordinal) {
    DeviceInfo info;
    info.ordinal = ordinal;
    try {
        EF_CUDA_CHECK(cudaSetDevice(ordinal));
        cudaDeviceProp p{};
        EF_CUDA_CHECK(cudaGetDeviceProperties(&p, ordinal));
        info.name = p.name;
        info.sms = p.multiProcessorCount;
        info.fp64_tflops = fma_tflops<double>(info.sms);
        info.fp32_tflops = fma_tflops<float>(info.sms);
        info.device_bandwidth_gbs = copy_gbs(size_t(1) << 28, cudaMemcpyDeviceToDevice);
    } catch (const std::exception&) {  // no room left on the device, say: no ceilings, not a failed run
        cudaGetLastError();
        return DeviceInfo{};
    }
    return info;
}

}  // namespace ef

// SPDX-License-Identifier: MIT
// Measured device ceilings: FP64/FP32 FMA throughput (independent FMA chains in every thread),
// device memory bandwidth (a large device-to-device copy) and pinned host-to-device bandwidth.
#include <cuda_runtime.h>

#include <vector>

#include <ensemblefit/worker/device_probe.hpp>
#include <ensemblefit/worker/worker.hpp>

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

template <class T>
double fma_tflops(int sms) {
    DeviceBuffer<T> out(1);
    const int blocks = sms * 16, threads = 256;
    fma_kernel<T><<<blocks, threads>>>(out.get(), static_cast<T>(0.999), static_cast<T>(0.001));  // warm-up
    EF_CUDA_CHECK(cudaDeviceSynchronize());
    cudaEvent_t e0, e1;
    EF_CUDA_CHECK(cudaEventCreate(&e0));
    EF_CUDA_CHECK(cudaEventCreate(&e1));
    EF_CUDA_CHECK(cudaEventRecord(e0));
    const int reps = 5;
    for (int r = 0; r < reps; ++r)
        fma_kernel<T><<<blocks, threads>>>(out.get(), static_cast<T>(0.999), static_cast<T>(0.001));
    EF_CUDA_CHECK(cudaEventRecord(e1));
    EF_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    EF_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    const double flops = 2.0 * kChains * kIters * static_cast<double>(blocks) * threads * reps;
    return flops / (ms * 1e-3) / 1e12;
}

double copy_gbs(size_t bytes, cudaMemcpyKind kind) {
    DeviceBuffer<char> a(bytes), b(bytes);
    char* host = nullptr;
    if (kind == cudaMemcpyHostToDevice) EF_CUDA_CHECK(cudaMallocHost(&host, bytes));
    const void* src = kind == cudaMemcpyHostToDevice ? static_cast<const void*>(host) : a.get();
    EF_CUDA_CHECK(cudaMemcpy(b.get(), src, bytes, kind));  // warm-up
    cudaEvent_t e0, e1;
    EF_CUDA_CHECK(cudaEventCreate(&e0));
    EF_CUDA_CHECK(cudaEventCreate(&e1));
    const int reps = 5;
    EF_CUDA_CHECK(cudaEventRecord(e0));
    for (int r = 0; r < reps; ++r) EF_CUDA_CHECK(cudaMemcpy(b.get(), src, bytes, kind));
    EF_CUDA_CHECK(cudaEventRecord(e1));
    EF_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    EF_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    if (host) cudaFreeHost(host);
    // A device-to-device copy reads and writes every byte.
    const double moved = static_cast<double>(bytes) * reps * (kind == cudaMemcpyDeviceToDevice ? 2.0 : 1.0);
    return moved / (ms * 1e-3) / 1e9;
}

}  // namespace

/// TFLOP/s of the table GEMM kernel and of cublasDgemm on the same operands.
void gemm_tflops(double& mine, double& blas) {
    const int n = 5000, K = 1088;
    const long cols = 14L * 2560;
    DeviceBuffer<double> T(static_cast<size_t>(n) * K), W(static_cast<size_t>(K) * cols), F(static_cast<size_t>(n) * cols);
    EF_CUDA_CHECK(cudaMemset(T.get(), 0, T.size() * sizeof(double)));
    EF_CUDA_CHECK(cudaMemset(W.get(), 0, W.size() * sizeof(double)));
    cudaEvent_t a, b;
    EF_CUDA_CHECK(cudaEventCreate(&a));
    EF_CUDA_CHECK(cudaEventCreate(&b));
    const double flops = 2.0 * n * K * static_cast<double>(cols);
    auto time = [&](auto&& launch) {
        launch();  // warm-up
        EF_CUDA_CHECK(cudaEventRecord(a));
        constexpr int reps = 3;
        for (int r = 0; r < reps; ++r) launch();
        EF_CUDA_CHECK(cudaEventRecord(b));
        EF_CUDA_CHECK(cudaEventSynchronize(b));
        float ms = 0;
        EF_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
        return flops * reps / (ms * 1e-3) / 1e12;
    };
    mine = time([&] { cuda::launch_table_gemm(T.get(), W.get(), F.get(), n, K, cols); });
    cublasHandle_t h;
    if (cublasCreate(&h) == CUBLAS_STATUS_SUCCESS) {
        const double one = 1.0, zero = 0.0;
        // F = T W with T row-major n x K = (K x n column-major)^T.
        blas = time([&] {
            cublasDgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, n, static_cast<int>(cols), K, &one, T.get(), K, W.get(), K, &zero,
                        F.get(), n);
        });
        cublasDestroy(h);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
}

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

}  // namespace ef

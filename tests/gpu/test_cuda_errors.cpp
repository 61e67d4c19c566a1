// SPDX-License-Identifier: MIT
// A failed CUDA call says whose failure it is through the exit code (docs/architecture.md,
// "Errors and exit codes"): device memory ran out 3, a device or driver that failed or went
// away 4, a build that does not fit the device or driver 2, anything else a bug 1. Built in
// the gpu_tests binary, which exits 77 (skipped) where no GPU is visible; compiled only with CUDA.
#if EF_TEST_CUDA
#include <catch2/catch.hpp>

#include <cstddef>

#include "kernels/cuda/cuda_check.cuh"

TEST_CASE("CUDA errors map to the documented exit codes", "[gpu][errors]") {
    using ef::ExitCode;
    CHECK(ef::cuda::exit_code_of(cudaErrorMemoryAllocation) == ExitCode::data);
    CHECK(ef::cuda::exit_code_of(cudaErrorECCUncorrectable) == ExitCode::lost);
    CHECK(ef::cuda::exit_code_of(cudaErrorNoDevice) == ExitCode::lost);
    CHECK(ef::cuda::exit_code_of(cudaErrorNoKernelImageForDevice) == ExitCode::usage);
    CHECK(ef::cuda::exit_code_of(cudaErrorIllegalAddress) == ExitCode::runtime);
    CHECK(ef::cuda::exit_code_of(cudaErrorLaunchFailure) == ExitCode::runtime);
}

TEST_CASE("an impossible device allocation throws exit code 3 naming the call", "[gpu][errors]") {
    void* p = nullptr;
    try {
        EF_CUDA_CHECK(cudaMalloc(&p, std::size_t{1} << 60));  // an exbibyte: no device has it
        FAIL("cudaMalloc of 2^60 bytes succeeded");
    } catch (const ef::Error& e) {
        CHECK(e.code() == ef::ExitCode::data);
        CHECK(std::string(e.what()).find("cudaMalloc") != std::string::npos);
    }
    (void)cudaGetLastError();  // clear the sticky-free error so later tests start clean
}
#endif

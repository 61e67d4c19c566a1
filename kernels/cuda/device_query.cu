// SPDX-License-Identifier: MIT
// Device count and names for placement (--workers auto) and the placement table.
#include <cuda_runtime.h>

#include <chrono>

#include <ensemblefit/core/error.hpp>
#include <ensemblefit/worker/worker_kind.hpp>

namespace ef {

int cuda_device_count() {
    int n = 0;
    // No driver or no device both mean "no GPU here" for placement, never an error.
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

std::string cuda_device_name(int ordinal) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, ordinal) != cudaSuccess) return "";
    return prop.name;
}

std::string cuda_device_pci_bus_id(int ordinal) {
    char id[32] = {};
    if (cudaDeviceGetPCIBusId(id, sizeof id, ordinal) != cudaSuccess) {
        cudaGetLastError();
        return "";
    }
    return id;
}

void cuda_create_context(int ordinal) {
    if (cudaSetDevice(ordinal) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) cudaGetLastError();
}

double cuda_reset_seconds(int ordinal) {
    if (cudaSetDevice(ordinal) != cudaSuccess) {
        cudaGetLastError();
        return 0.0;
    }
    const auto t0 = std::chrono::steady_clock::now();
    if (cudaDeviceReset() != cudaSuccess) cudaGetLastError();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace ef

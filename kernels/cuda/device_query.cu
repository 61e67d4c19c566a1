// SPDX-License-Identifier: MIT
// Device count and names for placement (--workers auto) and the placement table.
#include <cuda_runtime.h>

#include <ensemblefit/core/error.hpp>
#include <ensemblefit/worker/worker.hpp>

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


}  // namespace ef

// SPDX-License-Identifier: MIT
// CUDA entry points of the library. The fitting worker proper is a later issue (#5); for now a
// GPU worker request is refused clearly, and the device query serves placement (--workers auto).
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

std::unique_ptr<Worker> make_cuda_worker(const FitProblem&, const WorkerOptions& options) {
    if (cuda_device_count() == 0)
        throw usage_error("run.workers = gpu: no CUDA device is visible to this rank");
    throw usage_error("run.workers = gpu: the CUDA fitting worker is not implemented yet (device " +
                      std::to_string(options.device) + " found); use --run.workers cpu");
}

}  // namespace ef

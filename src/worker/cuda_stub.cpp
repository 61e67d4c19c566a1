// SPDX-License-Identifier: MIT
// Built only when CUDA is off: every GPU entry point says so.
#include <ensemblefit/core/error.hpp>
#include <ensemblefit/worker/device_probe.hpp>
#include <ensemblefit/worker/worker.hpp>

#include "kernels/cuda/fit_kernels.hpp"

namespace ef {

namespace cuda {
std::unique_ptr<Worker> make_fit_worker(FitPlan, FitInputs, const WorkerOptions&) {
    throw usage_error("run.workers = gpu: ensemblefit was built without CUDA");
}
}  // namespace cuda

int cuda_device_count() { return 0; }
std::string cuda_device_name(int) { return ""; }
std::string cuda_device_pci_bus_id(int) { return ""; }
void cuda_create_context(int) {}
double cuda_reset_seconds(int) { return 0.0; }
std::vector<DeviceInfo> probe_devices(bool) { return {}; }
DeviceInfo probe_ceilings(int) { return {}; }

}  // namespace ef

// SPDX-License-Identifier: MIT
// Built only when CUDA is off: every GPU entry point says so.
#include <ensemblefit/core/error.hpp>
#include <ensemblefit/worker/worker.hpp>

namespace ef {

std::unique_ptr<Worker> make_cuda_worker(const FitProblem&, const WorkerOptions&) {
    throw usage_error("run.workers = gpu: ensemblefit was built without CUDA");
}
int cuda_device_count() { return 0; }
std::string cuda_device_name(int) { return ""; }

}  // namespace ef

#include <ensemblefit/worker/device_probe.hpp>

namespace ef {
std::vector<DeviceInfo> probe_devices(bool) { return {}; }
}  // namespace ef

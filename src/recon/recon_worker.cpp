// SPDX-License-Identifier: MIT
#include <ensemblefit/recon/recon_worker.hpp>

#include <ensemblefit/core/error.hpp>

#include "kernels/recon/recon_backends.hpp"

namespace ef {

std::unique_ptr<ReconWorker> make_recon_worker(WorkerKind kind, const ReconWorkerOptions& options) {
    if (options.h < 1 || options.w < 1 || options.modes < 1 || options.obj_h < options.h || options.obj_w < options.w)
        throw usage_error("reconstruction: object " + std::to_string(options.obj_h) + " x " +
                          std::to_string(options.obj_w) + " is smaller than the window " + std::to_string(options.h) +
                          " x " + std::to_string(options.w));
    if (options.slices < 1 || (options.slices > 1 && !(options.slice_fresnel > 0)))
        throw usage_error("reconstruction: " + std::to_string(options.slices) +
                          " object slices need at least one and, for several, a Fresnel number > 0");
    if (kind == WorkerKind::gpu) {
        if (options.double_precision)
            throw usage_error("solver.precision = double: the CUDA worker runs in single precision only");
        return recon::make_cuda_recon_worker(options);
    }
    return recon::make_cpu_recon_worker(options);
}

}  // namespace ef

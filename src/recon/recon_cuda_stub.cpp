// SPDX-License-Identifier: MIT
// Built only when CUDA is off (the build drops *cuda_stub.cpp when it is on; the guard keeps
// this file harmless either way): a GPU reconstruction worker is refused clearly.
#include <ensemblefit/core/config.hpp>

#if !EF_HAVE_CUDA
#include <ensemblefit/core/error.hpp>

#include "kernels/recon/recon_backends.hpp"

namespace ef::recon {

std::unique_ptr<ReconWorker> make_cuda_recon_worker(const ReconWorkerOptions&) {
    throw usage_error("run.workers = gpu: ensemblefit was built without CUDA");
}

}  // namespace ef::recon
#endif

// SPDX-License-Identifier: MIT
#pragma once

#include <memory>

#include <ensemblefit/recon/recon_worker.hpp>

namespace ef::recon {

/// kernels/cpu/recon_worker.cpp: PtychoEngine over CpuBackend (float or double).
std::unique_ptr<ReconWorker> make_cpu_recon_worker(const ReconWorkerOptions& options);
/// kernels/cuda/recon_worker.cu (src/recon/recon_cuda_stub.cpp without CUDA): over CudaBackend.
std::unique_ptr<ReconWorker> make_cuda_recon_worker(const ReconWorkerOptions& options);

}  // namespace ef::recon

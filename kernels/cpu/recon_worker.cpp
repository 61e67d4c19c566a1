// SPDX-License-Identifier: MIT
// The CPU reconstruction worker: PtychoEngine over CpuBackend (OpenMP loops, FFTW plans).
#include <string>

#include "kernels/recon/cpu_backend.hpp"
#include "kernels/recon/engine_worker.hpp"
#include "kernels/recon/recon_backends.hpp"

namespace ef::recon {

std::unique_ptr<ReconWorker> make_cpu_recon_worker(const ReconWorkerOptions& o) {
    const std::string what = "cpu, " + std::to_string(o.threads) + " thread" + (o.threads == 1 ? "" : "s") + ", " +
                             (o.double_precision ? "float64, " : "float32, ") + CpuFft<float>::describe(o.fft_measure);
    if (o.double_precision)
        return std::make_unique<EngineWorker<double, CpuBackend<double>>>(
            WorkerKind::cpu, what, std::make_unique<CpuBackend<double>>(o.h, o.w, o.threads, o.fft_measure), o);
    return std::make_unique<EngineWorker<float, CpuBackend<float>>>(
        WorkerKind::cpu, what, std::make_unique<CpuBackend<float>>(o.h, o.w, o.threads, o.fft_measure), o);
}

}  // namespace ef::recon

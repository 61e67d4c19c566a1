// SPDX-License-Identifier: MIT
// The CPU reconstruction worker: PtychoEngine over CpuBackend (OpenMP loops, FFTW plans).
#include <string>

#include "kernels/recon/cpu_backend.hpp"
#include "kernels/recon/engine_worker.hpp"
#include "kernels/recon/recon_backends.hpp"

namespace ef::recon {

namespace {

template <class T>
std::unique_ptr<ReconWorker> make_worker(const std::string& what, const ReconWorkerOptions& o) {
    auto be = std::make_unique<CpuBackend<T>>(o.h, o.w, o.threads, o.fft_measure, o.tuning);
    return std::make_unique<EngineWorker<T, CpuBackend<T>>>(WorkerKind::cpu, what, std::move(be), o);
}

}  // namespace

std::unique_ptr<ReconWorker> make_cpu_recon_worker(const ReconWorkerOptions& o) {
    const std::string what = "cpu, " + std::to_string(o.threads) + " thread" + (o.threads == 1 ? "" : "s") + ", " +
                             (o.double_precision ? "float64, " : "float32, ") + CpuFft<float>::describe(o.fft_measure);
    return o.double_precision ? make_worker<double>(what, o) : make_worker<float>(what, o);
}

}  // namespace ef::recon

// SPDX-License-Identifier: MIT
#include <ensemblefit/core/error.hpp>
#include <ensemblefit/worker/worker.hpp>

#include "kernels/cpu/fit_kernels.hpp"

namespace ef {
namespace {

/// Runs work units with OpenMP threads on this rank's cores.
class CpuWorker final : public Worker {
   public:
    CpuWorker(const FitProblem& problem, int threads)
        : problem_(problem), threads_(threads), ctx_(cpu::make_fit_context(problem, threads)) {}
    WorkerKind kind() const override { return WorkerKind::cpu; }
    std::string describe() const override {
        return "cpu, " + std::to_string(threads_) + " thread" + (threads_ == 1 ? "" : "s");
    }
    void run(const WorkUnit& unit, ReplicaBlock& out) override {
        cpu::fit_replicas(problem_, unit.replicas.data(), static_cast<int>(unit.replicas.size()),
                          threads_, out, ctx_.get());
    }

   private:
    const FitProblem& problem_;
    int threads_;
    std::shared_ptr<cpu::FitContext> ctx_;
};

}  // namespace

const char* to_string(WorkerKind kind) { return kind == WorkerKind::cpu ? "cpu" : "gpu"; }

std::unique_ptr<Worker> make_cuda_worker(const FitProblem& problem, const WorkerOptions& options);

std::unique_ptr<Worker> make_worker(WorkerKind kind, const FitProblem& problem,
                                    const WorkerOptions& options) {
    if (kind == WorkerKind::cpu) return std::make_unique<CpuWorker>(problem, options.threads);
    return make_cuda_worker(problem, options);
}

}  // namespace ef

// SPDX-License-Identifier: MIT
#include <utility>
#include <variant>

#include <ensemblefit/core/error.hpp>
#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/worker/worker.hpp>

#include "kernels/core/kernel_tally.hpp"
#include "kernels/cpu/fit_kernels.hpp"
#include "kernels/cuda/fit_kernels.hpp"
#include "src/fit/fit_plan.hpp"
#include "src/model/compiled_model.hpp"

namespace ef {
namespace {

/// Runs a fit plan's work units with OpenMP threads on this rank's cores.
class CpuWorker final : public Worker {
   public:
    CpuWorker(FitPlan plan, FitInputs in, int threads)
        : plan_(std::move(plan)),
          in_(std::move(in)),
          threads_(threads),
          ctx_(cpu::make_fit_context(plan_, in_, threads)) {}
    WorkerKind kind() const override { return WorkerKind::cpu; }
    std::string describe() const override {
        return "cpu, " + std::to_string(threads_) + " thread" + (threads_ == 1 ? "" : "s");
    }
    void run(const WorkUnit& unit, ReplicaBlock& out) override {
        cpu::fit_replicas(plan_, in_, unit.replicas.data(), static_cast<int>(unit.replicas.size()), threads_, out,
                          ctx_.get(), &tally_);
    }
    const KernelTally* kernel_tally() const override { return &tally_; }

   private:
    const FitPlan plan_;
    const FitInputs in_;  ///< views into the problem, which outlives the worker
    int threads_;
    std::shared_ptr<const cpu::FitContext> ctx_;
    KernelTally tally_;
};

}  // namespace

std::unique_ptr<Worker> make_worker(WorkerKind kind, const FitProblem& problem, const WorkerOptions& options) {
    FitPlan plan = make_fit_plan(problem);
    const bool cpu = kind == WorkerKind::cpu;
    // The CPU worker takes the Gram path's G as made here (once per node, or for itself alone).
    const GramBuild build{options.gram_share, options.gram_share ? options.gram_products : cpu, options.threads};
    FitInputs in = fit_inputs(problem, plan, build);
    if (cpu) return std::make_unique<CpuWorker>(std::move(plan), std::move(in), options.threads);
    // Asked for `gpu` (placement runs what cannot on the CPU when the kind was left to `auto`):
    // a plugin without GPU code, and correlated data of a model that is not table-linear
    // (whitened inside the CPU's LM only), are refused here.
    const auto* plugin = std::get_if<PluginModel>(&in.model);
    const bool cpu_only_plugin = plugin != nullptr && plugin->table->gpu == nullptr;
    if (in.data.white != nullptr)
        throw usage_error(problem.config.config_file + ": correlated uncertainties with model '" +
                          problem.config.model_name + "' are fitted by the CPU worker only (use --run.workers cpu)");
    // The GPU worker runs dis-mellin on the batched paths only: its qr path (a thread per
    // replica) is not built for dis-mellin, an instantiation too heavy for the device build.
    if (std::holds_alternative<DisMellinModel>(in.model) && !plan.batched())
        throw usage_error(problem.config.config_file +
                          ": dis-mellin on the GPU worker fits at most 16 free parameters (fix one, or use "
                          "--run.workers cpu)");
    if (cpu_only_plugin)
        throw usage_error(problem.config.where("model.plugin") + ": model plugin '" + plugin->table->name +
                          "' has no GPU code (run it with --run.workers cpu or auto)");
    return cuda::make_fit_worker(std::move(plan), std::move(in), options);
}

}  // namespace ef

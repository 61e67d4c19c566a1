// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ensemblefit/core/diagnostics.hpp>
#include <ensemblefit/core/replica_block.hpp>
#include <ensemblefit/worker/worker_kind.hpp>

namespace ef {

struct FitProblem;
class KernelTally;
class TableShare;

/// A unit of work: the replica numbers to fit (a contiguous range except after --resume).
struct WorkUnit {
    std::vector<std::int64_t> replicas;
};

struct WorkerOptions {
    int threads = 1;   ///< OpenMP threads (CPU worker)
    int device = 0;    ///< GPU ordinal (CUDA worker)
    Diagnostics diag;  ///< what the worker prints (EF_SETUP_TRACE, EF_GPU_STATS); the run sets it
    /// The Gram path's set-up (T^T, T^T W, f0 and the CPU's G) made once per node, each of its
    /// ranks a slice (src/comm/table_share.hpp); make_worker() is then collective over the
    /// node's ranks. Null: this worker makes its own.
    TableShare* gram_share = nullptr;
    /// With gram_share: G and packed T^T made on the host for the node (the same on every rank
    /// of the node: whether one of them fits on the CPU, as placement decided).
    bool gram_products = false;
};

/**
 * Executes work units on one device. The CPU worker runs OpenMP threads on the rank's cores,
 * the CUDA worker one GPU; both run the same single-source model and LM code, so the scheduler
 * never needs to know which it talks to. make_worker() is the only switch on backend.
 */
class Worker {
   public:
    virtual ~Worker() = default;
    virtual WorkerKind kind() const = 0;
    /// For the placement table: "cpu, 4 threads" or "gpu 0: NVIDIA H100".
    virtual std::string describe() const = 0;
    /// Fits every replica of `unit`; `out` is resized and filled in the unit's order.
    virtual void run(const WorkUnit& unit, ReplicaBlock& out) = 0;
    /// The time, counts and (GPU) device intervals of its phases of model work so far
    /// (kernels/core/kernel_tally.hpp), for /timing/kernels and the trace; null: none kept.
    virtual const KernelTally* kernel_tally() const { return nullptr; }
};

/**
 * The only switch on backend: makes the worker of the `kind` placement decided
 * (choose_device). Decides how `problem` is fitted once (the fit plan: path,
 * precision, dual width; src/fit/fit_plan.hpp) and makes the worker of `kind` that follows it.
 * `problem` must outlive the worker.
 */
std::unique_ptr<Worker> make_worker(WorkerKind kind, const FitProblem& problem,
                                    const WorkerOptions& options);

}  // namespace ef

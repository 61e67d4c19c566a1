// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/fit/replica_block.hpp>

namespace ef {

enum class WorkerKind { cpu, gpu };

const char* to_string(WorkerKind kind);

/// A unit of work: the replica numbers to fit (a contiguous range except after --resume).
struct WorkUnit {
    std::vector<std::int64_t> replicas;
};

struct WorkerOptions {
    int threads = 1;  ///< OpenMP threads (CPU worker)
    int device = 0;   ///< GPU ordinal (CUDA worker)
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
};

std::unique_ptr<Worker> make_worker(WorkerKind kind, const FitProblem& problem,
                                    const WorkerOptions& options);

/// Number of CUDA devices visible to this process (0 when built without CUDA or none found).
int cuda_device_count();
/// Name of device `ordinal` ("" when unavailable).
std::string cuda_device_name(int ordinal);

}  // namespace ef

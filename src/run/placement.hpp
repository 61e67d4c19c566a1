// SPDX-License-Identifier: MIT
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <ensemblefit/comm/mpi_context.hpp>
#include <ensemblefit/worker/worker_kind.hpp>

namespace ef {

/// OpenMP threads for a CPU rank and where that number came from.
struct ThreadPlan {
    int threads = 1;
    std::string source;   ///< "run.threads", "SLURM_CPUS_PER_TASK", "OMP_NUM_THREADS" or "cores/ranks"
    std::string warning;  ///< set when ranks x threads exceed this node's cores
};

/// `configured` if > 0, else SLURM_CPUS_PER_TASK, else OMP_NUM_THREADS, else cores / ranks on
/// this node.
ThreadPlan resolve_threads(int configured, int local_ranks);

/// The worker a rank runs and, for a GPU worker, its device.
struct DevicePlan {
    WorkerKind kind = WorkerKind::cpu;
    int device = 0;  ///< round-robin over the node's GPUs by node-local rank
};

/// `want` = auto | cpu | gpu: auto is a GPU worker when this rank sees a GPU, else a CPU one.
/// `gpu` without a GPU is left to the worker's constructor to refuse (one message per backend).
DevicePlan choose_device(const std::string& want, const MpiContext& ctx);

/**
 * The placement table: one row per rank ("rank\thost\tworker\tthreads", the form stored under
 * /timing and read back by `report`). Collective; the rows are on rank 0 only.
 */
std::vector<std::string> gather_placement(const MpiContext& ctx, const std::string& worker, int threads);
void print_placement(const std::vector<std::string>& rows, std::ostream& os);

}  // namespace ef

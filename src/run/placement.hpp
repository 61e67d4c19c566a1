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

/// `configured` if > 0, else SLURM_CPUS_PER_TASK, else OMP_NUM_THREADS, else this rank's cores
/// (after binding: a block of the node's cores), else cores / ranks on this node.
ThreadPlan resolve_threads(int configured, int local_ranks);

/// The worker a rank runs and, for a GPU worker, its device.
struct DevicePlan {
    WorkerKind kind = WorkerKind::cpu;
    int device = 0;  ///< round-robin over the node's GPUs by node-local rank
};

/**
 * The one decision of a rank's worker kind. `want` = auto | cpu | gpu (RunSettings::workers_of):
 * auto is a GPU worker when this rank sees a GPU and the problem can run there
 * (`gpu_capable`: a plugin without GPU code, correlated data of a model that is not
 * table-linear cannot), else a CPU one. `gpu` is a GPU worker whatever it sees: without a GPU,
 * or for a problem that cannot run there, the worker's maker refuses it (one message each).
 */
DevicePlan choose_device(const std::string& want, const MpiContext& ctx, bool gpu_capable = true);
/// The same from the node's GPU count and this rank's node-local rank (the rule, for tests).
DevicePlan choose_device(const std::string& want, int gpus, int local_rank, bool gpu_capable);

/**
 * `[run] bind = auto | none | cores`, applied before any OpenMP region (threads inherit the
 * main thread's cores). The CPUs a rank may use are its mask within its cgroup's cpuset and,
 * where Slurm says the job holds fewer of the node's CPUs than the mask shows (task/none), the
 * job's CPU_IDs on this node (allowed_cpus in placement.cpp). `auto`: when the ranks of a node
 * all got the same set (the launcher did not bind them), each node-local rank takes its own
 * contiguous block of it (a lone rank the whole set); a launcher's binding is kept. `cores`: the
 * blocks always, over the union of the node's sets. `none`: the launcher's masks as they are. With OpenMP's binding on (OMP_PROC_BIND,
 * OMP_PLACES), the launcher's mask is the union of OpenMP's places (OpenMP pinned the main thread
 * to the first one before main()), and a rebound rank's team threads are moved onto its block
 * too (OpenMP would place them by its places, the same cores for every rank). Collective over
 * the node's ranks. Returns how this rank's cores were decided ("launcher", "auto", "cores" or
 * "none"), followed by where the set came from when not the whole node (" of cgroup v2 cpuset
 * /path", " of Slurm job's CPU_IDs", " of affinity", " of Slurm's binding").
 */
std::string apply_binding(const MpiContext& ctx, const std::string& mode);

/// The CPUs this process may run on, as a list like "0-3,8".
std::string affinity_list();

/// The cpuset of this process's cgroup and where it was read ("cgroup v2 cpuset /path" from
/// cpuset.cpus.effective, or "cgroup v1 cpuset /path" from cpuset.effective_cpus); empty where
/// there is none. The files are parameters for tests.
struct CgroupCpus {
    std::vector<int> cpus;
    std::string source;
};
CgroupCpus cgroup_cpuset(const std::string& proc_cgroup = "/proc/self/cgroup", const std::string& root = "/sys/fs/cgroup");

/// The CPU_IDs of node `node` in `scontrol show job -d` output ("Nodes=n[1-2] CPU_IDs=0-3 ..."),
/// empty when the node is not listed.
std::vector<int> slurm_job_cpu_ids(const std::string& scontrol_text, const std::string& node);

/**
 * The placement table: one row per rank, "rank\thost\tworker\tthreads\tcores\tbinding\tgpu\tnode",
 * the form stored under /timing and read back by `report` (cores: those of every thread of a
 * team of `threads`, so a thread OpenMP placed elsewhere shows; binding: how the cores were decided
 * and OpenMP's proc_bind; gpu: "-" or "device (NUMA n)" with the cores' NUMA nodes; node:
 * MpiContext::node_index, so ranks are grouped by the node MPI found, not by host name). Collective;
 * the rows are on rank 0 only. `device` < 0 for a CPU worker.
 */
std::vector<std::string> gather_placement(const MpiContext& ctx, const std::string& worker, int threads,
                                          const std::string& binding = "launcher", int device = -1);
/// The table, then, where the rows span several nodes, one line counting the ranks of each:
/// "ranks per node (2 nodes): n1 2 (ranks 0-1), n2 2 (ranks 2-3)" (ranks_per_node).
void print_placement(const std::vector<std::string>& rows, std::ostream& os);
/// That line, or "" for rows of one node.
std::string ranks_per_node(const std::vector<std::string>& rows);

/// What is wrong with a placement, one line each naming the ranks: ranks of one host sharing
/// cores, more threads than cores, a GPU rank's cores on another NUMA node than its GPU.
std::vector<std::string> placement_warnings(const std::vector<std::string>& rows);

/// The part of placement_warnings() that says a run's ranks did not each have cores of their
/// own (ranks of one host sharing cores, more threads than a rank's cores): what makes a run's
/// time no measure of its core count (`report` marks such runs).
std::vector<std::string> placement_core_warnings(const std::vector<std::string>& rows);

}  // namespace ef

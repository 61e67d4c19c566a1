// SPDX-License-Identifier: MIT
#include "src/run/job_script.hpp"

#include <ensemblefit/core/error.hpp>

#include "src/run/environment.hpp"

namespace ef {

namespace {
const char* const kScripts[] = {"rank-per-core.sbatch", "rank-per-gpu.sbatch", "hybrid.sbatch"};

std::string base_name(const std::string& path) {
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string n(int v) { return std::to_string(v); }
}  // namespace

std::string job_script_refusal(const std::string& script, const JobShape& s) {
    const std::string name = base_name(script);
    bool known = false;
    for (const char* k : kScripts) known = known || name == k;
    if (!known) return name + ": not a jobs/ script with a stated rule (rank-per-core.sbatch, rank-per-gpu.sbatch, hybrid.sbatch)";
    const std::string it = name + ": ";
    if (s.tasks_per_node < 1 || s.cpus_per_task < 1) return it + "needs at least 1 task and 1 CPU per task";
    if (s.node_cpus > 0 && s.tasks_per_node * s.cpus_per_task > s.node_cpus)
        return it + n(s.tasks_per_node) + " task(s) x " + n(s.cpus_per_task) + " CPU(s) per task exceed the node's " +
               n(s.node_cpus) + " CPU(s)";
    if (s.gpus_per_node > s.node_gpus)
        return it + n(s.gpus_per_node) + " GPU(s) per node asked, the node has " + n(s.node_gpus);
    if (name == "rank-per-core.sbatch") {
        if (s.gpu_ranks > 0) return it + "runs CPU ranks only (GPU ranks: rank-per-gpu.sbatch or hybrid.sbatch)";
        return "";
    }
    if (s.gpus_per_node < 1) return it + "no GPUs in this allocation (--gpus-per-node)";
    if (name == "rank-per-gpu.sbatch") {
        if (s.tasks_per_node > s.gpus_per_node)
            return it + "gives each rank a GPU of its own: " + n(s.tasks_per_node) + " task(s) per node, " +
                   n(s.gpus_per_node) + " GPU(s) (ranks sharing a GPU: no jobs/ script, use mpirun in the job)";
        return "";
    }
    // hybrid.sbatch: its first G ranks of a node each drive GPU i (map_gpu:0..G-1), the others
    // are CPU ranks with the same --cpus-per-task.
    if (s.gpu_ranks > s.gpus_per_node)
        return it + "drives each GPU with one rank: " + n(s.gpu_ranks) + " GPU rank(s), " + n(s.gpus_per_node) +
               " GPU(s) (ranks sharing a GPU: no jobs/ script, use mpirun in the job)";
    if (s.gpu_ranks > s.tasks_per_node)
        return it + n(s.gpu_ranks) + " GPU rank(s) per node, but only " + n(s.tasks_per_node) + " task(s)";
    return "";
}

std::string job_script_options(const std::string& script, const JobShape& s) {
    const std::string name = base_name(script);
    std::string o = "--nodes=1 --ntasks-per-node=" + n(s.tasks_per_node) + " --cpus-per-task=" + n(s.cpus_per_task);
    if (name == "rank-per-gpu.sbatch") o += " --gpus-per-task=1";
    if (name == "hybrid.sbatch") o += " --gpus-per-node=" + n(s.gpus_per_node);
    return o;
}

JobShape job_shape_from_slurm(const std::string& script, int gpu_ranks) {
    const LauncherEnvironment& env = launcher_environment();
    if (env.slurm_cpus_on_node <= 0)
        throw usage_error("job-check: not inside a Slurm job (no SLURM_CPUS_ON_NODE); submit " + base_name(script) +
                          " with sbatch");
    JobShape s;
    s.tasks_per_node = env.slurm_tasks_per_node > 0 ? env.slurm_tasks_per_node : 1;
    s.cpus_per_task = env.slurm_cpus_per_task > 0 ? env.slurm_cpus_per_task : 1;
    s.node_cpus = env.slurm_cpus_on_node;
    s.gpus_per_node = s.node_gpus = env.slurm_gpus_on_node;
    const std::string name = base_name(script);
    if (name == "rank-per-gpu.sbatch") s.gpu_ranks = s.tasks_per_node;
    if (name == "hybrid.sbatch") s.gpu_ranks = gpu_ranks > 0 ? gpu_ranks : s.gpus_per_node;
    return s;
}

}  // namespace ef

// SPDX-License-Identifier: MIT
#pragma once

#include <string>

namespace ef {

/**
 * A Slurm job on one node: what an sbatch line asks for (advise) or what a running job holds
 * (the jobs/ scripts, through `ensemblefit job-check`), and the node it runs on.
 */
struct JobShape {
    int tasks_per_node = 1;
    int cpus_per_task = 1;
    int gpus_per_node = 0;  ///< GPUs the job holds on the node
    int gpu_ranks = 0;      ///< of the tasks, those that drive a GPU (the rest are CPU ranks)
    int node_cpus = 0;      ///< CPUs of the node (in a job: those it holds there)
    int node_gpus = 0;      ///< GPUs of the node (in a job: those it holds there)
};

/**
 * The one rule of what each jobs/ script runs: "" when `script` (its file name:
 * rank-per-core.sbatch, rank-per-gpu.sbatch, hybrid.sbatch) accepts `shape`, else why not, in
 * one line naming the script. advise prints only sbatch lines this accepts; each script asks it
 * (`ensemblefit job-check SCRIPT`) before its run, so neither can drift from the other.
 */
std::string job_script_refusal(const std::string& script, const JobShape& shape);

/// The sbatch options that give `shape` with `script`, every resource line of the script's own
/// #SBATCH defaults overridden (1 node, tasks, CPUs per task and, for the GPU scripts, GPUs).
std::string job_script_options(const std::string& script, const JobShape& shape);

/// This job's shape on this node, from Slurm's variables (SLURM_NTASKS_PER_NODE or
/// SLURM_TASKS_PER_NODE, SLURM_CPUS_PER_TASK, SLURM_CPUS_ON_NODE, SLURM_GPUS_ON_NODE); the GPU
/// ranks: every task for rank-per-gpu.sbatch, `gpu_ranks` for hybrid.sbatch (0: one per GPU).
/// Throws a usage error outside a job.
JobShape job_shape_from_slurm(const std::string& script, int gpu_ranks = 0);

}  // namespace ef

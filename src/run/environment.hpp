// SPDX-License-Identifier: MIT
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <ensemblefit/core/diagnostics.hpp>

namespace ef {

/**
 * Everything a run reads from its environment, in one place (src/run/environment.cpp is the
 * only file of the host program that calls getenv). The launcher's variables decide placement
 * and shards; the EF_* diagnostics only print (docs/architecture.md, "Environment variables").
 * Behaviour never depends on an EF_* variable: switches that change what runs are config keys.
 */
struct LauncherEnvironment {
    int slurm_cpus_per_task = 0;  ///< SLURM_CPUS_PER_TASK (0: unset or not a positive integer)
    int omp_num_threads = 0;      ///< OMP_NUM_THREADS (0: unset or not a positive integer)
    /// SLURM_ARRAY_TASK_ID, _COUNT and _MIN, when this process is a Slurm array task.
    std::optional<long> array_task_id, array_task_count, array_task_min;
    /// The Slurm allocation this process runs in (advise plans for it; 0: unset or not Slurm):
    /// SLURM_JOB_NUM_NODES, SLURM_NTASKS, SLURM_CPUS_ON_NODE, SLURM_GPUS_ON_NODE.
    int slurm_nodes = 0, slurm_ntasks = 0, slurm_cpus_on_node = 0, slurm_gpus_on_node = 0;
    /// Tasks of the job on this node: SLURM_NTASKS_PER_NODE, else this node's entry of
    /// SLURM_TASKS_PER_NODE ("2(x3),1"; the node: SLURM_NODEID). 0: not known.
    int slurm_tasks_per_node = 0;
    /// CPUs the job holds on this node (this node's entry of SLURM_JOB_CPUS_PER_NODE; 0: not known),
    /// the job's id (SLURM_JOB_ID, empty outside Slurm), this node's name (SLURMD_NODENAME) and
    /// how Slurm bound the task (SLURM_CPU_BIND_TYPE, e.g. "mask_cpu:", "none"; empty: unset).
    int slurm_job_cpus_on_node = 0;
    std::string slurm_job_id, slurmd_nodename, slurm_cpu_bind_type;
};

/// Entry `node` of a Slurm per-node list such as SLURM_TASKS_PER_NODE ("2(x3),1": 2, 2, 2, 1);
/// 0 when the text is malformed or has no such entry.
int slurm_per_node_value(const std::string& text, int node);

/// The launcher's variables of this process, read on first call.
const LauncherEnvironment& launcher_environment();

/// The program's command line as typed (arguments with blanks quoted), for run records;
/// main() records it once before anything else.
void record_command_line(int argc, char** argv);
const std::string& command_line();
/// The same command line as the program's argv, one token each (for the resume command).
const std::vector<std::string>& command_args();

/**
 * Before MPI_Init: a process started without a launcher (no mpirun, srun, PMI or PMIx
 * variables) becomes an MPI singleton, one rank that talks to nobody. Open MPI 4 would start an
 * `orted` daemon for it (for MPI_Comm_spawn, which ensemblefit never calls) and initialise UCX
 * (for networks it will not use): about 0.7 s of the 1.0 s that `ensemblefit --version` took on
 * a 2-core VM. This sets OMPI_MCA_ess_singleton_isolated=1, OMPI_MCA_pml=ob1, OMPI_MCA_btl=self
 * and OMPI_MCA_osc=^ucx for such a process, each only where the user has not set it; it changes
 * nothing under a launcher nor for other MPI libraries (they ignore OMPI_ variables).
 */
void prepare_mpi_singleton();

/// The environment as the process started (main() records it before prepare_mpi_singleton and
/// MPI_Init add their variables), "NAME=value" each; and whether a launcher started it.
const std::vector<std::string>& start_environment();
bool started_by_launcher();

/// The user's cache folder: $XDG_CACHE_HOME when absolute, else $HOME/.cache; empty when
/// neither is set (formulas compiled at run time are cached under it).
std::string user_cache_home();

/// The current UTC time as ISO 8601 ("2026-11-24T02:10:00Z"), for run records.
std::string utc_timestamp();

}  // namespace ef

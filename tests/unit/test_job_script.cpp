// SPDX-License-Identifier: MIT
// The jobs/ scripts' rule (advise prints only what it accepts, the scripts ask it at run time):
// the two frictions of issue 40 (hybrid.sbatch without GPUs, rank-per-core.sbatch's 32 tasks on
// a smaller node) and the per-node Slurm lists it reads.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "src/run/environment.hpp"
#include "src/run/job_script.hpp"
#include "src/run/placement.hpp"

namespace {
ef::JobShape shape(int tasks, int cpus, int gpus, int gpu_ranks, int node_cpus, int node_gpus) {
    ef::JobShape s;
    s.tasks_per_node = tasks;
    s.cpus_per_task = cpus;
    s.gpus_per_node = gpus;
    s.gpu_ranks = gpu_ranks;
    s.node_cpus = node_cpus;
    s.node_gpus = node_gpus;
    return s;
}
}  // namespace

TEST_CASE("hybrid.sbatch needs GPUs, one rank per GPU, the tasks on the node's CPUs", "[jobs]") {
    CHECK(ef::job_script_refusal("hybrid.sbatch", shape(4, 1, 0, 0, 4, 0)) ==
          "hybrid.sbatch: no GPUs in this allocation (--gpus-per-node)");
    CHECK(ef::job_script_refusal("jobs/hybrid.sbatch", shape(4, 1, 1, 1, 4, 1)).empty());
    CHECK(ef::job_script_refusal("hybrid.sbatch", shape(4, 1, 1, 2, 4, 1)).find("one rank") != std::string::npos);
    CHECK(ef::job_script_refusal("hybrid.sbatch", shape(8, 8, 4, 4, 32, 4)).find("exceed the node's 32") !=
          std::string::npos);
    CHECK(ef::job_script_refusal("hybrid.sbatch", shape(4, 1, 4, 4, 4, 2)).find("the node has 2") != std::string::npos);
}

TEST_CASE("rank-per-core.sbatch: CPU ranks that fit the node; its options override the script's 32 tasks", "[jobs]") {
    CHECK(ef::job_script_refusal("rank-per-core.sbatch", shape(2, 1, 0, 0, 2, 0)).empty());
    CHECK(ef::job_script_refusal("rank-per-core.sbatch", shape(32, 1, 0, 0, 2, 0)) ==
          "rank-per-core.sbatch: 32 task(s) x 1 CPU(s) per task exceed the node's 2 CPU(s)");
    CHECK(ef::job_script_refusal("rank-per-core.sbatch", shape(1, 2, 1, 1, 2, 1)).find("CPU ranks only") !=
          std::string::npos);
    CHECK(ef::job_script_options("rank-per-core.sbatch", shape(2, 1, 0, 0, 2, 0)) ==
          "--nodes=1 --ntasks-per-node=2 --cpus-per-task=1");
    CHECK(ef::job_script_options("hybrid.sbatch", shape(4, 1, 1, 1, 4, 1)) ==
          "--nodes=1 --ntasks-per-node=4 --cpus-per-task=1 --gpus-per-node=1");
    CHECK(ef::job_script_refusal("array.sbatch", shape(1, 1, 0, 0, 2, 0)).find("not a jobs/ script") != std::string::npos);
}

TEST_CASE("rank-per-gpu.sbatch gives each rank its own GPU", "[jobs]") {
    CHECK(ef::job_script_refusal("rank-per-gpu.sbatch", shape(2, 4, 2, 2, 8, 2)).empty());
    CHECK(ef::job_script_refusal("rank-per-gpu.sbatch", shape(4, 2, 2, 4, 8, 2)).find("a GPU of its own") !=
          std::string::npos);
    CHECK(ef::job_script_options("rank-per-gpu.sbatch", shape(2, 4, 2, 2, 8, 2)) ==
          "--nodes=1 --ntasks-per-node=2 --cpus-per-task=4 --gpus-per-task=1");
}

TEST_CASE("Slurm's per-node lists: 2(x3),1", "[jobs]") {
    CHECK(ef::slurm_per_node_value("2(x3),1", 0) == 2);
    CHECK(ef::slurm_per_node_value("2(x3),1", 2) == 2);
    CHECK(ef::slurm_per_node_value("2(x3),1", 3) == 1);
    CHECK(ef::slurm_per_node_value("2(x3),1", 4) == 0);
    CHECK(ef::slurm_per_node_value("4", 0) == 4);
    CHECK(ef::slurm_per_node_value("x", 0) == 0);
    CHECK(ef::slurm_per_node_value("2(x3", 0) == 0);
}

TEST_CASE("the cores a job holds: a cgroup's cpuset (v1, v2) and Slurm's CPU_IDs for this node", "[placement]") {
    const std::string dir = "test_job_script_cgroup";
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir + "/cg/cpuset/slurm/job_7");
    std::filesystem::create_directories(dir + "/cg/unified/user/app");
    std::ofstream(dir + "/v1") << "12:memory:/m\n4:cpu,cpuset:/slurm/job_7\n0::/user/app\n";
    std::ofstream(dir + "/cg/cpuset/slurm/job_7/cpuset.effective_cpus") << "2-3,6\n";
    std::ofstream(dir + "/v2") << "0::/user/app\n";
    std::ofstream(dir + "/cg/unified/user/app/cpuset.cpus.effective") << "0-1\n";
    std::ofstream(dir + "/none") << "0::/other\n";

    const ef::CgroupCpus v1 = ef::cgroup_cpuset(dir + "/v1", dir + "/cg");
    const ef::CgroupCpus v2 = ef::cgroup_cpuset(dir + "/v2", dir + "/cg");
    const ef::CgroupCpus none = ef::cgroup_cpuset(dir + "/none", dir + "/cg");

    CHECK(v1.cpus == std::vector<int>{2, 3, 6});
    CHECK(v1.source == "cgroup v1 cpuset /slurm/job_7");
    CHECK(v2.cpus == std::vector<int>{0, 1});
    CHECK(v2.source == "cgroup v2 cpuset /user/app");
    CHECK(none.cpus.empty());
    std::filesystem::remove_all(dir);

    const std::string job = "JobId=7 JobName=x\n   Nodes=vm CPU_IDs=0-1 Mem=100 GRES=\n"
                            "   Nodes=node[02-03,7] CPU_IDs=4,6 Mem=100 GRES=\n";
    CHECK(ef::slurm_job_cpu_ids(job, "vm") == std::vector<int>{0, 1});
    CHECK(ef::slurm_job_cpu_ids(job, "node03") == std::vector<int>{4, 6});
    CHECK(ef::slurm_job_cpu_ids(job, "node7") == std::vector<int>{4, 6});
    CHECK(ef::slurm_job_cpu_ids(job, "node04").empty());
    CHECK(ef::slurm_job_cpu_ids(job, "v").empty());
}

// SPDX-License-Identifier: MIT
// `ensemblefit job-check SCRIPT`: whether this Slurm job suits a jobs/ script, by the rule advise
// prints its sbatch lines with (src/run/job_script.*). The scripts call it before their run.
#include <cstdio>

#include <ensemblefit/core/error.hpp>

#include "src/cli/commands.hpp"
#include "src/run/job_script.hpp"
#include "src/run/run_args.hpp"

namespace ef {
namespace {

int job_check(const std::vector<std::string>& args) {
    if (args.empty() || args[0] == "-h" || args[0] == "--help") {
        std::printf("usage: ensemblefit job-check SCRIPT [--gpu-ranks N]\n\n"
                        "Inside a Slurm job: exits 0 when the job's allocation on this node suits the jobs/\n"
                        "script SCRIPT (rank-per-core.sbatch, rank-per-gpu.sbatch, hybrid.sbatch), else prints\n"
                        "why in one line and exits 2. The rule is the one `advise` checks its sbatch lines by.\n"
                        "  --gpu-ranks N   hybrid.sbatch: ranks per node that drive a GPU (default: the GPUs)\n");
        if (args.empty()) throw usage_error("job-check: no script named");
        return 0;
    }
    int gpu_ranks = 0;
    for (size_t i = 1; i < args.size(); ++i) {
        if (args[i] == "--gpu-ranks" && i + 1 < args.size()) {
            const double v = parse_number_arg("--gpu-ranks", args[++i]);
            if (v < 0 || v > 4096 || v != static_cast<int>(v)) throw usage_error("--gpu-ranks: expected a whole number 0..4096");
            gpu_ranks = static_cast<int>(v);
        } else {
            throw usage_error("job-check: unknown argument '" + args[i] + "' (usage: job-check SCRIPT [--gpu-ranks N])");
        }
    }
    const JobShape s = job_shape_from_slurm(args[0], gpu_ranks);
    const std::string why = job_script_refusal(args[0], s);
    if (!why.empty()) throw usage_error(why);
    std::printf("job-check: %s: %d task(s) x %d CPU(s), %d GPU rank(s), %d GPU(s) on a node of %d CPU(s): accepted\n",
                    args[0].c_str(), s.tasks_per_node, s.cpus_per_task, s.gpu_ranks, s.gpus_per_node, s.node_cpus);
    return 0;
}

/// Listed with the other commands; main() runs it before MPI_Init (run_job_check_without_mpi).
const CommandRegistrar reg("job-check", "SCRIPT: whether this Slurm job suits a jobs/ script (the scripts ask it)",
                           [](const std::vector<std::string>& args, const MpiContext&) { return job_check(args); });

}  // namespace

int run_job_check_without_mpi(const std::vector<std::string>& args) {
    try {
        return job_check(args);
    } catch (const Error& e) {
        std::fprintf(stderr, "ensemblefit: error: %s\n", e.what());
        return static_cast<int>(e.code());
    }
}

}  // namespace ef

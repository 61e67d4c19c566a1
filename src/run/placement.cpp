// SPDX-License-Identifier: MIT
#include "src/run/placement.hpp"

#include <algorithm>
#include <sstream>
#include <thread>

#include "src/core/text.hpp"
#include "src/run/environment.hpp"

namespace ef {

ThreadPlan resolve_threads(int configured, int local_ranks) {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const LauncherEnvironment& env = launcher_environment();
    ThreadPlan plan;
    if (configured > 0) {
        plan.threads = configured;
        plan.source = "run.threads";
    } else if (env.slurm_cpus_per_task > 0) {
        plan.threads = env.slurm_cpus_per_task;
        plan.source = "SLURM_CPUS_PER_TASK";
    } else if (env.omp_num_threads > 0) {
        plan.threads = env.omp_num_threads;
        plan.source = "OMP_NUM_THREADS";
    } else {
        plan.threads = std::max(1, cores / std::max(1, local_ranks));
        plan.source = "cores/ranks";
    }
    if (static_cast<long>(plan.threads) * local_ranks > cores) {
        plan.warning = "oversubscribed: " + std::to_string(local_ranks) + " rank(s) x " +
                       std::to_string(plan.threads) + " thread(s) on " + std::to_string(cores) +
                       " core(s) of this node";
    }
    return plan;
}

DevicePlan choose_device(const std::string& want, const MpiContext& ctx) {
    const int ndev = cuda_device_count();
    DevicePlan plan;
    if (want == "gpu" || (want == "auto" && ndev > 0)) plan.kind = WorkerKind::gpu;
    plan.device = ndev > 0 ? ctx.local_rank() % ndev : 0;
    return plan;
}

std::vector<std::string> gather_placement(const MpiContext& ctx, const std::string& worker, int threads) {
    std::ostringstream me;
    me << ctx.rank() << "\t" << ctx.host() << "\t" << worker << "\t" << threads;
    return ctx.gather(me.str());
}

void print_placement(const std::vector<std::string>& rows, std::ostream& os) {
    os << "placement:\n  " << pad("rank", 6) << pad("host", 20) << pad("worker", 24) << "threads\n";
    for (const auto& r : rows) {
        std::stringstream ss(r);
        std::string rank, host, worker, threads;
        std::getline(ss, rank, '\t');
        std::getline(ss, host, '\t');
        std::getline(ss, worker, '\t');
        std::getline(ss, threads, '\t');
        os << "  " << pad(rank, 6) << pad(host, 20) << pad(worker, 24) << threads << "\n";
    }
    os.flush();
}

}  // namespace ef

// SPDX-License-Identifier: MIT
// The one file of the host program that reads environment variables (docs/architecture.md,
// "Environment variables").
#include "src/run/environment.hpp"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <ctime>
#include <string>

#include <unistd.h>

namespace ef {

namespace {

/// A variable's value as a whole number, or nothing when unset, empty or not a number.
std::optional<long> env_long(const char* name) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return std::nullopt;
    char* end = nullptr;
    errno = 0;
    const long n = std::strtol(v, &end, 10);
    if (*end != '\0' || errno == ERANGE) return std::nullopt;
    return n;
}

int env_positive_int(const char* name) {
    const std::optional<long> n = env_long(name);
    return n && *n > 0 && *n <= INT_MAX ? static_cast<int>(*n) : 0;
}

bool env_flag(const char* name) { return std::getenv(name) != nullptr; }

bool env_is_one(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && v[0] == '1';
}

}  // namespace

int slurm_per_node_value(const std::string& text, int node) {
    size_t at = 0;
    while (at < text.size()) {
        size_t used = 0;
        int value = 0, times = 1;
        try {
            value = std::stoi(text.substr(at), &used);
            at += used;
            if (text.compare(at, 2, "(x") == 0) {
                times = std::stoi(text.substr(at + 2), &used);
                at += 2 + used;
                if (at >= text.size() || text[at] != ')') return 0;
                ++at;
            }
        } catch (const std::exception&) {
            return 0;
        }
        if (value < 0 || times < 1) return 0;
        if (node < times) return value;
        node -= times;
        if (at < text.size() && text[at] != ',') return 0;
        ++at;
    }
    return 0;
}

const LauncherEnvironment& launcher_environment() {
    static const LauncherEnvironment env = [] {
        LauncherEnvironment e;
        e.slurm_cpus_per_task = env_positive_int("SLURM_CPUS_PER_TASK");
        e.omp_num_threads = env_positive_int("OMP_NUM_THREADS");
        e.array_task_id = env_long("SLURM_ARRAY_TASK_ID");
        e.array_task_count = env_long("SLURM_ARRAY_TASK_COUNT");
        e.array_task_min = env_long("SLURM_ARRAY_TASK_MIN");
        e.slurm_nodes = env_positive_int("SLURM_JOB_NUM_NODES");
        e.slurm_ntasks = env_positive_int("SLURM_NTASKS");
        e.slurm_cpus_on_node = env_positive_int("SLURM_CPUS_ON_NODE");
        e.slurm_gpus_on_node = env_positive_int("SLURM_GPUS_ON_NODE");
        const std::optional<long> node = env_long("SLURM_NODEID");
        const int id = node && *node >= 0 && *node < INT_MAX ? static_cast<int>(*node) : 0;
        auto text = [](const char* name) { const char* v = std::getenv(name); return std::string(v ? v : ""); };
        e.slurm_tasks_per_node = env_positive_int("SLURM_NTASKS_PER_NODE");
        if (e.slurm_tasks_per_node == 0) e.slurm_tasks_per_node = slurm_per_node_value(text("SLURM_TASKS_PER_NODE"), id);
        e.slurm_job_cpus_on_node = slurm_per_node_value(text("SLURM_JOB_CPUS_PER_NODE"), id);
        e.slurm_job_id = text("SLURM_JOB_ID");
        e.slurmd_nodename = text("SLURMD_NODENAME");
        e.slurm_cpu_bind_type = text("SLURM_CPU_BIND_TYPE");
        return e;
    }();
    return env;
}

namespace {
// Open MPI's mpirun, PMIx (srun --mpi=pmix, prterun), PMI (MPICH's hydra, srun --mpi=pmi2),
// a Slurm step or an Open MPI daemon: launched, so the launcher's choices stand.
constexpr const char* kLauncherVariables[] = {"OMPI_COMM_WORLD_SIZE", "OMPI_MCA_orte_hnp_uri", "PMIX_RANK", "PMI_RANK",
                                              "PMI_SIZE", "PMI_FD", "SLURM_STEP_ID"};
struct StartEnvironment {
    std::vector<std::string> vars;
    bool launched = false;
};
StartEnvironment& start_env() {
    static StartEnvironment e = [] {
        StartEnvironment x;
        for (char** v = environ; v != nullptr && *v != nullptr; ++v) x.vars.emplace_back(*v);
        for (const char* name : kLauncherVariables) x.launched = x.launched || std::getenv(name) != nullptr;
        return x;
    }();
    return e;
}
}  // namespace

const std::vector<std::string>& start_environment() { return start_env().vars; }
bool started_by_launcher() { return start_env().launched; }

void prepare_mpi_singleton() {
    if (started_by_launcher()) return;  // also records the environment before the variables below
    setenv("OMPI_MCA_ess_singleton_isolated", "1", 0);  // 0: never over a value the user set
    setenv("OMPI_MCA_pml", "ob1", 0);
    setenv("OMPI_MCA_btl", "self", 0);
    setenv("OMPI_MCA_osc", "^ucx", 0);
}

std::string user_cache_home() {
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    if (xdg != nullptr && xdg[0] == '/') return xdg;
    const char* home = std::getenv("HOME");
    if (home != nullptr && home[0] != '\0') return std::string(home) + "/.cache";
    return "";
}

const Diagnostics& diagnostics() {
    static const Diagnostics d = [] {
        Diagnostics x;
        x.setup_trace = env_flag("EF_SETUP_TRACE");
        x.gpu_stats = env_flag("EF_GPU_STATS");
        x.recon_comm_trace = env_is_one("EF_RECON_COMM_TRACE");
        x.recon_peer_trace = env_is_one("EF_RECON_PEER_TRACE");
        x.recon_phases = env_is_one("EF_RECON_PHASES");
        return x;
    }();
    return d;
}

namespace {
std::string& stored_command_line() {
    static std::string line;
    return line;
}
std::vector<std::string>& stored_command_args() {
    static std::vector<std::string> args;
    return args;
}
}  // namespace

void record_command_line(int argc, char** argv) {
    std::string line;
    for (int i = 0; i < argc; ++i) {
        const std::string a = argv[i];
        if (i > 0) line += ' ';
        line += a.find_first_of(" \t'\"") == std::string::npos && !a.empty() ? a : "'" + a + "'";
    }
    stored_command_line() = line;
    stored_command_args().assign(argv, argv + argc);
}

const std::string& command_line() { return stored_command_line(); }

const std::vector<std::string>& command_args() { return stored_command_args(); }

std::string utc_timestamp() {
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

}  // namespace ef

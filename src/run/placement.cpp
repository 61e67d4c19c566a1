// SPDX-License-Identifier: MIT
#include "src/run/placement.hpp"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <ensemblefit/core/error.hpp>

#include "src/core/text.hpp"
#include "src/core/thread_name.hpp"
#include "src/run/environment.hpp"

namespace ef {

namespace {

using CpuList = std::vector<int>;

CpuList current_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    CpuList cpus;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) cpus.push_back(c);
    return cpus;
}

std::string format_cpus(const CpuList& cpus) {
    std::string out;
    for (size_t i = 0; i < cpus.size();) {
        size_t j = i;
        while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
        out += (out.empty() ? "" : ",") + std::to_string(cpus[i]) + (j > i ? "-" + std::to_string(cpus[j]) : "");
        i = j + 1;
    }
    return out.empty() ? "?" : out;
}

/// "0-3,8" back to {0, 1, 2, 3, 8} (the form Linux uses in /sys too).
CpuList parse_cpus(const std::string& text) {
    CpuList cpus;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
        const auto dash = item.find('-');
        try {
            const int a = std::stoi(item.substr(0, dash));
            const int b = dash == std::string::npos ? a : std::stoi(item.substr(dash + 1));
            for (int c = a; c <= b; ++c) cpus.push_back(c);
        } catch (const std::exception&) {
            return {};
        }
    }
    return cpus;
}

/// Every node-local rank's mask, as CPU_SETSIZE flags each.
std::vector<CpuList> node_masks(const MpiContext& ctx, const CpuList& mine) {
    std::vector<char> flags(CPU_SETSIZE, 0), all(static_cast<size_t>(CPU_SETSIZE) * ctx.local_size());
    for (int c : mine) flags[static_cast<size_t>(c)] = 1;
    EF_MPI_CHECK(MPI_Allgather(flags.data(), CPU_SETSIZE, MPI_CHAR, all.data(), CPU_SETSIZE, MPI_CHAR, ctx.node()));
    std::vector<CpuList> masks(static_cast<size_t>(ctx.local_size()));
    for (size_t r = 0; r < masks.size(); ++r)
        for (int c = 0; c < CPU_SETSIZE; ++c)
            if (all[r * CPU_SETSIZE + static_cast<size_t>(c)]) masks[r].push_back(c);
    return masks;
}

/// Node-local rank `i` of `n`: its contiguous block of `cpus` (a shared CPU when there are
/// more ranks than CPUs; the placement warnings say so).
CpuList block_of(const CpuList& cpus, int i, int n) {
    if (cpus.empty()) return {};
    const size_t m = cpus.size();
    if (static_cast<size_t>(n) > m) return {cpus[static_cast<size_t>(i) % m]};
    return CpuList(cpus.begin() + static_cast<std::ptrdiff_t>(m * static_cast<size_t>(i) / static_cast<size_t>(n)),
                   cpus.begin() + static_cast<std::ptrdiff_t>(m * static_cast<size_t>(i + 1) / static_cast<size_t>(n)));
}

void set_cpus(const CpuList& cpus) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : cpus) CPU_SET(c, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        throw runtime_error("run.bind: sched_setaffinity to cores " + format_cpus(cpus) + " failed");
}

bool omp_binds() { return omp_get_proc_bind() != omp_proc_bind_false && omp_get_num_places() > 0; }

/**
 * The CPUs the launcher gave this process. OpenMP's binding (OMP_PROC_BIND, OMP_PLACES) pins
 * the initial thread to its first place before main() runs, so the mask read now would be that
 * one core (the same core 0 for every rank a launcher left unbound): with binding on, the mask
 * is the union of OpenMP's places, which libgomp cut from the process's mask at start.
 */
CpuList launcher_cpus() {
    if (!omp_binds()) return current_cpus();
    std::set<int> all;
    for (int p = 0; p < omp_get_num_places(); ++p) {
        std::vector<int> ids(static_cast<size_t>(std::max(0, omp_get_place_num_procs(p))));
        if (!ids.empty()) omp_get_place_proc_ids(p, ids.data());
        all.insert(ids.begin(), ids.end());
    }
    return all.empty() ? current_cpus() : CpuList(all.begin(), all.end());
}

/**
 * With OpenMP's binding on, a team's threads are placed by OpenMP's places (the whole launcher
 * mask), not by the main thread's mask: two ranks of one mask would both put their threads on
 * places 0, 1, ... So each thread of a team of `threads` is moved onto the rank's own cores here,
 * once; libgomp keeps a pool thread's mask when it reuses the thread for the next (not larger)
 * teams. A larger team's new threads land on OpenMP's places again, which the placement table
 * (every thread's mask) and its warning then show.
 */
void pin_openmp_team(const CpuList& cpus, int threads) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : cpus) CPU_SET(c, &set);
    int failed = 0;
#pragma omp parallel num_threads(threads) reduction(+ : failed)
    failed += sched_setaffinity(0, sizeof set, &set) != 0 ? 1 : 0;
    if (failed > 0) throw runtime_error("run.bind: sched_setaffinity of OpenMP threads to cores " + format_cpus(cpus) + " failed");
}

/// Names the OpenMP pool threads of a team of `threads` ef-omp-1, ef-omp-2, ... (top -H, perf).
/// Thread 0 is the main thread: it keeps the process's name (ps, pgrep). The team is the one
/// team_cpus() makes next, of the same size, so no thread is made or placed otherwise than before.
void name_openmp_team(int threads) {
#pragma omp parallel num_threads(std::max(1, threads))
    if (omp_get_thread_num() > 0) name_this_thread("ef-omp-" + std::to_string(omp_get_thread_num()));
}

/// Every CPU some thread of a team of `threads` may run on (each thread's own mask, as
/// /proc/self/task/TID/status Cpus_allowed_list has it).
CpuList team_cpus(int threads) {
    std::set<int> all;
#pragma omp parallel num_threads(std::max(1, threads))
    {
        const CpuList mine = current_cpus();
#pragma omp critical(ef_team_cpus)
        all.insert(mine.begin(), mine.end());
    }
    return CpuList(all.begin(), all.end());
}

const char* omp_binding() {
    switch (omp_get_proc_bind()) {
        case omp_proc_bind_false: return "free";
        case omp_proc_bind_true: return "omp-bound";
        case omp_proc_bind_master: return "omp-master";
        case omp_proc_bind_close: return "omp-close";
        case omp_proc_bind_spread: return "omp-spread";
    }
    return "?";
}

std::string read_line(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return trim(line);
}

/// NUMA node of each CPU, from /sys (empty where the kernel does not say).
std::map<int, int> cpu_numa_nodes() {
    std::map<int, int> node_of;
    for (int n = 0; n < 64; ++n) {
        const std::string list = read_line("/sys/devices/system/node/node" + std::to_string(n) + "/cpulist");
        if (list.empty()) continue;
        for (int c : parse_cpus(list)) node_of[c] = n;
    }
    return node_of;
}

/// "0 (NUMA 1, cores on NUMA 0)" for a GPU rank: its device and the NUMA nodes involved.
std::string gpu_column(int device, const CpuList& cpus) {
    if (device < 0) return "-";
    std::string bus = cuda_device_pci_bus_id(device);
    std::transform(bus.begin(), bus.end(), bus.begin(), [](unsigned char c) { return std::tolower(c); });
    const std::string numa = bus.empty() ? "" : read_line("/sys/bus/pci/devices/" + bus + "/numa_node");
    const std::map<int, int> node_of = cpu_numa_nodes();
    std::set<int> nodes;
    for (int c : cpus)
        if (node_of.count(c)) nodes.insert(node_of.at(c));
    std::string cores;
    for (int n : nodes) cores += (cores.empty() ? "" : ",") + std::to_string(n);
    return std::to_string(device) + " (NUMA " + (numa.empty() || numa == "-1" ? "?" : numa) + ", cores on NUMA " +
           (cores.empty() ? "?" : cores) + ")";
}

std::vector<std::string> split_tabs(const std::string& row) {
    std::vector<std::string> cols;
    std::stringstream ss(row);
    std::string c;
    while (std::getline(ss, c, '\t')) cols.push_back(c);
    cols.resize(8, "");
    return cols;
}

}  // namespace

std::string affinity_list() { return format_cpus(current_cpus()); }

namespace {

CpuList intersect(const CpuList& a, const CpuList& b) {
    CpuList out;
    std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
    return out;
}

/// The CPUs Linux has online ("0-3", /sys/devices/system/cpu/online).
CpuList online_cpus() { return parse_cpus(read_line("/sys/devices/system/cpu/online")); }

}  // namespace

CgroupCpus cgroup_cpuset(const std::string& proc_cgroup, const std::string& root) {
    std::ifstream in(proc_cgroup);
    std::string line, v2_path, v1_path;
    while (std::getline(in, line)) {  // "0::/path" (v2), "3:cpuset:/path" or "3:cpu,cpuset:/path" (v1)
        const auto a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
        if (b == std::string::npos) continue;
        const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
        if (line.compare(0, a, "0") == 0 && controllers.empty()) v2_path = path;
        std::stringstream ss(controllers);
        std::string c;
        while (std::getline(ss, c, ','))
            if (c == "cpuset") v1_path = path;
    }
    CgroupCpus out;
    if (!v1_path.empty()) {  // a v1 cpuset hierarchy holds the controller (v2 then has none)
        for (const char* file : {"cpuset.effective_cpus", "cpuset.cpus"}) {
            const std::string text = read_line(root + "/cpuset" + v1_path + "/" + file);
            if (text.empty()) continue;
            out.cpus = parse_cpus(text);
            out.source = "cgroup v1 cpuset " + v1_path;
            return out;
        }
    }
    if (v2_path.empty()) return out;
    for (const std::string& mount : {root, root + "/unified"}) {
        const std::string text = read_line(mount + v2_path + "/cpuset.cpus.effective");
        if (text.empty()) continue;
        out.cpus = parse_cpus(text);
        out.source = "cgroup v2 cpuset " + v2_path;
        return out;
    }
    return out;
}

namespace {

/// "vm", "node[01-03,7]" -> whether `name` is one of them (Slurm's host lists, one bracket).
bool in_host_list(const std::string& list, const std::string& name) {
    int depth = 0;
    size_t start = 0;
    for (size_t i = 0; i <= list.size(); ++i) {  // split at commas outside brackets
        if (i < list.size() && list[i] == '[') ++depth;
        if (i < list.size() && list[i] == ']') --depth;
        if (i < list.size() && (list[i] != ',' || depth > 0)) continue;
        const std::string item = list.substr(start, i - start);
        start = i + 1;
        const auto lb = item.find('['), rb = item.find(']');
        if (lb == std::string::npos || rb == std::string::npos) {
            if (item == name) return true;
            continue;
        }
        const std::string prefix = item.substr(0, lb), suffix = item.substr(rb + 1);
        if (name.compare(0, prefix.size(), prefix) != 0 || name.size() < prefix.size() + suffix.size() ||
            name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
            continue;
        const std::string mid = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
        std::stringstream ss(item.substr(lb + 1, rb - lb - 1));
        std::string range;
        while (std::getline(ss, range, ',')) {
            const auto dash = range.find('-');
            const std::string lo = range.substr(0, dash), hi = dash == std::string::npos ? lo : range.substr(dash + 1);
            if (mid.size() == lo.size() && mid >= lo && mid <= hi) return true;
        }
    }
    return false;
}

}  // namespace

CpuList slurm_job_cpu_ids(const std::string& scontrol_text, const std::string& node) {
    std::istringstream in(scontrol_text);
    std::string word;
    std::string nodes;
    while (in >> word) {  // "... Nodes=vm CPU_IDs=0-1 Mem=100 ..." per node group
        if (word.rfind("Nodes=", 0) == 0) nodes = word.substr(6);
        if (word.rfind("CPU_IDs=", 0) == 0 && in_host_list(nodes, node)) return parse_cpus(word.substr(8));
    }
    return {};
}

namespace {

/// `scontrol show job -d ID`'s output (empty when it cannot be run).
std::string run_scontrol(const std::string& job) {
    for (char c : job)
        if (!std::isdigit(static_cast<unsigned char>(c)) && c != '_') return "";
    std::string out;
    if (std::FILE* p = ::popen(("scontrol show job -d " + job + " 2>/dev/null").c_str(), "r")) {
        char buf[4096];
        size_t n = 0;
        while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
        ::pclose(p);
    }
    return out;
}

/**
 * The CPUs this rank may use and where that set came from: the launcher's mask, within the
 * cgroup's cpuset where the node has one, and, where Slurm says the job holds fewer CPUs on this
 * node than the mask has (TaskPlugin=task/none: every job sees the whole node), the CPU_IDs
 * `scontrol show job -d` gives for this node (asked by the node's first rank only). Collective
 * over the node's ranks. `note`: why the set may still hold other jobs' CPUs.
 */
struct AllowedCpus {
    CpuList cpus;
    std::string source;
    std::string note;
};

AllowedCpus allowed_cpus(const MpiContext& ctx) {
    AllowedCpus a;
    a.cpus = launcher_cpus();
    const CpuList online = online_cpus();
    const LauncherEnvironment& env = launcher_environment();
    if (!online.empty() && a.cpus.size() < online.size())
        a.source = !env.slurm_cpu_bind_type.empty() && env.slurm_cpu_bind_type.find("none") == std::string::npos
                       ? "Slurm's binding"
                       : "affinity";
    const CgroupCpus cg = cgroup_cpuset();
    if (!cg.cpus.empty()) {
        const CpuList x = intersect(a.cpus, cg.cpus);
        if (!x.empty() && (online.empty() || cg.cpus.size() < online.size()) && x.size() <= a.cpus.size()) {
            if (x.size() < a.cpus.size() || a.source.empty() || a.source == "affinity") a.source = cg.source;
            a.cpus = x;
        }
    }
    // Slurm's count of the job's CPUs on this node, below what the mask offers: ask which.
    int ask = env.slurm_job_cpus_on_node > 0 && !env.slurm_job_id.empty() &&
              static_cast<size_t>(env.slurm_job_cpus_on_node) < a.cpus.size();
    EF_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &ask, 1, MPI_INT, MPI_MAX, ctx.node()));
    if (!ask) return a;
    std::vector<char> text;
    if (ctx.local_rank() == 0) {
        const std::string out = run_scontrol(env.slurm_job_id);
        text.assign(out.begin(), out.end());
    }
    int size = static_cast<int>(text.size());
    EF_MPI_CHECK(MPI_Bcast(&size, 1, MPI_INT, 0, ctx.node()));
    text.resize(static_cast<size_t>(size));
    if (size > 0) EF_MPI_CHECK(MPI_Bcast(text.data(), size, MPI_CHAR, 0, ctx.node()));
    const std::string node = env.slurmd_nodename.empty() ? ctx.host() : env.slurmd_nodename;
    const CpuList ids = slurm_job_cpu_ids(std::string(text.begin(), text.end()), node);
    const CpuList x = intersect(a.cpus, ids);
    const std::string held = "job " + env.slurm_job_id + " holds " + std::to_string(env.slurm_job_cpus_on_node) +
                             " of the " + std::to_string(a.cpus.size()) + " CPUs " + format_cpus(a.cpus) + " it sees";
    if (!x.empty() && x.size() == static_cast<size_t>(env.slurm_job_cpus_on_node)) {
        a.cpus = x;
        a.source = "Slurm job's CPU_IDs";
    } else if (ids.empty()) {
        a.note = held + ", and `scontrol show job -d` did not say which: ranks of other jobs may share these cores "
                        "(a Slurm that binds, TaskPlugin=task/affinity or task/cgroup, or --exclusive avoids it)";
    } else {
        a.note = held + ", but its CPU_IDs " + format_cpus(ids) + " (Slurm's numbering) are not " +
                 std::to_string(env.slurm_job_cpus_on_node) + " of them: ranks of other jobs may share these cores "
                 "(TaskPlugin=task/affinity or task/cgroup, or --exclusive avoids it)";
    }
    return a;
}

}  // namespace

namespace {
CpuList g_rank_cpus;  // what apply_binding decided this rank's cores are (empty before)
}  // namespace

std::string apply_binding(const MpiContext& ctx, const std::string& mode) {
    g_rank_cpus = launcher_cpus();
    if (mode == "none") return "none";
    const AllowedCpus allowed = allowed_cpus(ctx);
    if (!allowed.note.empty() && ctx.local_rank() == 0)
        std::fprintf(stderr, "ensemblefit: warning: %s: %s\n", ctx.host().c_str(), allowed.note.c_str());
    const CpuList& mine = allowed.cpus;
    const std::string from = allowed.source.empty() ? "" : " of " + allowed.source;
    const std::vector<CpuList> masks = node_masks(ctx, mine);
    const bool shared = std::all_of(masks.begin(), masks.end(), [&](const CpuList& m) { return m == masks[0]; });
    CpuList block = mine;
    if (ctx.local_size() > 1 && (mode == "cores" || shared)) {
        std::set<int> all;
        for (const CpuList& m : masks) all.insert(m.begin(), m.end());
        block = block_of(CpuList(all.begin(), all.end()), ctx.local_rank(), ctx.local_size());
    }
    const bool moved = block != g_rank_cpus;
    int any = moved ? 1 : 0;  // the label says what the node's ranks did, the same on all of them
    EF_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, ctx.node()));
    if (!any) return "launcher" + from;
    if (moved) set_cpus(block);
    g_rank_cpus = block;
    if (moved && omp_binds()) {
        const LauncherEnvironment& env = launcher_environment();
        pin_openmp_team(block, std::max({static_cast<int>(block.size()), env.omp_num_threads, env.slurm_cpus_per_task}));
    }
    return mode + from;
}

ThreadPlan resolve_threads(int configured, int local_ranks) {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    // The rank's cores as apply_binding left them (OpenMP's binding may have pinned the main
    // thread to one of them), else the main thread's mask.
    const int mine = static_cast<int>((g_rank_cpus.empty() ? launcher_cpus() : g_rank_cpus).size());
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
    } else if (mine > 0 && mine < cores) {
        plan.threads = mine;
        plan.source = "this rank's cores";
    } else {
        plan.threads = std::max(1, cores / std::max(1, local_ranks));
        plan.source = "cores/ranks";
    }
    if (plan.threads > 4096)  // the limit of [run] threads, for the environment's values too
        throw usage_error(plan.source + " = " + std::to_string(plan.threads) + ": at most 4096 threads per rank");
    if (static_cast<long>(plan.threads) * local_ranks > cores) {
        plan.warning = "oversubscribed: " + std::to_string(local_ranks) + " rank(s) x " +
                       std::to_string(plan.threads) + " thread(s) on " + std::to_string(cores) +
                       " core(s) of this node";
    }
    return plan;
}

DevicePlan choose_device(const std::string& want, int gpus, int local_rank, bool gpu_capable) {
    DevicePlan plan;
    if (want == "gpu" || (want == "auto" && gpus > 0 && gpu_capable)) plan.kind = WorkerKind::gpu;
    plan.device = gpus > 0 ? local_rank % gpus : 0;
    return plan;
}

DevicePlan choose_device(const std::string& want, const MpiContext& ctx, bool gpu_capable) {
    // A rank asked for the CPU never opens the CUDA driver: on a GPU node its initialisation is
    // serialised in the driver, so 64 CPU ranks counting the GPUs at once spent 7.4 s of set-up
    // (0.1 s for one rank; 4 x H100, 64 cores).
    if (want == "cpu") return choose_device(want, 0, ctx.local_rank(), gpu_capable);
    return choose_device(want, cuda_device_count(), ctx.local_rank(), gpu_capable);
}

std::vector<std::string> gather_placement(const MpiContext& ctx, const std::string& worker, int threads,
                                          const std::string& binding, int device) {
    name_openmp_team(threads);
    const CpuList cpus = team_cpus(threads);  // where its threads run, not only its main thread
    std::ostringstream me;
    me << ctx.rank() << "\t" << ctx.host() << "\t" << worker << "\t" << threads << "\t" << format_cpus(cpus) << "\t"
       << binding << ", " << omp_binding() << "\t" << gpu_column(device, cpus) << "\t" << ctx.node_index();
    return ctx.gather(me.str());
}

std::string ranks_per_node(const std::vector<std::string>& rows) {
    std::map<std::string, std::pair<std::string, CpuList>> nodes;  // node -> host, world ranks
    for (const auto& r : rows) {
        const std::vector<std::string> c = split_tabs(r);
        auto& [host, ranks] = nodes[c[7].empty() ? c[1] : c[7]];  // a row of a file before the column: its host
        host = c[1];
        ranks.push_back(std::atoi(c[0].c_str()));
    }
    if (nodes.size() < 2) return "";
    std::vector<std::pair<int, std::string>> ordered;  // by first rank
    for (auto& [node, entry] : nodes) {
        std::sort(entry.second.begin(), entry.second.end());
        ordered.push_back({entry.second.front(), entry.first + " " + std::to_string(entry.second.size()) +
                                                     (entry.second.size() == 1 ? " (rank " : " (ranks ") +
                                                     format_cpus(entry.second) + ")"});
    }
    std::sort(ordered.begin(), ordered.end());
    std::string out = "ranks per node (" + std::to_string(nodes.size()) + " nodes):";
    for (size_t i = 0; i < ordered.size(); ++i) out += (i ? ", " : " ") + ordered[i].second;
    return out;
}

void print_placement(const std::vector<std::string>& rows, std::ostream& os) {
    os << "placement:\n  " << pad("rank", 6) << pad("host", 16) << pad("worker", 24) << pad("threads", 8)
       << pad("cores", 10) << pad("binding", 20) << "gpu\n";
    for (const auto& r : rows) {
        const std::vector<std::string> c = split_tabs(r);
        os << "  " << pad(c[0], 6) << pad(c[1], 16) << pad(c[2], 24) << pad(c[3], 8) << pad(c[4], 10)
           << pad(c[5], 20) << c[6] << "\n";
    }
    const std::string nodes = ranks_per_node(rows);
    if (!nodes.empty()) os << "  " << nodes << "\n";
    os.flush();
}

std::vector<std::string> placement_warnings(const std::vector<std::string>& rows) {
    std::vector<std::string> out = placement_core_warnings(rows);
    std::string far;
    for (const auto& r : rows) {
        const std::vector<std::string> c = split_tabs(r);
        const auto numa = c[6].find("(NUMA ");
        const auto on = c[6].find(", cores on NUMA ");
        if (numa != std::string::npos && on != std::string::npos && c[6].find('?') == std::string::npos &&
            c[6].substr(numa + 6, on - numa - 6) != c[6].substr(on + 16, c[6].size() - on - 17))
            far += (far.empty() ? "" : ", ") + c[0];
    }
    if (!far.empty()) out.insert(out.begin() + (out.empty() || out[0].rfind("more threads", 0) != 0 ? 0 : 1),
                                 "rank(s) " + far + ": cores on another NUMA node than their GPU");
    return out;
}

std::vector<std::string> placement_core_warnings(const std::vector<std::string>& rows) {
    std::vector<std::string> out;
    std::map<std::string, std::vector<std::pair<std::string, CpuList>>> by_node;
    std::map<std::string, std::string> host_of;
    std::string crowded;
    bool omp_bound = false;  // OpenMP binds threads to places: OMP_PLACES / OMP_PROC_BIND
    for (const auto& r : rows) {
        const std::vector<std::string> c = split_tabs(r);
        const CpuList cpus = parse_cpus(c[4]);
        // Grouped by the node MPI found (MPI_COMM_TYPE_SHARED), named by its host: two nodes with
        // one host name (containers) must not look like ranks of one node sharing cores.
        const std::string node = c[7].empty() ? c[1] : c[7];
        by_node[node].push_back({c[0], cpus});
        host_of[node] = c[1];
        omp_bound = omp_bound || c[5].find("omp-") != std::string::npos;
        if (!cpus.empty() && c[2].rfind("cpu", 0) == 0 && std::atoi(c[3].c_str()) > static_cast<int>(cpus.size()))
            crowded += (crowded.empty() ? "" : ", ") + c[0] + " (" + c[3] + " on " + c[4] + ")";
    }
    if (!crowded.empty()) out.push_back("more threads than cores on rank(s) " + crowded);
    for (const auto& [node, ranks] : by_node) {
        const std::string& host = host_of[node];
        std::set<std::string> names;
        std::set<int> shared;
        for (size_t i = 0; i < ranks.size(); ++i)
            for (size_t j = i + 1; j < ranks.size(); ++j) {
                CpuList common;
                std::set_intersection(ranks[i].second.begin(), ranks[i].second.end(), ranks[j].second.begin(),
                                      ranks[j].second.end(), std::back_inserter(common));
                if (common.empty()) continue;
                names.insert(ranks[i].first);
                names.insert(ranks[j].first);
                shared.insert(common.begin(), common.end());
            }
        std::string list;
        for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
        if (!names.empty())
            out.push_back("ranks " + list + " on " + host + " share cores " + format_cpus({shared.begin(), shared.end()}) +
                          " (each rank's own cores: [run] bind = auto or cores, or the launcher's binding" +
                          (omp_bound ? "; OMP_PLACES/OMP_PROC_BIND pin a rank's first thread to the first core of its"
                                       " mask before the run starts: set them only where the launcher binds ranks)"
                                     : ")"));
    }
    return out;
}

}  // namespace ef

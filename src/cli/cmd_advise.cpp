// SPDX-License-Identifier: MIT
// `ensemblefit advise CONFIG`: calibrate on the real problem, predict every placement, pick one.
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include <ensemblefit/core/config.hpp>
#include <ensemblefit/core/error.hpp>
#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/io/data_table.hpp>
#include <ensemblefit/worker/device_probe.hpp>
#include <ensemblefit/worker/worker_kind.hpp>

#include "src/cli/advise_calibration.hpp"
#include "src/cli/commands.hpp"
#include "src/config/ini_scan.hpp"
#include "src/io/output_file.hpp"
#include "src/core/text.hpp"
#include "src/run/environment.hpp"
#include "src/run/job_script.hpp"
#include "src/run/predicted_timing.hpp"
#include "src/run/run_args.hpp"

namespace ef {
namespace {

using advise::AdviseRequest;

/// mpirun's own start and the ranks' exit, beyond a singleton process's start-up: the estimate
/// when mpirun cannot be timed (0.25 s measured on the 2-core machine, perf/RESULTS.md, advise).
constexpr double kLauncherSeconds = 0.25;

/**
 * The launch cost of the whole command, measured: mpirun with 1 rank twice (the faster: the
 * first may read the libraries from disk) and with min(cores, 4) ranks for the cost of each
 * further rank. Only from a process that no launcher started (mpirun inside mpirun or srun is
 * not a measurement of anything). False, with why, when it cannot be measured.
 */
bool measure_launch(int cores, advise::ProblemModel& m, std::string& how) {
    if (started_by_launcher()) {
        how = "estimated (advise runs under a launcher: mpirun is not timed from inside one)";
        return false;
    }
    const double a = advise::run_mpirun(1, {"--version"}), b = a > 0 ? advise::run_mpirun(1, {"--version"}) : -1;
    if (a <= 0 || b <= 0) {
        how = "estimated (`mpirun -np 1 ensemblefit --version` could not be run from here)";
        return false;
    }
    m.launch = std::min(a, b);
    const int k = std::min(cores, 4);
    const double t = k > 1 ? advise::run_mpirun(k, {"--version"}) : -1;
    if (t > 0) m.launch_per_rank = std::max(0.0, (t - m.launch) / (k - 1));
    char b2[200];
    std::snprintf(b2, sizeof b2, "measured: `mpirun -np 1 ensemblefit --version` %.2f s, %.2f s", a, b);
    how = b2;
    if (t > 0) {
        std::snprintf(b2, sizeof b2, "; -np %d %.2f s", k, t);
        how += b2;
    }
    return true;
}

void advise_help() {
    std::printf(
        "usage: ensemblefit advise CONFIG.ini [--workers cpu,gpu] [--ranks-per-gpu 1,2,4] [--budget SECONDS] [--node-cores N]\n"
        "                          [-o PREDICTION.tsv [--overwrite]] [--section.key VALUE ...]\n\n"
        "Runs short calibration units of the configured fit or reconstruction in this process\n"
        "(a few replica fits or mini-batches on each worker kind, within --budget seconds, 15 by\n"
        "default), fits each worker's time per unit against the unit's size, and predicts the\n"
        "whole command's wall time (start-up, compute and output) and parallel efficiency for\n"
        "CPU ranks at several counts, each GPU with 1, 2 or 4 ranks, and both together. Prints\n"
        "the recommended placement, why, and the mpirun command and Slurm options for it.\n"
        "Inside a Slurm allocation it plans for the allocation's cores and GPUs.\n\n"
        "options:\n"
        "  --workers LIST        cpu, gpu or cpu,gpu (default: cpu, and gpu when one is visible)\n"
        "  --ranks-per-gpu LIST  ranks sharing one GPU to compare (default 1,2,4)\n"
        "  --budget SECONDS      time for all calibration runs (default 15)\n"
        "  --node-cores N        plan for a node of N cores (a compute node, from a login node); its\n"
        "                        sbatch line is checked against the jobs/ script's rule for that node\n"
        "  -o FILE               write the predictions (TSV) for `fit/reconstruct --predicted FILE`,\n"
        "                        which stores the prediction beside the run's measured /timing\n"
        "  --overwrite           replace an existing -o FILE\n"
        "  -h, --help            this text\n");
}

std::vector<int> parse_int_list(const std::string& what, const std::string& text) {
    std::vector<int> out;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
        const double v = parse_number_arg(what, item);
        if (v < 1 || v > 64 || v != static_cast<int>(v))
            throw usage_error(what + ": expected whole numbers 1..64 separated by commas, got '" + excerpt(text) + "'");
        out.push_back(static_cast<int>(v));
    }
    if (out.empty()) throw usage_error(what + ": empty list");
    return out;
}

/**
 * Whether `path` (with `overrides`) configures a reconstruction: a section only a reconstruction
 * has ([beam], [object], [probe], [positions], [solver]) says yes; a section or key only a fit has
 * ([fit], [sched], [normalisation.*], data.sigma, data.x, data.y) says no; a config with neither,
 * as the minimal reconstruction config ([data] file and [output] file), is a reconstruction: a fit
 * cannot run without data.sigma (before issue 38 it was taken for a fit and refused for that).
 */
bool is_recon_config(const std::string& path, const std::vector<std::string>& overrides) {
    if (!file_exists(path)) throw usage_error("advise: " + path + ": no such file");
    std::vector<std::string> keys;
    const ini::Rules any{[](const std::string&, const std::string&) {},
                         [](const std::string&, const std::string&, const std::string&) {}};  // the command checks them
    for (const ini::ScannedKey& k : ini::scan(path, any)) keys.push_back(k.key);
    for (const std::string& o : overrides)  // "--section.key=VALUE"
        if (o.rfind("--", 0) == 0) keys.push_back(o.substr(2, o.find('=') - 2));
    auto section_of = [](const std::string& key) { return key.substr(0, key.rfind('.')); };
    for (const std::string& k : keys)
        for (const char* s : {"beam", "object", "probe", "positions", "solver"})
            if (section_of(k) == s) return true;
    for (const std::string& k : keys)
        if (k == "data.sigma" || k == "data.x" || k == "data.y" || section_of(k) == "fit" || section_of(k) == "sched" ||
            k.rfind("normalisation.", 0) == 0)
            return false;
    return true;
}

int cores_of_this_process() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
    return std::max(1u, std::thread::hardware_concurrency());
}

struct AdviseArgs {
    AdviseRequest req;
    int node_gpus = 0;  ///< GPUs of the node advise plans for (the allocation's, else visible)
    int node_cores = 0;  ///< --node-cores: plan for a node of this many cores (0: this machine's or the allocation's)
    std::vector<int> ranks_per_gpu{1, 2, 4};
    std::string output, workers;
};

/// false for --help.
bool parse_advise_args(const std::vector<std::string>& args, AdviseArgs& a) {
    RunArgs run;
    const std::vector<ArgOption> options = {
        {"--workers", true, [&](const std::string& v) { a.workers = v; }},
        {"--ranks-per-gpu", true, [&](const std::string& v) { a.ranks_per_gpu = parse_int_list("--ranks-per-gpu", v); }},
        {"--budget", true,
         [&](const std::string& v) {
             a.req.budget = parse_number_arg("--budget", v);
             if (!(a.req.budget > 0 && a.req.budget <= 86400)) throw usage_error("--budget: expected seconds in (0, 86400]");
         }},
        {"--node-cores", true,
         [&](const std::string& v) {
             const double n = parse_number_arg("--node-cores", v);
             if (n < 1 || n > 65536 || n != static_cast<int>(n)) throw usage_error("--node-cores: expected a whole number 1..65536");
             a.node_cores = static_cast<int>(n);
         }},
        {"-o", true, [&](const std::string& v) { a.output = v; }},
        {"--output", true, [&](const std::string& v) { a.output = v; }},
    };
    if (!parse_run_args("advise", args, false, options, run)) return false;
    if (run.dry_run || !run.predicted.empty())
        throw usage_error("advise: --dry-run and --predicted belong to fit and reconstruct");
    // The output guard's rules, before the calibration: never the config, an existing file only
    // with --overwrite.
    if (!a.output.empty()) check_output_file(a.output, "advise: -o", run.overwrite, {run.config_path});
    a.req.config = run.config_path;
    a.req.overrides = run.overrides;
    return true;
}

/// A warning when the machine is busy with others' work: the calibration then measures a share
/// of the cores, and the runs it predicts will see another share.
std::string load_note(int cores) {
    std::ifstream in("/proc/loadavg");
    double load = 0;
    if (!(in >> load) || load <= 0.5 * cores + 1) return "";
    char b[200];
    std::snprintf(b, sizeof b, "; load average %.1f on %d cores: calibration and runs share the cores with others, "
                  "predictions are unreliable", load, cores);
    return b;
}

/// Worker kinds, cores and GPUs: the allocation's inside Slurm, else this process's.
std::string decide_machine(AdviseArgs& a, int& gpus) {
    const LauncherEnvironment& env = launcher_environment();
    a.req.cores = a.node_cores > 0               ? a.node_cores
                  : env.slurm_cpus_on_node > 0 ? env.slurm_cpus_on_node
                                               : cores_of_this_process();
    const int visible = static_cast<int>(probe_devices(false).size());
    gpus = env.slurm_gpus_on_node > 0 ? std::min(env.slurm_gpus_on_node, std::max(visible, 0)) : visible;
    a.node_gpus = gpus;
    const std::string w = a.workers.empty() ? (gpus > 0 ? "cpu,gpu" : "cpu") : a.workers;
    a.req.cpu = w == "cpu" || w == "cpu,gpu" || w == "gpu,cpu";
    a.req.gpu = (w == "gpu" || w == "cpu,gpu" || w == "gpu,cpu") && gpus > 0;
    if (!a.req.cpu && w != "gpu") throw usage_error("--workers: expected cpu, gpu or cpu,gpu, got '" + excerpt(w) + "'");
    std::string where = std::to_string(a.req.cores) + " cores";
    if (a.node_cores > 0)
        where += " of the node given by --node-cores (calibrated on this machine's " +
                 std::to_string(cores_of_this_process()) + ")";
    else if (env.slurm_ntasks > 0)
        where += " of this node of the Slurm allocation (" + std::to_string(env.slurm_nodes) + " node(s), " +
                 std::to_string(env.slurm_ntasks) + " task(s)); the table is per node";
    else
        where += " on this machine";
    where += load_note(a.node_cores > 0 ? cores_of_this_process() : a.req.cores);
    if (gpus > 0) return where + ", " + std::to_string(gpus) + " GPU(s)";
    if (w.find("gpu") != std::string::npos && !a.req.cpu)
        throw usage_error("advise: --workers gpu, but no GPU is visible" + std::string(EF_HAVE_CUDA ? "" : " (built without CUDA)"));
    return where + "; no GPU " + (EF_HAVE_CUDA ? "visible" : "(built without CUDA)") + ": CPU rows only";
}

void print_calibration(const std::vector<advise::CalibrationPoint>& pts, const advise::ProblemModel& m) {
    std::printf("calibration runs (this process, one rank):\n  workers threads items/unit units  compute_s     io_s  other_s\n");
    for (const auto& p : pts) {
        if (p.threads < 0) {  // the 2-rank run through mpirun: its last iteration
            std::printf("  %-7s 2 ranks x 1 thread (mpirun), mini-batches of %.0f: %.3f s for the last iteration\n",
                        p.workers.c_str(), p.items, p.compute);
            continue;
        }
        std::printf("  %-7s %7d %10.0f %5.0f %10.3f %8.3f %8.3f\n", p.workers.c_str(), p.threads, p.items, p.units,
                    p.compute, p.io, p.outside);
    }
    double compiled = 0;
    for (const auto& p : pts) compiled += p.compiled;
    if (compiled > 0)
        std::printf("  (formulas compiled at run time: %.2f s, left out of other_s: the runs find them in the cache)\n",
                    compiled);
    const char* item = m.recon ? "position" : "replica fit";
    for (const auto* s : {&m.cpu, &m.gpu}) {
        if (!s->measured) continue;
        std::printf("  %s unit: %.4g s + %.4g s per %s%s; set-up and other %.3f s", s == &m.cpu ? "cpu" : "gpu",
                    s->unit.a, s->unit.b, item, s == &m.cpu ? " on one thread" : "", s->fixed);
        if (s->fixed_threaded > 0) std::printf(" (%.3f s of it shared by a rank's threads)", s->fixed_threaded);
        if (s == &m.gpu)
            std::printf(" (%.3f s of it the GPU's context, %.3f s its teardown at exit)", m.gpu_context, m.gpu_teardown);
        if (s->batch_sync_measured)
            std::printf("; with 2 ranks%s, %.3g ms per mini-batch beyond its compute",
                        s == &m.gpu ? " on the GPU" : "", 1e3 * s->batch_sync);
        if (s == &m.cpu && m.cores > 1) std::printf("; thread efficiency at %d threads %.2f", m.cores, s->thread_efficiency);
        std::printf("\n");
    }
    std::printf("  start-up of a process and MPI %.3f s (+%.3f s per further rank); output %.4g s + %.4g s per item\n",
                m.launch, m.launch_per_rank, m.io.a, m.io.b);
}

/// Counted FLOPs per LM iteration (as --dry-run prints them) times the mean iterations per fit.
double flops_per_fit(const AdviseRequest& req, const std::vector<advise::CalibrationPoint>& pts) {
    FitConfig c = load_fit_config(req.config, req.overrides);
    DataTable d = load_data(c);
    const FitProblem pb = make_fit_problem(std::move(c), std::move(d));
    double iterations = 0;
    for (const auto& p : pts) iterations = std::max(iterations, p.iterations);  // the largest unit's mean
    return pb.flops_per_iteration() * iterations;
}

/**
 * The achieved rate of each worker kind (counted FLOPs of a fit over its measured time per fit)
 * against the ceiling the `devices` probe measured, and what bounds it: a GPU near its FP64
 * ceiling is compute-bound; one far below it whose units are mostly fixed cost is bound by
 * launches and LM rounds, not by a ceiling. No CPU ceiling is probed.
 */
void print_work(const AdviseRequest& req, const std::vector<advise::CalibrationPoint>& pts,
                const advise::ProblemModel& m) {
    if (req.recon) return;
    const double flops = flops_per_fit(req, pts);
    if (flops <= 0) return std::printf("work: the model's FLOPs are not counted (no roofline position)\n"), void();
    std::printf("work: %.3g FLOP per replica fit (counted FLOP per LM iteration, as --dry-run, x mean iterations)\n",
                flops);
    if (m.cpu.measured && m.cpu.unit.b > 0)
        std::printf("  cpu: %.3g GFLOP/s per thread (no CPU ceiling is probed)\n", flops / m.cpu.unit.b / 1e9);
    if (!m.gpu.measured || m.gpu.unit.b <= 0) return;
    const std::vector<DeviceInfo> devs = probe_devices(true);
    const double rate = flops / m.gpu.unit.b;
    const double peak = devs.empty() ? 0.0 : devs.front().fp64_tflops * 1e12;
    const double unit = std::max(1.0, m.items / 2);  // one GPU rank's unit
    const double fixed_share = m.gpu.unit.a / m.gpu.unit.at(unit);
    std::printf("  gpu: %.3g GFLOP/s on the device's share of a unit = %.1f %% of the probed FP64 peak (%.1f TFLOP/s); "
                "fixed cost is %.0f %% of a one-rank unit: %s\n",
                rate / 1e9, peak > 0 ? 100 * rate / peak : 0.0, peak / 1e12, 100 * fixed_share,
                peak > 0 && rate > 0.5 * peak ? "bound by the FP64 ceiling"
                : fixed_share > 0.5            ? "bound by launches and LM rounds, not a ceiling (more ranks per GPU)"
                                               : "below both ceilings (latency of dependent steps)");
}

/**
 * The sbatch line of the jobs/ script that gives placement `p` on the node advise plans for,
 * only when the script's own rule (job_script_refusal, which the script asks at run time through
 * `ensemblefit job-check`) accepts it; otherwise why no script does.
 */
void print_sbatch_line(const advise::Placement& p, const AdviseArgs& a, const std::string& tail) {
    JobShape s;
    s.tasks_per_node = p.ranks();
    s.node_cpus = a.req.cores;
    s.node_gpus = a.node_gpus;
    s.gpus_per_node = p.gpus;
    s.gpu_ranks = p.gpu_ranks();
    std::string script = "rank-per-core.sbatch", workers = " --run.workers cpu";
    if (p.gpus == 0) {
        s.cpus_per_task = p.threads;
    } else if (p.cpu_ranks == 0) {
        script = "rank-per-gpu.sbatch";
        workers = " --run.workers gpu";
        s.cpus_per_task = std::max(1, a.req.cores / p.ranks());
    } else {
        script = "hybrid.sbatch";
        workers = "";  // the script gives each rank its kind
        s.cpus_per_task = p.threads;
    }
    const std::string why = a.req.recon ? "the jobs/ scripts run `ensemblefit fit`, not a reconstruction"
                                        : job_script_refusal(script, s);
    if (!why.empty()) {
        std::printf("  Slurm: no jobs/ script gives this placement (%s); in a job holding the node, run the mpirun "
                    "line above\n", why.c_str());
        return;
    }
    std::printf("  Slurm: sbatch %s jobs/%s %s%s%s\n", job_script_options(script, s).c_str(), script.c_str(),
                a.req.config.c_str(), workers.c_str(), tail.c_str());
}

/// The command line and Slurm options that give placement `p`.
void print_how_to_run(const advise::Placement& p, const AdviseArgs& a) {
    const std::string cmd = a.req.recon ? "reconstruct" : "fit";
    std::string overrides;
    for (const std::string& o : a.req.overrides) overrides += " " + o;
    const std::string tail = overrides + (a.output.empty() ? "" : " --predicted " + a.output);
    if (p.gpus > 0 && p.cpu_ranks > 0)  // the CPU ranks must not see the GPU, or auto makes them GPU ranks
        std::printf("  mpirun --bind-to none -np %d ensemblefit %s %s --run.workers gpu --run.threads 1%s : -np %d -x "
                    "CUDA_VISIBLE_DEVICES= ensemblefit %s %s --run.workers cpu --run.threads %d%s\n",
                    p.gpu_ranks(), cmd.c_str(), a.req.config.c_str(), tail.c_str(), p.cpu_ranks, cmd.c_str(),
                    a.req.config.c_str(), p.threads, tail.c_str());
    else
        std::printf("  mpirun --bind-to none -np %d ensemblefit %s %s --run.workers %s --run.threads %d%s\n", p.ranks(),
                    cmd.c_str(), a.req.config.c_str(), p.gpus == 0 ? "cpu" : "gpu", p.threads, tail.c_str());
    print_sbatch_line(p, a, tail);
}

void print_table(const std::vector<advise::Prediction>& rows, size_t pick) {
    std::printf("\n%-36s %5s %11s %10s  %s\n", "placement", "ranks", "predicted_s", "efficiency", "bounded by");
    for (size_t i = 0; i < rows.size(); ++i)
        std::printf("%-36s %5d %11.2f %10.3f  %s%s\n", rows[i].placement.label().c_str(), rows[i].placement.ranks(),
                    rows[i].wall, rows[i].efficiency, rows[i].bound.c_str(), i == pick ? "   <- recommended" : "");
}

/// Why `pick`: the fastest, or as fast within the model's resolution with less hardware.
std::string reason(const std::vector<advise::Prediction>& rows, size_t pick) {
    size_t other = pick == 0 && rows.size() > 1 ? 1 : 0;
    for (size_t i = 0; i < rows.size(); ++i)
        if (i != pick && rows[i].wall < rows[other].wall) other = i;
    char b[300];
    if (rows.size() < 2) return "the only placement";
    if (rows[other].wall < rows[pick].wall)
        std::snprintf(b, sizeof b, "within 3 %% of the fastest (%s, %.2f s) with fewer GPUs, cores or threads per rank",
                      rows[other].placement.label().c_str(), rows[other].wall);
    else
        std::snprintf(b, sizeof b, "the fastest predicted, %.0f %% faster than the next (%s, %.2f s)",
                      100 * (rows[other].wall / rows[pick].wall - 1), rows[other].placement.label().c_str(), rows[other].wall);
    return b;
}

int cmd_advise(const std::vector<std::string>& args, const MpiContext& ctx) {
    const double launch = advise::process_age_seconds();
    AdviseArgs a;
    if (!parse_advise_args(args, a)) {
        if (ctx.is_root()) advise_help();
        return 0;
    }
    if (!ctx.is_root()) return 0;  // rank 0 calibrates alone, on a communicator of its own
    a.req.recon = is_recon_config(a.req.config, a.req.overrides);
    // A GPU's context, timed before anything in this process touched the device (the probe
    // below makes it): every GPU rank of a real run pays it in its set-up, no calibration run does.
    if (EF_HAVE_CUDA) {
        const auto c0 = std::chrono::steady_clock::now();
        cuda_create_context(0);
        a.req.gpu_context = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
    }
    int gpus = 0;
    const std::string machine = decide_machine(a, gpus);
    const MpiContext self(MPI_COMM_SELF);
    std::vector<advise::CalibrationPoint> pts;
    advise::ProblemModel launch_model;
    std::string launch_how;
    const auto l0 = std::chrono::steady_clock::now();
    const bool measured = measure_launch(a.req.cores, launch_model, launch_how);
    a.req.mpirun = measured;
    a.req.budget = std::max(1.0, a.req.budget - std::chrono::duration<double>(std::chrono::steady_clock::now() - l0).count());
    advise::ProblemModel m = advise::calibrate(a.req, self, pts);
    // Measured: mpirun's whole start and end around a run; else this process's own start (a
    // singleton MPI start) plus what mpirun adds and the exit after the output.
    m.launch = measured ? launch_model.launch : launch + kLauncherSeconds;
    if (measured) m.launch_per_rank = launch_model.launch_per_rank;
    std::printf("advise: %s (%s: %.0f %s%s)\nmachine: %s\n", a.req.config.c_str(),
                a.req.recon ? "reconstruction" : "fit", m.items, a.req.recon ? "positions" : "replica fits",
                a.req.recon ? (" x " + std::to_string(static_cast<int>(m.iterations)) + " iterations, mini-batches of " +
                               std::to_string(static_cast<int>(m.batch)) +
                               (m.trial_iterations > 0 ? ", and up to " + std::to_string(static_cast<int>(m.trial_iterations)) +
                                                             " iterations of probe defocus trials before them"
                                                       : std::string()))
                                  .c_str()
                            : "",
                machine.c_str());
    print_calibration(pts, m);
    std::printf("  start-up %s\n", launch_how.c_str());
    print_work(a.req, pts, m);
    std::vector<advise::Prediction> rows;
    for (const advise::Placement& p : advise::candidate_placements(a.req.cores, gpus, a.ranks_per_gpu, a.req.cpu, a.req.gpu))
        rows.push_back(advise::predict(m, p));
    const size_t pick = advise::recommend(rows);
    print_table(rows, pick);
    std::printf("\nrecommended: %s: %s\n", rows[pick].placement.label().c_str(), reason(rows, pick).c_str());
    print_how_to_run(rows[pick].placement, a);
    if (!a.output.empty()) {
        write_prediction_file(a.output, "ensemblefit advise " + a.req.config + "\n" + machine + "\n" + utc_timestamp(), rows,
                              pick);
        std::printf("predictions: %s (run with --predicted %s; `ensemblefit report` shows predicted vs measured)\n",
                    a.output.c_str(), a.output.c_str());
    }
    return 0;
}

const CommandRegistrar reg("advise", "CONFIG.ini: calibrate, predict wall time per placement, recommend one",
                           &cmd_advise);

}  // namespace
}  // namespace ef

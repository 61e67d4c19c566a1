// SPDX-License-Identifier: MIT
// The calibration behind `ensemblefit advise`: short runs of the real command, in this process.
#include "src/cli/advise_calibration.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <ensemblefit/config/fit_config.hpp>
#include <ensemblefit/core/error.hpp>
#include <ensemblefit/fit/ensemble_run.hpp>
#include <ensemblefit/recon/ptycho_dataset.hpp>
#include <ensemblefit/recon/recon_config.hpp>
#include <ensemblefit/recon/reconstruction.hpp>
#include <ensemblefit/worker/worker_kind.hpp>

#include "src/io/h5.hpp"
#include "src/model/formula_jit.hpp"
#include "src/recon/recon_plan.hpp"
#include "src/recon/step_defaults.hpp"
#include "src/report/timing_file.hpp"
#include "src/run/environment.hpp"

namespace ef::advise {

namespace {

/// stdout and stderr go to /dev/null while it lives: a calibration run prints its plan,
/// progress and tables, which are not the user's.
class Silence {
   public:
    Silence() {
        std::cout.flush();
        std::fflush(stdout);
        std::fflush(stderr);
        out_ = dup(1);
        err_ = dup(2);
        const int null = open("/dev/null", O_WRONLY);
        if (null >= 0) {
            dup2(null, 1);
            dup2(null, 2);
            close(null);
        }
    }
    ~Silence() {
        std::cout.flush();
        std::fflush(stdout);
        std::fflush(stderr);
        dup2(out_, 1);
        dup2(err_, 2);
        close(out_);
        close(err_);
    }
    Silence(const Silence&) = delete;
    Silence& operator=(const Silence&) = delete;

   private:
    int out_ = -1, err_ = -1;
};

/// A folder of its own for the calibration outputs, removed with everything in it.
class TempFolder {
   public:
    TempFolder() {
        std::string t = (std::filesystem::temp_directory_path() / "ef-advise-XXXXXX").string();
        if (!mkdtemp(t.data())) throw data_error("advise: cannot create a temporary folder under " + t);
        path_ = t;
    }
    ~TempFolder() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    TempFolder(const TempFolder&) = delete;
    TempFolder& operator=(const TempFolder&) = delete;
    const std::string& path() const { return path_; }

   private:
    std::string path_;
};

/// The keys a calibration run sets itself, so the user's own values of them are left out.
bool set_by_calibration(const std::string& token) {
    static const char* const keys[] = {"--run.workers",       "--run.threads",     "--output.file",
                                       "--fit.replicas",      "--fit.chunk",       "--solver.iterations",
                                       "--solver.batch_size", "--output.previews", "--output.checkpoint_minutes",
                                       "--output.checkpoint_every"};
    for (const char* k : keys)
        if (token.rfind(std::string(k) + "=", 0) == 0) return true;
    return false;
}

/// Mean LM iterations per replica fit of a calibration output (the central fit included).
double mean_iterations(const std::string& path) {
    const h5::File f = h5::File::open_read(path);
    double sum = 0, n = 0;
    for (const char* name : {"/central/iterations", "/replicas/iterations"}) {
        if (!f.exists(name)) continue;
        for (std::int64_t v : f.read_int64(name)) {
            sum += static_cast<double>(v);
            n += 1;
        }
    }
    return n > 0 ? sum / n : 0.0;
}

void steady_iteration(const std::string& out, CalibrationPoint& p);

class Runner {
   public:
    Runner(const AdviseRequest& req, const MpiContext& self) : req_(req), self_(self) {
        for (const std::string& o : req.overrides)
            if (!set_by_calibration(o)) base_.push_back(o);
    }
    /// One run with `workers` and `threads` and the overrides `extra`.
    CalibrationPoint run(const std::string& workers, int threads, const std::vector<std::string>& extra);
    /// A reconstruction on `ranks` ranks through mpirun (one thread each): the last iteration's
    /// seconds; negative when it could not run.
    double run_ranks(int ranks, const std::string& workers, const std::vector<std::string>& extra);
    double spent() const { return spent_; }

   private:
    const AdviseRequest& req_;
    const MpiContext& self_;
    std::vector<std::string> base_;
    TempFolder dir_;
    int count_ = 0;
    double spent_ = 0;
};

CalibrationPoint Runner::run(const std::string& workers, int threads, const std::vector<std::string>& extra) {
    const std::string out = dir_.path() + "/calibration" + std::to_string(count_++) + ".h5";
    std::vector<std::string> ov = base_;
    ov.insert(ov.end(), {"--run.workers=" + workers, "--run.threads=" + std::to_string(threads), "--output.file=" + out});
    ov.insert(ov.end(), extra.begin(), extra.end());
    const auto t0 = std::chrono::steady_clock::now();
    const double compile0 = formula_compile_seconds();
    {
        Silence quiet;
        if (req_.recon) {
            ReconRunOptions o;
            o.config_path = req_.config;
            o.overrides = ov;
            run_reconstruct(o, self_);
        } else {
            FitRunOptions o;
            o.config_path = req_.config;
            o.overrides = ov;
            o.progress_interval = 1e9;
            run_fit(o, self_);
        }
    }
    const double outer = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    spent_ += outer;
    const double compile = formula_compile_seconds() - compile0;
    const RankTiming r = read_run_timing(out).ranks.at(0);
    CalibrationPoint p;
    p.workers = workers;
    p.threads = threads;
    p.units = std::max<double>(1.0, static_cast<double>(r.units));
    p.items = static_cast<double>(r.replicas) / p.units;
    p.compute = r.phase[static_cast<size_t>(Phase::compute)];
    p.io = r.phase[static_cast<size_t>(Phase::io)];
    // Formulas compiled at run time: once, then from the cache (the predicted runs' case).
    p.compiled = compile;
    p.outside = std::max(0.0, outer - p.compute - p.io - compile);
    p.allreduce_bytes = r.mpi_calls > 0 ? static_cast<double>(r.mpi_bytes) / static_cast<double>(r.mpi_calls) : 0.0;
    if (!req_.recon) p.iterations = mean_iterations(out);
    else steady_iteration(out, p);
    return p;
}

double Runner::run_ranks(int ranks, const std::string& workers, const std::vector<std::string>& extra) {
    const std::string out = dir_.path() + "/calibration" + std::to_string(count_++) + ".h5";
    std::vector<std::string> args = {"reconstruct", req_.config};
    args.insert(args.end(), base_.begin(), base_.end());
    args.insert(args.end(), {"--run.workers=" + workers, "--run.threads=1", "--output.file=" + out});
    args.insert(args.end(), extra.begin(), extra.end());
    const double wall = run_mpirun(ranks, args);
    if (wall <= 0) return -1;
    spent_ += wall;
    const std::vector<double> its = h5::File::open_read(out).read_double("/iteration_seconds");
    return its.empty() ? -1 : its.back();
}

/**
 * A reconstruction's calibration runs two iterations: its mini-batches cost what the last
 * iteration's did (its share of the compute, by /iteration_seconds), and what the first took
 * beyond that (first use of the buffers, the FFT plans' first execution, the threads' start)
 * is a one-time cost: outside, with the set-up. One iteration alone put that warm-up into
 * every mini-batch of the prediction (ptycho, 15 iterations: 12-30 % over).
 */
void steady_iteration(const std::string& out, CalibrationPoint& p) {
    const std::vector<double> its = h5::File::open_read(out).read_double("/iteration_seconds");
    double sum = 0;
    for (double s : its) sum += s;
    if (its.size() < 2 || sum <= 0) return;
    const double n = static_cast<double>(its.size());
    const double total = p.compute;
    p.units /= n;
    p.compute = total * its.back() / sum;
    p.outside += std::max(0.0, total - n * p.compute);
}

std::string fit_items(double items) {
    const long long n = static_cast<long long>(items);
    return "--fit.replicas=" + std::to_string(n - 1);  // replica 0 is fitted too
}

/// Fit units of 1, 2, 4, ... replica fits on one thread (a GPU: 256, 1024, ...), each one unit,
/// while the next (about twice the last's compute) fits in the budget; at least two.
std::vector<CalibrationPoint> calibrate_fit(Runner& run, const AdviseRequest& req, const std::string& kind,
                                            double budget) {
    std::vector<CalibrationPoint> pts;
    const bool gpu = kind == "gpu";
    const double growth = gpu ? 4 : 2;
    // Long enough units that timing noise is small against them: up to an eighth of the budget.
    const double most = std::max(2.0, std::min(req.items, gpu ? 1e6 : 1e5));  // never more than the problem
    for (double items = gpu ? std::min(256.0, most) : 1; pts.size() < 14 && items <= most; items *= growth) {
        if (pts.size() >= 2) {
            const CalibrationPoint& last = pts.back();
            if (last.compute > budget / 8 || run.spent() + last.outside + last.io + growth * last.compute > budget) break;
        }
        pts.push_back(run.run(kind, 1, {fit_items(items), "--fit.chunk=" + std::to_string(static_cast<long>(items))}));
    }
    if (gpu || req.cores <= 1) return pts;
    const CalibrationPoint& last = pts.back();
    // As many fits per thread as the longest one-thread unit had (at least two), every core.
    const double per_thread = std::max(2.0, std::floor(last.items / req.cores));
    const double items = per_thread * req.cores;
    const double guess = last.outside + last.io + last.compute / last.items * per_thread;
    if (run.spent() + guess <= budget)
        pts.push_back(run.run(kind, req.cores, {fit_items(items), "--fit.chunk=" + std::to_string(static_cast<long>(items))}));
    return pts;
}

/// Reconstruction: two iterations at the configured mini-batch and at half of it on one thread
/// (the per-batch cost against its positions: the second iteration's, steady_iteration), then
/// the same on every core.
std::vector<CalibrationPoint> calibrate_recon(Runner& run, const AdviseRequest& req, const std::string& kind,
                                              int batch, double budget) {
    const std::vector<std::string> quiet = {"--solver.iterations=2", "--output.previews=false",
                                            "--output.checkpoint_minutes=100000", "--output.checkpoint_every=0"};
    auto with = [&](int b) {
        std::vector<std::string> v = quiet;
        v.push_back("--solver.batch_size=" + std::to_string(std::max(1, b)));
        return v;
    };
    std::vector<CalibrationPoint> pts;
    pts.push_back(run.run(kind, 1, with(batch)));
    if (batch > 1) pts.push_back(run.run(kind, 1, with(batch / 2)));
    const double guess = pts.front().outside + pts.front().io + 2 * pts.front().compute;
    if (kind == "cpu" && req.cores > 1 && run.spent() + guess <= budget)
        pts.push_back(run.run(kind, req.cores, with(batch)));
    // Two ranks sharing each mini-batch (on a GPU: sharing the device), through mpirun: what a
    // batch costs beyond its compute when ranks meet at its sums (barrier, reduction, the loss
    // terms; on one GPU, two contexts taking turns), which one process cannot show.
    if (req.mpirun && (kind == "gpu" || req.cores > 1) && run.spent() + 2 * guess + 1.0 <= budget) {
        CalibrationPoint p;
        p.workers = kind;
        p.threads = -2;  // marks the 2-rank run (speed_of reads it)
        p.items = batch;
        p.compute = run.run_ranks(2, kind, with(batch));
        if (p.compute > 0) pts.push_back(p);
    }
    return pts;
}

/// The speed of one worker kind from its points: the unit fit on one thread, the thread
/// efficiency from the run on every core; what lies outside compute and output: the median of
/// the one-thread runs, and the part of it the run on every core did faster (the set-up built
/// with the rank's threads: fixed_threaded).
WorkerSpeed speed_of(const std::vector<CalibrationPoint>& pts, int cores) {
    WorkerSpeed s;
    std::vector<double> x, y, outside;
    double outside_all = -1;
    int threads_all = 1;
    for (const CalibrationPoint& p : pts) {
        if (p.threads < 0) continue;  // the 2-rank run: below
        if (p.threads != 1) {
            outside_all = p.outside;
            threads_all = p.threads;
            continue;
        }
        outside.push_back(p.outside);
        x.push_back(p.items);
        y.push_back(p.compute / p.units);
    }
    s.unit = fit_linear(x, y);
    // The lower median: the first run of a kind pays one-time costs of this process (the
    // driver's compile of run-time kernels, first touches), which the runs it predicts find
    // cached; of two runs, the other one.
    std::sort(outside.begin(), outside.end());
    s.fixed = outside.empty() ? std::max(outside_all, 0.0) : outside[(outside.size() - 1) / 2];
    // Only a clear gain (a tenth of the set-up, and 20 ms) counts: timing noise is no threaded set-up.
    const double gain = outside_all >= 0 ? s.fixed - outside_all : 0.0;
    if (!outside.empty() && threads_all > 1 && gain > 0.1 * s.fixed && gain > 0.02)
        s.fixed_threaded = std::min(gain * threads_all / (threads_all - 1.0), s.fixed);
    s.measured = !x.empty();
    for (const CalibrationPoint& p : pts) {
        if (p.threads <= 1) continue;
        const double ideal = s.unit.b * std::ceil(p.items / cores);
        const double got = p.compute / p.units - s.unit.a;
        s.thread_efficiency = got > 0 ? std::clamp(ideal / got, 0.05, 1.0) : 1.0;
    }
    return s;
}

/// A reconstruction's 2-rank run (its last iteration, `batches` mini-batches) against what its
/// compute alone would take: 2 CPU ranks share a batch's positions; 2 ranks on one GPU share
/// the device's throughput. The difference per batch: WorkerSpeed::batch_sync.
void two_rank_sync(const std::vector<CalibrationPoint>& pts, bool gpu, double batches, WorkerSpeed& s) {
    for (const CalibrationPoint& p : pts) {
        if (p.threads != -2 || batches <= 0) continue;
        const double compute = s.unit.a + s.unit.b * (gpu ? p.items : std::ceil(p.items / 2));
        s.batch_sync = std::max(0.0, p.compute / batches - compute);
        s.batch_sync_measured = true;
    }
}

}  // namespace

double run_mpirun(int ranks, const std::vector<std::string>& args) {
    char self[4096];
    const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return -1;
    self[len] = '\0';
    const std::string np = std::to_string(ranks);
    std::vector<const char*> argv = {"mpirun", "--bind-to", "none", "--oversubscribe", "-np", np.c_str(), self};
    for (const std::string& a : args) argv.push_back(a.c_str());
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (const std::string& v : start_environment()) envp.push_back(const_cast<char*>(v.c_str()));
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    const auto t0 = std::chrono::steady_clock::now();
    pid_t pid = 0;
    const int rc = posix_spawnp(&pid, "mpirun", &actions, nullptr, const_cast<char* const*>(argv.data()), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) return -1;
    int status = 0;
    for (;;) {
        const pid_t done = waitpid(pid, &status, WNOHANG);
        if (done == pid) break;
        if (done < 0) return -1;
        if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(60)) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double process_age_seconds() {
    std::ifstream stat("/proc/self/stat"), up("/proc/uptime");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const size_t close = text.rfind(')');
    double uptime = 0;
    up >> uptime;
    if (close == std::string::npos || uptime <= 0) return 0.0;
    std::istringstream fields(text.substr(close + 2));  // from field 3 (state) on
    std::string f;
    for (int k = 3; k < 22 && fields >> f; ++k) {
    }
    double start_ticks = 0;
    fields >> start_ticks;  // field 22: start time in clock ticks after boot
    const double age = uptime - start_ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
    return age > 0 && age < 3600 ? age : 0.0;
}

ProblemModel calibrate(AdviseRequest req, const MpiContext& self, std::vector<CalibrationPoint>& points) {
    ProblemModel m;
    m.recon = req.recon;
    m.cores = req.cores;
    int batch = 1;
    if (req.recon) {
        const ReconConfig c = load_recon_config(req.config, req.overrides);
        m.iterations = c.iterations;
        // probe.defocus = auto: the trial runs are iterations of the same cost before the run's
        // own; the calibration runs skip them (--probe.defocus=0) and the model adds them.
        const PtychoDataset ds = recon::open_recon_dataset(c);
        m.trial_iterations = c.defocus_trial_iterations(ds.has_probe);
        if (std::isnan(c.probe_defocus)) req.overrides.push_back("--probe.defocus=0");
        // solver.batch_size = auto (0) is resolved as the run resolves it, from the positions;
        // the calibration runs are then given the number (they halve it).
        batch = recon::resolve_batch_size(c.batch_size, ds.count);
    } else {
        m.items = static_cast<double>(load_fit_config(req.config, req.overrides).replicas) + 1;
        req.items = m.items;
    }
    m.gpu_context = req.gpu ? req.gpu_context : 0.0;
    Runner run(req, self);
    std::vector<std::string> kinds;
    if (req.cpu) kinds.push_back("cpu");
    if (req.gpu) kinds.push_back("gpu");
    for (const std::string& kind : kinds) {
        // Each kind gets its share of what is left of the budget.
        const double budget = run.spent() + (req.budget - run.spent()) / static_cast<double>(kinds.size() - (&kind - kinds.data()));
        const std::vector<CalibrationPoint> pts =
            req.recon ? calibrate_recon(run, req, kind, batch, budget) : calibrate_fit(run, req, kind, budget);
        (kind == "cpu" ? m.cpu : m.gpu) = speed_of(pts, req.cores);
        if (kind == "gpu") {  // every GPU rank makes its own context and tears it down at exit
            m.gpu_teardown = cuda_reset_seconds(0);
            m.gpu.fixed += m.gpu_context + m.gpu_teardown;
        }
        if (req.recon && !pts.empty())  // the first run's units: the mini-batches of one iteration
            two_rank_sync(pts, kind == "gpu", pts.front().units, kind == "cpu" ? m.cpu : m.gpu);
        points.insert(points.end(), pts.begin(), pts.end());
    }
    std::vector<double> x, y;
    for (const CalibrationPoint& p : points) {
        x.push_back(req.recon ? 1.0 : p.items * p.units);
        y.push_back(p.io);
        if (p.allreduce_bytes > 0) m.allreduce_bytes = p.allreduce_bytes;
    }
    m.io = fit_linear(x, y);
    if (req.recon) {  // the output of a reconstruction does not grow with the calibration's size
        double sum = 0;
        for (double v : y) sum += v;
        m.io = Linear{y.empty() ? 0.0 : sum / static_cast<double>(y.size()), 0.0};
        m.batch = batch;
        m.items = points.front().items * points.front().units;  // positions of one pass
    }
    return m;
}

}  // namespace ef::advise

// SPDX-License-Identifier: MIT
#pragma once

#include <exception>
#include <string>
#include <vector>

#include <ensemblefit/comm/mpi_context.hpp>
#include <ensemblefit/core/error.hpp>
#include <ensemblefit/run/run_args.hpp>
#include <ensemblefit/run/run_settings.hpp>

#include "src/run/output_guard.hpp"
#include "src/run/run_failure.hpp"
#include "src/run/run_state.hpp"
#include "src/run/run_timing.hpp"

namespace ef {

/// The output the guard checks: its path, the config key's place, the files it must not be.
struct OutputTarget {
    std::string path;
    std::string where;
    std::vector<std::string> inputs;
    std::vector<CompanionOutput> companions;  ///< written beside the output (sidecar, previews)
};

/// What a run prints before it computes: the plan of a run, of a dry run, or of a run that
/// finds nothing left to do (--resume on a finished file).
enum class PlanCase { run, dry_run, nothing_to_do };

/**
 * A problem as the run layer sees it: its input, its worker, its units and its results. The
 * order of these steps, and everything between them (settings, placement, the output guard,
 * the timing, the abort), belongs to RunSession; a problem never calls them itself. Steps
 * that can fail on one rank only run inside collective() (the session's or the problem's own).
 */
class RunProblem {
   public:
    virtual ~RunProblem() = default;

    /// The config, read on every rank (inside collective()); returns its [run] keys.
    virtual RunSettings load_config() = 0;
    /// Whether a GPU's context is worth creating beside read_input() (a fit: yes).
    virtual bool prewarm_device() const { return false; }
    /// This rank's input (inside collective()); the threads are decided by then.
    virtual void read_input() = 0;
    /// Whether this problem can run on a GPU worker; when not, `auto` places it on the CPU.
    virtual bool gpu_capable() const { return true; }
    /// The worker of the placement's kind (collective: the problem wraps it in collective()).
    virtual void make_worker() = 0;
    /// The worker as the placement table shows it ("cpu, 4 threads", "gpu 0: NVIDIA H100").
    virtual std::string worker_description() const = 0;
    /// Collective steps once every rank has its worker (the reconstruction's gradient sums).
    virtual void worker_ready() {}
    virtual OutputTarget output_target() const = 0;
    /// Creates or reopens the output after the guard's `action` (collective); false when
    /// nothing is left to do. A dry run opens nothing.
    virtual bool open_output(OutputAction action) = 0;
    virtual void print_plan(PlanCase what) const = 0;
    /// Collective preparation whose errors every rank agrees on (outside the abort guard).
    virtual void before_compute() {}
    /// The units of work, until done or stopped by a signal.
    virtual void compute() = 0;
    /// A stop signal ended compute() early (the same on every rank).
    virtual bool stopped() const = 0;
    /// The results of a run that was not stopped (summary, final output).
    virtual void write_results() = 0;
    /// Whether this run's timing is reported (a stopped reconstruction's is not).
    virtual bool reports_timing() const { return true; }
    /// The problem's part of the end-of-run timing (its counts, columns and attributes).
    virtual TimingReport timing_report() = 0;
    /// Closes the output and says where it is.
    virtual void close() = 0;
    /// A stopped run's notice: what is on disk and how to finish it.
    virtual void report_stopped() const = 0;
    /// Ends the job after a failure mid-run, with what was written flushed and closed.
    [[noreturn]] virtual void abort(const std::exception& e) = 0;
};

/**
 * The one order of every run command (docs/architecture.md, "The run layer"): settings,
 * placement (binding, threads, worker kind), worker, output check, plan, compute, results,
 * timing, close, or abort. fit and reconstruct differ only in the RunProblem they hand it.
 */
class RunSession {
   public:
    RunSession(const MpiContext& ctx, const RunArgs& args) : state_(ctx, args) {}
    /// The decisions and clocks the problem reads (make the problem with it, then run()).
    RunState& state() { return state_; }
    void run(RunProblem& problem);

   private:
    void set_up(RunProblem& problem);
    void finish(RunProblem& problem);

    RunState state_;
};

}  // namespace ef

// SPDX-License-Identifier: MIT
#pragma once

#include <csignal>
#include <string>

#include <ensemblefit/comm/mpi_context.hpp>

namespace ef {

/**
 * A graceful stop before a wall-time limit (docs/architecture.md, "Stopping early"): SIGUSR1,
 * SIGTERM or SIGINT asks a run to stop at its next boundary (a fit: its next work unit; a
 * reconstruction: its next iteration), write what it finished, print the command that resumes
 * it and end with ExitCode::stopped (75).
 *
 * The handlers only store the signal's number in a lock-free atomic (async-signal-safe, any
 * thread may take it); the run reads stop_signal() at its boundaries and agrees on it over the
 * ranks through its own messages (the fit's dispatcher, the reconstruction's per-iteration
 * sum), so a signal that reaches one rank only, or the ranks at different times, stops every
 * rank at the same boundary. A second SIGTERM or SIGINT ends the process at once (the default
 * action), so an impatient user still gets today's immediate stop.
 *
 * StopSignals installs the handlers for one run's lifetime and restores the previous ones: only
 * the run commands (fit, reconstruct) take over the signals; every other command keeps the
 * default actions.
 */
class StopSignals {
   public:
    StopSignals();
    ~StopSignals();
    StopSignals(const StopSignals&) = delete;
    StopSignals& operator=(const StopSignals&) = delete;

   private:
    struct sigaction old_[3];
};

/// The stop signal this process received while StopSignals was installed (0: none).
int stop_signal();

/// "SIGUSR1", "SIGTERM", "SIGINT" (or "signal N").
std::string signal_name(int sig);

/// The command that continues this run: the recorded command line (argv as given to the
/// program, shell-quoted) with every --overwrite and --resume removed and one --resume added.
std::string resume_command();

/// Rank 0's notice of a stopped run (stderr): what `done` (e.g. "57 of 151 replica fits") is
/// in `output`, and the command that finishes it. Also marks the process as stopped early.
void report_stopped(const MpiContext& ctx, int sig, const std::string& done, const std::string& output);

/// True once report_stopped() was called: main() then exits with ExitCode::stopped.
bool stopped_early();

}  // namespace ef

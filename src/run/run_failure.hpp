// SPDX-License-Identifier: MIT
#pragma once

#include <chrono>
#include <exception>
#include <string>

#include <ensemblefit/comm/mpi_context.hpp>
#include <ensemblefit/core/error.hpp>

namespace ef {

/// A failure every rank met alike, agreed through collective() (a refused --resume): it ends
/// the run like a set-up error, one line from rank 0 and its exit code, without an abort.
class AgreedFailure : public Error {
   public:
    explicit AgreedFailure(const Error& e) : Error(e.code(), e.what()) {}
};

/**
 * A failure in the middle of a run, seen by some ranks only: the others would wait in the next
 * collective, so this rank prints one line and ends the job with MPI_Abort (exit code from the
 * ef::Error, 1 for anything else). The line names this rank and its host ("rank 1 (node7): ..."),
 * or, for ExitCode::lost, the silent rank the message already names. Ranks other than 0 wait
 * half a second first, so that a failure every rank meets at once is printed once, by rank 0,
 * whose MPI_Abort ends the others meanwhile. The caller has flushed and closed what it wrote.
 */
[[noreturn]] void abort_run(const MpiContext& ctx, const std::exception& e);

/**
 * The error for a rank silent for longer than `[run] heartbeat_timeout` (ExitCode::lost): names
 * it and its host, how long and what it was doing (`doing`, e.g. "while holding 2 work units").
 */
Error rank_lost(const MpiContext& ctx, int rank, double silent_seconds, double timeout, const std::string& doing);

/**
 * The time a polling loop has waited for another rank, without this process's own pauses: a
 * gap of more than a second between two polls (SIGSTOP, a descheduled VM) is this process
 * stopped, not the other rank silent, so the count starts again, wherever in the loop the
 * pause fell. Before naming a rank, ask fresh(): a pause since the last tick() voids it.
 */
class PollClock {
   public:
    /// Once per poll: the seconds waited so far.
    double tick() {
        const auto now = std::chrono::steady_clock::now();
        if (now - last_ > std::chrono::seconds(1)) {
            paused_ = true;
            waited_ = 0;
        } else {
            waited_ += std::chrono::duration<double>(now - last_).count();
        }
        last_ = now;
        return waited_;
    }
    /// Whether this process was paused while it waited here.
    bool paused() const { return paused_; }
    /// No pause since the last tick(): what it returned still holds.
    bool fresh() const { return std::chrono::steady_clock::now() - last_ <= std::chrono::seconds(1); }

   private:
    std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
    double waited_ = 0;
    bool paused_ = false;
};

}  // namespace ef

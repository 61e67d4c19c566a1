// SPDX-License-Identifier: MIT
#pragma once

#include <chrono>
#include <deque>
#include <vector>

#include <ensemblefit/comm/mpi_context.hpp>

namespace ef {

/**
 * The silence watch of a run whose ranks meet in collectives (a reconstruction's batch steps,
 * the end of a fit): barrier() is MPI_Barrier, except that a rank keeping the others waiting for
 * longer than `[run] heartbeat_timeout` is reported, in one line naming it and its host, and
 * the run ends with exit 4 (ExitCode::lost) instead of waiting forever.
 *
 * How: MPI_Ibarrier, tested in a loop (Open MPI's MPI_Barrier polls the same way, so the usual
 * wait costs what it did). A rank that has waited half the timeout tells rank 0 which barrier
 * it is in (rank 0 tells every rank), on a communicator of the watch's own; rank 0, after 1.5
 * timeouts, names the lowest rank that never said so: every rank that arrived within one
 * timeout of it has. The other ranks name rank 0 when it has not said so after 1.5 timeouts
 * and a second. Only time spent polling counts (PollClock): a process that was itself paused (a
 * poll more than a second after the last) starts counting again, and it, like one resumed from
 * a stop (SIGCONT: Open MPI sends it before killing a job), waits twice as long before naming
 * anyone. Only the thread that calls MPI calls it (MPI_THREAD_SERIALIZED suffices).
 */
class Heartbeat {
   public:
    /// Collective (duplicates the world communicator); `timeout` seconds, 0 = plain barriers.
    Heartbeat(const MpiContext& ctx, double timeout);
    ~Heartbeat();
    Heartbeat(const Heartbeat&) = delete;
    Heartbeat& operator=(const Heartbeat&) = delete;

    /// MPI_Barrier over the world, watched; `what` says where, for the error line.
    void barrier(const char* what);
    /// MPI_Wait for a nonblocking collective over the world (MPI_Iallreduce ...), watched the
    /// same way; every rank must call it for the same collectives in the same order.
    void wait(MPI_Request& req, const char* what);

   private:
    void announce();
    void drain();
    void check(double waited, double patience, const char* what) const;

    const MpiContext& ctx_;
    double timeout_;
    MPI_Comm comm_ = MPI_COMM_NULL;
    long long seq_ = 0;                  // barriers entered
    std::vector<long long> at_;          // the latest barrier each rank said it waits in
    std::deque<long long> sent_;         // buffers of announcements in flight
    std::chrono::steady_clock::time_point created_;  // a SIGCONT after this: more patience
};

}  // namespace ef

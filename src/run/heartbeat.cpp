// SPDX-License-Identifier: MIT
#include "src/run/heartbeat.hpp"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "src/run/run_failure.hpp"

namespace ef {

namespace {

constexpr int kAnnounceTag = 1;

// When this process last got SIGCONT (steady-clock ticks; 0: never). A process that was
// stopped may be resumed by a launcher that is ending the job (Open MPI sends SIGCONT before
// SIGTERM and SIGKILL): it must not then report the ranks it finds gone.
std::atomic<std::chrono::steady_clock::rep> g_continued{0};
static_assert(std::atomic<std::chrono::steady_clock::rep>::is_always_lock_free);

extern "C" void on_sigcont(int) { g_continued = std::chrono::steady_clock::now().time_since_epoch().count(); }

void watch_sigcont() {
    struct sigaction sa = {};
    sa.sa_handler = on_sigcont;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGCONT, &sa, nullptr);
}

/// Whether this process was resumed from a stop after `t0`.
bool continued_since(std::chrono::steady_clock::time_point t0) {
    const auto c = g_continued.load();
    return c != 0 && std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(c)) > t0;
}

}  // namespace

Heartbeat::Heartbeat(const MpiContext& ctx, double timeout) : ctx_(ctx), timeout_(ctx.size() > 1 ? timeout : 0) {
    if (timeout_ <= 0) return;
    EF_MPI_CHECK(MPI_Comm_dup(ctx_.world(), &comm_));
    at_.assign(static_cast<size_t>(ctx_.size()), 0);
    watch_sigcont();
    created_ = std::chrono::steady_clock::now();
}

Heartbeat::~Heartbeat() {
    if (comm_ == MPI_COMM_NULL) return;
    drain();  // announcements of barriers that completed after all
    MPI_Comm_free(&comm_);
}

void Heartbeat::barrier(const char* what) {
    if (timeout_ <= 0) {
        EF_MPI_CHECK(MPI_Barrier(ctx_.world()));
        return;
    }
    MPI_Request req = MPI_REQUEST_NULL;
    EF_MPI_CHECK(MPI_Ibarrier(ctx_.world(), &req));
    wait(req, what);
}

void Heartbeat::wait(MPI_Request& req, const char* what) {
    if (timeout_ <= 0) {
        EF_MPI_CHECK(MPI_Wait(&req, MPI_STATUS_IGNORE));
        return;
    }
    ++seq_;
    PollClock clock;  // a pause of this process, anywhere in this loop, restarts the count
    bool announced = false;
    for (int done = 0;;) {
        EF_MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
        if (done) return;
        const double waited = clock.tick();
        // Paused or resumed from a stop (here or in the work before this wait): the others may
        // be gone because a launcher is ending the job; wait twice as long before naming anyone.
        const double patience = clock.paused() || continued_since(created_) ? 2.0 : 1.0;
        if (waited < 0.5 * patience * timeout_) continue;  // the usual wait: polled as MPI_Barrier polls
        if (!announced) announce();
        announced = true;
        drain();
        if (clock.fresh()) check(waited, patience, what);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

/// This rank waits in barrier seq_: to rank 0, or, from rank 0, to every rank.
void Heartbeat::announce() {
    sent_.push_back(seq_);
    for (int r = 0; r < ctx_.size(); ++r) {
        if (r == ctx_.rank() || (ctx_.rank() != 0 && r != 0)) continue;
        MPI_Request req = MPI_REQUEST_NULL;
        EF_MPI_CHECK(MPI_Isend(&sent_.back(), 1, MPI_LONG_LONG, r, kAnnounceTag, comm_, &req));
        EF_MPI_CHECK(MPI_Request_free(&req));  // sent_ keeps the buffer for the run
    }
}

void Heartbeat::drain() {
    for (;;) {
        int flag = 0;
        MPI_Status st;
        EF_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, kAnnounceTag, comm_, &flag, &st));
        if (!flag) return;
        long long seq = 0;
        EF_MPI_CHECK(MPI_Recv(&seq, 1, MPI_LONG_LONG, st.MPI_SOURCE, kAnnounceTag, comm_, MPI_STATUS_IGNORE));
        long long& at = at_[static_cast<size_t>(st.MPI_SOURCE)];
        at = std::max(at, seq);
    }
}

/// rank_lost() for the rank the others wait for, once the waits above say which.
void Heartbeat::check(double waited, double patience, const char* what) const {
    const std::string doing = std::string("while the others wait for it in ") + what;
    if (ctx_.rank() != 0) {
        if (waited > patience * (1.5 * timeout_ + 1.0) && at_[0] < seq_) throw rank_lost(ctx_, 0, waited, timeout_, doing);
        return;
    }
    if (waited <= patience * 1.5 * timeout_) return;
    for (int r = 1; r < ctx_.size(); ++r)
        if (at_[static_cast<size_t>(r)] < seq_) throw rank_lost(ctx_, r, waited, timeout_, doing);
}

}  // namespace ef

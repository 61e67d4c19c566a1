// SPDX-License-Identifier: MIT
#include "src/run/heartbeat.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "src/run/run_failure.hpp"

namespace ef {

namespace {

constexpr int kAnnounceTag = 1;

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Heartbeat::Heartbeat(const MpiContext& ctx, double timeout) : ctx_(ctx), timeout_(ctx.size() > 1 ? timeout : 0) {
    if (timeout_ <= 0) return;
    EF_MPI_CHECK(MPI_Comm_dup(ctx_.world(), &comm_));
    at_.assign(static_cast<size_t>(ctx_.size()), 0);
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
    auto t0 = std::chrono::steady_clock::now(), last = t0;
    bool announced = false;
    for (int done = 0;;) {
        EF_MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
        if (done) return;
        if (seconds_since(last) > 1.0) t0 = std::chrono::steady_clock::now();  // this process was paused
        last = std::chrono::steady_clock::now();
        const double waited = seconds_since(t0);
        if (waited < 0.5 * timeout_) continue;  // the usual wait: polled as MPI_Barrier polls
        if (!announced) announce();
        announced = true;
        drain();
        check(waited, what);
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
void Heartbeat::check(double waited, const char* what) const {
    const std::string doing = std::string("while the others wait for it in ") + what;
    if (ctx_.rank() != 0) {
        if (waited > 1.5 * timeout_ + 1.0 && at_[0] < seq_) throw rank_lost(ctx_, 0, waited, timeout_, doing);
        return;
    }
    if (waited <= 1.5 * timeout_) return;
    for (int r = 1; r < ctx_.size(); ++r)
        if (at_[static_cast<size_t>(r)] < seq_) throw rank_lost(ctx_, r, waited, timeout_, doing);
}

}  // namespace ef

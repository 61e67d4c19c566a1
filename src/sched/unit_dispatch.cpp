// SPDX-License-Identifier: MIT
#include "src/sched/unit_dispatch.hpp"

#include <sys/prctl.h>

#include <algorithm>
#include <chrono>

namespace ef {

namespace {

constexpr int kResultTag = 101;
constexpr int kRequestTag = 102;
constexpr int kAssignTag = 103;

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

DispatchChannel::Event DispatchChannel::poll(std::vector<char>& packet, bool accept_results) {
    MPI_Status st;
    int flag = 0;
    EF_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, kRequestTag, ctx_.world(), &flag, &st));
    if (flag) {
        answer_request(st.MPI_SOURCE);
        return Event::request;
    }
    if (!accept_results) return Event::none;
    if (!receiving_.empty()) {  // a result begun earlier whose bytes have arrived
        const auto t0 = std::chrono::steady_clock::now();
        int index = MPI_UNDEFINED;
        EF_MPI_CHECK(MPI_Testany(static_cast<int>(receiving_.size()), receiving_.data(), &index, &flag, MPI_STATUS_IGNORE));
        stats.comm += seconds_since(t0);
        if (flag && index != MPI_UNDEFINED) {
            const auto at = static_cast<std::ptrdiff_t>(index);
            packet = std::move(receiving_bytes_[static_cast<size_t>(index)]);
            receiving_.erase(receiving_.begin() + at);
            receiving_bytes_.erase(receiving_bytes_.begin() + at);
            return Event::result;
        }
    }
    // At most one result a rank in flight on average: beyond that the others wait with their senders.
    if (receiving_.size() >= static_cast<size_t>(ctx_.size())) return Event::none;
    MPI_Message message = MPI_MESSAGE_NULL;
    EF_MPI_CHECK(MPI_Improbe(MPI_ANY_SOURCE, kResultTag, ctx_.world(), &flag, &message, &st));
    if (!flag) return Event::none;
    heard(st.MPI_SOURCE, -1);
    const auto t0 = std::chrono::steady_clock::now();
    int bytes = 0;
    EF_MPI_CHECK(MPI_Get_count(&st, MPI_BYTE, &bytes));
    packet.resize(static_cast<size_t>(bytes));
    MPI_Request req = MPI_REQUEST_NULL;
    EF_MPI_CHECK(MPI_Imrecv(packet.data(), bytes, MPI_BYTE, &message, &req));
    EF_MPI_CHECK(MPI_Test(&req, &flag, MPI_STATUS_IGNORE));  // small results are here already
    stats.mpi_calls += 1;
    stats.mpi_bytes += bytes;
    stats.comm += seconds_since(t0);
    if (flag) return Event::result;
    ++stats.results_received_later;
    receiving_.push_back(req);
    receiving_bytes_.push_back(std::move(packet));  // a vector's move keeps its data where MPI writes
    packet = {};
    return Event::receiving;
}

UnitSpan DispatchChannel::next(int rank, double throughput) {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    if (stop_signal_ != 0) return {};
    const UnitSpan u = queue_.next(rank, throughput);
    handed_out_ += u.size();
    return u;
}

void DispatchChannel::stop(int sig) {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    if (stop_signal_ == 0) stop_signal_ = sig;
}

int DispatchChannel::stopped() const {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    return stop_signal_;
}

std::int64_t DispatchChannel::handed_out() const {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    return handed_out_;
}

void DispatchChannel::answer_request(int source) {
    const auto t0 = std::chrono::steady_clock::now();
    heard(source, 0);
    double request[2] = {0, 0};  // throughput, and the signal that asks to stop (0: none)
    EF_MPI_CHECK(MPI_Recv(request, 2, MPI_DOUBLE, source, kRequestTag, ctx_.world(), MPI_STATUS_IGNORE));
    if (request[1] != 0) stop(static_cast<int>(request[1]));
    const double throughput = request[0];
    const UnitSpan u = next(source, throughput);
    const std::int64_t span[2] = {u.begin, u.end};
    EF_MPI_CHECK(MPI_Send(span, 2, MPI_INT64_T, source, kAssignTag, ctx_.world()));
    if (u.empty()) ++finished_;
    else heard(source, 1, throughput > 0 ? static_cast<double>(u.size()) / throughput : -1.0);
    ++stats.requests;
    stats.mpi_calls += 2;
    stats.mpi_bytes += static_cast<std::int64_t>(sizeof request + sizeof span);
    stats.sched += seconds_since(t0);
}

void DispatchChannel::watch(double timeout) {
    timeout_ = timeout;
    const auto now = std::chrono::steady_clock::now();
    heard_.assign(static_cast<size_t>(ctx_.size()), now);
    held_.assign(static_cast<size_t>(ctx_.size()), 0);
    unit_seconds_.assign(static_cast<size_t>(ctx_.size()), -1.0);
    next_check_ = last_call_ = resumed_ = now;
}

void DispatchChannel::heard(int source, int held_change, double unit_seconds) {
    if (timeout_ <= 0) return;
    const size_t r = static_cast<size_t>(source);
    const auto now = std::chrono::steady_clock::now();
    if (held_[r] > 0) longest_gap_ = std::max(longest_gap_, std::chrono::duration<double>(now - heard_[r]).count());
    heard_[r] = now;
    held_[r] += held_change;
    if (held_change > 0) unit_seconds_[r] = unit_seconds;
}

void DispatchChannel::check_silence() {
    if (timeout_ <= 0) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_call_ > std::chrono::seconds(1)) {  // this process was paused: no one's silence
        std::fill(heard_.begin(), heard_.end(), now);
        resumed_ = now;
    }
    last_call_ = now;
    if (now < next_check_) return;
    next_check_ = now + std::chrono::milliseconds(100);
    for (size_t r = 1; r < held_.size(); ++r) {
        const double silent = std::chrono::duration<double>(now - heard_[r]).count();
        const double busy = unit_seconds_[r] >= 0 ? held_[r] * unit_seconds_[r] : -1.0;
        if (held_[r] == 0 || silent <= silence_limit(busy)) continue;
        // A result held back while the store is full (poll's accept_results) is the rank's word:
        // it is alive, only its message waits.
        int waiting = 0;
        EF_MPI_CHECK(MPI_Iprobe(static_cast<int>(r), kResultTag, ctx_.world(), &waiting, MPI_STATUS_IGNORE));
        if (waiting) {
            heard_[r] = now;
            continue;
        }
        throw rank_lost(ctx_, static_cast<int>(r), silent, timeout_,
                        "while holding " + std::to_string(held_[r]) + " work unit" + (held_[r] > 1 ? "s" : ""));
    }
}

PollBackoff::PollBackoff() {
    // Linux rounds short sleeps up by the thread's timer slack (50 us by default); 1 us slack
    // keeps the polling loop's reply latency near its sleep time.
    prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
}

void PollBackoff::wait() {
    // Polling with a growing sleep (1 us after any message, up to 250 us when idle): no core
    // spins on MPI_Probe while rank 0 computes, an idle dispatcher wakes 4000 times a second
    // rather than 20000 (50 us cost ~15% of a core), and a worker's first request, the only one
    // prefetching cannot hide, waits at most ~250 us.
    std::this_thread::sleep_for(std::chrono::microseconds(us_));
    us_ = std::min(250, us_ * 2);
}

void UnitClient::request(double throughput, int stop_signal) {
    PhaseTimer::Scope sched(timer_, Phase::sched);
    const double request[2] = {throughput, static_cast<double>(stop_signal)};
    EF_MPI_CHECK(MPI_Send(request, 2, MPI_DOUBLE, 0, kRequestTag, ctx_.world()));
    mine_.mpi_calls += 1;
    mine_.mpi_bytes += static_cast<std::int64_t>(sizeof request);
}

UnitSpan UnitClient::receive() {
    PhaseTimer::Scope sched(timer_, Phase::sched);
    std::int64_t span[2] = {0, 0};
    // MPI_Test in a loop costs what a blocking MPI_Recv does (Open MPI polls there too), and
    // lets a rank 0 that stopped answering be reported instead of waited for forever.
    MPI_Request req = MPI_REQUEST_NULL;
    EF_MPI_CHECK(MPI_Irecv(span, 2, MPI_INT64_T, 0, kAssignTag, ctx_.world(), &req));
    PollClock clock;  // a pause of this process restarts the count
    for (int done = 0;;) {
        EF_MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
        if (done) break;
        const double waited = clock.tick();
        if (timeout_ > 0 && waited > timeout_ && clock.fresh()) {
            MPI_Cancel(&req);
            MPI_Request_free(&req);
            throw rank_lost(ctx_, 0, waited, timeout_,
                            "while rank " + std::to_string(ctx_.rank()) + " waits for its next work unit");
        }
    }
    mine_.mpi_calls += 1;
    mine_.mpi_bytes += static_cast<std::int64_t>(sizeof span);
    return UnitSpan{span[0], span[1]};
}

void UnitClient::send(std::vector<char>&& packet) {
    PhaseTimer::Scope comm(timer_, Phase::comm);
    buffers_.push_back(std::move(packet));
    sends_.emplace_back();
    EF_MPI_CHECK(MPI_Isend(buffers_.back().data(), static_cast<int>(buffers_.back().size()), MPI_BYTE, 0, kResultTag,
                           ctx_.world(), &sends_.back()));
    mine_.mpi_calls += 1;
    mine_.mpi_bytes += static_cast<std::int64_t>(buffers_.back().size());
}

void UnitClient::wait_sends() {
    PhaseTimer::Scope comm(timer_, Phase::comm);
    if (!sends_.empty()) EF_MPI_CHECK(MPI_Waitall(static_cast<int>(sends_.size()), sends_.data(), MPI_STATUSES_IGNORE));
}

}  // namespace ef

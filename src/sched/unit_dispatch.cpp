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

DispatchChannel::Event DispatchChannel::poll(std::vector<char>& packet) {
    MPI_Status st;
    int flag = 0;
    EF_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, ctx_.world(), &flag, &st));
    if (!flag) return Event::none;
    if (st.MPI_TAG == kRequestTag) {
        answer_request(st.MPI_SOURCE);
        return Event::request;
    }
    if (st.MPI_TAG != kResultTag) return Event::none;
    const auto t0 = std::chrono::steady_clock::now();
    int bytes = 0;
    EF_MPI_CHECK(MPI_Get_count(&st, MPI_BYTE, &bytes));
    packet.resize(static_cast<size_t>(bytes));
    EF_MPI_CHECK(MPI_Recv(packet.data(), bytes, MPI_BYTE, st.MPI_SOURCE, kResultTag, ctx_.world(), MPI_STATUS_IGNORE));
    stats.mpi_calls += 1;
    stats.mpi_bytes += bytes;
    stats.comm += seconds_since(t0);
    return Event::result;
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
    double request[2] = {0, 0};  // throughput, and the signal that asks to stop (0: none)
    EF_MPI_CHECK(MPI_Recv(request, 2, MPI_DOUBLE, source, kRequestTag, ctx_.world(), MPI_STATUS_IGNORE));
    if (request[1] != 0) stop(static_cast<int>(request[1]));
    const UnitSpan u = next(source, request[0]);
    const std::int64_t span[2] = {u.begin, u.end};
    EF_MPI_CHECK(MPI_Send(span, 2, MPI_INT64_T, source, kAssignTag, ctx_.world()));
    if (u.empty()) ++finished_;
    ++stats.requests;
    stats.mpi_calls += 2;
    stats.mpi_bytes += static_cast<std::int64_t>(sizeof request + sizeof span);
    stats.sched += seconds_since(t0);
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
    EF_MPI_CHECK(MPI_Recv(span, 2, MPI_INT64_T, 0, kAssignTag, ctx_.world(), MPI_STATUS_IGNORE));
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

// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <ensemblefit/comm/mpi_context.hpp>
#include <ensemblefit/core/error.hpp>
#include <ensemblefit/report/timing_report.hpp>
#include <ensemblefit/sched/phase_timer.hpp>
#include <ensemblefit/sched/work_queue.hpp>

#include "src/run/run_failure.hpp"
#include "src/core/thread_name.hpp"

namespace ef {

/// Rank 0's dispatcher-thread account: it runs beside rank 0's compute, so its busy time is
/// reported on its own rather than folded into rank 0's phases.
struct DispatchStats {
    double io = 0.0;     ///< storing result blocks
    double comm = 0.0;   ///< receiving result blocks
    double sched = 0.0;  ///< answering work requests
    std::int64_t requests = 0;
    /// Requests answered while the store was full and results waited with their senders: what
    /// a dispatcher that waited for the store could not have answered.
    std::int64_t requests_store_full = 0;
    /// Results whose bytes arrived after the poll that found them (their sender was not inside
    /// MPI to send the rest): received meanwhile without waiting, completed at a later poll.
    std::int64_t results_received_later = 0;
    std::int64_t mpi_calls = 0;
    std::int64_t mpi_bytes = 0;
    /// Service time per answered request, microseconds (0 without requests).
    double microseconds_per_request() const { return requests > 0 ? 1e6 * sched / static_cast<double>(requests) : 0.0; }
};

/**
 * The message side of rank 0's dispatcher: answers one work request from the WorkQueue, or
 * receives one packed result, per poll. Not a template, so the MPI protocol lives in one .cpp.
 */
class DispatchChannel {
   public:
    /// What a poll did: nothing, answered a request, has a whole result in `packet`, or began
    /// receiving a result whose bytes are still on their way (a later poll returns it).
    enum class Event { none, request, result, receiving };
    DispatchChannel(const MpiContext& ctx, WorkQueue& queue, std::mutex& queue_mutex)
        : ctx_(ctx), queue_(queue), queue_mutex_(queue_mutex) {}
    /// One non-blocking look at the messages; a result's bytes go to `packet`. Work requests
    /// come first, whatever arrived before them: a rank waiting for its next unit never waits
    /// behind a result being received or stored. Results are received only while
    /// `accept_results` (the store has room); until then they stay with their senders.
    /// Results are received without waiting (MPI_Imrecv): a result too large to travel eagerly
    /// (24 kB of 500 rows) needs its sender inside MPI to arrive where the MPI library cannot
    /// copy between processes by itself (Open MPI's shared memory without CMA, TCP), and a sender
    /// computing its next unit is not; a blocking receive kept this thread waiting ~1 ms per
    /// unit for that (docs/scale-model.md). Such a result completes at a later poll.
    /// On the failure path (the thread leaves with receives pending) the process ends.
    Event poll(std::vector<char>& packet, bool accept_results = true);
    /// Other ranks told that there is no more work.
    int finished() const { return finished_; }
    /// The next unit for `rank` from the WorkQueue (any thread), or an empty one once stopped.
    UnitSpan next(int rank, double throughput);
    /// A graceful stop (src/run/stop_request.hpp): no more units are handed out; `sig` is the
    /// signal that asked for it (on rank 0, or on the rank whose request carried it).
    void stop(int sig);
    /// The stop's signal (0: not stopped), and the items handed out so far (final once stopped).
    int stopped() const;
    std::int64_t handed_out() const;
    /// Silence watch (`[run] heartbeat_timeout` seconds, 0 = off): from now on, when each rank
    /// was last heard from and how many units it holds.
    void watch(double timeout);
    /// How long a rank may stay silent while its units should take `busy` seconds (at its
    /// measured speed; < 0: not measured yet): the timeout beyond twice that, or beyond twice
    /// the longest silence seen so far. Long units are thus no false alarm; only a rank's first
    /// unit must take less than the timeout.
    double silence_limit(double busy) const { return timeout_ + 2 * (busy >= 0 ? busy : longest_gap_); }
    /// Throws rank_lost() for the lowest rank silent for longer than its silence_limit() while
    /// it holds a unit; checks at most ten times a second. Called every poll: a gap of over a
    /// second between calls means this process itself was stopped (SIGSTOP, then SIGCONT), and
    /// every rank's silence counts from now.
    void check_silence();
    /// When this process last resumed after such a pause (rank 0's own unit counts from then).
    std::chrono::steady_clock::time_point resumed() const { return resumed_; }
    DispatchStats stats;

   private:
    void answer_request(int source);
    void heard(int source, int held_change, double unit_seconds = 0);
    const MpiContext& ctx_;
    WorkQueue& queue_;
    std::mutex& queue_mutex_;
    int finished_ = 0;
    int stop_signal_ = 0;          // guarded by queue_mutex_
    std::int64_t handed_out_ = 0;  // guarded by queue_mutex_
    double timeout_ = 0, longest_gap_ = 0;
    std::chrono::steady_clock::time_point next_check_, last_call_, resumed_;
    std::vector<std::chrono::steady_clock::time_point> heard_;  // per rank
    std::vector<int> held_;                                     // units assigned, not yet returned
    std::vector<double> unit_seconds_;  // the last unit's expected time at the rank's speed (-1: unknown)
    std::vector<MPI_Request> receiving_;             // results begun, bytes still on their way
    std::vector<std::vector<char>> receiving_bytes_;  // their buffers, in the same order
};

/// A polling loop's sleep: 1 us after any message, doubling to 250 us when idle.
class PollBackoff {
   public:
    PollBackoff();  ///< also lowers this thread's timer slack, so short sleeps stay short
    void reset() { us_ = 1; }
    void wait();

   private:
    int us_ = 1;
};

/// A worker rank's side of the protocol (request a unit, receive it, send a packed result).
class UnitClient {
   public:
    UnitClient(const MpiContext& ctx, PhaseTimer& timer, RankTiming& mine, double heartbeat_timeout)
        : ctx_(ctx), timer_(timer), mine_(mine), timeout_(heartbeat_timeout) {}
    /// `stop_signal` != 0 asks rank 0 to stop handing out units (a stop signal reached this rank).
    void request(double throughput, int stop_signal = 0);
    /// The answer to the last request; rank_lost() for rank 0 when none comes within the
    /// heartbeat timeout (rank 0 answers from a thread of its own within microseconds).
    UnitSpan receive();
    void send(std::vector<char>&& packet);
    void wait_sends();

   private:
    const MpiContext& ctx_;
    PhaseTimer& timer_;
    RankTiming& mine_;
    double timeout_;
    std::deque<std::vector<char>> buffers_;
    std::vector<MPI_Request> sends_;
};

/**
 * The run's work units over all ranks, for any result type `Block` (with `pack()`,
 * `static unpack(const char*, size_t)` and `size()`).
 *
 * Units come from the WorkQueue on rank 0. Rank 0's main thread computes like every other rank
 * while a dispatcher thread answers requests, receives results and stores them (its own and
 * the other ranks'); other ranks keep one request in flight (prefetch), so the reply is usually
 * there before they need it. `compute` runs under Phase::compute on the calling thread;
 * `store` runs on rank 0's dispatcher thread only.
 */
template <class Block>
class UnitDispatch {
   public:
    struct Handlers {
        std::function<void(const UnitSpan&, Block&)> compute;
        std::function<double()> throughput;        ///< items per compute second, so far
        std::function<void(Block&&)> store;        ///< rank 0: a finished block (its to keep)
        /// Rank 0: whether store() would take a block now without waiting (optional; unset:
        /// always). While it says no, results stay with their senders and requests are still
        /// answered, so a slow disk delays the output, never the handing out of work.
        std::function<bool()> store_ready;
        std::function<int()> stop_signal;          ///< != 0: stop at the next unit (optional)
        /// Rank 0: the dispatcher failed or found a silent rank; called on its thread, ends the
        /// run and does not return (unset: the main thread rethrows after its current unit).
        std::function<void(const std::exception&)> fail;
        /// Rows written where they were computed (optional; docs/parallel-output.md): every rank
        /// hands its finished block to `hand_off` (its rows go to disk from there) and sends rank
        /// 0, instead of the block, what `receipts` returns once their rows are on disk;
        /// `finish_hand_off` waits until every block handed off has its receipt.
        std::function<void(Block&&)> hand_off;
        std::function<std::vector<Block>()> receipts;
        std::function<void()> finish_hand_off;
        double heartbeat_timeout = 0;  ///< `[run] heartbeat_timeout`, seconds (0 = no watch)
    };

    UnitDispatch(const MpiContext& ctx, PhaseTimer& timer, RankTiming& mine, Handlers h)
        : ctx_(ctx), timer_(timer), mine_(mine), h_(std::move(h)) {}

    /// Every unit of `total` items; returns rank 0's dispatcher account (zero elsewhere). After a
    /// graceful stop fewer were computed: every unit handed out is still computed and stored.
    DispatchStats run(WorkQueue* queue, std::int64_t total) {
        if (ctx_.is_root()) return run_root(*queue, total);
        run_worker();
        return {};
    }
    /// Rank 0: the signal that stopped the run early (0: it ran to the end).
    int stopped() const { return stopped_; }

   private:
    DispatchStats run_root(WorkQueue& queue, std::int64_t total) {
        std::mutex queue_mutex;
        DispatchChannel channel(ctx_, queue, queue_mutex);
        channel.watch(h_.heartbeat_timeout);
        std::thread dispatcher([&] {
            name_this_thread("ef-dispatch");
            serve(channel, total);
        });
        try {
            compute_root(channel);
        } catch (...) {
            stop_ = true;  // the dispatcher must stop calling MPI before this rank aborts
            dispatcher.join();
            throw;
        }
        {
            PhaseTimer::Scope idle(timer_, Phase::idle);
            dispatcher.join();
        }
        if (failed_) std::rethrow_exception(failure_);
        stopped_ = channel.stopped();
        return channel.stats;
    }

    /// Rank 0's main thread: units from the queue until none is left (or a stop).
    void compute_root(DispatchChannel& channel) {
        for (;;) {
            UnitSpan u;
            {
                PhaseTimer::Scope sched(timer_, Phase::sched);
                if (const int sig = local_stop_signal()) channel.stop(sig);
                u = channel.next(0, h_.throughput());
            }
            if (u.empty() || failed_) break;
            Block block;
            const double speed = h_.throughput();
            busy_seconds_ = speed > 0 ? static_cast<double>(u.size()) / speed : -1.0;
            busy_since_ = std::chrono::steady_clock::now().time_since_epoch().count();
            compute(u, block);
            busy_since_ = 0;
            if (h_.hand_off) {  // the dispatcher stores its receipt (drain_local)
                hand_off(std::move(block));
                continue;
            }
            std::lock_guard<std::mutex> lock(local_mutex_);
            local_.push_back(std::move(block));
        }
        finish_hand_off();
    }

    /// Rank 0's own unit, watched like the other ranks' (a hung GPU on rank 0).
    void check_own_unit(const DispatchChannel& channel) const {
        const auto since = busy_since_.load();
        if (h_.heartbeat_timeout <= 0 || since == 0) return;
        const auto began = std::max(channel.resumed(), std::chrono::steady_clock::time_point(
                                                           std::chrono::steady_clock::duration(since)));
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
        if (s > channel.silence_limit(busy_seconds_))
            throw rank_lost(ctx_, 0, s, h_.heartbeat_timeout, "in one work unit");
    }

    /// Rank 0's dispatcher thread: until every item handed out is stored (every item, unless
    /// stopped) and every rank told to stop.
    void serve(DispatchChannel& channel, std::int64_t total) {
        try {
            PollBackoff backoff;
            std::vector<char> packet;
            std::int64_t stored = 0;
            while (!stop_ && (stored < (channel.stopped() ? channel.handed_out() : total) ||
                              channel.finished() < ctx_.size() - 1)) {
                if (const int sig = local_stop_signal()) channel.stop(sig);
                channel.check_silence();
                check_own_unit(channel);
                const bool room = store_ready();
                const auto event = channel.poll(packet, room);
                if (event == DispatchChannel::Event::request && !room) ++channel.stats.requests_store_full;
                if (event == DispatchChannel::Event::result)
                    stored += store(Block::unpack(packet.data(), packet.size()), channel.stats);
                const std::int64_t local = drain_local(channel.stats);
                stored += local;
                if (event != DispatchChannel::Event::none || local > 0) backoff.reset();
                else backoff.wait();
            }
        } catch (const std::exception& e) {
            if (h_.fail) h_.fail(e);  // ends the run now, not after rank 0's current unit
            failure_ = std::current_exception();
            failed_ = true;
        }
    }

    bool store_ready() const { return !h_.store_ready || h_.store_ready(); }

    /// Rank 0's own finished blocks, to the store while it has room.
    std::int64_t drain_local(DispatchStats& stats) {
        if (h_.receipts) {
            std::vector<Block> done = h_.receipts();
            std::lock_guard<std::mutex> lock(local_mutex_);
            for (Block& b : done) local_.push_back(std::move(b));
        }
        std::int64_t n = 0;
        while (store_ready()) {
            Block b;
            {
                std::lock_guard<std::mutex> lock(local_mutex_);
                if (local_.empty()) return n;
                b = std::move(local_.front());
                local_.pop_front();
            }
            n += store(std::move(b), stats);
        }
        return n;
    }

    std::int64_t store(Block&& b, DispatchStats& stats) {
        const auto t0 = std::chrono::steady_clock::now();
        const auto n = static_cast<std::int64_t>(b.size());
        h_.store(std::move(b));
        stats.io += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return n;
    }

    void run_worker() {
        UnitClient client(ctx_, timer_, mine_, h_.heartbeat_timeout);
        client.request(h_.throughput(), local_stop_signal());
        UnitSpan u = client.receive();
        while (!u.empty()) {
            client.request(h_.throughput(), local_stop_signal());  // prefetch the next unit while this one computes
            Block block;
            compute(u, block);
            if (h_.hand_off) {
                hand_off(std::move(block));
                send_receipts(client);
            } else {
                client.send(block.pack());
            }
            u = client.receive();
        }
        if (h_.finish_hand_off) {
            finish_hand_off();
            send_receipts(client);
        }
        client.wait_sends();
    }

    /// Rows written where they were computed: a finished block to this rank's writer, and at the
    /// end the wait for every receipt, both timed as the rank's io.
    void hand_off(Block&& block) {
        PhaseTimer::Scope io(timer_, Phase::io);
        h_.hand_off(std::move(block));
    }
    void finish_hand_off() {
        if (!h_.finish_hand_off) return;
        PhaseTimer::Scope io(timer_, Phase::io);
        h_.finish_hand_off();
    }

    void send_receipts(UnitClient& client) {
        for (const Block& r : h_.receipts()) client.send(r.pack());
    }

    int local_stop_signal() const { return h_.stop_signal ? h_.stop_signal() : 0; }

    void compute(const UnitSpan& u, Block& block) {
        PhaseTimer::Scope c(timer_, Phase::compute);
        h_.compute(u, block);
        mine_.replicas += u.size();
        mine_.units += 1;
    }

    const MpiContext& ctx_;
    PhaseTimer& timer_;
    RankTiming& mine_;
    Handlers h_;
    std::mutex local_mutex_;
    std::deque<Block> local_;  // rank 0's own results, stored by the dispatcher thread
    std::atomic<bool> failed_{false};
    std::atomic<bool> stop_{false};  // rank 0's main thread failed: the dispatcher stops
    std::atomic<std::chrono::steady_clock::rep> busy_since_{0};  // rank 0's current unit began (0: none)
    std::atomic<double> busy_seconds_{-1.0};  // and should take, at rank 0's speed (-1: unknown)
    std::exception_ptr failure_;
    int stopped_ = 0;
};

}  // namespace ef

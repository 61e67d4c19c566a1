// SPDX-License-Identifier: MIT
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
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

namespace ef {

/// Rank 0's dispatcher-thread account: it runs beside rank 0's compute, so its busy time is
/// reported on its own rather than folded into rank 0's phases.
struct DispatchStats {
    double io = 0.0;     ///< storing result blocks
    double comm = 0.0;   ///< receiving result blocks
    double sched = 0.0;  ///< answering work requests
    std::int64_t requests = 0;
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
    enum class Event { none, request, result };
    DispatchChannel(const MpiContext& ctx, WorkQueue& queue, std::mutex& queue_mutex)
        : ctx_(ctx), queue_(queue), queue_mutex_(queue_mutex) {}
    /// One non-blocking look at the messages; a result's bytes go to `packet`.
    Event poll(std::vector<char>& packet);
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
    DispatchStats stats;

   private:
    void answer_request(int source);
    const MpiContext& ctx_;
    WorkQueue& queue_;
    std::mutex& queue_mutex_;
    int finished_ = 0;
    int stop_signal_ = 0;          // guarded by queue_mutex_
    std::int64_t handed_out_ = 0;  // guarded by queue_mutex_
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
    UnitClient(const MpiContext& ctx, PhaseTimer& timer, RankTiming& mine) : ctx_(ctx), timer_(timer), mine_(mine) {}
    /// `stop_signal` != 0 asks rank 0 to stop handing out units (a stop signal reached this rank).
    void request(double throughput, int stop_signal = 0);
    UnitSpan receive();
    void send(std::vector<char>&& packet);
    void wait_sends();

   private:
    const MpiContext& ctx_;
    PhaseTimer& timer_;
    RankTiming& mine_;
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
        std::function<void(const Block&)> store;   ///< rank 0: a finished block
        std::function<int()> stop_signal;          ///< != 0: stop at the next unit (optional)
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
        std::thread dispatcher([&] { serve(channel, total); });
        for (;;) {
            UnitSpan u;
            {
                PhaseTimer::Scope sched(timer_, Phase::sched);
                if (const int sig = local_stop_signal()) channel.stop(sig);
                u = channel.next(0, h_.throughput());
            }
            if (u.empty() || failed_) break;
            Block block;
            compute(u, block);
            std::lock_guard<std::mutex> lock(local_mutex_);
            local_.push_back(std::move(block));
        }
        {
            PhaseTimer::Scope idle(timer_, Phase::idle);
            dispatcher.join();
        }
        if (failed_) throw runtime_error("dispatcher: " + failure_);
        stopped_ = channel.stopped();
        return channel.stats;
    }

    /// Rank 0's dispatcher thread: until every item is stored and every rank told to stop.
    void serve(DispatchChannel& channel, std::int64_t total) {
        try {
            PollBackoff backoff;
            std::vector<char> packet;
            std::int64_t stored = 0;
            while (stored < (channel.stopped() ? channel.handed_out() : total) || channel.finished() < ctx_.size() - 1) {
                if (const int sig = local_stop_signal()) channel.stop(sig);
                const auto event = channel.poll(packet);
                if (event == DispatchChannel::Event::result) stored += store(Block::unpack(packet.data(), packet.size()), channel.stats);
                const std::int64_t local = drain_local(channel.stats);
                stored += local;
                if (event != DispatchChannel::Event::none || local > 0) backoff.reset();
                else backoff.wait();
            }
        } catch (const std::exception& e) {
            failure_ = e.what();
            failed_ = true;
        }
    }

    std::int64_t drain_local(DispatchStats& stats) {
        std::int64_t n = 0;
        for (;;) {
            Block b;
            {
                std::lock_guard<std::mutex> lock(local_mutex_);
                if (local_.empty()) return n;
                b = std::move(local_.front());
                local_.pop_front();
            }
            n += store(b, stats);
        }
    }

    std::int64_t store(const Block& b, DispatchStats& stats) {
        const auto t0 = std::chrono::steady_clock::now();
        h_.store(b);
        stats.io += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return static_cast<std::int64_t>(b.size());
    }

    void run_worker() {
        UnitClient client(ctx_, timer_, mine_);
        client.request(h_.throughput(), local_stop_signal());
        UnitSpan u = client.receive();
        while (!u.empty()) {
            client.request(h_.throughput(), local_stop_signal());  // prefetch the next unit while this one computes
            Block block;
            compute(u, block);
            client.send(block.pack());
            u = client.receive();
        }
        client.wait_sends();
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
    std::string failure_;
    int stopped_ = 0;
};

}  // namespace ef

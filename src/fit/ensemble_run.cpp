// SPDX-License-Identifier: MIT
#include <ensemblefit/fit/ensemble_run.hpp>

#include <sys/prctl.h>
#include <unistd.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <mutex>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <sstream>
#include <chrono>
#include <thread>

#include <ensemblefit/core/config.hpp>
#include <ensemblefit/core/error.hpp>
#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/io/data_table.hpp>
#include <ensemblefit/report/ensemble_summary.hpp>
#include <ensemblefit/report/progress_line.hpp>
#include <ensemblefit/report/timing_report.hpp>
#include <ensemblefit/sched/work_queue.hpp>
#include <ensemblefit/sched/phase_timer.hpp>
#include <ensemblefit/worker/worker.hpp>

#include "src/io/results_file.hpp"
#include "src/report/summary_table.hpp"
#include "src/report/timing_file.hpp"

namespace ef {

namespace {

constexpr int kResultTag = 101;
constexpr int kRequestTag = 102;
constexpr int kAssignTag = 103;

bool file_exists(const std::string& path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0;
}

std::string hex(std::uint64_t v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
    return buf;
}

RunIdentity identity_of(const FitProblem& pb, const ShardSpec& shard) {
    RunIdentity id;
    id.canonical_config = pb.config.canonical_text();
    id.resolved_config = pb.config.resolved_text();
    id.data_checksum = hex(pb.data.checksum);
    id.model = pb.config.model_name;
    id.param_names = pb.config.param_names();
    id.replicas_total = pb.config.replicas;
    id.shard = shard;
    id.span = shard_span(pb.config.replicas, shard);
    return id;
}

/// Rank 0's dispatcher-thread account: it runs beside rank 0's compute, so its busy time is
/// reported on its own rather than folded into rank 0's phases.
struct DispatcherStats {
    double io = 0.0;     ///< writing result blocks
    double comm = 0.0;   ///< receiving result blocks
    double sched = 0.0;  ///< answering work requests
    std::int64_t requests = 0;
    std::int64_t mpi_calls = 0;
    std::int64_t mpi_bytes = 0;
};

/// Gathers every rank's phase times on rank 0; writes /timing, the JSON sidecar, the table.
void report_timing(const MpiContext& ctx, PhaseTimer& timer, RankTiming mine, ResultsFile* out,
                   const std::string& json_path, const std::vector<std::string>& placement,
                   const DispatcherStats& ds, SchedPolicy policy, const std::string& baseline, bool print) {
    timer.stop();
    std::vector<double> row(timer.all().begin(), timer.all().end());
    row.push_back(timer.wall());
    row.push_back(static_cast<double>(mine.replicas));
    row.push_back(static_cast<double>(mine.units));
    row.push_back(static_cast<double>(mine.mpi_calls));
    row.push_back(static_cast<double>(mine.mpi_bytes));
    const size_t W = row.size();
    std::vector<double> all(ctx.is_root() ? W * static_cast<size_t>(ctx.size()) : 0);
    EF_MPI_CHECK(MPI_Gather(row.data(), static_cast<int>(W), MPI_DOUBLE, all.data(), static_cast<int>(W),
                            MPI_DOUBLE, 0, ctx.world()));
    if (!ctx.is_root()) return;
    const size_t R = static_cast<size_t>(ctx.size());
    const size_t P = static_cast<size_t>(kPhaseCount);
    std::vector<RankTiming> ranks(R);
    for (size_t r = 0; r < R; ++r) {
        for (size_t p = 0; p < P; ++p) ranks[r].phase[p] = all[r * W + p];
        ranks[r].wall = all[r * W + P];
        ranks[r].replicas = static_cast<std::int64_t>(all[r * W + P + 1]);
        ranks[r].units = static_cast<std::int64_t>(all[r * W + P + 2]);
        ranks[r].mpi_calls = static_cast<std::int64_t>(all[r * W + P + 3]);
        ranks[r].mpi_bytes = static_cast<std::int64_t>(all[r * W + P + 4]);
    }
    ranks[0].mpi_calls += ds.mpi_calls;
    ranks[0].mpi_bytes += ds.mpi_bytes;
    PopMetrics m = pop_metrics(ranks);
    if (!baseline.empty()) {
        const RunTiming b = read_run_timing(baseline);
        apply_baseline(m, ranks, b.ranks, b.metrics.runtime);
    }
    const double per_request_us = ds.requests > 0 ? 1e6 * ds.sched / static_cast<double>(ds.requests) : 0.0;
    if (out) {
        h5::File& f = out->file();
        auto put = [&](const std::string& name, const auto& v) {
            if (f.exists(name)) H5Ldelete(f.id(), name.c_str(), H5P_DEFAULT);
            f.write(name, v);
        };
        for (size_t p = 0; p < P; ++p) {
            std::vector<double> col(R);
            for (size_t r = 0; r < R; ++r) col[r] = ranks[r].phase[p];
            put(std::string("/timing/") + to_string(static_cast<Phase>(p)), col);
        }
        std::vector<double> wall(R);
        std::vector<std::int64_t> reps(R), units(R), calls(R), bytes(R);
        for (size_t r = 0; r < R; ++r) {
            wall[r] = ranks[r].wall;
            reps[r] = ranks[r].replicas;
            units[r] = ranks[r].units;
            calls[r] = ranks[r].mpi_calls;
            bytes[r] = ranks[r].mpi_bytes;
        }
        put("/timing/wall", wall);
        put("/timing/replicas", reps);
        put("/timing/units", units);
        put("/timing/mpi_calls", calls);
        put("/timing/mpi_bytes", bytes);
        f.set_attr("/timing", "ranks", static_cast<std::int64_t>(R));
        f.set_attr("/timing", "policy", std::string(to_string(policy)));
        f.set_attr("/timing", "placement", placement);
        f.set_attr("/timing", "runtime_seconds", m.runtime);
        f.set_attr("/timing", "load_balance", m.load_balance);
        f.set_attr("/timing", "communication_efficiency", m.communication_efficiency);
        f.set_attr("/timing", "parallel_efficiency", m.parallel_efficiency);
        f.set_attr("/timing", "transfer_efficiency", m.transfer_efficiency);
        f.set_attr("/timing", "serialization_efficiency", m.serialization_efficiency);
        if (m.speedup > 0) {
            f.set_attr("/timing", "baseline", baseline);
            f.set_attr("/timing", "speedup", m.speedup);
            f.set_attr("/timing", "computation_scalability", m.computation_scalability);
            f.set_attr("/timing", "global_efficiency", m.global_efficiency);
        }
        f.set_attr("/timing", "dispatcher_io_seconds", ds.io);
        f.set_attr("/timing", "dispatcher_comm_seconds", ds.comm);
        f.set_attr("/timing", "dispatcher_sched_seconds", ds.sched);
        f.set_attr("/timing", "dispatch_requests", ds.requests);
        f.set_attr("/timing", "dispatch_microseconds_per_request", per_request_us);
        f.flush();
    }
    char extra[512];
    std::snprintf(extra, sizeof extra,
                  "  \"policy\": \"%s\",\n  \"dispatcher\": {\"io_seconds\": %.9g, \"comm_seconds\": %.9g, "
                  "\"sched_seconds\": %.9g, \"requests\": %lld, \"microseconds_per_request\": %.9g}",
                  to_string(policy), ds.io, ds.comm, ds.sched, static_cast<long long>(ds.requests), per_request_us);
    if (!json_path.empty()) {
        std::FILE* j = std::fopen(json_path.c_str(), "w");
        if (j) {
            const std::string text = timing_json(ranks, m, placement, extra);
            std::fwrite(text.data(), 1, text.size(), j);
            std::fclose(j);
        }
    }
    if (print) {
        int idle = 0;
        for (const auto& r : ranks) idle += r.replicas == 0 ? 1 : 0;
        std::printf("%s", format_timing_table(ranks, m).c_str());
        if (idle > 0) std::printf("  note: %d rank(s) had no replicas to fit\n", idle);
        std::printf("  policy %s; rank 0 dispatcher thread (concurrent with its compute): io %.3f s, comm %.3f s, "
                    "%lld requests at %.1f us each\n",
                    to_string(policy), ds.io, ds.comm, static_cast<long long>(ds.requests), per_request_us);
    }
}

}  // namespace

int resolve_threads(int configured, int local_ranks, std::string& source, std::string& warning) {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    int threads = 0;
    auto from_env = [](const char* name) {
        const char* v = std::getenv(name);
        if (!v || !*v) return 0;
        char* end = nullptr;
        const long n = std::strtol(v, &end, 10);
        return (*end == '\0' && n > 0) ? static_cast<int>(n) : 0;
    };
    if (configured > 0) {
        threads = configured;
        source = "run.threads";
    } else if ((threads = from_env("SLURM_CPUS_PER_TASK")) > 0) {
        source = "SLURM_CPUS_PER_TASK";
    } else if ((threads = from_env("OMP_NUM_THREADS")) > 0) {
        source = "OMP_NUM_THREADS";
    } else {
        threads = std::max(1, cores / std::max(1, local_ranks));
        source = "cores/ranks";
    }
    warning.clear();
    if (static_cast<long>(threads) * local_ranks > cores) {
        warning = "oversubscribed: " + std::to_string(local_ranks) + " rank(s) x " +
                  std::to_string(threads) + " thread(s) on " + std::to_string(cores) +
                  " core(s) of this node";
    }
    return threads;
}

double slowdown_factor(const std::string& spec, int rank) {
    double factor = 1.0;
    std::stringstream ss(spec);
    std::string item;
    while (std::getline(ss, item, ',')) {
        const auto colon = item.find(':');
        char* e1 = nullptr;
        char* e2 = nullptr;
        const std::string a = item.substr(0, colon);
        const std::string b = colon == std::string::npos ? "" : item.substr(colon + 1);
        const long r = std::strtol(a.c_str(), &e1, 10);
        const double f = std::strtod(b.c_str(), &e2);
        if (colon == std::string::npos || a.empty() || b.empty() || *e1 || *e2 || r < 0 || !(f >= 1.0))
            throw usage_error("--debug.slowdown: expected RANK:FACTOR[,RANK:FACTOR] with FACTOR >= 1, got '" +
                              spec + "'");
        if (r == rank) factor = f;
    }
    return factor;
}

void parse_shard(const std::string& text, int& index, int& count) {
    if (text.empty()) {
        index = 0;
        count = 1;
        return;
    }
    if (text == "auto") {
        const char* id = std::getenv("SLURM_ARRAY_TASK_ID");
        const char* n = std::getenv("SLURM_ARRAY_TASK_COUNT");
        const char* mn = std::getenv("SLURM_ARRAY_TASK_MIN");
        if (!id || !n)
            throw usage_error("--shard auto: SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT are not set "
                              "(not a Slurm array task?)");
        index = std::atoi(id) - (mn ? std::atoi(mn) : 0);
        count = std::atoi(n);
    } else {
        const auto slash = text.find('/');
        char* e1 = nullptr;
        char* e2 = nullptr;
        const std::string a = text.substr(0, slash), b = slash == std::string::npos ? "" : text.substr(slash + 1);
        index = static_cast<int>(std::strtol(a.c_str(), &e1, 10));
        count = static_cast<int>(std::strtol(b.c_str(), &e2, 10));
        if (slash == std::string::npos || a.empty() || b.empty() || *e1 || *e2)
            throw usage_error("--shard: expected i/n (e.g. 0/4) or auto, got '" + text + "'");
    }
    if (count < 1 || index < 0 || index >= count)
        throw usage_error("--shard: shard index " + std::to_string(index) + " is outside 0.." +
                          std::to_string(count - 1));
}

void run_fit(const FitRunOptions& opt, const MpiContext& ctx) {
    PhaseTimer timer;
    const bool root = ctx.is_root();

    // Setup: identical on every rank, so input errors are thrown identically everywhere.
    // EF_SETUP_TRACE=1 prints each rank's setup steps (where a short job's time goes).
    const bool trace = std::getenv("EF_SETUP_TRACE") != nullptr;
    auto mark = [&, t0 = std::chrono::steady_clock::now()](const char* what) mutable {
        if (!trace) return;
        const auto t1 = std::chrono::steady_clock::now();
        std::fprintf(stderr, "[setup rank %d] %s: %.3f s\n", ctx.rank(), what, std::chrono::duration<double>(t1 - t0).count());
        t0 = t1;
    };
    FitConfig cfg = load_fit_config(opt.config_path, opt.overrides);
    DataTable data = load_data(cfg);
    mark("config and data");
    FitProblem pb = make_fit_problem(std::move(cfg), std::move(data));
    mark("model (tables)");
    ShardSpec shard;
    parse_shard(opt.shard, shard.index, shard.count);
    const RunIdentity id = identity_of(pb, shard);
    if (shard.count > 1 && shard.count > pb.config.replicas + 1 && root)
        std::fprintf(stderr, "ensemblefit: warning: %d shards for %lld replicas: some shards are empty\n",
                     shard.count, static_cast<long long>(pb.config.replicas));

    const double slowdown = slowdown_factor(opt.slowdown, ctx.rank());
    if (!opt.baseline.empty()) read_run_timing(opt.baseline);  // fail now, not after the fit
    std::string thread_source, thread_warning;
    const int threads = resolve_threads(pb.config.threads, ctx.local_size(), thread_source, thread_warning);

    std::unique_ptr<Worker> worker;
    collective(ctx, [&] {
        // auto: a GPU worker when this rank sees a GPU (round-robin over the node's GPUs by
        // node-local rank; several ranks may share one), else a CPU worker.
        const int ndev = cuda_device_count();
        WorkerKind kind = WorkerKind::cpu;
        if (pb.config.workers == "gpu" || (pb.config.workers == "auto" && ndev > 0)) kind = WorkerKind::gpu;
        WorkerOptions wo;
        wo.threads = threads;
        wo.device = ndev > 0 ? ctx.local_rank() % ndev : 0;
        worker = make_worker(kind, pb, wo);
    });
    mark("worker");

    // Placement table.
    std::ostringstream me;
    me << ctx.rank() << "\t" << ctx.host() << "\t" << worker->describe() << "\t" << threads;
    const std::vector<std::string> placement = ctx.gather(me.str());

    if (opt.dry_run) {
        if (root) {
            print_problem(pb, id, std::cout);
            print_placement(placement, std::cout);
            std::printf("threads per rank: %d (from %s)\n", threads, thread_source.c_str());
            std::printf("dry run: nothing fitted, nothing written\n");
        }
        return;
    }

    // Output: rank 0 creates or reopens it; everyone learns what is left to fit.
    std::unique_ptr<ResultsFile> out;
    std::vector<std::int64_t> pending;
    collective(ctx, [&] {
        if (!root) return;
        const std::string& path = pb.config.output_file;
        const bool exists = file_exists(path);
        if (exists && !opt.resume && !opt.overwrite)
            throw usage_error(pb.config.where("output.file") + ": '" + path +
                              "' exists; pass --resume to finish it or --overwrite to replace it");
        if (exists && opt.resume) {
            out = std::make_unique<ResultsFile>(ResultsFile::resume(path, id));
        } else {
            // Probe writability without touching an existing file (the --overwrite case only
            // truncates once everything else has been validated).
            const auto slash = path.rfind('/');
            const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
            if (access(dir.c_str(), W_OK) != 0 || (exists && access(path.c_str(), W_OK) != 0))
                throw usage_error(pb.config.where("output.file") + ": cannot write '" + path + "' (" +
                                  std::strerror(errno) + ")");
            try {
                out = std::make_unique<ResultsFile>(ResultsFile::create(path, id));
            } catch (const Error& e) {
                throw usage_error(pb.config.where("output.file") + ": " + e.what());
            }
        }
        pending = out->pending();
    });
    mark("output file");
    {
        long long m = static_cast<long long>(pending.size());
        EF_MPI_CHECK(MPI_Bcast(&m, 1, MPI_LONG_LONG, 0, ctx.world()));
        pending.resize(static_cast<size_t>(m));
        if (m > 0) EF_MPI_CHECK(MPI_Bcast(pending.data(), static_cast<int>(m), MPI_INT64_T, 0, ctx.world()));
    }

    if (root) {
        print_problem(pb, id, std::cout);
        print_placement(placement, std::cout);
        if (!thread_warning.empty()) std::fprintf(stderr, "ensemblefit: warning: %s\n", thread_warning.c_str());
        if (opt.resume)
            std::printf("resume: %zu of %lld replica fits left\n", pending.size(),
                        static_cast<long long>(id.span.size() + (id.span.central ? 1 : 0)));
        std::fflush(stdout);
    }

    // Work: units come from the WorkQueue on rank 0. Rank 0's main thread computes like every
    // other rank while a dispatcher thread answers requests, receives and writes results and
    // keeps the progress line; other ranks keep one request in flight (prefetch) so that the
    // reply is usually there before they need it.
    const std::int64_t M = static_cast<std::int64_t>(pending.size());
    // Automatic unit size: on a CPU rank 4 replicas per thread, but at least ~8 units per rank
    // so that short runs of expensive fits still balance; on a GPU rank half its share, since a
    // GPU fits one replica per thread and needs thousands at once.
    std::int64_t my_chunk = pb.config.chunk;
    if (my_chunk <= 0) {
        // (rounded up: 2561 replicas on one GPU are two units, not two and a lone replica that
        // would run its every LM round by itself at the end)
        my_chunk = worker->kind() == WorkerKind::gpu
                       ? std::clamp<std::int64_t>((M + 2 * ctx.size() - 1) / (2 * ctx.size()), 1, 1 << 20)
                       : std::clamp<std::int64_t>(M / (8 * ctx.size()), 1, 4 * threads);
    }
    std::vector<std::int64_t> chunks(static_cast<size_t>(ctx.size()));
    EF_MPI_CHECK(MPI_Allgather(&my_chunk, 1, MPI_INT64_T, chunks.data(), 1, MPI_INT64_T, ctx.world()));
    const SchedPolicy policy = parse_sched_policy(pb.config.sched_policy);
    RankTiming mine;
    DispatcherStats ds;

    auto compute_unit = [&](const UnitSpan& u, ReplicaBlock& block) {
        PhaseTimer::Scope compute(timer, Phase::compute);
        WorkUnit unit;
        unit.replicas.assign(pending.begin() + u.begin, pending.begin() + u.end);
        const auto t0 = std::chrono::steady_clock::now();
        worker->run(unit, block);
        if (slowdown > 1.0) {
            const std::chrono::duration<double> took = std::chrono::steady_clock::now() - t0;
            std::this_thread::sleep_for(took * (slowdown - 1.0));
        }
        mine.replicas += u.size();
        mine.units += 1;
    };
    auto throughput = [&] {
        const double c = timer.seconds(Phase::compute);
        return c > 0 ? static_cast<double>(mine.replicas) / c : 0.0;
    };

    try {
        if (root) {
            WorkQueue queue(policy, M, chunks);
            std::mutex queue_mutex;
            std::mutex local_mutex;
            std::deque<ReplicaBlock> local_results;
            std::atomic<bool> failed{false};
            std::string failure;
            ProgressLine progress(M, stderr, opt.progress_interval);

            std::thread dispatcher([&] {
                // Linux rounds short sleeps up by the thread's timer slack (50 us by default);
                // 1 us slack keeps the polling loop's reply latency near its sleep time.
                prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
                try {
                    std::int64_t received = 0;
                    int finished = 0;  // other ranks told there is no more work
                    auto write = [&](const ReplicaBlock& b) {
                        const auto t0 = std::chrono::steady_clock::now();
                        out->write(b);
                        ds.io += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                        received += static_cast<std::int64_t>(b.size());
                        progress.update(received);
                    };
                    int backoff_us = 1;
                    while (received < M || finished < ctx.size() - 1) {
                        bool did = false;
                        MPI_Status st;
                        int flag = 0;
                        EF_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, ctx.world(), &flag, &st));
                        if (flag && st.MPI_TAG == kRequestTag) {
                            const auto t0 = std::chrono::steady_clock::now();
                            double thr = 0;
                            EF_MPI_CHECK(MPI_Recv(&thr, 1, MPI_DOUBLE, st.MPI_SOURCE, kRequestTag, ctx.world(),
                                                  MPI_STATUS_IGNORE));
                            UnitSpan u;
                            {
                                std::lock_guard<std::mutex> lock(queue_mutex);
                                u = queue.next(st.MPI_SOURCE, thr);
                            }
                            const std::int64_t span[2] = {u.begin, u.end};
                            EF_MPI_CHECK(MPI_Send(span, 2, MPI_INT64_T, st.MPI_SOURCE, kAssignTag, ctx.world()));
                            if (u.empty()) ++finished;
                            ++ds.requests;
                            ds.mpi_calls += 2;
                            ds.mpi_bytes += static_cast<std::int64_t>(sizeof(double) + sizeof span);
                            ds.sched += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                            did = true;
                        } else if (flag && st.MPI_TAG == kResultTag) {
                            const auto t0 = std::chrono::steady_clock::now();
                            int bytes = 0;
                            EF_MPI_CHECK(MPI_Get_count(&st, MPI_BYTE, &bytes));
                            std::vector<char> buf(static_cast<size_t>(bytes));
                            EF_MPI_CHECK(MPI_Recv(buf.data(), bytes, MPI_BYTE, st.MPI_SOURCE, kResultTag, ctx.world(),
                                                  MPI_STATUS_IGNORE));
                            ds.mpi_calls += 1;
                            ds.mpi_bytes += bytes;
                            ds.comm += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                            write(ReplicaBlock::unpack(buf.data(), buf.size()));
                            did = true;
                        }
                        for (;;) {
                            ReplicaBlock b;
                            {
                                std::lock_guard<std::mutex> lock(local_mutex);
                                if (local_results.empty()) break;
                                b = std::move(local_results.front());
                                local_results.pop_front();
                            }
                            write(b);
                            did = true;
                        }
                        if (did) {
                            backoff_us = 1;
                        } else {
                            // Polling with a growing sleep (1 us after any message, up to
                            // 250 us when idle): no core spins on MPI_Probe while rank 0
                            // computes, an idle dispatcher wakes 4000 times a second rather than
                            // 20000 (50 us cost ~15% of a core), and a worker's first request,
                            // the only one prefetching cannot hide, waits at most ~250 us.
                            std::this_thread::sleep_for(std::chrono::microseconds(backoff_us));
                            backoff_us = std::min(250, backoff_us * 2);
                        }
                    }
                    progress.finish();
                } catch (const std::exception& e) {
                    failure = e.what();
                    failed = true;
                }
            });

            for (;;) {
                UnitSpan u;
                {
                    PhaseTimer::Scope sched(timer, Phase::sched);
                    std::lock_guard<std::mutex> lock(queue_mutex);
                    u = queue.next(0, throughput());
                }
                if (u.empty() || failed) break;
                ReplicaBlock block;
                compute_unit(u, block);
                std::lock_guard<std::mutex> lock(local_mutex);
                local_results.push_back(std::move(block));
            }
            {
                PhaseTimer::Scope idle(timer, Phase::idle);
                dispatcher.join();
            }
            if (failed) throw runtime_error("dispatcher: " + failure);
        } else {
            auto request = [&] {
                PhaseTimer::Scope sched(timer, Phase::sched);
                const double thr = throughput();
                EF_MPI_CHECK(MPI_Send(&thr, 1, MPI_DOUBLE, 0, kRequestTag, ctx.world()));
                mine.mpi_calls += 1;
                mine.mpi_bytes += static_cast<std::int64_t>(sizeof thr);
            };
            auto receive = [&] {
                PhaseTimer::Scope sched(timer, Phase::sched);
                std::int64_t span[2] = {0, 0};
                EF_MPI_CHECK(MPI_Recv(span, 2, MPI_INT64_T, 0, kAssignTag, ctx.world(), MPI_STATUS_IGNORE));
                mine.mpi_calls += 1;
                mine.mpi_bytes += static_cast<std::int64_t>(sizeof span);
                return UnitSpan{span[0], span[1]};
            };
            std::vector<std::vector<char>> send_buffers;
            std::vector<MPI_Request> requests;
            request();
            UnitSpan u = receive();
            while (!u.empty()) {
                request();  // prefetch the next unit while this one computes
                ReplicaBlock block;
                compute_unit(u, block);
                {
                    PhaseTimer::Scope comm(timer, Phase::comm);
                    send_buffers.push_back(block.pack());
                    requests.emplace_back();
                    EF_MPI_CHECK(MPI_Isend(send_buffers.back().data(), static_cast<int>(send_buffers.back().size()),
                                           MPI_BYTE, 0, kResultTag, ctx.world(), &requests.back()));
                    mine.mpi_calls += 1;
                    mine.mpi_bytes += static_cast<std::int64_t>(send_buffers.back().size());
                }
                u = receive();
            }
            PhaseTimer::Scope comm(timer, Phase::comm);
            if (!requests.empty())
                EF_MPI_CHECK(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE));
        }
        {
            PhaseTimer::Scope idle(timer, Phase::idle);  // done, waiting for the others
            EF_MPI_CHECK(MPI_Barrier(ctx.world()));
        }
        if (root) {
            PhaseTimer::Scope io(timer, Phase::io);
            const ReplicaBlock all = out->read_replicas();
            const EnsembleSummary s = summarize(all.params, all.status, all.P);
            out->write_summary(s);
            print_summary(pb, out->file(), all, s, std::cout);
        }
        const std::string json = root ? pb.config.output_file + ".timing.json" : "";
        report_timing(ctx, timer, mine, out.get(), json, placement, ds, policy, opt.baseline, root);
        if (root) {
            std::printf("output: %s (timing also in %s)\n", pb.config.output_file.c_str(), json.c_str());
            out->close();
        }
    } catch (const std::exception& e) {
        // Mid-run failure: what rank 0 wrote is flushed block by block; end the job now.
        std::fprintf(stderr, "ensemblefit: error on rank %d: %s\n", ctx.rank(), e.what());
        if (out) out->close();
        const Error* ee = dynamic_cast<const Error*>(&e);
        MPI_Abort(ctx.world(), ee ? static_cast<int>(ee->code()) : 1);
    }
}

void run_merge(const std::string& output, const std::vector<std::string>& inputs, bool overwrite) {
    if (inputs.empty()) throw usage_error("merge: no shard files given");
    std::vector<ResultsContent> shards;
    for (const auto& in : inputs) {
        if (in == output) throw usage_error("merge: output '" + output + "' is also an input");
        if (!file_exists(in)) throw usage_error(in + ": no such file");
        shards.push_back(read_results(in));
        const ResultsContent& c = shards.back();
        std::int64_t missing = 0;
        for (auto s : c.replicas.status) missing += s < 0 ? 1 : 0;
        if (c.id.span.central && c.central.status[0] < 0) ++missing;
        if (missing > 0)
            throw usage_error(in + ": shard is incomplete (" + std::to_string(missing) +
                              " replica fits not done); finish it with --resume first");
    }
    for (size_t i = 1; i < shards.size(); ++i) {
        const RunIdentity& a = shards[0].id;
        const RunIdentity& b = shards[i].id;
        if (b.canonical_config != a.canonical_config)
            throw usage_error("merge: " + inputs[i] + " was run with a different config than " + inputs[0]);
        if (b.data_checksum != a.data_checksum)
            throw usage_error("merge: " + inputs[i] + " was run on different data than " + inputs[0]);
    }
    std::vector<size_t> order(shards.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return shards[a].id.span.begin < shards[b].id.span.begin; });
    const std::int64_t R = shards[0].id.replicas_total;
    std::int64_t next = 1;
    int central = -1;
    for (size_t k = 0; k < order.size(); ++k) {
        const ResultsContent& c = shards[order[k]];
        const std::string& name = inputs[order[k]];
        if (c.id.span.central) {
            if (central >= 0)
                throw usage_error("merge: both " + inputs[static_cast<size_t>(central)] + " and " + name +
                                  " hold the central fit (replica 0)");
            central = static_cast<int>(order[k]);
        }
        if (c.id.span.size() == 0) continue;
        if (c.id.span.begin > next)
            throw usage_error("merge: replicas " + std::to_string(next) + ".." +
                              std::to_string(c.id.span.begin - 1) + " are in no file (gap before " + name + ")");
        if (c.id.span.begin < next)
            throw usage_error("merge: " + name + " overlaps another file at replicas " +
                              std::to_string(c.id.span.begin) + ".." + std::to_string(next - 1));
        next = c.id.span.end;
    }
    if (next != R + 1)
        throw usage_error("merge: replicas " + std::to_string(next) + ".." + std::to_string(R) +
                          " are in no file");
    if (central < 0) throw usage_error("merge: no file holds the central fit (replica 0, shard 0)");
    if (file_exists(output) && !overwrite)
        throw usage_error("merge: output '" + output + "' exists; pass --overwrite to replace it");

    RunIdentity id = shards[static_cast<size_t>(central)].id;
    id.shard = ShardSpec{};
    id.span = shard_span(R, id.shard);
    ResultsFile out = ResultsFile::create(output, id);
    out.write(shards[static_cast<size_t>(central)].central);
    for (size_t k : order)
        if (shards[k].replicas.size() > 0) out.write(shards[k].replicas);
    const ReplicaBlock all = out.read_replicas();
    out.write_summary(summarize(all.params, all.status, all.P));
    out.file().set_attr("/", "merged_from", inputs);
    out.close();
    std::printf("merged %zu file(s), replicas 1..%lld and the central fit, into %s\n", inputs.size(),
                static_cast<long long>(R), output.c_str());
}

}  // namespace ef

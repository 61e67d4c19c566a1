// SPDX-License-Identifier: MIT
#include <ensemblefit/fit/ensemble_run.hpp>

#include <unistd.h>
#include <sys/stat.h>

#include <algorithm>
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
#include <ensemblefit/sched/phase_timer.hpp>
#include <ensemblefit/worker/worker.hpp>

#include "src/io/results_file.hpp"
#include "src/report/summary_table.hpp"

namespace ef {

namespace {

constexpr int kResultTag = 101;

bool file_exists(const std::string& path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0;
}

std::string hex(std::uint64_t v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
    return buf;
}

/**
 * Runs `fn` where it applies and agrees on the outcome across ranks: if any rank threw an
 * ef::Error, every rank throws the lowest failing rank's error. Errors that only some ranks can
 * see (an unwritable output on rank 0, a missing GPU on one node) thus end the job cleanly
 * instead of leaving the other ranks waiting.
 */
void collective(const MpiContext& ctx, const std::function<void()>& fn) {
    int code = 0;
    std::string message;
    try {
        fn();
    } catch (const Error& e) {
        code = static_cast<int>(e.code());
        message = e.what();
    } catch (const std::exception& e) {
        code = static_cast<int>(ExitCode::runtime);
        message = e.what();
    }
    int failing = code ? ctx.rank() : ctx.size();
    int first = 0;
    EF_MPI_CHECK(MPI_Allreduce(&failing, &first, 1, MPI_INT, MPI_MIN, ctx.world()));
    if (first == ctx.size()) return;
    EF_MPI_CHECK(MPI_Bcast(&code, 1, MPI_INT, first, ctx.world()));
    long long len = static_cast<long long>(message.size());
    EF_MPI_CHECK(MPI_Bcast(&len, 1, MPI_LONG_LONG, first, ctx.world()));
    message.resize(static_cast<size_t>(len));
    if (len > 0) EF_MPI_CHECK(MPI_Bcast(message.data(), static_cast<int>(len), MPI_CHAR, first, ctx.world()));
    throw Error(static_cast<ExitCode>(code), message);
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

/// Per-rank phase totals gathered on rank 0, written under /timing and summarised.
void report_timing(const MpiContext& ctx, PhaseTimer& timer, ResultsFile* out,
                   const std::vector<std::int64_t>& replicas_per_rank, bool print) {
    timer.stop();
    std::vector<double> mine(timer.all().begin(), timer.all().end());
    mine.push_back(timer.wall());
    const size_t W = mine.size();
    std::vector<double> all(ctx.is_root() ? W * static_cast<size_t>(ctx.size()) : 0);
    EF_MPI_CHECK(MPI_Gather(mine.data(), static_cast<int>(W), MPI_DOUBLE, all.data(), static_cast<int>(W),
                            MPI_DOUBLE, 0, ctx.world()));
    if (!ctx.is_root()) return;
    const size_t R = static_cast<size_t>(ctx.size());
    const size_t compute = static_cast<size_t>(Phase::compute);
    double sum_c = 0, max_c = 0, max_wall = 0;
    for (size_t r = 0; r < R; ++r) {
        sum_c += all[r * W + compute];
        max_c = std::max(max_c, all[r * W + compute]);
        max_wall = std::max(max_wall, all[r * W + W - 1]);
    }
    const double lb = max_c > 0 ? (sum_c / static_cast<double>(R)) / max_c : 1.0;
    const double ce = max_wall > 0 ? max_c / max_wall : 1.0;
    if (out) {
        h5::File& f = out->file();
        for (int p = 0; p < kPhaseCount; ++p) {
            std::vector<double> col(R);
            for (size_t r = 0; r < R; ++r) col[r] = all[r * W + static_cast<size_t>(p)];
            const std::string name = std::string("/timing/") + to_string(static_cast<Phase>(p));
            if (f.exists(name)) H5Ldelete(f.id(), name.c_str(), H5P_DEFAULT);
            f.write(name, col);
        }
        std::vector<double> wall(R);
        for (size_t r = 0; r < R; ++r) wall[r] = all[r * W + W - 1];
        if (f.exists("/timing/wall")) H5Ldelete(f.id(), "/timing/wall", H5P_DEFAULT);
        f.write("/timing/wall", wall);
        if (f.exists("/timing/replicas")) H5Ldelete(f.id(), "/timing/replicas", H5P_DEFAULT);
        f.write("/timing/replicas", replicas_per_rank);
        f.set_attr("/timing", "ranks", static_cast<std::int64_t>(R));
        f.set_attr("/timing", "runtime_seconds", max_wall);
        f.set_attr("/timing", "load_balance", lb);
        f.set_attr("/timing", "communication_efficiency", ce);
        f.set_attr("/timing", "parallel_efficiency", lb * ce);
        f.flush();
    }
    if (print) {
        std::printf("\ntiming: %zu rank(s), wall %.3f s; load balance %.3f, communication efficiency "
                    "%.3f, parallel efficiency %.3f\n", R, max_wall, lb, ce, lb * ce);
        std::printf("  %-5s", "rank");
        for (int p = 0; p < kPhaseCount; ++p) std::printf(" %9s", to_string(static_cast<Phase>(p)));
        std::printf(" %9s %8s\n", "wall", "replicas");
        for (size_t r = 0; r < R; ++r) {
            std::printf("  %-5zu", r);
            for (size_t p = 0; p < static_cast<size_t>(kPhaseCount); ++p) std::printf(" %9.3f", all[r * W + p]);
            std::printf(" %9.3f %8lld\n", all[r * W + W - 1],
                        static_cast<long long>(replicas_per_rank[r]));
        }
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
    FitConfig cfg = load_fit_config(opt.config_path, opt.overrides);
    DataTable data = load_data(cfg);
    FitProblem pb = make_fit_problem(std::move(cfg), std::move(data));
    ShardSpec shard;
    parse_shard(opt.shard, shard.index, shard.count);
    const RunIdentity id = identity_of(pb, shard);
    if (shard.count > 1 && shard.count > pb.config.replicas + 1 && root)
        std::fprintf(stderr, "ensemblefit: warning: %d shards for %lld replicas: some shards are empty\n",
                     shard.count, static_cast<long long>(pb.config.replicas));

    const double slowdown = slowdown_factor(opt.slowdown, ctx.rank());
    std::string thread_source, thread_warning;
    const int threads = resolve_threads(pb.config.threads, ctx.local_size(), thread_source, thread_warning);

    std::unique_ptr<Worker> worker;
    collective(ctx, [&] {
        WorkerKind kind = WorkerKind::cpu;
        if (pb.config.workers == "gpu") kind = WorkerKind::gpu;
        // auto: the CUDA fitting worker arrives with issue #5; until then auto means CPU.
        WorkerOptions wo;
        wo.threads = threads;
        const int ndev = cuda_device_count();
        wo.device = ndev > 0 ? ctx.local_rank() % ndev : 0;
        worker = make_worker(kind, pb, wo);
    });

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

    // Static blocks over the pending list (the scheduler issue adds dynamic policies).
    const std::int64_t M = static_cast<std::int64_t>(pending.size());
    const std::int64_t my_begin = M * ctx.rank() / ctx.size();
    const std::int64_t my_end = M * (ctx.rank() + 1) / ctx.size();
    const int chunk = pb.config.chunk > 0 ? pb.config.chunk : std::max(1, 4 * threads);
    std::vector<std::int64_t> per_rank(static_cast<size_t>(ctx.size()));
    for (int r = 0; r < ctx.size(); ++r)
        per_rank[static_cast<size_t>(r)] = M * (r + 1) / ctx.size() - M * r / ctx.size();
    if (root) {
        int idle = 0;
        for (auto c : per_rank) idle += c == 0 ? 1 : 0;
        if (idle > 0)
            std::printf("note: %d rank(s) have no replicas (%lld fits over %d ranks)\n", idle,
                        static_cast<long long>(M), ctx.size());
    }

    try {
        ProgressLine progress(M, stderr, opt.progress_interval);
        std::int64_t received = 0;
        auto store = [&](const ReplicaBlock& b) {
            PhaseTimer::Scope io(timer, Phase::io);
            out->write(b);
            received += static_cast<std::int64_t>(b.size());
            progress.update(received);
        };
        auto drain = [&](bool block) {
            while (received < M) {
                MPI_Status st;
                int flag = 0;
                {
                    PhaseTimer::Scope wait(timer, block ? Phase::idle : Phase::comm);
                    if (block) {
                        EF_MPI_CHECK(MPI_Probe(MPI_ANY_SOURCE, kResultTag, ctx.world(), &st));
                        flag = 1;
                    } else {
                        EF_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, kResultTag, ctx.world(), &flag, &st));
                    }
                }
                if (!flag) return;
                ReplicaBlock b;
                {
                    PhaseTimer::Scope comm(timer, Phase::comm);
                    int bytes = 0;
                    EF_MPI_CHECK(MPI_Get_count(&st, MPI_BYTE, &bytes));
                    std::vector<char> buf(static_cast<size_t>(bytes));
                    EF_MPI_CHECK(MPI_Recv(buf.data(), bytes, MPI_BYTE, st.MPI_SOURCE, kResultTag,
                                          ctx.world(), MPI_STATUS_IGNORE));
                    b = ReplicaBlock::unpack(buf.data(), buf.size());
                }
                store(b);
            }
        };

        std::vector<std::vector<char>> send_buffers;
        std::vector<MPI_Request> requests;
        for (std::int64_t at = my_begin; at < my_end; at += chunk) {
            WorkUnit unit;
            unit.replicas.assign(pending.begin() + at, pending.begin() + std::min<std::int64_t>(at + chunk, my_end));
            ReplicaBlock block;
            {
                PhaseTimer::Scope compute(timer, Phase::compute);
                const auto t0 = std::chrono::steady_clock::now();
                worker->run(unit, block);
                if (slowdown > 1.0) {
                    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - t0;
                    std::this_thread::sleep_for(took * (slowdown - 1.0));
                }
            }
            if (root) {
                store(block);
                drain(false);
            } else {
                PhaseTimer::Scope comm(timer, Phase::comm);
                send_buffers.push_back(block.pack());
                requests.emplace_back();
                EF_MPI_CHECK(MPI_Isend(send_buffers.back().data(), static_cast<int>(send_buffers.back().size()),
                                       MPI_BYTE, 0, kResultTag, ctx.world(), &requests.back()));
            }
        }
        if (root) {
            drain(true);
            progress.finish();
        } else if (!requests.empty()) {
            PhaseTimer::Scope comm(timer, Phase::comm);
            EF_MPI_CHECK(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE));
        }
        {
            PhaseTimer::Scope sync(timer, Phase::idle);
            EF_MPI_CHECK(MPI_Barrier(ctx.world()));
        }

        if (root) {
            PhaseTimer::Scope io(timer, Phase::io);
            const ReplicaBlock all = out->read_replicas();
            const EnsembleSummary s = summarize(all.params, all.status, all.P);
            out->write_summary(s);
            print_summary(pb, out->file(), all, s, std::cout);
        }
        report_timing(ctx, timer, out.get(), per_rank, root);
        if (root) {
            std::printf("output: %s\n", pb.config.output_file.c_str());
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

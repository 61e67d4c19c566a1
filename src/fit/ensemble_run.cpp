// SPDX-License-Identifier: MIT
#include <ensemblefit/fit/ensemble_run.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>

#include <omp.h>

#include <ensemblefit/core/config.hpp>
#include <ensemblefit/core/diagnostics.hpp>
#include <ensemblefit/core/error.hpp>
#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/io/data_table.hpp>
#include <ensemblefit/core/ensemble_summary.hpp>
#include <ensemblefit/report/progress_line.hpp>
#include <ensemblefit/sched/phase_timer.hpp>
#include <ensemblefit/sched/work_queue.hpp>
#include <ensemblefit/worker/worker.hpp>

#include "src/io/replica_writer.hpp"
#include "src/comm/table_share.hpp"
#include "src/io/in_place_rows.hpp"
#include "src/io/output_file.hpp"
#include "src/config/ini_scan.hpp"
#include "src/fit/correlated.hpp"
#include "src/fit/fit_quality.hpp"
#include "src/fit/fit_roofline.hpp"
#include "src/io/results_file.hpp"
#include "src/model/compiled_model.hpp"
#include "src/fit/fit_plan.hpp"
#include "src/report/kernel_roofline.hpp"
#include "src/fit/summary_table.hpp"
#include "src/report/timing_file.hpp"
#include "src/run/environment.hpp"
#include "src/run/heartbeat.hpp"
#include "src/run/output_guard.hpp"
#include "src/run/placement.hpp"
#include "src/run/predicted_timing.hpp"
#include "src/run/run_failure.hpp"
#include "src/run/run_session.hpp"
#include "src/run/run_timing.hpp"
#include "src/run/setup_trace.hpp"
#include "src/run/stop_request.hpp"
#include "src/run/trace.hpp"
#include "src/sched/dispatch_bound.hpp"
#include "src/sched/unit_dispatch.hpp"

namespace ef {

namespace {

/// `[output] in_place = auto` writes rows in place from this many rows of a run on 2+ ranks:
/// 1e6 rows of 5 parameters are 72 MB of /replicas, 0.23 s of rank 0's writer thread at the
/// 318 MB/s it measured (docs/parallel-output.md); a smaller run has nothing measurable to gain,
/// and keeps the file's layout of rank 0's writes (rows not yet done read NaN, not 0). The
/// bundled many-fits example (inputs/spot.ini, 1e6 replicas) is at the threshold.
constexpr std::int64_t kInPlaceMinRows = 1000000;

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
    id.errors = central_errors_of(pb);  // [fit] error_scale and ndf, for /central/covariance
    id.plugin_name = pb.model->plugin.name;
    id.plugin_abi = pb.model->plugin.abi;
    id.plugin_sha256 = pb.model->plugin.sha256;
    id.plugin_path = pb.model->plugin.path;
    return id;
}

/// What a fit reads, which no output may replace: the config, the data, the baseline and the
/// model plugin (as named and beside the config: both places it may be looked up).
std::vector<std::string> fit_input_paths(const std::string& config_path, const FitConfig& cfg,
                                         const std::string& baseline) {
    std::vector<std::string> in{config_path, cfg.data_file, baseline};
    const auto plugin = cfg.model_options.find("plugin");
    if (plugin != cfg.model_options.end()) {
        in.push_back(plugin->second);
        if (!plugin->second.empty() && plugin->second[0] != '/')
            in.push_back(ini::folder_of(config_path) + plugin->second);
    }
    return in;
}

/// Room the summary and the timing records take in a result file, with a wide margin
/// (h5::File::reserve): 5 datasets of at most P x P doubles, per-rank timing rows and placement.
std::uint64_t tail_bytes(std::size_t P, int ranks) {
    return (1u << 20) + 16 * (2 * P * P + 7 * P) + 16384 * static_cast<std::uint64_t>(ranks);
}

/// The dispatcher's and the results writer's account and the policy, as attributes of /timing
/// and fields of the JSON.
void write_dispatch_timing(h5::File& f, const std::string& group, const DispatchStats& ds,
                           const ReplicaWriter::Stats& ws, SchedPolicy policy, const std::string& baseline) {
    f.set_attr(group, "policy", std::string(to_string(policy)));
    if (!baseline.empty()) f.set_attr(group, "baseline", baseline);
    f.set_attr(group, "dispatcher_io_seconds", ds.io);
    f.set_attr(group, "dispatcher_comm_seconds", ds.comm);
    f.set_attr(group, "dispatcher_sched_seconds", ds.sched);
    f.set_attr(group, "dispatch_requests", ds.requests);
    f.set_attr(group, "dispatch_requests_store_full", ds.requests_store_full);
    f.set_attr(group, "dispatch_results_received_later", ds.results_received_later);
    f.set_attr(group, "dispatch_microseconds_per_request", ds.microseconds_per_request());
    f.set_attr(group, "writer_seconds", ws.write_seconds);  // its own thread, beside the fit
    f.set_attr(group, "writer_wait_seconds", ws.wait_seconds);  // the run waiting for it
    f.set_attr(group, "writer_blocks", ws.writes);
}

std::string dispatch_json(const DispatchStats& ds, const ReplicaWriter::Stats& ws, SchedPolicy policy) {
    char extra[768];
    std::snprintf(extra, sizeof extra,
                  "  \"policy\": \"%s\",\n  \"dispatcher\": {\"io_seconds\": %.9g, \"comm_seconds\": %.9g, "
                  "\"sched_seconds\": %.9g, \"requests\": %lld, \"microseconds_per_request\": %.9g, "
                  "\"results_received_later\": %lld},\n"
                  "  \"writer\": {\"seconds\": %.9g, \"wait_seconds\": %.9g, \"blocks\": %lld}",
                  to_string(policy), ds.io, ds.comm, ds.sched, static_cast<long long>(ds.requests), ds.microseconds_per_request(),
                  static_cast<long long>(ds.results_received_later),
                  ws.write_seconds, ws.wait_seconds, static_cast<long long>(ws.writes));
    return extra;
}

void print_dispatch_timing(const GatheredTiming& t, const DispatchStats& ds, SchedPolicy policy) {
    int idle = 0;
    for (const auto& r : t.ranks) idle += r.replicas == 0 ? 1 : 0;
    std::printf("%s", format_timing_table(t.ranks, t.metrics, t.columns).c_str());
    if (idle > 0) std::printf("  note: %d rank(s) had no replicas to fit\n", idle);
    std::printf("  policy %s; rank 0 dispatcher thread (concurrent with its compute): io %.3f s, comm %.3f s, "
                "%lld requests at %.1f us each\n",
                to_string(policy), ds.io, ds.comm, static_cast<long long>(ds.requests),
                ds.microseconds_per_request());
}

/**
 * One ensemble fit as the run layer's RunProblem: its input (config, data, model), its worker,
 * its units (replica fits) and its results (the replica rows, the summary). RunSession calls
 * the steps in its order. Set-up is identical on every rank, so input errors are thrown
 * identically everywhere; rank 0 owns the output.
 */
class FitRun final : public RunProblem {
   public:
    FitRun(const FitRunOptions& opt, RunState& run)
        : opt_(opt), run_(run), ctx_(run.ctx), timer_(run.timer), threads_(run.threads), trace_(run.ctx.rank()) {}

    RunSettings load_config() override;
    bool prewarm_device() const override { return true; }
    void read_input() override;
    bool gpu_capable() const override { return fits_on_gpu(*pb_); }
    void make_worker() override;
    std::string worker_description() const override { return worker_->describe(); }
    OutputTarget output_target() const override {
        const std::string& out = pb_->config.output_file;
        return {out, pb_->config.where("output.file"), fit_input_paths(opt_.config_path, pb_->config, opt_.baseline),
                {{out + ".timing.json", "the timing sidecar of " + pb_->config.where("output.file")}}};
    }
    bool open_output(OutputAction action) override;
    void print_plan(PlanCase what) const override;
    void compute() override { fit_pending(); }
    bool stopped() const override { return stopped_ != 0; }
    void write_results() override { summarize_results(); }
    TimingReport timing_report() override;
    void close() override;
    void report_stopped() const override;
    /// What rank 0 wrote is flushed block by block; end the job now (the error line says the
    /// file can be finished with --resume).
    [[noreturn]] void abort(const std::exception& e) override {
        if (in_place_writer_) in_place_writer_->finish_quietly();  // rows whose receipts rank 0 will not see: -1
        if (!out_) abort_run(ctx_, e);
        if (writer_) writer_->finish_quietly();  // the finished units it holds, unless a write failed
        out_->close();
        const Error* ee = dynamic_cast<const Error*>(&e);
        abort_run(ctx_, Error(ee ? ee->code() : ExitCode::runtime,
                              std::string(e.what()) + "; " + pb_->config.output_file +
                                  " keeps every finished replica: run again with --resume to finish it"));
    }

   private:
    void print_placement_and_warnings() const;
    void print_dry_run() const;
    std::unique_ptr<PendingOutput> create_output(OutputAction action);
    bool in_place_wanted() const;
    void refuse_rank0_layout(const std::string& path) const;
    void share_rows(const std::string& path, bool new_file);
    void print_nothing_to_do() const;
    void print_run_plan() const;
    void fit_pending();
    void write_quality(const ReplicaBlock& rows);
    void summarize_results();
    std::int64_t unit_size(std::int64_t M) const;
    std::int64_t unit_size_for(std::int64_t M, std::int64_t ranks) const;
    std::vector<std::string> bound_lines() const;
    ReplicaWriter::Options writer_options() const;
    void hand_rows_off(UnitDispatch<ReplicaBlock>::Handlers& h);

    const FitRunOptions& opt_;
    RunState& run_;  // the session's decisions: settings, threads, device, placement
    const MpiContext& ctx_;
    PhaseTimer& timer_;
    const ThreadPlan& threads_;
    SetupTrace trace_;
    FitConfig cfg_;  // until read_input() moves it into the problem
    std::unique_ptr<FitProblem> pb_;
    RunIdentity id_;
    double slowdown_ = 1.0;
    std::unique_ptr<TableShare> gram_share_;  // keeps the Gram set-up's window: freed after worker_
    std::string gram_note_;                   // how the Gram set-up was placed (empty: one rank)
    std::unique_ptr<Worker> worker_;
    std::unique_ptr<ResultsFile> out_;
    std::unique_ptr<ReplicaWriter> writer_;  // rank 0: writes out_ from a thread of its own
    RowTable rows_;  // not empty: every rank writes its rows in place (docs/parallel-output.md)
    std::unique_ptr<InPlaceRows> in_place_;          // every rank, then: its rows' sink
    std::unique_ptr<ReplicaWriter> in_place_writer_;  // and the thread that writes them
    ReplicaRuns pending_;  ///< the replicas this run fits, as runs of numbers
    RankTiming mine_;
    DispatchStats dispatch_;
    int stopped_ = 0;               // the signal that stopped the run early
    std::int64_t stored_ = 0;       // replica fits written by this run (rank 0)
    FitQualityInputs quality_in_;   // rank 0: for the fit-quality report (src/fit/fit_quality.hpp)
};

RunSettings FitRun::load_config() {
    cfg_ = load_fit_config(opt_.config_path, opt_.overrides);
    return cfg_.run;
}

/// Data, model, shard, --debug.slowdown and baseline: this rank's alone (the session has
/// decided its threads), but for the model's tables, which the node's ranks build together and
/// share (src/comm/table_share.hpp).
void FitRun::read_input() {
    FitConfig cfg = std::move(cfg_);
    DataTable data;
    CorrelatedInputs correlated;
    // Agreed on before the model: its tables are built by the node's ranks together.
    collective(ctx_, [&] {
        load_fit_data(cfg, data, correlated);
    });
    trace_.mark("config and data");
    // The model's tables (dis-mellin) are built in OpenMP loops of the default size: the rank's
    // threads, not every core of the node, which ranks beside each other would oversubscribe.
    omp_set_num_threads(threads_.threads);
    const std::unique_ptr<TableShare> node_tables = make_node_table_share(ctx_);  // one copy per node
    pb_ = std::make_unique<FitProblem>(make_fit_problem(std::move(cfg), std::move(data), node_tables.get()));
    trace_.mark("model (tables)");
    // what the fit-quality report needs of the data as given (root reports it)
    if (ctx_.is_root()) quality_in_ = quality_inputs(*pb_, correlated);
    CorrelatedFactor factor = whiten_problem(*pb_, correlated, threads_.threads);  // C = L L^T, once
    if (ctx_.is_root()) {
        quality_in_.model_whitened = factor.whitening != nullptr && pb_->whitening == nullptr;
        quality_in_.factor = std::move(factor);
    }
    if (pb_->config.correlated()) trace_.mark("covariance (Cholesky, whitening)");
    ShardSpec shard;
    parse_shard(opt_.shard, shard.index, shard.count);
    id_ = identity_of(*pb_, shard);
    if (shard.count > 1 && shard.count > pb_->config.replicas + 1 && ctx_.is_root())
        std::fprintf(stderr, "ensemblefit: warning: %d shards for %lld replicas: some shards are empty\n",
                     shard.count, static_cast<long long>(pb_->config.replicas));
    slowdown_ = slowdown_factor(opt_.slowdown, ctx_.rank());
    if (!opt_.baseline.empty()) read_run_timing(opt_.baseline);  // fail now, not after the fit
    if (!opt_.predicted.empty()) read_prediction_file(opt_.predicted);
    if (!opt_.trace.empty() && ctx_.is_root()) check_trace_path(opt_.trace);
}

/// The worker of the kind placement decided (RunState::device). The Gram path's set-up (T^T,
/// T^T W, and G = T^T W T for the CPU workers) is the node's, as the tables are: its ranks build
/// one copy together (make_worker() is collective over them). G is made on the host where a
/// rank of the node fits on the CPU.
void FitRun::make_worker() {
    const int cpu = run_.device.kind == WorkerKind::cpu ? 1 : 0;
    int node_cpu = 0;
    EF_MPI_CHECK(MPI_Allreduce(&cpu, &node_cpu, 1, MPI_INT, MPI_MAX, ctx_.node()));
    gram_share_ = make_node_table_share(ctx_);
    collective(ctx_, [&] {
        WorkerOptions wo;
        wo.threads = threads_.threads;
        wo.device = run_.device.device;
        wo.diag = diagnostics();
        wo.gram_share = gram_share_.get();
        wo.gram_products = node_cpu != 0;
        worker_ = ef::make_worker(run_.device.kind, *pb_, wo);
    });
    gram_note_ = gram_share_->describe("Gram set-up");
    trace_.mark("worker");
}

void FitRun::print_placement_and_warnings() const {
    if (!gram_note_.empty()) std::printf("  set-up:   %s\n", gram_note_.c_str());
    print_placement(run_.placement, std::cout);
    for (const std::string& w : placement_warnings(run_.placement)) std::fprintf(stderr, "ensemblefit: warning: %s\n", w.c_str());
}

/**
 * What bounds rank 0 for this run (or for `--ranks N`): its dispatcher's units/s and its
 * writer's rows/s needed against those measured (src/sched/dispatch_bound.hpp), a replica fit's
 * time taken from --baseline's compute seconds per replica when given. Rank 0; names no
 * figure it did not measure or read.
 */
std::vector<std::string> FitRun::bound_lines() const {
    DispatchDemand d;
    d.ranks = opt_.bound_ranks > 0 ? opt_.bound_ranks : ctx_.size();
    d.items = id_.span.size() + (id_.span.central ? 1 : 0);
    d.unit_items = unit_size_for(d.items, d.ranks);
    // Rows written in place: rank 0's writer writes a row's index and status only (8 bytes each).
    d.row_bytes = in_place_wanted() ? 16 : ReplicaWriter::row_bytes(id_.param_names.size());
    d.min_unit_seconds = WorkQueue::kMinUnitSeconds;
    if (!opt_.baseline.empty()) {
        double compute = 0;
        std::int64_t fitted = 0;
        for (const RankTiming& r : read_run_timing(opt_.baseline).ranks) {
            compute += r.phase[static_cast<size_t>(Phase::compute)];
            fitted += r.replicas;
        }
        if (fitted > 0 && compute > 0) {
            d.item_seconds = compute / static_cast<double>(fitted);
            d.item_seconds_source = "from " + opt_.baseline;
        }
    }
    return dispatch_bound_lines(d, measured_dispatch_capacity());
}

void FitRun::print_dry_run() const {
    if (!ctx_.is_root()) return;
    print_problem(*pb_, id_, std::cout);
    print_placement_and_warnings();
    std::printf("threads per rank: %d (from %s)\n", threads_.threads, threads_.source.c_str());
    for (const std::string& line : bound_lines()) std::printf("%s\n", line.c_str());
    std::printf("dry run: every check passed (config, data, workers, output %s); nothing fitted, nothing written\n",
                pb_->config.output_file.c_str());
}

/**
 * Rank 0 checks the output and creates or reopens it; every rank learns which replicas are
 * left to fit. Returns false when --resume finds the file complete: then nothing is opened for
 * writing and the file stays byte for byte as it was. A dry run checks the same and opens
 * nothing.
 */
bool FitRun::open_output(OutputAction action) {
    const std::string& path = pb_->config.output_file;
    int complete = 0;
    std::unique_ptr<PendingOutput> created;  // rank 0: a new file, renamed over the output below
    collective(ctx_, [&] {
        if (!ctx_.is_root()) return;
        complete = action == OutputAction::resume && ResultsFile::complete_for(path, id_) ? 1 : 0;
        if (complete || opt_.dry_run) return;
        if (action != OutputAction::resume) {
            created = create_output(action);
            return;
        }
        refuse_rank0_layout(path);
        out_ = std::make_unique<ResultsFile>(ResultsFile::resume(path, id_));
        pending_ = out_->pending();
    });
    EF_MPI_CHECK(MPI_Bcast(&complete, 1, MPI_INT, 0, ctx_.world()));
    if (!complete && !opt_.dry_run) {
        // Before a new file replaces anything: the ranks agree on writing rows in place (or not).
        share_rows(created ? created->temp_path() : path, action != OutputAction::resume);
        collective(ctx_, [&] {
            if (!created) return;  // rank 0's alone
            if (opt_.hold_creating > 0) std::this_thread::sleep_for(std::chrono::duration<double>(opt_.hold_creating));
            created->commit();
            out_ = std::make_unique<ResultsFile>(ResultsFile::resume(path, id_));
            pending_ = ResultsFile::all_replicas(id_);  // a new file's replicas are all to do: not read back
        });
        if (out_) out_->set_rows_in_place(!rows_.empty());
    }
    trace_.mark("output file");
    std::vector<ReplicaRuns::Run> runs = pending_.runs();
    long long m = static_cast<long long>(runs.size());
    EF_MPI_CHECK(MPI_Bcast(&m, 1, MPI_LONG_LONG, 0, ctx_.world()));
    runs.resize(static_cast<size_t>(m));
    if (m > 0) EF_MPI_CHECK(MPI_Bcast(runs.data(), static_cast<int>(2 * m), MPI_INT64_T, 0, ctx_.world()));
    if (!ctx_.is_root()) pending_ = ReplicaRuns(std::move(runs));
    return complete == 0;
}

/**
 * A new file (or the replacement of one) is created under a temporary name and renamed over
 * the output once its datasets exist: until then a previous file is untouched and a failure
 * (disk full, no permission) leaves nothing behind; from then on a kill leaves a file that
 * --resume finishes.
 */
std::unique_ptr<PendingOutput> FitRun::create_output(OutputAction action) {
    const std::string& path = pb_->config.output_file;
    auto pending = std::make_unique<PendingOutput>(path);
    try {
        ResultsFile::create(pending->temp_path(), id_, in_place_wanted() ? h5::RowStorage::in_place
                                                                         : h5::RowStorage::incremental).close();
    } catch (const Error& e) {
        throw Error(e.code() == ExitCode::runtime ? ExitCode::data : e.code(),
                    pb_->config.where("output.file") + ": " + e.what() + "; " +
                        (action == OutputAction::replace ? "the previous '" + path + "' is unchanged"
                                                         : "nothing was written"));
    }
    return pending;
}

/// `[output] in_place`: on, or auto for a run of several ranks and at least kInPlaceMinRows rows.
bool FitRun::in_place_wanted() const {
    const std::string& mode = pb_->config.output_in_place;
    return mode == "on" || (mode == "auto" && ctx_.size() > 1 && id_.span.size() >= kInPlaceMinRows);
}

/// `in_place = on` and a file to resume whose rows were made for rank 0's writes (chunks
/// allocated as rows came): a usage error before the file is opened for writing (or grown).
void FitRun::refuse_rank0_layout(const std::string& path) const {
    if (pb_->config.output_in_place != "on") return;
    if (!read_row_table(h5::File::open_read(path), id_.span.begin, id_.param_names.size()).empty()) return;
    throw usage_error(pb_->config.where("output.in_place") + ": on, but " + path +
                      "'s /replicas were made for rows written by rank 0 (created with in_place = off); set it "
                      "to auto or off");
}

/**
 * Collective: whether every rank writes its rows into `path` itself (rows_ holds their file
 * offsets) or rank 0 writes them all, as before (rows_ empty). `on` that cannot be is a usage
 * error (2) naming the rank and why, before a new file replaces anything (`path` is then the
 * file not yet renamed); `auto` says why in a note and goes on through rank 0.
 */
void FitRun::share_rows(const std::string& path, bool new_file) {
    if (!in_place_wanted()) return;
    RowTable table;
    std::int64_t probe = -1;  // a replica row still to fit: its chi2 holds the agreement's token
    collective(ctx_, [&] {
        if (!ctx_.is_root()) return;
        const std::uint64_t P = id_.param_names.size();
        if (new_file) table = read_row_table(h5::File::open_read(path), id_.span.begin, P);
        else table = read_row_table(out_->file(), id_.span.begin, P);
        const ReplicaRuns todo = new_file ? ResultsFile::all_replicas(id_) : pending_;
        for (const ReplicaRuns::Run& run : todo.runs())
            if (run.second > std::max<std::int64_t>(run.first, 1)) {
                probe = std::max<std::int64_t>(run.first, 1);
                break;
            }
    });
    std::string why;
    rows_ = share_row_table(ctx_, path, std::move(table), probe, why);
    if (!rows_.empty() || why.empty()) return;
    if (pb_->config.output_in_place == "on")
        throw usage_error(pb_->config.where("output.in_place") + ": on, but " + why + "; set it to auto or off");
    if (ctx_.is_root()) std::fprintf(stderr, "ensemblefit: note: replica rows go through rank 0: %s\n", why.c_str());
}

void FitRun::print_nothing_to_do() const {
    if (ctx_.is_root())
        std::printf("resume: every replica fit of %s is done; nothing to fit, the file is unchanged\n",
                    pb_->config.output_file.c_str());
}

void FitRun::print_plan(PlanCase what) const {
    if (what == PlanCase::dry_run) return print_dry_run();
    if (what == PlanCase::nothing_to_do) return print_nothing_to_do();
    print_run_plan();
}

void FitRun::print_run_plan() const {
    if (!ctx_.is_root()) return;
    print_problem(*pb_, id_, std::cout);
    print_placement_and_warnings();
    if (!threads_.warning.empty()) std::fprintf(stderr, "ensemblefit: warning: %s\n", threads_.warning.c_str());
    if (opt_.resume)
        std::printf("resume: %lld of %lld replica fits left\n", static_cast<long long>(pending_.size()),
                    static_cast<long long>(id_.span.size() + (id_.span.central ? 1 : 0)));
    if (!rows_.empty())
        std::printf("output: every rank writes its replica rows into %s itself ([output] in_place), rank 0 "
                    "their status\n", pb_->config.output_file.c_str());
    std::fflush(stdout);
}

/// Automatic unit size: on a CPU rank 4 replicas per thread, but at least ~8 units per rank so
/// that short runs of expensive fits still balance; on a GPU rank half its share among the GPU
/// ranks, since a GPU fits one replica per thread and needs thousands at once (rounded up: 2561
/// replicas on one GPU are two units, not two and a lone replica that would run its every LM
/// round by itself). Counted over GPU ranks, not all ranks: beside 60 CPU ranks 4 GPUs got units
/// of M / 128, each as long as its LM rounds whatever its size, and ran 3x slower (issue 35).
/// Collective (the GPU ranks are counted).
std::int64_t FitRun::unit_size(std::int64_t M) const {
    const std::int64_t mine = worker_->kind() == WorkerKind::gpu ? 1 : 0;
    std::int64_t gpu_ranks = 0;
    EF_MPI_CHECK(MPI_Allreduce(&mine, &gpu_ranks, 1, MPI_INT64_T, MPI_SUM, ctx_.world()));
    return unit_size_for(M, mine ? gpu_ranks : ctx_.size());
}

/// unit_size() for M replicas over `ranks` ranks of this rank's kind (a GPU rank: the GPU ranks).
std::int64_t FitRun::unit_size_for(std::int64_t M, std::int64_t ranks) const {
    if (pb_->config.chunk > 0) return pb_->config.chunk;
    return worker_->kind() == WorkerKind::gpu ? std::clamp<std::int64_t>((M + 2 * ranks - 1) / (2 * ranks), 1, 1 << 20)
                                              : std::clamp<std::int64_t>(M / (8 * ranks), 1, 4 * threads_.threads);
}

/// Rows per write: about 4 MiB, whole chunks; a unit waits at most half a second in the buffer.
ReplicaWriter::Options FitRun::writer_options() const {
    ReplicaWriter::Options o;
    const std::size_t P = id_.param_names.size();
    o.buffer_rows = ReplicaWriter::buffer_rows_for(replica_chunk_rows(static_cast<std::uint64_t>(id_.span.size()), P), P);
    o.debug_pause = opt_.slow_writes;
    if (opt_.slow_writes > 0) {  // a test's slow disk: small blocks, so a few hundred rows fill the backlog
        o.buffer_rows = 32;
        o.backlog_rows = 64;
    }
    if (pending_.size() == id_.span.size() + (id_.span.central ? 1 : 0)) {
        o.kept_begin = id_.span.begin;  // every row is this run's: the summary needs no read-back
        o.kept_rows = static_cast<std::size_t>(id_.span.size());
    }
    return o;
}

void FitRun::fit_pending() {
    const std::int64_t M = pending_.size();
    std::int64_t my_chunk = unit_size(M);
    std::vector<std::int64_t> chunks(static_cast<size_t>(ctx_.size()));
    EF_MPI_CHECK(MPI_Allgather(&my_chunk, 1, MPI_INT64_T, chunks.data(), 1, MPI_INT64_T, ctx_.world()));
    const SchedPolicy policy = parse_sched_policy(pb_->config.sched_policy);
    std::unique_ptr<WorkQueue> queue = ctx_.is_root() ? std::make_unique<WorkQueue>(policy, M, chunks) : nullptr;
    ProgressLine progress(M, stderr, opt_.progress_interval);
    std::int64_t stored = 0;
    UnitDispatch<ReplicaBlock>::Handlers h;
    h.compute = [&](const UnitSpan& u, ReplicaBlock& block) {
        WorkUnit unit;
        unit.replicas = pending_.slice(u.begin, u.end);
        const auto t0 = std::chrono::steady_clock::now();
        worker_->run(unit, block);
        if (slowdown_ > 1.0) std::this_thread::sleep_for((std::chrono::steady_clock::now() - t0) * (slowdown_ - 1.0));
        if (opt_.unit_sleep > 0) std::this_thread::sleep_for(std::chrono::duration<double>(opt_.unit_sleep));
    };
    h.throughput = [&] {
        if (opt_.unit_sleep > 0) return 0.0;  // no speed: the WorkQueue keeps units at fit.chunk
        const double c = timer_.seconds(Phase::compute);
        return c > 0 ? static_cast<double>(mine_.replicas) / c : 0.0;
    };
    if (ctx_.is_root()) writer_ = std::make_unique<ReplicaWriter>(*out_, writer_options());
    if (!rows_.empty()) hand_rows_off(h);
    h.store = [&](ReplicaBlock&& b) {
        const auto n = static_cast<std::int64_t>(b.size());
        writer_->add(std::move(b));
        progress.update(stored += n);
    };
    h.store_ready = [&] { return writer_->ready(); };  // a slow disk holds results back, not requests
    h.stop_signal = stop_signal;  // a graceful stop: no new units, the ones handed out finish
    h.fail = [this](const std::exception& e) { abort(e); };  // a silent rank, a failed write
    h.heartbeat_timeout = ctx_.size() > 1 ? run_.settings.heartbeat_timeout : 0;
    UnitDispatch<ReplicaBlock> dispatch(ctx_, timer_, mine_, std::move(h));
    dispatch_ = dispatch.run(queue.get(), M);
    trace_.stage("end");
    trace_.mark("plan printed, every unit fitted");
    stopped_ = stored < M ? dispatch.stopped() : 0;
    stored_ = stored;
    if (writer_) {
        PhaseTimer::Scope io(timer_, Phase::io);  // what is still buffered, written now
        writer_->finish();
        trace_.mark("the writer's last blocks");
    }
    if (ctx_.is_root() && !stopped_) progress.finish();
    PhaseTimer::Scope idle(timer_, Phase::idle);  // done, waiting for the others
    Heartbeat(ctx_, run_.settings.heartbeat_timeout).barrier("the barrier after the last unit");
    EF_MPI_CHECK(MPI_Bcast(&stopped_, 1, MPI_INT, 0, ctx_.world()));
    trace_.mark("barrier");
}

/**
 * Rows written in place: this rank's finished blocks go to its own writer thread (a
 * ReplicaWriter into InPlaceRows: pwrite at the rows' offsets, fdatasync, then each unit's
 * receipt), and rank 0 stores the receipts (index, status, params; the central fit whole), not
 * the blocks. Same buffer size and delay as rank 0's writer, so a kill loses what it would lose.
 */
void FitRun::hand_rows_off(UnitDispatch<ReplicaBlock>::Handlers& h) {
    in_place_ = std::make_unique<InPlaceRows>(pb_->config.output_file, rows_);
    ReplicaWriter::Options o = writer_options();
    o.kept_rows = 0;
    o.as_received = true;  // one receipt per unit: what rank 0 counts
    in_place_writer_ = std::make_unique<ReplicaWriter>(*in_place_, id_.param_names.size(), o);
    h.hand_off = [this](ReplicaBlock&& b) { in_place_writer_->add(std::move(b)); };
    h.receipts = [this] { return in_place_->take_receipts(); };
    h.finish_hand_off = [this] { in_place_writer_->finish(); };
}

/// A stopped run's notice: what is on disk and the command that finishes it.
void FitRun::report_stopped() const {
    const std::int64_t all = id_.span.size() + (id_.span.central ? 1 : 0);
    const std::int64_t left = pending_.size() - stored_;
    ef::report_stopped(ctx_, stopped_,
                       std::to_string(all - left) + " of " + std::to_string(all) + " replica fits",
                       pb_->config.output_file);
}

void FitRun::summarize_results() {
    if (!ctx_.is_root()) return;
    PhaseTimer::Scope io(timer_, Phase::io);
    out_->file().reserve(tail_bytes(id_.param_names.size(), ctx_.size()), "the summary and the timing");
    // The rows as the writer wrote them (every row this run's), else as the file holds them.
    ReplicaBlock all = writer_ ? writer_->take_kept_rows() : ReplicaBlock{};
    if (all.status.size() != static_cast<std::size_t>(id_.span.size())) all = out_->read_replicas();
    trace_.mark("rows for the summary");
    const EnsembleSummary s = summarize(all.params, all.status, static_cast<int>(id_.param_names.size()));
    trace_.mark("summary statistics");
    out_->write_summary(s);
    write_quality(all);
    print_summary(*pb_, out_->file(), all, s, std::cout);
    trace_.mark("summary written and printed");
}

/// /quality (src/fit/fit_quality.hpp) for correlated data (systematics, a covariance,
/// normalisations or commondata) and a file that holds a central fit that converged or stopped at
/// max_iterations: chi2 per data set, the sources' shifts and pulls, the replicas' chi2 against
/// the central data. A shard without the central fit writes its replicas' chi2 alone, which
/// `merge` carries (merged_quality). Uncorrelated fits have none of the first two and their total
/// chi2 in /central; the replicas' chi2 would cost rank 0 a model evaluation per replica and
/// point after the run (1e8 spot replicas: minutes, against a 3 s whole command), so they get no
/// /quality.
void FitRun::write_quality(const ReplicaBlock& rows) {
    h5::File& f = out_->file();
    if (!pb_->config.correlated()) return;
    std::vector<double> central;  // none in a shard without replica 0
    if (id_.span.central) {
        if (!f.exists("/central/params")) return;
        const std::int64_t st = f.read_int64("/central/status")[0];
        if (st != 0 && st != 1) return;
        central = f.read_double("/central/params");
    } else if (rows.status.empty()) {
        return;  // an empty shard
    }
    const FitQuality q = fit_quality(*pb_, quality_in_, central, rows, id_.span.begin, threads_.threads);
    f.reserve(fit_quality_bytes(rows.size(), q.dataset_n.size() + q.shift.size()), "the fit quality");
    write_fit_quality(f, q);
    trace_.mark("fit quality");
}

/// The fit's part of the run's timing (report_run_timing): the dispatcher's and the writer's
/// account as attributes and JSON fields, its kernels, the table with the policy line.
TimingReport FitRun::timing_report() {
    mine_.mpi_calls += ctx_.is_root() ? dispatch_.mpi_calls : 0;
    mine_.mpi_bytes += ctx_.is_root() ? dispatch_.mpi_bytes : 0;
    TimingReport r;
    r.mine = mine_;
    if (in_place_writer_) {  // each rank's own writer thread: where its output time went
        const ReplicaWriter::Stats rs = in_place_writer_->stats();
        r.columns.extra = {"rows_write_seconds", "rows_wait_seconds"};  // its rows: the replicas column
        r.mine.extra = {rs.write_seconds, rs.wait_seconds};
    }
    r.tally = worker_->kernel_tally();
    r.gpu = worker_->kind() == WorkerKind::gpu;
    r.trace_title = "ensemblefit fit " + opt_.config_path;
    r.baseline = opt_.baseline;
    if (!ctx_.is_root()) return r;
    r.file = &out_->file();
    r.json_path = pb_->config.output_file + ".timing.json";
    const SchedPolicy policy = parse_sched_policy(pb_->config.sched_policy);
    const ReplicaWriter::Stats ws = writer_ ? writer_->stats() : ReplicaWriter::Stats{};
    r.kernels = [this](const GatheredTiming&, const std::vector<KernelSum>& sums, const Ceilings& ceilings) {
        return fit_kernel_records(*pb_, sums, ceilings);
    };
    r.attributes = [this, ws, policy](h5::File& f, const std::string& record, const GatheredTiming& t) {
        for (const std::string& group : {std::string("/timing"), record}) {
            write_dispatch_timing(f, group, dispatch_, ws, policy, t.metrics.speedup > 0 ? opt_.baseline : "");
            if (in_place_writer_) f.set_attr(group, "rows_in_place", std::int64_t{1});
        }
    };
    r.json_fields = [this, ws, policy] { return dispatch_json(dispatch_, ws, policy); };
    r.print = [this, policy](const GatheredTiming& t) {
        print_dispatch_timing(t, dispatch_, policy);
        if (in_place_writer_)
            std::printf("  rows written in place by every rank (rows_write_seconds: its writer thread; rank 0 "
                        "wrote index and status)\n");
    };
    r.print_last = [this, json = r.json_path] {
        std::printf("output: %s (timing also in %s)\n", pb_->config.output_file.c_str(), json.c_str());
        trace_.mark("timing gathered, written and printed");
    };
    return r;
}

void FitRun::close() {
    if (out_) out_->close();
    trace_.mark("output closed");
}

/// Every shard's run records (or, from a file before records, its /timing) as records of the
/// merged file, in replica order: `report` on the merged file sums the work of every run.
void copy_run_records(h5::File& out, const std::vector<std::string>& inputs, const std::vector<size_t>& order) {
    std::int64_t next = 0;
    for (size_t k : order) {
        const h5::File in = h5::File::open_read(inputs[k]);
        for (const std::string& g : run_record_groups(in)) {
            const std::string record = "/timing/runs/" + std::to_string(next++);
            out.copy_from(in, g, record);
            out.set_attr(record, "shard_file", inputs[k]);
        }
    }
}

/// Every shard read and checked (read_results checks the datasets against the shard's
/// identity), complete, and of the same config, data and parameters as the first.
std::vector<ResultsContent> read_shards(const std::vector<std::string>& inputs) {
    std::vector<ResultsContent> shards;
    for (const auto& in : inputs) {
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
        if (const std::string d = plugin_difference(b, "in " + inputs[i], a, "in " + inputs[0]); !d.empty())
            throw usage_error("merge: " + d + "; the shards ran different models");
        if (b.param_names != a.param_names || b.replicas_total != a.replicas_total || b.model != a.model)
            throw data_error("merge: " + inputs[i] + ": attributes param_names, replicas_total or model differ from " +
                             inputs[0] + "'s, though the configs agree (a tampered file?)");
    }
    return shards;
}

/// Shards in replica order, and which one holds the central fit.
struct MergePlan {
    std::vector<size_t> order;
    size_t central = 0;
};

/// Orders the shards and checks that they cover 1..R once, with one central fit.
MergePlan plan_merge(const std::vector<ResultsContent>& shards, const std::vector<std::string>& inputs) {
    MergePlan plan;
    plan.order.resize(shards.size());
    for (size_t i = 0; i < plan.order.size(); ++i) plan.order[i] = i;
    std::sort(plan.order.begin(), plan.order.end(),
              [&](size_t a, size_t b) { return shards[a].id.span.begin < shards[b].id.span.begin; });
    const std::int64_t R = shards[0].id.replicas_total;
    std::int64_t next = 1;
    int central = -1;
    for (size_t k : plan.order) {
        const ResultsContent& c = shards[k];
        const std::string& name = inputs[k];
        if (c.id.span.central) {
            if (central >= 0)
                throw usage_error("merge: both " + inputs[static_cast<size_t>(central)] + " and " + name +
                                  " hold the central fit (replica 0)");
            central = static_cast<int>(k);
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
        throw usage_error("merge: replicas " + std::to_string(next) + ".." + std::to_string(R) + " are in no file");
    if (central < 0) throw usage_error("merge: no file holds the central fit (replica 0, shard 0)");
    plan.central = static_cast<size_t>(central);
    return plan;
}

/**
 * /quality of the merged file, as one run over every replica writes it: the central part (chi2
 * in total and per data set, shifts and pulls) from the shard that holds replica 0, which
 * computed it from the same central parameters and data as one run does; each replica's chi2
 * against the central data from the shard that fitted it (fit_quality: a function of the
 * replica's parameters and the data alone, evaluated replica by replica), in replica order.
 * So merge needs neither the data nor the model. Nothing when the central shard has no central
 * part (uncorrelated data, a central fit that failed); the central part alone, said on stderr,
 * when a shard holds no replicas' chi2 (written before shards kept them).
 */
FitQuality merged_quality(const std::vector<std::string>& inputs, const std::vector<ResultsContent>& shards,
                          const MergePlan& plan) {
    FitQuality q = read_fit_quality(h5::File::open_read(inputs[plan.central]));
    if (q.empty()) return q;
    q.replica_index.clear();
    q.replica_chi2.clear();
    for (size_t k : plan.order) {
        const ReplicaSpan& span = shards[k].id.span;
        if (span.size() == 0) continue;
        const FitQuality part = read_fit_quality(h5::File::open_read(inputs[k]));
        if (part.replica_index.empty()) {
            std::fprintf(stderr, "merge: %s holds no replicas' chi2 against the central data (/quality/replica_chi2: "
                         "a shard from before shards wrote it); the merged /quality has the central fit's part only\n",
                         inputs[k].c_str());
            q.replica_index.clear();
            q.replica_chi2.clear();
            return q;
        }
        bool rows_match = part.replica_index.size() == static_cast<size_t>(span.size()) &&
                          part.replica_chi2.size() == part.replica_index.size();
        for (size_t j = 0; rows_match && j < part.replica_index.size(); ++j)
            rows_match = part.replica_index[j] == span.begin + static_cast<std::int64_t>(j);
        if (!rows_match)
            throw data_error(inputs[k] + ": /quality/replica_index and replica_chi2 do not match its replicas " +
                             std::to_string(span.begin) + ".." + std::to_string(span.end - 1));
        q.replica_index.insert(q.replica_index.end(), part.replica_index.begin(), part.replica_index.end());
        q.replica_chi2.insert(q.replica_chi2.end(), part.replica_chi2.begin(), part.replica_chi2.end());
    }
    return q;
}

}  // namespace

constexpr double kMaxSlowdown = 1000.0;

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
        // A factor beyond 1000 would only hang the run (a unit of 1 ms would take minutes).
        if (colon == std::string::npos || a.empty() || b.empty() || *e1 || *e2 || r < 0 || !(f >= 1.0) ||
            !(f <= kMaxSlowdown))
            throw usage_error("--debug.slowdown: expected RANK:FACTOR[,RANK:FACTOR] with a FACTOR in 1..1000, got '" +
                              spec.substr(0, 80) + "'");
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
    long i = 0, n = 0;
    if (text == "auto") {
        const LauncherEnvironment& env = launcher_environment();
        if (!env.array_task_id || !env.array_task_count)
            throw usage_error("--shard auto: SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT are not set "
                              "(not a Slurm array task?)");
        i = *env.array_task_id - env.array_task_min.value_or(0);
        n = *env.array_task_count;
    } else {
        const auto slash = text.find('/');
        char* e1 = nullptr;
        char* e2 = nullptr;
        const std::string a = text.substr(0, slash), b = slash == std::string::npos ? "" : text.substr(slash + 1);
        i = std::strtol(a.c_str(), &e1, 10);
        n = std::strtol(b.c_str(), &e2, 10);
        if (slash == std::string::npos || a.empty() || b.empty() || *e1 || *e2)
            throw usage_error("--shard: expected i/n (e.g. 0/4) or auto, got '" + text.substr(0, 80) + "'");
    }
    if (n < 1 || n > (1L << 30))  // wide (long) values: a count above 2^32 must not wrap into range
        throw usage_error("--shard: the shard count must be in 1..1073741824, got '" + text.substr(0, 80) + "'");
    if (i < 0 || i >= n)
        throw usage_error("--shard: shard index " + std::to_string(i) + " is outside 0.." + std::to_string(n - 1));
    index = static_cast<int>(i);
    count = static_cast<int>(n);
}

void run_fit(const FitRunOptions& opt, const MpiContext& ctx) {
    RunSession session(ctx, opt);
    FitRun fit(opt, session.state());
    session.run(fit);
}

void run_merge(const std::string& output, const std::vector<std::string>& inputs, bool overwrite) {
    if (inputs.empty()) throw usage_error("merge: no shard files given");
    const OutputAction action = check_serial_output(output, "merge: -o", overwrite, inputs);
    const std::vector<ResultsContent> shards = read_shards(inputs);  // every shard checked before writing
    const MergePlan plan = plan_merge(shards, inputs);
    const std::int64_t R = shards[0].id.replicas_total;
    RunIdentity id = shards[plan.central].id;
    id.shard = ShardSpec{};
    id.span = shard_span(R, id.shard);
    // Written under a temporary name, renamed over the output only once complete.
    PendingOutput pending(output);
    try {
        ResultsFile out = ResultsFile::create(pending.temp_path(), id);
        out.write(shards[plan.central].central);
        for (size_t k : plan.order)
            if (shards[k].replicas.size() > 0) out.write(shards[k].replicas);
        const ReplicaBlock all = out.read_replicas();
        out.write_summary(summarize(all.params, all.status, all.P));
        const FitQuality quality = merged_quality(inputs, shards, plan);
        if (!quality.empty()) {
            const std::size_t entries = quality.dataset_n.size() + quality.shift.size();
            out.file().reserve(fit_quality_bytes(quality.replica_chi2.size(), entries), "the fit quality");
            write_fit_quality(out.file(), quality);
        }
        out.file().set_attr("/", "merged_from", inputs);
        copy_run_records(out.file(), inputs, plan.order);
        out.file().flush();
        out.close();
    } catch (const Error& e) {
        throw Error(e.code() == ExitCode::runtime ? ExitCode::data : e.code(),
                    "merge: " + std::string(e.what()) + "; " +
                        (action == OutputAction::replace ? "the previous '" + output + "' is unchanged"
                                                         : "nothing was written"));
    }
    pending.commit();
    std::printf("merged %zu file(s), replicas 1..%lld and the central fit, into %s\n", inputs.size(),
                static_cast<long long>(R), output.c_str());
    print_file_summary(output, std::cout);
}

}  // namespace ef

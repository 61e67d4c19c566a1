// SPDX-License-Identifier: MIT
#include <ensemblefit/recon/reconstruction.hpp>

#include <unistd.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>

#include <ensemblefit/core/config.hpp>
#include <ensemblefit/core/diagnostics.hpp>
#include <ensemblefit/core/error.hpp>
#include <ensemblefit/fit/ensemble_run.hpp>
#include <ensemblefit/recon/ptycho_dataset.hpp>
#include <ensemblefit/recon/recon_config.hpp>
#include <ensemblefit/recon/recon_worker.hpp>
#include <ensemblefit/sched/phase_timer.hpp>

#include "kernels/recon/ptycho_math.hpp"
#include "src/io/h5.hpp"
#include "src/recon/phase_error.hpp"
#include "src/recon/png_preview.hpp"
#include "src/recon/probe_modes.hpp"
#include "src/recon/ptycho_h5.hpp"
#include "src/sched/batch_schedule.hpp"

namespace ef {

namespace {

using recon::Complex;

bool file_exists(const std::string& path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0;
}

double now_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string output_stem(const std::string& path) {
    const auto dot = path.rfind('.');
    const auto slash = path.rfind('/');
    if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return path;
    return path.substr(0, dot);
}

/// Everything the run accumulates for the output and the report.
struct RunState {
    std::vector<double> loss;
    std::vector<double> iteration_seconds;
    std::vector<double> mode_powers;
    double nrmse = -1, rmse = -1;
    std::int64_t allreduce_calls = 0;
    double allreduce_bytes = 0;
};

/// `--debug.speeds W0,W1,...[/...]`: one list of `ranks` positive speeds per rebalance point.
std::vector<std::vector<double>> parse_debug_speeds(const std::string& spec, int ranks) {
    std::vector<std::vector<double>> out;
    if (spec.empty()) return out;
    auto bad = [&]() {
        return usage_error("--debug.speeds: each list needs one positive number per rank (" + std::to_string(ranks) +
                           "), got '" + spec + "'");
    };
    std::stringstream lists(spec);
    std::string list;
    while (std::getline(lists, list, '/')) {
        std::vector<double> v;
        std::stringstream items(list);
        std::string item;
        while (std::getline(items, item, ',')) {
            char* end = nullptr;
            const double d = std::strtod(item.c_str(), &end);
            if (item.empty() || end != item.c_str() + item.size() || !(d > 0) || !std::isfinite(d)) throw bad();
            v.push_back(d);
        }
        if (v.size() != static_cast<size_t>(ranks)) throw bad();
        out.push_back(std::move(v));
    }
    if (out.empty()) throw bad();
    return out;
}

class Reconstruction {
   public:
    Reconstruction(const ReconRunOptions& opt, const MpiContext& ctx) : opt_(opt), ctx_(ctx) {}

    void run();

   private:
    // ---- setup -------------------------------------------------------------------------
    void setup() {
        cfg_ = load_recon_config(opt_.config_path, opt_.overrides);
        if (!file_exists(cfg_.data_file))
            throw usage_error(cfg_.where("data.file") + ": no such file '" + cfg_.data_file + "'");
        ds_ = open_ptycho_dataset(cfg_.data_file, cfg_.data_format, cfg_.pixel_size, cfg_.margin);
        n_ = static_cast<std::int64_t>(ds_.h) * ds_.w;
        bool integer_positions = true;
        for (double p : ds_.positions) integer_positions = integer_positions && std::abs(p - std::nearbyint(p)) < 1e-6;
        subpixel_ = cfg_.subpixel == "on" || (cfg_.subpixel == "auto" && (!integer_positions || cfg_.correct_positions));
        if (cfg_.correct_positions && cfg_.subpixel == "off")
            throw usage_error(cfg_.where("positions.correct") + ": position correction needs model.subpixel = on or auto");
        if (cfg_.probe_init == "file" && !ds_.has_probe)
            throw usage_error(cfg_.where("probe.init") + ": '" + ds_.path + "' has no probe");
        schedule_ = std::make_unique<BatchSchedule>(ds_.count, cfg_.batch_size, cfg_.seed);
        debug_speeds_ = parse_debug_speeds(opt_.debug_speeds, ctx_.size());
        if (!debug_speeds_.empty() && cfg_.balance != "throughput")
            throw usage_error("--debug.speeds: needs run.balance = throughput");
        if (schedule_->strata() < ctx_.size() && ctx_.is_root())
            std::fprintf(stderr, "ensemblefit: warning: batch size %lld < %d ranks: some ranks have no work\n",
                         static_cast<long long>(schedule_->strata()), ctx_.size());

        std::string thread_source, thread_warning;
        threads_ = resolve_threads(cfg_.threads, ctx_.local_size(), thread_source, thread_warning);
        const std::string& want = cfg_.workers[std::min(static_cast<size_t>(ctx_.rank()), cfg_.workers.size() - 1)];
        collective(ctx_, [&] {
            const int ndev = cuda_device_count();
            WorkerKind kind = WorkerKind::cpu;
            if (want == "gpu" || (want == "auto" && ndev > 0)) kind = WorkerKind::gpu;
            ReconWorkerOptions wo;
            wo.h = ds_.h;
            wo.w = ds_.w;
            wo.modes = cfg_.modes;
            wo.obj_h = ds_.obj_h;
            wo.obj_w = ds_.obj_w;
            wo.poisson = cfg_.loss == "poisson";
            wo.amplitude_phase = cfg_.amplitude_phase;
            wo.subpixel = subpixel_;
            wo.amplitude_min = cfg_.amplitude_min;
            wo.amplitude_max = cfg_.amplitude_max;
            wo.double_precision = cfg_.precision == "double";
            wo.threads = threads_;
            wo.device = ndev > 0 ? ctx_.local_rank() % ndev : 0;
            wo.fft_measure = cfg_.fft_measure;
            wo.tuning = cfg_.tuning;
            wo.peer_trace = diagnostics().recon_peer_trace;
            wo.phase_trace = diagnostics().recon_phases;
            worker_ = make_recon_worker(kind, wo);
        });
        setup_device_sum();
        if (cfg_.tuning.deferred == TuningSwitch::on && !(ctx_.size() == 1 || device_sum_))
            throw usage_error(cfg_.where("tuning.deferred") +
                              ": deferred steps need the gradients on the devices (one rank, or sums on the GPUs)");
        worker_->keep_gradients_on_device(ctx_.size() == 1 || device_sum_);
        if (!thread_warning.empty() && worker_->kind() == WorkerKind::cpu && ctx_.local_rank() == 0)
            std::fprintf(stderr, "ensemblefit: warning: %s\n", thread_warning.c_str());
        // Output: refused if it exists (unless --overwrite) and checked writable, before any work.
        collective(ctx_, [&] {
            if (!ctx_.is_root()) return;
            const std::string& path = cfg_.output_file;
            if (file_exists(path) && !opt_.overwrite)
                throw usage_error(cfg_.where("output.file") + ": '" + path + "' exists; pass --overwrite to replace it");
            const auto slash = path.rfind('/');
            const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
            if (access(dir.c_str(), W_OK) != 0)
                throw usage_error(cfg_.where("output.file") + ": cannot write '" + path + "' (" + std::strerror(errno) + ")");
        });

        std::vector<double> equal(static_cast<size_t>(ctx_.size()), 1.0);
        bounds_ = BatchSchedule::partition(schedule_->strata(), equal);

        std::ostringstream me;
        me << ctx_.rank() << "\t" << ctx_.host() << "\t" << worker_->describe();
        const std::vector<std::string> placement = ctx_.gather(me.str());
        if (ctx_.is_root()) {
            std::printf("reconstruct: %s: %lld patterns %d x %d, object %d x %d, %d probe mode%s, %s loss, "
                        "sub-pixel shifts %s, position correction %s\n",
                        ds_.path.c_str(), static_cast<long long>(ds_.count), ds_.h, ds_.w, ds_.obj_h, ds_.obj_w,
                        cfg_.modes, cfg_.modes == 1 ? "" : "s", cfg_.loss.c_str(), subpixel_ ? "on" : "off",
                        cfg_.correct_positions ? "on" : "off");
            std::printf("solver: %d iterations x %lld mini-batches of %lld (stratified random, seed %llu), Adam\n",
                        cfg_.iterations, static_cast<long long>(schedule_->batches_per_iteration()),
                        static_cast<long long>(schedule_->strata()), static_cast<unsigned long long>(cfg_.seed));
            std::printf("placement:\n  rank\thost\tworker\n");
            for (const auto& p : placement) std::printf("  %s\n", p.c_str());
            if (opt_.dry_run) std::printf("dry run: nothing reconstructed, nothing written\n");
            std::fflush(stdout);
        }
    }

    /// Sums on the GPUs when every rank is a GPU worker (run.allreduce = auto | nccl | peer):
    /// by direct loads between the GPUs where all ranks share a host and CUDA IPC works (peer),
    /// else NCCL.
    void setup_device_sum() {
        if (ctx_.size() == 1 || cfg_.allreduce == "mpi") return;
        int gpu = worker_->kind() == WorkerKind::gpu ? 1 : 0, all_gpu = 0;
        EF_MPI_CHECK(MPI_Allreduce(&gpu, &all_gpu, 1, MPI_INT, MPI_MIN, ctx_.world()));
        std::string why = "not every rank is a GPU worker";
        int ok = 0;
        bool peer = false;
        if (all_gpu) {
            std::vector<char> id = ctx_.is_root() ? worker_->device_sum_id() : std::vector<char>();
            int len = static_cast<int>(id.size());
            EF_MPI_CHECK(MPI_Bcast(&len, 1, MPI_INT, 0, ctx_.world()));
            id.resize(static_cast<size_t>(len));
            if (len > 0) EF_MPI_CHECK(MPI_Bcast(id.data(), len, MPI_CHAR, 0, ctx_.world()));
            // Peer sums need every rank on one host (one shared-memory node).
            MPI_Comm node = MPI_COMM_NULL;
            EF_MPI_CHECK(MPI_Comm_split_type(ctx_.world(), MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
            int node_size = 0;
            EF_MPI_CHECK(MPI_Comm_size(node, &node_size));
            EF_MPI_CHECK(MPI_Comm_free(&node));
            peer = (cfg_.allreduce == "auto" || cfg_.allreduce == "peer") && node_size == ctx_.size();
            if (cfg_.allreduce == "peer" && !peer)
                throw usage_error(cfg_.where("run.allreduce") + ": peer sums need every rank on one host");
            int mine = len > 0 && worker_->device_sum_init(id, ctx_.size(), ctx_.rank(), why) ? 1 : 0;
            if (len == 0) why = "NCCL is not available on rank 0 (libnccl.so.2 not found)";
            EF_MPI_CHECK(MPI_Allreduce(&mine, &ok, 1, MPI_INT, MPI_MIN, ctx_.world()));
            if (!ok && mine) why = "NCCL failed to start on another rank";
        }
        device_sum_ = ok == 1;
        if (!device_sum_ && (cfg_.allreduce == "nccl" || cfg_.allreduce == "peer"))
            throw usage_error(cfg_.where("run.allreduce") + ": " + cfg_.allreduce + " is not possible here: " + why);
        if (device_sum_) {
            std::string peer_why;
            const bool peer_on = peer && worker_->device_sum_peer(peer_why);  // collective: NCCL runs on every rank
            if (cfg_.allreduce == "peer" && !peer_on)
                throw usage_error(cfg_.where("run.allreduce") + ": peer is not possible here: " + peer_why);
            const std::string method = peer_on ? std::string("peer") : peer ? "nccl: " + peer_why : std::string("nccl");
            if (ctx_.is_root()) std::printf("gradient sums: %s\n", method.c_str());
        }
        if (!device_sum_ && all_gpu && ctx_.is_root())
            std::fprintf(stderr, "ensemblefit: warning: GPU ranks sum gradients through host memory with MPI (%s)\n",
                         why.c_str());
    }

    std::int64_t first_position(int rank) const {
        return schedule_->stratum_begin(bounds_[static_cast<size_t>(rank)]);
    }

    /// Reads this rank's share of the patterns for strata `bounds`.
    void load_share(const std::vector<std::int64_t>& bounds) {
        PhaseTimer::Scope io(timer_, Phase::io);
        const std::int64_t s0 = bounds[static_cast<size_t>(ctx_.rank())], s1 = bounds[static_cast<size_t>(ctx_.rank()) + 1];
        const std::int64_t p0 = schedule_->stratum_begin(s0), p1 = schedule_->stratum_begin(s1);
        std::vector<float> share;
        collective(ctx_, [&] { share = read_patterns(ds_, p0, p1 - p0); });
        worker_->set_patterns(p1 - p0, share.data());
        my_first_ = p0;
        my_count_ = p1 - p0;
        if (!have_mean_) {
            // The mean pattern (FFT order) over all ranks: the probe's first guess and its power.
            std::vector<double> sum(static_cast<size_t>(n_), 0.0);
            for (std::int64_t j = 0; j < my_count_; ++j)
                for (std::int64_t q = 0; q < n_; ++q) sum[static_cast<size_t>(q)] += share[static_cast<size_t>(j * n_ + q)];
            EF_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, sum.data(), static_cast<int>(n_), MPI_DOUBLE, MPI_SUM, ctx_.world()));
            mean_pattern_.resize(sum.size());
            mean_total_ = 0;
            for (size_t q = 0; q < sum.size(); ++q) {
                mean_pattern_[q] = sum[q] / static_cast<double>(ds_.count);
                mean_total_ += mean_pattern_[q];
            }
            have_mean_ = true;
        }
    }

    void initial_model() {
        PhaseTimer::Scope s(timer_, Phase::setup);
        const int K = cfg_.modes;
        std::vector<Complex> probe;
        int have = 0;
        if (cfg_.probe_init == "file" || (cfg_.probe_init == "auto" && ds_.has_probe)) {
            collective(ctx_, [&] { probe = read_probe(ds_, have); });
            have = std::min(have, K);
            probe.resize(static_cast<size_t>(have * n_));
        } else {
            probe = recon::probe_from_mean_pattern(mean_pattern_, ds_.h, ds_.w);
            have = 1;
        }
        if (have < K) recon::add_probe_modes(probe, have, K, ds_.h, ds_.w, cfg_.mode_power, mean_total_);
        if (K > 1 && cfg_.orthogonalize) state_.mode_powers = recon::orthogonalize_modes(probe, K, n_);
        if (cfg_.fix_intensity || have < K || !ds_.has_probe) recon::scale_probe_power(probe, mean_total_);
        worker_->set_probe(probe);
        const size_t on = static_cast<size_t>(ds_.obj_h) * static_cast<size_t>(ds_.obj_w);
        worker_->set_object(std::vector<double>(on, 1.0), std::vector<double>(on, 0.0));
        pos_m_.assign(ds_.positions.size(), 0.0);
        pos_v_.assign(ds_.positions.size(), 0.0);
        if (ds_.has_truth && ctx_.is_root()) truth_ = read_truth_object(ds_);
        // The region the probe centres scanned: where the object is well determined.
        double y0 = 1e300, y1 = -1e300, x0 = 1e300, x1 = -1e300;
        for (std::int64_t i = 0; i < ds_.count; ++i) {
            y0 = std::min(y0, ds_.positions[static_cast<size_t>(2 * i)]);
            y1 = std::max(y1, ds_.positions[static_cast<size_t>(2 * i)]);
            x0 = std::min(x0, ds_.positions[static_cast<size_t>(2 * i + 1)]);
            x1 = std::max(x1, ds_.positions[static_cast<size_t>(2 * i + 1)]);
        }
        roi_[0] = std::max(0, static_cast<int>(std::ceil(y0 + ds_.h / 2.0)));
        roi_[1] = std::min(ds_.obj_h, static_cast<int>(std::floor(y1 + ds_.h / 2.0)) + 1);
        roi_[2] = std::max(0, static_cast<int>(std::ceil(x0 + ds_.w / 2.0)));
        roi_[3] = std::min(ds_.obj_w, static_cast<int>(std::floor(x1 + ds_.w / 2.0)) + 1);
    }

    // ---- iterations ----------------------------------------------------------------------
    void iterate() {
        timer_.enter(Phase::compute);  // loop bookkeeping counts as compute
        const int report_every = cfg_.report_every > 0 ? cfg_.report_every : std::max(1, cfg_.iterations / 20);
        const recon::LossKind loss_kind = cfg_.loss == "poisson" ? recon::LossKind::poisson : recon::LossKind::amplitude;
        if (ctx_.is_root() && cfg_.iterations > 0) {
            std::printf("\n  %6s %14s %10s%s\n", "iter", "loss", "s/iter", truth_.empty() ? "" : "   phase NRMSE");
            std::fflush(stdout);
        }
        for (int it = 1; it <= cfg_.iterations; ++it) {
            const double wall0 = now_seconds();
            const std::int64_t s0 = bounds_[static_cast<size_t>(ctx_.rank())];
            const std::int64_t s1 = bounds_[static_cast<size_t>(ctx_.rank()) + 1];
            schedule_->start_iteration(it, s0, s1);
            const bool probe_on = it >= cfg_.probe_start && cfg_.lr_probe > 0;
            const bool pos_on = cfg_.correct_positions && it >= cfg_.positions_start && cfg_.lr_positions > 0;
            // Learning-rate factor: 1, or a half cosine from 1 at decay_start to decay_to at the end.
            double rate = 1.0;
            if (cfg_.decay_start > 0 && it >= cfg_.decay_start && cfg_.iterations > cfg_.decay_start) {
                const double x = static_cast<double>(it - cfg_.decay_start) / (cfg_.iterations - cfg_.decay_start);
                rate = cfg_.decay_to + (1 - cfg_.decay_to) * 0.5 * (1 + std::cos(M_PI * x));
            }
            Steps steps;
            steps.probe_on = probe_on;
            steps.pos_on = pos_on;
            steps.rate = rate;
            steps.loss_kind = loss_kind;
            const std::int64_t nb = schedule_->batches_per_iteration();
            // Deferred steps (tuning.deferred; the GPU's default) queue the whole iteration on the device.
            const bool deferred = worker_->deferred_supported() && (ctx_.size() == 1 || device_sum_);
            if (deferred) batches_deferred(it, nb, steps);
            else
                for (std::int64_t t = 0; t < nb; ++t) batch_step(it, t, steps);
            if (probe_on && (cfg_.orthogonalize || cfg_.fix_intensity)) {
                PhaseTimer::Scope c(timer_, Phase::compute);
                constrain_probe();
            }
            state_.loss.push_back(steps.loss_sum / static_cast<double>(nb));
            state_.iteration_seconds.push_back(now_seconds() - wall0);
            grad_seconds_total_ += steps.grad_seconds;
            speed_seconds_total_ += steps.speed_seconds;
            positions_done_ += steps.done;
            if (it % report_every == 0 || it == cfg_.iterations) report(it);
            if (cfg_.checkpoint_every > 0 && it % cfg_.checkpoint_every == 0 && it < cfg_.iterations) write_output(false);
            if (cfg_.balance == "throughput" && ctx_.size() > 1 && (it <= 2 || it % 10 == 0) && it < cfg_.iterations)
                rebalance();
        }
    }

    /// What an iteration's batch steps share, and what they add up.
    struct Steps {
        bool probe_on = false, pos_on = false;
        double rate = 1;
        recon::LossKind loss_kind = recon::LossKind::amplitude;
        double loss_sum = 0;      // of the batches' losses
        double grad_seconds = 0;   // in gradient passes
        double speed_seconds = 0;  // the same, as the rank's speed is measured (see batches_deferred)
        std::int64_t done = 0;    // positions
    };

    /// This rank's part of batch t: its rows of the pattern share and their positions.
    ReconBatch assemble(const std::vector<std::int64_t>& members) const {
        ReconBatch batch;
        batch.pattern_of.reserve(members.size());
        batch.positions.reserve(2 * members.size());
        for (std::int64_t idx : members) {
            batch.pattern_of.push_back(idx - my_first_);
            batch.positions.push_back(ds_.positions[static_cast<size_t>(2 * idx)]);
            batch.positions.push_back(ds_.positions[static_cast<size_t>(2 * idx + 1)]);
        }
        return batch;
    }

    /// Positions of batch t per rank, and where each rank's start in global batch order; the total.
    std::int64_t batch_layout(std::int64_t t, std::vector<int>& counts, std::vector<int>& starts) const {
        counts.assign(static_cast<size_t>(ctx_.size()), 0);
        starts.assign(counts.size(), 0);
        int total = 0;
        for (int r = 0; r < ctx_.size(); ++r) {
            int c = 0;
            for (std::int64_t s = bounds_[static_cast<size_t>(r)]; s < bounds_[static_cast<size_t>(r) + 1]; ++s)
                c += t < schedule_->stratum_size(s) ? 1 : 0;
            counts[static_cast<size_t>(r)] = c;
            starts[static_cast<size_t>(r)] = total;
            total += c;
        }
        return total;
    }

    /// The Adam step of a batch (scale: the loss factor; deferred steps compute it on the device).
    ReconUpdate next_update(const Steps& st, double scale) {
        ReconUpdate u;
        u.object = true;
        u.probe = st.probe_on;
        u.grad_scale = scale;
        u.lr_p0 = st.rate * cfg_.lr_amplitude;
        u.lr_p1 = st.rate * cfg_.lr_phase;
        u.lr_probe = st.rate * cfg_.lr_probe * std::sqrt(mean_total_ / static_cast<double>(n_));  // relative rate
        u.beta1 = cfg_.beta1;
        u.beta2 = cfg_.beta2;
        u.eps = cfg_.epsilon;
        u.t_object = ++t_object_;
        u.t_probe = st.probe_on ? ++t_probe_ : t_probe_;
        return u;
    }

    static Error diverged(double loss, int it) {
        return runtime_error("reconstruction diverged: the loss is " + std::to_string(loss) + " at iteration " +
                             std::to_string(it) + " (lower the learning rates)");
    }

    /**
     * One batch, waiting for it: gradients, the sum over ranks (NCCL on the devices, or MPI over
     * host buffers) with the loss terms gathered meanwhile, the loss factor on the host, Adam.
     */
    void batch_step(int it, std::int64_t t, Steps& st) {
        const double m0 = now_seconds();
        const std::vector<std::int64_t> members = schedule_->members(t);
        const ReconBatch batch = assemble(members);
        ReconBatchTerms terms;
        comm_trace_[4] += now_seconds() - m0;
        {
            PhaseTimer::Scope c(timer_, Phase::compute);
            const double g0 = now_seconds();
            terms = worker_->gradients(batch, st.probe_on, st.pos_on);
            st.grad_seconds += now_seconds() - g0;
            st.speed_seconds += now_seconds() - g0;
        }
        st.done += static_cast<std::int64_t>(members.size());
        // Loss terms per position, in global batch order on every rank: the loss factor is
        // then the same bits on 1 or N ranks.
        double sums[2] = {0, 0};
        double pixels = 0;
        if (ctx_.size() > 1) {
            size_t count = 0;
            double* buf = device_sum_ ? nullptr : worker_->gradient_buffer(st.probe_on, count);
            std::vector<int> counts, displs;
            const int total = 2 * static_cast<int>(batch_layout(t, counts, displs));
            for (size_t r = 0; r < counts.size(); ++r) {
                counts[r] *= 2;
                displs[r] *= 2;
            }
            std::vector<double> terms_all(static_cast<size_t>(total));
            {
                PhaseTimer::Scope s(timer_, Phase::sync);
                EF_MPI_CHECK(MPI_Barrier(ctx_.world()));
            }
            PhaseTimer::Scope c(timer_, Phase::comm);
            const double c0 = now_seconds();
            if (device_sum_) {
                worker_->device_sum(st.probe_on);
                count = static_cast<size_t>(2 * static_cast<std::int64_t>(ds_.obj_h) * ds_.obj_w +
                                            (st.probe_on ? 2 * cfg_.modes * n_ : 0));
            } else {
                EF_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, static_cast<int>(count), MPI_DOUBLE, MPI_SUM, ctx_.world()));
            }
            const double c1 = now_seconds();
            // the loss terms travel while the devices sum
            EF_MPI_CHECK(MPI_Allgatherv(terms.position_terms.data(), static_cast<int>(terms.position_terms.size()),
                                        MPI_DOUBLE, terms_all.data(), counts.data(), displs.data(), MPI_DOUBLE,
                                        ctx_.world()));
            comm_trace_[1] += now_seconds() - c1;
            if (device_sum_) worker_->device_sum_wait();
            comm_trace_[0] += now_seconds() - c0;
            state_.allreduce_calls += 2;
            state_.allreduce_bytes += static_cast<double>(count) * 8.0 + 8.0 * total;
            for (int i = 0; i < total; i += 2) {
                sums[0] += terms_all[static_cast<size_t>(i)];
                sums[1] += terms_all[static_cast<size_t>(i) + 1];
            }
            pixels = static_cast<double>(total / 2) * static_cast<double>(n_);
        } else {
            sums[0] = terms.loss_a;
            sums[1] = terms.loss_b;
            pixels = static_cast<double>(members.size()) * static_cast<double>(n_);
        }
        double loss = 0, scale = 0;
        recon::ptycho_loss_scale(st.loss_kind, sums[0], sums[1], pixels, loss, scale);
        if (!std::isfinite(loss)) throw diverged(loss, it);
        st.loss_sum += loss;
        PhaseTimer::Scope c(timer_, Phase::compute);
        const double u0 = now_seconds();
        worker_->update(next_update(st, scale));
        comm_trace_[2] += now_seconds() - u0;
        if (st.pos_on) update_positions(members, terms.position_grad.data(), scale, ++t_pos_, st.rate);
        comm_trace_[3] += now_seconds() - u0;
    }

    /**
     * An iteration's batches as deferred steps (ReconWorker::begin_deferred): the host queues
     * them all and waits once, then takes the position steps in batch order (the same steps as
     * batch_step(): each position is in one batch of the iteration). The phases come from the
     * device's own time stamps: gradients and updates are compute; of the sum over ranks, the
     * shortest rank's time in each batch is communication and the rest of a rank's time waiting
     * for the others (synchronisation); device idle time between batches (the host preparing and
     * launching) is scheduling.
     */
    void batches_deferred(int it, std::int64_t nb, Steps& st) {
        PhaseTimer::Scope c(timer_, Phase::compute);
        const double it0 = now_seconds();
        worker_->begin_deferred(nb, schedule_->strata(), my_count_);
        std::vector<int> counts, starts;
        std::vector<std::vector<std::int64_t>> members(static_cast<size_t>(nb));
        for (std::int64_t t = 0; t < nb; ++t) {
            const double m0 = now_seconds();
            std::vector<std::int64_t>& mine = members[static_cast<size_t>(t)];
            mine = schedule_->members(t);
            const std::int64_t total = batch_layout(t, counts, starts);
            comm_trace_[4] += now_seconds() - m0;
            worker_->gradients_deferred(assemble(mine), st.probe_on, st.pos_on, starts[static_cast<size_t>(ctx_.rank())],
                                        total);
            st.done += static_cast<std::int64_t>(mine.size());
            if (ctx_.size() > 1) {
                worker_->device_sum(st.probe_on);
                state_.allreduce_calls += 1;
                state_.allreduce_bytes += 8.0 * static_cast<double>(2 * static_cast<std::int64_t>(ds_.obj_h) * ds_.obj_w +
                                                                  (st.probe_on ? 2 * cfg_.modes * n_ : 0) + 2 * total);
            }
            worker_->update_deferred(next_update(st, 0.0), static_cast<double>(total) * static_cast<double>(n_), t);
        }
        const ReconDeferredResults res = worker_->end_deferred(nb);
        const double* pg = res.position_grad.data();
        for (std::int64_t t = 0; t < nb; ++t) {
            const double loss = res.loss[static_cast<size_t>(t)];
            if (!std::isfinite(loss)) throw diverged(loss, it);
            st.loss_sum += loss;
            if (!st.pos_on) continue;
            const std::vector<std::int64_t>& mine = members[static_cast<size_t>(t)];
            update_positions(mine, pg, res.scale[static_cast<size_t>(t)], ++t_pos_, st.rate);
            pg += 2 * mine.size();
        }
        // The device timeline into the phases.
        std::vector<double> shortest = res.sum;
        if (ctx_.size() > 1 && !shortest.empty())
            EF_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, shortest.data(), static_cast<int>(shortest.size()), MPI_DOUBLE, MPI_MIN,
                                       ctx_.world()));
        double grad = 0, sum = 0, comm = 0, update = 0, gap = 0;
        for (size_t t = 0; t < res.sum.size(); ++t) {
            grad += res.gradients[t];
            sum += res.sum[t];
            comm += shortest[t];
            update += res.update[t];
            gap += res.gap[t];
        }
        st.grad_seconds += grad;
        // The rank's speed from its median batch: the device times are exact, but a first
        // iteration's batches include one-off costs (kernel modules loaded on first launch) that
        // differ between ranks and would move shares for nothing.
        if (!res.gradients.empty()) {
            std::vector<double> g = res.gradients;
            std::nth_element(g.begin(), g.begin() + static_cast<std::ptrdiff_t>(g.size() / 2), g.end());
            st.speed_seconds += g[g.size() / 2] * static_cast<double>(g.size());
        }
        timer_.move(Phase::compute, Phase::comm, comm);
        timer_.move(Phase::compute, Phase::sync, sum - comm);
        timer_.move(Phase::compute, Phase::sched, gap);
        deferred_trace_[0] += grad;
        deferred_trace_[1] += sum;
        deferred_trace_[2] += comm;
        deferred_trace_[3] += update;
        deferred_trace_[4] += gap;
        deferred_trace_[5] += now_seconds() - it0;
    }

    /**
     * PtyRAD's per-iteration probe constraints where the probe lives: the modes' Gram matrix comes
     * to the host (K x K), its eigenvectors (orthogonalisation, modes by power) and the intensity
     * factor sqrt(target / trace) make one K x K mixing matrix, applied by the worker. Every rank
     * computes the same matrix from the same Gram matrix.
     */
    void constrain_probe() {
        const int K = cfg_.modes;
        const std::vector<Complex> gram = worker_->probe_gram();
        std::vector<Complex> mix(static_cast<size_t>(K) * static_cast<size_t>(K), 0.0);
        for (int k = 0; k < K; ++k) mix[static_cast<size_t>(k) * static_cast<size_t>(K + 1)] = 1.0;
        if (cfg_.orthogonalize && K > 1) recon::hermitian_eigen(gram, K, state_.mode_powers, mix);
        if (cfg_.fix_intensity) {
            double power = 0;  // the trace: the modes' power, which the unitary mix keeps
            for (int k = 0; k < K; ++k) power += gram[static_cast<size_t>(k) * static_cast<size_t>(K + 1)].real();
            if (power > 0 && mean_total_ > 0) {
                const double f = std::sqrt(mean_total_ / power);
                for (Complex& z : mix) z *= f;
            }
        }
        worker_->mix_probe_modes(mix);
    }

    /// Adam on the positions this rank owns (they are local: no reduction needed).
    void update_positions(const std::vector<std::int64_t>& members, const double* grad, double scale, std::int64_t t,
                          double rate) {
        recon::AdamCoefficients<double> a{};
        a.step_size = rate * cfg_.lr_positions / (1 - std::pow(cfg_.beta1, static_cast<double>(t)));
        a.beta1 = cfg_.beta1;
        a.beta2 = cfg_.beta2;
        a.eps = cfg_.epsilon;
        a.inv_sqrt_bc2 = 1 / std::sqrt(1 - std::pow(cfg_.beta2, static_cast<double>(t)));
        a.grad_scale = scale;
        for (size_t j = 0; j < members.size(); ++j)
            for (size_t c = 0; c < 2; ++c) {
                const size_t i = static_cast<size_t>(2 * members[j]) + c;
                recon::adam_step(ds_.positions[i], pos_m_[i], pos_v_[i], grad[2 * j + c], a);
                const double hi = static_cast<double>((c == 0 ? ds_.obj_h - ds_.h : ds_.obj_w - ds_.w));
                ds_.positions[i] = std::clamp(ds_.positions[i], 0.0, hi);
            }
    }

    /// Gathers every rank's positions (and their Adam moments) so that all ranks agree.
    void sync_positions() {
        if (ctx_.size() == 1 || !cfg_.correct_positions) return;
        PhaseTimer::Scope c(timer_, Phase::comm);
        std::vector<int> counts(static_cast<size_t>(ctx_.size())), displs(static_cast<size_t>(ctx_.size()));
        for (int r = 0; r < ctx_.size(); ++r) {
            const std::int64_t a = first_position(r), b = schedule_->stratum_begin(bounds_[static_cast<size_t>(r) + 1]);
            displs[static_cast<size_t>(r)] = static_cast<int>(2 * a);
            counts[static_cast<size_t>(r)] = static_cast<int>(2 * (b - a));
        }
        for (std::vector<double>* v : {&ds_.positions, &pos_m_, &pos_v_})
            EF_MPI_CHECK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, v->data(), counts.data(), displs.data(),
                                        MPI_DOUBLE, ctx_.world()));
    }

    /**
     * New shares proportional to each rank's measured speed: positions per second of gradient
     * work, accumulated since the last change of shares (timing noise averages out, and a share
     * is only moved when the predicted slowest rank gains more than 5%).
     */
    void rebalance() {
        std::vector<double> speed(static_cast<size_t>(ctx_.size()));
        const double secs = speed_seconds_total_ - speed_mark_seconds_;
        const double mine = secs > 0 ? static_cast<double>(positions_done_ - speed_mark_positions_) / secs : 0.0;
        {
            PhaseTimer::Scope c(timer_, Phase::sched);
            EF_MPI_CHECK(MPI_Allgather(&mine, 1, MPI_DOUBLE, speed.data(), 1, MPI_DOUBLE, ctx_.world()));
        }
        if (!debug_speeds_.empty()) speed = debug_speeds_[std::min(rebalance_points_, debug_speeds_.size() - 1)];
        ++rebalance_points_;
        std::vector<std::int64_t> next = BatchSchedule::partition(schedule_->strata(), speed);
        auto slowest = [&](const std::vector<std::int64_t>& b) {
            double worst = 0;
            for (size_t r = 0; r + 1 < b.size(); ++r)
                worst = std::max(worst, speed[r] > 0 ? static_cast<double>(b[r + 1] - b[r]) / speed[r] : 0.0);
            return worst;
        };
        if (next == bounds_ || slowest(next) > 0.95 * slowest(bounds_)) return;
        sync_positions();
        speed_mark_seconds_ = speed_seconds_total_;
        speed_mark_positions_ = positions_done_;
        bounds_ = next;
        load_share(bounds_);
        ++rebalances_;
        if (ctx_.is_root()) {
            std::printf("  rebalanced shares (strata per rank):");
            for (size_t r = 0; r + 1 < bounds_.size(); ++r) std::printf(" %lld", static_cast<long long>(bounds_[r + 1] - bounds_[r]));
            std::printf("\n");
            std::fflush(stdout);
        }
    }

    void report(int it) {
        if (!ctx_.is_root()) return;
        const double secs = state_.iteration_seconds.back();
        std::printf("  %6d %14.8g %10.4f", it, state_.loss.back(), secs);
        if (!truth_.empty()) {
            const recon::PhaseError e = compare_truth();
            std::printf("   %10.3f%%", 100.0 * e.nrmse);
        }
        std::printf("\n");
        std::fflush(stdout);
    }

    recon::PhaseError compare_truth() {
        const std::vector<Complex> obj = worker_->complex_object();
        const recon::PhaseError e = recon::phase_error(obj, truth_, ds_.obj_w, roi_[0], roi_[1], roi_[2], roi_[3]);
        state_.nrmse = e.nrmse;
        state_.rmse = e.rmse;
        return e;
    }

    // ---- output ----------------------------------------------------------------------------
    void write_output(bool final) {
        sync_positions();
        if (!ctx_.is_root()) return;
        PhaseTimer::Scope io(timer_, Phase::io);
        const std::vector<Complex> obj = worker_->complex_object();
        const std::vector<Complex> probe = worker_->probe();
        h5::File f = file_exists(cfg_.output_file) && wrote_once_ ? h5::File::open_write(cfg_.output_file)
                                                                  : h5::File::create(cfg_.output_file);
        wrote_once_ = true;
        namespace x = recon::h5x;
        x::write_complex(f, "/object", {static_cast<std::uint64_t>(ds_.obj_h), static_cast<std::uint64_t>(ds_.obj_w)}, obj);
        x::write_complex(f, "/probe",
                         {static_cast<std::uint64_t>(cfg_.modes), static_cast<std::uint64_t>(ds_.h), static_cast<std::uint64_t>(ds_.w)},
                         probe);
        std::vector<double> pos = ds_.positions;
        for (size_t i = 0; i < pos.size(); i += 2) {
            pos[i] -= ds_.offset_y;
            pos[i + 1] -= ds_.offset_x;
        }
        x::write_double(f, "/positions", {static_cast<std::uint64_t>(ds_.count), 2}, pos);
        f.set_attr("/positions", "object_offset", std::vector<double>{ds_.offset_y, ds_.offset_x});
        f.set_attr("/positions", "description",
                   std::string("top-left of the window, pixels (y, x), in the input's frame; object pixel = position + "
                               "object_offset"));
        x::write_double(f, "/loss", {static_cast<std::uint64_t>(state_.loss.size())}, state_.loss);
        x::write_double(f, "/iteration_seconds", {static_cast<std::uint64_t>(state_.iteration_seconds.size())},
                        state_.iteration_seconds);
        if (!state_.mode_powers.empty())
            x::write_double(f, "/probe_mode_powers", {static_cast<std::uint64_t>(state_.mode_powers.size())}, state_.mode_powers);
        f.set_attr("/", "config", cfg_.resolved_text());
        f.set_attr("/", "data_file", ds_.path);
        if (!ds_.metadata.empty()) f.set_attr("/", "data_metadata", ds_.metadata);
        f.set_attr("/", "iterations_done", static_cast<std::int64_t>(state_.loss.size()));
        f.set_attr("/", "complete", static_cast<std::int64_t>(final ? 1 : 0));
        f.set_attr("/", "version", std::string(EF_VERSION " (" EF_GIT_DESCRIBE ")"));
        f.set_attr("/", "roi", std::vector<double>{double(roi_[0]), double(roi_[1]), double(roi_[2]), double(roi_[3])});
        if (!truth_.empty() && state_.nrmse >= 0) {
            f.set_attr("/", "phase_nrmse", state_.nrmse);
            f.set_attr("/", "phase_rmse", state_.rmse);
        }
        f.flush();
        if (final && cfg_.previews) {
            try {
                previews_ = recon::write_previews(output_stem(cfg_.output_file), obj, ds_.obj_h, ds_.obj_w, probe, cfg_.modes,
                                                  ds_.h, ds_.w);
            } catch (const Error& e) {
                std::fprintf(stderr, "ensemblefit: warning: previews not written: %s\n", e.what());
            }
        }
    }

    void finish() {
        timer_.enter(Phase::io);
        if (!truth_.empty() && ctx_.is_root()) compare_truth();
        write_output(true);
        report_timing();
        if (ctx_.is_root()) {
            if (!truth_.empty())
                std::printf("phase NRMSE against the truth: %.3f%% (rms %.4g rad over %d x %d pixels, offset and ramp "
                            "removed)\n",
                            100.0 * state_.nrmse, state_.rmse, roi_[1] - roi_[0], roi_[3] - roi_[2]);
            for (const auto& p : previews_) std::printf("preview: %s\n", p.c_str());
            std::printf("output: %s\n", cfg_.output_file.c_str());
            std::fflush(stdout);
        }
    }

    /// Per-rank phases under /timing (like the fit's), plus the reconstruction's throughput.
    void report_timing() {
        timer_.stop();
        if (diagnostics().recon_comm_trace) {
            std::fprintf(stderr,
                         "rank %d: gradient sum (with the loss-term gather) %.3f s, of which the gather %.3f s; update %.3f s, "
                         "with positions %.3f s; batch assembly %.3f s; gradients %.3f s\n",
                         ctx_.rank(), comm_trace_[0], comm_trace_[1], comm_trace_[2], comm_trace_[3], comm_trace_[4],
                         grad_seconds_total_);
            if (deferred_trace_[5] > 0)
                std::fprintf(stderr,
                             "rank %d: deferred steps, device time: gradients %.3f s, sum %.3f s (shortest rank %.3f s), "
                             "update %.3f s, idle between batches %.3f s; host wall of those iterations %.3f s\n",
                             ctx_.rank(), deferred_trace_[0], deferred_trace_[1], deferred_trace_[2], deferred_trace_[3],
                             deferred_trace_[4], deferred_trace_[5]);
        }
        const bool probe_on = cfg_.lr_probe > 0 && cfg_.probe_start <= cfg_.iterations;
        const double traffic_per_position = worker_->traffic_bytes(probe_on, cfg_.correct_positions);
        std::vector<double> mine(timer_.all().begin(), timer_.all().end());
        mine.push_back(timer_.wall());
        mine.push_back(static_cast<double>(positions_done_));
        mine.push_back(grad_seconds_total_);
        mine.push_back(traffic_per_position * static_cast<double>(positions_done_));
        mine.push_back(state_.allreduce_bytes);
        mine.push_back(static_cast<double>(state_.allreduce_calls));
        const size_t W = mine.size();
        std::vector<double> all(ctx_.is_root() ? W * static_cast<size_t>(ctx_.size()) : 0);
        EF_MPI_CHECK(MPI_Gather(mine.data(), static_cast<int>(W), MPI_DOUBLE, all.data(), static_cast<int>(W), MPI_DOUBLE, 0,
                                ctx_.world()));
        if (!ctx_.is_root()) return;
        const size_t R = static_cast<size_t>(ctx_.size());
        const size_t kWall = static_cast<size_t>(kPhaseCount), kDone = kWall + 1, kGrad = kWall + 2, kBytes = kWall + 3,
                     kComm = kWall + 4;
        const size_t compute = static_cast<size_t>(Phase::compute);
        double sum_c = 0, max_c = 0, max_wall = 0;
        for (size_t r = 0; r < R; ++r) {
            sum_c += all[r * W + compute];
            max_c = std::max(max_c, all[r * W + compute]);
            max_wall = std::max(max_wall, all[r * W + kWall]);
        }
        const double lb = max_c > 0 ? (sum_c / static_cast<double>(R)) / max_c : 1.0;
        const double ce = max_wall > 0 ? max_c / max_wall : 1.0;
        // Seconds per iteration: the mean without the first (planning, warm-up) when there are more.
        const auto& its = state_.iteration_seconds;
        double per_it = 0;
        if (!its.empty()) {
            const size_t skip = its.size() > 2 ? 1 : 0;
            for (size_t i = skip; i < its.size(); ++i) per_it += its[i];
            per_it /= static_cast<double>(its.size() - skip);
        }
        const double traffic_iter = traffic_per_position * static_cast<double>(ds_.count);  // all ranks, one iteration
        {
            h5::File f = h5::File::open_write(cfg_.output_file);
            for (int p = 0; p <= kPhaseCount + 5; ++p) {
                std::string name;
                size_t col = static_cast<size_t>(p);
                if (p < kPhaseCount) name = to_string(static_cast<Phase>(p));
                else if (col == kWall) name = "wall";
                else if (col == kDone) name = "positions";
                else if (col == kGrad) name = "gradient_seconds";
                else if (col == kBytes) name = "traffic_bytes";
                else if (col == kComm) name = "allreduce_bytes";
                else name = "allreduce_calls";
                std::vector<double> v(R);
                for (size_t r = 0; r < R; ++r) v[r] = all[r * W + col];
                recon::h5x::write_double(f, "/timing/" + name, {R}, v);
            }
            f.set_attr("/timing", "ranks", static_cast<std::int64_t>(R));
            f.set_attr("/timing", "runtime_seconds", max_wall);
            f.set_attr("/timing", "load_balance", lb);
            f.set_attr("/timing", "communication_efficiency", ce);
            f.set_attr("/timing", "parallel_efficiency", lb * ce);
            f.set_attr("/timing", "seconds_per_iteration", per_it);
            f.set_attr("/timing", "traffic_bytes_per_iteration", traffic_iter);
            f.set_attr("/timing", "rebalances", static_cast<std::int64_t>(rebalances_));
            f.flush();
        }
        std::printf("\ntiming: %zu rank(s), wall %.3f s; load balance %.3f, communication efficiency %.3f, parallel "
                    "efficiency %.3f\n",
                    R, max_wall, lb, ce, lb * ce);
        std::printf("  %-5s", "rank");
        for (int p = 0; p < kPhaseCount; ++p) std::printf(" %9s", to_string(static_cast<Phase>(p)));
        std::printf(" %9s %10s %9s %9s\n", "wall", "positions", "GB/s", "MB comm");
        for (size_t r = 0; r < R; ++r) {
            std::printf("  %-5zu", r);
            for (size_t p = 0; p < static_cast<size_t>(kPhaseCount); ++p) std::printf(" %9.3f", all[r * W + p]);
            const double g = all[r * W + kGrad];
            std::printf(" %9.3f %10.0f %9.1f %9.1f\n", all[r * W + kWall], all[r * W + kDone],
                        g > 0 ? all[r * W + kBytes] / g / 1e9 : 0.0, all[r * W + kComm] / 1e6);
        }
        std::printf("per iteration: %.4f s (mean%s), model traffic %.3f GB (GB/s above: traffic / gradient time per rank)\n",
                    per_it, its.size() > 2 ? " without the first" : "", traffic_iter / 1e9);
    }

    const ReconRunOptions& opt_;
    const MpiContext& ctx_;
    PhaseTimer timer_;
    ReconConfig cfg_;
    PtychoDataset ds_;
    std::int64_t n_ = 0;
    bool subpixel_ = true;
    int threads_ = 1;
    std::unique_ptr<ReconWorker> worker_;
    std::unique_ptr<BatchSchedule> schedule_;
    std::vector<std::int64_t> bounds_;
    std::int64_t my_first_ = 0, my_count_ = 0;
    std::vector<double> mean_pattern_;
    double mean_total_ = 0;
    bool have_mean_ = false;
    std::vector<double> pos_m_, pos_v_;
    std::vector<Complex> truth_;
    int roi_[4] = {0, 0, 0, 0};
    RunState state_;
    double grad_seconds_total_ = 0;
    double speed_seconds_total_ = 0;  // what rebalance() divides positions by (Steps::speed_seconds)
    double speed_mark_seconds_ = 0;
    std::int64_t speed_mark_positions_ = 0;
    std::int64_t positions_done_ = 0;
    int rebalances_ = 0;
    size_t rebalance_points_ = 0;                   // calls of rebalance(), moved or not
    std::vector<std::vector<double>> debug_speeds_;  // --debug.speeds: stand-ins for measured speeds
    bool wrote_once_ = false;
    bool device_sum_ = false;  // NCCL sums on the GPUs instead of MPI over host buffers
    double comm_trace_[5] = {0, 0, 0, 0, 0};  // EF_RECON_COMM_TRACE: seconds in the gradient sum, the loss-term
                                              // gather, update(), update() and positions, batch assembly
    double deferred_trace_[6] = {0, 0, 0, 0, 0, 0};  // deferred steps, device seconds: gradients, sum, its
                                                     // shortest-rank part, update, idle; host wall
    std::int64_t t_object_ = 0, t_probe_ = 0, t_pos_ = 0;  // Adam step counts
    std::vector<std::string> previews_;
};

}  // namespace

void run_reconstruct(const ReconRunOptions& opt, const MpiContext& ctx) {
    Reconstruction r(opt, ctx);
    r.run();
}

void Reconstruction::run() {
    setup();  // input errors: thrown identically on every rank (or agreed by collective())
    if (opt_.dry_run) return;
    try {
        load_share(bounds_);
        initial_model();
        iterate();
        finish();
    } catch (const std::exception& e) {
        // Mid-run failure on some ranks: the others would wait in a collective; end the job.
        std::fprintf(stderr, "ensemblefit: error on rank %d: %s\n", ctx_.rank(), e.what());
        std::fflush(stderr);
        const Error* ee = dynamic_cast<const Error*>(&e);
        MPI_Abort(ctx_.world(), ee ? static_cast<int>(ee->code()) : 1);
    }
}

}  // namespace ef

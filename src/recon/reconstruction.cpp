// SPDX-License-Identifier: MIT
// A reconstruction's set-up as RunSession calls it (run_reconstruct): config, data, schedule,
// worker, gradient sums, resume point, plan, and the model's start.
#include <ensemblefit/recon/reconstruction.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include <ensemblefit/core/diagnostics.hpp>
#include <ensemblefit/core/error.hpp>

#include "src/recon/beam_geometry.hpp"
#include "src/recon/multislice_geometry.hpp"
#include "src/recon/provenance.hpp"
#include "src/recon/reconstruction.hpp"
#include "src/run/output_guard.hpp"
#include "src/run/predicted_timing.hpp"
#include "src/run/run_failure.hpp"
#include "src/run/run_session.hpp"
#include "src/run/stop_request.hpp"
#include "src/run/trace.hpp"

namespace ef {

void run_reconstruct(const ReconRunOptions& opt, const MpiContext& ctx) {
    RunSession session(ctx, opt);  // stop signals: checkpoint and stop at the next iteration
    recon::Reconstruction reconstruction(opt, session.state());
    session.run(reconstruction);
}

namespace recon {

namespace {

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

/// Every rank's `count` frames of n pixels summed pixel by pixel over all ranks (frame by frame in
/// order, in double), with `extra` appended and summed alike: the detector's decision and the mean
/// pattern both start from it.
std::vector<double> pixel_sums(MPI_Comm world, const std::vector<float>& frames, std::int64_t count,
                                   std::int64_t n, const std::vector<double>& extra = {}) {
    std::vector<double> sum(static_cast<size_t>(n), 0.0);
    for (std::int64_t j = 0; j < count; ++j)
        for (std::int64_t q = 0; q < n; ++q) sum[static_cast<size_t>(q)] += frames[static_cast<size_t>(j * n + q)];
    sum.insert(sum.end(), extra.begin(), extra.end());
    EF_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, sum.data(), static_cast<int>(sum.size()), MPI_DOUBLE, MPI_SUM, world));
    return sum;
}

}  // namespace

RunSettings Reconstruction::load_config() {
    cfg_ = load_recon_config(opt_.config_path, opt_.overrides);
    return cfg_.run;
}

/// Once every rank has its worker: the gradient sums, deferred steps, the threads' warning.
void Reconstruction::worker_ready() {
    set_up_device_sum();  // plan_.device_sum
    const bool on_devices = ctx_.size() == 1 || plan_.device_sum;
    plan_.deferred = deferred_steps(cfg_, on_devices, worker_->deferred_supported());  // the GPU's default
    worker_->keep_gradients_on_device(on_devices);
    if (!threads_.warning.empty() && worker_->kind() == WorkerKind::cpu && ctx_.local_rank() == 0)
        std::fprintf(stderr, "ensemblefit: warning: %s\n", threads_.warning.c_str());
}

/// --resume's checkpoint (or a finished file) and the first, equal, shares of the strata.
bool Reconstruction::open_output(OutputAction action) {
    check_resume(action == OutputAction::resume);
    const std::vector<double> equal(static_cast<size_t>(ctx_.size()), 1.0);
    bounds_ = BatchSchedule::partition(schedule_->strata(), equal);
    return !resume_.complete;
}

/// The dataset's metadata and positions, the batch schedule and --debug.speeds.
void Reconstruction::read_input() {
    if (!file_exists(cfg_.data_file))
        throw usage_error(cfg_.where("data.file") + ": no such file '" + cfg_.data_file + "'");
    ds_ = recon::open_recon_dataset(cfg_);
    n_ = static_cast<std::int64_t>(ds_.h) * ds_.w;
    positions_checksum_ = positions_checksum(ds_.positions);
    plan_ = plan_reconstruction(cfg_, ds_);  // the decisions the data settle, made once
    cfg_.batch_size = plan_.batch_size;       // the resolved config says what ran
    cfg_.positions_start = plan_.positions_start;
    cfg_.lr_positions = plan_.positions_lr;
    schedule_ = std::make_unique<BatchSchedule>(ds_.count, cfg_.batch_size, cfg_.seed);
    debug_speeds_ = parse_debug_speeds(opt_.debug_speeds, ctx_.size());
    if (!opt_.predicted.empty()) read_prediction_file(opt_.predicted);  // fail now, not after the run
    if (!opt_.trace.empty() && ctx_.is_root()) check_trace_path(opt_.trace);
    if (!debug_speeds_.empty() && cfg_.balance != "throughput")
        throw usage_error("--debug.speeds: needs run.balance = throughput");
    if (schedule_->strata() < ctx_.size() && ctx_.is_root())
        std::fprintf(stderr, "ensemblefit: warning: batch size %lld < %d ranks: some ranks have no work\n",
                     static_cast<long long>(schedule_->strata()), ctx_.size());
}

ReconWorkerOptions Reconstruction::worker_options(int device) const {
    ReconWorkerOptions wo;
    wo.h = ds_.h;
    wo.w = ds_.w;
    wo.modes = cfg_.modes;
    wo.slices = cfg_.slices;
    wo.slice_fresnel = plan_.slice_fresnel;
    wo.obj_h = ds_.obj_h;
    wo.obj_w = ds_.obj_w;
    wo.poisson = cfg_.loss == "poisson";
    wo.amplitude_phase = cfg_.amplitude_phase;
    wo.subpixel = plan_.subpixel;
    wo.amplitude_min = cfg_.amplitude_min;
    wo.amplitude_max = cfg_.amplitude_max;
    wo.double_precision = cfg_.precision == "double";
    wo.threads = threads_.threads;
    wo.device = device;
    wo.fft_measure = cfg_.fft_measure;
    wo.tuning = cfg_.tuning;
    wo.stream = cfg_.stream;
    wo.batch = schedule_->strata();
    wo.peer_trace = diagnostics().recon_peer_trace;
    wo.phase_trace = diagnostics().recon_phases;
    return wo;
}

/// This rank's worker, of the kind placement decided (RunState::device); the heartbeat that
/// watches the batch steps' barriers (collective, so made outside collective()).
void Reconstruction::make_worker() {
    heartbeat_ = std::make_unique<Heartbeat>(ctx_, run_.settings.heartbeat_timeout);
    collective(ctx_, [&] {
        device_ = run_.gpu();
        worker_ = make_recon_worker(run_.device.kind, worker_options(run_.device.device));
    });
}

/// Whether every rank is a GPU worker and NCCL starts on all of them (collective).
DeviceSumCheck Reconstruction::check_device_sum() {
    DeviceSumCheck c;
    int gpu = worker_->kind() == WorkerKind::gpu ? 1 : 0, all_gpu = 0;
    EF_MPI_CHECK(MPI_Allreduce(&gpu, &all_gpu, 1, MPI_INT, MPI_MIN, ctx_.world()));
    c.all_gpu = all_gpu == 1;
    c.why = "not every rank is a GPU worker";
    if (!c.all_gpu) return c;
    std::vector<char> id = ctx_.is_root() ? worker_->device_sum_id() : std::vector<char>();
    int len = static_cast<int>(id.size());
    EF_MPI_CHECK(MPI_Bcast(&len, 1, MPI_INT, 0, ctx_.world()));
    id.resize(static_cast<size_t>(len));
    if (len > 0) EF_MPI_CHECK(MPI_Bcast(id.data(), len, MPI_CHAR, 0, ctx_.world()));
    // Peer sums need every rank on one host (one shared-memory node).
    c.peer = (cfg_.allreduce == "auto" || cfg_.allreduce == "peer") && ctx_.nodes() == 1;
    if (cfg_.allreduce == "peer" && !c.peer)
        throw usage_error(cfg_.where("run.allreduce") + ": peer sums need every rank on one host");
    int mine = len > 0 && worker_->device_sum_init(id, ctx_.size(), ctx_.rank(), c.why) ? 1 : 0, ok = 0;
    if (len == 0) c.why = "NCCL is not available on rank 0 (libnccl.so.2 not found)";
    EF_MPI_CHECK(MPI_Allreduce(&mine, &ok, 1, MPI_INT, MPI_MIN, ctx_.world()));
    if (!ok && mine) c.why = "NCCL failed to start on another rank";
    c.ok = ok == 1;
    return c;
}

/// Sums on the GPUs when every rank is a GPU worker (run.allreduce = auto | nccl | peer): by
/// direct loads between the GPUs where all ranks share a host and CUDA IPC works (peer), else
/// NCCL.
void Reconstruction::set_up_device_sum() {
    if (ctx_.size() == 1 || cfg_.allreduce == "mpi") return;
    const DeviceSumCheck c = check_device_sum();
    plan_.device_sum = c.ok;
    if (!plan_.device_sum && (cfg_.allreduce == "nccl" || cfg_.allreduce == "peer"))
        throw usage_error(cfg_.where("run.allreduce") + ": " + cfg_.allreduce + " is not possible here: " + c.why);
    if (plan_.device_sum) {
        std::string peer_why;
        const bool peer_on = c.peer && worker_->device_sum_peer(peer_why);  // collective: NCCL runs on every rank
        if (cfg_.allreduce == "peer" && !peer_on)
            throw usage_error(cfg_.where("run.allreduce") + ": peer is not possible here: " + peer_why);
        const std::string method = peer_on ? std::string("peer") : c.peer ? "nccl: " + peer_why : std::string("nccl");
        if (ctx_.is_root()) std::printf("gradient sums: %s\n", method.c_str());
    }
    if (!plan_.device_sum && c.all_gpu && ctx_.is_root())
        std::fprintf(stderr, "ensemblefit: warning: GPU ranks sum gradients through host memory with MPI (%s)\n",
                     c.why.c_str());
}

void Reconstruction::print_plan() const {
    if (!ctx_.is_root()) return;
    std::printf("reconstruct: %s: %lld patterns %d x %d, object %d x %d, %d probe mode%s, %s loss, "
                "sub-pixel shifts %s, position correction %s\n",
                ds_.path.c_str(), static_cast<long long>(ds_.count), ds_.h, ds_.w, ds_.obj_h, ds_.obj_w, cfg_.modes,
                cfg_.modes == 1 ? "" : "s", cfg_.loss.c_str(), plan_.subpixel ? "on" : "off",
                cfg_.correct_positions ? "on" : "off");
    if (ds_.format == "empad" || ds_.format == "hdf5-4d") {
        const ScanGeometry& sc = ds_.input.scan;
        std::printf("data: %s, frames %d x %d%s; ", ds_.format == "empad" ? "EMPAD raw" : ("4-D array '" + ds_.data_name + "'").c_str(),
                    ds_.frame_h, ds_.frame_w, ds_.format == "empad" ? " (+2 metadata rows, dropped)" : "");
        if (!sc.positions_file.empty())
            std::printf(sc.positions_unit > 0 ? "positions from %s (1 A = %.4g px)" : "positions from %s",
                        sc.positions_file.c_str(), sc.positions_scale * 1e-10 / sc.positions_unit);
        else {
            char length[64] = "";  // data.scan_step as a length: what it came to in pixels
            if (sc.step_length_y > 0)
                std::snprintf(length, sizeof length, "%.4g, %.4g A = ", sc.step_length_y * 1e10, sc.step_length_x * 1e10);
            std::printf("scan %d x %d, step %s%.4g, %.4g px, rotation %g deg%s%s%s", sc.ny, sc.nx, length,
                        sc.step_y, sc.step_x, sc.rotation_deg, sc.transpose ? ", transposed" : "",
                        sc.flip_y ? ", y mirrored" : "", sc.flip_x ? ", x mirrored" : "");
        }
        std::printf("%s\n", ds_.has_truth ? ("; object frame and truth from " + ds_.truth_path).c_str() : "");
    }
    std::printf("%s\n", plan_.geometry.describe().c_str());
    if (cfg_.correct_positions) {
        std::printf("positions: corrected from iteration %d of %d, Adam %.4g px per step (decaying with the other "
                    "rates)",
                    cfg_.positions_start, cfg_.iterations, cfg_.lr_positions);
        const double bound = plan_.positions_max_travel;
        if (bound > 0 && cfg_.max_travel_positions < 0)
            std::printf("; each within %.3g px of its start (positions.max_travel = auto: 2 x the scan pitch %.3g px), "
                        "else moved to where its pattern fits best\n",
                        bound, plan_.positions_pitch);
        else if (bound > 0)
            std::printf("; each within %.3g px of its start (positions.max_travel), else moved to where its pattern "
                        "fits best\n",
                        bound);
        else
            std::printf("; no bound on their travel (positions.max_travel = 0)\n");
    }
    if (cfg_.slices > 1)
        std::printf("multislice: %d slices %.4g m apart (Fresnel number lambda dz / dx^2 = %.4g pixels)\n", cfg_.slices,
                    cfg_.slice_thickness, plan_.slice_fresnel);
    // The single-slice defaults are no schedule for several slices (issue 38; on the 4-slice case
    // of tests/mpi/multislice.sh a minimal config ends 50 iterations at 11-37 % phase error per
    // slice, docs/reconstruction.md's schedule at 1-9 %): say so when none of the keys that make
    // that schedule was given.
    if (cfg_.slices > 1 && !cfg_.origins.count("solver.batch_size") && !cfg_.origins.count("solver.decay_start") &&
        !cfg_.origins.count("probe.lr"))
        std::fprintf(stderr,
                     "ensemblefit: warning: model.slices = %d with the default schedule (batches of %d, rates decaying "
                     "from iteration 1, the probe learnt): multislice needs its own; docs/reconstruction.md "
                     "(\"Multislice\", \"What it reaches\") gives the one measured: a known probe kept fixed "
                     "(probe.lr = 0), solver.batch_size = 5, solver.iterations = 150, solver.decay_start = 80\n",
                     cfg_.slices, cfg_.batch_size);
    std::printf("solver: %d iterations x %lld mini-batches of %lld (stratified random, seed %llu), Adam%s\n",
                cfg_.iterations, static_cast<long long>(schedule_->batches_per_iteration()),
                static_cast<long long>(schedule_->strata()), static_cast<unsigned long long>(cfg_.seed),
                plan_.deferred ? ", deferred steps" : "");
    std::fflush(stdout);
    print_placement(placement_, std::cout);
    for (const std::string& w : placement_warnings(placement_))
        std::fprintf(stderr, "ensemblefit: warning: %s\n", w.c_str());
    if (resume_.complete)
        std::printf("resume: %s is a finished reconstruction; nothing to do, the file is unchanged\n",
                    cfg_.output_file.c_str());
    else if (resume_.from > 0)
        std::printf("resume: from the checkpoint at iteration %d of %d in %s\n", resume_.from, cfg_.iterations,
                    cfg_.output_file.c_str());
    if (opt_.dry_run) std::printf("dry run: nothing reconstructed, nothing written\n");
    std::fflush(stdout);
}

void Reconstruction::load_share() { load_share(bounds_); }

/// Reads this rank's share of the patterns for strata `bounds` (and, the first time, the mean
/// pattern over all ranks).
void Reconstruction::load_share(const std::vector<std::int64_t>& bounds) {
    PhaseTimer::Scope io(timer_, Phase::io);
    const size_t r = static_cast<size_t>(ctx_.rank());
    const std::int64_t p0 = schedule_->stratum_begin(bounds[r]), p1 = schedule_->stratum_begin(bounds[r + 1]);
    std::vector<float> share;
    std::int64_t negatives = 0;
    const auto watched = [&](MPI_Request& req) {  // after a rebalance this runs inside the iterations
        heartbeat_->wait(req, "the agreement after loading a share of the patterns");  // made in set_up()
    };
    // agreed: run() lets the first load's errors reach main, printed once
    collective(ctx_, [&] { share = read_frames(ds_, p0, p1 - p0, threads_.threads, negatives); }, watched);
    if (!ds_.correction.decided) decide_detector(share, p1 - p0, negatives);
    collective(
        ctx_,
        [&] {
            finish_patterns(ds_, share, p0, threads_.threads);
            worker_->set_patterns(p1 - p0, share.data());
        },
        watched);
    my_first_ = p0;
    my_count_ = p1 - p0;
    if (!have_mean_) read_mean_pattern(share);
    report_residence();
}

/**
 * The detector's corrections, decided once from the mean of every rank's frames as read
 * (cropped, binned, clipped): the same sums on every rank, so the same mask and shift. Rank 0
 * reports each step in one line (docs/reconstruction.md, "Instrument data").
 */
void Reconstruction::decide_detector(const std::vector<float>& frames, std::int64_t count, std::int64_t negatives) {
    // the negatives counted while reading: exact in double below 2^53
    std::vector<double> sum = pixel_sums(ctx_.world(), frames, count, n_, {static_cast<double>(negatives)});
    const auto clipped = static_cast<std::int64_t>(sum.back());
    sum.pop_back();
    for (double& v : sum) v /= static_cast<double>(ds_.count);
    decide_detector_correction(ds_, sum);
    if (!ctx_.is_root()) return;
    const DetectorSettings& d = ds_.input.detector;
    const DetectorCorrection& c = ds_.correction;
    if (d.crop_y1 > 0)
        std::printf("detector: crop rows %d..%d, columns %d..%d of the %d x %d frames\n", d.crop_y0, d.crop_y1 - 1,
                    d.crop_x0, d.crop_x1 - 1, ds_.frame_h, ds_.frame_w);
    if (d.bin > 1) std::printf("detector: bin %d x %d -> %d x %d patterns\n", d.bin, d.bin, ds_.h, ds_.w);
    if (clipped > 0)
        std::fprintf(stderr,
                     "ensemblefit: warning: %s: %lld negative counts (%.3g %% of the pixels) set to 0 "
                     "(detector.clip_negative)\n",
                     ds_.path.c_str(), static_cast<long long>(clipped),
                     100.0 * static_cast<double>(clipped) / (static_cast<double>(ds_.count) * static_cast<double>(n_)));
    if (d.mask)
        std::printf("detector: mask: %lld hot and %lld dead pixels in the mean pattern (%g robust std from the median "
                    "of their neighbours), replaced by their neighbours' mean\n",
                    static_cast<long long>(c.hot), static_cast<long long>(c.dead), d.mask_threshold);
    if (d.center) {
        if (c.shift_y != 0 || c.shift_x != 0)
            std::printf("detector: beam centre (%.2f, %.2f) from the mean pattern; patterns shifted by whole pixels "
                        "(%+d, %+d) to (%d, %d)\n",
                        c.centre_y, c.centre_x, c.shift_y, c.shift_x, ds_.h / 2, ds_.w / 2);
        else
            std::printf("detector: beam centre (%.2f, %.2f) from the mean pattern; within half a pixel of (%d, %d), "
                        "not shifted\n",
                        c.centre_y, c.centre_x, ds_.h / 2, ds_.w / 2);
    }
    std::fflush(stdout);
}

/// Where the worker keeps the patterns, when it says (streamed from host memory, and why), once
/// per change; a CPU worker's note (run.stream = on ignored) from rank 0 only.
void Reconstruction::report_residence() {
    const std::string note = worker_->pattern_residence();
    if (note == residence_) return;
    residence_ = note;
    if (note.empty() || (worker_->kind() == WorkerKind::cpu && !ctx_.is_root())) return;
    if (ctx_.size() > 1) std::printf("rank %d: ", ctx_.rank());
    std::printf("%s\n", note.c_str());
    std::fflush(stdout);
}

/// The mean pattern (FFT order) over all ranks: the probe's first guess and its power.
void Reconstruction::read_mean_pattern(const std::vector<float>& share) {
    const std::vector<double> sum = pixel_sums(ctx_.world(), share, my_count_, n_);
    mean_pattern_.resize(sum.size());
    mean_total_ = 0;
    for (size_t q = 0; q < sum.size(); ++q) {
        mean_pattern_[q] = sum[q] / static_cast<double>(ds_.count);
        mean_total_ += mean_pattern_[q];
    }
    have_mean_ = true;
    // The detector's geometry against the data: one line when the bright disc is not where the
    // convergence, wavelength and pixel put it (the run goes on: the disc is an estimate).
    const std::string mismatch =
        disc_mismatch(plan_.geometry, bright_disc_radius(mean_pattern_, ds_.h, ds_.w), ds_.path);
    if (!mismatch.empty() && ctx_.is_root()) std::fprintf(stderr, "ensemblefit: warning: %s\n", mismatch.c_str());
}

/// The probe from the file or the mean pattern (with `defocus`), extra modes added, orthogonalised and scaled.
std::vector<Complex> Reconstruction::initial_probe(double defocus) {
    const int K = cfg_.modes;
    std::vector<Complex> probe;
    int have = 0;
    if (plan_.probe_from_file) {
        collective(ctx_, [&] { probe = read_probe(ds_, have); });
        have = std::min(have, K);
        probe.resize(static_cast<size_t>(have * n_));
    } else if (cfg_.probe_init == "beam") {  // the lens's probe in physical units (beam_geometry.hpp)
        const BeamGeometry& g = plan_.geometry;
        probe = beam_probe(ds_.h, ds_.w, g.pixel, g.wavelength, g.convergence,
                           {g.defocus, cfg_.beam.cs_mm * 1e-3, cfg_.beam.c5_mm * 1e-3});
        if (ctx_.is_root())
            std::printf("probe: from the beam: aperture %.4g mrad, defocus %+.4g nm (%s), Cs %.4g mm, C5 %.4g mm\n",
                        1e3 * g.convergence, 1e9 * g.defocus,
                        g.defocus_from.empty() ? "none given" : g.defocus_from.c_str(),
                        cfg_.beam.cs_mm, cfg_.beam.c5_mm);
        have = 1;
    } else {
        probe = probe_from_mean_pattern(mean_pattern_, ds_.h, ds_.w, defocus,
                                        bright_disc_radius(mean_pattern_, ds_.h, ds_.w));
        have = 1;
    }
    if (have < K) add_probe_modes(probe, have, K, ds_.h, ds_.w, cfg_.mode_power, mean_total_);
    if (K > 1 && cfg_.orthogonalize) mode_powers_ = orthogonalize_modes(probe, K, n_);
    if (cfg_.fix_intensity || have < K || !ds_.has_probe) scale_probe_power(probe, mean_total_);
    return probe;
}

/// The model's start: a flat object and the initial probe, or (--resume) the checkpoint's state.
void Reconstruction::initial_model() {
    PhaseTimer::Scope s(timer_, Phase::setup);
    if (ctx_.is_root()) prefetch_input_record(ds_.path);  // the output's checksum, made meanwhile
    if (ds_.has_truth && ctx_.is_root()) truth_ = read_truth_object(ds_, cfg_.slices);
    set_roi();  // from the positions as read, before a checkpoint's refined ones
    pos_m_.assign(ds_.positions.size(), 0.0);
    pos_v_.assign(ds_.positions.size(), 0.0);
    pos_start_ = ds_.positions;
    pos_moved_.assign(ds_.positions.size(), 0.0);
    if (resume_.from > 0) return restore_checkpoint();
    choose_defocus();
    worker_->set_probe(initial_probe(defocus_));
    set_flat_object();
}

/// The object's start: amplitude 1, phase 0 in every slice.
void Reconstruction::set_flat_object() {
    const size_t on = static_cast<size_t>(cfg_.slices) * static_cast<size_t>(ds_.obj_h) * static_cast<size_t>(ds_.obj_w);
    worker_->set_object(std::vector<double>(on, 1.0), std::vector<double>(on, 0.0));
}

/**
 * The defocus of a probe made from the mean pattern. The mean pattern gives the probe's
 * amplitude in the far field but not its phase, and a flat phase (a focused probe) is a poor
 * start for a defocused one: on simulate's 128-pixel patterns (defocus phase 5 rad at the disc's
 * edge) every run from a flat phase ended in a wrong minimum at 140-175 % phase error, at any
 * dose. probe.defocus = auto runs short trials, each from the flat object with one candidate
 * defocus and the run's own first two iterations (schedule, batches, rates: every rank the same
 * bits), and keeps the lowest second-iteration loss: defocus 0 and +-pi/2 x the disc's radius x
 * 1/8, 1/4, 1/2 (a probe of 1/16, 1/8, 1/4 of the window wide), then the two geometric midpoints
 * beside the best. A given number skips the trials.
 */
void Reconstruction::choose_defocus() {
    defocus_ = 0;
    defocus_source_.clear();
    if (plan_.probe_from_file || cfg_.probe_init == "beam") return;
    if (!std::isnan(cfg_.probe_defocus)) {
        defocus_ = cfg_.probe_defocus;
        defocus_source_ = "config";
        return;
    }
    defocus_source_ = "trials";
    const double top = 0.5 * M_PI * bright_disc_radius(mean_pattern_, ds_.h, ds_.w);
    std::vector<std::pair<double, double>> tried;  // (defocus, loss)
    auto trial = [&](double d) {
        for (const auto& t : tried)
            if (t.first == d) return;
        tried.emplace_back(d, trial_loss(d));
    };
    const auto before = timer_.all();
    for (double d : {0.0, top / 8, -top / 8, top / 4, -top / 4, top / 2, -top / 2}) trial(d);
    auto best = [&] {
        size_t b = 0;
        for (size_t i = 1; i < tried.size(); ++i)
            if (tried[i].second < tried[b].second) b = i;
        return tried[b];
    };
    const double b = best().first;
    if (b != 0) {  // ReconConfig::kDefocusTrials in all
        trial(b * std::sqrt(2.0));
        trial(b / std::sqrt(2.0));
    }
    defocus_ = best().first;
    // The trials are set-up: /timing's compute and the time per iteration stay the run's own.
    for (size_t p = 0; p < before.size(); ++p)
        if (static_cast<Phase>(p) != Phase::setup)
            timer_.move(static_cast<Phase>(p), Phase::setup, timer_.all()[p] - before[p]);
    const double focused = tried.front().second;
    if (ctx_.is_root()) {
        std::printf("probe: defocus %+.3g rad at the bright disc's edge (%.3g px), chosen by %zu trial runs of 2 "
                    "iterations: loss %.4g (focused: %.4g)\n",
                    defocus_, bright_disc_radius(mean_pattern_, ds_.h, ds_.w), tried.size(), best().second, focused);
        std::fflush(stdout);
    }
}

/**
 * The loss of the second iteration from the flat object and a probe of `defocus`, the Adam
 * state and the positions as at the start; everything it changed is put back by the caller's
 * set_probe / set_object and here (moments, step counts, positions).
 */
double Reconstruction::trial_loss(double defocus) {
    worker_->set_probe(initial_probe(defocus));
    set_flat_object();
    worker_->reset_moments(true, true);
    const std::vector<double> positions = ds_.positions, pos_m = pos_m_, pos_v = pos_v_;
    const std::vector<double> powers = mode_powers_;
    t_object_ = t_probe_ = t_pos_ = 0;
    double loss = 0;
    const int trials = std::min(ReconConfig::kDefocusTrialIterations, cfg_.iterations);
    try {
        for (int it = 1; it <= trials; ++it)
            loss = iteration_batches(it).loss_sum / static_cast<double>(schedule_->batches_per_iteration());
    } catch (const Error&) {  // diverged: the same batch on every rank (the loss is a global sum)
        loss = std::numeric_limits<double>::infinity();
    }
    worker_->reset_moments(true, true);
    ds_.positions = positions;
    pos_m_ = pos_m;
    pos_v_ = pos_v;
    mode_powers_ = powers;
    t_object_ = t_probe_ = t_pos_ = 0;
    return std::isfinite(loss) ? loss : std::numeric_limits<double>::infinity();
}

/// The region the probe centres scanned: where the object is well determined.
void Reconstruction::set_roi() {
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

}  // namespace recon
}  // namespace ef

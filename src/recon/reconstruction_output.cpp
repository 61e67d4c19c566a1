// SPDX-License-Identifier: MIT
// The reconstruction's output: progress lines, the result file (and checkpoints), previews,
// and the run's timing through the run layer (src/run/run_timing.hpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <utility>

#include <ensemblefit/core/config.hpp>
#include <ensemblefit/core/diagnostics.hpp>
#include <ensemblefit/core/error.hpp>
#include <ensemblefit/report/progress_line.hpp>
#include <ensemblefit/report/timing_report.hpp>

#include "src/io/h5.hpp"
#include "src/recon/png_preview.hpp"
#include "src/recon/provenance.hpp"
#include "src/recon/ptycho_h5.hpp"
#include "src/recon/reconstruction.hpp"
#include "src/run/environment.hpp"
#include "src/report/kernel_roofline.hpp"
#include "src/run/output_guard.hpp"
#include "src/run/predicted_timing.hpp"
#include "src/run/run_timing.hpp"
#include "src/run/trace.hpp"

namespace ef::recon {

namespace {

std::string output_stem(const std::string& path) {
    const auto dot = path.rfind('.');
    const auto slash = path.rfind('/');
    if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return path;
    return path.substr(0, dot);
}

std::vector<std::uint64_t> dims(std::initializer_list<std::int64_t> sizes) {
    std::vector<std::uint64_t> d;
    for (std::int64_t s : sizes) d.push_back(static_cast<std::uint64_t>(s));
    return d;
}

/// The reconstruction's own columns of /timing beside the run layer's counts.
/// upload_seconds, upload_wait_seconds: patterns streamed to a GPU per batch (run.stream), the
/// uploads' device time and the compute stream's wait for them (the part not hidden; it is
/// counted as io, not compute).
const TimingColumns kColumns{"positions", "batches", "allreduce_calls", "allreduce_bytes",
                             {"gradient_seconds", "traffic_bytes", "upload_seconds", "upload_wait_seconds"}};

/// The scan's geometry as attributes of /positions: counts and shapes as integers, the scanned
/// extent (y min, y max, x min, x max, input frame) and the median nearest-neighbour distance
/// (the scan's step, for a raster as for a spiral: median_nearest_step).
void write_scan_geometry(h5::File& f, const PtychoDataset& ds) {
    f.set_attr("/positions", "count", ds.count);
    set_attr_int64s(f, "/positions", "pattern_shape", {ds.h, ds.w});
    set_attr_int64s(f, "/positions", "object_shape", {ds.obj_h, ds.obj_w});
    std::vector<double> extent{1e300, -1e300, 1e300, -1e300};
    for (size_t i = 0; i + 1 < ds.positions.size(); i += 2) {
        const double y = ds.positions[i] - ds.offset_y, x = ds.positions[i + 1] - ds.offset_x;
        extent = {std::min(extent[0], y), std::max(extent[1], y), std::min(extent[2], x), std::max(extent[3], x)};
    }
    if (ds.positions.empty()) extent.assign(4, 0.0);
    f.set_attr("/positions", "extent_px", extent);
    f.set_attr("/positions", "median_step_px", median_nearest_step(ds.positions));
}

/**
 * Units on every dataset (docs/reconstruction.md, "Output"): `unit` says what a value is
 * measured in; the maps' pixel (`pixel_size`, metres; 0 when the run's geometry has none, the
 * output then in pixels) and, for the probe, the reciprocal pixel of the detector and the
 * wavelength; /positions are pixels of that size.
 */
void write_units(h5::File& f, const BeamGeometry& g, bool multislice) {
    for (const char* map : {"/object", "/probe"}) {
        f.set_attr(map, "pixel_size", g.pixel);
        f.set_attr(map, "pixel_size_unit", std::string("m"));
        f.set_attr(map, "pixel_size_from", g.pixel > 0 ? g.pixel_from : std::string("unknown: the maps are in pixels"));
    }
    f.set_attr("/object", "unit", std::string("complex transmission: |O| amplitude, arg(O) phase in radians"));
    f.set_attr("/object", "axes", std::string(multislice ? "slice, y, x" : "y, x"));
    f.set_attr("/probe", "unit",
               std::string("complex amplitude, sqrt(counts) per pixel (sum |P|^2 = mean pattern sum)"));
    f.set_attr("/probe", "axes", std::string("mode, y, x"));
    f.set_attr("/probe", "reciprocal_pixel_size", g.reciprocal_pixel());
    f.set_attr("/probe", "reciprocal_pixel_size_unit", std::string("1/m"));
    f.set_attr("/probe", "reciprocal_pixel_mrad", 1e3 * g.angular_pixel());
    f.set_attr("/probe", "wavelength", g.wavelength);
    f.set_attr("/probe", "wavelength_unit", std::string("m"));
    f.set_attr("/probe", "convergence_mrad", 1e3 * g.convergence);
    f.set_attr("/positions", "unit", std::string("px"));
    f.set_attr("/positions", "pixel_size", g.pixel);
    f.set_attr("/positions", "pixel_size_unit", std::string("m"));
    f.set_attr("/loss", "unit", std::string("dimensionless (the data term, a mean over each mini-batch)"));
    f.set_attr("/iteration_seconds", "unit", std::string("s"));
    if (f.exists("/probe_mode_powers"))
        f.set_attr("/probe_mode_powers", "unit", std::string("counts: sum of |P_k|^2 over the mode's pixels"));
}

/// Where the result came from (docs/reconstruction.md "Provenance"): the resolved config, the
/// command line, the version, the inputs with their sizes and SHA-256, the data file's own root
/// attributes with their types under /data_metadata, and the scan geometry.
void write_provenance(h5::File& f, const ReconConfig& cfg, const PtychoDataset& ds, const std::string& config_path) {
    f.set_attr("/", "config", cfg.resolved_text());
    f.set_attr("/", "command", command_line());
    f.set_attr("/", "version", std::string(EF_VERSION " (" EF_GIT_DESCRIBE ")"));
    f.set_attr("/", "checksum", std::string("SHA-256"));
    write_scan_geometry(f, ds);
    // What the detector's preprocessing decided (docs/reconstruction.md, "Instrument data").
    const DetectorCorrection& c = ds.correction;
    f.set_attr("/", "detector_beam_centre_px", std::vector<double>{c.centre_y, c.centre_x});
    f.set_attr("/", "detector_shift_px", std::vector<double>{static_cast<double>(c.shift_y), static_cast<double>(c.shift_x)});
    f.set_attr("/", "detector_masked_pixels", static_cast<std::int64_t>(c.masked.size()));
    // An input gone or unreadable since the start must not cost the result: warn and go on.
    try {
        write_input_record(f, "/", "data", record_input(ds.path));
        if (!config_path.empty()) write_input_record(f, "/", "config", record_input(config_path));
        if (!f.exists("/data_metadata")) f.create_group("/data_metadata");
        if (!ds.input.truth_file.empty()) write_input_record(f, "/", "truth", record_input(ds.input.truth_file));
        // EMPAD raw has no attributes; a simulated one's description is in its truth file.
        const std::string described = ds.format == "empad" ? ds.input.truth_file : ds.path;
        if (!described.empty()) {
            const h5::File in = h5::File::open_read(described);
            copy_attributes(in, "/", f, "/data_metadata");
        }
    } catch (const Error& e) {
        std::fprintf(stderr, "ensemblefit: warning: provenance of the inputs incomplete: %s\n", e.what());
    }
}

}  // namespace

/// The output, what it is made from, and the previews written beside it (the output guard's rules).
OutputTarget Reconstruction::output_target() const {
    OutputTarget t{cfg_.output_file, cfg_.where("output.file"), {opt_.config_path, cfg_.data_file}, {}};
    if (cfg_.previews)
        for (const char* suffix : {"_phase.png", "_amplitude.png", "_probe.png", "_loss.png"})
            t.companions.push_back({output_stem(cfg_.output_file) + suffix, "a preview of " + t.where});
    return t;
}

/// The end: the truth comparison, the result file with previews (the timing report follows).
void Reconstruction::write_results() {
    timer_.enter(Phase::io);
    if (!truth_.empty() && ctx_.is_root()) compare_truth();
    write_output(true);
}

/// The run's last lines (the output is written and closed): the truth's error, the loss, the
/// previews, the output. A stopped run's checkpoint says it all (report_stop).
void Reconstruction::close() {
    if (stopped_ || !ctx_.is_root()) return;
    if (!truth_.empty())
        std::printf("phase NRMSE against the truth: %.3f%% (rms %.4g rad over %d x %d pixels, offset and ramp "
                    "removed)\n",
                    100.0 * nrmse_, rmse_, roi_[1] - roi_[0], roi_[3] - roi_[2]);
    if (!truth_.empty() && cfg_.slices > 1) {
        std::printf("phase NRMSE per slice (the line above is the worst):");
        for (double e : slice_nrmse_) std::printf(" %.3f%%", 100.0 * e);
        std::printf("\n");
    }
    if (!loss_.empty()) {
        const double total = std::accumulate(iteration_seconds_.begin(), iteration_seconds_.end(), 0.0);
        std::printf("done: %zu iterations in %s, loss %.8g -> %.8g\n", loss_.size(), format_duration(total).c_str(),
                    loss_.front(), loss_.back());
    }
    for (const auto& p : previews_) std::printf("preview: %s\n", p.c_str());
    std::printf("output: %s\n", cfg_.output_file.c_str());
    std::fflush(stdout);
}

void Reconstruction::report(int it) {
    if (!ctx_.is_root()) return;
    std::printf("%s", progress_row(it, cfg_.iterations, loss_, iteration_seconds_).c_str());
    if (!truth_.empty()) std::printf("   %10.3f%%", 100.0 * compare_truth().nrmse);
    std::printf("\n");
    std::fflush(stdout);
    // The stall rule (loss_trend.hpp) is checked at each progress line, so it fires at most
    // report_every iterations late; once per run, on stderr, without stopping the run.
    const std::string stall = loss_watch_.check(loss_);
    if (!stall.empty()) std::fprintf(stderr, "ensemblefit: warning: %s\n", stall.c_str());
}

/// The phase error of each slice against its truth; the worst slice's is the run's figure.
PhaseError Reconstruction::compare_truth() {
    const std::vector<Complex> obj = worker_->complex_object();
    const auto on = static_cast<std::ptrdiff_t>(ds_.obj_h) * ds_.obj_w;
    PhaseError worst;
    slice_nrmse_.clear();
    for (std::ptrdiff_t s = 0; s < cfg_.slices; ++s) {
        const std::vector<Complex> rec(obj.begin() + s * on, obj.begin() + (s + 1) * on);
        const std::vector<Complex> truth(truth_.begin() + s * on, truth_.begin() + (s + 1) * on);
        const PhaseError e = phase_error(rec, truth, ds_.obj_w, roi_[0], roi_[1], roi_[2], roi_[3]);
        slice_nrmse_.push_back(e.nrmse);
        if (s == 0 || e.nrmse > worst.nrmse) worst = e;
    }
    nrmse_ = worst.nrmse;
    rmse_ = worst.rmse;
    return worst;
}

/// The model and the run so far into the output (rank 0; every rank first agrees on the
/// positions). A checkpoint adds the optimiser's state (write_checkpoint); the previews follow
/// both. Either is written beside the output and renamed over it (PendingOutput).
void Reconstruction::write_output(bool final) {
    sync_positions();
    if (!ctx_.is_root()) return;
    PhaseTimer::Scope io(timer_, Phase::io);
    const std::vector<Complex> obj = worker_->complex_object();
    const std::vector<Complex> probe = worker_->probe();
    // Every write (checkpoint or final) creates the file under a temporary name and renames it
    // over the output once written and synced: the output is always the previous good file or
    // the new one, never a half-written one (docs/architecture.md, "Output safety").
    PendingOutput pending(cfg_.output_file);
    h5::File f = h5::File::create(pending.temp_path());
    // One slice: H x W as always; S slices: S x H x W.
    h5x::write_complex(f, "/object", cfg_.slices == 1 ? dims({ds_.obj_h, ds_.obj_w}) : dims({cfg_.slices, ds_.obj_h, ds_.obj_w}),
                       obj);
    h5x::write_complex(f, "/probe", dims({cfg_.modes, ds_.h, ds_.w}), probe);
    if (!defocus_source_.empty()) {  // the start the probe came from (probe.defocus)
        f.set_attr("/probe", "initial_defocus_rad", defocus_);
        f.set_attr("/probe", "initial_defocus_from", defocus_source_);
    }
    std::vector<double> pos = ds_.positions;
    for (size_t i = 0; i < pos.size(); i += 2) {
        pos[i] -= ds_.offset_y;
        pos[i + 1] -= ds_.offset_x;
    }
    h5x::write_double(f, "/positions", dims({ds_.count, 2}), pos);
    f.set_attr("/positions", "object_offset", std::vector<double>{ds_.offset_y, ds_.offset_x});
    if (cfg_.correct_positions) {
        std::int64_t moved = 0, moves = 0;
        for (size_t i = 0; i < pos_moved_.size(); i += 2) {
            moved += pos_moved_[i] > 0 ? 1 : 0;
            moves += static_cast<std::int64_t>(pos_moved_[i]);
        }
        f.set_attr("/positions", "max_travel_px", plan_.positions_max_travel);
        f.set_attr("/positions", "moved_within_max_travel", moved);
        if (final && plan_.positions_max_travel > 0 && moved == 0)
            std::printf("positions: none went further than %.3g px from its start\n", plan_.positions_max_travel);
        else if (final && plan_.positions_max_travel > 0)
            std::printf("positions: %lld of %lld went further than %.3g px from their start and were moved back to "
                        "where their patterns fit best (%lld time%s)\n",
                        static_cast<long long>(moved), static_cast<long long>(ds_.count), plan_.positions_max_travel,
                        static_cast<long long>(moves), moves == 1 ? "" : "s");
    }
    f.set_attr("/positions", "description",
               std::string("top-left of the window, pixels (y, x), in the input's frame; object pixel = position + "
                           "object_offset"));
    h5x::write_double(f, "/loss", dims({static_cast<std::int64_t>(loss_.size())}), loss_);
    h5x::write_double(f, "/iteration_seconds", dims({static_cast<std::int64_t>(iteration_seconds_.size())}),
                      iteration_seconds_);
    if (!mode_powers_.empty())
        h5x::write_double(f, "/probe_mode_powers", dims({static_cast<std::int64_t>(mode_powers_.size())}), mode_powers_);
    write_units(f, plan_.geometry, cfg_.slices > 1);
    write_provenance(f, cfg_, ds_, opt_.config_path);
    f.set_attr("/", "iterations_done", static_cast<std::int64_t>(loss_.size()));
    f.set_attr("/", "complete", static_cast<std::int64_t>(final ? 1 : 0));
    set_attr_int64s(f, "/", "roi", {roi_[0], roi_[1], roi_[2], roi_[3]});
    if (!truth_.empty() && nrmse_ >= 0) {
        f.set_attr("/", "phase_nrmse", nrmse_);
        f.set_attr("/", "phase_rmse", rmse_);
        if (cfg_.slices > 1) f.set_attr("/", "phase_nrmse_slices", slice_nrmse_);
    }
    if (!final) write_checkpoint(f);
    f.close();
    pending.commit();
    if (cfg_.previews) write_previews(obj, probe);  // at the end and at every checkpoint
}

void Reconstruction::write_previews(const std::vector<Complex>& obj, const std::vector<Complex>& probe) {
    // Several slices: the previews show their product, the projected object (phases added).
    const size_t on = static_cast<size_t>(ds_.obj_h) * static_cast<size_t>(ds_.obj_w);
    std::vector<Complex> shown(obj.begin(), obj.begin() + static_cast<std::ptrdiff_t>(on));
    for (size_t s = 1; s < static_cast<size_t>(cfg_.slices); ++s)
        for (size_t i = 0; i < on; ++i) shown[i] *= obj[s * on + i];
    PreviewInputs in;
    in.object = std::move(shown);
    in.obj_h = ds_.obj_h;
    in.obj_w = ds_.obj_w;
    in.probe = probe;
    in.modes = cfg_.modes;
    in.h = ds_.h;
    in.w = ds_.w;
    in.loss = loss_;
    in.pixel_size = plan_.geometry.pixel;  // data.pixel_size, else the data's dx_angstrom, ...
    try {
        previews_ = recon::write_previews(output_stem(cfg_.output_file), in);
    } catch (const Error& e) {
        std::fprintf(stderr, "ensemblefit: warning: previews not written: %s\n", e.what());
    }
}

/// EF_RECON_COMM_TRACE=1: where this rank's host time went in the sums and updates.
void Reconstruction::print_traces() const {
    if (!diagnostics().recon_comm_trace) return;
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

/// Streamed patterns (run.stream): what was uploaded, the uploads' device time, and how much of
/// it compute hid (the compute stream's wait is what it did not).
void Reconstruction::print_stream_timing(const ReconStreamTiming& s) const {
    if (s.batches == 0) return;
    std::printf("%sstreamed patterns: %lld batches, %.3f GB uploaded in %.3f s of copy time (%.1f GB/s); compute "
                "waited %.3f s for them (%.0f %% of the upload time hidden)\n",
                ctx_.size() > 1 ? ("rank " + std::to_string(ctx_.rank()) + ": ").c_str() : "",
                static_cast<long long>(s.batches), s.bytes / 1e9, s.upload, s.upload > 0 ? s.bytes / s.upload / 1e9 : 0.0,
                s.wait, s.upload > 0 ? 100.0 * std::max(0.0, 1.0 - s.wait / s.upload) : 100.0);
}

/// The mean seconds per iteration without the first (planning, warm-up) when there are more.
double Reconstruction::seconds_per_iteration() const {
    const auto& its = iteration_seconds_;
    if (its.empty()) return 0.0;
    const size_t skip = its.size() > 2 ? 1 : 0;
    double per_it = 0;
    for (size_t i = skip; i < its.size(); ++i) per_it += its[i];
    return per_it / static_cast<double>(its.size() - skip);
}

namespace {

/// The reconstruction's model work on the roofline: its gradient steps' traffic (the worker's
/// count of bytes per position) over their measured time; FLOPs are not counted (yet).
KernelRecord gradient_kernel(const std::vector<RankTiming>& ranks) {
    KernelRecord k;
    k.name = "gradient";
    k.what = "bytes: the worker's traffic per position (counted); FLOPs not counted";
    for (const RankTiming& r : ranks) {
        k.seconds += r.extra.size() > 0 ? r.extra[0] : 0.0;
        k.bytes += r.extra.size() > 1 ? r.extra[1] : 0.0;
    }
    return k;
}

/**
 * The reconstruction's rows: "gradient" above, then each phase the engine marks (kernels/recon/
 * ptycho_engine.hpp: the FFTs, window passes, object and probe steps, position terms), its time
 * from the host's clock (CPU) or CUDA events (GPU) and what it counted: the FFTs' 5 n log2 n
 * FLOPs and one read and write of their windows, the Adam steps (estimated); other
 * elementwise work is not counted.
 */
std::vector<KernelRecord> recon_kernels(const std::vector<RankTiming>& ranks, const std::vector<KernelSum>& sums,
                                        const Ceilings& gpu) {
    std::vector<KernelRecord> out = {gradient_kernel(ranks)};
    for (const KernelSum& s : sums) {
        KernelRecord k = kernel_record(s, gpu);
        k.what = std::string("FLOP, bytes: its FFTs (5 n log2 n; windows read and written once) and Adam steps "
                             "(estimated), other elementwise work not counted; time: ") +
                 (s.gpu ? "CUDA events" : "host clock");
        out.push_back(k);
    }
    return out;
}

}  // namespace

/// The reconstruction's part of the run's timing (report_run_timing): its counts and columns
/// (positions, batches, sums, gradient time and traffic, streamed uploads), its kernels, its
/// attributes (seconds and model traffic per iteration, rebalances) and lines.
TimingReport Reconstruction::timing_report() {
    print_traces();
    const bool probe_on = cfg_.lr_probe > 0 && cfg_.probe_start <= cfg_.iterations;
    const double traffic_per_position = worker_->traffic_bytes(probe_on, cfg_.correct_positions);
    TimingReport r;
    r.mine.replicas = positions_done_;
    r.mine.units = batches_done_;
    r.mine.mpi_calls = allreduce_calls_;
    r.mine.mpi_bytes = static_cast<std::int64_t>(allreduce_bytes_);
    const ReconStreamTiming streamed = worker_->stream_timing();
    timer_.move(Phase::compute, Phase::io, streamed.wait);
    print_stream_timing(streamed);
    r.mine.extra = {grad_seconds_total_, traffic_per_position * static_cast<double>(positions_done_), streamed.upload,
                    streamed.wait};
    r.columns = kColumns;
    r.tally = worker_->kernel_tally();
    r.gpu = worker_->kind() == WorkerKind::gpu;
    r.device_transfers = deferred_trace_[1];
    r.single_precision = true;  // the GPU worker works in float
    r.trace_title = "ensemblefit reconstruct " + opt_.config_path;
    r.path = cfg_.output_file;
    const double per_it = seconds_per_iteration();
    const double traffic_iter = traffic_per_position * static_cast<double>(ds_.count);  // all ranks, one iteration
    r.kernels = [](const GatheredTiming& t, const std::vector<KernelSum>& sums, const Ceilings& ceilings) {
        return recon_kernels(t.ranks, sums, ceilings);
    };
    r.attributes = [this, per_it, traffic_iter](h5::File& f, const std::string&, const GatheredTiming&) {
        f.set_attr("/timing", "seconds_per_iteration", per_it);
        f.set_attr("/timing", "traffic_bytes_per_iteration", traffic_iter);
        f.set_attr("/timing", "rebalances", static_cast<std::int64_t>(rebalances_));
    };
    r.print = [this, per_it, traffic_iter](const GatheredTiming& t) {
        std::printf("%s", format_timing_table(t.ranks, t.metrics, t.columns).c_str());
        std::printf("per iteration: %.4f s (mean%s), model traffic %.3f GB; bandwidth (traffic / gradient time) per "
                    "rank:",
                    per_it, iteration_seconds_.size() > 2 ? " without the first" : "", traffic_iter / 1e9);
        for (const RankTiming& rank : t.ranks)
            std::printf(" %.1f", rank.extra[0] > 0 ? rank.extra[1] / rank.extra[0] / 1e9 : 0.0);
        std::printf(" GB/s\n");
    };
    return r;
}

}  // namespace ef::recon

// SPDX-License-Identifier: MIT
// Reconstruction checkpoints: the state written into the output at iteration boundaries,
// --resume from it, and the ranks' agreement at a boundary
// (stop or checkpoint).
#include "src/recon/recon_checkpoint.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>
#include <utility>

#include "src/recon/reconstruction.hpp"
#include "src/run/stop_request.hpp"

namespace ef::recon {

namespace {

double now_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// The settings of a resolved config (ReconConfig::resolved_text()) that decide what a
/// reconstruction computes, in order: all but the data file's name and [run], [output] and
/// [tuning], which decide how it runs and where it writes, never the bits (docs/reconstruction.md).
std::vector<std::pair<std::string, std::string>> result_settings(const std::string& resolved) {
    std::vector<std::pair<std::string, std::string>> out;
    std::istringstream in(resolved);
    std::string line, section;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        if (line[0] == '[') {
            section = line.substr(1, line.find(']') - 1);
            continue;
        }
        const auto eq = line.find(" = ");
        if (eq == std::string::npos) continue;
        const std::string key = section + "." + line.substr(0, eq);
        if (section == "run" || section == "output" || section == "tuning" || key == "data.file") continue;
        out.emplace_back(key, line.substr(eq + 3));
    }
    return out;
}

std::string patterns_shape(const PtychoDataset& ds) {
    return std::to_string(ds.count) + " patterns of " + std::to_string(ds.h) + " x " + std::to_string(ds.w) +
           ", object " + std::to_string(ds.obj_h) + " x " + std::to_string(ds.obj_w);
}

}  // namespace

/// The positions as read, hashed (FNV-1a over their bits): with the patterns' shape and the
/// mean pattern's total, what identifies the data a checkpoint was computed from.
std::string positions_checksum(const std::vector<double>& positions) {
    std::uint64_t h = 1469598103934665603ULL;
    const unsigned char* p = reinterpret_cast<const unsigned char*>(positions.data());
    for (size_t i = 0; i < positions.size() * sizeof(double); ++i) h = (h ^ p[i]) * 1099511628211ULL;
    char buf[24];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
}

/**
 * --resume: what the output holds, checked against this run before any work (rank 0 reads,
 * collective(), so every rank ends with the same error): the same result-deciding settings and
 * the same data. A finished output means nothing to do; no file means a fresh start.
 */
void Reconstruction::check_resume(bool resume) {
    if (!resume) return;
    int state[2] = {0, 0};
    collective(ctx_, [&] {
        if (!ctx_.is_root()) return;
        const std::string& out = cfg_.output_file;
        const h5::File f = h5::File::open_read(out);
        if (!f.has_attr("/", "config") || !f.has_attr("/", "complete"))
            throw data_error(out + ": not a reconstruction output (no config attribute); --overwrite replaces it");
        compare_config(f.attr_string("/", "config"));
        if (f.attr_int64("/", "complete") == 1) {
            state[0] = 1;
            return;
        }
        if (!f.exists("/checkpoint"))
            throw data_error(out + ": holds no checkpoint to resume from; --overwrite starts over");
        compare_data(f);
        const std::int64_t it = f.attr_int64("/checkpoint", "iteration");
        if (it < 1 || it >= cfg_.iterations)
            throw data_error(out + ": its checkpoint is at iteration " + std::to_string(it) + ", outside 1.." +
                             std::to_string(cfg_.iterations - 1) + " (a damaged checkpoint)");
        state[1] = static_cast<int>(it);
    });
    EF_MPI_CHECK(MPI_Bcast(state, 2, MPI_INT, 0, ctx_.world()));
    resume_.complete = state[0] == 1;
    resume_.from = state[1];
}

/// Refuses a resume whose result-deciding settings differ, naming the first that does.
void Reconstruction::compare_config(const std::string& stored) const {
    const auto before = result_settings(stored);
    const std::map<std::string, std::string> was(before.begin(), before.end());
    for (const auto& [key, value] : result_settings(cfg_.resolved_text())) {
        const auto it = was.find(key);
        // A key newer than the stored config (data.positions_unit...) at its default computes as before.
        if (it == was.end() && value == recon_key_default(key)) continue;
        const std::string old = it == was.end() ? "no " + key : key + " = " + it->second;
        if (it == was.end() || it->second != value)
            throw usage_error(cfg_.where(key) + " = " + value + ", but " + cfg_.output_file + " was computed with " +
                              old + " (--resume needs the same settings; --overwrite starts over)");
    }
}

/// Refuses a checkpoint computed from other data: another shape, or other positions.
void Reconstruction::compare_data(const h5::File& f) const {
    const std::string out = cfg_.output_file, shape = patterns_shape(ds_);
    const std::string was = f.attr_string("/checkpoint", "patterns");
    if (was != shape)
        throw usage_error(out + ": its checkpoint was computed from " + was + ", but " + ds_.path + " has " + shape +
                          " (another data file?)");
    if (f.attr_string("/checkpoint", "positions_checksum") != positions_checksum_)
        throw usage_error(out + ": its checkpoint was computed from other scan positions than " + ds_.path +
                          "'s (another data file?)");
}

/**
 * The state at the checkpoint, on every rank (each reads the output read-only; collective(),
 * so every rank ends with the same error), then this data's mean pattern checked against the
 * checkpoint's. A refusal here is a ResumeRefused: agreed everywhere, so not an abort.
 */
void Reconstruction::restore_checkpoint() {
    double stored_total = 0;
    const std::vector<std::int64_t> before = bounds_;
    try {
        collective(ctx_, [&] {
            const h5::File f = h5::File::open_read(cfg_.output_file);
            try {
                read_checkpoint(f);
                stored_total = f.attr_double("/checkpoint", "mean_total");
                if (f.has_attr("/probe", "initial_defocus_from")) {  // written again with the output
                    defocus_ = f.attr_double("/probe", "initial_defocus_rad");
                    defocus_source_ = f.attr_string("/probe", "initial_defocus_from");
                }
            } catch (const Error& e) {
                if (e.code() != ExitCode::runtime) throw;
                throw data_error(cfg_.output_file + ": a damaged checkpoint (" + e.what() + ")");
            }
        });
        check_mean_total(stored_total);
    } catch (const Error& e) {
        throw ResumeRefused(e);
    }
    if (bounds_ != before) load_share(bounds_);  // the shares the run had reached
}

/// Everything the next iteration depends on (write_checkpoint()'s layout), sizes checked.
void Reconstruction::read_checkpoint(const h5::File& f) {
    const std::string g = "/checkpoint/";
    const size_t on = static_cast<size_t>(cfg_.slices) * static_cast<size_t>(ds_.obj_h) * static_cast<size_t>(ds_.obj_w);
    const size_t kn = static_cast<size_t>(cfg_.modes) * static_cast<size_t>(n_);
    const size_t np = 2 * static_cast<size_t>(ds_.count), its = static_cast<size_t>(resume_.from);
    auto read = [&](const std::string& name, size_t size) {
        std::vector<double> v = f.read_double(name);
        if (v.size() != size)
            throw data_error(cfg_.output_file + ": " + name + " holds " + std::to_string(v.size()) +
                             " values, not " + std::to_string(size) + " (a damaged checkpoint)");
        return v;
    };
    worker_->set_object(read(g + "object_p0", on), read(g + "object_p1", on));
    const std::vector<double> p = read(g + "probe", 2 * kn);
    std::vector<Complex> probe(kn);
    for (size_t i = 0; i < kn; ++i) probe[i] = {p[2 * i], p[2 * i + 1]};
    worker_->set_probe(probe);
    worker_->set_moments(read(g + "moments", 4 * on + 4 * kn));
    ds_.positions = read(g + "positions", np);
    pos_m_ = read(g + "positions_m", np);
    pos_v_ = read(g + "positions_v", np);
    if (f.exists(g + "positions_moved")) pos_moved_ = read(g + "positions_moved", np);  // older: absent
    loss_ = read("/loss", its);
    iteration_seconds_ = read("/iteration_seconds", its);
    if (f.exists("/probe_mode_powers")) mode_powers_ = f.read_double("/probe_mode_powers");
    t_object_ = f.attr_int64(g, "adam_steps_object");
    t_probe_ = f.attr_int64(g, "adam_steps_probe");
    t_pos_ = f.attr_int64(g, "adam_steps_positions");
    rebalance_points_ = static_cast<size_t>(f.attr_int64(g, "rebalance_points"));
    rebalances_ = static_cast<int>(f.attr_int64(g, "rebalances"));
    const std::vector<std::int64_t> bounds = f.read_int64(g + "bounds");
    if (bounds.size() == bounds_.size() && bounds.front() == 0 && bounds.back() == schedule_->strata())
        bounds_ = bounds;  // the same rank count: the shares it had reached (else equal shares)
}

/**
 * The data's mean pattern total against the checkpoint's: other intensities (another data
 * file with the same shape and positions) are refused. The checkpoint's value is then used,
 * so that a resume on another rank count (another order of the sum) keeps its bits.
 */
void Reconstruction::check_mean_total(double stored) {
    if (!(std::abs(stored - mean_total_) <= 1e-9 * std::abs(stored)))
        throw usage_error(cfg_.output_file + ": its checkpoint was computed from other intensities than " + ds_.path +
                          "'s (mean pattern total " + std::to_string(stored) + ", now " +
                          std::to_string(mean_total_) + ")");
    mean_total_ = stored;
}

/// Rank 0, into the output being written (write_output): the state read_checkpoint() restores.
void Reconstruction::write_checkpoint(h5::File& f) {
    const std::string g = "/checkpoint";
    f.create_group(g);
    std::vector<double> p0, p1;
    worker_->object(p0, p1);
    f.write(g + "/object_p0", p0, static_cast<std::uint64_t>(ds_.obj_w));
    f.write(g + "/object_p1", p1, static_cast<std::uint64_t>(ds_.obj_w));
    const std::vector<Complex> probe = worker_->probe();
    std::vector<double> p(2 * probe.size());
    for (size_t i = 0; i < probe.size(); ++i) {
        p[2 * i] = probe[i].real();
        p[2 * i + 1] = probe[i].imag();
    }
    f.write(g + "/probe", p, 2);
    f.write(g + "/moments", worker_->moments());
    f.write(g + "/positions", ds_.positions, 2);
    f.write(g + "/positions_m", pos_m_, 2);
    f.write(g + "/positions_v", pos_v_, 2);
    f.write(g + "/positions_moved", pos_moved_, 2);
    f.write(g + "/bounds", bounds_);
    f.set_attr(g, "iteration", static_cast<std::int64_t>(loss_.size()));
    f.set_attr(g, "adam_steps_object", t_object_);
    f.set_attr(g, "adam_steps_probe", t_probe_);
    f.set_attr(g, "adam_steps_positions", t_pos_);
    f.set_attr(g, "rebalance_points", static_cast<std::int64_t>(rebalance_points_));
    f.set_attr(g, "rebalances", static_cast<std::int64_t>(rebalances_));
    f.set_attr(g, "mean_total", mean_total_);
    f.set_attr(g, "patterns", patterns_shape(ds_));
    f.set_attr(g, "positions_checksum", positions_checksum_);
}

/**
 * After iteration `it` (not the last), every rank learns whether to stop (any rank's stop
 * signal) or to write a checkpoint (output.checkpoint_every, or rank 0's clock past
 * output.checkpoint_minutes, or a stop): one small MPI_Allreduce per iteration, so a signal
 * that reached one rank, or the ranks at different times, stops them all at the same boundary.
 */
Boundary Reconstruction::at_boundary(int it) {
    int flags[2] = {stop_signal(), 0};
    if (ctx_.is_root() && cfg_.checkpoint_minutes > 0 && now_seconds() - last_checkpoint_ >= 60 * cfg_.checkpoint_minutes)
        flags[1] = 1;
    if (ctx_.size() > 1) {
        PhaseTimer::Scope s(timer_, Phase::sync);
        MPI_Request req = MPI_REQUEST_NULL;  // watched: a rank stopped before the boundary is named
        EF_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, flags, 2, MPI_INT, MPI_MAX, ctx_.world(), &req));
        heartbeat_->wait(req, "the agreement at an iteration's end");
    }
    Boundary b;
    b.stop = flags[0];
    b.checkpoint = b.stop != 0 || flags[1] != 0 || (cfg_.checkpoint_every > 0 && it % cfg_.checkpoint_every == 0);
    return b;
}

/// A stopped run: where it is, and the command that finishes it.
void Reconstruction::report_stop() const {
    ef::report_stopped(ctx_, stopped_,
                   "a checkpoint at iteration " + std::to_string(loss_.size()) + " of " + std::to_string(cfg_.iterations),
                   cfg_.output_file);
}

}  // namespace ef::recon

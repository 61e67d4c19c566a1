// SPDX-License-Identifier: MIT
// Streamed patterns (run.stream = on): the CUDA worker with its patterns in page-locked host
// memory, each mini-batch's copied to the device beside the compute, against the same worker
// with them in device memory. Only where the patterns come from differs, so after several
// iterations of several batches (deferred steps and per-batch steps; single slice through the
// window-resident passes, two slices through the cuFFT sequence) the losses, the gradients,
// the object, the probe and the positions must be the same bits. gpu_tests' main
// (test_gpu_fit.cpp) exits 77 where no GPU is visible.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <ensemblefit/recon/recon_worker.hpp>

#include "kernels/recon/ptycho_math.hpp"
#include "tests/gpu/gpu_fixture.hpp"

using namespace ef;
using C = std::complex<double>;

namespace {

struct StreamSetup {
    ReconWorkerOptions o;
    int count = 0;                   ///< patterns (the rank's share)
    std::vector<float> patterns;     ///< count x n
    std::vector<double> positions;   ///< count x 2
    std::vector<double> amp, phase;  ///< slices x obj x obj
    std::vector<C> probe;
};

/// `count` patterns of dp x dp (one all zero), K modes, S slices, positions over the object
/// (one at the corner, one clamped past the edge).
StreamSetup make_stream_setup(int dp, int modes, int slices, int count, int obj) {
    ReconWorkerOptions o;
    o.h = o.w = dp;
    o.modes = modes;
    o.slices = slices;
    o.slice_fresnel = slices > 1 ? 8.0 : 0.0;
    o.obj_h = o.obj_w = obj;
    o.subpixel = true;
    o.threads = 4;
    ef_test::ReconSetup r = ef_test::make_recon_setup(17, o, count, {0.9, 0.2, 0.6, 0.3}, 5);
    StreamSetup s;
    s.o = r.o;
    s.count = count;
    s.patterns = std::move(r.patterns);
    s.positions = std::move(r.batch.positions);
    s.amp = std::move(r.amp);
    s.phase = std::move(r.phase);
    s.probe = std::move(r.probe);
    return s;
}

/// The rows of iteration `it`: in order in the first (runs of consecutive rows, copied as one),
/// shuffled after; cut into batches of `batch` (the last one shorter).
std::vector<std::vector<std::int64_t>> iteration_batches(int it, int count, int batch) {
    std::vector<std::int64_t> rows(static_cast<size_t>(count));
    std::iota(rows.begin(), rows.end(), 0);
    if (it > 0) std::shuffle(rows.begin(), rows.end(), std::mt19937_64(static_cast<std::uint64_t>(100 + it)));
    std::vector<std::vector<std::int64_t>> out;
    for (int b0 = 0; b0 < count; b0 += batch)
        out.emplace_back(rows.begin() + b0, rows.begin() + std::min(count, b0 + batch));
    return out;
}

struct StreamRun {
    std::vector<double> losses, gradients, position_grads, positions, p0, p1;
    std::vector<C> probe;
    std::string note;
    ReconStreamTiming timing;
};

/// Each position's step: a fixed fraction of a pixel along its gradient (normalised over the
/// batch), so that positions move the same way in both runs and feed the next iteration.
void step_positions(const std::vector<std::int64_t>& rows, const double* g, std::vector<double>& positions) {
    double m = 1e-300;
    for (size_t j = 0; j < 2 * rows.size(); ++j) m = std::max(m, std::abs(g[j]));
    for (size_t j = 0; j < rows.size(); ++j)
        for (size_t c = 0; c < 2; ++c) positions[static_cast<size_t>(2 * rows[j]) + c] -= 0.05 * g[2 * j + c] / m;
}

ReconBatch batch_of(const std::vector<std::int64_t>& rows, const std::vector<double>& positions) {
    ReconBatch b;
    for (const std::int64_t r : rows) {
        b.pattern_of.push_back(r);
        b.positions.push_back(positions[static_cast<size_t>(2 * r)]);
        b.positions.push_back(positions[static_cast<size_t>(2 * r + 1)]);
    }
    return b;
}

/// One iteration of per-batch steps (the host computes each loss factor).
void per_batch_iteration(ReconWorker& w, const std::vector<std::vector<std::int64_t>>& batches, int n, ReconUpdate& u,
                         StreamRun& r) {
    for (const auto& rows : batches) {
        const ReconBatchTerms t = w.gradients(batch_of(rows, r.positions), true, true);
        std::size_t count = 0;
        const double* g = w.gradient_buffer(true, count);
        r.gradients.insert(r.gradients.end(), g, g + count);
        r.position_grads.insert(r.position_grads.end(), t.position_grad.begin(), t.position_grad.end());
        double loss = 0;
        recon::ptycho_loss_scale(recon::LossKind::amplitude, t.loss_a, t.loss_b,
                                 static_cast<double>(rows.size()) * n, loss, u.grad_scale);
        r.losses.push_back(loss);
        ++u.t_object;
        ++u.t_probe;
        w.update(u);
        step_positions(rows, t.position_grad.data(), r.positions);
    }
}

/// One iteration of deferred steps (queued with no wait; the loss factor on the device).
void deferred_iteration(ReconWorker& w, const std::vector<std::vector<std::int64_t>>& batches, int n, ReconUpdate& u,
                        StreamRun& r) {
    const auto nb = static_cast<std::int64_t>(batches.size());
    std::int64_t most = 0, all = 0;
    for (const auto& rows : batches) {
        most = std::max<std::int64_t>(most, static_cast<std::int64_t>(rows.size()));
        all += static_cast<std::int64_t>(rows.size());
    }
    w.begin_deferred(nb, most, all);
    for (std::int64_t t = 0; t < nb; ++t) {
        const auto& rows = batches[static_cast<size_t>(t)];
        const auto size = static_cast<std::int64_t>(rows.size());
        w.gradients_deferred(batch_of(rows, r.positions), true, true, 0, size);
        ++u.t_object;
        ++u.t_probe;
        w.update_deferred(u, static_cast<double>(size) * n, t);
    }
    const ReconDeferredResults res = w.end_deferred(nb);
    r.losses.insert(r.losses.end(), res.loss.begin(), res.loss.end());
    r.position_grads.insert(r.position_grads.end(), res.position_grad.begin(), res.position_grad.end());
    const double* g = res.position_grad.data();
    for (const auto& rows : batches) {
        step_positions(rows, g, r.positions);
        g += 2 * rows.size();
    }
}

StreamRun run_stream(const StreamSetup& s, TuningSwitch stream, bool deferred, int iterations, int batch) {
    ReconWorkerOptions o = s.o;
    o.stream = stream;
    o.batch = batch;
    auto w = make_recon_worker(WorkerKind::gpu, o);
    w->set_patterns(s.count, s.patterns.data());
    w->set_object(s.amp, s.phase);
    w->set_probe(s.probe);
    w->keep_gradients_on_device(true);
    StreamRun r;
    r.note = w->pattern_residence();
    r.positions = s.positions;
    ReconUpdate u;
    u.probe = true;
    u.lr_p0 = u.lr_p1 = 1e-2;
    u.lr_probe = 0.05;
    u.t_object = u.t_probe = 0;
    for (int it = 0; it < iterations; ++it) {
        const auto batches = iteration_batches(it, s.count, batch);
        if (deferred) deferred_iteration(*w, batches, o.h * o.w, u, r);
        else per_batch_iteration(*w, batches, o.h * o.w, u, r);
    }
    w->object(r.p0, r.p1);
    r.probe = w->probe();
    r.timing = w->stream_timing();
    return r;
}

void check_same_bits(const char* what, const StreamSetup& s, bool deferred, int iterations, int batch) {
    const StreamRun resident = run_stream(s, TuningSwitch::off, deferred, iterations, batch);
    const StreamRun streamed = run_stream(s, TuningSwitch::on, deferred, iterations, batch);
    const int batches = iterations * ((s.count + batch - 1) / batch);
    std::printf("  streamed vs resident (%s, %s steps): %d batches, losses %.6g .. %.6g; object %d, probe %d, "
                "positions %d identical; uploads %.3f ms, compute waited %.3f ms\n",
                what, deferred ? "deferred" : "per-batch", batches, resident.losses.front(), resident.losses.back(),
                resident.p0 == streamed.p0 && resident.p1 == streamed.p1, resident.probe == streamed.probe,
                resident.positions == streamed.positions, 1e3 * streamed.timing.upload, 1e3 * streamed.timing.wait);
    CHECK(resident.note.empty());
    CHECK(streamed.note.find("streamed") != std::string::npos);
    CHECK(streamed.note.find("run.stream = on") != std::string::npos);
    CHECK(resident.timing.batches == 0);
    CHECK(streamed.timing.batches == batches);
    CHECK(streamed.timing.bytes == Approx(4.0 * iterations * s.count * s.o.h * s.o.w));
    CHECK(streamed.timing.upload > 0);
    CHECK(streamed.timing.wait >= 0);
    REQUIRE(resident.losses.size() == static_cast<size_t>(batches));
    CHECK(resident.losses.back() < resident.losses.front());
    CHECK(resident.losses == streamed.losses);
    CHECK(resident.gradients == streamed.gradients);
    CHECK(resident.position_grads == streamed.position_grads);
    CHECK(resident.positions != s.positions);  // the positions moved ...
    CHECK(resident.positions == streamed.positions);  // ... the same way
    CHECK(resident.p0 == streamed.p0);
    CHECK(resident.p1 == streamed.p1);
    CHECK(resident.probe == streamed.probe);
}

}  // namespace

TEST_CASE("recon: streamed patterns = resident patterns, bit for bit, single slice (GPU)", "[gpu][recon][stream]") {
    // 64 x 64 windows: the window-resident passes; 2 modes; 7 batches of 12 (the last of 6).
    const StreamSetup s = make_stream_setup(64, 2, 1, 78, 140);
    check_same_bits("1 slice, window passes", s, true, 3, 12);
    check_same_bits("1 slice, window passes", s, false, 2, 12);
}

TEST_CASE("recon: streamed patterns = resident patterns, bit for bit, two slices (GPU)", "[gpu][recon][stream]") {
    // Multislice runs the cuFFT sequence (patterns read by the modulus reduction).
    const StreamSetup s = make_stream_setup(32, 2, 2, 50, 90);
    check_same_bits("2 slices, cuFFT sequence", s, true, 3, 8);
    check_same_bits("2 slices, cuFFT sequence", s, false, 2, 8);
}

TEST_CASE("recon: run.stream = auto keeps small data resident; a new share re-decides (GPU)", "[gpu][recon][stream]") {
    StreamSetup s = make_stream_setup(32, 1, 1, 20, 60);
    s.o.batch = 8;
    auto w = make_recon_worker(WorkerKind::gpu, s.o);  // stream = automatic
    w->set_patterns(s.count, s.patterns.data());
    CHECK(w->pattern_residence().empty());
    ReconWorkerOptions on = s.o;
    on.stream = TuningSwitch::on;
    auto v = make_recon_worker(WorkerKind::gpu, on);
    v->set_patterns(s.count, s.patterns.data());
    CHECK_FALSE(v->pattern_residence().empty());
    v->set_patterns(s.count / 2, s.patterns.data());  // a rebalanced, smaller share: still streamed
    CHECK_FALSE(v->pattern_residence().empty());
    CHECK(v->stream_timing().batches == 0);
}

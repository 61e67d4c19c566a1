// SPDX-License-Identifier: MIT
// What the GPU tests share, and perf/gpu's benchmark programs with them: the source tree, a fit
// problem loaded as a run loads it, replicas fitted on one worker, and the reconstruction tests'
// data (drawn from one generator in a fixed order, so each test's data stay what its seed made
// them), their workers, gradients and Adam steps (load_problem, batch_gradients, max_rel_diff and
// adam_steps are in tests/common/test_helpers.hpp, shared with the unit tests). The Catch2
// assertions at the end are left out where EF_GPU_FIXTURE_NO_CATCH is defined (a benchmark
// program: no Catch2 session).
#pragma once

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <ensemblefit/config/fit_config.hpp>
#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/recon/recon_worker.hpp>
#include <ensemblefit/worker/worker.hpp>

#include "kernels/recon/ptycho_math.hpp"
#include "tests/common/test_helpers.hpp"

#ifndef EF_GPU_FIXTURE_NO_CATCH
#include <catch2/catch.hpp>
#endif

namespace ef_test {

// ---- fits ------------------------------------------------------------------------------------

/// The source tree: $EF_SOURCE_DIR when set (the GPU machine checks the tree out elsewhere).
inline const std::string kSrc = std::getenv("EF_SOURCE_DIR") ? std::getenv("EF_SOURCE_DIR") : EF_SOURCE_DIR;

/// Replicas 0..replicas of `pb` as one work unit on a worker of `kind` (8 threads on the CPU,
/// device 0 on the GPU).
inline ef::ReplicaBlock fit_replicas(const ef::FitProblem& pb, ef::WorkerKind kind, int replicas) {
    ef::WorkUnit unit;
    for (std::int64_t r = 0; r <= replicas; ++r) unit.replicas.push_back(r);
    ef::WorkerOptions o;
    o.threads = 8;
    o.device = 0;
    ef::ReplicaBlock out;
    ef::make_worker(kind, pb, o)->run(unit, out);
    return out;
}

// ---- reconstruction data ---------------------------------------------------------------------

/// One batch of a reconstruction test: the worker's options, its patterns, object, probe and
/// the batch (positions and the pattern row of each).
struct ReconSetup {
    ef::ReconWorkerOptions o;
    std::vector<float> patterns;     ///< rows x h x w
    std::vector<double> amp, phase;  ///< slices x obj_h x obj_w
    std::vector<std::complex<double>> probe;
    ef::ReconBatch batch;
};

/// The object's draws: amplitude amp_lo + amp_span u, phase phase_span u - phase_shift.
struct ObjectDraw {
    double amp_lo, amp_span, phase_span, phase_shift;
};

/// K probe modes of dp x dp: a Gaussian envelope (mode 0 five times the others) with random
/// amplitude and phase ripples, appended to `probe`.
inline void append_test_probe(std::mt19937_64& rng, int dp, int modes, std::vector<std::complex<double>>& probe) {
    std::uniform_real_distribution<double> u(0, 1);
    const double r2 = dp * dp / 25.0;
    for (int k = 0; k < modes; ++k)
        for (int q = 0; q < dp * dp; ++q) {
            const double y = q / dp - dp / 2.0, x = q % dp - dp / 2.0;
            const double env = std::exp(-(x * x + y * y) / r2) * (k == 0 ? 10.0 : 2.0);
            probe.emplace_back(env * (1 + 0.2 * u(rng)), env * 0.2 * (u(rng) - 0.5));
        }
}

/// Scan position j (y, x) over an object `span` pixels wider than the window: the first at the
/// corner, the second clamped past the edge, the rest uniform; appended to `positions`.
inline void append_test_position(std::mt19937_64& rng, int j, double span, std::vector<double>& positions) {
    std::uniform_real_distribution<double> u(0, 1);
    positions.push_back(j == 0 ? 0.0 : j == 1 ? span + 5.0 : span * u(rng));
    positions.push_back(j == 0 ? 0.0 : j == 1 ? span + 0.3 : span * u(rng));
}

/// `rows` patterns of the options' window for a test of options `o`, drawn from
/// mt19937_64(seed) in this order: the object (o.slices x obj^2 amplitude, phase pairs), the
/// probe's modes, the rows' positions (position j reads pattern row rows - 1 - j), the patterns
/// (row `zero_row` all zero).
inline ReconSetup make_recon_setup(std::uint64_t seed, const ef::ReconWorkerOptions& o, int rows, const ObjectDraw& d,
                                   int zero_row) {
    ReconSetup s;
    s.o = o;
    const int dp = o.h, n = o.h * o.w, obj = o.obj_h;
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(0, 1);
    for (int i = 0; i < o.slices * obj * obj; ++i) {
        s.amp.push_back(d.amp_lo + d.amp_span * u(rng));
        s.phase.push_back(d.phase_span * u(rng) - d.phase_shift);
    }
    append_test_probe(rng, dp, o.modes, s.probe);
    const double span = obj - dp;
    for (int j = 0; j < rows; ++j) {
        s.batch.pattern_of.push_back(rows - 1 - j);
        append_test_position(rng, j, span, s.batch.positions);
    }
    s.patterns.resize(static_cast<size_t>(rows) * n);
    for (int j = 0; j < rows; ++j)
        for (int q = 0; q < n; ++q)
            s.patterns[static_cast<size_t>(j) * n + q] =
                j == zero_row ? 0.0f : static_cast<float>(50.0 * u(rng) * u(rng));
    return s;
}

/// Single-slice ptychography (test_recon_gpu.cpp and perf/gpu/bench_recon_batch.cpp): b
/// positions (one at the object's corner, one clamped past its edge, one with a zero pattern),
/// K modes, dp x dp windows, sub-pixel shifts, 8 CPU threads.
inline ReconSetup make_ptycho_setup(int dp, int modes, int b, int obj) {
    ef::ReconWorkerOptions o;
    o.h = o.w = dp;
    o.modes = modes;
    o.obj_h = o.obj_w = obj;
    o.subpixel = true;
    o.threads = 8;
    o.fft_measure = false;
    return make_recon_setup(5, o, b, {0.9, 0.2, 0.6, 0.3}, 7);
}

// ---- reconstruction workers ------------------------------------------------------------------

/// A worker of `kind` holding the setup's patterns, object and probe.
inline std::unique_ptr<ef::ReconWorker> make_recon_test_worker(const ReconSetup& s, ef::WorkerKind kind) {
    auto w = ef::make_recon_worker(kind, s.o);
    w->set_patterns(static_cast<std::int64_t>(s.batch.pattern_of.size()), s.patterns.data());
    w->set_object(s.amp, s.phase);
    w->set_probe(s.probe);
    return w;
}

/// `batches` Adam steps over batches alternating between `a` and `b`, per batch (the host
/// computes each loss factor from the returned terms) or deferred (queued, the factor computed
/// on the device); returns the losses, the position gradients in `pos` when asked for, and a
/// deferred run's results (gradient norms per batch) in `deferred_out` when asked for.
inline std::vector<double> run_steps(ef::ReconWorker& w, const ef::ReconBatch& a, const ef::ReconBatch& b,
                                     int batches, bool deferred, int n, std::vector<double>* pos = nullptr,
                                     ef::ReconDeferredResults* deferred_out = nullptr) {
    std::vector<double> losses;
    if (pos) pos->clear();
    ef::ReconUpdate u;
    u.probe = true;
    u.lr_p0 = u.lr_p1 = 1e-2;
    u.lr_probe = 0.05;
    const std::int64_t most = static_cast<std::int64_t>(std::max(a.pattern_of.size(), b.pattern_of.size()));
    if (deferred) w.begin_deferred(batches, most, most * batches);
    for (int t = 0; t < batches; ++t) {
        const ef::ReconBatch& batch = t % 2 ? b : a;
        const std::int64_t size = static_cast<std::int64_t>(batch.pattern_of.size());
        const double pixels = static_cast<double>(size) * n;
        u.t_object = u.t_probe = t + 1;
        if (deferred) {
            w.gradients_deferred(batch, true, pos != nullptr, 0, size);
            w.update_deferred(u, pixels, t);
        } else {
            const ef::ReconBatchTerms terms = w.gradients(batch, true, pos != nullptr);
            if (pos) pos->insert(pos->end(), terms.position_grad.begin(), terms.position_grad.end());
            double loss = 0;
            ef::recon::ptycho_loss_scale(ef::recon::LossKind::amplitude, terms.loss_a, terms.loss_b, pixels, loss,
                                         u.grad_scale);
            losses.push_back(loss);
            w.update(u);
        }
    }
    if (deferred) {
        ef::ReconDeferredResults r = w.end_deferred(batches);
        losses = r.loss;
        if (pos) *pos = r.position_grad;
        if (deferred_out) *deferred_out = std::move(r);
    }
    return losses;
}

/// A deferred run's results hold a gradient norm per batch, each positive.
inline bool deferred_gradients_ok(const ef::ReconDeferredResults& r, int batches) {
    if (r.gradients.size() != static_cast<size_t>(batches)) return false;
    return std::all_of(r.gradients.begin(), r.gradients.end(), [](double g) { return g > 0; });
}

#ifndef EF_GPU_FIXTURE_NO_CATCH

// ---- assertions ------------------------------------------------------------------------------

/// Bit for bit: indices, statuses, iterations, parameters and chi^2 of every replica.
inline void check_same_bits(const ef::ReplicaBlock& a, const ef::ReplicaBlock& b) {
    REQUIRE(a.size() == b.size());
    CHECK(a.index == b.index);
    CHECK(a.status == b.status);
    CHECK(a.iterations == b.iterations);
    REQUIRE(a.params.size() == b.params.size());
    CHECK(std::memcmp(a.params.data(), b.params.data(), a.params.size() * sizeof(double)) == 0);
    CHECK(std::memcmp(a.chi2.data(), b.chi2.data(), a.chi2.size() * sizeof(double)) == 0);
}

/// run_steps with a deferred run's results checked: a gradient norm per batch, each positive.
inline std::vector<double> run_checked_steps(ef::ReconWorker& w, const ef::ReconBatch& a, const ef::ReconBatch& b,
                                             int batches, bool deferred, int n, std::vector<double>* pos = nullptr) {
    ef::ReconDeferredResults r;
    std::vector<double> losses = run_steps(w, a, b, batches, deferred, n, pos, &r);
    if (deferred) {
        CHECK(r.gradients.size() == static_cast<size_t>(batches));
        for (double g : r.gradients) CHECK(g > 0);
    }
    return losses;
}

#endif

}  // namespace ef_test

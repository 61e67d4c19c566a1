// SPDX-License-Identifier: MIT
// Multislice on the GPU: the CUDA worker against the CPU worker (both float32, the same
// single-source functors: kernels/recon/multislice_math.hpp) on one batch of a 4-slice object,
// after 10 Adam steps, and run-to-run bitwise on the GPU. gpu_tests' main (test_gpu_fit.cpp)
// exits 77 where no GPU is visible.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include <ensemblefit/recon/recon_worker.hpp>

#include "tests/gpu/recon_fixture.hpp"

using namespace ef;

namespace {

struct SliceSetup {
    ReconWorkerOptions o;
    std::vector<float> patterns;
    std::vector<double> amp, phase;  // slices x obj x obj
    std::vector<std::complex<double>> probe;
    ReconBatch batch;
};

/// b positions (one at the corner, one clamped past the edge, one with a zero pattern), K modes,
/// S slices of dp x dp windows; 64 pixels: the GPU's window-resident passes would take it, so
/// this also checks that multislice leaves them for the cuFFT sequence.
SliceSetup make_slice_setup(int dp, int modes, int slices, int b, int obj) {
    SliceSetup s;
    s.o.h = s.o.w = dp;
    s.o.modes = modes;
    s.o.slices = slices;
    s.o.slice_fresnel = 8.0;
    s.o.obj_h = s.o.obj_w = obj;
    s.o.subpixel = true;
    s.o.threads = 8;
    const int n = dp * dp;
    std::mt19937_64 rng(9);
    std::uniform_real_distribution<double> u(0, 1);
    for (int i = 0; i < slices * obj * obj; ++i) {
        s.amp.push_back(0.95 + 0.1 * u(rng));
        s.phase.push_back(0.4 * u(rng) - 0.2);
    }
    ef_test::append_test_probe(rng, dp, modes, s.probe);
    const double span = obj - dp;
    for (int j = 0; j < b; ++j) {
        s.batch.pattern_of.push_back(b - 1 - j);
        ef_test::append_test_position(rng, j, span, s.batch.positions);
    }
    s.patterns.resize(static_cast<size_t>(b) * n);
    for (int j = 0; j < b; ++j)
        for (int q = 0; q < n; ++q)
            s.patterns[static_cast<size_t>(j) * n + q] = j == 7 ? 0.0f : static_cast<float>(50.0 * u(rng) * u(rng));
    return s;
}

std::unique_ptr<ReconWorker> make_worker(const SliceSetup& s, WorkerKind kind) {
    auto w = make_recon_worker(kind, s.o);
    w->set_patterns(static_cast<std::int64_t>(s.batch.pattern_of.size()), s.patterns.data());
    w->set_object(s.amp, s.phase);
    w->set_probe(s.probe);
    return w;
}

std::vector<double> batch_gradients(ReconWorker& w, const ReconBatch& b, ReconBatchTerms& t) {
    t = w.gradients(b, true, true);
    size_t count = 0;
    const double* p = w.gradient_buffer(true, count);
    return std::vector<double>(p, p + count);
}

double max_rel_diff(const std::vector<double>& a, const std::vector<double>& ref) {
    double m = 0, d = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        m = std::max(m, std::abs(ref[i]));
        d = std::max(d, std::abs(a[i] - ref[i]));
    }
    return m > 0 ? d / m : d;
}

void adam_steps(ReconWorker& w, const ReconBatch& b, int count) {
    for (int t = 1; t <= count; ++t) {
        ReconBatchTerms terms;
        batch_gradients(w, b, terms);
        ReconUpdate u;
        u.probe = true;
        u.grad_scale = 1e-3;
        u.lr_p0 = u.lr_p1 = 1e-2;
        u.lr_probe = 0.05;
        u.t_object = u.t_probe = t;
        w.update(u);
    }
}

}  // namespace

TEST_CASE("multislice: CUDA worker = CPU worker on one batch of 4 slices and after 10 Adam steps",
          "[gpu][recon][multislice]") {
    const SliceSetup s = make_slice_setup(64, 2, 4, 20, 110);
    auto gpu = make_worker(s, WorkerKind::gpu);
    auto cpu = make_worker(s, WorkerKind::cpu);
    ReconBatchTerms tg, tc;
    const auto gg = batch_gradients(*gpu, s.batch, tg), gc = batch_gradients(*cpu, s.batch, tc);
    REQUIRE(gg.size() == gc.size());
    REQUIRE(gg.size() == static_cast<size_t>(2 * 4 * 110 * 110 + 2 * 2 * 64 * 64));
    const double dg = max_rel_diff(gg, gc), dp = max_rel_diff(tg.position_grad, tc.position_grad);
    std::printf("  multislice 20 x 2 x 64^2, 4 slices: gradient max rel diff %.2e, position gradient %.2e\n", dg, dp);
    CHECK(tg.loss_a == Approx(tc.loss_a).epsilon(1e-5));
    CHECK(tg.loss_b == Approx(tc.loss_b).epsilon(1e-5));
    CHECK(dg < 1e-4);
    CHECK(dp < 1e-4);
    // Every slice's gradient is compared, and each slice has one (the last slice's too).
    const size_t sn = 110 * 110;
    for (size_t sl = 0; sl < 4; ++sl) {
        double m = 0;
        for (size_t i = sl * sn; i < (sl + 1) * sn; ++i) m = std::max(m, std::abs(gc[i]));
        CHECK(m > 0);
    }
    adam_steps(*gpu, s.batch, 10);
    adam_steps(*cpu, s.batch, 10);
    std::vector<double> a0, a1, r0, r1;
    gpu->object(a0, a1);
    cpu->object(r0, r1);
    CHECK(max_rel_diff(a0, r0) < 5e-3);
    CHECK(max_rel_diff(a1, r1) < 5e-3);
}

TEST_CASE("multislice: CUDA gradients are bitwise reproducible run to run", "[gpu][recon][multislice]") {
    const SliceSetup s = make_slice_setup(32, 2, 3, 24, 70);
    auto a = make_worker(s, WorkerKind::gpu);
    auto b = make_worker(s, WorkerKind::gpu);
    ReconBatchTerms ta, tb;
    const auto ga = batch_gradients(*a, s.batch, ta), gb = batch_gradients(*b, s.batch, tb);
    CHECK(ga == gb);
    CHECK(ta.loss_a == tb.loss_a);
    CHECK(ta.position_grad == tb.position_grad);
}

// SPDX-License-Identifier: MIT
// Multislice on the GPU: the CUDA worker against the CPU worker (both float32, the same
// single-source functors: kernels/recon/multislice_math.hpp) on one batch of a 4-slice object,
// after 10 Adam steps, and run-to-run bitwise on the GPU. gpu_tests' main (test_gpu_fit.cpp)
// exits 77 where no GPU is visible.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include <ensemblefit/recon/recon_worker.hpp>

#include "tests/gpu/gpu_fixture.hpp"

using namespace ef;
using ef_test::adam_steps;
using ef_test::batch_gradients;
using ef_test::max_rel_diff;

namespace {

/// b positions (one at the corner, one clamped past the edge, one with a zero pattern), K modes,
/// S slices of dp x dp windows; 64 pixels: the GPU's window-resident passes would take it, so
/// this also checks that multislice leaves them for the cuFFT sequence.
ef_test::ReconSetup make_slice_setup(int dp, int modes, int slices, int b, int obj) {
    ReconWorkerOptions o;
    o.h = o.w = dp;
    o.modes = modes;
    o.slices = slices;
    o.slice_fresnel = 8.0;
    o.obj_h = o.obj_w = obj;
    o.subpixel = true;
    o.threads = 8;
    return ef_test::make_recon_setup(9, o, b, {0.95, 0.1, 0.4, 0.2}, 7);
}

}  // namespace

TEST_CASE("multislice: CUDA worker = CPU worker on one batch of 4 slices and after 10 Adam steps",
          "[gpu][recon][multislice]") {
    const ef_test::ReconSetup s = make_slice_setup(64, 2, 4, 20, 110);
    auto gpu = ef_test::make_recon_test_worker(s, WorkerKind::gpu);
    auto cpu = ef_test::make_recon_test_worker(s, WorkerKind::cpu);
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
    const ef_test::ReconSetup s = make_slice_setup(32, 2, 3, 24, 70);
    auto a = ef_test::make_recon_test_worker(s, WorkerKind::gpu);
    auto b = ef_test::make_recon_test_worker(s, WorkerKind::gpu);
    ReconBatchTerms ta, tb;
    const auto ga = batch_gradients(*a, s.batch, ta), gb = batch_gradients(*b, s.batch, tb);
    CHECK(ga == gb);
    CHECK(ta.loss_a == tb.loss_a);
    CHECK(ta.position_grad == tb.position_grad);
}

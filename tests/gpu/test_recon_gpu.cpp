// SPDX-License-Identifier: MIT
// The CUDA reconstruction worker against the CPU worker on the same batch (both float32, the
// same single-source functors; cuFFT vs FFTW and different summation trees), and run-to-run
// determinism of the GPU (no atomics). The time of one benchmark-sized batch is
// perf/gpu/bench_recon_batch.cpp's. gpu_tests' main (test_gpu_fit.cpp) exits 77 where no GPU
// is visible.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include <ensemblefit/recon/recon_worker.hpp>

#include "tests/gpu/gpu_fixture.hpp"

using namespace ef;
using C = std::complex<double>;
using ef_test::batch_gradients;
using ef_test::max_rel_diff;

namespace {

using Setup = ef_test::ReconSetup;

Setup make_setup(int dp, int modes, int b, int obj) { return ef_test::make_ptycho_setup(dp, modes, b, obj); }

std::unique_ptr<ReconWorker> make(const Setup& s, WorkerKind kind) { return ef_test::make_recon_test_worker(s, kind); }

}  // namespace

TEST_CASE("recon: CUDA worker = CPU worker on one batch and after 10 Adam steps", "[gpu][recon]") {
    const Setup s = make_setup(32, 3, 20, 70);
    auto gpu = make(s, WorkerKind::gpu);
    auto cpu = make(s, WorkerKind::cpu);
    ReconBatchTerms tg, tc;
    const auto gg = batch_gradients(*gpu, s.batch, tg), gc = batch_gradients(*cpu, s.batch, tc);
    const double dg = max_rel_diff(gg, gc), dp = max_rel_diff(tg.position_grad, tc.position_grad);
    std::printf("  recon 20 x 3 x 32^2: gradient max rel diff %.2e, position gradient %.2e, loss terms %.3e / %.3e\n",
                dg, dp, std::abs(tg.loss_a / tc.loss_a - 1), std::abs(tg.loss_b / tc.loss_b - 1));
    CHECK(tg.loss_a == Approx(tc.loss_a).epsilon(1e-5));
    CHECK(tg.loss_b == Approx(tc.loss_b).epsilon(1e-5));
    CHECK(dg < 1e-4);
    CHECK(dp < 1e-4);
    ef_test::adam_steps(*gpu, s.batch, 10);
    ef_test::adam_steps(*cpu, s.batch, 10);
    std::vector<double> a0, a1, r0, r1;
    gpu->object(a0, a1);
    cpu->object(r0, r1);
    // After Adam steps float32 paths differ most where gradients are tiny (Adam makes any
    // gradient a step of about lr): 5e-3 of the largest value, like CPU float32 vs float64.
    CHECK(max_rel_diff(a0, r0) < 5e-3);
    CHECK(max_rel_diff(a1, r1) < 5e-3);
}

TEST_CASE("recon: CUDA gradients are bitwise reproducible run to run", "[gpu][recon]") {
    const Setup s = make_setup(64, 4, 48, 160);
    auto g1 = make(s, WorkerKind::gpu);
    auto g2 = make(s, WorkerKind::gpu);
    ReconBatchTerms t1, t2, t3;
    const auto a = batch_gradients(*g1, s.batch, t1), b = batch_gradients(*g2, s.batch, t2),
               c = batch_gradients(*g1, s.batch, t3);
    CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
    CHECK(std::memcmp(a.data(), c.data(), a.size() * sizeof(double)) == 0);
    CHECK(t1.loss_a == t2.loss_a);
    CHECK(t1.position_grad == t3.position_grad);
}

namespace {
struct Shape {
    int dp, modes, b, obj;
};
}  // namespace

TEST_CASE("recon: window-resident passes = cuFFT passes (GPU) = CPU worker", "[gpu][recon]") {
    // The default GPU sequence for square 32/64/128 windows (one block per position, its FFTs in
    // shared memory) against the cuFFT sequence (tuning.window = off) on the same device, and
    // against the CPU worker (FFTW).
    for (const Shape sh : {Shape{64, 4, 48, 160}, Shape{128, 3, 24, 300}, Shape{128, 12, 256, 592}})
        for (const bool subpixel : {true, false}) {
            if (!subpixel && sh.modes == 12) continue;
            Setup s = make_setup(sh.dp, sh.modes, sh.b, sh.obj);
            s.o.subpixel = subpixel;
            auto window = make(s, WorkerKind::gpu);
            Setup off = s;
            off.o.tuning.window = TuningSwitch::off;
            auto passes = make(off, WorkerKind::gpu);
            ReconBatchTerms tw, tp;
            const auto gw = batch_gradients(*window, s.batch, tw), gp = batch_gradients(*passes, s.batch, tp);
            const double dg = max_rel_diff(gw, gp), dp = max_rel_diff(tw.position_grad, tp.position_grad);
            std::printf("  recon %d x %d x %d^2, subpixel %d, window vs cuFFT passes: gradient max rel diff %.2e, "
                        "position gradient %.2e, loss %.3e\n",
                        sh.b, sh.modes, sh.dp, subpixel, dg, dp, std::abs(tw.loss_a / tp.loss_a - 1));
            CHECK(tw.loss_a == Approx(tp.loss_a).epsilon(1e-5));
            CHECK(tw.loss_b == Approx(tp.loss_b).epsilon(1e-5));
            CHECK(dg < 1e-4);
            CHECK(dp < 1e-4);
            if (sh.b <= 48) {
                auto cpu = make(s, WorkerKind::cpu);
                ReconBatchTerms tc;
                const auto gc = batch_gradients(*cpu, s.batch, tc);
                const double dc = max_rel_diff(gw, gc), dpc = max_rel_diff(tw.position_grad, tc.position_grad);
                std::printf("    window vs CPU worker: gradient %.2e, position gradient %.2e\n", dc, dpc);
                CHECK(dc < 1e-4);
                CHECK(dpc < 1e-4);
            }
        }
}

TEST_CASE("recon: mode groups as thread-block clusters = mode groups apart (GPU)", "[gpu][recon]") {
    // A position's mode groups in one cluster add their intensities in the forward pass (shared
    // memory of the cluster) instead of a WindowModulus pass: the same sums in the same order,
    // so the same factor and gradients, bit for bit; only the loss terms are added in another
    // order. 2 groups of 6 modes (a quarter of the benchmark's batch) and 4 groups of 1 mode.
    for (const auto& [sh, groups] : {std::pair{Shape{128, 12, 64, 592}, 2}, std::pair{Shape{64, 4, 48, 160}, 4}}) {
        Setup s = make_setup(sh.dp, sh.modes, sh.b, sh.obj);
        s.o.tuning.window_groups = groups;
        auto clustered = make(s, WorkerKind::gpu);
        s.o.tuning.window_clusters = false;
        auto apart = make(s, WorkerKind::gpu);
        ReconBatchTerms tc, ta;
        const auto gc = batch_gradients(*clustered, s.batch, tc), ga = batch_gradients(*apart, s.batch, ta);
        std::printf("  recon %d x %d x %d^2, %d groups, clusters vs apart: gradients identical %d, loss rel diff %.2e\n",
                    sh.b, sh.modes, sh.dp, groups, gc == ga, std::abs(tc.loss_a / ta.loss_a - 1));
        CHECK(gc == ga);
        CHECK(tc.position_grad == ta.position_grad);
        CHECK(tc.loss_a == Approx(ta.loss_a).epsilon(1e-12));
        CHECK(tc.loss_b == Approx(ta.loss_b).epsilon(1e-12));
    }
}

TEST_CASE("recon: deferred steps = per-batch steps, bit for bit (GPU)", "[gpu][recon]") {
    // Window passes with one and with several mode groups, and the cuFFT sequence.
    for (const char* mode : {"window", "window, 1 group", "cufft"}) {
        Setup s = make_setup(32, 3, 20, 70);
        ReconBatch half;  // a second, smaller batch: positions 3..12 of the first
        half.pattern_of.assign(s.batch.pattern_of.begin() + 3, s.batch.pattern_of.begin() + 13);
        half.positions.assign(s.batch.positions.begin() + 6, s.batch.positions.begin() + 26);
        if (std::strcmp(mode, "cufft") == 0) s.o.tuning.window = TuningSwitch::off;
        if (std::strcmp(mode, "window, 1 group") == 0) s.o.tuning.window_groups = 1;
        auto per = make(s, WorkerKind::gpu);
        auto def = make(s, WorkerKind::gpu);
        per->keep_gradients_on_device(true);
        def->keep_gradients_on_device(true);
        REQUIRE(def->deferred_supported());
        std::vector<double> gp, gd;  // position gradients
        const std::vector<double> lp = ef_test::run_checked_steps(*per, s.batch, half, 6, false, 32 * 32, &gp);
        const std::vector<double> ld = ef_test::run_checked_steps(*def, s.batch, half, 6, true, 32 * 32, &gd);
        std::vector<double> p0, p1, d0, d1;
        per->object(p0, p1);
        def->object(d0, d1);
        const std::vector<C> pp = per->probe(), pd = def->probe();
        std::printf("  deferred steps (%s): losses %.6g .. %.6g, object and probe identical: %d %d\n", mode, lp.front(),
                    lp.back(), p0 == d0 && p1 == d1, pp == pd);
        CHECK(lp == ld);
        CHECK(gp.size() == 2 * (3 * 20 + 3 * 10));
        CHECK(gp == gd);
        CHECK(lp.back() < lp.front());
        CHECK(p0 == d0);
        CHECK(p1 == d1);
        CHECK(pp == pd);
    }
}

TEST_CASE("recon: the forward model between deferred iterations = CPU's, and changes no bit after (GPU)",
          "[gpu][recon]") {
    // positions.max_travel's search (Reconstruction::bound_travel) runs model_intensity on the
    // worker between deferred iterations: it must see the state those iterations left and leave
    // nothing behind that the next iteration reads.
    for (const char* mode : {"window", "cufft"}) {
        Setup s = make_setup(32, 3, 20, 70);
        if (std::strcmp(mode, "cufft") == 0) s.o.tuning.window = TuningSwitch::off;
        ReconBatch half;
        half.pattern_of.assign(s.batch.pattern_of.begin() + 3, s.batch.pattern_of.begin() + 13);
        half.positions.assign(s.batch.positions.begin() + 6, s.batch.positions.begin() + 26);
        ReconBatch cand = s.batch;  // candidates: the batch's positions moved by half a pixel
        for (double& p : cand.positions) p = std::max(0.0, p - 0.5);
        auto plain = make(s, WorkerKind::gpu);
        auto searched = make(s, WorkerKind::gpu);
        plain->keep_gradients_on_device(true);
        searched->keep_gradients_on_device(true);
        std::vector<double> g1, g2, h1, h2;
        ef_test::run_steps(*plain, s.batch, half, 6, true, 32 * 32, &g1);
        ef_test::run_steps(*searched, s.batch, half, 6, true, 32 * 32, &h1);
        const std::vector<double> inten = searched->model_intensity(cand);
        auto cpu = make(s, WorkerKind::cpu);
        std::vector<double> o0, o1;
        searched->object(o0, o1);
        cpu->set_object(o0, o1);
        cpu->set_probe(searched->probe());
        const double d = max_rel_diff(inten, cpu->model_intensity(cand));
        const std::vector<double> l1 = ef_test::run_steps(*plain, s.batch, half, 6, true, 32 * 32, &g2);
        const std::vector<double> l2 = ef_test::run_steps(*searched, s.batch, half, 6, true, 32 * 32, &h2);
        std::vector<double> p0, p1, q0, q1;
        plain->object(p0, p1);
        searched->object(q0, q1);
        std::printf("  forward model between deferred iterations (%s): GPU vs CPU max rel diff %.2e\n", mode, d);
        CHECK(d < 1e-4);
        CHECK(l1 == l2);
        CHECK(g2 == h2);
        CHECK(p0 == q0);
        CHECK(p1 == q1);
        CHECK(plain->probe() == searched->probe());
    }
}

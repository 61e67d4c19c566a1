// SPDX-License-Identifier: MIT
// The CUDA reconstruction worker against the CPU worker on the same batch (both float32, the
// same single-source functors; cuFFT vs FFTW and different summation trees), run-to-run
// determinism of the GPU (no atomics), and the speed of one benchmark-sized batch.
// gpu_tests' main (test_gpu_fit.cpp) exits 77 where no GPU is visible.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include <ensemblefit/recon/recon_worker.hpp>

#include "kernels/recon/ptycho_math.hpp"
#include "tests/gpu/recon_fixture.hpp"

using namespace ef;
using C = std::complex<double>;

namespace {

struct Setup {
    ReconWorkerOptions o;
    std::vector<float> patterns;
    std::vector<double> amp, phase;
    std::vector<C> probe;
    ReconBatch batch;
};

/// b positions (one at the object's corner, one clamped past its edge, one with a zero
/// pattern), K modes, dp x dp windows.
Setup make_setup(int dp, int modes, int b, int obj) {
    Setup s;
    s.o.h = s.o.w = dp;
    s.o.modes = modes;
    s.o.obj_h = s.o.obj_w = obj;
    s.o.subpixel = true;
    s.o.threads = 8;
    s.o.fft_measure = false;
    const int n = dp * dp;
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<double> u(0, 1);
    for (int i = 0; i < obj * obj; ++i) {
        s.amp.push_back(0.9 + 0.2 * u(rng));
        s.phase.push_back(0.6 * u(rng) - 0.3);
    }
    ef_test::append_test_probe(rng, dp, modes, s.probe);
    const double span = obj - dp;
    for (int j = 0; j < b; ++j) {
        s.batch.pattern_of.push_back(b - 1 - j);
        ef_test::append_test_position(rng, j, span, s.batch.positions);
    }
    s.patterns.resize(static_cast<size_t>(b) * n);
    for (int j = 0; j < b; ++j)
        for (int q = 0; q < n; ++q) s.patterns[static_cast<size_t>(j) * n + q] = j == 7 ? 0.0f : static_cast<float>(50.0 * u(rng) * u(rng));
    return s;
}

std::unique_ptr<ReconWorker> make(const Setup& s, WorkerKind kind) {
    auto w = make_recon_worker(kind, s.o);
    w->set_patterns(static_cast<std::int64_t>(s.batch.pattern_of.size()), s.patterns.data());
    w->set_object(s.amp, s.phase);
    w->set_probe(s.probe);
    return w;
}

std::vector<double> gradients(ReconWorker& w, const ReconBatch& b, ReconBatchTerms& t) {
    t = w.gradients(b, true, true);
    size_t count = 0;
    const double* p = w.gradient_buffer(true, count);
    return std::vector<double>(p, p + count);
}

double rel_diff(const std::vector<double>& a, const std::vector<double>& ref) {
    double m = 0, d = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        m = std::max(m, std::abs(ref[i]));
        d = std::max(d, std::abs(a[i] - ref[i]));
    }
    return m > 0 ? d / m : d;
}

void steps(ReconWorker& w, const ReconBatch& b, int count) {
    for (int t = 1; t <= count; ++t) {
        ReconBatchTerms terms;
        gradients(w, b, terms);
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

TEST_CASE("recon: CUDA worker = CPU worker on one batch and after 10 Adam steps", "[gpu][recon]") {
    const Setup s = make_setup(32, 3, 20, 70);
    auto gpu = make(s, WorkerKind::gpu);
    auto cpu = make(s, WorkerKind::cpu);
    ReconBatchTerms tg, tc;
    const auto gg = gradients(*gpu, s.batch, tg), gc = gradients(*cpu, s.batch, tc);
    const double dg = rel_diff(gg, gc), dp = rel_diff(tg.position_grad, tc.position_grad);
    std::printf("  recon 20 x 3 x 32^2: gradient max rel diff %.2e, position gradient %.2e, loss terms %.3e / %.3e\n",
                dg, dp, std::abs(tg.loss_a / tc.loss_a - 1), std::abs(tg.loss_b / tc.loss_b - 1));
    CHECK(tg.loss_a == Approx(tc.loss_a).epsilon(1e-5));
    CHECK(tg.loss_b == Approx(tc.loss_b).epsilon(1e-5));
    CHECK(dg < 1e-4);
    CHECK(dp < 1e-4);
    steps(*gpu, s.batch, 10);
    steps(*cpu, s.batch, 10);
    std::vector<double> a0, a1, r0, r1;
    gpu->object(a0, a1);
    cpu->object(r0, r1);
    // After Adam steps float32 paths differ most where gradients are tiny (Adam makes any
    // gradient a step of about lr): 5e-3 of the largest value, like CPU float32 vs float64.
    CHECK(rel_diff(a0, r0) < 5e-3);
    CHECK(rel_diff(a1, r1) < 5e-3);
}

TEST_CASE("recon: CUDA gradients are bitwise reproducible run to run", "[gpu][recon]") {
    const Setup s = make_setup(64, 4, 48, 160);
    auto g1 = make(s, WorkerKind::gpu);
    auto g2 = make(s, WorkerKind::gpu);
    ReconBatchTerms t1, t2, t3;
    const auto a = gradients(*g1, s.batch, t1), b = gradients(*g2, s.batch, t2), c = gradients(*g1, s.batch, t3);
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
            const auto gw = gradients(*window, s.batch, tw), gp = gradients(*passes, s.batch, tp);
            const double dg = rel_diff(gw, gp), dp = rel_diff(tw.position_grad, tp.position_grad);
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
                const auto gc = gradients(*cpu, s.batch, tc);
                const double dc = rel_diff(gw, gc), dpc = rel_diff(tw.position_grad, tc.position_grad);
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
        const auto gc = gradients(*clustered, s.batch, tc), ga = gradients(*apart, s.batch, ta);
        std::printf("  recon %d x %d x %d^2, %d groups, clusters vs apart: gradients identical %d, loss rel diff %.2e\n",
                    sh.b, sh.modes, sh.dp, groups, gc == ga, std::abs(tc.loss_a / ta.loss_a - 1));
        CHECK(gc == ga);
        CHECK(tc.position_grad == ta.position_grad);
        CHECK(tc.loss_a == Approx(ta.loss_a).epsilon(1e-12));
        CHECK(tc.loss_b == Approx(ta.loss_b).epsilon(1e-12));
    }
}

namespace {
/// `batches` Adam steps over batches alternating between `a` and `b`, per batch (the host
/// computes each loss factor from the returned terms) or deferred (queued, the factor computed
/// on the device); returns the losses, and the position gradients in `pos` when asked for.
std::vector<double> run_steps(ReconWorker& w, const ReconBatch& a, const ReconBatch& b, int batches, bool deferred,
                              int n, std::vector<double>* pos = nullptr) {
    std::vector<double> losses;
    if (pos) pos->clear();
    ReconUpdate u;
    u.probe = true;
    u.lr_p0 = u.lr_p1 = 1e-2;
    u.lr_probe = 0.05;
    const std::int64_t most = static_cast<std::int64_t>(std::max(a.pattern_of.size(), b.pattern_of.size()));
    if (deferred) w.begin_deferred(batches, most, most * batches);
    for (int t = 0; t < batches; ++t) {
        const ReconBatch& batch = t % 2 ? b : a;
        const std::int64_t size = static_cast<std::int64_t>(batch.pattern_of.size());
        const double pixels = static_cast<double>(size) * n;
        u.t_object = u.t_probe = t + 1;
        if (deferred) {
            w.gradients_deferred(batch, true, pos != nullptr, 0, size);
            w.update_deferred(u, pixels, t);
        } else {
            const ReconBatchTerms terms = w.gradients(batch, true, pos != nullptr);
            if (pos) pos->insert(pos->end(), terms.position_grad.begin(), terms.position_grad.end());
            double loss = 0;
            recon::ptycho_loss_scale(recon::LossKind::amplitude, terms.loss_a, terms.loss_b, pixels, loss, u.grad_scale);
            losses.push_back(loss);
            w.update(u);
        }
    }
    if (deferred) {
        const ReconDeferredResults r = w.end_deferred(batches);
        losses = r.loss;
        if (pos) *pos = r.position_grad;
        CHECK(r.gradients.size() == static_cast<size_t>(batches));
        for (double g : r.gradients) CHECK(g > 0);
    }
    return losses;
}
}  // namespace

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
        const std::vector<double> lp = run_steps(*per, s.batch, half, 6, false, 32 * 32, &gp);
        const std::vector<double> ld = run_steps(*def, s.batch, half, 6, true, 32 * 32, &gd);
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

/// Per-batch against deferred steps on the benchmark's batch (probe and position gradients):
/// host time per batch. EF_RECON_BENCH_BATCH and EF_RECON_BENCH_REPS change the batch size
/// (default 256) and the timed repetitions (32), for profiles of one GPU's share of a batch.
static void bench_deferred() {
    const char* eb = std::getenv("EF_RECON_BENCH_BATCH");
    const char* er = std::getenv("EF_RECON_BENCH_REPS");
    const int batch = eb && std::atoi(eb) > 0 ? std::atoi(eb) : 256;
    const int reps = er && std::atoi(er) > 0 ? std::atoi(er) : 32;
    const Setup s = make_setup(128, 12, batch, 592);
    auto gpu = make(s, WorkerKind::gpu);
    gpu->keep_gradients_on_device(true);
    const int n = 128 * 128;
    std::vector<double> pos;
    run_steps(*gpu, s.batch, s.batch, 3, false, n, &pos);  // warm-up: plans, allocations
    run_steps(*gpu, s.batch, s.batch, 3, true, n, &pos);
    for (const bool deferred : {false, true}) {
        const auto t0 = std::chrono::steady_clock::now();
        run_steps(*gpu, s.batch, s.batch, reps, deferred, n, &pos);
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
        std::printf("  recon batch %d x 12 x 128^2 (sub-pixel, probe and position gradients, Adam), %s steps: "
                    "%.3f ms per batch\n",
                    batch, deferred ? "deferred" : "per-batch", 1e3 * secs);
    }
}

/// variant 0: window-resident passes (default), 1: cuFFT and element-wise passes.
static void bench_batch(int variant) {
    Setup s = make_setup(128, 12, 256, 592);
    if (variant == 1) s.o.tuning.window = TuningSwitch::off;
    auto gpu = make(s, WorkerKind::gpu);
    gpu->keep_gradients_on_device(true);
    ReconBatchTerms t;
    ReconUpdate u;
    u.probe = true;
    u.grad_scale = 1e-6;
    u.lr_p0 = u.lr_p1 = u.lr_probe = 1e-4;
    for (int i = 0; i < 3; ++i) {  // warm-up: plans, allocations
        t = gpu->gradients(s.batch, true, true);
        u.t_object = u.t_probe = i + 1;
        gpu->update(u);
    }
    const int reps = 20;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) {
        t = gpu->gradients(s.batch, true, true);
        u.t_object = u.t_probe = i + 4;
        gpu->update(u);
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
    const double bytes = gpu->traffic_bytes(true, true) * 256;
    std::printf("  recon batch 256 x 12 x 128^2 (sub-pixel, probe and position gradients, %s): %.2f ms, model traffic "
                "%.2f GB -> %.0f GB/s; x 64 batches = %.3f s per 16384-pattern iteration\n",
                variant == 0 ? "window-resident passes" : "cuFFT, element-wise passes",
                1e3 * secs, bytes / 1e9, bytes / secs / 1e9,
                64 * secs);
    CHECK(std::isfinite(t.loss_a));
}

TEST_CASE("recon: one benchmark-shaped batch (256 x 12 modes x 128^2), GPU time", "[gpu][recon][bench]") {
    bench_batch(0);
    bench_batch(1);
}

TEST_CASE("recon: deferred steps on a benchmark-shaped batch (host time per batch)", "[gpu][recon][bench]") {
    bench_deferred();
}

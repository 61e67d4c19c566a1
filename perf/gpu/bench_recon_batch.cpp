// SPDX-License-Identifier: MIT
// The CUDA reconstruction worker on one benchmark-shaped batch (256 positions x 12 modes x
// 128^2, object 592^2, sub-pixel shifts, probe and position gradients: a batch of the
// tBL-WSe2-shaped benchmark of perf/recon/gpu_run.sh), timed; the data are those of
// tests/gpu/test_recon_gpu.cpp (tests/gpu/gpu_fixture.hpp, seed 5). Was two "[bench]" cases of
// gpu_tests; built with CUDA on (build/perf/gpu/bench_recon_batch), not run by ctest.
//
//   bench_recon_batch [batch|deferred]    (both when no argument)
//
// batch: GPU time of one gradient + Adam step with the window-resident passes (the default),
//   then with cuFFT and element-wise passes (tuning.window = off), and the model traffic.
// deferred: host time per batch of per-batch steps (a wait per batch) against deferred steps
//   (queued, the loss factor on the device). EF_RECON_BENCH_BATCH and EF_RECON_BENCH_REPS change
//   the batch size (default 256) and the timed repetitions (32), for profiles of one GPU's share
//   of a batch (perf/recon/ncu_window.sh kernels).
// Exits 77 where no GPU is visible, 1 when a run's results are not what they must be (a loss
// not finite; a deferred run without a positive gradient norm per batch), 2 on a bad argument.
#define EF_GPU_FIXTURE_NO_CATCH
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <ensemblefit/recon/recon_worker.hpp>
#include <ensemblefit/worker/worker_kind.hpp>

#include "tests/gpu/gpu_fixture.hpp"

namespace {

int env_count(const char* name, int fallback) {
    const char* v = std::getenv(name);
    return v && std::atoi(v) > 0 ? std::atoi(v) : fallback;
}

/// variant 0: window-resident passes (default), 1: cuFFT and element-wise passes.
bool bench_batch(int variant) {
    ef_test::ReconSetup s = ef_test::make_ptycho_setup(128, 12, 256, 592);
    if (variant == 1) s.o.tuning.window = ef::TuningSwitch::off;
    auto gpu = ef_test::make_recon_test_worker(s, ef::WorkerKind::gpu);
    gpu->keep_gradients_on_device(true);
    ef::ReconBatchTerms t;
    ef::ReconUpdate u;
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
                variant == 0 ? "window-resident passes" : "cuFFT, element-wise passes", 1e3 * secs, bytes / 1e9,
                bytes / secs / 1e9, 64 * secs);
    if (std::isfinite(t.loss_a)) return true;
    std::printf("!! loss not finite: %g\n", t.loss_a);
    return false;
}

/// Per-batch against deferred steps on the benchmark's batch: host time per batch.
bool bench_deferred() {
    const int batch = env_count("EF_RECON_BENCH_BATCH", 256);
    const int reps = env_count("EF_RECON_BENCH_REPS", 32);
    const ef_test::ReconSetup s = ef_test::make_ptycho_setup(128, 12, batch, 592);
    auto gpu = ef_test::make_recon_test_worker(s, ef::WorkerKind::gpu);
    gpu->keep_gradients_on_device(true);
    const int n = 128 * 128;
    std::vector<double> pos;
    ef::ReconDeferredResults r;
    bool ok = true;
    ef_test::run_steps(*gpu, s.batch, s.batch, 3, false, n, &pos);  // warm-up: plans, allocations
    ef_test::run_steps(*gpu, s.batch, s.batch, 3, true, n, &pos, &r);
    ok = ok && ef_test::deferred_gradients_ok(r, 3);
    for (const bool deferred : {false, true}) {
        const auto t0 = std::chrono::steady_clock::now();
        ef_test::run_steps(*gpu, s.batch, s.batch, reps, deferred, n, &pos, &r);
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
        std::printf("  recon batch %d x 12 x 128^2 (sub-pixel, probe and position gradients, Adam), %s steps: "
                    "%.3f ms per batch\n",
                    batch, deferred ? "deferred" : "per-batch", 1e3 * secs);
        if (deferred) ok = ok && ef_test::deferred_gradients_ok(r, reps);
    }
    if (!ok) std::printf("!! a deferred run lacks a positive gradient norm per batch\n");
    return ok;
}

}  // namespace

int main(int argc, char** argv) {
    const char* what = argc > 1 ? argv[1] : "all";
    const bool batch = std::strcmp(what, "all") == 0 || std::strcmp(what, "batch") == 0;
    const bool deferred = std::strcmp(what, "all") == 0 || std::strcmp(what, "deferred") == 0;
    if (!batch && !deferred) {
        std::fprintf(stderr, "usage: %s [batch|deferred]\n", argv[0]);
        return 2;
    }
    if (ef::cuda_device_count() == 0) {
        std::printf("no CUDA device visible: benchmark skipped\n");
        return 77;
    }
    std::printf("device 0: %s\n", ef::cuda_device_name(0).c_str());
    bool ok = true;
    if (batch) ok = bench_batch(0) && ok;
    if (batch) ok = bench_batch(1) && ok;
    if (deferred) ok = bench_deferred() && ok;
    return ok ? 0 : 1;
}

// SPDX-License-Identifier: MIT
// The same reconstruction steps on the CPU backend in float32 and in the float64 instantiation,
// independent of the thread count; the CUDA worker is compared with the CPU worker in
// tests/gpu/test_recon_gpu.cpp (skipped without a device; here only its clear refusal).
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include <ensemblefit/core/error.hpp>
#include <ensemblefit/recon/recon_worker.hpp>

#include "src/recon/probe_modes.hpp"
#include "tests/common/test_helpers.hpp"

using namespace ef;
using ef_test::adam_steps;
using ef_test::batch_gradients;
using ef_test::max_rel_diff;
using C = std::complex<double>;

namespace {

struct Setup {
    ReconWorkerOptions o;
    std::vector<float> patterns;
    std::vector<double> amp, phase;
    std::vector<C> probe;
    ReconBatch batch;
};

/// 20 positions (one at the object's corner, one clamped past its edge, one with a zero
/// pattern), 3 modes, dp x dp windows (32: over one CUDA block everywhere).
Setup make_setup(int dp = 32) {
    Setup s;
    s.o.h = dp;
    s.o.w = dp;
    s.o.modes = 3;
    s.o.obj_h = 38 + dp;
    s.o.obj_w = 34 + dp;
    s.o.subpixel = true;
    s.o.threads = 1;
    s.o.fft_measure = false;
    const int n = dp * dp, b = 20;
    const double c = (dp - 1) / 2.0;
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<double> u(0, 1);
    for (int i = 0; i < s.o.obj_h * s.o.obj_w; ++i) {
        s.amp.push_back(0.9 + 0.2 * u(rng));
        s.phase.push_back(0.6 * u(rng) - 0.3);
    }
    for (int k = 0; k < 3; ++k)
        for (int q = 0; q < n; ++q) {
            const double y = q / dp - c, x = q % dp - c;
            const double env = std::exp(-(x * x + y * y) / (40.0 * dp / 32)) * (k == 0 ? 10.0 : 2.0);
            s.probe.emplace_back(env * (1 + 0.2 * u(rng)), env * 0.2 * (u(rng) - 0.5));
        }
    for (int j = 0; j < b; ++j) {
        s.batch.pattern_of.push_back(b - 1 - j);  // not in storage order
        s.batch.positions.push_back(j == 0 ? 0.0 : j == 1 ? 8.0 + dp : 30.0 * u(rng));
        s.batch.positions.push_back(j == 0 ? 0.0 : j == 1 ? 3.3 + dp : 30.0 * u(rng));
    }
    for (int j = 0; j < b; ++j)
        for (int q = 0; q < n; ++q) s.patterns.push_back(j == 7 ? 0.0f : static_cast<float>(50.0 * u(rng) * u(rng)));
    return s;
}

std::unique_ptr<ReconWorker> make(const Setup& s, WorkerKind kind, bool dbl) {
    ReconWorkerOptions o = s.o;
    o.double_precision = dbl;
    auto w = make_recon_worker(kind, o);
    w->set_patterns(20, s.patterns.data());
    w->set_object(s.amp, s.phase);
    w->set_probe(s.probe);
    return w;
}

void compare_workers(ReconWorker& test, ReconWorker& ref, const ReconBatch& b, double grad_tol, double model_tol) {
    ReconBatchTerms tt, tr;
    const std::vector<double> gt = batch_gradients(test, b, tt), gr = batch_gradients(ref, b, tr);
    CHECK(tt.loss_a == Approx(tr.loss_a).epsilon(1e-5));
    CHECK(tt.loss_b == Approx(tr.loss_b).epsilon(1e-5));
    CHECK(max_rel_diff(gt, gr) < grad_tol);
    CHECK(max_rel_diff(tt.position_grad, tr.position_grad) < grad_tol);
    adam_steps(test, b, 10);
    adam_steps(ref, b, 10);
    std::vector<double> a0, a1, r0, r1;
    test.object(a0, a1);
    ref.object(r0, r1);
    CHECK(max_rel_diff(a0, r0) < model_tol);
    CHECK(max_rel_diff(a1, r1) < model_tol);
    const auto pt = test.probe(), pr = ref.probe();
    std::vector<double> vt, vr;
    for (size_t i = 0; i < pt.size(); ++i) {
        vt.push_back(std::abs(pt[i]));
        vr.push_back(std::abs(pr[i]));
    }
    CHECK(max_rel_diff(vt, vr) < model_tol);
}

}  // namespace

TEST_CASE("CPU float32 steps agree with the float64 instantiation", "[recon][backend]") {
    const Setup s = make_setup();
    auto f32 = make(s, WorkerKind::cpu, false);
    auto f64 = make(s, WorkerKind::cpu, true);
    // Gradients to float precision; after 10 Adam steps the models differ more where gradients
    // are tiny (Adam turns any gradient into a step of about lr): 5e-3 of the largest value.
    compare_workers(*f32, *f64, s.batch, 1e-4, 5e-3);
}

TEST_CASE("CPU gradients do not depend on the thread count", "[recon][backend]") {
    Setup s = make_setup();
    auto one = make(s, WorkerKind::cpu, false);
    s.o.threads = 3;
    auto two = make(s, WorkerKind::cpu, false);
    ReconBatchTerms t1, t2;
    const auto g1 = batch_gradients(*one, s.batch, t1), g2 = batch_gradients(*two, s.batch, t2);
    CHECK(std::memcmp(g1.data(), g2.data(), g1.size() * sizeof(double)) == 0);
    CHECK(t1.loss_a == t2.loss_a);
}

TEST_CASE("CPU window-resident passes = the FFTW sequence", "[recon][backend][window]") {
    // The sequence the GPU runs by default (one block per position, the window's FFTs in fast
    // memory), run by the CPU with tuning.window = on: another FFT, so equal to rounding. With 3
    // mode groups (tuning.window_groups), as the GPU splits a small batch's modes over blocks.
    for (const int dp : {32, 64})
        for (const bool subpixel : {true, false})
            for (const bool dbl : {false, true})
                for (const int groups : {1, 3}) {
                Setup s = make_setup(dp);
                s.o.subpixel = subpixel;
                s.o.threads = 2;
                auto plain = make(s, WorkerKind::cpu, dbl);
                s.o.tuning.window = TuningSwitch::on;
                s.o.tuning.window_groups = groups;
                auto window = make(s, WorkerKind::cpu, dbl);
                for (const bool probe : {true, false}) {
                    INFO("dp " << dp << ", subpixel " << subpixel << ", double " << dbl << ", groups " << groups
                               << ", probe gradient " << probe);
                    ReconBatchTerms tp = plain->gradients(s.batch, probe, true);
                    size_t count = 0;
                    const double* p = plain->gradient_buffer(probe, count);
                    const std::vector<double> gp(p, p + count);
                    ReconBatchTerms tw = window->gradients(s.batch, probe, true);
                    const double* w = window->gradient_buffer(probe, count);
                    const std::vector<double> gw(w, w + count);
                    const double tol = dbl ? 1e-12 : 2e-5;
                    const double dg = max_rel_diff(gw, gp);
                    const double dpos = max_rel_diff(tw.position_grad, tp.position_grad);
                    INFO("gradient rel diff " << dg << ", position gradient " << dpos);
                    CHECK(dg < tol);
                    CHECK(dpos < tol);
                    CHECK(tw.loss_a == Approx(tp.loss_a).epsilon(dbl ? 1e-12 : 1e-6));
                    CHECK(tw.loss_b == Approx(tp.loss_b).epsilon(dbl ? 1e-12 : 1e-6));
                    REQUIRE(tw.position_terms.size() == tp.position_terms.size());
                    CHECK(max_rel_diff(tw.position_terms, tp.position_terms) < (dbl ? 1e-12 : 1e-5));
                    if (subpixel)
                        CHECK(max_rel_diff(tp.position_grad, std::vector<double>(tp.position_grad.size(), 0.0)) > 0);
                }
                // and the same models after Adam steps
                adam_steps(*plain, s.batch, 5);
                adam_steps(*window, s.batch, 5);
                std::vector<double> a0, a1, r0, r1;
                window->object(a0, a1);
                plain->object(r0, r1);
                CHECK(max_rel_diff(a1, r1) < (dbl ? 1e-9 : 5e-3));
                // and the same probe
                const auto pw = window->probe(), pp = plain->probe();
                std::vector<double> vw, vp;
                for (size_t i = 0; i < pp.size(); ++i) {
                    vw.insert(vw.end(), {pw[i].real(), pw[i].imag()});
                    vp.insert(vp.end(), {pp[i].real(), pp[i].imag()});
                }
                CHECK(max_rel_diff(vw, vp) < (dbl ? 1e-9 : 5e-3));
                CHECK(max_rel_diff(vw, std::vector<double>(vw.size(), 0.0)) > 0);
            }
}

TEST_CASE("probe constraints on the worker (Gram matrix, mixing) = the host's", "[recon][backend]") {
    // The per-iteration path (probe_gram, hermitian_eigen, mix_probe_modes) against the host
    // functions on the downloaded probe (orthogonalize_modes, scale_probe_power).
    const Setup s = make_setup(32);
    const int K = 3, n = 32 * 32;
    for (const bool dbl : {false, true}) {
        auto w = make(s, WorkerKind::cpu, dbl);
        const std::vector<C> p0 = w->probe();
        const std::vector<C> gram = w->probe_gram();
        for (int k = 0; k < K; ++k)
            for (int l = 0; l < K; ++l) {
                C ref = 0;
                for (int q = 0; q < n; ++q) ref += std::conj(p0[static_cast<size_t>(k * n + q)]) * p0[static_cast<size_t>(l * n + q)];
                CHECK(std::abs(gram[static_cast<size_t>(k * K + l)] - ref) <= 1e-12 * std::abs(gram[0]));
            }
        std::vector<double> powers;
        std::vector<C> mix;
        recon::hermitian_eigen(gram, K, powers, mix);
        double trace = 0;
        for (int k = 0; k < K; ++k) trace += gram[static_cast<size_t>(k * (K + 1))].real();
        const double target = 123.0, f = std::sqrt(target / trace);
        for (C& z : mix) z *= f;
        w->mix_probe_modes(mix);
        std::vector<C> host = p0;
        const std::vector<double> host_powers = recon::orthogonalize_modes(host, K, n);
        recon::scale_probe_power(host, target);
        const std::vector<C> dev = w->probe();
        double d = 0, m = 0, power = 0;
        for (size_t i = 0; i < host.size(); ++i) {
            d = std::max(d, std::abs(dev[i] - host[i]));
            m = std::max(m, std::abs(host[i]));
            power += std::norm(dev[i]);
        }
        REQUIRE(powers.size() == host_powers.size());
        for (size_t k = 0; k < powers.size(); ++k) CHECK(powers[k] == Approx(host_powers[k]).epsilon(1e-12));
        CHECK(d <= (dbl ? 1e-12 : 1e-6) * m);
        CHECK(power == Approx(target).epsilon(dbl ? 1e-12 : 1e-6));
        // the new modes are orthogonal, by power
        const std::vector<C> g2 = w->probe_gram();
        CHECK(std::abs(g2[1]) <= (dbl ? 1e-12 : 1e-6) * g2[0].real());
        CHECK(g2[0].real() >= g2[4].real());
        CHECK(g2[4].real() >= g2[8].real());
    }
}

TEST_CASE("a GPU reconstruction worker without a device is refused clearly", "[recon][backend]") {
    const Setup s = make_setup();
    if (cuda_device_count() > 0) {
        WARN("a CUDA device is visible: the GPU comparison is in tests/gpu/test_recon_gpu.cpp");
        return;
    }
    try {
        make(s, WorkerKind::gpu, false);
        FAIL("a GPU worker without a device");
    } catch (const Error& e) {
        CHECK(e.code() == ExitCode::usage);
        const std::string m = e.what();
        CHECK((m.find("no CUDA device") != std::string::npos || m.find("without CUDA") != std::string::npos));
    }
}

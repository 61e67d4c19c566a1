// SPDX-License-Identifier: MIT
// The engine's side of streamed patterns (run.stream), on the CPU: a backend that streams
// (StreamingCpuBackend: the CPU backend plus the three streaming calls, gathering each batch's
// rows into one of three slots as the GPU's copy stream does) against the plain CPU backend,
// over several shuffled batches with Adam steps. The engine hands the kernels the slot and rows
// 0 .. b - 1 instead of the share and the batch's rows: the same bits must come out, on the
// window-resident passes (32 x 32), the transform-per-pass sequence and two slices. The GPU's
// copy stream itself is tests/gpu/test_recon_stream.cpp.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/recon/cpu_backend.hpp"
#include "kernels/recon/ptycho_engine.hpp"

using namespace ef::recon;
using Cd = std::complex<double>;

namespace {

/// The CPU backend with the streaming calls PtychoEngine looks for (its kStreams).
template <class T>
class StreamingCpuBackend : public CpuBackend<T> {
   public:
    using CpuBackend<T>::CpuBackend;
    bool stream_patterns(std::size_t pattern_bytes, std::size_t batch_bytes, std::size_t held_bytes) {
        decided_bytes = pattern_bytes;
        (void)batch_bytes;
        (void)held_bytes;
        return stream;
    }
    float* stream_host(std::size_t count) {
        host.assign(count, std::numeric_limits<float>::quiet_NaN());
        return host.data();
    }
    const float* stream_batch(const std::int64_t* rows, std::int64_t b, std::int64_t n) {
        std::vector<float>& s = slot[queued++ % 3];
        s.assign(static_cast<std::size_t>(b * n), std::numeric_limits<float>::quiet_NaN());
        for (std::int64_t j = 0; j < b; ++j)
            std::copy_n(host.data() + rows[j] * n, n, s.data() + j * n);
        return s.data();
    }
    void stream_wait() { ++waits; }

    bool stream = true;
    std::size_t decided_bytes = 0;
    std::vector<float> host, slot[3];
    int queued = 0, waits = 0;
};

struct StreamCase {
    PtychoDims d;
    EngineOptions o;
    ef::ReconTuning tuning;
    int count = 0;
    std::vector<float> patterns;
    std::vector<double> positions, p0, p1;
    std::vector<Cd> probe;
};

StreamCase make_case(int dp, int slices, bool window) {
    StreamCase c;
    c.d.h = c.d.w = dp;
    c.d.modes = 2;
    c.d.obj_h = c.d.obj_w = dp + 30;
    c.o.subpixel = true;
    c.o.slices = slices;
    c.o.slice_fresnel = slices > 1 ? 3.0 : 0.0;
    c.tuning.window = window ? ef::TuningSwitch::on : ef::TuningSwitch::off;
    c.count = 23;
    std::mt19937_64 rng(29);
    std::uniform_real_distribution<double> u(0, 1);
    for (int i = 0; i < slices * c.d.obj_h * c.d.obj_w; ++i) {
        c.p0.push_back(0.9 + 0.2 * u(rng));
        c.p1.push_back(0.4 * u(rng) - 0.2);
    }
    const int n = dp * dp;
    for (int k = 0; k < c.d.modes; ++k)
        for (int q = 0; q < n; ++q) {
            const double y = q / dp - dp / 2.0, x = q % dp - dp / 2.0;
            const double env = std::exp(-(x * x + y * y) / (dp * dp / 20.0)) * (k == 0 ? 5.0 : 1.0);
            c.probe.emplace_back(env * (1 + 0.2 * u(rng)), env * 0.2 * (u(rng) - 0.5));
        }
    for (int j = 0; j < 2 * c.count; ++j) c.positions.push_back(30.0 * u(rng));
    for (int i = 0; i < c.count * n; ++i) c.patterns.push_back(static_cast<float>(20.0 * u(rng) * u(rng)));
    return c;
}

struct EngineRun {
    std::vector<double> gradients, terms, position_grads, p0, p1;
    std::vector<Cd> probe;
};

/// Three iterations of shuffled batches of 7 (the last of 2): gradients, then Adam.
template <class Backend>
EngineRun run_engine(Backend& be, const StreamCase& c) {
    PtychoEngine<float, Backend> e(be, c.d, c.o);
    e.set_batch_hint(7);
    e.set_patterns(c.count, c.patterns.data());
    e.set_object(c.p0, c.p1);
    e.set_probe(c.probe);
    EngineRun r;
    ef::ReconUpdate u;
    u.probe = true;
    u.lr_p0 = u.lr_p1 = 1e-2;
    u.lr_probe = 0.05;
    std::vector<std::int64_t> rows(static_cast<std::size_t>(c.count));
    std::iota(rows.begin(), rows.end(), 0);
    std::mt19937_64 rng(3);
    for (int it = 0; it < 3; ++it) {
        if (it) std::shuffle(rows.begin(), rows.end(), rng);
        for (int b0 = 0; b0 < c.count; b0 += 7) {
            BatchSpec batch;
            for (int j = b0; j < std::min(c.count, b0 + 7); ++j) {
                const auto row = static_cast<std::size_t>(rows[static_cast<std::size_t>(j)]);
                batch.pattern_of.push_back(rows[static_cast<std::size_t>(j)]);
                batch.positions.push_back(c.positions[2 * row]);
                batch.positions.push_back(c.positions[2 * row + 1]);
            }
            const BatchTerms t = e.gradients(batch, true, true);
            r.gradients.insert(r.gradients.end(), e.host_gradients(), e.host_gradients() + e.gradient_size(true));
            r.terms.insert(r.terms.end(), t.position_terms.begin(), t.position_terms.end());
            r.position_grads.insert(r.position_grads.end(), t.position_grad.begin(), t.position_grad.end());
            double loss = 0;
            ptycho_loss_scale(LossKind::amplitude, t.loss_a, t.loss_b,
                              static_cast<double>(batch.pattern_of.size()) * static_cast<double>(c.d.n()), loss,
                              u.grad_scale);
            ++u.t_object;
            ++u.t_probe;
            e.update(u);
        }
    }
    e.object(r.p0, r.p1);
    r.probe = e.probe();
    return r;
}

void check_streamed_equals_resident(const StreamCase& c, bool expect_window) {
    CpuBackend<float> plain(c.d.h, c.d.w, 2, false, c.tuning);
    StreamingCpuBackend<float> streaming(c.d.h, c.d.w, 2, false, c.tuning);

    const EngineRun resident = run_engine(plain, c);
    const EngineRun streamed = run_engine(streaming, c);

    CHECK((plain.window_size(c.d) != 0) == expect_window);
    CHECK(streaming.decided_bytes == static_cast<std::size_t>(c.count) * c.d.n() * sizeof(float));
    CHECK(streaming.queued == 3 * 4);  // 3 iterations of 4 batches
    CHECK(streaming.waits == streaming.queued);
    REQUIRE(resident.gradients.size() == streamed.gradients.size());
    CHECK(resident.gradients == streamed.gradients);
    CHECK(resident.terms == streamed.terms);
    CHECK(resident.position_grads == streamed.position_grads);
    CHECK(resident.p0 == streamed.p0);
    CHECK(resident.p1 == streamed.p1);
    CHECK(resident.probe == streamed.probe);
    CHECK(std::any_of(resident.gradients.begin(), resident.gradients.end(), [](double g) { return g != 0; }));
}

}  // namespace

TEST_CASE("streamed patterns: the engine's results are the resident run's, bit for bit (CPU stand-in)",
          "[recon][stream]") {
    SECTION("window-resident passes, 32 x 32") { check_streamed_equals_resident(make_case(32, 1, true), true); }
    SECTION("transform-per-pass sequence") { check_streamed_equals_resident(make_case(16, 1, false), false); }
    SECTION("two slices") { check_streamed_equals_resident(make_case(16, 2, false), false); }
}

TEST_CASE("streamed patterns: a backend that keeps them resident is asked, and nothing is streamed",
          "[recon][stream]") {
    const StreamCase c = make_case(16, 1, false);
    StreamingCpuBackend<float> be(c.d.h, c.d.w, 1, false, c.tuning);
    be.stream = false;

    PtychoEngine<float, StreamingCpuBackend<float>> e(be, c.d, c.o);
    e.set_batch_hint(7);
    e.set_patterns(c.count, c.patterns.data());
    BatchSpec batch;
    batch.pattern_of = {4, 5, 6};
    batch.positions = {1, 2, 3, 4, 5, 6};
    e.set_object(c.p0, c.p1);
    e.set_probe(c.probe);
    e.gradients(batch, true, false);

    CHECK_FALSE(e.streamed());
    CHECK(be.decided_bytes > 0);
    CHECK(be.queued == 0);
    CHECK(be.waits == 0);
    CHECK(e.batch_bytes(7) > 7 * static_cast<std::size_t>(c.d.n()) * 8 * 2);  // at least psi_ and the shifted probes
}

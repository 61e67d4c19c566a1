// SPDX-License-Identifier: MIT
// The host-side pieces of the reconstruction: mini-batch schedule, shares, probe modes, FFTs,
// the phase error metric and the config loader.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <fstream>
#include <random>
#include <set>
#include <vector>

#include <catch2/catch.hpp>

#include <ensemblefit/core/error.hpp>
#include <ensemblefit/recon/recon_config.hpp>

#include "kernels/recon/cpu_backend.hpp"
#include "kernels/recon/ptycho_engine.hpp"
#include "src/recon/phase_error.hpp"
#include "src/recon/probe_modes.hpp"
#include "src/sched/batch_schedule.hpp"

using namespace ef::recon;
using ef::BatchSchedule;
using C = std::complex<double>;

TEST_CASE("batch schedule: every position once per iteration, independent of the rank split", "[recon]") {
    const std::int64_t N = 1003;
    BatchSchedule s(N, 64, 42);
    REQUIRE(s.strata() == 64);
    REQUIRE(s.batches_per_iteration() == 16);  // ceil(1003 / 64)

    s.start_iteration(3, 0, s.strata());
    std::vector<std::vector<std::int64_t>> whole;
    std::set<std::int64_t> seen;
    for (std::int64_t t = 0; t < s.batches_per_iteration(); ++t) {
        whole.push_back(s.members(t));
        for (auto p : whole.back()) CHECK(seen.insert(p).second);
    }
    CHECK(static_cast<std::int64_t>(seen.size()) == N);
    CHECK(whole[0].size() == 64);

    // Two "ranks" owning strata [0, 23) and [23, 64) see the same batches, split.
    BatchSchedule a(N, 64, 42), b(N, 64, 42);
    a.start_iteration(3, 0, 23);
    b.start_iteration(3, 23, 64);
    for (std::int64_t t = 0; t < s.batches_per_iteration(); ++t) {
        std::vector<std::int64_t> joined = a.members(t), tail = b.members(t);
        joined.insert(joined.end(), tail.begin(), tail.end());
        CHECK(joined == whole[static_cast<size_t>(t)]);
    }
    // Another iteration, another draw; the same iteration and seed, the same draw.
    s.start_iteration(4, 0, s.strata());
    CHECK(s.members(0) != whole[0]);
    s.start_iteration(3, 0, s.strata());
    CHECK(s.members(5) == whole[5]);
}

TEST_CASE("batch schedule: shares follow weights in whole strata", "[recon]") {
    CHECK(BatchSchedule::partition(64, {1.0, 3.0}) == std::vector<std::int64_t>{0, 16, 64});
    CHECK(BatchSchedule::partition(64, {0.0, 0.0}) == std::vector<std::int64_t>{0, 32, 64});
    CHECK(BatchSchedule::partition(10, {1.0, 1.0, 1.0}) == std::vector<std::int64_t>{0, 4, 7, 10});
    const auto tiny = BatchSchedule::partition(2, {1.0, 1.0, 1.0});
    CHECK(tiny.back() == 2);
    const auto skew = BatchSchedule::partition(256, {1.0, 100.0});
    CHECK(skew[1] >= 1);  // every rank keeps at least one stratum
    CHECK(skew[2] == 256);
}

TEST_CASE("hermitian eigen-decomposition and probe-mode orthogonalisation", "[recon]") {
    std::mt19937_64 rng(3);
    std::normal_distribution<double> g;
    const int K = 5;
    std::vector<C> a(K * K);
    for (int i = 0; i < K; ++i)
        for (int j = i; j < K; ++j) {
            const C z = i == j ? C(g(rng), 0) : C(g(rng), g(rng));
            a[i * K + j] = z;
            a[j * K + i] = std::conj(z);
        }
    std::vector<double> values;
    std::vector<C> v;
    hermitian_eigen(a, K, values, v);
    for (int m = 0; m + 1 < K; ++m) CHECK(values[m] >= values[m + 1]);
    for (int p = 0; p < K; ++p)
        for (int q = 0; q < K; ++q) {
            C vav = 0, vv = 0;
            for (int i = 0; i < K; ++i)
                for (int j = 0; j < K; ++j) vav += std::conj(v[i * K + p]) * a[i * K + j] * v[j * K + q];
            for (int i = 0; i < K; ++i) vv += std::conj(v[i * K + p]) * v[i * K + q];
            CHECK(std::abs(vav - (p == q ? values[p] : 0.0)) < 1e-10);
            CHECK(std::abs(vv - (p == q ? 1.0 : 0.0)) < 1e-12);
        }

    // Three correlated modes become orthogonal, sorted by power, total power kept.
    const int n = 50;
    std::vector<C> probe(3 * n);
    for (int q = 0; q < n; ++q) {
        const C base(g(rng), g(rng));
        probe[q] = base;
        probe[n + q] = 0.5 * base + C(g(rng), 0);
        probe[2 * n + q] = C(0, 0.3) * base + 0.2 * C(g(rng), g(rng));
    }
    double total = 0;
    for (const C& z : probe) total += std::norm(z);
    const std::vector<double> powers = orthogonalize_modes(probe, 3, n);
    double after = 0;
    for (const C& z : probe) after += std::norm(z);
    CHECK(after == Approx(total).epsilon(1e-12));
    CHECK(powers[0] >= powers[1]);
    CHECK(powers[1] >= powers[2]);
    for (int k = 0; k < 3; ++k)
        for (int l = 0; l < 3; ++l) {
            C dot = 0;
            for (int q = 0; q < n; ++q) dot += std::conj(probe[k * n + q]) * probe[l * n + q];
            CHECK(std::abs(dot - (k == l ? powers[k] : 0.0)) < 1e-9 * total);
        }
}

TEST_CASE("extra probe modes get the asked power and are orthogonal", "[recon]") {
    const int h = 16, w = 16, n = h * w;
    std::vector<double> mean(n, 0.0);
    for (int u = 0; u < h; ++u)
        for (int v = 0; v < w; ++v) {
            const int ku = u <= h / 2 ? u : h - u, kv = v <= w / 2 ? v : w - v;
            mean[u * w + v] = ku * ku + kv * kv <= 9 ? 100.0 : 0.0;
        }
    std::vector<C> probe = probe_from_mean_pattern(mean, h, w);
    double p0 = 0;
    for (const C& z : probe) p0 += std::norm(z);
    double sum_mean = 0;
    for (double m : mean) sum_mean += m;
    CHECK(p0 == Approx(sum_mean).epsilon(1e-9));  // unitary: the probe carries the mean pattern's power
    // Its intensity peaks at the window centre.
    const auto peak = std::max_element(probe.begin(), probe.end(), [](C a, C b) { return std::abs(a) < std::abs(b); });
    CHECK((peak - probe.begin()) == (h / 2) * w + w / 2);

    add_probe_modes(probe, 1, 4, h, w, 0.05, 1000.0);
    REQUIRE(probe.size() == size_t(4 * n));
    std::vector<double> power(4, 0.0);
    for (int k = 0; k < 4; ++k)
        for (int q = 0; q < n; ++q) power[k] += std::norm(probe[k * n + q]);
    CHECK(power[0] == Approx(850.0));
    for (int k = 1; k < 4; ++k) CHECK(power[k] == Approx(50.0));
    for (int k = 0; k < 4; ++k)
        for (int l = k + 1; l < 4; ++l) {
            C dot = 0;
            for (int q = 0; q < n; ++q) dot += std::conj(probe[k * n + q]) * probe[l * n + q];
            CHECK(std::abs(dot) < 1e-9 * 1000.0);
        }
}

TEST_CASE("CPU batched FFTs match a direct DFT", "[recon]") {
    for (auto [h, w] : {std::pair{8, 12}, std::pair{6, 5}, std::pair{16, 16}}) {
        const int n = h * w, count = 3;
        std::mt19937_64 rng(static_cast<unsigned>(h * 100 + w));
        std::normal_distribution<double> g;
        std::vector<Cx<double>> data(static_cast<size_t>(count * n));
        for (auto& z : data) z = {g(rng), g(rng)};
        const std::vector<Cx<double>> input = data;
        CpuFft<double> fft(h, w, 2, false);
        for (bool inverse : {false, true}) {
            data = input;
            fft.run(data.data(), count, inverse);
            double worst = 0;
            for (int t = 0; t < count; ++t)
                for (int ky = 0; ky < h; ++ky)
                    for (int kx = 0; kx < w; ++kx) {
                        C s = 0;
                        for (int y = 0; y < h; ++y)
                            for (int x = 0; x < w; ++x) {
                                const Cx<double> z = input[static_cast<size_t>(t * n + y * w + x)];
                                s += C(z.re, z.im) * std::polar(1.0, (inverse ? 2 : -2) * M_PI *
                                                                         (double(ky * y) / h + double(kx * x) / w));
                            }
                        const Cx<double> got = data[static_cast<size_t>(t * n + ky * w + kx)];
                        worst = std::max(worst, std::abs(C(got.re, got.im) - s));
                    }
            INFO(h << " x " << w << (inverse ? " inverse" : " forward"));
            CHECK(worst < 1e-10);
        }
    }
}

TEST_CASE("window positions split into crop and sub-pixel shift, clamped to the object", "[recon]") {
    int crop = 0;
    double shift = 0;
    split_position(3.4, 8, 20, crop, shift);
    CHECK(crop == 3);
    CHECK(shift == Approx(0.4));
    split_position(3.6, 8, 20, crop, shift);
    CHECK(crop == 4);
    CHECK(shift == Approx(-0.4));
    split_position(13.2, 8, 20, crop, shift);  // beyond 20 - 8: clamped, remainder kept
    CHECK(crop == 12);
    CHECK(shift == Approx(1.2));
}

TEST_CASE("phase error removes offset and ramp", "[recon]") {
    const int H = 40, W = 50;
    std::mt19937_64 rng(9);
    std::normal_distribution<double> g;
    std::vector<C> truth(H * W), rec(H * W);
    double sum = 0, sum2 = 0;
    int cnt = 0;
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
            const double ph = 0.4 * std::sin(0.3 * x) * std::cos(0.2 * y);
            truth[y * W + x] = std::polar(1.0, ph);
            rec[y * W + x] = std::polar(0.9, ph + 2.5 + 0.01 * y - 0.02 * x + 0.003 * g(rng));
            if (y >= 5 && y < 35 && x >= 5 && x < 45) {
                sum += ph;
                sum2 += ph * ph;
                ++cnt;
            }
        }
    const double sd = std::sqrt(sum2 / cnt - (sum / cnt) * (sum / cnt));
    const PhaseError e = phase_error(rec, truth, W, 5, 35, 5, 45);
    CHECK(e.pixels == 30 * 40);
    CHECK(e.rmse == Approx(0.003).epsilon(0.1));
    CHECK(e.nrmse == Approx(0.003 / sd).epsilon(0.1));
}

namespace {
std::string write_temp(const std::string& name, const std::string& text) {
    const std::string path = "/tmp/ef_recon_test_" + name;
    std::ofstream(path) << text;
    return path;
}
}  // namespace

TEST_CASE("reconstruct config: defaults, overrides, errors naming file and line", "[recon][config]") {
    const std::string path = write_temp("ok.ini",
                                        "[data]\nfile = d.h5\n[model]\nmodes = 3\n[solver]\niterations = 7\n"
                                        "loss = poisson\n[output]\nfile = out.h5\n");
    const ef::ReconConfig c = ef::load_recon_config(path, {"--solver.iterations=9", "--probe.lr=0.5", "--probe.lr=0.25"});
    CHECK(c.data_file == "/tmp/d.h5");  // relative to the config's folder
    CHECK(c.modes == 3);
    CHECK(c.iterations == 9);
    CHECK(c.loss == "poisson");
    CHECK(c.lr_probe == 0.25);  // the last override wins
    CHECK(c.batch_size == 0);  // auto: resolved from the positions (resolve_batch_size)
    CHECK(c.decay_start == 1);
    CHECK(c.where("solver.loss") == path + ":7: solver.loss");

    const std::string bad_key = write_temp("bad_key.ini", "[data]\nfile = d.h5\n[solver]\niterashuns = 3\n");
    try {
        ef::load_recon_config(bad_key, {});
        FAIL("no error");
    } catch (const ef::Error& e) {
        CHECK(e.code() == ef::ExitCode::usage);
        CHECK(std::string(e.what()).find(":4: unknown key 'iterashuns' in [solver]") != std::string::npos);
    }
    const std::string bad_value = write_temp("bad_value.ini", "[data]\nfile = d.h5\n[solver]\nloss = gauss\n[output]\nfile = o.h5\n");
    try {
        ef::load_recon_config(bad_value, {});
        FAIL("no error");
    } catch (const ef::Error& e) {
        CHECK(std::string(e.what()).find(":4: solver.loss: unknown value 'gauss' (allowed: amplitude, poisson)") !=
              std::string::npos);
    }
    CHECK_THROWS_AS(ef::load_recon_config(path, {"--solver.nope=1"}), ef::Error);
    CHECK_THROWS_AS(ef::load_recon_config(path, {"--model.modes=0"}), ef::Error);
    std::remove(path.c_str());
    std::remove(bad_key.c_str());
    std::remove(bad_value.c_str());
}

TEST_CASE("reconstruct config: data.scan_step in object pixels or as a length", "[recon][config]") {
    const std::string path = write_temp("step.ini", "[data]\nfile = d.raw\nscan_shape = 4,5\n[output]\nfile = out.h5\n");
    const auto step = [&](const std::string& v) { return ef::load_recon_config(path, {"--data.scan_step=" + v}).input.scan; };
    const ef::ScanGeometry px = step("2.5,3");
    CHECK(px.step_y == 2.5);
    CHECK(px.step_x == 3);
    CHECK(px.step_length_y == 0);
    for (const char* v : {"0.43 A", "0.043 nm", "43 pm", "4.3e-11 m", "0.43 \u00c5", "0.43,0.43 A"}) {
        const ef::ScanGeometry s = step(v);
        CHECK(s.step_y == 0);  // in pixels once the data say how large a pixel is (open_recon_dataset)
        CHECK(s.step_length_y == Approx(4.3e-11).epsilon(1e-12));
        CHECK(s.step_length_x == Approx(4.3e-11).epsilon(1e-12));
    }
    const ef::ScanGeometry two = step("1, 2 nm");
    CHECK(two.step_length_y == Approx(1e-9));
    CHECK(two.step_length_x == Approx(2e-9));
    for (const auto& [v, says] : std::vector<std::pair<std::string, std::string>>{
             {"3 furlongs", "unknown unit 'furlongs'"}, {"-1 A", "steps must be > 0"}, {"2 m", "below 1 m"},
             {"1,2,3 nm", "expected 1 to 2 comma-separated numbers"}, {"0", "steps must be > 0"}, {"A", "expected a number"}}) {
        try {
            step(v);
            FAIL("no error for " + v);
        } catch (const ef::Error& e) {
            CHECK(e.code() == ef::ExitCode::usage);
            INFO(e.what());
            CHECK(std::string(e.what()).find("--data.scan_step") != std::string::npos);
            CHECK(std::string(e.what()).find(says) != std::string::npos);
        }
    }
    // Lengths with a unit: the object pixel, a slice's thickness, a wavelength (plain numbers: metres).
    const ef::ReconConfig u = ef::load_recon_config(
        path, {"--data.pixel_size=0.1494 A", "--model.slice_thickness=2 nm", "--model.wavelength=4.18e-12",
               "--model.slices=2", "--data.scan_step=1"});
    CHECK(u.pixel_size == Approx(1.494e-11).epsilon(1e-12));
    CHECK(u.slice_thickness == Approx(2e-9).epsilon(1e-12));
    CHECK(u.wavelength == 4.18e-12);
    CHECK_THROWS_WITH(ef::load_recon_config(path, {"--data.pixel_size=3 px", "--data.scan_step=1"}), Catch::Contains("not px"));
    CHECK_THROWS_WITH(ef::load_recon_config(path, {"--model.slice_thickness=2 parsec", "--data.scan_step=1"}),
                      Catch::Contains("unknown unit 'parsec'"));
    std::remove(path.c_str());
}

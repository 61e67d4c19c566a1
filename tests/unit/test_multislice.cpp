// SPDX-License-Identifier: MIT
// Multislice (kernels/recon/multislice_math.hpp): the propagation against a direct DFT of the
// angular-spectrum formula, and the analytic gradients of every object slice and of the probe
// against central finite differences, in the double instantiation of the same engine.
#include <algorithm>
#include <cmath>
#include <complex>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/recon/cpu_backend.hpp"
#include "kernels/recon/ptycho_engine.hpp"

using namespace ef::recon;
using Cd = std::complex<double>;

namespace {

constexpr double kPi = 3.141592653589793238462643;

/// The 2-D DFT of an h x w array (sign -1 forward, +1 inverse; unnormalised), directly.
std::vector<Cd> dft(const std::vector<Cd>& a, int h, int w, int sign) {
    std::vector<Cd> out(a.size());
    for (int u = 0; u < h; ++u)
        for (int v = 0; v < w; ++v) {
            Cd s = 0;
            for (int y = 0; y < h; ++y)
                for (int x = 0; x < w; ++x)
                    s += a[static_cast<size_t>(y * w + x)] *
                         std::polar(1.0, sign * 2 * kPi * (static_cast<double>(u * y) / h + static_cast<double>(v * x) / w));
            out[static_cast<size_t>(u * w + v)] = s;
        }
    return out;
}

double freq(int u, int n) { return static_cast<double>(u <= (n - 1) / 2 ? u : u - n) / n; }

struct Problem {
    PtychoDims d;
    int slices = 3;
    double fresnel = 3.0;
    std::vector<double> p0, p1;  // slices x obj_n
    std::vector<Cd> probe;
    std::vector<double> positions;
};

/// 3 slices with different structure, 2 probe modes, 3 positions with sub-pixel remainders
/// away from +-0.5 (a finite-difference step must not move a crop).
Problem make_problem(bool amplitude_phase) {
    Problem p;
    p.d.h = 16;
    p.d.w = 12;
    p.d.modes = 2;
    p.d.obj_h = 28;
    p.d.obj_w = 26;
    std::mt19937_64 rng(17);
    std::uniform_real_distribution<double> u(-1, 1);
    const size_t on = static_cast<size_t>(p.d.obj_n()) * static_cast<size_t>(p.slices);
    for (size_t i = 0; i < on; ++i) {
        const double a = 1.0 + 0.2 * u(rng), ph = 0.5 * u(rng);
        p.p0.push_back(amplitude_phase ? a : a * std::cos(ph));
        p.p1.push_back(amplitude_phase ? ph : a * std::sin(ph));
    }
    const int n = p.d.h * p.d.w;
    for (int k = 0; k < p.d.modes; ++k)
        for (int q = 0; q < n; ++q) {
            const double y = q / p.d.w - 7.5, x = q % p.d.w - 5.5;
            const double env = std::exp(-(x * x + y * y) / 20.0) * (k == 0 ? 3.0 : 1.0);
            p.probe.emplace_back(env * (1 + 0.3 * u(rng)), env * 0.3 * u(rng));
        }
    p.positions = {3.3, 5.2, 7.8, 2.1, 10.4, 12.7};
    return p;
}

using Engine = PtychoEngine<double, CpuBackend<double>>;

EngineOptions options(const Problem& p, LossKind loss, bool amplitude_phase, bool subpixel) {
    EngineOptions o;
    o.loss = loss;
    o.amplitude_phase = amplitude_phase;
    o.subpixel = subpixel;
    o.slices = p.slices;
    o.slice_fresnel = p.fresnel;
    return o;
}

double loss_of(Engine& e, const Problem& p, const BatchSpec& batch, LossKind loss, BatchTerms* terms = nullptr) {
    const BatchTerms t = e.gradients(batch, false, false);
    double value = 0, scale = 0;
    ptycho_loss_scale(loss, t.loss_a, t.loss_b, static_cast<double>(batch.pattern_of.size()) * double(p.d.n()), value,
                      scale);
    if (terms) *terms = t;
    return value;
}

void check_gradients(LossKind loss, bool amplitude_phase, bool subpixel) {
    Problem p = make_problem(amplitude_phase);
    CpuBackend<double> be(p.d.h, p.d.w, 1, false);
    Engine e(be, p.d, options(p, loss, amplitude_phase, subpixel));
    e.set_object(p.p0, p.p1);
    e.set_probe(p.probe);
    BatchSpec batch;
    batch.pattern_of = {0, 1, 2};
    batch.positions = p.positions;
    const std::vector<double> model = e.model_intensity(batch);
    std::mt19937_64 rng(11);
    std::uniform_real_distribution<double> u(0.6, 1.4);
    std::vector<float> patterns;
    for (double v : model) patterns.push_back(static_cast<float>(v * u(rng)));
    e.set_patterns(3, patterns.data());

    const BatchTerms t = e.gradients(batch, true, subpixel);
    double value = 0, c = 0;
    ptycho_loss_scale(loss, t.loss_a, t.loss_b, 3.0 * double(p.d.n()), value, c);
    const size_t on = p.p0.size();
    REQUIRE(e.gradient_size(false) == 2 * on);
    std::vector<double> grad = e.parameter_gradients(false);
    for (double& g : grad) g *= c;
    for (const Cd& z : e.probe_gradient()) {
        grad.push_back(c * z.real());
        grad.push_back(c * z.imag());
    }
    std::vector<double> pos_grad = t.position_grad;
    for (double& g : pos_grad) g *= c;
    double gmax = 0;
    for (double g : grad) gmax = std::max(gmax, std::abs(g));
    const double h = 1e-6;
    int checked = 0;
    double worst = 0;
    auto compare = [&](double analytic, double numeric, double floor) {
        const double err = std::abs(analytic - numeric) / std::max({std::abs(analytic), std::abs(numeric), floor});
        worst = std::max(worst, err);
        ++checked;
        INFO("analytic " << analytic << " numeric " << numeric);
        CHECK(err < 1e-4);
    };
    // Object parameters of every slice, under the windows and outside them (gradient 0 there).
    const size_t sn = static_cast<size_t>(p.d.obj_n());
    for (size_t s = 0; s < static_cast<size_t>(p.slices); ++s)
        for (size_t pix : {size_t(9 * 26 + 10), size_t(12 * 26 + 14), size_t(18 * 26 + 20), size_t(0)})
            for (int which = 0; which < 2; ++which) {
                const size_t i = s * sn + pix;
                std::vector<double> a = p.p0, b = p.p1;
                auto& v = which == 0 ? a : b;
                v[i] += h;
                e.set_object(a, b);
                const double lp = loss_of(e, p, batch, loss);
                v[i] -= 2 * h;
                e.set_object(a, b);
                const double lm = loss_of(e, p, batch, loss);
                compare(grad[static_cast<size_t>(which) * on + i], (lp - lm) / (2 * h), 1e-3 * gmax);
            }
    e.set_object(p.p0, p.p1);
    for (size_t q : {size_t(7 * 12 + 5), size_t(8 * 12 + 6), size_t(192 + 7 * 12 + 4), size_t(0)})
        for (int part = 0; part < 2; ++part) {
            auto pr = p.probe;
            const Cd dz = part == 0 ? Cd(h, 0) : Cd(0, h);
            pr[q] += dz;
            e.set_probe(pr);
            const double lp = loss_of(e, p, batch, loss);
            pr[q] -= 2.0 * dz;
            e.set_probe(pr);
            const double lm = loss_of(e, p, batch, loss);
            compare(grad[2 * on + 2 * q + static_cast<size_t>(part)], (lp - lm) / (2 * h), 1e-3 * gmax);
        }
    e.set_probe(p.probe);
    if (subpixel) {
        double pmax = 0;
        for (double g : pos_grad) pmax = std::max(pmax, std::abs(g));
        for (size_t k = 0; k < p.positions.size(); ++k) {
            BatchSpec bp = batch;
            bp.positions[k] += h;
            const double lp = loss_of(e, p, bp, loss);
            bp.positions[k] -= 2 * h;
            const double lm = loss_of(e, p, bp, loss);
            compare(pos_grad[k], (lp - lm) / (2 * h), 1e-3 * pmax);
        }
    }
    INFO("checked " << checked << ", worst relative error " << worst);
    CHECK(checked == 3 * 4 * 2 + 4 * 2 + (subpixel ? 6 : 0));
    // The gradients of slices 1 and 2 are not a copy of slice 0's: each slice is its own.
    CHECK(std::abs(grad[9 * 26 + 10] - grad[sn + 9 * 26 + 10]) > 1e-6 * gmax);
}

}  // namespace

TEST_CASE("multislice propagator is the band-limited angular spectrum formula", "[recon][multislice]") {
    const int h = 10, w = 8;
    const double fresnel = 2.7;
    const std::vector<Cx<double>> table = fresnel_propagator<double>(h, w, fresnel);

    int inside = 0;
    for (int u = 0; u < h; ++u)
        for (int v = 0; v < w; ++v) {
            const double f2 = freq(u, h) * freq(u, h) + freq(v, w) * freq(v, w);
            const Cx<double> z = table[static_cast<size_t>(u * w + v)];
            const Cd want = f2 <= 1.0 / 9.0 ? std::polar(1.0 / (h * w), -kPi * fresnel * f2) : Cd(0);
            CHECK(std::abs(Cd(z.re, z.im) - want) < 1e-15);
            inside += f2 <= 1.0 / 9.0;
        }
    CHECK(inside > 10);
    CHECK(inside < h * w);  // the band limit cuts the corners
}

TEST_CASE("multislice forward model: empty slices propagate the probe as one Fresnel step", "[recon][multislice]") {
    // A 3-slice object whose slices are all 1 (and a band-limited probe): the exit wave is the
    // probe propagated over 2 slices, i.e. F^-1[H^2 F[P]], computed here by direct DFTs.
    PtychoDims d;
    d.h = 10;
    d.w = 8;
    d.modes = 1;
    d.obj_h = 14;
    d.obj_w = 12;
    EngineOptions o;
    o.subpixel = false;
    o.slices = 3;
    o.slice_fresnel = 1.9;
    CpuBackend<double> be(d.h, d.w, 1, false);
    Engine e(be, d, o);
    const size_t on = static_cast<size_t>(3 * d.obj_n());
    e.set_object(std::vector<double>(on, 1.0), std::vector<double>(on, 0.0));
    std::vector<Cd> spec(static_cast<size_t>(d.n()), 0.0);
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<double> u(-1, 1);
    for (int a = 0; a < d.h; ++a)
        for (int b = 0; b < d.w; ++b)
            if (std::hypot(freq(a, d.h), freq(b, d.w)) < 0.3) spec[static_cast<size_t>(a * d.w + b)] = Cd(u(rng), u(rng));
    std::vector<Cd> probe = dft(spec, d.h, d.w, +1);
    e.set_probe(probe);
    BatchSpec batch;
    batch.pattern_of = {0};
    batch.positions = {2, 3};

    const std::vector<double> inten = e.model_intensity(batch);

    // Expected far field: F_ortho[F^-1[H^2 F[P]]] = H^2 F[P] / sqrt(n), intensity |.|^2.
    const double n = d.n();
    double worst = 0, total = 0;
    const std::vector<Cd> fp = dft(probe, d.h, d.w, -1);
    for (int a = 0; a < d.h; ++a)
        for (int b = 0; b < d.w; ++b) {
            const double f2 = freq(a, d.h) * freq(a, d.h) + freq(b, d.w) * freq(b, d.w);
            const Cd hq = f2 <= 1.0 / 9.0 ? std::polar(1.0, -kPi * o.slice_fresnel * f2) : Cd(0);
            const double want = std::norm(hq * hq * fp[static_cast<size_t>(a * d.w + b)]) / n;
            worst = std::max(worst, std::abs(inten[static_cast<size_t>(a * d.w + b)] - want));
            total += want;
        }
    CHECK(total > 1);
    CHECK(worst < 1e-12 * total);
    // ... and the phase matters: with a phase slice in the middle, propagation changes the pattern.
    std::vector<double> ph(on, 0.0);
    for (size_t i = static_cast<size_t>(d.obj_n()); i < 2 * static_cast<size_t>(d.obj_n()); ++i) ph[i] = 0.3 * u(rng);
    e.set_object(std::vector<double>(on, 1.0), ph);
    const std::vector<double> with_phase = e.model_intensity(batch);
    double diff = 0;
    for (size_t i = 0; i < inten.size(); ++i) diff = std::max(diff, std::abs(with_phase[i] - inten[i]));
    CHECK(diff > 1e-3 * total);
}

TEST_CASE("multislice gradients match finite differences: amplitude loss, amplitude/phase, sub-pixel",
          "[recon][multislice][gradient]") {
    check_gradients(LossKind::amplitude, true, true);
}
TEST_CASE("multislice gradients match finite differences: Poisson loss, complex object, integer shifts",
          "[recon][multislice][gradient]") {
    check_gradients(LossKind::poisson, false, false);
}

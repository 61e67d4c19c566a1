// SPDX-License-Identifier: MIT
// Analytic (Wirtinger) gradients of the ptychography losses against central finite
// differences, in a double instantiation of the same engine and functors the float runs use.
#include <algorithm>
#include <cmath>
#include <complex>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/recon/cpu_backend.hpp"
#include "kernels/recon/ptycho_engine.hpp"

using namespace ef::recon;

namespace {

struct Problem {
    PtychoDims d;
    std::vector<double> p0, p1;
    std::vector<std::complex<double>> probe;
    std::vector<double> positions;
    std::vector<float> patterns;
};

/// 3 positions with sub-pixel remainders away from +-0.5 (a finite-difference step must not
/// move a crop), a 2-mode probe, an object with structure, patterns near the model's.
Problem make_problem(bool amplitude_phase) {
    Problem p;
    p.d.h = 16;
    p.d.w = 12;
    p.d.modes = 2;
    p.d.obj_h = 28;
    p.d.obj_w = 26;
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> u(-1, 1);
    const size_t on = static_cast<size_t>(p.d.obj_n());
    for (size_t i = 0; i < on; ++i) {
        const double a = 1.0 + 0.2 * u(rng), ph = 0.5 * u(rng);
        if (amplitude_phase) {
            p.p0.push_back(a);
            p.p1.push_back(ph);
        } else {
            p.p0.push_back(a * std::cos(ph));
            p.p1.push_back(a * std::sin(ph));
        }
    }
    const int n = p.d.h * p.d.w;
    for (int k = 0; k < p.d.modes; ++k)
        for (int q = 0; q < n; ++q) {
            const double y = q / p.d.w - 7.5, x = q % p.d.w - 5.5;
            const double env = std::exp(-(x * x + y * y) / 20.0) * (k == 0 ? 3.0 : 1.0);
            p.probe.emplace_back(env * (1 + 0.3 * u(rng)), env * 0.3 * u(rng));
        }
    p.positions = {3.3, 5.2, 7.8, 2.1, 10.4, 12.7};  // one crop per position, remainders 0.1 .. 0.3
    return p;
}

template <class Engine>
double evaluate(Engine& e, const Problem& p, const BatchSpec& batch, LossKind loss, bool probe_grad,
                bool pos_grad, BatchTerms* terms_out = nullptr) {
    const BatchTerms t = e.gradients(batch, probe_grad, pos_grad);
    double value = 0, scale = 0;
    ptycho_loss_scale(loss, t.loss_a, t.loss_b, static_cast<double>(batch.pattern_of.size()) * double(p.d.n()), value,
                      scale);
    if (terms_out) *terms_out = t;
    return value;
}

struct Tolerance {
    int checked = 0;
    double worst = 0;
};

void compare(double analytic, double numeric, double floor, Tolerance& tol) {
    const double err = std::abs(analytic - numeric) / std::max({std::abs(analytic), std::abs(numeric), floor});
    tol.worst = std::max(tol.worst, err);
    ++tol.checked;
    INFO("analytic " << analytic << " numeric " << numeric);
    CHECK(err < 1e-4);
}

void check_gradients(LossKind loss, bool amplitude_phase, bool subpixel) {
    Problem p = make_problem(amplitude_phase);
    EngineOptions o;
    o.loss = loss;
    o.amplitude_phase = amplitude_phase;
    o.subpixel = subpixel;
    CpuBackend<double> be(p.d.h, p.d.w, 1, false);
    PtychoEngine<double, CpuBackend<double>> e(be, p.d, o);
    e.set_object(p.p0, p.p1);
    e.set_probe(p.probe);
    BatchSpec batch;
    batch.pattern_of = {0, 1, 2};
    batch.positions = p.positions;
    // Patterns: the model's own intensity, perturbed, so that the loss and gradients are not 0.
    const std::vector<double> model = e.model_intensity(batch);
    std::mt19937_64 rng(11);
    std::uniform_real_distribution<double> u(0.6, 1.4);
    for (double v : model) p.patterns.push_back(static_cast<float>(v * u(rng)));
    e.set_patterns(3, p.patterns.data());

    BatchTerms terms;
    const double l0 = evaluate(e, p, batch, loss, true, subpixel, &terms);
    double value = 0, c = 0;
    ptycho_loss_scale(loss, terms.loss_a, terms.loss_b, 3.0 * double(p.d.n()), value, c);
    REQUIRE(std::abs(l0) > 0);  // the Poisson loss may be negative
    const size_t on = static_cast<size_t>(p.d.obj_n());
    std::vector<double> grad = e.parameter_gradients(false);
    for (double& g : grad) g *= c;
    for (const std::complex<double>& z : e.probe_gradient()) {  // real space also with sub-pixel shifts
        grad.push_back(c * z.real());
        grad.push_back(c * z.imag());
    }
    std::vector<double> pos_grad = terms.position_grad;
    for (double& g : pos_grad) g *= c;
    const double gmax = *std::max_element(grad.begin(), grad.end(), [](double a, double b) { return std::abs(a) < std::abs(b); });
    const double floor = 1e-3 * std::abs(gmax);
    const double h = 1e-6;
    Tolerance tol;

    // Object parameters at pixels under the windows and outside them (gradient 0 there).
    for (size_t i : {size_t(5 * 26 + 7), size_t(9 * 26 + 10), size_t(12 * 26 + 14), size_t(18 * 26 + 20),
                     size_t(27 * 26 + 25), size_t(0)}) {
        for (int which = 0; which < 2; ++which) {
            std::vector<double> a = p.p0, b = p.p1;
            auto& v = which == 0 ? a : b;
            v[i] += h;
            e.set_object(a, b);
            const double lp = evaluate(e, p, batch, loss, false, false);
            v[i] -= 2 * h;
            e.set_object(a, b);
            const double lm = evaluate(e, p, batch, loss, false, false);
            compare(grad[which * on + i], (lp - lm) / (2 * h), floor, tol);
        }
    }
    e.set_object(p.p0, p.p1);
    // Probe real and imaginary parts, both modes.
    for (size_t q : {size_t(0), size_t(7 * 12 + 5), size_t(8 * 12 + 6), size_t(192 + 7 * 12 + 4), size_t(192 + 3 * 12 + 9)}) {
        for (int part = 0; part < 2; ++part) {
            auto pr = p.probe;
            const std::complex<double> dz = part == 0 ? std::complex<double>(h, 0) : std::complex<double>(0, h);
            pr[q] += dz;
            e.set_probe(pr);
            const double lp = evaluate(e, p, batch, loss, false, false);
            pr[q] -= 2.0 * dz;
            e.set_probe(pr);
            const double lm = evaluate(e, p, batch, loss, false, false);
            compare(grad[2 * on + 2 * q + static_cast<size_t>(part)], (lp - lm) / (2 * h), floor, tol);
        }
    }
    e.set_probe(p.probe);
    // Positions (only through the sub-pixel shift).
    if (subpixel) {
        double pmax = 0;
        for (double g : pos_grad) pmax = std::max(pmax, std::abs(g));
        for (size_t k = 0; k < p.positions.size(); ++k) {
            BatchSpec bp = batch;
            bp.positions[k] += h;
            const double lp = evaluate(e, p, bp, loss, false, false);
            bp.positions[k] -= 2 * h;
            const double lm = evaluate(e, p, bp, loss, false, false);
            compare(pos_grad[k], (lp - lm) / (2 * h), 1e-3 * pmax, tol);
        }
    }
    INFO("checked " << tol.checked << ", worst relative error " << tol.worst);
    CHECK(tol.checked == (subpixel ? 28 : 22));
}

}  // namespace

TEST_CASE("ptycho gradients match finite differences: amplitude loss, amplitude/phase, sub-pixel",
          "[recon][gradient]") {
    check_gradients(LossKind::amplitude, true, true);
}
TEST_CASE("ptycho gradients match finite differences: amplitude loss, complex object, integer shifts",
          "[recon][gradient]") {
    check_gradients(LossKind::amplitude, false, false);
}
TEST_CASE("ptycho gradients match finite differences: Poisson loss, amplitude/phase, sub-pixel",
          "[recon][gradient]") {
    check_gradients(LossKind::poisson, true, true);
}
TEST_CASE("ptycho gradients match finite differences: Poisson loss, complex object, integer shifts",
          "[recon][gradient]") {
    check_gradients(LossKind::poisson, false, false);
}

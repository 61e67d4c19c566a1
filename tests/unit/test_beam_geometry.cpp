// SPDX-License-Identifier: MIT
// The run's geometry in physical units (issue 38): electron wavelengths, the object pixel from
// the detector's angle, what follows from them, the bright-disc check, the beam probe's
// sign convention, and the position schedule's automatic values.
#include <cmath>
#include <complex>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <ensemblefit/recon/ptycho_dataset.hpp>
#include <ensemblefit/recon/recon_config.hpp>

#include "src/recon/beam_geometry.hpp"
#include "src/recon/step_defaults.hpp"

using namespace ef::recon;

TEST_CASE("electron wavelength: the relativistic values of the textbooks", "[recon][units]") {
    // The tabulated values (pm): 80 kV 4.1757, 200 kV 2.5079, 300 kV 1.9687.
    CHECK(electron_wavelength(80) * 1e12 == Approx(4.1757).epsilon(1e-4));
    CHECK(electron_wavelength(200) * 1e12 == Approx(2.5079).epsilon(1e-4));
    CHECK(electron_wavelength(300) * 1e12 == Approx(1.9687).epsilon(1e-4));
}

TEST_CASE("geometry: the object pixel from the detector's angle, and what follows", "[recon][units]") {
    ef::ReconConfig cfg;
    cfg.config_file = "r.ini";
    cfg.beam.kv = 300;
    cfg.beam.convergence_mrad = 20;
    cfg.reciprocal_pixel_mrad = 0.5;
    cfg.origins["beam.kv"] = "r.ini:3";
    ef::PtychoDataset ds;
    ds.path = "not-a-file.h5";  // only the config's sources
    ds.h = ds.w = 128;

    const BeamGeometry g = beam_geometry(cfg, ds);

    const double lambda = electron_wavelength(300);
    CHECK(g.wavelength == lambda);
    CHECK(g.wavelength_from == "r.ini:3: beam.kv");
    CHECK(g.pixel == Approx(lambda / (128 * 0.5e-3)));  // dx = lambda / (W theta)
    CHECK(g.angular_pixel() == Approx(0.5e-3));
    CHECK(g.reciprocal_pixel() == Approx(0.5e-3 / lambda));
    CHECK(g.disc_radius_px() == Approx(40.0));  // 20 mrad / 0.5 mrad per pixel
    CHECK(disc_mismatch(g, 36.0, "d.h5").empty());
    CHECK(disc_mismatch(g, 48.0, "d.h5").empty());
    const std::string wrong = disc_mismatch(g, 20.0, "d.h5");
    CHECK(wrong.find("d.h5: the mean pattern's bright-field disc has a radius of 20 px") == 0);
    CHECK(wrong.find("predicts 40 px") != std::string::npos);
    CHECK(disc_mismatch(BeamGeometry{}, 20.0, "d.h5").empty());  // nothing to compare with

    // 256-pixel frames cropped to 192 and binned by 2 (96 x 96 patterns): the detector pixel's
    // angle counts over the 192 detector pixels left, a pattern pixel is 2 of them, and the disc
    // keeps its 40 detector pixels (20 pattern pixels)
    ds.frame_h = ds.frame_w = 256;
    ds.h = ds.w = 96;
    ds.input.detector.bin = 2;
    ds.input.detector.crop_y0 = ds.input.detector.crop_x0 = 32;
    ds.input.detector.crop_y1 = ds.input.detector.crop_x1 = 224;
    const BeamGeometry c = beam_geometry(cfg, ds);
    CHECK(c.pixel == Approx(lambda / (192 * 0.5e-3)));
    CHECK(c.angular_pixel() == Approx(1e-3));
    CHECK(c.disc_radius_px() == Approx(20.0));
}

TEST_CASE("beam probe: the aperture, and an underfocus is a positive defocus", "[recon][units]") {
    const int n = 64;
    const double dx = 0.2e-10, lambda = electron_wavelength(80), alpha = 25e-3;

    const auto focused = beam_probe(n, n, dx, lambda, alpha, {});
    const auto under = beam_probe(n, n, dx, lambda, alpha, {20e-9, 0, 0});

    // Unitary: the power is the sum of the aperture's A^2 over the reciprocal pixels (a disc of
    // radius alpha / (lambda dk) pixels with the tanh edge), near its area pi r^2.
    double power = 0, peak_focused = 0, peak_under = 0;
    for (const auto& z : focused) {
        power += std::norm(z);
        peak_focused = std::max(peak_focused, std::abs(z));
    }
    for (const auto& z : under) peak_under = std::max(peak_under, std::abs(z));
    const double radius = alpha / lambda * n * dx;
    double aperture = 0;
    for (int u = -n / 2; u < n / 2; ++u)
        for (int v = -n / 2; v < n / 2; ++v) {
            const double a = 0.5 * (1 - std::tanh((std::hypot(u, v) - radius) / 0.7));
            aperture += a * a;
        }
    CHECK(power == Approx(aperture).epsilon(1e-9));
    CHECK(power == Approx(M_PI * radius * radius).epsilon(0.1));
    CHECK(std::abs(focused[static_cast<size_t>(n / 2 * n + n / 2)]) == Approx(peak_focused));  // centred
    CHECK(peak_under < 0.5 * peak_focused);  // 20 nm of defocus spreads it
    // The convention: chi = -pi lambda defocus k^2, so P's spectrum has the phase +pi lambda
    // defocus k^2 (a diverging wave for an underfocus). Probed at one reciprocal pixel of k:
    // the phase of F[P] there, relative to k = 0, after removing the centring ramp.
    auto spectrum_phase = [&](const std::vector<std::complex<double>>& p, int ky) {
        std::complex<double> s0 = 0, s1 = 0;
        for (int y = 0; y < n; ++y)
            for (int x = 0; x < n; ++x) {
                const auto v = p[static_cast<size_t>(y * n + x)];
                s0 += v;
                s1 += v * std::polar(1.0, -2 * M_PI * ky * (y - n / 2) / n);
            }
        return std::arg(s1 / s0);
    };
    const double dk = 1.0 / (n * dx);
    CHECK(spectrum_phase(focused, 3) == Approx(0.0).margin(1e-9));
    CHECK(spectrum_phase(under, 3) == Approx(M_PI * lambda * 20e-9 * 9 * dk * dk).margin(1e-9));
}

TEST_CASE("position schedule: auto start and rate, given values kept", "[recon][units]") {
    CHECK(resolve_positions_start(0, 100) == 20);
    CHECK(resolve_positions_start(0, 3) == 1);
    CHECK(resolve_positions_start(7, 100) == 7);
    CHECK(resolve_positions_lr(-1, 100, 20) == Approx(24.0 / 81));
    CHECK(resolve_positions_lr(0, 100, 20) == 0.0);  // 0 given: positions stay
    CHECK(resolve_positions_lr(0.02, 100, 20) == 0.02);
}

TEST_CASE("position travel bound: the scan pitch and max_travel = auto", "[recon][units]") {
    // A 10 x 20 raster of step 3: a bounding box of 27 x 57 over 200 positions.
    std::vector<double> grid;
    for (int i = 0; i < 10; ++i)
        for (int j = 0; j < 20; ++j) {
            grid.push_back(3.0 * i + 5);
            grid.push_back(3.0 * j - 2);
        }
    const double pitch = std::sqrt(27.0 * 57.0 / 200.0);
    CHECK(scan_pitch(grid) == Approx(pitch));
    // errors of about a pitch at the corners widen the box by a little, not by their size
    std::vector<double> off = grid;
    off[0] -= 3;
    off[1] -= 3;
    CHECK(scan_pitch(off) == Approx(std::sqrt(30.0 * 60.0 / 200.0)));
    // a line: its length over the gaps; one position: no pitch
    CHECK(scan_pitch({0, 0, 0, 2, 0, 4, 0, 6}) == Approx(2.0));
    CHECK(scan_pitch({1, 1}) == 0.0);
    CHECK(resolve_positions_max_travel(-1, pitch) == Approx(2 * pitch));
    CHECK(resolve_positions_max_travel(0, pitch) == 0.0);  // 0 given: no bound
    CHECK(resolve_positions_max_travel(2.5, pitch) == 2.5);
}

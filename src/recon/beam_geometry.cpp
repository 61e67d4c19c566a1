// SPDX-License-Identifier: MIT
#include "src/recon/beam_geometry.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "src/io/h5.hpp"
#include "src/io/output_file.hpp"
#include "src/recon/probe_modes.hpp"

namespace ef::recon {

namespace {

constexpr double kPlanck = 6.62607015e-34, kLight = 299792458.0;
constexpr double kElectronMass = 9.1093837015e-31, kCharge = 1.602176634e-19;

/// A positive finite root attribute or CXI scalar of the data file, else 0.
double positive(const h5::File& f, const std::string& attr, const std::string& dataset = "") {
    double v = 0;
    if (!attr.empty() && f.has_attr("/", attr)) v = f.attr_double("/", attr);
    else if (!dataset.empty() && f.exists(dataset)) {
        const std::vector<double> d = f.read_double(dataset);
        v = d.empty() ? 0 : d[0];
    }
    return std::isfinite(v) && v > 0 ? v : 0;
}

void set(double& value, std::string& from, double v, const std::string& source) {
    if (value > 0 || !(v > 0)) return;
    value = v;
    from = source;
}

std::string length_text(double metres) {
    char buf[48];
    if (metres >= 1e-9) std::snprintf(buf, sizeof buf, "%.4g nm", metres * 1e9);
    else std::snprintf(buf, sizeof buf, "%.4g A", metres * 1e10);
    return buf;
}

}  // namespace

double electron_wavelength(double kv) {
    const double ev = kCharge * kv * 1e3;  // joules
    return kPlanck / std::sqrt(2 * kElectronMass * ev * (1 + ev / (2 * kElectronMass * kLight * kLight)));
}

BeamGeometry beam_geometry(const ReconConfig& cfg, const PtychoDataset& ds) {
    BeamGeometry g;
    g.h = ds.h;
    g.w = ds.w;
    // The detector's preprocessing (issue 38): the object pixel is lambda / (pattern width x the
    // pattern pixel's angle). detector.bin B makes a pattern pixel B detector pixels, so a
    // detector pixel's angle or size (data.reciprocal_pixel_mrad, the CXI pixel) counts over
    // ds.w x B = the frame's width after the crop; the data's dx_angstrom is the stored frame's
    // object pixel, frame_w wide, so a crop to fewer columns makes it frame_w / (ds.w x B) larger.
    const int bin = std::max(1, ds.input.detector.bin);
    const double detector_w = static_cast<double>(ds.w) * bin;
    const bool cropped = ds.frame_w > 0 && ds.frame_w != ds.w * bin;
    const double crop_scale = cropped ? ds.frame_w / detector_w : 1.0;
    char crop_note[96] = "";
    if (cropped)
        std::snprintf(crop_note, sizeof crop_note, " x %d / %g for detector.crop", ds.frame_w, detector_w);
    set(g.wavelength, g.wavelength_from, cfg.wavelength, cfg.where("model.wavelength"));
    if (cfg.beam.kv > 0) set(g.wavelength, g.wavelength_from, electron_wavelength(cfg.beam.kv), cfg.where("beam.kv"));
    set(g.pixel, g.pixel_from, cfg.pixel_size, cfg.where("data.pixel_size"));
    if (cfg.reciprocal_pixel_mrad > 0 && g.wavelength > 0)
        set(g.pixel, g.pixel_from, g.wavelength / (detector_w * cfg.reciprocal_pixel_mrad * 1e-3),
            cfg.where("data.reciprocal_pixel_mrad"));
    set(g.convergence, g.convergence_from, 1e-3 * cfg.beam.convergence_mrad, cfg.where("beam.convergence_mrad"));
    if (cfg.origins.count("beam.defocus_nm")) {
        g.defocus = 1e-9 * cfg.beam.defocus_nm;
        g.defocus_from = cfg.where("beam.defocus_nm");
    }
    // The data file's attributes (open_ptycho_dataset has read the file; a dataset made in memory,
    // as in the unit tests, has only the config's). An EMPAD raw file has no attributes: its
    // geometry comes from the config's keys alone.
    if (ds.format == "empad" || !file_exists(ds.path)) return g;
    const h5::File f = h5::File::open_read(ds.path);
    const std::string file = ds.path + ": ";
    set(g.wavelength, g.wavelength_from, 1e-10 * positive(f, "wavelength_angstrom"), file + "wavelength_angstrom");
    if (const double kv = positive(f, "kv"); kv > 0)
        set(g.wavelength, g.wavelength_from, electron_wavelength(kv), file + "kv");
    if (const double e = positive(f, "", "/entry_1/instrument_1/source_1/energy"); e > 0)
        set(g.wavelength, g.wavelength_from, kPlanck * kLight / e, file + "CXI source energy");

    if (!(g.pixel > 0) && cfg.reciprocal_pixel_mrad > 0 && g.wavelength > 0)  // lambda from the data
        set(g.pixel, g.pixel_from, g.wavelength / (detector_w * cfg.reciprocal_pixel_mrad * 1e-3),
            cfg.where("data.reciprocal_pixel_mrad"));
    set(g.pixel, g.pixel_from, 1e-10 * positive(f, "dx_angstrom") * crop_scale, file + "dx_angstrom" + crop_note);
    const double z = positive(f, "", "/entry_1/instrument_1/detector_1/distance");
    const double p = positive(f, "", "/entry_1/instrument_1/detector_1/x_pixel_size");
    if (ds.cxi && z > 0 && p > 0 && g.wavelength > 0)
        set(g.pixel, g.pixel_from, g.wavelength * z / (detector_w * p), file + "CXI detector distance and pixel size");

    set(g.convergence, g.convergence_from, 1e-3 * positive(f, "conv_angle_mrad"), file + "conv_angle_mrad");
    // A defocus may be 0 or negative: the key when it was given (above), else the data's attribute.
    if (!cfg.origins.count("beam.defocus_nm") && f.has_attr("/", "defocus_nm") &&
        std::isfinite(f.attr_double("/", "defocus_nm"))) {
        g.defocus = 1e-9 * f.attr_double("/", "defocus_nm");
        g.defocus_from = file + "defocus_nm";
    }
    return g;
}

std::string BeamGeometry::describe() const {
    if (!(pixel > 0)) return "geometry: in pixels (no object pixel size: data.pixel_size, data.reciprocal_pixel_mrad or "
                             "the data's dx_angstrom give one)";
    char buf[512];
    std::string s = "geometry: object pixel " + length_text(pixel) + " (" + pixel_from + ")";
    std::snprintf(buf, sizeof buf, ", reciprocal pixel %.4g 1/A", reciprocal_pixel() * 1e-10);
    s += buf;
    if (wavelength > 0) {
        std::snprintf(buf, sizeof buf, " = %.4g mrad; wavelength %.4g A (%s)", angular_pixel() * 1e3,
                      wavelength * 1e10, wavelength_from.c_str());
        s += buf;
    }
    if (disc_radius_px() > 0) {
        std::snprintf(buf, sizeof buf, "; convergence %.4g mrad (%s): bright-field disc radius %.3g px",
                      convergence * 1e3, convergence_from.c_str(), disc_radius_px());
        s += buf;
    }
    return s;
}

std::vector<std::complex<double>> beam_probe(int h, int w, double pixel, double wavelength, double convergence,
                                             const Aberrations& ab) {
    const double dky = 1.0 / (h * pixel), dkx = 1.0 / (w * pixel);  // 1/m per pattern pixel
    const double kmax = convergence / wavelength, soft = 0.7 * std::min(dky, dkx);
    const double l = wavelength;
    std::vector<std::complex<double>> spec(static_cast<size_t>(h) * static_cast<size_t>(w));
    for (int u = 0; u < h; ++u)
        for (int v = 0; v < w; ++v) {
            const double ky = (u <= (h - 1) / 2 ? u : u - h) * dky, kx = (v <= (w - 1) / 2 ? v : v - w) * dkx;
            const double k2 = ky * ky + kx * kx;
            const double edge = 0.5 * (1 - std::tanh((std::sqrt(k2) - kmax) / soft));
            const double chi = M_PI * l * k2 * (0.5 * ab.cs * l * l * k2 - ab.defocus) +
                               M_PI * ab.c5 * std::pow(l, 5) * k2 * k2 * k2 / 3;
            spec[static_cast<size_t>(u) * static_cast<size_t>(w) + static_cast<size_t>(v)] = std::polar(edge, -chi);
        }
    return probe_from_spectrum(spec, h, w);
}

std::string disc_mismatch(const BeamGeometry& g, double measured_px, const std::string& data_path) {
    const double predicted = g.disc_radius_px();
    if (!(predicted > 0) || !(measured_px > 0)) return "";
    const double ratio = measured_px / predicted;
    if (ratio > 0.8 && ratio < 1.25) return "";
    char buf[640];
    std::snprintf(buf, sizeof buf,
                  "%s: the mean pattern's bright-field disc has a radius of %.3g px, but a convergence of %.4g mrad "
                  "(%s) at %.4g mrad per pattern pixel (wavelength from %s, object pixel from %s) predicts %.3g px: "
                  "one of them is wrong, or the patterns are binned or cropped",
                  data_path.c_str(), measured_px, g.convergence * 1e3, g.convergence_from.c_str(),
                  g.angular_pixel() * 1e3, g.wavelength_from.c_str(), g.pixel_from.c_str(), predicted);
    return buf;
}

}  // namespace ef::recon

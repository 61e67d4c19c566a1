// SPDX-License-Identifier: MIT
#include "src/recon/multislice_geometry.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include <ensemblefit/core/error.hpp>

#include "src/config/capacity.hpp"
#include "src/config/ini_scan.hpp"
#include "src/io/h5.hpp"

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

double wavelength_of(const ReconConfig& cfg, const h5::File& f) {
    if (cfg.wavelength > 0) return cfg.wavelength;
    if (const double a = positive(f, "wavelength_angstrom"); a > 0) return a * 1e-10;
    if (const double kv = positive(f, "kv"); kv > 0) return electron_wavelength(kv);
    if (const double e = positive(f, "", "/entry_1/instrument_1/source_1/energy"); e > 0) return kPlanck * kLight / e;
    throw usage_error(cfg.where("model.wavelength") + ": needed for model.slices = " + std::to_string(cfg.slices) +
                      ", and " + f.path() + " has no wavelength_angstrom, kv or CXI energy");
}

double pixel_of(const ReconConfig& cfg, const PtychoDataset& ds, const h5::File& f, double lambda) {
    if (cfg.pixel_size > 0) return cfg.pixel_size;
    if (const double a = positive(f, "dx_angstrom"); a > 0) return a * 1e-10;
    const double z = positive(f, "", "/entry_1/instrument_1/detector_1/distance");
    const double p = positive(f, "", "/entry_1/instrument_1/detector_1/x_pixel_size");
    if (ds.cxi && z > 0 && p > 0) return lambda * z / (ds.w * p);
    throw usage_error(cfg.where("data.pixel_size") + ": the object pixel size is needed for model.slices = " +
                      std::to_string(cfg.slices) + ", and " + f.path() + " has no dx_angstrom or CXI geometry");
}

}  // namespace

double electron_wavelength(double kv) {
    const double ev = kCharge * kv * 1e3;  // joules
    return kPlanck / std::sqrt(2 * kElectronMass * ev * (1 + ev / (2 * kElectronMass * kLight * kLight)));
}

double slice_fresnel(const ReconConfig& cfg, const PtychoDataset& ds) {
    if (cfg.slices <= 1) return 0;
    const h5::File f = h5::File::open_read(ds.path);
    const double lambda = wavelength_of(cfg, f);
    const double dx = pixel_of(cfg, ds, f, lambda);
    return lambda * cfg.slice_thickness / (dx * dx);
}

void check_slices_fit(const ReconConfig& cfg, const PtychoDataset& ds) {
    if (cfg.slices <= 1) return;
    const double object = 40.0 * static_cast<double>(ds.obj_h) * ds.obj_w;
    const double waves = 8.0 * static_cast<double>(ds.h) * ds.w * cfg.modes * std::min<double>(cfg.batch_size, ds.count);
    const double per_slice = object + waves;
    if (exceeds_memory(per_slice * cfg.slices))
        throw usage_error(cfg.where("model.slices") + " = " + std::to_string(cfg.slices) + " " +
                          memory_refusal(per_slice * cfg.slices, "the object slices and the waves between them",
                                         "model.slices = " +
                                             ini::format_double(std::floor(largest_count(per_slice)))));
}

}  // namespace ef::recon

// SPDX-License-Identifier: MIT
#include "src/recon/multislice_geometry.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include <ensemblefit/core/error.hpp>

#include "src/config/capacity.hpp"
#include "src/config/ini_scan.hpp"

namespace ef::recon {

double slice_fresnel(const ReconConfig& cfg, const PtychoDataset& ds, const BeamGeometry& g) {
    if (cfg.slices <= 1) return 0;
    if (!(g.wavelength > 0))
        throw usage_error(cfg.where("model.wavelength") + ": needed for model.slices = " + std::to_string(cfg.slices) +
                          ", and " + ds.path + " has no wavelength_angstrom, kv or CXI energy (or give beam.kv)");
    if (!(g.pixel > 0))
        throw usage_error(cfg.where("data.pixel_size") + ": the object pixel size is needed for model.slices = " +
                          std::to_string(cfg.slices) + ", and " + ds.path + " has no dx_angstrom or CXI geometry");
    return g.wavelength * cfg.slice_thickness / (g.pixel * g.pixel);
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

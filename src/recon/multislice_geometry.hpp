// SPDX-License-Identifier: MIT
#pragma once

#include <ensemblefit/recon/ptycho_dataset.hpp>
#include <ensemblefit/recon/recon_config.hpp>

#include "src/recon/beam_geometry.hpp"

namespace ef::recon {

/**
 * The Fresnel number of one slice, lambda dz / dx^2 in pixels (kernels/recon/multislice_math.hpp
 * needs only it), for model.slices > 1 (internal):
 *  - dz: model.slice_thickness (metres);
 *  - lambda and dx (the object pixel) from the run's geometry `g` (beam_geometry(): the config's
 *    keys, else the data's attributes, else the CXI geometry).
 * A missing quantity is a usage error naming the key that supplies it (exit 2).
 */
double slice_fresnel(const ReconConfig& cfg, const PtychoDataset& ds, const BeamGeometry& g);

/// Refuses (exit 2, naming model.slices) S object slices that cannot fit memory: 40 B per object
/// pixel and slice, and the waves kept between slices for a batch (8 B per pattern pixel, mode,
/// position and slice).
void check_slices_fit(const ReconConfig& cfg, const PtychoDataset& ds);

}  // namespace ef::recon

// SPDX-License-Identifier: MIT
#pragma once

#include <ensemblefit/recon/ptycho_dataset.hpp>
#include <ensemblefit/recon/recon_config.hpp>

namespace ef::recon {

/**
 * The Fresnel number of one slice, lambda dz / dx^2 in pixels (kernels/recon/multislice_math.hpp
 * needs only it), for model.slices > 1 (internal):
 *  - dz: model.slice_thickness (metres);
 *  - lambda: model.wavelength, else the data's root attribute wavelength_angstrom, else the
 *    relativistic electron wavelength of its kv, else the CXI source energy (lambda = h c / E,
 *    as the CXI reader converts positions);
 *  - dx (the object pixel): data.pixel_size, else the data's dx_angstrom, else the CXI geometry
 *    lambda z / (W p).
 * A missing quantity is a usage error naming the key that supplies it (exit 2).
 */
double slice_fresnel(const ReconConfig& cfg, const PtychoDataset& ds);

/// Refuses (exit 2, naming model.slices) S object slices that cannot fit memory: 40 B per object
/// pixel and slice, and the waves kept between slices for a batch (8 B per pattern pixel, mode,
/// position and slice).
void check_slices_fit(const ReconConfig& cfg, const PtychoDataset& ds);

/// The relativistic wavelength of electrons accelerated through `kv` kilovolts, in metres.
double electron_wavelength(double kv);

}  // namespace ef::recon

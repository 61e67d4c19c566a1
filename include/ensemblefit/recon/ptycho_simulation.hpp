// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <string>

#include <ensemblefit/comm/mpi_context.hpp>

namespace ef {

/**
 * `ensemblefit simulate ptycho`: a synthetic dataset from a known object and mixed-state probe,
 * with Poisson noise, in the layout `reconstruct` reads, the truth stored beside the data.
 * Sizes are in pixels; the defaults mimic the shape of PtyRAD's tBL-WSe2 benchmark (128 x 128
 * raster, 128 x 128 patterns, 12 modes, sub-pixel steps) scaled by --scan and --dp.
 *
 * Object: two hexagonal lattices of Gaussian "atoms" twisted by 3 degrees (a twisted bilayer),
 * phase up to phase_max, amplitude 1 - 0.05 phase / phase_max. Probe: a soft-edged aperture of
 * radius `aperture` Fourier pixels with defocus chosen so the geometric spot radius is
 * `probe_radius` pixels, centred in the window; extra modes as the reconstruction initialises
 * them (mode 0 times low-order polynomials), each with `mode_power` of the power.
 *
 * Scan: `scan_y` x `scan_x` positions. `raster` is the regular grid of step `step`; `fermat` (the
 * default) is a Fermat spiral (r = c sqrt(k), golden-angle turns) clipped to a rectangle of the
 * raster's aspect ratio, scaled so that its mean nearest-neighbour distance is `step`: the same
 * density and overlap (1 - mean step / probe diameter) without the raster's periodicity, whose
 * grid ambiguity a reconstruction cannot remove (Thibault et al. 2009; Huang et al. 2014).
 * `jitter` adds Gaussian displacements to either.
 *
 * With `slices` S > 1, a thick sample: S slices, slice s the bilayer turned by 17 s degrees and
 * shifted by (0.37, 0.61) s lattice constants, the wave carried between them by Fresnel
 * propagation over `slice_thickness` (the reconstruction's multislice model); /truth/object is
 * then S x H x W.
 */
struct PtychoSimulationOptions {
    std::string out;
    bool overwrite = false;
    int scan_y = 128, scan_x = 128;
    int dp = 128;
    int modes = 12;
    double dose = 1e6;            ///< mean counts per pattern (0 = noiseless intensities)
    std::uint64_t seed = 1;
    double step = 2.87;           ///< mean nearest-neighbour step, pixels (the raster's step)
    /// fermat (spiral filling the scan's rectangle) | raster; empty: raster for format = empad
    /// (its frames carry no positions), else fermat
    std::string scan_pattern;
    double jitter = 0.0;          ///< std of the true positions around the raster, pixels
    double position_error = 0.0;  ///< std of the errors added to the stored /positions, pixels
    int object_size = 0;          ///< 0 = scanned extent + window + 2 margins
    int margin = 4;
    double aperture = 0;          ///< Fourier pixels; 0 = 0.1 dp
    double probe_radius = 0;      ///< pixels; 0 = dp / 8
    double mode_power = 0.02;
    double phase_max = 0.5;       ///< radians
    double lattice = 12.0;        ///< lattice constant, pixels
    double atom_sigma = 2.5;      ///< Gaussian atom width, pixels
    std::string format = "native";  ///< native | cxi
    int compress = 0;             ///< deflate level of /data (0 = contiguous, uncompressed)
    int threads = 0;
    int slices = 1;               ///< object slices (multislice: a thick sample; each slice its own lattice)
    double slice_thickness = 0;   ///< metres between slices (> 0 when slices > 1)
    bool store_probe = false;     ///< also store the true probe as /probe (a reconstruction's start)
};

/// Rank 0 writes the file; other ranks wait. Throws ef::Error for bad options.
void simulate_ptycho(const PtychoSimulationOptions& options, const MpiContext& ctx);

}  // namespace ef

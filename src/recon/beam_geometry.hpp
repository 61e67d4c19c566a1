// SPDX-License-Identifier: MIT
#pragma once

#include <complex>
#include <string>
#include <vector>

#include <ensemblefit/recon/ptycho_dataset.hpp>
#include <ensemblefit/recon/recon_config.hpp>

namespace ef::recon {

/**
 * The experiment in physical units (internal; docs/reconstruction.md, "Physical units"): the
 * wavelength, the object (real-space) pixel and the probe's convergence semi-angle, each with
 * where it came from, and what follows from them for h x w patterns: the reciprocal pixel
 * 1 / (w dx) and its angle lambda / (w dx), and the bright-field disc's radius alpha / (lambda
 * dk) in pattern pixels. Every quantity is 0 when nothing gives it; the reconstruction runs in
 * pixels then, and only what needs a quantity (multislice, probe.init = beam) refuses without it.
 * Read once, on every rank, from the config and the data file's root attributes, so that the
 * output, the previews, the probe and the multislice propagator use the same numbers.
 */
struct BeamGeometry {
    double wavelength = 0;   ///< metres
    std::string wavelength_from;
    double pixel = 0;        ///< object pixel, metres
    std::string pixel_from;
    double convergence = 0;  ///< semi-angle, radians
    std::string convergence_from;
    double defocus = 0;      ///< metres, Kirkland's sign (Aberrations): beam.defocus_nm, else the data's defocus_nm
    std::string defocus_from;
    int h = 0, w = 0;        ///< pattern size

    /// The detector's pixel in reciprocal space along x, 1 / (w dx) (1/m; 0 when dx is unknown).
    double reciprocal_pixel() const { return pixel > 0 && w > 0 ? 1.0 / (w * pixel) : 0.0; }
    /// The same as a scattering angle, lambda / (w dx) (radians; 0 when unknown).
    double angular_pixel() const { return wavelength * reciprocal_pixel(); }
    /// The bright-field disc's radius the convergence predicts, alpha / angular_pixel (pattern
    /// pixels; 0 when unknown).
    double disc_radius_px() const {
        return convergence > 0 && angular_pixel() > 0 ? convergence / angular_pixel() : 0.0;
    }
    /// One line for the run's start: each known quantity with its source, or that the
    /// reconstruction is in pixels.
    std::string describe() const;
};

/**
 * The geometry of a run: lambda from model.wavelength, beam.kv (relativistic electron
 * wavelength), the data's wavelength_angstrom, its kv, or the CXI source energy (h c / E); dx from
 * data.pixel_size, data.reciprocal_pixel_mrad (dx = lambda / (w x angle)), the data's dx_angstrom,
 * or the CXI geometry lambda z / (w p); alpha from beam.convergence_mrad or the data's
 * conv_angle_mrad; the defocus from beam.defocus_nm when given (0 too), else the data's
 * defocus_nm, else 0. The first that is given wins.
 */
BeamGeometry beam_geometry(const ReconConfig& cfg, const PtychoDataset& ds);

/// The lens's aberrations (metres), Kirkland's convention (Advanced Computing in Electron
/// Microscopy, 2nd ed., eq. 3.42): chi(k) = pi lambda k^2 (Cs lambda^2 k^2 / 2 - defocus) +
/// pi C5 lambda^5 k^6 / 3, so a positive defocus is an underfocus (a weaker lens: the crossover
/// lies beyond the sample).
struct Aberrations {
    double defocus = 0, cs = 0, c5 = 0;
};

/**
 * The probe of an aperture-limited lens (h x w, unitary, centred in the window): the inverse
 * unitary DFT of A(k) exp(-i chi(k)), A an aperture of radius alpha / lambda with a soft edge
 * (tanh over 0.7 reciprocal pixels, so that its sampling does not ring), chi from `ab`.
 * `pixel` (m), `wavelength` (m) and `convergence` (rad) must be > 0. simulate ptycho makes its
 * probe with it too, so a reconstruction's probe.init = beam starts from the simulated truth.
 */
std::vector<std::complex<double>> beam_probe(int h, int w, double pixel, double wavelength, double convergence,
                                             const Aberrations& ab);

/// Whether the mean pattern's bright disc (`measured_px`, pattern pixels) agrees with the
/// convergence, wavelength and pixel (within 20 %): empty when it does or cannot be said, else
/// one line naming both radii and the keys that set them.
std::string disc_mismatch(const BeamGeometry& g, double measured_px, const std::string& data_path);

/// The relativistic wavelength of electrons accelerated through `kv` kilovolts, in metres.
double electron_wavelength(double kv);

}  // namespace ef::recon

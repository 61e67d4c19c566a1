// SPDX-License-Identifier: MIT
#pragma once

#include <complex>
#include <cstdint>
#include <vector>

/**
 * Mixed-state probe handling on the host (internal): the probe is K x n complex (K modes of
 * n = h x w pixels, mode-major). These run once per iteration on a few MB, so they stay serial
 * double-precision host code for every backend.
 */
namespace ef::recon {

using Complex = std::complex<double>;

/**
 * Eigen-decomposition of a K x K Hermitian matrix (row-major) by cyclic complex Jacobi
 * rotations: on return `values` are the eigenvalues in descending order and column m of
 * `vectors` (row-major K x K) the unit eigenvector of values[m].
 */
void hermitian_eigen(const std::vector<Complex>& matrix, int k, std::vector<double>& values, std::vector<Complex>& vectors);

/**
 * PtyRAD's ortho_pmode: replaces the modes by the eigenvectors of their Gram matrix
 * G_kl = <P_k, P_l>, P'_m = sum_l V_lm P_l, ordered by power (descending). The new modes are
 * orthogonal, span the same space and carry the same total power. Returns the mode powers.
 */
std::vector<double> orthogonalize_modes(std::vector<Complex>& probe, int modes, std::int64_t n);

/// Scales the probe so that sum |P|^2 = target (PtyRAD's fix_probe_int). Returns the factor.
double scale_probe_power(std::vector<Complex>& probe, double target);

/**
 * The radius (pattern pixels) of the mean pattern's bright disc (FFT order, h x w): the disc of
 * the same area as the pixels above half the brightest. At least 1.
 */
double bright_disc_radius(const std::vector<double>& mean_fft_order, int h, int w);

/**
 * A first probe from the mean pattern (FFT order, h x w): the inverse unitary FFT of its square
 * root times a defocus phase, defocus (k / disc)^2 at spatial frequency k (pattern pixels; 0:
 * flat), shifted to the window centre.
 */
std::vector<Complex> probe_from_mean_pattern(const std::vector<double>& mean_fft_order, int h, int w,
                                             double defocus = 0.0, double disc = 1.0);

/// The probe whose unitary far field is `spec` (FFT order, h x w), shifted to the window
/// centre: F_ortho^-1[spec e^{-2 pi i (fy h/2 + fx w/2)}] (probe_from_mean_pattern, beam_probe).
std::vector<Complex> probe_from_spectrum(std::vector<Complex> spec_fft_order, int h, int w);

/**
 * Grows `probe` from `have` to `want` modes: mode k is mode 0 times a low-order polynomial of the
 * pixel's offset from mode 0's centre (x, y, xy, x^2 - y^2, ...), orthogonalised; then the powers
 * are set to (1 - (want - 1) p) and p of `total` (p = mode_power). `have` >= 1.
 */
void add_probe_modes(std::vector<Complex>& probe, int have, int want, int h, int w, double mode_power, double total);

}  // namespace ef::recon

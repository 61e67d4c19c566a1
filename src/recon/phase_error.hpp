// SPDX-License-Identifier: MIT
#pragma once

#include <complex>
#include <cstdint>
#include <vector>

namespace ef::recon {

/// A reconstructed object's phase against the truth over a region (internal).
struct PhaseError {
    double nrmse = 0;  ///< rms(residual) / std(true phase) over the region
    double rmse = 0;   ///< rms(residual), radians
    std::int64_t pixels = 0;
};

/**
 * Phase error after removing what ptychography cannot determine: a global phase offset and a
 * linear phase ramp (least-squares plane a + b y + c x fitted to the phase difference). The
 * difference is taken as arg(rec conj(truth)) after removing the mean offset, so it does not
 * wrap for small errors. The region [y0, y1) x [x0, x1) is usually the area the probe centres
 * scanned. Normalised by the standard deviation of the true phase there.
 */
PhaseError phase_error(const std::vector<std::complex<double>>& rec, const std::vector<std::complex<double>>& truth,
                       int obj_w, int y0, int y1, int x0, int x1);

}  // namespace ef::recon

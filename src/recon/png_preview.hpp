// SPDX-License-Identifier: MIT
#pragma once

#include <complex>
#include <cstdint>
#include <string>
#include <vector>

namespace ef::recon {

/// Writes an 8-bit greyscale PNG; throws ef::Error when the file cannot be written.
void write_gray_png(const std::string& path, int width, int height, const std::vector<std::uint8_t>& pixels);

/**
 * The previews people look at (internal): `stem`_phase.png and `stem`_amplitude.png of the
 * object (each stretched between its 0.5 and 99.5 percentiles) and `stem`_probe.png with the
 * amplitude of every probe mode side by side (each mode scaled to its own maximum, its power in
 * the file name order). Returns the paths written.
 */
std::vector<std::string> write_previews(const std::string& stem, const std::vector<std::complex<double>>& object,
                                        int obj_h, int obj_w, const std::vector<std::complex<double>>& probe, int modes,
                                        int h, int w);

}  // namespace ef::recon

// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <vector>

#include <ensemblefit/recon/ptycho_dataset.hpp>

namespace ef {

/**
 * The positions (N x 2, y then x, object pixels, before the object frame's offset) of a raster
 * scan in scan order (row after row, x fastest): point (r, c) is (r step_y, c step_x); then, in
 * this order, transposed (y and x swapped), mirrored (flip_y: y -> -y; flip_x: x -> -x) and
 * turned by rotation_deg counter-clockwise as seen in the image (x right, y down):
 * y' = y cos t - x sin t, x' = y sin t + x cos t with t = rotation_deg (so +90 turns +x, right, into -y, up).
 */
std::vector<double> raster_positions(const ScanGeometry& scan);

/// A text file of positions, one "y x" pair per line, times `scale` (object pixels per listed
/// number); blank lines and lines starting with '#' are skipped. Errors name the file and line (exit 3).
std::vector<double> read_position_list(const std::string& path, double scale = 1);

}  // namespace ef

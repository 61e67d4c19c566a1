// SPDX-License-Identifier: MIT
#pragma once

#include <complex>
#include <cstdint>
#include <string>
#include <vector>

namespace ef {

/**
 * A ptychography dataset as a reconstruction sees it: its shape, the scan positions in the
 * object frame and where the optional probe and truth are. Opening reads only metadata and
 * positions; each rank then reads its own share of the patterns (read_patterns(), one HDF5
 * hyperslab). Two layouts:
 *  - native: /data (N x H x W intensities, centred, any numeric type), /positions (N x 2 pixels,
 *    y then x, top-left corner of the H x W window in object pixels), optional /probe (K x H x W
 *    complex), optional root attribute object_shape (2 integers), optional /truth/object,
 *    /truth/probe, /truth/positions (written by `ensemblefit simulate ptycho`);
 *  - CXI: /entry_1/data_1/data and /entry_1/sample_1/geometry_1/translation (N x 3 metres, x y z),
 *    converted to pixels with data.pixel_size or the CXI energy, distance and detector pixel size.
 * Positions that are negative (or from CXI) are shifted so that the scan starts `margin` pixels
 * into the object; the object size, unless given, is the scanned extent plus the window plus
 * `margin` on each side.
 */
struct PtychoDataset {
    std::string path;
    bool cxi = false;
    std::string data_name;      ///< dataset of the patterns
    std::int64_t count = 0;     ///< N
    int h = 0, w = 0;           ///< pattern (window) size
    int obj_h = 0, obj_w = 0;   ///< object size
    std::vector<double> positions;  ///< N x 2, object frame (y, x)
    double offset_y = 0, offset_x = 0;  ///< object frame = file positions + offset
    bool has_probe = false;
    int probe_modes = 0;
    bool has_truth = false;
    std::vector<std::string> metadata;  ///< "name = value" of the root attributes, for the output
};

/// Opens `path` (format auto | native | cxi) and reads its metadata and positions.
PtychoDataset open_ptycho_dataset(const std::string& path, const std::string& format, double pixel_size, int margin);

/// Patterns [first, first + count) as float, each moved from centred to FFT order (ifftshift).
std::vector<float> read_patterns(const PtychoDataset& ds, std::int64_t first, std::int64_t count, int threads = 1);

/// The file's probe (K x H x W), or empty.
std::vector<std::complex<double>> read_probe(const PtychoDataset& ds, int& modes);

/// The true object of a simulated dataset for a reconstruction of `slices` slices: slices x
/// obj_h x obj_w (a thick truth, /truth/object S x H x W, for as many slices; its slices' product
/// for one slice), or empty when there is nothing to compare with.
std::vector<std::complex<double>> read_truth_object(const PtychoDataset& ds, int slices = 1);

}  // namespace ef

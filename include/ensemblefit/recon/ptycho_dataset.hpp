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
/**
 * Where the scan positions of a file without them (EMPAD raw, a 4-D HDF5 array) come from:
 * a raster of `ny` x `nx` points in scan order (row after row, x fastest), `step_y`, `step_x`
 * object pixels apart, optionally transposed (y and x swapped), mirrored and turned by
 * `rotation_deg` (degrees, counter-clockwise in the (x right, y down) image frame); or a text
 * file of N lines "y x" (object pixels). Frame k of the file is the k-th position.
 */
struct ScanGeometry {
    int ny = 0, nx = 0;                ///< scan shape (slow, fast); 0 = not given
    double step_y = 0, step_x = 0;     ///< object pixels between neighbours
    /// data.scan_step given as a length (`0.43 A`, `0.043 nm`, `43 pm` or metres: `4.3e-11 m`), in
    /// metres; step_y/x are then set from the object pixel size when the data are opened
    /// (recon::open_recon_dataset). 0: the step is in pixels.
    double step_length_y = 0, step_length_x = 0;
    std::string positions_file;        ///< "y x" per line (instead of the raster), in positions_unit
    /// data.positions_unit in metres (A: 1e-10...); 0: object pixels. positions_scale: pixels per
    /// listed number (1, or set by recon::open_recon_dataset from the object pixel size).
    double positions_unit = 0, positions_scale = 1;
    double rotation_deg = 0;
    bool transpose = false;
    bool flip_y = false, flip_x = false;
};

/**
 * Detector preprocessing, in this order, on every frame as read: `crop` (rows y0..y1, columns
 * x0..x1, half-open; none when y1 = 0), `bin` (sums of bin x bin pixels), negative counts set to
 * 0 (`clip_negative`, counted and reported), then, from the mean pattern over the whole scan, the
 * hot and dead pixels (`mask`: each pixel against the median of its 8 neighbours, threshold
 * `mask_threshold` robust standard deviations) replaced by the mean of their good neighbours,
 * and the beam centred (`center`: the bright disc's centre of mass moved to (H/2, W/2) by a
 * shift of whole pixels). docs/reconstruction.md, "Instrument data".
 */
struct DetectorSettings {
    int crop_y0 = 0, crop_y1 = 0, crop_x0 = 0, crop_x1 = 0;  ///< y1 = 0: no crop
    int bin = 1;
    bool clip_negative = true;
    bool mask = true;
    double mask_threshold = 10;
    bool center = true;
};

/// What the reader needs beyond the file: the 4-D dataset's path, the scan, the preprocessing,
/// and a file holding the truth of a simulated raw file.
struct InstrumentOptions {
    std::string dataset;     ///< data.dataset: the 4-D array in an HDF5 file
    ScanGeometry scan;
    DetectorSettings detector;
    std::string truth_file;  ///< data.truth: an HDF5 file with /truth/object and /truth/positions
};

/// The corrections decided once from the mean pattern (DetectorSettings): applied to every
/// frame read afterwards.
struct DetectorCorrection {
    bool decided = false;
    int shift_y = 0, shift_x = 0;       ///< whole pixels added to the pattern coordinates
    double centre_y = 0, centre_x = 0;  ///< the mean pattern's beam centre before the shift
    std::vector<std::int64_t> masked;   ///< pixel indices (y * w + x) replaced by their neighbours
    std::int64_t hot = 0, dead = 0;
};

struct PtychoDataset {
    std::string path;
    bool cxi = false;
    std::string format = "native";  ///< native | cxi | empad | hdf5-4d (as read)
    int frame_h = 0, frame_w = 0;   ///< a frame as stored (before crop and bin)
    int frame_rows = 0;             ///< EMPAD: rows per stored frame (frame_h + 2)
    InstrumentOptions input;
    DetectorCorrection correction;
    std::string truth_path;         ///< the file holding /truth/object (path, or data.truth)
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

/// Opens `path` (format auto | native | cxi | empad | hdf5-4d) and reads its metadata and positions.
PtychoDataset open_ptycho_dataset(const std::string& path, const std::string& format, double pixel_size, int margin,
                                  const InstrumentOptions& input = {});

/// Frames [first, first + count) as float, centred, cropped, binned and with negative counts
/// clipped (not yet masked or shifted); `negatives` receives the count of clipped values.
std::vector<float> read_frames(const PtychoDataset& ds, std::int64_t first, std::int64_t count, int threads,
                               std::int64_t& negatives);

/// Decides the mask and the beam's shift from the mean pattern (centred, H x W) per
/// ds.input.detector; fills ds.correction.
void decide_detector_correction(PtychoDataset& ds, const std::vector<double>& mean_pattern);

/// Applies ds.correction (mask, shift) to centred patterns, then moves them to FFT order
/// (ifftshift) and checks that every value is finite.
void finish_patterns(const PtychoDataset& ds, std::vector<float>& patterns, std::int64_t first, int threads);

/// Patterns [first, first + count) as float: read_frames, then finish_patterns (the correction
/// must be decided).
std::vector<float> read_patterns(const PtychoDataset& ds, std::int64_t first, std::int64_t count, int threads = 1);

/// The file's probe (K x H x W), or empty.
std::vector<std::complex<double>> read_probe(const PtychoDataset& ds, int& modes);

/// The true object of a simulated dataset for a reconstruction of `slices` slices: slices x
/// obj_h x obj_w (a thick truth, /truth/object S x H x W, for as many slices; its slices' product
/// for one slice), or empty when there is nothing to compare with.
std::vector<std::complex<double>> read_truth_object(const PtychoDataset& ds, int slices = 1);

}  // namespace ef

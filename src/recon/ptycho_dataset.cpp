// SPDX-License-Identifier: MIT
#include <ensemblefit/recon/ptycho_dataset.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>

#include <ensemblefit/core/error.hpp>

#include "src/config/capacity.hpp"
#include "src/config/ini_scan.hpp"
#include "src/io/h5.hpp"
#include "src/io/h5_numeric.hpp"
#include "src/recon/provenance.hpp"
#include "src/recon/ptycho_h5.hpp"
#include "src/recon/scan_geometry.hpp"

namespace ef {

namespace {

/// Refuses dataset `name` when it is not numbers (strings, compound, ...): exit 3 naming it.
void require_numbers(const h5::File& f, const std::string& name) {
    const std::string why = h5::not_numbers(f, name);
    if (!why.empty()) throw data_error(f.path() + ": '" + name + "' " + why);
}

/// The largest object or pattern side taken (so that H x W and the object's pixel count fit
/// the int arithmetic of the kernels with room to spare).
constexpr double kMaxSide = 1 << 20;

/**
 * Sizes the reconstruction keeps for the whole run, refused before anything is allocated when
 * they cannot fit (lower bounds): per scan position its position, correction and Adam moments
 * (48 B); per object pixel the complex object, its gradient, two Adam moments and the
 * parametrisation (40 B in single precision); per pattern pixel the probe, its gradient and
 * the FFT buffers of one position (64 B).
 */
void check_sizes(const PtychoDataset& ds) {
    const double count = static_cast<double>(ds.count), pixels = static_cast<double>(ds.h) * ds.w;
    const auto refuse = [&](const std::string& what, double need, const std::string& largest) {
        throw data_error(ds.path + ": '" + ds.data_name + "' is " + std::to_string(ds.count) + " x " +
                         std::to_string(ds.h) + " x " + std::to_string(ds.w) + ": " +
                         memory_refusal(need, what, largest));
    };
    if (exceeds_memory(64.0 * pixels))
        refuse("a pattern's probe and FFT buffers", 64.0 * pixels,
               "about " + std::to_string(static_cast<long long>(std::sqrt(largest_count(64.0)))) + " x " +
                   std::to_string(static_cast<long long>(std::sqrt(largest_count(64.0)))) + " pixels per pattern");
    if (exceeds_memory(48.0 * count + 64.0 * pixels))
        refuse("the scan positions", 48.0 * count + 64.0 * pixels,
               std::to_string(static_cast<long long>(largest_count(48.0, 64.0 * pixels))) + " positions");
}

constexpr const char* kCxiData = "/entry_1/data_1/data";
constexpr const char* kCxiTranslation = "/entry_1/sample_1/geometry_1/translation";

double cxi_scalar(const h5::File& f, const std::string& name) {
    if (!f.exists(name)) throw data_error(f.path() + ": CXI file has no '" + name + "' (set data.pixel_size instead)");
    const std::vector<double> v = f.read_double(name);
    if (v.empty()) throw data_error(f.path() + ": '" + name + "' is empty");
    return v[0];
}

/// The attribute as text with its type respected (reading a number as a string gave its raw bytes).
std::string attr_text(const h5::File& f, const std::string& name) {
    try {
        return recon::attribute_text(f, "/", name);
    } catch (const Error&) {
        return "?";
    }
}

std::vector<std::string> root_attributes(const h5::File& f) {
    std::vector<std::string> names;
    h5::H5Handle root(H5Oopen(f.id(), "/", H5P_DEFAULT), H5Oclose);
    if (!root) return names;
    H5O_info_t info;
#if H5_VERSION_GE(1, 12, 0)
    if (H5Oget_info3(root.get(), &info, H5O_INFO_NUM_ATTRS) < 0) return names;
#else
    if (H5Oget_info2(root.get(), &info, H5O_INFO_NUM_ATTRS) < 0) return names;
#endif
    for (hsize_t i = 0; i < info.num_attrs; ++i) {
        const ssize_t len = H5Aget_name_by_idx(root.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
        if (len < 0) continue;
        std::string s(static_cast<size_t>(len), '\0');
        H5Aget_name_by_idx(root.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, s.data(), s.size() + 1, H5P_DEFAULT);
        names.push_back(s);
    }
    return names;
}

/// CXI translations (N x 3 metres, x y z) as pixels (y, x): with `pixel_size`, else with the
/// object pixel lambda z / (W p) from the file's energy, distance and detector pixel.
std::vector<double> cxi_positions(const h5::File& f, const PtychoDataset& ds, double pixel_size) {
    const std::string& path = ds.path;
    if (!f.exists(kCxiTranslation)) throw data_error(path + ": CXI file has no '" + std::string(kCxiTranslation) + "'");
    require_numbers(f, kCxiTranslation);
    const std::vector<std::uint64_t> ts = f.shape(kCxiTranslation);
    if (ts.size() != 2 || ts[0] != static_cast<std::uint64_t>(ds.count) || ts[1] < 2)
        throw data_error(path + ": '" + std::string(kCxiTranslation) + "' must be N x 3 (N = " +
                         std::to_string(ds.count) + ")");
    double dx = pixel_size;
    if (!(dx > 0)) {
        const double energy = cxi_scalar(f, "/entry_1/instrument_1/source_1/energy");  // J
        const double distance = cxi_scalar(f, "/entry_1/instrument_1/detector_1/distance");
        const double det_pixel = cxi_scalar(f, "/entry_1/instrument_1/detector_1/x_pixel_size");
        const double lambda = 6.62607015e-34 * 299792458.0 / energy;
        dx = lambda * distance / (ds.w * det_pixel);
        if (!(dx > 0) || !std::isfinite(dx))
            throw data_error(path + ": CXI energy, distance and pixel size give no object pixel size; set "
                                    "data.pixel_size");
    }
    const std::vector<double> t = f.read_double(kCxiTranslation);
    std::vector<double> pos(static_cast<size_t>(2 * ds.count));
    for (std::int64_t i = 0; i < ds.count; ++i) {
        pos[static_cast<size_t>(2 * i)] = t[static_cast<size_t>(i * static_cast<std::int64_t>(ts[1]) + 1)] / dx;
        pos[static_cast<size_t>(2 * i + 1)] = t[static_cast<size_t>(i * static_cast<std::int64_t>(ts[1]))] / dx;
    }
    return pos;
}

std::vector<double> native_positions(const h5::File& f, const PtychoDataset& ds) {
    if (!f.exists("/positions")) throw data_error(ds.path + ": no '/positions' dataset (N x 2 pixels, y then x)");
    require_numbers(f, "/positions");
    const std::vector<std::uint64_t> ps = f.shape("/positions");
    if (ps.size() != 2 || ps[0] != static_cast<std::uint64_t>(ds.count) || ps[1] != 2)
        throw data_error(ds.path + ": '/positions' must be N x 2 (y, x) with N = " + std::to_string(ds.count));
    return f.read_double("/positions");
}

/// The object the positions (or object_shape) call for, refused when it cannot fit: its sides
/// up to kMaxSide, 40 B per pixel (check_sizes) within the memory.
void check_object(const PtychoDataset& ds, double obj_h, double obj_w, const std::string& from) {
    const std::string size = ini::format_double(obj_h) + " x " + ini::format_double(obj_w);
    const std::string origin = from == "positions" ? "'" + std::string(ds.cxi ? kCxiTranslation : ds.format == "native" ? "/positions" : "the scan") +
                                                         "' reach so far that the object is "
                                                   : "object_shape asks for an object of ";
    if (obj_h > kMaxSide || obj_w > kMaxSide)
        throw data_error(ds.path + ": " + origin + size + " pixels; at most " +
                         std::to_string(static_cast<long long>(kMaxSide)) + " pixels a side are supported");
    const double need = 40.0 * obj_h * obj_w;
    if (exceeds_memory(need))
        throw data_error(ds.path + ": " + origin + size + " pixels: " +
                         memory_refusal(need, "the object (40 B per pixel)",
                                        "about " + std::to_string(static_cast<long long>(std::sqrt(largest_count(40.0)))) +
                                            " pixels a side"));
}

/// The positions in the object frame (shifted `margin` pixels into the object where the file's
/// frame is not the object's: CXI, or negative positions) and the object's size.
void place_positions(const h5::File* f, PtychoDataset& ds, int margin, bool shift_to_margin) {
    std::vector<double>& pos = ds.positions;
    for (double v : pos)
        if (!std::isfinite(v)) throw data_error(ds.path + ": positions contain a non-finite value");
    double min_y = pos[0], min_x = pos[1], max_y = pos[0], max_x = pos[1];
    for (std::int64_t i = 0; i < ds.count; ++i) {
        min_y = std::min(min_y, pos[static_cast<size_t>(2 * i)]);
        max_y = std::max(max_y, pos[static_cast<size_t>(2 * i)]);
        min_x = std::min(min_x, pos[static_cast<size_t>(2 * i + 1)]);
        max_x = std::max(max_x, pos[static_cast<size_t>(2 * i + 1)]);
    }
    if (min_y < -0.5 || min_x < -0.5) shift_to_margin = true;
    if (shift_to_margin) {
        ds.offset_y = margin - min_y;
        ds.offset_x = margin - min_x;
        for (std::int64_t i = 0; i < ds.count; ++i) {
            pos[static_cast<size_t>(2 * i)] += ds.offset_y;
            pos[static_cast<size_t>(2 * i + 1)] += ds.offset_x;
        }
        max_y += ds.offset_y;
        max_x += ds.offset_x;
    }
    if (f && !ds.cxi && f->has_attr("/", "object_shape")) {
        const std::vector<double> os = f->attr_doubles("/", "object_shape");
        if (os.size() != 2 || !(os[0] >= ds.h) || !(os[1] >= ds.w) || os[0] > kMaxSide || os[1] > kMaxSide)
            throw data_error(ds.path + ": root attribute object_shape must be 2 sizes from the pattern size to " +
                             std::to_string(static_cast<long long>(kMaxSide)));
        check_object(ds, os[0], os[1], "object_shape");
        ds.obj_h = static_cast<int>(os[0]);
        ds.obj_w = static_cast<int>(os[1]);
        if (std::nearbyint(max_y) + ds.h > ds.obj_h || std::nearbyint(max_x) + ds.w > ds.obj_w)
            throw data_error(ds.path + ": positions reach beyond object_shape (" + std::to_string(ds.obj_h) + " x " +
                             std::to_string(ds.obj_w) + ")");
    } else {
        const double obj_h = std::floor(max_y + 0.5) + ds.h + margin, obj_w = std::floor(max_x + 0.5) + ds.w + margin;
        check_object(ds, obj_h, obj_w, "positions");
        ds.obj_h = static_cast<int>(obj_h);
        ds.obj_w = static_cast<int>(obj_w);
    }
    ds.has_truth = f && !ds.cxi && f->exists("/truth/object") && !shift_to_margin;
    if (ds.has_truth) ds.truth_path = ds.path;
}

/// The file's probe, when it has one of the patterns' size.
void find_probe(const h5::File& f, PtychoDataset& ds) {
    const std::string probe_name = ds.cxi ? "/entry_1/instrument_1/source_1/illumination" : "/probe";
    if (!f.exists(probe_name)) return;
    const std::vector<std::uint64_t> s = f.shape(probe_name);
    const auto h = static_cast<std::uint64_t>(ds.h), w = static_cast<std::uint64_t>(ds.w);
    const bool ok = (s.size() == 3 && s[1] == h && s[2] == w) || (s.size() == 2 && s[0] == h && s[1] == w);
    if (!ok) throw data_error(ds.path + ": '" + probe_name + "' must be K x H x W (or H x W) like the patterns");
    ds.has_probe = true;
    ds.probe_modes = s.size() == 3 ? static_cast<int>(s[0]) : 1;
}

/// The stored frame size and, after detector.crop and detector.bin, the pattern size (refused
/// naming the key when they do not fit the frame).
void set_frame(PtychoDataset& ds, int frame_h, int frame_w) {
    ds.frame_h = frame_h;
    ds.frame_w = frame_w;
    const DetectorSettings& d = ds.input.detector;
    int h = frame_h, w = frame_w;
    if (d.crop_y1 > 0) {
        if (d.crop_y1 > frame_h || d.crop_x1 > frame_w)
            throw usage_error(ds.path + ": detector.crop " + std::to_string(d.crop_y0) + "," + std::to_string(d.crop_y1) +
                              "," + std::to_string(d.crop_x0) + "," + std::to_string(d.crop_x1) +
                              " reaches beyond the " + std::to_string(frame_h) + " x " + std::to_string(frame_w) +
                              " frames");
        h = d.crop_y1 - d.crop_y0;
        w = d.crop_x1 - d.crop_x0;
    }
    if (h % d.bin != 0 || w % d.bin != 0 || h / d.bin < 2 || w / d.bin < 2)
        throw usage_error(ds.path + ": detector.bin " + std::to_string(d.bin) + " does not divide the " +
                          std::to_string(h) + " x " + std::to_string(w) + " frames" +
                          (d.crop_y1 > 0 ? " (after detector.crop)" : "") + "; crop them to a multiple");
    ds.h = h / d.bin;
    ds.w = w / d.bin;
}

/// The frame count the scan asks for: data.scan_shape, else the lines of data.positions.
std::int64_t scan_count(const PtychoDataset& ds, std::vector<double>& listed) {
    const ScanGeometry& s = ds.input.scan;
    if (!s.positions_file.empty()) {
        listed = read_position_list(s.positions_file, s.positions_scale);
        return static_cast<std::int64_t>(listed.size() / 2);
    }
    return static_cast<std::int64_t>(s.ny) * s.nx;
}

/**
 * EMPAD raw: frames of 128 x 128 float32 (little-endian) followed by 2 rows (the detector's
 * frame metadata), 130 x 128 x 4 = 66560 bytes each, in scan order; no header, so the frame
 * count comes from the size and must be what the scan asks for.
 */
void open_empad(PtychoDataset& ds) {
    constexpr int kSide = 128, kRows = 130;
    constexpr std::uint64_t kFrameBytes = static_cast<std::uint64_t>(kRows) * kSide * 4;
    std::error_code ec;
    const std::uint64_t bytes = std::filesystem::file_size(ds.path, ec);
    if (ec) throw data_error(ds.path + ": cannot read the EMPAD raw file's size (" + ec.message() + ")");
    std::vector<double> listed;
    const std::int64_t want = scan_count(ds, listed);
    const std::string asks = ds.input.scan.positions_file.empty()
                                 ? "data.scan_shape " + std::to_string(ds.input.scan.ny) + " x " +
                                       std::to_string(ds.input.scan.nx) + " asks for " + std::to_string(want)
                                 : "data.positions lists " + std::to_string(want);
    const std::uint64_t frames = bytes / kFrameBytes, rest = bytes % kFrameBytes;
    if (rest != 0)
        throw data_error(ds.path + ": " + std::to_string(bytes) + " bytes are " + std::to_string(frames) +
                         " EMPAD frames (130 x 128 float32: 128 x 128 and 2 metadata rows, 66560 bytes) and " +
                         std::to_string(rest) + " bytes more: a truncated file, or frames of another size (" + asks +
                         " frames)");
    if (frames != static_cast<std::uint64_t>(want))
        throw data_error(ds.path + ": holds " + std::to_string(frames) + " EMPAD frames but " + asks +
                         (frames < static_cast<std::uint64_t>(want) ? " (a truncated file?)" : ""));
    if (frames == 0) throw data_error(ds.path + ": an empty EMPAD raw file");
    ds.count = want;
    ds.frame_rows = kRows;
    ds.data_name = "EMPAD frames";
    set_frame(ds, kSide, kSide);
    check_sizes(ds);
    ds.positions = listed.empty() ? raster_positions(ds.input.scan) : listed;
}

/// A 4-D array [scan_y, scan_x, ky, kx] (py4DSTEM's datacube layout) at data.dataset.
void open_4d(const h5::File& f, PtychoDataset& ds) {
    const std::string& name = ds.input.dataset;
    if (name.empty()) throw usage_error(ds.path + ": data.format = hdf5-4d needs data.dataset (the 4-D array's path)");
    ds.data_name = name;
    if (!f.exists(name)) throw data_error(ds.path + ": no dataset '" + name + "' (data.dataset)");
    require_numbers(f, name);
    const std::vector<std::uint64_t> s = f.shape(name);
    if (s.size() != 4) {
        std::string dims;
        for (auto d : s) dims += (dims.empty() ? "" : " x ") + std::to_string(d);
        throw data_error(ds.path + ": '" + name + "' has rank " + std::to_string(s.size()) + " (" + dims +
                         "); a 4-D array [scan_y, scan_x, ky, kx] is expected");
    }
    if (s[0] == 0 || s[1] == 0 || s[2] < 2 || s[3] < 2 || s[2] > kMaxSide || s[3] > kMaxSide ||
        s[0] * s[1] > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
        throw data_error(ds.path + ": '" + name + "' is " + std::to_string(s[0]) + " x " + std::to_string(s[1]) +
                         " x " + std::to_string(s[2]) + " x " + std::to_string(s[3]) + ": not a usable scan of patterns");
    ScanGeometry& sc = ds.input.scan;
    if (sc.ny > 0 && (static_cast<std::uint64_t>(sc.ny) != s[0] || static_cast<std::uint64_t>(sc.nx) != s[1]))
        throw data_error(ds.path + ": '" + name + "' is a " + std::to_string(s[0]) + " x " + std::to_string(s[1]) +
                         " scan but data.scan_shape says " + std::to_string(sc.ny) + " x " + std::to_string(sc.nx));
    const bool listed_only = !sc.positions_file.empty();
    sc.ny = static_cast<int>(s[0]);
    sc.nx = static_cast<int>(s[1]);
    ds.count = static_cast<std::int64_t>(s[0] * s[1]);
    std::vector<double> listed;
    if (listed_only) {
        listed = read_position_list(sc.positions_file, sc.positions_scale);
        if (static_cast<std::int64_t>(listed.size() / 2) != ds.count)
            throw data_error(sc.positions_file + ": lists " + std::to_string(listed.size() / 2) + " positions; '" +
                             name + "' in " + ds.path + " has " + std::to_string(ds.count) + " patterns");
    }
    set_frame(ds, static_cast<int>(s[2]), static_cast<int>(s[3]));
    check_sizes(ds);
    ds.positions = listed_only ? listed : raster_positions(sc);
}

/// Positions of an instrument file in the object frame: `margin` pixels into the object, or, with
/// data.truth, the frame of the truth's /truth/positions (refused when the scan is not that scan).
void finish_instrument_dataset(PtychoDataset& ds, const h5::File* f, int margin) {
    const std::string& tp = ds.input.truth_file;
    if (tp.empty()) {
        place_positions(nullptr, ds, margin, true);
        (void)f;
        return;
    }
    if (ds.input.detector.crop_y1 > 0)
        throw usage_error(tp + ": data.truth with detector.crop: the crop changes the object pixel, the truth's is "
                               "the uncropped one");
    const h5::File t = h5::File::open_read(tp);
    for (const char* need : {"/truth/object", "/truth/positions"})
        if (!t.exists(need)) throw data_error(tp + ": no '" + std::string(need) + "' (data.truth)");
    const std::vector<double> truth = t.read_double("/truth/positions");
    if (truth.size() != ds.positions.size())
        throw data_error(tp + ": '/truth/positions' has " + std::to_string(truth.size() / 2) + " positions, the data " +
                         std::to_string(ds.count));
    // The frames' offset: the mean difference (the truth may hold jitter the raster does not).
    double oy = 0, ox = 0, worst = 0;
    for (size_t k = 0; k < truth.size(); k += 2) {
        oy += truth[k] - ds.positions[k];
        ox += truth[k + 1] - ds.positions[k + 1];
    }
    oy /= static_cast<double>(ds.count);
    ox /= static_cast<double>(ds.count);
    for (size_t k = 0; k < truth.size(); k += 2)
        worst = std::max({worst, std::abs(truth[k] - ds.positions[k] - oy), std::abs(truth[k + 1] - ds.positions[k + 1] - ox)});
    if (worst > 2.0)
        throw data_error(tp + ": the scan (data.scan_* or data.positions) differs from its '/truth/positions' by up to " +
                         ini::format_double(worst) + " px: not the scan of this truth");
    // The same scan to rounding: the truth's numbers themselves (so a file converted from a
    // native one reconstructs bit for bit as the native one); else the scan moved by the offset.
    if (worst < 1e-6)
        ds.positions = truth;
    else
        for (size_t k = 0; k < truth.size(); k += 2) {
            ds.positions[k] += oy;
            ds.positions[k + 1] += ox;
        }
    std::vector<std::uint64_t> os = t.shape("/truth/object");
    ds.offset_y = oy;
    ds.offset_x = ox;
    ds.obj_h = static_cast<int>(os[os.size() - 2]);
    ds.obj_w = static_cast<int>(os[os.size() - 1]);
    check_object(ds, ds.obj_h, ds.obj_w, "object_shape");
    for (size_t k = 0; k < truth.size(); k += 2)
        if (truth[k] < -0.5 || truth[k + 1] < -0.5 || std::nearbyint(truth[k]) + ds.h > ds.obj_h ||
            std::nearbyint(truth[k + 1]) + ds.w > ds.obj_w)
            throw data_error(tp + ": '/truth/positions' reach beyond '/truth/object'");
    ds.has_truth = true;
    ds.truth_path = tp;
}

}  // namespace

PtychoDataset open_ptycho_dataset(const std::string& path, const std::string& format, double pixel_size, int margin,
                                  const InstrumentOptions& input) {
    PtychoDataset ds;
    ds.path = path;
    ds.input = input;
    const bool raw_name = path.size() > 4 && path.compare(path.size() - 4, 4, ".raw") == 0;
    ds.format = format == "auto" ? (raw_name ? "empad" : !input.dataset.empty() ? "hdf5-4d" : "auto") : format;
    const bool positions_given = input.scan.ny > 0 || !input.scan.positions_file.empty();
    if (ds.format == "empad") {
        open_empad(ds);
        finish_instrument_dataset(ds, nullptr, margin);
        return ds;
    }
    const h5::File f = h5::File::open_read(path);
    if (ds.format == "hdf5-4d") {
        open_4d(f, ds);
        finish_instrument_dataset(ds, &f, margin);
        for (const std::string& a : root_attributes(f)) ds.metadata.push_back(a + " = " + attr_text(f, a));
        return ds;
    }
    ds.cxi = format == "cxi" || (format == "auto" && !f.exists("/data") && f.exists(kCxiData));
    ds.format = ds.cxi ? "cxi" : "native";
    ds.data_name = ds.cxi ? kCxiData : "/data";
    if (!f.exists(ds.data_name))
        throw data_error(path + ": no '" + ds.data_name + "' dataset (native layout: /data and /positions; CXI: " +
                         kCxiData + "; a 4-D array: set data.dataset)");
    if (positions_given)
        throw usage_error(path + ": " + ds.format + " data carry their positions ('" +
                          (ds.cxi ? std::string(kCxiTranslation) : std::string("/positions")) +
                          "'); data.scan_shape and data.positions are for EMPAD raw and 4-D HDF5 data");
    require_numbers(f, ds.data_name);
    const std::vector<std::uint64_t> shape = f.shape(ds.data_name);
    if (shape.size() != 3 || shape[0] == 0 || shape[1] < 2 || shape[2] < 2)
        throw data_error(path + ": '" + ds.data_name + "' must be N x H x W with N >= 1, H, W >= 2" +
                         (shape.size() == 4 ? " (a 4-D array: set data.dataset and data.format = hdf5-4d)" : ""));
    if (shape[0] > static_cast<std::uint64_t>(std::numeric_limits<int>::max()) || shape[1] > kMaxSide ||
        shape[2] > kMaxSide)
        throw data_error(path + ": '" + ds.data_name + "' is " + std::to_string(shape[0]) + " x " +
                         std::to_string(shape[1]) + " x " + std::to_string(shape[2]) + "; at most " +
                         std::to_string(std::numeric_limits<int>::max()) + " patterns of at most " +
                         std::to_string(static_cast<long long>(kMaxSide)) + " pixels a side are supported");
    ds.count = static_cast<std::int64_t>(shape[0]);
    set_frame(ds, static_cast<int>(shape[1]), static_cast<int>(shape[2]));
    check_sizes(ds);
    ds.positions = ds.cxi ? cxi_positions(f, ds, pixel_size) : native_positions(f, ds);
    const DetectorSettings& d = ds.input.detector;
    if (!ds.cxi && d.crop_y1 > 0)  // a cropped detector makes the object pixel larger by frame / crop
        for (size_t k = 0; k < ds.positions.size(); k += 2) {
            ds.positions[k] *= static_cast<double>(ds.h * d.bin) / ds.frame_h;
            ds.positions[k + 1] *= static_cast<double>(ds.w * d.bin) / ds.frame_w;
        }
    place_positions(d.crop_y1 > 0 ? nullptr : &f, ds, margin, ds.cxi);
    find_probe(f, ds);
    for (const std::string& a : root_attributes(f)) ds.metadata.push_back(a + " = " + attr_text(f, a));
    return ds;
}

std::vector<std::complex<double>> read_probe(const PtychoDataset& ds, int& modes) {
    modes = 0;
    if (!ds.has_probe) return {};
    const h5::File f = h5::File::open_read(ds.path);
    std::vector<std::uint64_t> dims;
    auto p = recon::h5x::read_complex(f, ds.cxi ? "/entry_1/instrument_1/source_1/illumination" : "/probe", dims);
    modes = ds.probe_modes;
    return p;
}

std::vector<std::complex<double>> read_truth_object(const PtychoDataset& ds, int slices) {
    if (!ds.has_truth) return {};
    const h5::File f = h5::File::open_read(ds.truth_path);
    std::vector<std::uint64_t> dims;
    auto o = recon::h5x::read_complex(f, "/truth/object", dims);
    if (dims.size() == 2) dims.insert(dims.begin(), 1);  // one slice
    if (dims.size() != 3 || static_cast<int>(dims[1]) != ds.obj_h || static_cast<int>(dims[2]) != ds.obj_w)
        return {};  // another frame than the reconstruction's: no comparison
    const int stored = static_cast<int>(dims[0]);
    if (stored == slices) return o;
    if (slices != 1) return {};  // another slice count: no slice to compare with
    // One slice against a thick truth: the slices' product (the projected object).
    const size_t on = static_cast<size_t>(ds.obj_h) * static_cast<size_t>(ds.obj_w);
    std::vector<std::complex<double>> projected(o.begin(), o.begin() + static_cast<std::ptrdiff_t>(on));
    for (int s = 1; s < stored; ++s)
        for (size_t i = 0; i < on; ++i) projected[i] *= o[static_cast<size_t>(s) * on + i];
    return projected;
}

}  // namespace ef

// SPDX-License-Identifier: MIT
// Frames as the instrument stored them (native/CXI rows, a 4-D HDF5 array, EMPAD raw) read and
// preprocessed: crop, bin, negative counts clipped, then the mask and the beam's centring
// decided once from the mean pattern (docs/reconstruction.md, "Instrument data").
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>

#include <ensemblefit/core/error.hpp>
#include <ensemblefit/recon/ptycho_dataset.hpp>

#include "src/config/capacity.hpp"
#include "src/io/h5.hpp"
#include "src/recon/ptycho_h5.hpp"

namespace ef {

namespace {

static_assert(std::endian::native == std::endian::little, "EMPAD raw frames are little-endian float32");

/// Stored frames [first, first + count) as float, each frame_h x frame_w (EMPAD's two extra rows dropped).
std::vector<float> read_stored(const PtychoDataset& ds, std::int64_t first, std::int64_t count) {
    const std::int64_t fn = static_cast<std::int64_t>(ds.frame_h) * ds.frame_w;
    std::vector<float> raw(static_cast<size_t>(count * fn));
    if (count == 0) return raw;
    if (ds.format == "empad") {
        std::ifstream in(ds.path, std::ios::binary);
        if (!in) throw data_error(ds.path + ": cannot open the EMPAD raw file");
        const std::int64_t stored = static_cast<std::int64_t>(ds.frame_rows) * ds.frame_w;
        in.seekg(static_cast<std::streamoff>(first * stored * 4));
        const std::int64_t block = 256;  // frames per read: a copy of 256 frames, not of the share
        std::vector<float> buf(static_cast<size_t>(std::min(block, count) * stored));
        for (std::int64_t b = 0; b < count; b += block) {
            const std::int64_t m = std::min(block, count - b);
            in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(m * stored * 4));
            if (in.gcount() != static_cast<std::streamsize>(m * stored * 4))
                throw data_error(ds.path + ": EMPAD frame " + std::to_string(first + b) +
                                 " cannot be read (the file is shorter than its size said)");
            for (std::int64_t j = 0; j < m; ++j)
                std::copy_n(buf.data() + j * stored, fn, raw.data() + (b + j) * fn);
        }
        return raw;
    }
    const h5::File f = h5::File::open_read(ds.path);
    try {
        if (ds.format == "hdf5-4d") {
            // Scan rows r0..r1 hold frames first..first+count-1 (x fastest): read them, keep the range.
            const std::int64_t nx = ds.input.scan.nx, r0 = first / nx, r1 = (first + count - 1) / nx;
            const bool whole_rows = first % nx == 0 && count % nx == 0;  // read in place
            std::vector<float> rows(whole_rows ? 0 : static_cast<size_t>((r1 - r0 + 1) * nx * fn));
            recon::h5x::read_float_rows(f, ds.data_name, static_cast<std::uint64_t>(r0),
                                        static_cast<std::uint64_t>(r1 - r0 + 1), whole_rows ? raw.data() : rows.data());
            if (!whole_rows) std::copy_n(rows.data() + (first - r0 * nx) * fn, count * fn, raw.data());
        } else {
            recon::h5x::read_float_rows(f, ds.data_name, static_cast<std::uint64_t>(first),
                                        static_cast<std::uint64_t>(count), raw.data());
        }
    } catch (const Error&) {
        throw data_error(ds.path + ": '" + ds.data_name + "' cannot be read (a damaged or truncated file?)");
    }
    return raw;
}

/// The median of `v` (modified: partially sorted).
double median(std::vector<double>& v) {
    if (v.empty()) return 0;
    const size_t m = v.size() / 2;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(m), v.end());
    double hi = v[m];
    if (v.size() % 2 == 1) return hi;
    const double lo = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(m));
    return 0.5 * (lo + hi);
}

/// Mask and shift applied to one centred h x w pattern (`tmp`: h x w scratch).
template <class T>
void correct_pattern(const PtychoDataset& ds, T* p, std::vector<T>& tmp) {
    const DetectorCorrection& c = ds.correction;
    const int h = ds.h, w = ds.w;
    if (!c.masked.empty()) {
        // Each masked pixel: the mean of its unmasked 8 neighbours (masked ones read as absent).
        std::vector<char> bad(static_cast<size_t>(h) * static_cast<size_t>(w), 0);
        for (std::int64_t q : c.masked) bad[static_cast<size_t>(q)] = 1;
        for (std::int64_t q : c.masked) {
            const int y = static_cast<int>(q / w), x = static_cast<int>(q % w);
            double sum = 0;
            int n = 0;
            for (int dy = -1; dy <= 1; ++dy)
                for (int dx = -1; dx <= 1; ++dx) {
                    const int yy = y + dy, xx = x + dx;
                    if ((dy == 0 && dx == 0) || yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
                    const size_t k = static_cast<size_t>(yy) * static_cast<size_t>(w) + static_cast<size_t>(xx);
                    if (bad[k]) continue;
                    sum += static_cast<double>(p[k]);
                    ++n;
                }
            p[q] = static_cast<T>(n > 0 ? sum / n : 0.0);
        }
    }
    if (c.shift_y != 0 || c.shift_x != 0) {
        // Whole-pixel shift; pixels that come from outside the detector are 0.
        tmp.assign(static_cast<size_t>(h) * static_cast<size_t>(w), T(0));
        for (int y = 0; y < h; ++y) {
            const int sy = y - c.shift_y;
            if (sy < 0 || sy >= h) continue;
            for (int x = 0; x < w; ++x) {
                const int sx = x - c.shift_x;
                if (sx >= 0 && sx < w)
                    tmp[static_cast<size_t>(y) * static_cast<size_t>(w) + static_cast<size_t>(x)] =
                        p[static_cast<size_t>(sy) * static_cast<size_t>(w) + static_cast<size_t>(sx)];
            }
        }
        std::copy(tmp.begin(), tmp.end(), p);
    }
}

}  // namespace

std::vector<float> read_frames(const PtychoDataset& ds, std::int64_t first, std::int64_t count, int threads,
                               std::int64_t& negatives) {
    const DetectorSettings& d = ds.input.detector;
    const std::int64_t n = static_cast<std::int64_t>(ds.h) * ds.w;
    // The frames as read (4 B each), the patterns and their FFT-order copy, and the worker's copy.
    const double need = 4.0 * static_cast<double>(count) *
                        (static_cast<double>(ds.frame_h) * ds.frame_w + 3.0 * static_cast<double>(n));
    if (exceeds_memory(need))
        throw data_error(ds.path + ": patterns " + std::to_string(first) + ".." + std::to_string(first + count - 1) +
                         " (this rank's share) " +
                         memory_refusal(need, "the patterns",
                                        std::to_string(static_cast<long long>(largest_count(16.0 * n))) +
                                            " patterns per rank; run on more ranks or nodes"));
    std::vector<float> raw = read_stored(ds, first, count);
    const bool cropped = d.crop_y1 > 0;
    if (!cropped && d.bin == 1) {  // the frames are the patterns: clip in place, no copy
        std::int64_t neg = 0;
        const auto total = static_cast<std::int64_t>(raw.size());
        if (d.clip_negative) {
#pragma omp parallel for num_threads(std::max(1, threads)) schedule(static) reduction(+ : neg) if (threads > 1)
            for (std::int64_t k = 0; k < total; ++k)
                if (raw[static_cast<size_t>(k)] < 0) {
                    raw[static_cast<size_t>(k)] = 0;
                    ++neg;
                }
        }
        negatives = neg;
        return raw;
    }
    const int y0 = cropped ? d.crop_y0 : 0, x0 = cropped ? d.crop_x0 : 0;
    const std::int64_t fn = static_cast<std::int64_t>(ds.frame_h) * ds.frame_w;
    std::vector<float> out(static_cast<size_t>(count * n));
    std::int64_t neg = 0;
#pragma omp parallel for num_threads(std::max(1, threads)) schedule(static) reduction(+ : neg) if (threads > 1)
    for (std::int64_t j = 0; j < count; ++j) {
        const float* src = raw.data() + j * fn;
        float* dst = out.data() + j * n;
        for (int u = 0; u < ds.h; ++u)
            for (int v = 0; v < ds.w; ++v) {
                double s = 0;  // the bin's sum (one pixel without binning)
                for (int a = 0; a < d.bin; ++a)
                    for (int b = 0; b < d.bin; ++b)
                        s += src[static_cast<std::int64_t>(y0 + u * d.bin + a) * ds.frame_w + x0 + v * d.bin + b];
                if (d.clip_negative && s < 0) {
                    s = 0;
                    ++neg;
                }
                dst[static_cast<std::int64_t>(u) * ds.w + v] = static_cast<float>(s);
            }
    }
    negatives = neg;
    return out;
}

void decide_detector_correction(PtychoDataset& ds, const std::vector<double>& mean) {
    const DetectorSettings& d = ds.input.detector;
    DetectorCorrection& c = ds.correction;
    c = DetectorCorrection{};
    const int h = ds.h, w = ds.w;
    // The median of each pixel's (up to 8) neighbours: the pattern without isolated pixels.
    std::vector<double> med(mean.size()), nb;
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) {
            nb.clear();
            for (int dy = -1; dy <= 1; ++dy)
                for (int dx = -1; dx <= 1; ++dx) {
                    const int yy = y + dy, xx = x + dx;
                    if ((dy != 0 || dx != 0) && yy >= 0 && yy < h && xx >= 0 && xx < w)
                        nb.push_back(mean[static_cast<size_t>(yy) * static_cast<size_t>(w) + static_cast<size_t>(xx)]);
                }
            med[static_cast<size_t>(y) * static_cast<size_t>(w) + static_cast<size_t>(x)] = median(nb);
        }
    const double peak = *std::max_element(med.begin(), med.end());
    if (d.mask) {
        // The threshold in robust standard deviations (1.4826 x the median absolute residual)
        // of the residuals where there is signal (the neighbours' median above 1 % of the
        // peak: the dark field's zeros would make any faint feature an outlier), at least
        // 1e-4 of the peak.
        std::vector<double> lit;
        for (size_t k = 0; k < mean.size(); ++k)
            if (med[k] > 0.01 * peak) lit.push_back(std::abs(mean[k] - med[k]));
        const double sigma = std::max(1.4826 * median(lit), 1e-4 * std::abs(peak));
        const double t = d.mask_threshold * sigma;
        for (size_t k = 0; k < mean.size(); ++k) {
            const double x = mean[k], m = med[k];
            const bool hot = x - m > t && x > 2 * m;
            const bool dead = m - x > t && x < 0.5 * m;
            if (hot || dead) c.masked.push_back(static_cast<std::int64_t>(k));
            c.hot += hot;
            c.dead += dead;
        }
    }
    if (d.center) {
        // The bright disc: pixels of the neighbour-median pattern above half its peak (a hot
        // pixel moves neither), their centre of mass weighted by intensity.
        double sw = 0, sy = 0, sx = 0;
        for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x) {
                const double v = med[static_cast<size_t>(y) * static_cast<size_t>(w) + static_cast<size_t>(x)];
                if (!(v > 0.5 * peak)) continue;
                sw += v;
                sy += v * y;
                sx += v * x;
            }
        if (sw > 0) {
            c.centre_y = sy / sw;
            c.centre_x = sx / sw;
            c.shift_y = static_cast<int>(std::lround(h / 2 - c.centre_y));
            c.shift_x = static_cast<int>(std::lround(w / 2 - c.centre_x));
        }
    }
    c.decided = true;
}

void finish_patterns(const PtychoDataset& ds, std::vector<float>& patterns, std::int64_t first, int threads) {
    const std::int64_t n = static_cast<std::int64_t>(ds.h) * ds.w;
    const std::int64_t count = static_cast<std::int64_t>(patterns.size()) / std::max<std::int64_t>(n, 1);
    const int hy = ds.h / 2, hx = ds.w / 2;
    const bool correct = !ds.correction.masked.empty() || ds.correction.shift_y != 0 || ds.correction.shift_x != 0;
    // FFT order and the finiteness check, patterns over the rank's threads (a 1 GB share is
    // seconds on one core); the first bad pattern is reported, as by a serial loop.
    std::int64_t bad = count;
#pragma omp parallel num_threads(std::max(1, threads)) if (threads > 1)
    {
        std::vector<float> row(static_cast<size_t>(n)), tmp;
#pragma omp for schedule(static) reduction(min : bad)
        for (std::int64_t j = 0; j < count; ++j) {
            float* p = patterns.data() + j * n;
            if (correct) correct_pattern(ds, p, tmp);
            std::copy_n(p, n, row.data());
            for (int u = 0; u < ds.h; ++u) {
                const float* srow = row.data() + static_cast<std::int64_t>((u + hy) % ds.h) * ds.w;
                float* drow = p + static_cast<std::int64_t>(u) * ds.w;
                for (int v = 0; v < ds.w - hx; ++v) drow[v] = srow[v + hx];
                for (int v = ds.w - hx; v < ds.w; ++v) drow[v] = srow[v + hx - ds.w];
            }
            bool finite = true;
            for (std::int64_t q = 0; q < n; ++q) finite &= std::isfinite(p[q]);
            if (!finite) bad = std::min(bad, j);
        }
    }
    if (bad < count) throw data_error(ds.path + ": pattern " + std::to_string(first + bad) + " has a non-finite value");
}

std::vector<float> read_patterns(const PtychoDataset& ds, std::int64_t first, std::int64_t count, int threads) {
    std::int64_t negatives = 0;
    std::vector<float> p = read_frames(ds, first, count, threads, negatives);
    finish_patterns(ds, p, first, threads);
    return p;
}

}  // namespace ef

// SPDX-License-Identifier: MIT
#include "src/recon/png_preview.hpp"

#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include <ensemblefit/core/error.hpp>

namespace ef::recon {

void write_gray_png(const std::string& path, int width, int height, const std::vector<std::uint8_t>& pixels) {
    std::unique_ptr<FILE, int (*)(FILE*)> fp(std::fopen(path.c_str(), "wb"), &std::fclose);
    if (!fp) throw runtime_error(path + ": cannot write PNG preview");
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
    png_infop info = png ? png_create_info_struct(png) : nullptr;
    if (!png || !info) {
        png_destroy_write_struct(&png, &info);
        throw runtime_error(path + ": libpng could not start");
    }
    // libpng reports errors by longjmp; nothing with a destructor lives between here and the end.
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        throw runtime_error(path + ": libpng failed while writing");
    }
    png_init_io(png, fp.get());
    png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), 8, PNG_COLOR_TYPE_GRAY,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < height; ++y)
        png_write_row(png, const_cast<png_bytep>(pixels.data() + static_cast<size_t>(y) * static_cast<size_t>(width)));
    png_write_end(png, nullptr);
    png_destroy_write_struct(&png, &info);
}

namespace {

std::vector<std::uint8_t> stretch(const std::vector<double>& v) {
    std::vector<double> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    const double lo = sorted[static_cast<size_t>(0.005 * static_cast<double>(sorted.size() - 1))];
    const double hi = sorted[static_cast<size_t>(0.995 * static_cast<double>(sorted.size() - 1))];
    std::vector<std::uint8_t> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
        const double t = hi > lo ? (v[i] - lo) / (hi - lo) : 0.5;
        out[i] = static_cast<std::uint8_t>(std::lround(255.0 * std::clamp(t, 0.0, 1.0)));
    }
    return out;
}

}  // namespace

std::vector<std::string> write_previews(const std::string& stem, const std::vector<std::complex<double>>& object,
                                        int obj_h, int obj_w, const std::vector<std::complex<double>>& probe, int modes,
                                        int h, int w) {
    std::vector<std::string> written;
    std::vector<double> phase(object.size()), amp(object.size());
    for (size_t i = 0; i < object.size(); ++i) {
        phase[i] = std::arg(object[i]);
        amp[i] = std::abs(object[i]);
    }
    write_gray_png(stem + "_phase.png", obj_w, obj_h, stretch(phase));
    written.push_back(stem + "_phase.png");
    write_gray_png(stem + "_amplitude.png", obj_w, obj_h, stretch(amp));
    written.push_back(stem + "_amplitude.png");
    // Probe modes side by side, 2 px gaps, each mode's amplitude over its own maximum.
    const int gap = 2, width = modes * w + (modes - 1) * gap;
    std::vector<std::uint8_t> tiles(static_cast<size_t>(width) * static_cast<size_t>(h), 0);
    const size_t n = static_cast<size_t>(h) * static_cast<size_t>(w);
    for (int k = 0; k < modes; ++k) {
        double mx = 0;
        for (size_t q = 0; q < n; ++q) mx = std::max(mx, std::abs(probe[static_cast<size_t>(k) * n + q]));
        for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x) {
                const double a = std::abs(probe[static_cast<size_t>(k) * n + static_cast<size_t>(y) * w + x]);
                tiles[static_cast<size_t>(y) * width + static_cast<size_t>(k * (w + gap) + x)] =
                    static_cast<std::uint8_t>(std::lround(255.0 * (mx > 0 ? a / mx : 0.0)));
            }
    }
    write_gray_png(stem + "_probe.png", width, h, tiles);
    written.push_back(stem + "_probe.png");
    return written;
}

}  // namespace ef::recon

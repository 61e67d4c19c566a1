// SPDX-License-Identifier: MIT
#include "src/recon/preview_canvas.hpp"

#include <png.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <ensemblefit/core/error.hpp>

#include "src/run/output_guard.hpp"

namespace ef::recon {

namespace {

/// One 5 x 7 glyph: seven rows of five columns, '#' set.
struct Glyph {
    char c;
    const char* rows[7];
};

// clang-format off
constexpr Glyph kFont[] = {
    {'0', {".###.", "#...#", "#..##", "#.#.#", "##..#", "#...#", ".###."}},
    {'1', {"..#..", ".##..", "..#..", "..#..", "..#..", "..#..", ".###."}},
    {'2', {".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####"}},
    {'3', {"#####", "...#.", "..#..", "...#.", "....#", "#...#", ".###."}},
    {'4', {"...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#."}},
    {'5', {"#####", "#....", "####.", "....#", "....#", "#...#", ".###."}},
    {'6', {"..##.", ".#...", "#....", "####.", "#...#", "#...#", ".###."}},
    {'7', {"#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#..."}},
    {'8', {".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###."}},
    {'9', {".###.", "#...#", "#...#", ".####", "....#", "...#.", ".##.."}},
    {'.', {".....", ".....", ".....", ".....", ".....", ".##..", ".##.."}},
    {'-', {".....", ".....", ".....", ".###.", ".....", ".....", "....."}},
    {'+', {".....", "..#..", "..#..", "#####", "..#..", "..#..", "....."}},
    {'%', {"##...", "##..#", "...#.", "..#..", ".#...", "#..##", "...##"}},
    {':', {".....", ".##..", ".##..", ".....", ".##..", ".##..", "....."}},
    {'/', {"....#", "...#.", "...#.", "..#..", ".#...", ".#...", "#...."}},
    {'A', {".###.", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"}},
    {'a', {".....", ".....", ".###.", "....#", ".####", "#...#", ".####"}},
    {'d', {"....#", "....#", ".##.#", "#..##", "#...#", "#...#", ".####"}},
    {'e', {".....", ".....", ".###.", "#...#", "#####", "#....", ".###."}},
    {'g', {".....", ".....", ".####", "#...#", ".####", "....#", ".###."}},
    {'i', {"..#..", ".....", ".##..", "..#..", "..#..", "..#..", ".###."}},
    {'l', {".##..", "..#..", "..#..", "..#..", "..#..", "..#..", ".###."}},
    {'m', {".....", ".....", "##.#.", "#.#.#", "#.#.#", "#...#", "#...#"}},
    {'n', {".....", ".....", "#.##.", "##..#", "#...#", "#...#", "#...#"}},
    {'o', {".....", ".....", ".###.", "#...#", "#...#", "#...#", ".###."}},
    {'p', {".....", ".....", "####.", "#...#", "####.", "#....", "#...."}},
    {'r', {".....", ".....", "#.##.", "##..#", "#....", "#....", "#...."}},
    {'s', {".....", ".....", ".####", "#....", ".###.", "....#", "####."}},
    {'t', {".#...", ".#...", "###..", ".#...", ".#...", ".#..#", "..##."}},
    {'x', {".....", ".....", "#...#", ".#.#.", "..#..", ".#.#.", "#...#"}},
};
// clang-format on

const Glyph* glyph_of(char c) {
    for (const Glyph& g : kFont)
        if (g.c == c) return &g;
    return nullptr;
}

/// Viridis at t = 0, 1/8, ..., 1.
constexpr std::array<std::array<double, 3>, 9> kViridis{{{68, 1, 84},
                                                         {71, 44, 122},
                                                         {59, 81, 139},
                                                         {44, 113, 142},
                                                         {33, 144, 141},
                                                         {39, 173, 129},
                                                         {92, 200, 99},
                                                         {170, 220, 50},
                                                         {253, 231, 37}}};

}  // namespace

Rgb colour_map(double t) {
    if (!(t >= 0)) t = 0;  // NaN too
    t = std::min(t, 1.0);
    const double x = t * 8.0;
    const size_t i = std::min<size_t>(7, static_cast<size_t>(x));
    const double f = x - static_cast<double>(i);
    auto mix = [&](int k) {
        const double v = kViridis[i][static_cast<size_t>(k)] * (1 - f) + kViridis[i + 1][static_cast<size_t>(k)] * f;
        return static_cast<std::uint8_t>(std::lround(v));
    };
    return {mix(0), mix(1), mix(2)};
}

Canvas::Canvas(int width, int height, Rgb background) : width_(width), height_(height) {
    if (width < 1 || height < 1) throw runtime_error("preview: empty image");
    rgb_.resize(static_cast<size_t>(width) * static_cast<size_t>(height) * 3);
    fill_rect(0, 0, width, height, background);
}

void Canvas::set(int x, int y, Rgb c) {
    if (x < 0 || y < 0 || x >= width_ || y >= height_) return;
    std::uint8_t* p = rgb_.data() + 3 * (static_cast<size_t>(y) * static_cast<size_t>(width_) + static_cast<size_t>(x));
    p[0] = c.r;
    p[1] = c.g;
    p[2] = c.b;
}

Rgb Canvas::at(int x, int y) const {
    if (x < 0 || y < 0 || x >= width_ || y >= height_) return {};
    const std::uint8_t* p =
        rgb_.data() + 3 * (static_cast<size_t>(y) * static_cast<size_t>(width_) + static_cast<size_t>(x));
    return {p[0], p[1], p[2]};
}

void Canvas::fill_rect(int x, int y, int w, int h, Rgb c) {
    for (int j = std::max(0, y); j < std::min(height_, y + h); ++j)
        for (int i = std::max(0, x); i < std::min(width_, x + w); ++i) set(i, j, c);
}

void Canvas::line(int x0, int y0, int x1, int y1, Rgb c) {
    // Bresenham: every step moves one pixel along the longer axis.
    const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
    const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    int err = dx + dy;
    for (;;) {
        set(x0, y0, c);
        if (x0 == x1 && y0 == y1) return;
        const int e2 = 2 * err;
        if (e2 >= dy) {
            err += dy;
            x0 += sx;
        }
        if (e2 <= dx) {
            err += dx;
            y0 += sy;
        }
    }
}

bool Canvas::drawable(const std::string& text) {
    return std::all_of(text.begin(), text.end(), [](char c) { return c == ' ' || glyph_of(c); });
}

void Canvas::text(int x, int y, const std::string& text, Rgb c, int scale) {
    for (size_t k = 0; k < text.size(); ++k) {
        const Glyph* g = glyph_of(text[k]);
        if (!g) continue;
        const int gx = x + static_cast<int>(k) * 6 * scale;
        for (int row = 0; row < 7; ++row)
            for (int col = 0; col < 5; ++col)
                if (g->rows[row][col] == '#') fill_rect(gx + col * scale, y + row * scale, scale, scale, c);
    }
}

void write_rgb_png(const std::string& path, const Canvas& c) {
    PendingOutput pending(path);
    {
        std::unique_ptr<FILE, int (*)(FILE*)> fp(std::fopen(pending.temp_path().c_str(), "wb"), &std::fclose);
        if (!fp) throw runtime_error(path + ": cannot write PNG preview");
        png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
        png_infop info = png ? png_create_info_struct(png) : nullptr;
        if (!png || !info) {
            png_destroy_write_struct(&png, &info);
            throw runtime_error(path + ": libpng could not start");
        }
        // libpng reports errors by longjmp; nothing with a destructor starts between here and the end.
        if (setjmp(png_jmpbuf(png))) {
            png_destroy_write_struct(&png, &info);
            throw runtime_error(path + ": libpng failed while writing");
        }
        png_init_io(png, fp.get());
        png_set_IHDR(png, info, static_cast<png_uint_32>(c.width()), static_cast<png_uint_32>(c.height()), 8,
                     PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
        png_write_info(png, info);
        const size_t row = 3 * static_cast<size_t>(c.width());
        for (int y = 0; y < c.height(); ++y)
            png_write_row(png, const_cast<png_bytep>(c.pixels().data() + static_cast<size_t>(y) * row));
        png_write_end(png, nullptr);
        png_destroy_write_struct(&png, &info);
        if (std::fflush(fp.get()) != 0) throw runtime_error(path + ": writing the PNG preview failed");
    }
    pending.commit();
}

}  // namespace ef::recon

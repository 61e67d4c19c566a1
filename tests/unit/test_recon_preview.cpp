// SPDX-License-Identifier: MIT
// The reconstruction's PNG previews: sizes, colour bar, scale bar, labels, and the files read
// back with libpng.
#include <png.h>

#include <cmath>
#include <complex>
#include <filesystem>
#include <vector>

#include <catch2/catch.hpp>

#include "src/recon/png_preview.hpp"
#include "temp_dir.hpp"

using namespace ef::recon;
using C = std::complex<double>;

namespace {

/// A PNG read back as RGB (libpng's simplified API).
struct ReadPng {
    int width = 0, height = 0;
    std::vector<unsigned char> rgb;
    Rgb at(int x, int y) const {
        const unsigned char* p = rgb.data() + 3 * (static_cast<size_t>(y) * static_cast<size_t>(width) + static_cast<size_t>(x));
        return {p[0], p[1], p[2]};
    }
};

ReadPng read_png(const std::string& path) {
    png_image image{};
    image.version = PNG_IMAGE_VERSION;
    REQUIRE(png_image_begin_read_from_file(&image, path.c_str()) != 0);
    image.format = PNG_FORMAT_RGB;
    ReadPng out;
    out.width = static_cast<int>(image.width);
    out.height = static_cast<int>(image.height);
    out.rgb.resize(PNG_IMAGE_SIZE(image));
    REQUIRE(png_image_finish_read(&image, nullptr, out.rgb.data(), 0, nullptr) != 0);
    return out;
}

/// A phase ramp along x (0 .. 1 rad) of h x w.
std::vector<double> ramp(int h, int w) {
    std::vector<double> v(static_cast<size_t>(h * w));
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) v[static_cast<size_t>(y * w + x)] = static_cast<double>(x) / (w - 1);
    return v;
}

}  // namespace

TEST_CASE("preview font: a glyph's pixels and blanks", "[recon][preview]") {
    Canvas c(20, 10, Rgb{0, 0, 0});

    c.text(0, 0, "1", Rgb{255, 255, 255});

    CHECK(c.at(2, 0) == Rgb{255, 255, 255});  // "..#.." top row
    CHECK(c.at(0, 0) == Rgb{0, 0, 0});
    CHECK(c.at(1, 6) == Rgb{255, 255, 255});  // ".###." bottom row
    CHECK(c.at(0, 6) == Rgb{0, 0, 0});
    CHECK(Canvas::text_width("12.5%") == 30);
}

TEST_CASE("object preview: every object pixel shown with a colour bar and a scale bar", "[recon][preview]") {
    const int h = 40, w = 60;
    const std::vector<double> v = ramp(h, w);
    MapLayout L;

    const Canvas c = object_preview(v, h, w, "rad", 0.0, &L);

    CHECK(L.zoom == 8);  // 512 / 60, whole
    CHECK(L.lo == Approx(0.0));
    CHECK(L.hi == Approx(59.0 / 59.0 - 0.0).margin(0.02));  // the 99.5 percentile of the ramp
    CHECK(c.width() > w * L.zoom + L.bar_width);
    CHECK(c.height() > h * L.zoom);
    // Map: the left column is the lowest value, a middle column its colour on the bar's scale.
    CHECK(c.at(L.left, L.top) == colour_map(0.0));
    CHECK(c.at(L.left + 7, L.top + h * L.zoom - 1) == colour_map(0.0));  // one object pixel = 8 x 8
    const int x = 30;
    CHECK(c.at(L.left + x * L.zoom + 3, L.top + 5) == colour_map((v[static_cast<size_t>(x)] - L.lo) / (L.hi - L.lo)));
    // Colour bar: hi at the top, lo at the bottom.
    CHECK(c.at(L.bar_x + 1, L.top) == colour_map(1.0));
    CHECK(c.at(L.bar_x + 1, L.top + h * L.zoom - 1) == colour_map(0.0));
    // Scale bar: 60 / 5 = 12 -> 10 object pixels, 80 image pixels of ink from the map's left edge.
    const int th = Canvas::text_height(2);
    const int bar_y = L.scale_bar_y + (th - 4) / 2 + 1;
    CHECK(c.at(L.left, bar_y) == Rgb{235, 235, 235});
    CHECK(c.at(L.left + 79, bar_y) == Rgb{235, 235, 235});
    CHECK(!(c.at(L.left + 81, bar_y) == Rgb{235, 235, 235}));
}

TEST_CASE("object preview: a scale bar in nanometres when the pixel size is known", "[recon][preview]") {
    const int h = 100, w = 100;
    MapLayout L;

    // 0.1 nm pixels: 10 nm wide, a fifth is 2 nm = 20 object pixels = 100 image pixels at zoom 5.
    const Canvas c = object_preview(ramp(h, w), h, w, "rad", 1e-10, &L);

    REQUIRE(L.zoom == 5);
    const int bar_y = L.scale_bar_y + (Canvas::text_height(2) - 4) / 2 + 1;
    CHECK(c.at(L.left + 99, bar_y) == Rgb{235, 235, 235});
    CHECK(!(c.at(L.left + 101, bar_y) == Rgb{235, 235, 235}));
}

TEST_CASE("probe preview: modes side by side, each over its own maximum", "[recon][preview]") {
    const int h = 32, w = 32, modes = 2;
    std::vector<C> probe(static_cast<size_t>(modes * h * w), C{0, 0});
    probe[static_cast<size_t>(16 * w + 16)] = C{3, 0};               // mode 0: one bright pixel
    probe[static_cast<size_t>(h * w + 16 * w + 16)] = C{0, 1};       // mode 1: 1/9 of the power

    const Canvas c = probe_preview(probe, modes, h, w);

    // 128 / 32 = 4 image pixels per probe pixel, 8 between tiles, 10 of margin.
    CHECK(c.width() == 2 * 10 + 2 * 128 + 8);
    CHECK(c.height() == 2 * 10 + 7 + 4 + 128);
    const int y0 = 10 + 7 + 4;
    CHECK(c.at(10 + 16 * 4, y0 + 16 * 4) == colour_map(1.0));
    CHECK(c.at(10 + 136 + 16 * 4 + 3, y0 + 16 * 4 + 3) == colour_map(1.0));
    CHECK(c.at(10, y0) == colour_map(0.0));
    // Each label ("0: 90.0%", "1: 10.0%") puts ink above its tile.
    int ink0 = 0, ink1 = 0;
    for (int y = 10; y < 17; ++y)
        for (int x = 0; x < 128; ++x) {
            ink0 += c.at(10 + x, y) == Rgb{235, 235, 235} ? 1 : 0;
            ink1 += c.at(146 + x, y) == Rgb{235, 235, 235} ? 1 : 0;
        }
    CHECK(ink0 > 20);
    CHECK(ink1 > 20);
}

TEST_CASE("loss preview: the curve falls from the top left to the bottom right", "[recon][preview]") {
    std::vector<double> loss;
    for (int i = 0; i < 50; ++i) loss.push_back(std::pow(10.0, -0.05 * i));

    const Canvas c = loss_preview(loss);

    REQUIRE(c.width() == 480);
    REQUIRE(c.height() == 300);
    // The curve's colour near the plot's top-left and bottom-right corners, none in the middle top.
    auto has_curve = [&](int x0, int y0, int x1, int y1) {
        for (int y = y0; y < y1; ++y)
            for (int x = x0; x < x1; ++x)
                if (c.at(x, y) == colour_map(0.75)) return true;
        return false;
    };
    CHECK(has_curve(40, 20, 80, 40));
    CHECK(has_curve(430, 255, 471, 276));
    CHECK(!has_curve(300, 20, 470, 60));
}

TEST_CASE("previews: written as PNG files, read back with the same pixels", "[recon][preview]") {
    ef_test::TempDir dir;
    const int h = 24, w = 30, modes = 2;
    std::vector<C> object(static_cast<size_t>(h * w));
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) object[static_cast<size_t>(y * w + x)] = std::polar(1.0, 0.02 * x);
    std::vector<C> probe(static_cast<size_t>(modes * 16 * 16), C{1, 0});
    const std::vector<double> loss{3, 2, 1.5};
    PreviewInputs in;
    in.object = object;
    in.obj_h = h;
    in.obj_w = w;
    in.probe = probe;
    in.modes = modes;
    in.h = in.w = 16;
    in.loss = loss;

    const auto written = write_previews(dir.file("out"), in);

    REQUIRE(written.size() == 4);
    std::vector<double> phase(object.size());
    for (size_t i = 0; i < object.size(); ++i) phase[i] = std::arg(object[i]);
    MapLayout L;
    const Canvas expect = object_preview(phase, h, w, "rad", 0.0, &L);
    const ReadPng got = read_png(dir.file("out_phase.png"));
    CHECK(got.width == expect.width());
    CHECK(got.height == expect.height());
    CHECK(got.at(L.left, L.top) == expect.at(L.left, L.top));
    CHECK(got.at(L.bar_x + 1, L.top) == colour_map(1.0));
    CHECK(read_png(dir.file("out_loss.png")).width == 480);
    CHECK(read_png(dir.file("out_probe.png")).height == 2 * 10 + 7 + 4 + 16 * 4);  // 128 / 16 = 8, at most 4
    CHECK(!std::filesystem::exists(dir.file("out_phase.png.creating")));
}

TEST_CASE("preview font: every label the previews draw has its glyphs (the g of 'loss log')", "[recon][preview]") {
    std::vector<double> loss;
    for (int i = 0; i < 10; ++i) loss.push_back(1.0 / (i + 1));

    const Canvas c = loss_preview(loss);

    for (const char* label : {"loss log", "loss", "rad", "nm", "A", "px", "0: 97.5%", "1.5e-03"})
        CHECK(Canvas::drawable(label));
    CHECK(!Canvas::drawable("loss K"));  // no capital letter but A
    // The title's 8th character (g, from x = 10 + 7 x 6) puts ink on its 5 x 7 cell.
    int ink = 0;
    for (int y = 10; y < 17; ++y)
        for (int x = 52; x < 57; ++x) ink += c.at(x, y) == Rgb{235, 235, 235} ? 1 : 0;
    CHECK(ink > 8);
}

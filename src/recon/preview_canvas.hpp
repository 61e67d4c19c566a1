// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ef::recon {

struct Rgb {
    std::uint8_t r = 0, g = 0, b = 0;
    bool operator==(const Rgb& o) const { return r == o.r && g == o.g && b == o.b; }
};

/// The colour map of the previews at t in [0, 1] (clamped): viridis, from 9 of its samples
/// linearly interpolated, so that equal steps of the value look like equal steps of colour.
Rgb colour_map(double t);

/**
 * An RGB image to draw the previews on (internal): rectangles, lines and text in a 5 x 7 bitmap
 * font of the characters numbers and units need (digits, ". - + % : / e", and the letters of
 * "px nm A rad it loss log mode"; any other character draws as a space: drawable() says whether a
 * label has every glyph). Pixels outside are ignored,
 * so a label may run off the edge without a check at every call.
 */
class Canvas {
   public:
    Canvas(int width, int height, Rgb background);
    int width() const { return width_; }
    int height() const { return height_; }
    void set(int x, int y, Rgb c);
    Rgb at(int x, int y) const;
    void fill_rect(int x, int y, int w, int h, Rgb c);
    void line(int x0, int y0, int x1, int y1, Rgb c);
    /// `text` with its top-left corner at (x, y), each font pixel `scale` x `scale` pixels.
    void text(int x, int y, const std::string& text, Rgb c, int scale = 1);
    /// Whether every character of `text` but spaces has a glyph (else it would draw as a space:
    /// the loss preview's title read "loss lo" while the font had no g).
    static bool drawable(const std::string& text);
    /// The width of text() in pixels (6 per character at scale 1, the last column blank).
    static int text_width(const std::string& text, int scale = 1) { return 6 * scale * static_cast<int>(text.size()); }
    static int text_height(int scale = 1) { return 7 * scale; }
    /// Row-major RGB, 3 bytes per pixel.
    const std::vector<std::uint8_t>& pixels() const { return rgb_; }

   private:
    int width_, height_;
    std::vector<std::uint8_t> rgb_;
};

/// Writes `c` as an 8-bit RGB PNG under a temporary name beside `path`, then renames it over
/// `path` (PendingOutput): a preview is the previous good one or the new one, never half a file.
void write_rgb_png(const std::string& path, const Canvas& c);

}  // namespace ef::recon

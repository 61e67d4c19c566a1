// SPDX-License-Identifier: MIT
#include "src/recon/png_preview.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <ensemblefit/core/error.hpp>

namespace ef::recon {

namespace {

constexpr Rgb kBackground{32, 32, 32};
constexpr Rgb kInk{235, 235, 235};
constexpr Rgb kAxis{140, 140, 140};
constexpr int kMargin = 10;

std::string number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", v);
    return buf;
}

/// The 0.5 and 99.5 percentiles (the min and max of fewer than 200 values).
void stretch_range(std::span<const double> v, double& lo, double& hi) {
    std::vector<double> sorted(v.begin(), v.end());
    std::sort(sorted.begin(), sorted.end());
    lo = sorted[static_cast<size_t>(0.005 * static_cast<double>(sorted.size() - 1))];
    hi = sorted[static_cast<size_t>(0.995 * static_cast<double>(sorted.size() - 1))];
}

/// The largest of 1, 2, 5 x 10^k not above v (v > 0).
double nice_below(double v) {
    const double p = std::pow(10.0, std::floor(std::log10(v)));
    for (double m : {5.0, 2.0, 1.0})
        if (m * p <= v * (1 + 1e-12)) return m * p;
    return p;
}

/// A scale bar about a fifth of `w` object pixels long: its length in object pixels and label.
void scale_bar(int w, double pixel_size, int& length, std::string& label) {
    if (pixel_size > 0) {
        const double unit = w * pixel_size / 5 >= 1e-9 ? 1e-9 : 1e-10;
        const double v = nice_below(w * pixel_size / 5 / unit);
        length = std::max(1, static_cast<int>(std::lround(v * unit / pixel_size)));
        label = number(v) + (unit == 1e-9 ? " nm" : " A");
        return;
    }
    length = static_cast<int>(nice_below(std::max(1.0, w / 5.0)));
    label = std::to_string(length) + " px";
}

}  // namespace

Canvas object_preview(std::span<const double> values, int h, int w, const std::string& unit, double pixel_size,
                      MapLayout* layout) {
    MapLayout L;
    L.zoom = std::clamp(512 / std::max(h, w), 1, 8);
    const int ts = w * L.zoom >= 300 ? 2 : 1;  // text scale
    stretch_range(values, L.lo, L.hi);
    const std::string top = number(L.hi), mid = number(0.5 * (L.lo + L.hi)), bottom = number(L.lo);
    const int label_w = std::max({Canvas::text_width(top, ts), Canvas::text_width(mid, ts),
                                  Canvas::text_width(bottom, ts), Canvas::text_width(unit, ts)});
    L.left = L.top = kMargin;
    L.bar_x = L.left + w * L.zoom + 10;
    L.bar_width = 8 * ts;
    L.scale_bar_y = L.top + h * L.zoom + 8;
    const int bar_th = 2 * ts;
    Canvas c(L.bar_x + L.bar_width + 6 + label_w + kMargin,
             std::max(L.scale_bar_y + Canvas::text_height(ts), L.top + h * L.zoom + 6 + Canvas::text_height(ts)) +
                 kMargin,
             kBackground);
    const double span = L.hi > L.lo ? L.hi - L.lo : 1.0;
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) {
            const double v = values[static_cast<size_t>(y) * static_cast<size_t>(w) + static_cast<size_t>(x)];
            c.fill_rect(L.left + x * L.zoom, L.top + y * L.zoom, L.zoom, L.zoom,
                        colour_map(L.hi > L.lo ? (v - L.lo) / span : 0.5));
        }
    const int H = h * L.zoom;
    for (int y = 0; y < H; ++y)  // the top row is hi, the bottom row lo
        c.fill_rect(L.bar_x, L.top + y, L.bar_width, 1, colour_map(H > 1 ? 1.0 - double(y) / (H - 1) : 1.0));
    const int lx = L.bar_x + L.bar_width + 6, th = Canvas::text_height(ts);
    c.text(lx, L.top, top, kInk, ts);
    c.text(lx, L.top + (H - th) / 2, mid, kInk, ts);
    c.text(lx, L.top + H - th, bottom, kInk, ts);
    c.text(L.bar_x, L.top + H + 6, unit, kInk, ts);
    int length = 0;
    std::string label;
    scale_bar(w, pixel_size, length, label);
    c.fill_rect(L.left, L.scale_bar_y + (th - bar_th) / 2, length * L.zoom, bar_th, kInk);
    c.text(L.left + length * L.zoom + 6, L.scale_bar_y, label, kInk, ts);
    if (layout) *layout = L;
    return c;
}

Canvas probe_preview(std::span<const std::complex<double>> probe, int modes, int h, int w) {
    const size_t n = static_cast<size_t>(h) * static_cast<size_t>(w);
    const int zoom = std::clamp(128 / std::max(h, w), 1, 4), gap = 8;
    std::vector<double> power(static_cast<size_t>(modes), 0.0), peak(static_cast<size_t>(modes), 0.0);
    double total = 0;
    for (size_t k = 0; k < power.size(); ++k)
        for (size_t q = 0; q < n; ++q) {
            const double a = std::abs(probe[k * n + q]);
            power[k] += a * a;
            peak[k] = std::max(peak[k], a);
        }
    for (double p : power) total += p;
    const int tile_w = w * zoom, th = Canvas::text_height();
    Canvas c(2 * kMargin + modes * tile_w + (modes - 1) * gap, 2 * kMargin + th + 4 + h * zoom, kBackground);
    for (int k = 0; k < modes; ++k) {
        const size_t kk = static_cast<size_t>(k);
        const int x0 = kMargin + k * (tile_w + gap), y0 = kMargin + th + 4;
        char label[48];
        std::snprintf(label, sizeof label, "%d: %.1f%%", k, total > 0 ? 100.0 * power[kk] / total : 0.0);
        c.text(x0, kMargin, label, kInk);
        for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x) {
                const double a = std::abs(probe[kk * n + static_cast<size_t>(y) * static_cast<size_t>(w) + static_cast<size_t>(x)]);
                c.fill_rect(x0 + x * zoom, y0 + y * zoom, zoom, zoom, colour_map(peak[kk] > 0 ? a / peak[kk] : 0.0));
            }
    }
    return c;
}

Canvas loss_preview(std::span<const double> loss) {
    const int width = 480, height = 300;
    bool positive = true;
    for (double v : loss) positive = positive && v > 0 && std::isfinite(v);
    auto y_of = [&](double v) { return positive ? std::log10(v) : v; };
    double lo = 0, hi = 0;
    if (!loss.empty()) lo = hi = y_of(loss[0]);
    for (double v : loss)
        if (std::isfinite(y_of(v))) {
            lo = std::min(lo, y_of(v));
            hi = std::max(hi, y_of(v));
        }
    const std::string top = number(positive ? std::pow(10.0, hi) : hi);
    const std::string bottom = number(positive ? std::pow(10.0, lo) : lo);
    const int th = Canvas::text_height();
    const int x0 = kMargin + std::max(Canvas::text_width(top), Canvas::text_width(bottom)) + 6;
    const int x1 = width - kMargin, y0 = kMargin + th + 6, y1 = height - kMargin - th - 6;
    Canvas c(width, height, kBackground);
    c.text(kMargin, kMargin, positive ? "loss log" : "loss", kInk);
    c.line(x0, y0, x0, y1, kAxis);
    c.line(x0, y1, x1, y1, kAxis);
    c.text(kMargin, y0, top, kInk);
    c.text(kMargin, y1 - th, bottom, kInk);
    c.text(x0, y1 + 6, "1", kInk);
    const std::string last = std::to_string(loss.size());
    c.text(x1 - Canvas::text_width(last), y1 + 6, last, kInk);
    const double span = hi > lo ? hi - lo : 1.0;
    const size_t N = loss.size();
    int px = -1, py = -1;
    for (size_t i = 0; i < N; ++i) {
        if (!std::isfinite(y_of(loss[i]))) continue;
        const int x = N > 1 ? x0 + static_cast<int>(std::lround(double(i) * (x1 - x0) / double(N - 1))) : (x0 + x1) / 2;
        const int y = y1 - static_cast<int>(std::lround((y_of(loss[i]) - lo) / span * (y1 - y0)));
        if (px >= 0) c.line(px, py, x, y, colour_map(0.75));
        else c.fill_rect(x - 1, y - 1, 3, 3, colour_map(0.75));
        px = x;
        py = y;
    }
    return c;
}

std::vector<std::string> write_previews(const std::string& stem, const PreviewInputs& in) {
    std::vector<std::string> written;
    std::vector<double> phase(in.object.size()), amp(in.object.size());
    for (size_t i = 0; i < in.object.size(); ++i) {
        phase[i] = std::arg(in.object[i]);
        amp[i] = std::abs(in.object[i]);
    }
    auto put = [&](const std::string& suffix, const Canvas& c) {
        write_rgb_png(stem + suffix, c);
        written.push_back(stem + suffix);
    };
    put("_phase.png", object_preview(phase, in.obj_h, in.obj_w, "rad", in.pixel_size));
    put("_amplitude.png", object_preview(amp, in.obj_h, in.obj_w, "", in.pixel_size));
    put("_probe.png", probe_preview(in.probe, in.modes, in.h, in.w));
    if (!in.loss.empty()) put("_loss.png", loss_preview(in.loss));
    return written;
}

}  // namespace ef::recon

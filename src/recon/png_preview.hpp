// SPDX-License-Identifier: MIT
#pragma once

#include <complex>
#include <span>
#include <string>
#include <vector>

#include "src/recon/preview_canvas.hpp"

namespace ef::recon {

/// What the previews show: the object (obj_h x obj_w), the probe modes (modes x h x w), the
/// loss per iteration, and the object pixel size in metres (0: unknown, the scale bar in pixels).
struct PreviewInputs {
    std::span<const std::complex<double>> object;
    int obj_h = 0, obj_w = 0;
    std::span<const std::complex<double>> probe;
    int modes = 0, h = 0, w = 0;
    std::span<const double> loss;
    double pixel_size = 0;
};

/// Where an object map lies on its preview (object_preview()): `zoom` x `zoom` pixels per object
/// pixel from (left, top); the colour bar from (bar_x, top), bar_width wide, as high as the map.
struct MapLayout {
    int zoom = 1, left = 0, top = 0, bar_x = 0, bar_width = 0, scale_bar_y = 0;
    double lo = 0, hi = 0;  ///< the values at the bottom and the top of the colour bar
};

/**
 * A map of `values` (h x w): every object pixel shown (zoomed by a whole factor to about 512
 * pixels when smaller), coloured by colour_map() between the 0.5 and 99.5 percentiles, with a
 * colour bar labelled with those values and `unit`, and a scale bar below (nm or Angstrom when
 * `pixel_size` (m) is known, else pixels).
 */
Canvas object_preview(std::span<const double> values, int h, int w, const std::string& unit, double pixel_size,
                      MapLayout* layout = nullptr);

/// The probe modes' amplitudes side by side (each over its own maximum), each labelled with
/// its index and its fraction of the total power.
Canvas probe_preview(std::span<const std::complex<double>> probe, int modes, int h, int w);

/// The loss per iteration (log scale when all are positive), axes labelled with the first and
/// last iteration and the extreme losses.
Canvas loss_preview(std::span<const double> loss);

/**
 * The previews people look at (internal), as RGB PNGs, each written under a temporary name and
 * renamed (write_rgb_png): `stem`_phase.png, `stem`_amplitude.png, `stem`_probe.png and, with a
 * loss, `stem`_loss.png. Returns the paths written.
 */
std::vector<std::string> write_previews(const std::string& stem, const PreviewInputs& in);

}  // namespace ef::recon

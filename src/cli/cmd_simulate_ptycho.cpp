// SPDX-License-Identifier: MIT
// `ensemblefit simulate ptycho --out FILE.h5 ...`: a synthetic ptychography dataset with truth.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <ensemblefit/core/error.hpp>
#include <ensemblefit/recon/ptycho_simulation.hpp>
#include <ensemblefit/recon/recon_config.hpp>

#include "src/cli/commands.hpp"
#include "src/config/capacity.hpp"
#include "src/config/ini_scan.hpp"
#include "src/core/text.hpp"
#include "src/run/run_args.hpp"

namespace ef {
namespace {

const char* kHelp =
    "usage: ensemblefit simulate ptycho --out FILE.h5 [options]\n\n"
    "A synthetic ptychography dataset (Poisson counts) from a known twisted-bilayer object and a\n"
    "mixed-state probe; the truth is stored as /truth/object, /truth/probe, /truth/positions.\n\n"
    "options (pixels unless said):\n"
    "  --out FILE.h5          output file (required)\n"
    "  --scan N | NxM         N x N (or N x M) scan positions (128)\n"
    "  --scan-pattern P       fermat: a Fermat spiral filling the N x M raster's rectangle, its mean\n"
    "                         nearest-neighbour distance --step (the default, except with --format\n"
    "                         empad: no periodic grid, whose ambiguity no reconstruction removes);\n"
    "                         raster: the regular grid\n"
    "  --dp N                 pattern size N x N (128)\n"
    "  --modes K              probe modes (12)\n"
    "  --dose D               mean counts per pattern, at most 1e15; 0 = noiseless intensities (1e6)\n"
    "  --seed S               seed of the noise and jitter (1)\n"
    "  --step S               mean nearest-neighbour step (the raster's step) (2.87); overlap =\n"
    "                         1 - step / probe diameter (2 x --probe-radius)\n"
    "  --jitter S             std of the true positions around the pattern's (0)\n"
    "  --position-error S     std of errors added to the stored /positions (0)\n"
    "  --object-size N        object N x N (0 = scanned area + window + margins)\n"
    "  --aperture R           probe aperture radius in Fourier pixels (0 = 0.1 dp)\n"
    "  --probe-radius R       geometric radius of the defocused probe (0 = dp / 8)\n"
    "  --mode-power P         power fraction of each extra probe mode (0.02)\n"
    "  --phase-max A          largest object phase, radians (0.5)\n"
    "  --lattice A            lattice constant (12); --atom-sigma S: atom width (2.5)\n"
    "  --slices S             object slices: a thick sample, Fresnel propagation between slices (1)\n"
    "  --slice-thickness T    metres between slices (required with --slices > 1)\n"
    "  --store-probe          also store the true probe as /probe (reconstruct starts from it)\n"
    "  --format F             file layout: native, cxi, or empad (--out NAME.raw: EMPAD raw frames,\n"
    "                         128 x 128 float32 + 2 rows each, in scan order, with --dp 128 and\n"
    "                         --scan-pattern raster, its default there; the truth in NAME.truth.h5)\n"
    "                         (native)\n"
    "  --compress L           chunk /data per pattern with shuffle + deflate level L (0 = off)\n"
    "  --threads T            OpenMP threads (0 = automatic)\n"
    "  --overwrite            replace an existing file\n";

double number(const std::string& opt, const std::string& v) { return parse_number_arg("simulate ptycho: " + opt, v); }

/// A finite number >= 0 (`positive`: > 0), else usage_error naming the option.
double measure(const std::string& opt, const std::string& v, bool positive = false) {
    const double d = number(opt, v);
    if (positive ? !(d > 0) : !(d >= 0))
        throw usage_error("simulate ptycho: " + opt + ": must be " + (positive ? "> 0" : ">= 0") + ", got " +
                          excerpt(v));
    return d;
}

std::string short_number(double v) {
    std::ostringstream os;
    os << v;
    return os.str();
}

int integer(const std::string& opt, const std::string& v, int hi = 1000000000) {
    number(opt, v);  // "expected a number" first, for text
    return static_cast<int>(ini::to_integer(v, "simulate ptycho: " + opt, 0, hi));
}

/// --scan N or NxM.
void scan_shape(const std::string& opt, const std::string& s, PtychoSimulationOptions& o) {
    const auto x = s.find('x');
    o.scan_y = integer(opt, s.substr(0, x));
    o.scan_x = x == std::string::npos ? o.scan_y : integer(opt, s.substr(x + 1));
}

/**
 * What the simulation keeps, refused before anything is allocated when it cannot fit (a lower
 * bound of its peak): per scan position its true and stored position and CXI translation
 * (56 B); per object pixel the amplitude, phase, their sum of atoms, the complex truth and the
 * worker's copy (64 B); per pattern pixel the probe modes with the DFT scratch (64 B a mode)
 * and a block of 64 patterns with their exit waves (64 x (12 + 16 modes) B).
 */
void check_memory(const PtychoSimulationOptions& o) {
    if (!(o.step > 0) || o.modes < 1) return;  // simulate_ptycho's own checks say why
    const double positions = static_cast<double>(o.scan_y) * o.scan_x;
    const double extent = std::max(o.scan_y, o.scan_x) * o.step + o.dp + 2.0 * o.margin + 1.0;
    const double object = (o.object_size > 0 ? static_cast<double>(o.object_size) * o.object_size : extent * extent) *
                          std::max(1, o.slices);
    const double per_pixel = 64.0 * o.modes + 64.0 * (12.0 + 16.0 * o.modes);
    const double pattern = static_cast<double>(o.dp) * o.dp * per_pixel;
    if (exceeds_memory(pattern)) {
        const auto largest = static_cast<long long>(std::sqrt(largest_count(per_pixel)));
        throw usage_error("simulate ptycho: --dp " + std::to_string(o.dp) + " " +
                          memory_refusal(pattern, "the probe modes and a block of 64 patterns",
                                         "--dp " + std::to_string(largest) + " (with --modes " +
                                             std::to_string(o.modes) + ")"));
    }
    if (o.object_size > 0 && exceeds_memory(64.0 * object + pattern)) {
        const auto largest = static_cast<long long>(std::sqrt(largest_count(64.0, pattern)));
        throw usage_error("simulate ptycho: --object-size " + std::to_string(o.object_size) + " " +
                          memory_refusal(64.0 * object + pattern, "the object",
                                         "--object-size " + std::to_string(largest)));
    }
    const double need = 56.0 * positions + 64.0 * object + pattern;
    if (exceeds_memory(need)) {
        // Per raster line of N positions: N positions and about (step N)^2 object pixels.
        const double per_n2 = 56.0 + 64.0 * o.step * o.step;
        const auto largest = static_cast<long long>(std::sqrt(largest_count(per_n2, pattern)));
        throw usage_error("simulate ptycho: --scan " + std::to_string(o.scan_y) + "x" + std::to_string(o.scan_x) + " " +
                          memory_refusal(need, "the positions and the object",
                                         "about --scan " + std::to_string(largest) + " (with --step " +
                                             short_number(o.step) + ")"));
    }
}

int cmd_simulate_ptycho(const std::vector<std::string>& args, const MpiContext& ctx) {
    PtychoSimulationOptions o;
    for (size_t i = 0; i < args.size(); ++i) {
        std::string a = args[i], v;
        const auto eq = a.find('=');
        const bool inline_value = a.rfind("--", 0) == 0 && eq != std::string::npos;
        if (inline_value) {
            v = a.substr(eq + 1);
            a = a.substr(0, eq);
        }
        auto value = [&]() -> std::string {
            if (inline_value) return v;
            if (i + 1 >= args.size()) throw usage_error("simulate ptycho: " + a + ": expects a value");
            return args[++i];
        };
        if (a == "-h" || a == "--help") {
            if (ctx.is_root()) std::printf("%s", kHelp);
            return 0;
        } else if (a == "--out" || a == "-o") {
            o.out = value();
        } else if (a == "--scan") {
            scan_shape(a, value(), o);
        } else if (a == "--dp") {
            o.dp = integer(a, value());
        } else if (a == "--modes") {
            o.modes = integer(a, value());
        } else if (a == "--dose") {
            o.dose = measure(a, value());
        } else if (a == "--seed") {
            o.seed = static_cast<std::uint64_t>(integer(a, value()));
        } else if (a == "--step") {
            o.step = measure(a, value(), true);
        } else if (a == "--scan-pattern") {
            o.scan_pattern = value();  // checked with the others by simulate_ptycho
        } else if (a == "--jitter") {
            o.jitter = measure(a, value());
        } else if (a == "--position-error") {
            o.position_error = measure(a, value());
        } else if (a == "--object-size") {
            o.object_size = integer(a, value());
        } else if (a == "--aperture") {
            o.aperture = measure(a, value());
        } else if (a == "--probe-radius") {
            o.probe_radius = measure(a, value());
        } else if (a == "--mode-power") {
            o.mode_power = measure(a, value());
        } else if (a == "--phase-max") {
            o.phase_max = measure(a, value());
        } else if (a == "--lattice") {
            o.lattice = measure(a, value(), true);
        } else if (a == "--atom-sigma") {
            o.atom_sigma = measure(a, value(), true);
        } else if (a == "--slices") {
            const std::string text = value();
            number(a, text);  // "expected a number" first, for text
            o.slices = static_cast<int>(ini::to_integer(text, "simulate ptycho: " + a, 1, kMaxSlices));
        } else if (a == "--slice-thickness") {
            o.slice_thickness = measure(a, value(), true);
        } else if (a == "--format") {
            o.format = value();
            if (o.format != "native" && o.format != "cxi" && o.format != "empad")
                throw usage_error("simulate ptycho: --format must be native, cxi or empad, got '" + excerpt(o.format) +
                                  "'");
        } else if (a == "--compress") {
            o.compress = integer(a, value(), 9);
        } else if (a == "--threads") {
            o.threads = integer(a, value(), 4096);
        } else if (a == "--store-probe") {
            o.store_probe = true;
        } else if (a == "--overwrite") {
            o.overwrite = true;
        } else {
            throw usage_error("simulate ptycho: unknown option '" + excerpt(args[i]) +
                              "' (see ensemblefit simulate ptycho --help)");
        }
    }
    check_memory(o);
    simulate_ptycho(o, ctx);
    return 0;
}

const CommandRegistrar reg("simulate ptycho", "synthetic ptychography dataset with its truth (--help)",
                           &cmd_simulate_ptycho);

}  // namespace
}  // namespace ef

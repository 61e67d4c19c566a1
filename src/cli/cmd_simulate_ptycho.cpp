// SPDX-License-Identifier: MIT
// `ensemblefit simulate ptycho --out FILE.h5 ...`: a synthetic ptychography dataset with truth.
#include <cstdio>
#include <string>
#include <vector>

#include <ensemblefit/core/error.hpp>
#include <ensemblefit/recon/ptycho_simulation.hpp>

#include "src/cli/commands.hpp"
#include "src/run/run_args.hpp"

namespace ef {
namespace {

const char* kHelp =
    "usage: ensemblefit simulate ptycho --out FILE.h5 [options]\n\n"
    "A synthetic ptychography dataset (Poisson counts) from a known twisted-bilayer object and a\n"
    "mixed-state probe; the truth is stored as /truth/object, /truth/probe, /truth/positions.\n\n"
    "options (pixels unless said):\n"
    "  --out FILE.h5          output file (required)\n"
    "  --scan N | NxM         raster of N x N (or N x M) positions (128)\n"
    "  --dp N                 pattern size N x N (128)\n"
    "  --modes K              probe modes (12)\n"
    "  --dose D               mean counts per pattern; 0 = noiseless intensities (1e6)\n"
    "  --seed S               seed of the noise and jitter (1)\n"
    "  --step S               raster step (2.87)\n"
    "  --jitter S             std of the true positions around the raster (0)\n"
    "  --position-error S     std of errors added to the stored /positions (0)\n"
    "  --object-size N        object N x N (0 = scanned area + window + margins)\n"
    "  --aperture R           probe aperture radius in Fourier pixels (0 = 0.1 dp)\n"
    "  --probe-radius R       geometric radius of the defocused probe (0 = dp / 8)\n"
    "  --mode-power P         power fraction of each extra probe mode (0.02)\n"
    "  --phase-max A          largest object phase, radians (0.5)\n"
    "  --lattice A            lattice constant (12); --atom-sigma S: atom width (2.5)\n"
    "  --format native|cxi    file layout (native)\n"
    "  --compress L           chunk /data per pattern with shuffle + deflate level L (0 = off)\n"
    "  --threads T            OpenMP threads (0 = automatic)\n"
    "  --overwrite            replace an existing file\n";

double number(const std::string& opt, const std::string& v) { return parse_number_arg("simulate ptycho: " + opt, v); }

int integer(const std::string& opt, const std::string& v) {
    const double d = number(opt, v);
    if (d != static_cast<double>(static_cast<long long>(d)) || d < 0 || d > 1e9)
        throw usage_error("simulate ptycho: " + opt + ": expected a non-negative integer, got '" + v + "'");
    return static_cast<int>(d);
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
            const std::string s = value();
            const auto x = s.find('x');
            o.scan_y = integer(a, s.substr(0, x));
            o.scan_x = x == std::string::npos ? o.scan_y : integer(a, s.substr(x + 1));
        } else if (a == "--dp") {
            o.dp = integer(a, value());
        } else if (a == "--modes") {
            o.modes = integer(a, value());
        } else if (a == "--dose") {
            o.dose = number(a, value());
        } else if (a == "--seed") {
            o.seed = static_cast<std::uint64_t>(integer(a, value()));
        } else if (a == "--step") {
            o.step = number(a, value());
        } else if (a == "--jitter") {
            o.jitter = number(a, value());
        } else if (a == "--position-error") {
            o.position_error = number(a, value());
        } else if (a == "--object-size") {
            o.object_size = integer(a, value());
        } else if (a == "--aperture") {
            o.aperture = number(a, value());
        } else if (a == "--probe-radius") {
            o.probe_radius = number(a, value());
        } else if (a == "--mode-power") {
            o.mode_power = number(a, value());
        } else if (a == "--phase-max") {
            o.phase_max = number(a, value());
        } else if (a == "--lattice") {
            o.lattice = number(a, value());
        } else if (a == "--atom-sigma") {
            o.atom_sigma = number(a, value());
        } else if (a == "--format") {
            o.format = value();
        } else if (a == "--compress") {
            o.compress = integer(a, value());
        } else if (a == "--threads") {
            o.threads = integer(a, value());
        } else if (a == "--overwrite") {
            o.overwrite = true;
        } else {
            throw usage_error("simulate ptycho: unknown option '" + args[i] + "' (see ensemblefit simulate ptycho --help)");
        }
    }
    simulate_ptycho(o, ctx);
    return 0;
}

const CommandRegistrar reg("simulate ptycho", "synthetic ptychography dataset with its truth (--help)",
                           &cmd_simulate_ptycho);

}  // namespace
}  // namespace ef

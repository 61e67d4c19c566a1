// SPDX-License-Identifier: MIT
#include <ensemblefit/recon/recon_config.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>
#include <utility>

#include <boost/program_options.hpp>

#include <ensemblefit/core/error.hpp>

#include "src/config/ini_scan.hpp"
#include "src/core/text.hpp"

namespace po = boost::program_options;

namespace ef {
namespace {

using ini::KeyInfo;

const KeyInfo kKeys[] = {
    {"data.file", "", "HDF5 input: /data (N x H x W intensities), /positions (N x 2 pixels, y then x, "
                      "top-left of the window in object pixels), optional /probe; or CXI "
                      "(relative paths are taken from the config file's folder)"},
    {"data.format", "auto", "auto | native | cxi | empad (EMPAD raw: 128 x 128 float32 + 2 rows per frame, in scan "
                            "order) | hdf5-4d (an array [scan_y, scan_x, ky, kx] at data.dataset); auto = empad for "
                            "a .raw file, hdf5-4d when data.dataset is set, else native or cxi by content"},
    {"data.pixel_size", "0", "object pixel size in metres, or with a unit (0.1494 A; nm, pm) (0 = from the data's "
                             "dx_angstrom, data.reciprocal_pixel_mrad or the CXI energy, distance and detector pixel size)"},
    {"data.dataset", "none", "the 4-D array's path in an HDF5 file (py4DSTEM's datacube layout [scan_y, scan_x, ky, kx])"},
    {"data.scan_shape", "none", "NY,NX: the raster (slow y, fast x) of EMPAD frames (required unless data.positions); "
                            "for a 4-D array checked against its shape"},
    {"data.scan_step", "none", "S or SY,SX: the raster's step in object pixels, or a length with its unit (0.43 A; "
                               "A, nm, pm, m: converted by the object pixel size) (required unless data.positions)"},
    {"data.scan_rotation", "0", "degrees the scan is turned, counter-clockwise in the image (x right, y down)"},
    {"data.scan_transpose", "false", "swap the scan's y and x (before flip and rotation)"},
    {"data.scan_flip", "none", "none | y | x | xy: mirror the scan's axes (after transpose, before rotation)"},
    {"data.positions", "none", "a text file of positions, one 'y x' line per frame in file order, instead of the raster "
                           "(object pixels, or in data.positions_unit)"},
    {"data.positions_unit", "px", "px | A | nm | pm | m: the unit of data.positions' numbers (lengths are converted by "
                                  "the object pixel size)"},
    {"data.truth", "none", "an HDF5 file with /truth/object and /truth/positions (simulate ptycho's) to compare an EMPAD "
                       "or 4-D reconstruction with; the object frame is the truth's"},
    {"detector.crop", "none", "none | Y0,Y1,X0,X1: keep rows Y0..Y1-1 and columns X0..X1-1 of every frame"},
    {"detector.bin", "1", "sum B x B pixels (after the crop)"},
    {"detector.clip_negative", "true", "set negative counts to 0 (counted, with a warning)"},
    {"detector.mask", "auto", "auto | off: hot and dead pixels found in the mean pattern (against the median of their "
                              "8 neighbours) replaced by the mean of their good neighbours in every pattern"},
    {"detector.mask_threshold", "10", "robust standard deviations from the neighbours' median that make a pixel hot "
                                      "or dead (it must also be over 2x or under 0.5x that median)"},
    {"detector.center", "auto", "auto | off: move the mean pattern's bright disc (centre of mass of the pixels above "
                                "half its peak) to (H/2, W/2) by a shift of whole pixels"},
    {"data.reciprocal_pixel_mrad", "0", "the detector pixel as a scattering angle (mrad); with the wavelength it gives "
                                        "the object pixel lambda / (detector width after detector.crop x angle) (0 = data.pixel_size, else "
                                        "the data's dx_angstrom or CXI geometry)"},
    {"beam.kv", "0", "accelerating voltage in kV: the relativistic electron wavelength (0 = model.wavelength, else the "
                     "data's wavelength_angstrom or kv)"},
    {"beam.convergence_mrad", "0", "probe-forming aperture semi-angle in mrad (0 = the data's conv_angle_mrad); with "
                                   "a known pixel and wavelength the mean pattern's bright disc is checked against it"},
    {"beam.defocus_nm", "0", "defocus in nm for probe.init = beam (not given: the data's defocus_nm, else 0); "
                             "positive = underfocus (weaker lens, Kirkland's convention: chi = pi lambda k^2 "
                             "(Cs lambda^2 k^2 / 2 - defocus))"},
    {"beam.cs_mm", "0", "spherical aberration C3 in mm for probe.init = beam"},
    {"beam.c5_mm", "0", "fifth-order spherical aberration C5 in mm for probe.init = beam"},
    {"model.modes", "4", "probe modes K (mixed-state probe; 4 by default, orthogonalised and sorted by power, so "
                            "data with a partly incoherent probe are not forced into one mode)"},
    {"model.subpixel", "auto", "auto | on | off: shift the probe by each position's sub-pixel "
                               "remainder (auto = when positions are not integers or are corrected)"},
    {"model.slices", "1", "object slices S (multislice: Fresnel propagation between slices by the angular "
                          "spectrum method; 1 = a single thin object)"},
    {"model.slice_thickness", "0", "distance between slices in metres, or with a unit (2 nm) (as data.pixel_size); required (> 0) "
                                   "when model.slices > 1"},
    {"model.wavelength", "0", "wavelength in metres, or with a unit (0.0418 A), for multislice (0 = from the data: its wavelength_angstrom "
                              "or kv root attribute, or the CXI energy)"},
    {"object.parametrization", "amplitude-phase", "amplitude-phase | complex (the real parameters "
                                                  "Adam updates)"},
    {"object.lr_amplitude", "5e-3", "Adam step of the amplitude (or real part) per mini-batch, in its own units "
                                    "(Adam divides by the gradient's rms: no dependence on dose or probe power)"},
    {"object.lr_phase", "5e-3", "Adam step of the phase (radians; or the imaginary part) per mini-batch"},
    {"object.amplitude_min", "0", "lower clamp of the amplitude after each update"},
    {"object.amplitude_max", "inf", "upper clamp of the amplitude after each update"},
    {"object.margin", "4", "pixels around the scanned area when the object size is derived"},
    {"probe.init", "auto", "auto (the file's /probe if present, else mean-pattern) | file | "
                           "mean-pattern (amplitude of the mean pattern, phase from probe.defocus) | beam (an aperture "
                           "of beam.convergence_mrad with beam.defocus_nm, cs_mm, c5_mm, at the wavelength and object "
                           "pixel of the run's geometry)"},
    {"probe.defocus", "auto",
     "a probe from the mean pattern: the quadratic (defocus) phase at the edge of the pattern's bright disc, in "
     "radians (about pi x the probe's radius in pixels x the disc's radius in pattern pixels / the pattern's width; "
     "0 = focused); auto tries 9 values by 2-iteration trial runs and keeps the lowest loss"},
    {"probe.lr", "0.03", "Adam learning rate of the probe (real and imaginary parts), in units of the probe's rms "
                       "amplitude sqrt(mean pattern sum / pixels), so that it does not depend on the dose"},
    {"probe.start", "1", "first iteration (from 1) that updates the probe"},
    {"probe.orthogonalize", "true", "orthogonalise the modes and sort them by power every iteration"},
    {"probe.fix_intensity", "true", "rescale the probe so sum |P|^2 = mean pattern sum"},
    {"probe.mode_power", "0.02", "initial power fraction of each extra mode"},
    {"positions.correct", "false", "refine the scan positions (gradient through the sub-pixel shift)"},
    {"positions.lr", "auto", "Adam learning rate of the positions (pixels per update; a position is updated once per "
                             "iteration; it decays with the other rates); auto = 24 / (iterations - positions.start + 1), "
                             "about 10 px of reach over the run (bounded by positions.max_travel)"},
    {"positions.max_travel", "auto", "how far (pixels) a position may move from where the data put it; one that goes "
                                     "further is moved to the point within that distance where its pattern fits best "
                                     "(a search on a 1-pixel grid); auto = 2 x the scan pitch sqrt(scan area / "
                                     "positions), 0 = no bound"},
    {"positions.start", "auto", "first iteration that updates the positions (auto = a fifth of solver.iterations, at "
                                "least 1: the object takes shape before the positions move)"},
    {"solver.iterations", "auto", "passes over all scan positions (auto = 50, or 100 with positions.correct: a position "
                                  "moves once per iteration)"},
    {"solver.batch_size", "auto", "positions per mini-batch (global, over all ranks); auto = ceil(positions / 16) "
                                  "within 16..256, so that an iteration makes about 16 steps whatever the scan size"},
    {"solver.loss", "amplitude", "amplitude (PtyRAD's Gaussian NRMSE) | poisson"},
    {"solver.seed", "1", "seed of the mini-batch draws (a batch is a function of seed and iteration "
                         "only, not of ranks)"},
    {"solver.beta1", "0.9", "Adam beta1"},
    {"solver.beta2", "0.999", "Adam beta2"},
    {"solver.epsilon", "1e-8", "Adam epsilon"},
    {"solver.precision", "single", "single | double (CPU only)"},
    {"solver.decay_start", "1", "iteration from which every learning rate decays along a half cosine to "
                                "decay_to x its value at the last iteration (1 = over the whole run; 0 = constant "
                                "rates, as PtyRAD)"},
    {"solver.decay_to", "0.1", "fraction of the learning rates left at the last iteration"},
    {"run.workers", "auto", "auto | cpu | gpu, or a comma-separated list per rank (the last repeats)"},
    {"run.threads", "0", "OpenMP threads per CPU rank (0 = SLURM_CPUS_PER_TASK, else OMP_NUM_THREADS, "
                         "else the rank's cores, else cores / ranks on the node)"},
    {"run.bind", "auto", "auto | none | cores: auto gives each rank of a node its own block of cores "
                         "when the launcher bound none; cores always; none keeps the launcher's"},
    {"run.heartbeat_timeout", "300", "seconds a rank may keep the others waiting in a collective before the run "
                                     "ends, naming it (the last checkpoint is kept; 0 = never)"},
    {"run.balance", "throughput", "throughput (shares follow each rank's measured speed) | equal"},
    {"run.fft_planning", "estimate", "estimate | measure: FFTW planner effort (measure can be faster, but "
                                     "its timing-based choice may differ between processes, and so the last bits)"},
    {"run.allreduce", "auto", "auto | mpi | nccl | peer: how ranks sum gradients; nccl (loaded at run time "
                              "from libnccl.so.2) sums on the GPUs when every rank is a GPU worker; peer sums "
                              "by direct loads between the GPUs of one host (CUDA IPC, NCCL starts it); auto = "
                              "peer when possible, else nccl, else MPI over host buffers"},
    {"run.stream", "auto", "auto | on | off: GPU workers keep the patterns in page-locked host memory and copy each "
                           "mini-batch's to the device beside the compute (the same results); auto = when the "
                           "patterns do not fit the GPU's free memory; CPU workers ignore it"},
    {"output.file", "", "HDF5 result: /object, /probe, /positions, /loss, /timing"},
    {"output.previews", "true", "write PNG previews next to the output (phase, amplitude, probe)"},
    {"output.report_every", "0", "iterations between progress lines (0 = about 20 lines)"},
    {"output.checkpoint_every", "0", "iterations between checkpoints (the model and the optimiser's state written "
                                     "into the output, atomically, for --resume; 0 = by time only)"},
    {"output.checkpoint_minutes", "5", "minutes of wall time after which the next iteration boundary writes a "
                                       "checkpoint (0 = by checkpoint_every only; a stop signal always writes one)"},
    // How the workers run the model, never what it computes (docs/reconstruction.md, "Tuning").
    {"tuning.deferred", "auto", "auto | on | off: deferred steps, an iteration's mini-batches queued on the device "
                                "with no wait per batch (the same results); auto = on for GPU workers, off for CPU "
                                "workers; on needs the gradients on the devices (one rank, or sums on the GPUs)"},
    {"tuning.window", "auto", "auto | on | off: window-resident passes for square 32, 64 and 128 pixel patterns (one "
                              "block per position, its FFTs in shared memory; equal to rounding); auto = on for GPU "
                              "workers where the block fits, off for CPU workers (FFTW is faster there)"},
    {"tuning.window_groups", "0", "probe-mode groups of the window passes: blocks per position (0 = chosen "
                                  "from the batch size and the GPU's multiprocessors; else a divisor of model.modes)"},
    {"tuning.window_clusters", "true", "run a position's 2 or 4 mode groups as one thread-block cluster where the "
                                       "GPU has them (compute capability 9.0; the same results)"},
    {"tuning.window_scratch", "true", "keep the window passes' per-position sums in shared memory where they fit "
                                      "(false: in global memory, as on GPUs with less; the same results)"},
};

const std::set<std::string> kSections = {"data",      "detector", "beam", "model",  "object", "probe",
                                         "positions", "solver",   "run",  "output", "tuning"};
constexpr const char* kSectionList = "data, detector, beam, model, object, probe, positions, solver, run, output, tuning";

const KeyInfo* find_key(const std::string& key) { return ini::find_key(kKeys, key); }

/// The file's keys with their lines, its shape checked (Program_options keeps no lines).
std::vector<ini::ScannedKey> scan_ini(const std::string& path) {
    ini::Rules rules;
    rules.section = [](const std::string& section, const std::string& at) {
        if (!kSections.count(section))
            ini::unknown_section(at, section, kSectionList);
    };
    rules.key = [](const std::string& section, const std::string& name, const std::string& at) {
        if (!find_key(section + "." + name)) ini::unknown_key(at, name, section, ini::allowed_keys_of(kKeys, section));
    };
    return ini::scan(path, rules);
}

}  // namespace

std::string ReconConfig::where(const std::string& key) const {
    const auto it = origins.find(key);
    if (it == origins.end()) return config_file + ": " + key;
    if (it->second.rfind("--", 0) == 0) return it->second;  // from the command line: "--section.key"
    return it->second + ": " + key;
}

namespace {

/// The values of one resolved configuration, each checked as it is read; errors name the
/// key's origin (file:line or --section.key).
class ValueReader {
   public:
    ValueReader(const ReconConfig& cfg, po::variables_map vm) : cfg_(cfg), vm_(std::move(vm)) {}

    std::string get(const std::string& key) const {
        if (vm_.count(key)) return trim(vm_[key].as<std::string>());
        const KeyInfo* k = find_key(key);
        return k ? k->def : "";
    }
    double real(const std::string& key) const { return ini::to_real(get(key), cfg_.where(key)); }
    double nonneg(const std::string& key) const {
        const double d = real(key);
        if (!(d >= 0) || !std::isfinite(d))
            throw usage_error(cfg_.where(key) + ": must be finite and >= 0, got '" + excerpt(get(key)) + "'");
        return d;
    }
    long long integer(const std::string& key, long long lo, long long hi) const {
        return ini::to_integer(get(key), cfg_.where(key), lo, hi);
    }
    int count(const std::string& key, int lo) const { return static_cast<int>(integer(key, lo, 1 << 30)); }
    bool boolean(const std::string& key) const { return ini::to_bool(get(key), cfg_.where(key)); }
    std::string choice(const std::string& key, std::initializer_list<const char*> allowed) const {
        const std::string t = get(key);
        std::string list;
        for (const char* a : allowed) {
            if (t == a) return t;
            list += (list.empty() ? "" : ", ") + std::string(a);
        }
        throw usage_error(cfg_.where(key) + ": unknown value '" + excerpt(t) + "' (allowed: " + list + ")");
    }
    TuningSwitch tuning_switch(const std::string& key) const {
        const std::string t = choice(key, {"auto", "on", "off"});
        return t == "on" ? TuningSwitch::on : t == "off" ? TuningSwitch::off : TuningSwitch::automatic;
    }

   private:
    const ReconConfig& cfg_;
    po::variables_map vm_;
};

/// The file and the overrides (later ones win) as one variables map; records each key's origin.
po::variables_map parse_sources(const std::string& path, const std::vector<std::string>& overrides,
                                const std::vector<ini::ScannedKey>& scanned, ReconConfig& cfg) {
    po::options_description desc;
    for (const auto& k : kKeys) desc.add_options()(k.key, po::value<std::string>(), k.help);
    po::variables_map vm;
    try {
        const po::parsed_options cli = ini::parse_overrides(overrides, desc);
        for (const auto& o : cli.options) {
            if (o.unregistered)
                throw usage_error("unknown option '--" + excerpt(o.string_key) + "' (see ensemblefit reconstruct --help)");
            cfg.origins[o.string_key] = "--" + o.string_key;
        }
        po::store(cli, vm);
        po::store(ini::as_parsed_options(scanned, desc), vm);
    } catch (const po::error& e) {
        throw usage_error(path + ": " + excerpt(e.what(), 200));
    }
    for (const auto& k : scanned)
        if (!cfg.origins.count(k.key)) cfg.origins[k.key] = path + ":" + std::to_string(k.line);
    return vm;
}

/// The length units of data.scan_step, data.positions_unit and the lengths: name, metres (0: px).
constexpr std::pair<const char*, double> kLengthUnits[] = {{"px", 0.0}, {"A", 1e-10}, {"\u00c5", 1e-10},
                                                           {"nm", 1e-9}, {"pm", 1e-12}, {"m", 1.0}};

/// A length unit's metres (A or \u00c5, nm, pm, m); 0 for px; usage_error naming `key` otherwise.
double length_unit(const ReconConfig& cfg, const std::string& key, const std::string& u) {
    for (const auto& [name, metres] : kLengthUnits)
        if (u == name) return metres;
    throw usage_error(cfg.where(key) + ": unknown unit '" + excerpt(u) + "' (px: object pixels, or A, nm, pm, m)");
}

/// A length: a number in metres, or followed by its unit (`0.1494 A`, nm, pm, m); finite, >= 0.
double length_metres(const ValueReader& r, const ReconConfig& cfg, const std::string& key) {
    std::string text = r.get(key);
    double unit = 1;
    if (const size_t blank = text.find_last_of(" \t"); blank != std::string::npos) {
        unit = length_unit(cfg, key, text.substr(blank + 1));
        if (unit == 0) throw usage_error(cfg.where(key) + ": a length in metres, or with a unit (A, nm, pm, m), not px");
        text = trim(text.substr(0, blank));
    }
    const double v = ini::to_real(text, cfg.where(key)) * unit;
    if (!std::isfinite(v) || v < 0)
        throw usage_error(cfg.where(key) + ": must be a length >= 0 (metres, or with a unit: A, nm, pm, m), got '" +
                          excerpt(r.get(key)) + "'");
    return v;
}

/// model.slices, slice_thickness and wavelength: a thickness or wavelength that is given must be
/// positive (0 is the "not given" default); several slices need a thickness.
void read_slices(const ValueReader& r, ReconConfig& cfg) {
    cfg.slices = static_cast<int>(r.integer("model.slices", 1, kMaxSlices));
    cfg.slice_thickness = length_metres(r, cfg, "model.slice_thickness");
    cfg.wavelength = length_metres(r, cfg, "model.wavelength");
    for (const char* key : {"model.slice_thickness", "model.wavelength"})
        if (length_metres(r, cfg, key) == 0 && cfg.origins.count(key))
            throw usage_error(cfg.where(key) + ": must be a length in metres > 0, got '" + excerpt(r.get(key)) + "'");
    if (cfg.slices > 1 && !(cfg.slice_thickness > 0))
        throw usage_error(cfg.where("model.slice_thickness") + ": required (> 0, metres) with model.slices = " +
                          std::to_string(cfg.slices));
}

/// Up to `most` comma-separated numbers of `key` (at least `least`); `text`: the value, or the
/// part of it before a unit.
std::vector<double> numbers(const ValueReader& r, const ReconConfig& cfg, const std::string& key, size_t least,
                            size_t most, const std::string& text) {
    std::vector<double> v;
    std::stringstream ss(text);
    for (std::string item; std::getline(ss, item, ',');) v.push_back(ini::to_real(trim(item), cfg.where(key)));
    if (v.size() < least || v.size() > most)
        throw usage_error(cfg.where(key) + ": expected " + std::to_string(least) +
                          (most > least ? " to " + std::to_string(most) : std::string()) +
                          " comma-separated numbers, got '" + excerpt(r.get(key)) + "'");
    return v;
}
std::vector<double> numbers(const ValueReader& r, const ReconConfig& cfg, const std::string& key, size_t least,
                            size_t most) {
    return numbers(r, cfg, key, least, most, r.get(key));
}

/// A path relative to the config file's folder (as data.file), unless given on the command line.
std::string config_relative(const ReconConfig& cfg, const std::string& key, const std::string& value) {
    if (value.empty() || value[0] == '/' || !cfg.origins.count(key) || cfg.origins.at(key).rfind("--", 0) == 0)
        return value;
    return ini::folder_of(cfg.config_file) + value;
}

/// data.scan_step: S or SY,SX in object pixels, or followed by a length unit (A, nm, pm, m): the
/// step as a length, turned into pixels by the object pixel size when the data are opened.
void read_scan_step(const ValueReader& r, ReconConfig& cfg) {
    std::string text = trim(r.get("data.scan_step"));
    double unit = 0;
    const size_t blank = text.find_last_of(" \t");
    if (blank != std::string::npos) {
        unit = length_unit(cfg, "data.scan_step", text.substr(blank + 1));
        text = trim(text.substr(0, blank));
    }
    const std::vector<double> s = numbers(r, cfg, "data.scan_step", 1, 2, text);
    for (double v : s)
        if (!(v > 0) || !std::isfinite(v) || (unit > 0 && !(v * unit < 1)))
            throw usage_error(cfg.where("data.scan_step") + ": steps must be > 0 (and below 1 m), got '" +
                              excerpt(r.get("data.scan_step")) + "'");
    ScanGeometry& sc = cfg.input.scan;
    if (unit > 0) {
        sc.step_length_y = s[0] * unit;
        sc.step_length_x = s.back() * unit;
    } else {
        sc.step_y = s[0];
        sc.step_x = s.back();
    }
}

/// data.dataset, data.scan_*, data.positions, data.truth and [detector] (docs/reconstruction.md,
/// "Instrument data"); what depends on the frames (crop and bin against their size) is checked
/// when the data are opened.
void read_instrument(const ValueReader& r, ReconConfig& cfg) {
    InstrumentOptions& in = cfg.input;
    const auto given = [&](const std::string& key) {  // "none" (the default) or empty: not given
        const std::string v = r.get(key);
        return v == "none" ? std::string() : v;
    };
    in.dataset = given("data.dataset");
    in.scan.positions_file = config_relative(cfg, "data.positions", given("data.positions"));
    in.scan.positions_unit = length_unit(cfg, "data.positions_unit", trim(r.get("data.positions_unit")));
    if (in.scan.positions_unit > 0 && in.scan.positions_file.empty())
        throw usage_error(cfg.where("data.positions_unit") + ": only with data.positions");
    in.truth_file = config_relative(cfg, "data.truth", given("data.truth"));
    if (!given("data.scan_shape").empty()) {
        const std::vector<double> s = numbers(r, cfg, "data.scan_shape", 2, 2);
        for (double v : s)
            if (!(v >= 1 && v <= 1e6 && v == std::floor(v)))
                throw usage_error(cfg.where("data.scan_shape") + ": two whole numbers 1..1000000, got '" +
                                  excerpt(r.get("data.scan_shape")) + "'");
        in.scan.ny = static_cast<int>(s[0]);
        in.scan.nx = static_cast<int>(s[1]);
    }
    if (!given("data.scan_step").empty()) read_scan_step(r, cfg);
    in.scan.rotation_deg = r.real("data.scan_rotation");
    if (!std::isfinite(in.scan.rotation_deg))
        throw usage_error(cfg.where("data.scan_rotation") + ": must be finite (degrees)");
    in.scan.transpose = r.boolean("data.scan_transpose");
    const std::string flip = r.choice("data.scan_flip", {"none", "y", "x", "xy"});
    in.scan.flip_y = flip == "y" || flip == "xy";
    in.scan.flip_x = flip == "x" || flip == "xy";
    const std::string& f = cfg.data_file;
    const bool raw = cfg.data_format == "empad" || (cfg.data_format == "auto" && f.size() > 4 &&
                                                    f.compare(f.size() - 4, 4, ".raw") == 0);
    const bool four_d = cfg.data_format == "hdf5-4d" || (cfg.data_format == "auto" && !raw && !in.dataset.empty());
    if (in.scan.positions_file.empty() && (raw || four_d)) {
        if (raw && in.scan.ny == 0)
            throw usage_error(cfg.where("data.scan_shape") + ": required for EMPAD raw data (NY,NX; or data.positions)");
        if (in.scan.step_y == 0 && in.scan.step_length_y == 0)
            throw usage_error(cfg.where("data.scan_step") + ": required for " + (raw ? "EMPAD raw" : "4-D HDF5") +
                              " data (object pixels; or data.positions)");
    }
    if (four_d && in.dataset.empty())
        throw usage_error(cfg.where("data.dataset") + ": required with data.format = hdf5-4d (the 4-D array's path)");
    DetectorSettings& d = in.detector;
    if (r.get("detector.crop") != "none") {
        const std::vector<double> c = numbers(r, cfg, "detector.crop", 4, 4);
        for (double v : c)
            if (!(v >= 0 && v <= 1 << 20 && v == std::floor(v)))
                throw usage_error(cfg.where("detector.crop") + ": four whole pixel indices, got '" +
                                  excerpt(r.get("detector.crop")) + "'");
        d.crop_y0 = static_cast<int>(c[0]);
        d.crop_y1 = static_cast<int>(c[1]);
        d.crop_x0 = static_cast<int>(c[2]);
        d.crop_x1 = static_cast<int>(c[3]);
        if (d.crop_y1 < d.crop_y0 + 2 || d.crop_x1 < d.crop_x0 + 2)
            throw usage_error(cfg.where("detector.crop") + ": Y0,Y1,X0,X1 with Y1 >= Y0 + 2 and X1 >= X0 + 2, got '" +
                              excerpt(r.get("detector.crop")) + "'");
    }
    d.bin = static_cast<int>(r.integer("detector.bin", 1, 64));
    d.clip_negative = r.boolean("detector.clip_negative");
    d.mask = r.choice("detector.mask", {"auto", "off"}) == "auto";
    d.mask_threshold = r.nonneg("detector.mask_threshold");
    if (!(d.mask_threshold > 0)) throw usage_error(cfg.where("detector.mask_threshold") + ": must be > 0");
    d.center = r.choice("detector.center", {"auto", "off"}) == "auto";
}

/// length_unit's name for its metres (the first of the table's: A, not \u00c5).
const char* unit_name(double metres) {
    for (const auto& [name, m] : kLengthUnits)
        if (m == metres) return name;
    return "px";
}

/// The instrument keys as resolved INI lines (in [data], then the [detector] section).
std::string instrument_text(const ReconConfig& cfg) {
    const auto fmt = ini::format_double;
    const InstrumentOptions& in = cfg.input;
    const DetectorSettings& d = in.detector;
    std::ostringstream os;
    const auto text = [](const std::string& v) { return v.empty() ? std::string("none") : v; };
    os << "\ndataset = " << text(in.dataset) << "\nscan_shape = "
       << (in.scan.ny > 0 ? std::to_string(in.scan.ny) + "," + std::to_string(in.scan.nx) : std::string("none"))
       << "\nscan_step = "
       << (in.scan.step_length_y > 0 ? fmt(in.scan.step_length_y * 1e10) + "," + fmt(in.scan.step_length_x * 1e10) + " A"
           : in.scan.step_y > 0      ? fmt(in.scan.step_y) + "," + fmt(in.scan.step_x)
                                     : std::string("none"))
       << "\nscan_rotation = " << fmt(in.scan.rotation_deg) << "\nscan_transpose = " << (in.scan.transpose ? "true" : "false")
       << "\nscan_flip = " << (in.scan.flip_y ? (in.scan.flip_x ? "xy" : "y") : (in.scan.flip_x ? "x" : "none"))
       << "\npositions = " << text(in.scan.positions_file) << "\npositions_unit = "
       << unit_name(in.scan.positions_unit) << "\ntruth = " << text(in.truth_file) << "\n[detector]\ncrop = "
       << (d.crop_y1 > 0 ? std::to_string(d.crop_y0) + "," + std::to_string(d.crop_y1) + "," + std::to_string(d.crop_x0) +
                               "," + std::to_string(d.crop_x1)
                         : std::string("none"))
       << "\nbin = " << d.bin << "\nclip_negative = " << (d.clip_negative ? "true" : "false")
       << "\nmask = " << (d.mask ? "auto" : "off") << "\nmask_threshold = " << fmt(d.mask_threshold)
       << "\ncenter = " << (d.center ? "auto" : "off");
    return os.str();
}

void read_data_and_model(const ValueReader& r, ReconConfig& cfg) {
    const std::string& path = cfg.config_file;
    cfg.data_file = r.get("data.file");
    if (cfg.data_file.empty()) throw usage_error(path + ": missing required key 'data.file'");
    if (cfg.data_file[0] != '/' && cfg.origins.count("data.file") && cfg.origins["data.file"].rfind("--", 0) != 0)
        cfg.data_file = ini::folder_of(path) + cfg.data_file;
    cfg.data_format = r.choice("data.format", {"auto", "native", "cxi", "empad", "hdf5-4d"});
    cfg.pixel_size = length_metres(r, cfg, "data.pixel_size");
    read_instrument(r, cfg);
    cfg.reciprocal_pixel_mrad = r.nonneg("data.reciprocal_pixel_mrad");
    cfg.beam.kv = r.nonneg("beam.kv");
    cfg.beam.convergence_mrad = r.nonneg("beam.convergence_mrad");
    cfg.beam.defocus_nm = r.real("beam.defocus_nm");
    cfg.beam.cs_mm = r.real("beam.cs_mm");
    cfg.beam.c5_mm = r.real("beam.c5_mm");
    for (const char* key : {"beam.defocus_nm", "beam.cs_mm", "beam.c5_mm"})
        if (!std::isfinite(r.real(key)))
            throw usage_error(cfg.where(key) + ": must be finite, got '" + excerpt(r.get(key)) + "'");
    cfg.modes = static_cast<int>(r.integer("model.modes", 1, 64));
    cfg.subpixel = r.choice("model.subpixel", {"auto", "on", "off"});
    read_slices(r, cfg);
}

void read_object_probe_positions(const ValueReader& r, ReconConfig& cfg) {
    cfg.amplitude_phase = r.choice("object.parametrization", {"amplitude-phase", "complex"}) == "amplitude-phase";
    cfg.lr_amplitude = r.nonneg("object.lr_amplitude");
    cfg.lr_phase = r.nonneg("object.lr_phase");
    cfg.amplitude_min = r.real("object.amplitude_min");
    cfg.amplitude_max = r.real("object.amplitude_max");
    if (!(cfg.amplitude_min <= cfg.amplitude_max))
        throw usage_error(cfg.where("object.amplitude_min") + ": above object.amplitude_max");
    cfg.margin = static_cast<int>(r.integer("object.margin", 0, 100000));

    cfg.probe_init = r.choice("probe.init", {"auto", "file", "mean-pattern", "beam"});
    if (r.get("probe.defocus") != "auto") {
        cfg.probe_defocus = r.real("probe.defocus");
        if (!std::isfinite(cfg.probe_defocus) || std::abs(cfg.probe_defocus) > 1e4)
            throw usage_error(cfg.where("probe.defocus") + ": auto or a phase in radians within +-1e4, got '" +
                              excerpt(r.get("probe.defocus")) + "'");
    }
    cfg.lr_probe = r.nonneg("probe.lr");
    cfg.probe_start = r.count("probe.start", 1);
    cfg.orthogonalize = r.boolean("probe.orthogonalize");
    cfg.fix_intensity = r.boolean("probe.fix_intensity");
    cfg.mode_power = r.nonneg("probe.mode_power");
    if (cfg.mode_power * (cfg.modes - 1) >= 1.0)
        throw usage_error(cfg.where("probe.mode_power") + ": (modes - 1) x mode_power must be below 1");

    cfg.correct_positions = r.boolean("positions.correct");
    cfg.lr_positions = r.get("positions.lr") == "auto" ? -1.0 : r.nonneg("positions.lr");
    cfg.positions_start = r.get("positions.start") == "auto" ? 0 : r.count("positions.start", 1);
    cfg.max_travel_positions = r.get("positions.max_travel") == "auto" ? -1.0 : r.nonneg("positions.max_travel");
}

void read_solver(const ValueReader& r, ReconConfig& cfg) {
    cfg.iterations = r.get("solver.iterations") != "auto" ? r.count("solver.iterations", 0)
                     : cfg.correct_positions                ? 100
                                                            : 50;
    cfg.batch_size = r.get("solver.batch_size") == "auto" ? 0 : r.count("solver.batch_size", 1);
    cfg.loss = r.choice("solver.loss", {"amplitude", "poisson"});
    cfg.seed = static_cast<std::uint64_t>(r.integer("solver.seed", 0, std::numeric_limits<long long>::max()));
    cfg.beta1 = r.real("solver.beta1");
    cfg.beta2 = r.real("solver.beta2");
    if (!(cfg.beta1 >= 0 && cfg.beta1 < 1)) throw usage_error(cfg.where("solver.beta1") + ": must be in [0, 1)");
    if (!(cfg.beta2 >= 0 && cfg.beta2 < 1)) throw usage_error(cfg.where("solver.beta2") + ": must be in [0, 1)");
    cfg.epsilon = r.nonneg("solver.epsilon");
    cfg.precision = r.choice("solver.precision", {"single", "double"});
    cfg.decay_start = r.count("solver.decay_start", 0);
    cfg.decay_to = r.nonneg("solver.decay_to");
    if (cfg.decay_to > 1) throw usage_error(cfg.where("solver.decay_to") + ": must be in [0, 1]");
}

void read_run_and_output(const ValueReader& r, ReconConfig& cfg) {
    cfg.run = parse_run_settings({[&](const std::string& key) { return r.get(key); },
                                  [&](const std::string& key) { return cfg.where(key); }});
    cfg.balance = r.choice("run.balance", {"throughput", "equal"});
    cfg.fft_measure = r.choice("run.fft_planning", {"estimate", "measure"}) == "measure";
    cfg.allreduce = r.choice("run.allreduce", {"auto", "mpi", "nccl", "peer"});
    cfg.stream = r.tuning_switch("run.stream");

    cfg.output_file = r.get("output.file");
    if (cfg.output_file.empty()) throw usage_error(cfg.config_file + ": missing required key 'output.file'");
    cfg.previews = r.boolean("output.previews");
    cfg.report_every = r.count("output.report_every", 0);
    cfg.checkpoint_every = r.count("output.checkpoint_every", 0);
    cfg.checkpoint_minutes = r.nonneg("output.checkpoint_minutes");
}

void read_tuning(const ValueReader& r, ReconConfig& cfg) {
    ReconTuning& t = cfg.tuning;
    t.deferred = r.tuning_switch("tuning.deferred");
    t.window = r.tuning_switch("tuning.window");
    t.window_groups = static_cast<int>(r.integer("tuning.window_groups", 0, 64));
    if (t.window_groups > 0 && cfg.modes % t.window_groups != 0)
        throw usage_error(cfg.where("tuning.window_groups") + ": " + std::to_string(t.window_groups) +
                          " does not divide model.modes = " + std::to_string(cfg.modes));
    t.window_clusters = r.boolean("tuning.window_clusters");
    t.window_scratch = r.boolean("tuning.window_scratch");
}

}  // namespace

ReconConfig load_recon_config(const std::string& path, const std::vector<std::string>& given) {
    ReconConfig cfg;
    cfg.config_file = path;
    const ValueReader r(cfg, parse_sources(path, ini::last_overrides_win(given), scan_ini(path), cfg));
    read_data_and_model(r, cfg);
    read_object_probe_positions(r, cfg);
    read_solver(r, cfg);
    read_run_and_output(r, cfg);
    read_tuning(r, cfg);
    return cfg;
}

std::string ReconConfig::resolved_text() const {
    const auto fmt = ini::format_double;
    const auto sw = [](TuningSwitch t) { return t == TuningSwitch::on ? "on" : t == TuningSwitch::off ? "off" : "auto"; };
    std::ostringstream os;
    os << "# config file: " << config_file << "\n"
       << "[data]\nfile = " << data_file << "\nformat = " << data_format << "\npixel_size = " << fmt(pixel_size)
       << "\nreciprocal_pixel_mrad = " << fmt(reciprocal_pixel_mrad) << instrument_text(*this)
       << "\n[beam]\nkv = " << fmt(beam.kv)
       << "\nconvergence_mrad = " << fmt(beam.convergence_mrad) << "\ndefocus_nm = " << fmt(beam.defocus_nm)
       << "\ncs_mm = " << fmt(beam.cs_mm) << "\nc5_mm = " << fmt(beam.c5_mm)
       << "\n[model]\nmodes = " << modes << "\nsubpixel = " << subpixel << "\nslices = " << slices
       << "\nslice_thickness = " << fmt(slice_thickness) << "\nwavelength = " << fmt(wavelength)
       << "\n[object]\nparametrization = " << (amplitude_phase ? "amplitude-phase" : "complex")
       << "\nlr_amplitude = " << fmt(lr_amplitude) << "\nlr_phase = " << fmt(lr_phase)
       << "\namplitude_min = " << fmt(amplitude_min) << "\namplitude_max = " << fmt(amplitude_max)
       << "\nmargin = " << margin << "\n[probe]\ninit = " << probe_init
       << "\ndefocus = " << (std::isnan(probe_defocus) ? std::string("auto") : fmt(probe_defocus)) << "\nlr = " << fmt(lr_probe)
       << "\nstart = " << probe_start << "\northogonalize = " << (orthogonalize ? "true" : "false")
       << "\nfix_intensity = " << (fix_intensity ? "true" : "false") << "\nmode_power = " << fmt(mode_power)
       << "\n[positions]\ncorrect = " << (correct_positions ? "true" : "false")
       << "\nlr = " << (lr_positions >= 0 ? fmt(lr_positions) : std::string("auto"))
       << "\nstart = " << (positions_start > 0 ? std::to_string(positions_start) : "auto")
       << "\nmax_travel = " << (max_travel_positions >= 0 ? fmt(max_travel_positions) : std::string("auto"))
       << "\n[solver]\niterations = " << iterations
       << "\nbatch_size = " << (batch_size > 0 ? std::to_string(batch_size) : "auto") << "\nloss = " << loss << "\nseed = " << seed
       << "\nbeta1 = " << fmt(beta1) << "\nbeta2 = " << fmt(beta2) << "\nepsilon = " << fmt(epsilon)
       << "\nprecision = " << precision << "\ndecay_start = " << decay_start << "\ndecay_to = " << fmt(decay_to)
       << "\n[run]\nworkers = " << run.workers_text() << "\nthreads = " << run.threads << "\nbind = " << run.bind
       << "\nbalance = " << balance << "\nfft_planning = " << (fft_measure ? "measure" : "estimate")
       << "\nallreduce = " << allreduce << "\nstream = " << sw(stream)
       << "\n[output]\nfile = " << output_file << "\npreviews = " << (previews ? "true" : "false")
       << "\nreport_every = " << report_every << "\ncheckpoint_every = " << checkpoint_every
       << "\ncheckpoint_minutes = " << fmt(checkpoint_minutes)
       << "\n[tuning]\ndeferred = " << sw(tuning.deferred) << "\nwindow = " << sw(tuning.window)
       << "\nwindow_groups = " << tuning.window_groups
       << "\nwindow_clusters = " << (tuning.window_clusters ? "true" : "false")
       << "\nwindow_scratch = " << (tuning.window_scratch ? "true" : "false") << "\n";
    return os.str();
}

std::string recon_key_default(const std::string& key) {
    const KeyInfo* k = find_key(key);
    return k ? k->def : "";
}

std::string recon_config_help() {
    std::ostringstream os;
    os << "Config keys (INI sections; each can be overridden as --section.key VALUE):\n";
    ini::write_key_help(os, kKeys, 18, "none, required");
    return os.str();
}

}  // namespace ef

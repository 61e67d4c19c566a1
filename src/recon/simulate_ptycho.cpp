// SPDX-License-Identifier: MIT
#include <ensemblefit/recon/ptycho_simulation.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <vector>

#include <ensemblefit/core/config.hpp>
#include <ensemblefit/core/error.hpp>
#include <ensemblefit/recon/recon_config.hpp>
#include <ensemblefit/recon/recon_worker.hpp>

#include "src/core/text.hpp"
#include "src/io/h5.hpp"
#include "src/recon/beam_geometry.hpp"
#include "src/recon/probe_modes.hpp"
#include "src/recon/provenance.hpp"
#include "src/recon/ptycho_h5.hpp"
#include "src/run/environment.hpp"
#include "src/run/output_guard.hpp"
#include "src/run/placement.hpp"

namespace ef {

namespace {

using recon::Complex;

constexpr double kDxAngstrom = 0.1494;        // PtyRAD tBL-WSe2: dx_spec
constexpr double kWavelengthAngstrom = 0.0418;  // 80 kV electrons

std::uint64_t splitmix(std::uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/// Twisted bilayer: two hexagonal lattices of Gaussian atoms, 3 degrees apart; slice `slice` of a
/// thick sample turned by 17 degrees and shifted by (0.37, 0.61) lattice constants per slice
/// (slice 0 is the thin sample, with the same bits as before slices existed).
void make_object(const PtychoSimulationOptions& o, int slice, int oh, int ow, std::vector<double>& amp,
                 std::vector<double>& phase) {
    std::vector<double> s(static_cast<size_t>(oh) * static_cast<size_t>(ow), 0.0);
    const double a = o.lattice, sig = o.atom_sigma;
    const int reach = static_cast<int>(std::ceil(4 * sig));
    const double cy = 0.5 * oh + 0.37 * a * slice, cx = 0.5 * ow + 0.61 * a * slice;
    const double rmax = 0.75 * std::hypot(oh, ow) + a + std::hypot(cy - 0.5 * oh, cx - 0.5 * ow);
    for (int layer = 0; layer < 2; ++layer) {
        const double th = ((layer == 0 ? 0.0 : 3.0) + 17.0 * slice) * M_PI / 180.0;
        const double weight = layer == 0 ? 1.0 : 0.7;
        const double a1y = a * std::sin(th), a1x = a * std::cos(th);
        const double a2y = a * std::sin(th + M_PI / 3), a2x = a * std::cos(th + M_PI / 3);
        const int m = static_cast<int>(rmax / (0.8 * a)) + 2;
        for (int i = -m; i <= m; ++i)
            for (int j = -m; j <= m; ++j) {
                const double py = cy + i * a1y + j * a2y, px = cx + i * a1x + j * a2x;
                if (py < -reach || px < -reach || py > oh + reach || px > ow + reach) continue;
                for (int y = std::max(0, static_cast<int>(py) - reach); y <= std::min(oh - 1, static_cast<int>(py) + reach); ++y)
                    for (int x = std::max(0, static_cast<int>(px) - reach); x <= std::min(ow - 1, static_cast<int>(px) + reach); ++x) {
                        const double r2 = (y - py) * (y - py) + (x - px) * (x - px);
                        s[static_cast<size_t>(y) * ow + x] += weight * std::exp(-r2 / (2 * sig * sig));
                    }
            }
    }
    const double mx = *std::max_element(s.begin(), s.end());
    amp.resize(s.size());
    phase.resize(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
        const double t = mx > 0 ? s[i] / mx : 0.0;
        phase[i] = o.phase_max * t;
        amp[i] = 1.0 - 0.05 * t;
    }
}

/// The simulated lens: an aperture of radius R Fourier pixels and an underfocus that puts
/// pi x probe radius x R / n radians of phase at its edge, in physical units (beam_probe, the
/// function probe.init = beam uses): pixel kDxAngstrom, 80 kV, semi-angle lambda R / (n dx),
/// defocus r n dx^2 / (lambda R).
struct SimulatedLens {
    double convergence = 0, defocus = 0;  // rad, m
};
SimulatedLens simulated_lens(const PtychoSimulationOptions& o) {
    const double n = o.dp, dx = kDxAngstrom * 1e-10, lambda = kWavelengthAngstrom * 1e-10;
    const double R = o.aperture > 0 ? o.aperture : 0.1 * n;
    const double r_px = o.probe_radius > 0 ? o.probe_radius : n / 8.0;
    return {lambda * R / (n * dx), r_px * n * dx * dx / (lambda * R)};
}

std::vector<Complex> make_probe(const PtychoSimulationOptions& o) {
    const SimulatedLens lens = simulated_lens(o);
    return recon::beam_probe(o.dp, o.dp, kDxAngstrom * 1e-10, kWavelengthAngstrom * 1e-10, lens.convergence,
                             {lens.defocus, 0, 0});
}


/// Beside an EMPAD raw file NAME.raw: NAME.truth.h5 (the truth, positions and attributes).
std::string empad_truth_path(const std::string& raw) { return raw.substr(0, raw.size() - 4) + ".truth.h5"; }

void check_options(const PtychoSimulationOptions& o) {
    if (o.out.empty()) throw usage_error("simulate ptycho: --out FILE.h5 is required");
    if (o.scan_y < 1 || o.scan_x < 1 || o.dp < 4 || o.modes < 1 || o.modes > 64)
        throw usage_error("simulate ptycho: need --scan >= 1, --dp >= 4 and 1 <= --modes <= 64");
    if (!(o.step > 0) || o.dose < 0 || o.jitter < 0 || o.position_error < 0 || o.mode_power < 0 ||
        o.mode_power * (o.modes - 1) >= 1 || o.lattice <= 0 || o.atom_sigma <= 0)
        throw usage_error("simulate ptycho: --step, --lattice, --atom-sigma must be > 0; --dose, --jitter, "
                          "--position-error >= 0; (modes - 1) x --mode-power below 1");
    // Poisson counts are 64-bit: a dose far beyond any detector's (1e30) never finishes sampling.
    if (o.dose > 1e15)
        throw usage_error("simulate ptycho: --dose must be at most 1e15 counts per pattern, got " + std::to_string(o.dose));
    if (o.format != "native" && o.format != "cxi" && o.format != "empad")
        throw usage_error("simulate ptycho: --format must be native, cxi or empad, got '" + o.format + "'");
    if (o.format == "empad") {
        if (o.dp != 128)
            throw usage_error("simulate ptycho: --format empad writes the EMPAD's 128 x 128 frames: needs --dp 128, got " +
                              std::to_string(o.dp));
        if (o.scan_pattern != "raster")
            throw usage_error("simulate ptycho: --format empad stores frames in raster order without positions: needs "
                              "--scan-pattern raster");
        if (o.out.size() < 5 || o.out.compare(o.out.size() - 4, 4, ".raw") != 0)
            throw usage_error("simulate ptycho: --format empad: --out must end in .raw (the truth goes to "
                              "NAME.truth.h5 beside it), got '" + excerpt(o.out) + "'");
        if (file_exists(empad_truth_path(o.out)) && !o.overwrite)
            throw usage_error("simulate ptycho: '" + empad_truth_path(o.out) + "' exists; pass --overwrite to replace it");
    }
    if (o.scan_pattern != "fermat" && o.scan_pattern != "raster")
        throw usage_error("simulate ptycho: --scan-pattern must be fermat or raster, got '" + excerpt(o.scan_pattern) + "'");
    if (o.slices < 1 || o.slices > kMaxSlices)
        throw usage_error("simulate ptycho: --slices must be 1.." + std::to_string(kMaxSlices) + ", got " +
                          std::to_string(o.slices));
    if (o.slices > 1 && !(o.slice_thickness > 0))
        throw usage_error("simulate ptycho: --slices " + std::to_string(o.slices) +
                          " needs --slice-thickness > 0 (metres between slices)");
    if (file_exists(o.out) && !o.overwrite)
        throw usage_error("simulate ptycho: '" + o.out + "' exists; pass --overwrite to replace it");
}

/// The scan: true positions (Fermat spiral or raster, + jitter; top-left corners), the object that holds them
/// centred, and the stored positions (the truth + position errors).
struct Scan {
    std::int64_t count = 0;
    int oh = 0, ow = 0;  ///< object size
    std::vector<double> truth, stored;  ///< count x 2 (y, x), object frame
};

/// Mean distance from each point (y, x pairs) to its nearest neighbour: a sweep over the points
/// sorted by y, each search stopped once the y gap alone exceeds the best distance so far.
double mean_nearest_neighbour(const std::vector<double>& pos) {
    const size_t n = pos.size() / 2;
    if (n < 2) return 0.0;
    std::vector<size_t> order(n);
    for (size_t k = 0; k < n; ++k) order[k] = k;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return pos[2 * a] < pos[2 * b]; });
    double sum = 0;
    for (size_t i = 0; i < n; ++i) {
        const double y = pos[2 * order[i]], x = pos[2 * order[i] + 1];
        double best2 = 1e300;
        for (size_t j = i + 1; j < n && (pos[2 * order[j]] - y) * (pos[2 * order[j]] - y) < best2; ++j)
            best2 = std::min(best2, std::pow(pos[2 * order[j]] - y, 2) + std::pow(pos[2 * order[j] + 1] - x, 2));
        for (size_t j = i; j-- > 0 && (y - pos[2 * order[j]]) * (y - pos[2 * order[j]]) < best2;)
            best2 = std::min(best2, std::pow(pos[2 * order[j]] - y, 2) + std::pow(pos[2 * order[j] + 1] - x, 2));
        sum += std::sqrt(best2);
    }
    return sum / static_cast<double>(n);
}

/**
 * scan_y x scan_x points of a Fermat spiral (point k at radius sqrt(k + 1/2), angle k times the
 * golden angle: one point per pi of area, evenly spread, no period), kept in spiral order where
 * they fall inside a rectangle of the raster's aspect ratio and area, then scaled so that the
 * mean nearest-neighbour distance is `step`. Top-left origin is arbitrary: make_scan centres it.
 */
void fermat_scan(const PtychoSimulationOptions& o, std::vector<double>& pos) {
    const size_t count = static_cast<size_t>(o.scan_y) * static_cast<size_t>(o.scan_x);
    const double area = M_PI * static_cast<double>(count);
    double half_y = 0.5 * std::sqrt(area * o.scan_y / o.scan_x), half_x = 0.5 * std::sqrt(area * o.scan_x / o.scan_y);
    const double golden = M_PI * (3.0 - std::sqrt(5.0));
    pos.clear();
    for (std::int64_t k = 0; pos.size() < 2 * count; ++k) {
        const double r = std::sqrt(static_cast<double>(k) + 0.5), th = golden * static_cast<double>(k);
        if (r > std::hypot(half_y, half_x)) {
            // The spiral has left the rectangle's corners with fewer than `count` points inside
            // (the density is one per pi only on average): widen the rectangle a little and
            // start again. Counts that fit the first rectangle keep their points.
            half_y *= 1.002;
            half_x *= 1.002;
            pos.clear();
            k = -1;
            continue;
        }
        const double y = r * std::sin(th), x = r * std::cos(th);
        if (std::abs(y) > half_y || std::abs(x) > half_x) continue;
        pos.push_back(y);
        pos.push_back(x);
    }
    const double nn = mean_nearest_neighbour(pos);
    const double scale = nn > 0 ? o.step / nn : o.step;
    for (double& p : pos) p *= scale;
}

Scan make_scan(const PtychoSimulationOptions& o) {
    std::mt19937_64 rng(splitmix(o.seed));
    std::normal_distribution<double> gauss(0.0, 1.0);
    Scan sc;
    sc.count = static_cast<std::int64_t>(o.scan_y) * o.scan_x;
    std::vector<double>& pos = sc.truth;
    if (o.scan_pattern == "fermat") {
        fermat_scan(o, pos);
    } else {
        pos.resize(static_cast<size_t>(2 * sc.count));
        for (int i = 0; i < o.scan_y; ++i)
            for (int j = 0; j < o.scan_x; ++j) {
                const size_t k = static_cast<size_t>(i) * static_cast<size_t>(o.scan_x) + static_cast<size_t>(j);
                pos[2 * k] = i * o.step;
                pos[2 * k + 1] = j * o.step;
            }
    }
    for (double& p : pos) p += o.jitter * gauss(rng);  // drawn even at 0: the raster's bits as before
    double min_y = 1e300, min_x = 1e300, max_y = -1e300, max_x = -1e300;
    for (size_t k = 0; k < static_cast<size_t>(sc.count); ++k) {
        min_y = std::min(min_y, pos[2 * k]);
        max_y = std::max(max_y, pos[2 * k]);
        min_x = std::min(min_x, pos[2 * k + 1]);
        max_x = std::max(max_x, pos[2 * k + 1]);
    }
    sc.oh = static_cast<int>(std::floor(max_y - min_y + 0.5)) + o.dp + 2 * o.margin + 1;
    sc.ow = static_cast<int>(std::floor(max_x - min_x + 0.5)) + o.dp + 2 * o.margin + 1;
    if (o.object_size > 0) {
        if (o.object_size < std::max(sc.oh, sc.ow) - 2 * o.margin)
            throw usage_error("simulate ptycho: --object-size " + std::to_string(o.object_size) +
                              " is smaller than the scanned area plus the window (" +
                              std::to_string(std::max(sc.oh, sc.ow) - 2 * o.margin) + ")");
        sc.oh = sc.ow = o.object_size;
    }
    // Centre the scan in the object.
    const double off_y = 0.5 * (sc.oh - o.dp - (max_y - min_y)) - min_y;
    const double off_x = 0.5 * (sc.ow - o.dp - (max_x - min_x)) - min_x;
    for (size_t k = 0; k < static_cast<size_t>(sc.count); ++k) {
        pos[2 * k] += off_y;
        pos[2 * k + 1] += off_x;
    }
    sc.stored = pos;
    if (o.position_error > 0)
        for (double& p : sc.stored) p += o.position_error * gauss(rng);
    return sc;
}

/// Writes the patterns (Poisson counts, or the noiseless intensities) of every scan position
/// to `data_name`, centred, in blocks of 64; returns the total count.
/// `raw` (EMPAD): the frames go there, 128 x 128 float32 and 2 rows of zeros each, instead of
/// to `data_name` in `f`.
double write_patterns(const PtychoSimulationOptions& o, const Scan& sc, ReconWorker& worker, int threads, h5::File& f,
                      const std::string& data_name, std::ofstream* raw = nullptr) {
    const int dp = o.dp;
    const size_t n = static_cast<size_t>(dp) * static_cast<size_t>(dp);
    const std::int64_t N = sc.count, block = 64;
    if (!raw)
        recon::h5x::create_float(f, data_name,
                                 {static_cast<std::uint64_t>(N), static_cast<std::uint64_t>(dp), static_cast<std::uint64_t>(dp)},
                                 o.compress > 0 ? 1 : 0, o.compress);
    const std::vector<float> meta_rows(2 * static_cast<size_t>(dp), 0.0f);
    std::vector<float> out(static_cast<size_t>(block) * n);
    double photons = 0;
    for (std::int64_t first = 0; first < N; first += block) {
        const std::int64_t count = std::min(block, N - first);
        ReconBatch batch;
        for (std::int64_t j = 0; j < count; ++j) {
            batch.pattern_of.push_back(j);
            batch.positions.push_back(sc.truth[static_cast<size_t>(2 * (first + j))]);
            batch.positions.push_back(sc.truth[static_cast<size_t>(2 * (first + j) + 1)]);
        }
        const std::vector<double> inten = worker.model_intensity(batch);
        double block_sum = 0;
#pragma omp parallel for num_threads(threads) reduction(+ : block_sum) schedule(static)
        for (std::int64_t j = 0; j < count; ++j) {
            std::mt19937_64 prng(splitmix(o.seed ^ splitmix(static_cast<std::uint64_t>(first + j) + 0x5bd1e995ull)));
            const int hy = dp / 2;
            for (int u = 0; u < dp; ++u)
                for (int v = 0; v < dp; ++v) {
                    const double lambda = std::max(0.0, inten[static_cast<size_t>(j) * n + static_cast<size_t>(u) * dp + v]);
                    double value = lambda;
                    if (o.dose > 0) {
                        std::poisson_distribution<long long> pois(lambda);
                        value = lambda > 0 ? static_cast<double>(pois(prng)) : 0.0;
                    }
                    // Centred layout: FFT bin u goes to (u + h/2) mod h.
                    out[static_cast<size_t>(j) * n + static_cast<size_t>((u + hy) % dp) * dp + static_cast<size_t>((v + hy) % dp)] =
                        static_cast<float>(value);
                    block_sum += value;
                }
        }
        photons += block_sum;
        if (raw) {
            for (std::int64_t j = 0; j < count; ++j) {
                raw->write(reinterpret_cast<const char*>(out.data() + static_cast<size_t>(j) * n),
                           static_cast<std::streamsize>(n * sizeof(float)));
                raw->write(reinterpret_cast<const char*>(meta_rows.data()),
                           static_cast<std::streamsize>(meta_rows.size() * sizeof(float)));
            }
            if (!*raw) throw data_error("simulate ptycho: cannot write the EMPAD frames to " + o.out);
            continue;
        }
        recon::h5x::write_float_rows(f, data_name, static_cast<std::uint64_t>(first), static_cast<std::uint64_t>(count),
                                     out.data());
    }
    return photons;
}

/// The stored positions: CXI translations in metres (x, y, z) with the geometry that gives the
/// object pixel back, or native /positions in pixels with the object's shape.
void write_positions(const PtychoSimulationOptions& o, const Scan& sc, h5::File& f) {
    const std::int64_t N = sc.count;
    if (o.format == "cxi") {
        // Translations in metres (x, y, z) with dx = 0.1494 A object pixels; the energy, distance
        // and detector pixel are chosen so that lambda z / (W p) gives that dx back.
        const double dx = kDxAngstrom * 1e-10, lambda = kWavelengthAngstrom * 1e-10;
        std::vector<double> t(static_cast<size_t>(3 * N));
        for (std::int64_t k = 0; k < N; ++k) {
            t[static_cast<size_t>(3 * k)] = sc.stored[static_cast<size_t>(2 * k + 1)] * dx;
            t[static_cast<size_t>(3 * k + 1)] = sc.stored[static_cast<size_t>(2 * k)] * dx;
            t[static_cast<size_t>(3 * k + 2)] = 0;
        }
        recon::h5x::write_double(f, "/entry_1/sample_1/geometry_1/translation", {static_cast<std::uint64_t>(N), 3}, t);
        recon::h5x::write_double(f, "/entry_1/instrument_1/source_1/energy", {1}, {6.62607015e-34 * 299792458.0 / lambda});
        recon::h5x::write_double(f, "/entry_1/instrument_1/detector_1/distance", {1}, {1.0});
        recon::h5x::write_double(f, "/entry_1/instrument_1/detector_1/x_pixel_size", {1}, {lambda * 1.0 / (o.dp * dx)});
        recon::h5x::write_double(f, "/entry_1/instrument_1/detector_1/y_pixel_size", {1}, {lambda * 1.0 / (o.dp * dx)});
        recon::h5x::write_double(f, "/cxi_version", {1}, {150});
    } else {
        recon::h5x::write_double(f, "/positions", {static_cast<std::uint64_t>(N), 2}, sc.stored);
        recon::set_attr_int64s(f, "/", "object_shape", {sc.oh, sc.ow});
    }
}

/// The truth (object, probe, positions) and the experiment's description as root attributes.
void write_truth(const PtychoSimulationOptions& o, const Scan& sc, const std::vector<double>& amp,
                 const std::vector<double>& phase, const std::vector<Complex>& probe, h5::File& f) {
    const std::uint64_t K = static_cast<std::uint64_t>(o.modes), dp = static_cast<std::uint64_t>(o.dp);
    std::vector<Complex> obj(amp.size());
    for (size_t i = 0; i < amp.size(); ++i) obj[i] = std::polar(amp[i], phase[i]);
    std::vector<std::uint64_t> shape{static_cast<std::uint64_t>(sc.oh), static_cast<std::uint64_t>(sc.ow)};
    if (o.slices > 1) shape.insert(shape.begin(), static_cast<std::uint64_t>(o.slices));  // S x H x W
    recon::h5x::write_complex(f, "/truth/object", shape, obj);
    recon::h5x::write_complex(f, "/truth/probe", {K, dp, dp}, probe);
    if (o.store_probe) recon::h5x::write_complex(f, "/probe", {K, dp, dp}, probe);  // a known probe to start from
    recon::h5x::write_double(f, "/truth/positions", {static_cast<std::uint64_t>(sc.count), 2}, sc.truth);
    // Units on the datasets, as reconstruct writes them (docs/reconstruction.md, "Physical units").
    for (const char* d : {"/truth/object", "/truth/probe", "/probe", "/truth/positions", "/positions"}) {
        if (!f.exists(d)) continue;
        f.set_attr(d, "pixel_size", kDxAngstrom * 1e-10);
        f.set_attr(d, "pixel_size_unit", std::string("m"));
        if (std::string(d).find("positions") != std::string::npos) f.set_attr(d, "unit", std::string("px"));
    }
    const double R = o.aperture > 0 ? o.aperture : 0.1 * o.dp;
    f.set_attr("/", "simulator", std::string("ensemblefit simulate ptycho"));
    f.set_attr("/", "version", std::string(EF_VERSION " (" EF_GIT_DESCRIBE ")"));
    f.set_attr("/", "command", command_line());
    f.set_attr("/", "date", utc_timestamp());
    f.set_attr("/", "dp", static_cast<std::int64_t>(o.dp));
    f.set_attr("/", "aperture_px", R);
    f.set_attr("/", "dose", o.dose);
    f.set_attr("/", "seed", static_cast<std::int64_t>(o.seed));
    recon::set_attr_int64s(f, "/", "scan", {o.scan_y, o.scan_x});
    f.set_attr("/", "step_px", o.step);
    f.set_attr("/", "scan_pattern", o.scan_pattern);
    f.set_attr("/", "modes", static_cast<std::int64_t>(o.modes));
    f.set_attr("/", "mode_power", o.mode_power);
    f.set_attr("/", "jitter_px", o.jitter);
    f.set_attr("/", "position_error_px", o.position_error);
    f.set_attr("/", "dx_angstrom", kDxAngstrom);
    f.set_attr("/", "wavelength_angstrom", kWavelengthAngstrom);
    f.set_attr("/", "kv", 80.0);
    f.set_attr("/", "conv_angle_mrad", 1e3 * kWavelengthAngstrom * R / (o.dp * kDxAngstrom));
    f.set_attr("/", "defocus_nm", 1e9 * simulated_lens(o).defocus);  // Kirkland's sign: underfocus > 0
    if (o.slices > 1) {
        f.set_attr("/", "slices", static_cast<std::int64_t>(o.slices));
        f.set_attr("/", "slice_thickness_m", o.slice_thickness);
    }
}

}  // namespace

void simulate_ptycho(const PtychoSimulationOptions& given, const MpiContext& ctx) {
    PtychoSimulationOptions o = given;
    if (o.scan_pattern.empty()) o.scan_pattern = o.format == "empad" ? "raster" : "fermat";
    check_options(o);
    if (!ctx.is_root()) {
        EF_MPI_CHECK(MPI_Barrier(ctx.world()));
        return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const Scan sc = make_scan(o);
    std::vector<double> amp, phase;
    for (int s = 0; s < o.slices; ++s) {  // slice after slice: S x H x W
        std::vector<double> a, p;
        make_object(o, s, sc.oh, sc.ow, a, p);
        amp.insert(amp.end(), a.begin(), a.end());
        phase.insert(phase.end(), p.begin(), p.end());
    }
    std::vector<Complex> probe = make_probe(o);
    recon::add_probe_modes(probe, 1, o.modes, o.dp, o.dp, o.mode_power, 1.0);
    recon::scale_probe_power(probe, o.dose > 0 ? o.dose : 1e6);

    const int threads = resolve_threads(o.threads, ctx.local_size()).threads;
    ReconWorkerOptions wo;
    wo.h = wo.w = o.dp;
    wo.modes = o.modes;
    wo.slices = o.slices;
    wo.slice_fresnel = kWavelengthAngstrom * (o.slice_thickness * 1e10) / (kDxAngstrom * kDxAngstrom);
    wo.obj_h = sc.oh;
    wo.obj_w = sc.ow;
    wo.subpixel = true;
    wo.double_precision = true;
    wo.threads = threads;
    wo.fft_measure = false;
    auto worker = make_recon_worker(WorkerKind::cpu, wo);
    worker->set_object(amp, phase);
    worker->set_probe(probe);

    const bool empad = o.format == "empad";
    const std::string h5_out = empad ? empad_truth_path(o.out) : o.out;
    check_serial_output(o.out, "simulate ptycho: --out", o.overwrite, {});  // the guard; created under a temporary name
    if (empad) check_serial_output(h5_out, "simulate ptycho: --out (its truth)", o.overwrite, {});
    PendingOutput pending(h5_out);
    std::unique_ptr<PendingOutput> pending_raw;
    std::ofstream raw;
    if (empad) {
        pending_raw = std::make_unique<PendingOutput>(o.out);
        raw.open(pending_raw->temp_path(), std::ios::binary | std::ios::trunc);
        if (!raw) throw data_error("simulate ptycho: cannot create " + pending_raw->temp_path());
    }
    h5::File f = h5::File::create(pending.temp_path());
    const double photons = write_patterns(o, sc, *worker, threads, f,
                                          o.format == "cxi" ? "/entry_1/data_1/data" : "/data", empad ? &raw : nullptr);
    write_positions(o, sc, f);
    write_truth(o, sc, amp, phase, probe, f);
    f.close();
    if (empad) {
        raw.close();
        if (!raw) throw data_error("simulate ptycho: cannot write the EMPAD frames to " + pending_raw->temp_path());
        pending_raw->commit();
    }
    pending.commit();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (o.slices > 1)
        std::printf("multislice: %d slices %.4g m apart (Fresnel number lambda dz / dx^2 = %.4g pixels)\n", o.slices,
                    o.slice_thickness, kWavelengthAngstrom * (o.slice_thickness * 1e10) / (kDxAngstrom * kDxAngstrom));
    std::printf("simulated %lld patterns %d x %d (%s layout), %d probe mode%s, object %d x %d, %.3g counts per "
                "pattern, in %.2f s (%d thread%s)\noutput: %s\n",
                static_cast<long long>(sc.count), o.dp, o.dp, o.format.c_str(), o.modes, o.modes == 1 ? "" : "s", sc.oh,
                sc.ow, photons / static_cast<double>(sc.count), secs, threads, threads == 1 ? "" : "s", o.out.c_str());
    if (empad)
        std::printf("truth: %s (reconstruct the raw file with data.scan_shape = %d,%d, data.scan_step = %g and "
                    "data.truth = this file; or as measured: data.scan_step = %.6g A, data.pixel_size = %g A)\n",
                    h5_out.c_str(), o.scan_y, o.scan_x, o.step, o.step * kDxAngstrom, kDxAngstrom);
    if (ctx.size() > 1) EF_MPI_CHECK(MPI_Barrier(ctx.world()));
}

}  // namespace ef

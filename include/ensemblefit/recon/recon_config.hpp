// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <ensemblefit/recon/ptycho_dataset.hpp>
#include <ensemblefit/recon/recon_tuning.hpp>
#include <ensemblefit/run/run_settings.hpp>

namespace ef {

/**
 * A fully resolved `ensemblefit reconstruct` configuration: the INI file with command-line
 * overrides (`--section.key VALUE`) applied and every value validated, each error naming the
 * file, line and key. `ensemblefit reconstruct --help` lists every key with its default
 * (recon_config_help()); docs/reconstruction.md explains them.
 */
/// The most object slices model.slices takes (each slice is a whole object; memory is checked too).
inline constexpr int kMaxSlices = 1024;

struct ReconConfig {
    std::string config_file;

    // [data]
    std::string data_file;
    std::string data_format = "auto";  ///< auto | native | cxi | empad | hdf5-4d
    double pixel_size = 0.0;           ///< object pixel (m) for CXI translations; 0 = from metadata
    /// data.dataset, data.scan_*, data.positions, data.truth and [detector]: instrument data
    InstrumentOptions input;
    double reciprocal_pixel_mrad = 0.0;  ///< detector pixel as an angle (mrad); 0 = from the other sources

    // [model]
    int modes = 4;                   ///< probe modes K (a few by default: docs/architecture.md)
    std::string subpixel = "auto";   ///< auto | on | off
    int slices = 1;                  ///< object slices S (multislice)
    double slice_thickness = 0;      ///< metres between slices (> 0 when slices > 1)
    double wavelength = 0;           ///< metres; 0 = from the data (multislice)

    // [beam]: the instrument in physical units (src/recon/beam_geometry.hpp); 0 = not given
    struct Beam {
        double kv = 0;                ///< accelerating voltage (kV); 0 = the data's kv
        double convergence_mrad = 0;  ///< probe-forming semi-angle (mrad); 0 = the data's conv_angle_mrad
        double defocus_nm = 0;        ///< Kirkland's convention: positive = underfocus
        double cs_mm = 0;             ///< spherical aberration C3 (mm)
        double c5_mm = 0;             ///< fifth-order spherical aberration C5 (mm)
    } beam;

    // [object]
    bool amplitude_phase = true;     ///< parametrization = amplitude-phase | complex
    double lr_amplitude = 5e-3;      ///< Adam step of the amplitude (or real part)
    double lr_phase = 5e-3;          ///< Adam step of the phase (radians; or imaginary part)
    double amplitude_min = 0.0;
    double amplitude_max = std::numeric_limits<double>::infinity();
    int margin = 4;                  ///< pixels around the scanned area when the object size is derived

    // [probe]
    std::string probe_init = "auto";  ///< auto | file | mean-pattern | beam
    /// A probe from the mean pattern: its defocus phase at the bright disc's edge (radians);
    /// NaN = auto (chosen by trial runs, Reconstruction::choose_defocus).
    double probe_defocus = std::numeric_limits<double>::quiet_NaN();
    /// probe.defocus = auto: at most this many trial runs of kDefocusTrialIterations each
    /// (Reconstruction::choose_defocus), before the run's own iterations.
    static constexpr int kDefocusTrials = 9;
    static constexpr int kDefocusTrialIterations = 2;
    /// Iterations the defocus trials add to a run whose probe starts from the mean pattern
    /// (`file_has_probe`: the data file holds a probe), at most; 0 when none run.
    int defocus_trial_iterations(bool file_has_probe) const {
        const bool from_file = probe_init == "file" || (probe_init == "auto" && file_has_probe);
        return from_file || probe_init == "beam" || probe_defocus == probe_defocus ? 0
                                                          : kDefocusTrials * std::min(kDefocusTrialIterations, iterations);
    }
    double lr_probe = 0.03;           ///< relative to the rms probe amplitude
    int probe_start = 1;              ///< first iteration (1-based) that updates the probe
    bool orthogonalize = true;
    bool fix_intensity = true;
    double mode_power = 0.02;         ///< initial power fraction of each extra mode

    // [positions]
    bool correct_positions = false;
    double lr_positions = -1;         ///< < 0 = auto (recon::resolve_positions_lr)
    int positions_start = 0;          ///< 0 = auto (recon::resolve_positions_start: a fifth of the run)
    double max_travel_positions = -1;  ///< < 0 = auto (recon::resolve_positions_max_travel); 0 = unbounded

    // [solver]
    int iterations = 50;              ///< auto: 50, or 100 with position correction
    int batch_size = 0;               ///< 0 = auto (recon::resolve_batch_size, from the positions)
    std::string loss = "amplitude";   ///< amplitude | poisson
    std::uint64_t seed = 1;
    double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
    std::string precision = "single";  ///< single | double
    int decay_start = 1;              ///< iteration from which all rates decay (1 = whole run, 0 = constant)
    double decay_to = 0.1;            ///< fraction of the rates reached at the last iteration (cosine)

    // [run]
    RunSettings run;  ///< workers, threads, bind, heartbeat_timeout (read by the run layer: parse_run_settings)
    std::string balance = "throughput";  ///< throughput | equal
    bool fft_measure = false;            ///< fft_planning = estimate | measure
    std::string allreduce = "auto";      ///< auto | mpi | nccl
    TuningSwitch stream = TuningSwitch::automatic;  ///< [run] stream: GPU patterns streamed per batch (auto: when they do not fit)

    // [output]
    std::string output_file;
    bool previews = true;
    int report_every = 0;       ///< iterations between progress lines (0 = about 20 lines)
    int checkpoint_every = 0;         ///< iterations between checkpoints (0 = by time only)
    double checkpoint_minutes = 5.0;  ///< wall time between checkpoints (0 = by iterations only)

    // [tuning]: how the workers run the model, never what it computes
    ReconTuning tuning;

    /// Where every key that was set came from: "file.ini:12" or "--section.key".
    std::map<std::string, std::string> origins;
    std::string where(const std::string& key) const;
    /// The resolved configuration as INI text (stored in the output).
    std::string resolved_text() const;
};

/// Reads `path`, applies "--section.key=VALUE" overrides (later ones win) and validates.
ReconConfig load_recon_config(const std::string& path, const std::vector<std::string>& overrides);

/// Every key with its meaning and default, for --help.
std::string recon_config_help();

/// A key's default as the key table writes it ("px", "none", "0"...); "" for a key it does not have.
std::string recon_key_default(const std::string& key);

}  // namespace ef

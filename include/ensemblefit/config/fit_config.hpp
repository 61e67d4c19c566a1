// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <ensemblefit/run/run_settings.hpp>

namespace ef {

/// How replicas 1..R resample the data (replica 0 always fits the data as given).
enum class ResampleMethod { smear, bootstrap };

/// The LM's linear algebra: QR of the stored Jacobian (robust, the default in double), or the
/// normal equations accumulated point by point (no Jacobian stored: many small fits, float).
enum class FitSolver { qr, normal };

/// Arithmetic of the fit (data, Jacobian, linear algebra); results are stored as double.
enum class FitPrecision { float64, float32 };

/// What the central fit's stored covariance is: (J^T W J)^-1 as the sigmas give it (none), or
/// that times chi2 / ndf (chi2: the sigmas' scale estimated from the fit, as NIST StRD, MINPACK
/// and scipy's curve_fit with absolute_sigma=False do).
enum class ErrorScale { none, chi2 };

/// One fit parameter as the user configured it in a `[param.NAME]` section.
struct ParamSpec {
    std::string name;
    double start = 0.0;
    double lower = -std::numeric_limits<double>::infinity();
    double upper = std::numeric_limits<double>::infinity();
    bool fixed = false;
};

/// Where a key's value came from, for error messages ("file.ini:12" or "command line").
struct KeyOrigin {
    std::string file;
    int line = 0;  ///< 0 when the value came from the command line or a default
    std::string describe(const std::string& key) const;
};

/// The largest LHAPDF ID (SetIndex) accepted from `[lhapdf] set_index` and `export lhapdf
/// --set-index`: IDs are non-negative integers, member m of a set being SetIndex + m.
constexpr long long kMaxLhapdfSetIndex = 99999999;

/**
 * A fully resolved `ensemblefit fit` configuration: the INI file with command-line overrides
 * applied and every value validated. Everything a run depends on is here, so the canonical text
 * (`canonical_text()`) stored in the output identifies a run for --resume and merge.
 */
struct FitConfig {
    std::string config_file;

    // [data]
    std::string data_file;
    std::vector<std::string> x_columns;
    std::string y_column;
    std::string sigma;  ///< column name, or a positive constant as text
    bool sigma_is_constant = false;
    double sigma_constant = 0.0;
    /// Correlated uncertainties (src/fit/correlated.hpp): systematic shift columns, each
    /// additive (absolute) or multiplicative (`name:mult`, relative to the t0 prediction).
    std::vector<std::string> systematics;
    std::vector<unsigned char> systematic_mult;
    std::string dataset_column;  ///< the column naming each row's dataset ([normalisation.NAME])
    std::string covariance;      ///< FILE.h5:/path of a full n x n covariance, or empty
    /// [normalisation.NAME] sigma: relative normalisation uncertainty of dataset NAME (file order).
    std::vector<std::pair<std::string, double>> normalisations;
    /// [data] commondata: a folder of NNPDF "new commondata" sets (src/io/commondata.hpp) read
    /// instead of data.file; then x = x, Q2, target, y = F2, sigma = the uncorrelated sources in
    /// quadrature, and `systematics` is filled from the files when the data are read.
    std::string commondata;
    std::vector<std::string> commondata_sets;  ///< [data] sets, in the order given
    /// Kinematic cuts on commondata points: kept when Q^2 > q2_min, W^2 = Q^2 (1 - x) / x > w2_min
    /// and x_min <= x <= x_max.
    double q2_min = 3.49, w2_min = 12.5, x_min = 0.0, x_max = 1.0;
    /// The commondata sets and cuts as INI lines (canonical and resolved texts).
    std::string commondata_text() const;
    /// True when the data have any correlated uncertainty (chi^2 = r^T C^-1 r).
    bool correlated() const {
        return !systematics.empty() || !covariance.empty() || !normalisations.empty() || !commondata.empty();
    }

    // [model]
    std::string model_name;  ///< formula | linear | polynomial | exponential | gaussian | gaussian2d | dis-mellin
    std::string formula;
    int order = 1;
    int peaks = 1;
    /// auto | jit | interpret: how a formula runs (never changes results, so not in the
    /// canonical text).
    std::string model_compile = "auto";
    /// Seconds a formula's compile may take (then auto interprets, jit refuses); like
    /// model_compile never in the canonical text.
    double model_compile_timeout = 600.0;
    /// Model-specific keys not listed above (`[model] key = value`), for models with options.
    std::map<std::string, std::string> model_options;

    // [param.NAME] in the order the sections appear
    std::vector<ParamSpec> params;

    // [fit]
    long long replicas = 0;
    ResampleMethod resample = ResampleMethod::smear;
    std::uint64_t seed = 1;
    int max_iterations = 1000;
    double ftol = 1e-15;
    double xtol = 1e-10;
    double gtol = 1e-12;
    int chunk = 0;  ///< replicas per work unit; 0 = automatic
    FitSolver solver = FitSolver::qr;
    FitPrecision precision = FitPrecision::float64;
    ErrorScale error_scale = ErrorScale::none;

    // [output]
    std::string output_file;
    /// auto | on | off: every rank writes its rows into the file itself (docs/parallel-output.md).
    std::string output_in_place = "auto";

    // [sched] (never changes results: replicas are pure functions of seed and number)
    std::string sched_policy = "dynamic";

    // [run] (read by the run layer: parse_run_settings)
    RunSettings run;

    // [tuning] (never changes results: the same bits whatever is chosen)
    /// warp | thread: a GPU runs the batched LM steps with a warp per replica, or one thread
    /// per replica (the same lanes arithmetic, kernels/fit/lanes.hpp; kept to check exactly that).
    std::string gpu_lm_steps = "warp";
    /// device | host: a GPU runs the batched LM's rounds from the device (CUDA graphs, lists
    /// built on the GPU) or from the host (one round trip per round; kept to check exactly that).
    std::string gpu_round_loop = "device";

    // [lhapdf] (never changes results: `export lhapdf` reads it back from the stored resolved text)
    /// The set's LHAPDF ID (SetIndex of the .info), 0..kMaxLhapdfSetIndex; -1 when not set.
    long long lhapdf_set_index = -1;

    /// Origin of every key that was set, keyed "section.key".
    std::map<std::string, KeyOrigin> origins;

    /// Canonical INI text of every setting that determines the results (not output paths,
    /// thread counts or worker kinds): two runs with equal text produce equal replicas.
    std::string canonical_text() const;
    /// Full resolved INI text (canonical settings plus output and run settings).
    std::string resolved_text() const;
    /// "file:line: key" style location of a key for messages.
    std::string where(const std::string& key) const;
    std::vector<std::string> param_names() const;
};

/**
 * Reads `path` and applies `overrides` (command-line tokens like {"--fit.replicas", "100"}).
 * Throws ef::Error (exit code 2) naming the file and line or the key on any problem.
 */
FitConfig load_fit_config(const std::string& path, const std::vector<std::string>& overrides);

/// Text for `ensemblefit fit --help`: every key with its default and meaning.
std::string fit_config_help();

}  // namespace ef

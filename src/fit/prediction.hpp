// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/io/data_table.hpp>

#include "src/io/results_file.hpp"

namespace ef {

/**
 * The model of a finished fit, evaluated where the user asks (`ensemblefit predict`).
 *
 * The model is rebuilt from the canonical config a result file stores (`canonical_config`:
 * everything that determines the results) as a FitProblem whose data are the requested points
 * (y = 0, sigma = 1; never fitted). Models that precompute per-point tables (dis-mellin's
 * evolution and x^-N table) thus build them at those points, and the run's data file is never
 * read. Values come from the same single-source model code the fit runs: prepare() once per
 * parameter vector, then value() per point.
 */

/// The x columns `names` (as `[data] x` lists them; dis-mellin: x, Q2, target) of a CSV or HDF5
/// file, as a DataTable with y = 0 and sigma = 1. data_error naming the file (and CSV line) for a
/// missing column, a non-numeric cell, NaN or infinity, or no rows.
DataTable read_prediction_points(const std::string& path, const std::vector<std::string>& names);

/**
 * What the user allows a rebuilt model to load (docs/security.md): a result file never loads
 * code by itself. A plugin model is rebuilt only with `plugin` (a library the user names again,
 * `--model.plugin PATH`, a path as typed) or `trust` (`--trust-plugin`: the library at the
 * absolute path the file records); either must have the SHA-256 the file records. A formula is
 * interpreted unless `compile` says otherwise (the same bits; no compiled code from the cache).
 */
struct PredictModelChoice {
    std::string plugin;
    bool trust = false;
    std::string compile;  ///< [model] compile for the rebuilt formula; empty: interpret
};

/// The run's model, from the identity (canonical config, plugin) of its result file `source`,
/// at the points of the file `points_path` (read_prediction_points with the config's x
/// columns). Errors name the result file or the points file; the model's own checks as
/// make_fit_problem() has them; a plugin not allowed by `choice` is a usage error naming it.
FitProblem prediction_problem(const std::string& source, const RunIdentity& id, const std::string& points_path,
                              const PredictModelChoice& choice);

/// The same from the canonical config text alone, with no plugin allowed.
FitProblem prediction_problem(const std::string& source, const std::string& canonical_config,
                              const std::string& points_path);

/// pb's model at its data points for `count` parameter vectors (`params`, count x P, row-major):
/// out[r * n + i] is the value of vector r at point i. OpenMP over the vectors with `threads`.
void evaluate_model(const FitProblem& pb, const double* params, std::size_t count, int threads, double* out);

}  // namespace ef

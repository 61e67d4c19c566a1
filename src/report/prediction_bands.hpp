// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ensemblefit/io/data_table.hpp>

namespace ef {

/**
 * The band of a prediction over an ensemble, per point: the central fit's value, the mean and
 * standard deviation (n - 1) over the replicas, and the kQuantileLevels quantiles (2.5, 16, 50,
 * 84, 97.5 %; linear interpolation, as /summary/quantiles). Replicas whose value at a point is
 * not finite are left out at that point (and counted). NaN where a value does not exist: no
 * central fit (a shard without replica 0), fewer than one (two for std) replicas.
 */
struct PredictionBands {
    int n = 0;                      ///< points
    std::int64_t replicas = 0;      ///< replicas evaluated (the converged ones)
    std::int64_t nonfinite = 0;     ///< (replica, point) values left out as not finite
    std::vector<double> central;    ///< n
    std::vector<double> mean, std;  ///< n
    std::vector<double> quantiles;  ///< 5 x n, rows kQuantileLevels
};

/// Bands from `central` (n values, or empty) and `values` (replicas x n, row-major).
PredictionBands prediction_bands(const std::vector<double>& central, const std::vector<double>& values, int n);

/// What `ensemblefit predict` writes, beside the bands.
struct PredictionOutput {
    std::string source;                     ///< the result file the parameters came from
    std::string model;                      ///< its model name
    const DataTable* points = nullptr;      ///< the requested points (x columns by name)
    const PredictionBands* bands = nullptr;
    /// With --replicas: the replica numbers and their values (replicas x n); else null.
    const std::vector<std::int64_t>* replica_index = nullptr;
    const std::vector<double>* replica_values = nullptr;
};

/**
 * Writes a prediction to `path`: `.csv` one row per point (the x columns, central, mean, std,
 * q2.5, q16, q50, q84, q97.5, then r<k> per replica; empty cells where a value does not exist),
 * anything else HDF5 (the x columns as 1-D datasets at the root, as `--at` reads them, and
 * /prediction/central, mean, std, quantiles (5 x n, attribute levels_percent), replicas and
 * replica_index). "-" writes the CSV to standard output. The format follows `named` (the path
 * the user gave) when `path` is a temporary file that will be renamed to it.
 */
void write_prediction(const std::string& path, const PredictionOutput& out, const std::string& named = "");

/// write_prediction to `path` through a temporary file renamed over it once complete, so that a
/// failure (a full disk) leaves any earlier file of that name as it was ("-": standard output).
void write_prediction_file(const std::string& path, const PredictionOutput& out);

}  // namespace ef

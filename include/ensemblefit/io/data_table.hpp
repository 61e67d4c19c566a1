// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ensemblefit/config/fit_config.hpp>

namespace ef {

/**
 * The data of a fit, validated: n points with nx independent variables each (row-major), the
 * dependent variable and its uncertainty. Every value is finite and every sigma positive.
 * `checksum` identifies the content, so resume and merge can refuse data that changed.
 */
struct DataTable {
    int n = 0;
    int nx = 0;
    std::vector<std::string> x_names;
    std::vector<double> x;      ///< n x nx, row-major
    std::vector<double> y;      ///< n
    std::vector<double> sigma;  ///< n
    std::uint64_t checksum = 0;
};

/**
 * Reads the columns a config names from a CSV file (header row; '#' comment lines) or an HDF5
 * file (one 1-D dataset per column). Throws ef::Error with exit code 3 naming the file, line and
 * column for a missing column, a non-numeric cell, NaN or infinity, or sigma <= 0; exit code 2
 * for a missing file.
 */
DataTable load_data(const FitConfig& config);

/// Reads named columns (all the same length) from a CSV or HDF5 file.
std::vector<std::vector<double>> read_columns(const std::string& path,
                                              const std::vector<std::string>& names);

/// FNV-1a over the bytes of the arrays: a content fingerprint, not a security hash.
std::uint64_t checksum_of(const DataTable& data);

}  // namespace ef

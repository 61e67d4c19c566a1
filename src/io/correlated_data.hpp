// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <vector>

#include <ensemblefit/config/fit_config.hpp>
#include <ensemblefit/io/data_table.hpp>

namespace ef {

/**
 * The correlated uncertainties of a fit's data as the files give them (src/fit/correlated.hpp
 * turns them into the covariance's Cholesky factor): the systematic columns [data] systematics
 * names, the dataset column, and a full covariance. Every value is finite and the covariance is
 * n x n and symmetric.
 */
struct CorrelatedInputs {
    int n = 0;
    int S = 0;                       ///< systematic columns
    std::vector<double> syst;        ///< n x S, row-major, as in the columns
    std::vector<double> dataset;     ///< n; empty without [data] dataset
    std::vector<int> norm_rows;      ///< rows of each [normalisation.NAME] dataset (counts)
    std::vector<double> covariance;  ///< n x n, row-major; empty without [data] covariance
    /// Name of each dataset, index = its value in `dataset` (commondata: the set's folder name);
    /// empty when the data name none.
    std::vector<std::string> dataset_names;
};

/**
 * Reads what `cfg` names beside the data (nothing when !cfg.correlated()) and mixes it into
 * data.checksum, so resume and merge refuse a changed covariance. Throws ef::Error, exit 3,
 * naming the file, column and row: an unknown column, NaN or infinity, a covariance of the
 * wrong shape or not symmetric, a [normalisation.NAME] whose dataset has no row; exit 2 for
 * a NAME that is not a number.
 */
CorrelatedInputs load_correlated(const FitConfig& cfg, DataTable& data);

}  // namespace ef

// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/io/h5.hpp"

namespace ef {

/**
 * How well the central fit describes the data as given (not resampled), in the terms a
 * physicist quotes: chi2 and N per data set and in total, the shift of every correlated source
 * (systematic column or dataset normalisation) that the data prefer given the fit's theory, with
 * its error and pull, and each replica's chi2 against the central data. Computed by
 * fit_quality() (src/fit/fit_quality.hpp), stored in /quality of the result file
 * (docs/operations.md lists the datasets), printed by `summary`.
 */
struct FitQuality {
    double chi2 = 0.0;  ///< r^T C^-1 r over every point: the central fit's chi2
    std::int64_t n = 0;
    std::vector<std::string> dataset_names;  ///< empty without [data] dataset
    std::vector<std::int64_t> dataset_n;
    std::vector<double> dataset_chi2;        ///< with the data set's own covariance block
    std::vector<std::string> source_names;   ///< systematic columns, then "normalisation.NAME"
    std::vector<double> shift, shift_error, pull;
    std::vector<std::int64_t> replica_index;  ///< the rows of /replicas this run holds
    std::vector<double> replica_chi2;         ///< each replica against the central data; NaN: not converged

    /// No central part: a file without /quality, or a shard without replica 0 (whose /quality
    /// holds only its replicas' chi2).
    bool empty() const { return n == 0; }
};

/// Bytes /quality takes for `rows` replica rows and `entries` sources + data sets (for reserve()).
std::uint64_t fit_quality_bytes(std::uint64_t rows, std::uint64_t entries);
/// Writes /quality, replacing the one a resumed file holds; the attributes chi2 and n only with
/// the central part.
void write_fit_quality(h5::File& f, const FitQuality& q);
/// /quality of a result file; empty (n = 0) when the file has no central part: files from before
/// it, uncorrelated fits, shards without the central fit (their replica_chi2 is read).
FitQuality read_fit_quality(const h5::File& f);

}  // namespace ef

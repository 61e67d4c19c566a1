// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <ensemblefit/core/replica_block.hpp>
#include <ensemblefit/core/ensemble_summary.hpp>

#include "src/io/fit_quality_io.hpp"
#include "src/io/h5.hpp"
#include "src/io/results_file.hpp"

namespace ef {

/**
 * What a fit's result file says, read back: identity, the central fit with its errors (and
 * whether they are scaled by chi2/ndf), the replicas' outcomes and the ensemble statistics over
 * the converged ones. Works on finished, partial (killed: rows with status -1) and merged files
 * and on shards; the statistics are recomputed from /replicas with summarize(), so they are the
 * stored /summary's bits where the run finished and exist where it did not. Used by
 * `ensemblefit summary`, by the end-of-run table and by `merge`.
 */
struct ResultsSummary {
    std::string path;
    RunIdentity id;
    std::string formula;                    ///< the formula of a formula model, else empty
    std::vector<std::string> merged_from;   ///< the shard files of a merged file
    bool central_in_file = false;           ///< the file holds replica 0 (shard 0 or unsharded)
    std::int64_t central_status = -1;       ///< -1 not done, 0 converged, 1 max_iterations, 2 failed
    std::int64_t central_iterations = 0;
    double central_chi2 = 0.0;
    std::vector<double> central_params;       ///< P
    std::vector<double> central_covariance;   ///< P x P, as stored (scaled when errors.scale is chi2)
    std::vector<double> central_correlation;  ///< P x P
    CentralErrors errors;
    double chi2_per_ndf = 0.0;  ///< the factor applied with error_scale = chi2
    std::int64_t converged = 0, max_iterations = 0, failed = 0, not_done = 0;
    EnsembleSummary ensemble;  ///< over this file's converged replicas
    /// Per parameter: -1 the central fit ended on its lower bound, +1 on its upper, 0 neither
    /// (or fixed), from the stored config's [param.NAME] lower/upper; empty without a central fit.
    std::vector<int> at_bound;
    /// /quality: chi2 per data set, the sources' shifts and pulls, the replicas' chi2 against
    /// the central data; empty (n = 0) for a file without it.
    FitQuality quality;

    int P() const { return static_cast<int>(id.param_names.size()); }
    std::int64_t replicas_in_file() const { return converged + max_iterations + failed + not_done; }
    /// Replica fits not done, the central one included.
    std::int64_t pending() const { return not_done + (central_in_file && central_status < 0 ? 1 : 0); }
};

/// The summary of an open result file whose /replicas are `replicas` and their statistics `s`.
ResultsSummary summary_of(const h5::File& f, const ReplicaBlock& replicas, const EnsembleSummary& s);
/// Reads `path` (read-only). usage_error when it is not an ensemblefit result file.
ResultsSummary read_results_summary(const std::string& path);

enum class SummaryFormat { table, csv, json };

/**
 * Writes `s`: `table` for people (the central fit, the ensemble, replica outcomes in words, the
 * strongest correlations, or both full matrices with `all_correlations`); `csv` one row per
 * parameter (empty cells where a value does not exist); `json` one object for scripts (null
 * where a value does not exist, never NaN).
 */
void write_results_summary(const ResultsSummary& s, SummaryFormat format, bool all_correlations, std::ostream& os);

}  // namespace ef

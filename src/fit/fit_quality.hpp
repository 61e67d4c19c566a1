// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <vector>

#include <ensemblefit/core/replica_block.hpp>
#include <ensemblefit/fit/fit_problem.hpp>

#include "src/fit/correlated.hpp"
#include "src/io/correlated_data.hpp"
#include "src/io/fit_quality_io.hpp"

namespace ef {

/**
 * What fit_quality() needs from before whiten_problem() changed the problem (the uncertainties
 * as given, the covariance file's matrix, the data sets) and what whiten_problem() built.
 * Holds no model: the fit's own (pb.model) is evaluated, its values whitened or not as the fit
 * sees them, so the report costs no second copy of dis-mellin's tables.
 */
struct FitQualityInputs {
    std::vector<double> sigma;       ///< n, as given
    std::vector<double> covariance;  ///< n x n of [data] covariance, or empty
    std::vector<double> dataset;     ///< n, or empty without [data] dataset
    std::vector<std::string> dataset_names;
    std::vector<std::string> source_names;
    CorrelatedFactor factor;      ///< B and the factor of C; empty for uncorrelated data
    bool model_whitened = false;  ///< pb.model's values are L^-1 t (a table-linear model's whitened table)
};

/// Keeps what fit_quality() needs of `pb` and `in`: call before whiten_problem(), then set
/// `factor` (and model_whitened) from what it did.
FitQualityInputs quality_inputs(const FitProblem& pb, const CorrelatedInputs& in);

/**
 * The report for the central parameters `central` (P values) and the replica rows `rows` (row j
 * is replica first + j, as /replicas holds them), pb being the problem as fitted (after
 * whiten_problem), on `threads` OpenMP threads.
 *
 * With C = C0 + B B^T (src/fit/correlated.hpp), r = y - t(p) the central fit's residual and
 * W = L^-1 B: the nuisance parameters minimising |C0^-1/2 (r - B lambda)|^2 + |lambda|^2 are
 * lambda = B^T C^-1 r = W^T L^-1 r, in units of each source's one sigma (for a normalisation,
 * lambda times its sigma is the fitted relative shift), the theory held at the central fit (the
 * analytic solution given the fit's theory). Their posterior error is sqrt(1 - (W^T W)_kk)
 * (the prior's is 1), their pull lambda / sqrt((W^T W)_kk): the shift in units of the spread
 * data drawn from C would give it (1 - error^2). chi2 of a data set is r_d^T C_dd^-1 r_d with
 * its own block of C (its uncertainties and the sources on its rows), as global fits quote it:
 * the parts add up to the total only when no source spans two data sets. A replica's chi2 is
 * r^T C^-1 r of its parameters against the central data (NaN unless status 0 or 1): a function
 * of its parameters and the data alone, so a shard computes its rows' and `merge` carries them.
 * `central` empty (a shard without replica 0): only the replicas' part (n = 0, empty()).
 */
FitQuality fit_quality(const FitProblem& pb, const FitQualityInputs& in, const std::vector<double>& central,
                       const ReplicaBlock& rows, std::int64_t first, int threads);

}  // namespace ef

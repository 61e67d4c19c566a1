// SPDX-License-Identifier: MIT
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace ef {

/// Quantile levels of /summary/quantiles, in percent.
inline constexpr double kQuantileLevels[5] = {2.5, 16.0, 50.0, 84.0, 97.5};

/**
 * Ensemble statistics over the converged replicas (status 0), computed in replica order so the
 * bits do not depend on how replicas were distributed: mean, standard deviation and covariance
 * (n - 1 normalisation), and quantiles by linear interpolation between order statistics (numpy's
 * default). NaN where fewer than two replicas (one for the mean and quantiles) converged.
 * `correlation` is the covariance normalised (correlation_of).
 */
struct EnsembleSummary {
    int P = 0;
    std::int64_t used = 0;          ///< converged replicas
    std::int64_t total = 0;         ///< replicas considered
    std::vector<double> mean;       ///< P
    std::vector<double> std;        ///< P
    std::vector<double> covariance; ///< P x P
    std::vector<double> quantiles;  ///< 5 x P (rows: kQuantileLevels)
    std::vector<double> correlation;  ///< P x P: correlation_of(covariance)
};

EnsembleSummary summarize(const std::vector<double>& params, const std::vector<std::int64_t>& status,
                          int P);

/**
 * The correlation matrix of a P x P covariance: rho_ab = C_ab / sqrt(C_aa C_bb), and exactly 1
 * on the diagonal. NaN in row and column a where C_aa is not positive and finite (a fixed
 * parameter has variance 0, a singular fit NaN): no correlation is defined there. A positive
 * factor on the covariance (error_scale = chi2) does not change it.
 */
std::vector<double> correlation_of(const std::vector<double>& covariance, int P);

/// kQuantileLevels of `values` by linear interpolation between order statistics, as numpy's
/// default; NaN for an empty list. `values` is reordered in place: the order statistics are
/// selected (nth_element), not sorted, unless a value is NaN (then sorted, as before).
std::array<double, 5> quantiles_of(std::vector<double>& values);

}  // namespace ef

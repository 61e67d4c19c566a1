// SPDX-License-Identifier: MIT
#pragma once

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
 */
struct EnsembleSummary {
    int P = 0;
    std::int64_t used = 0;          ///< converged replicas
    std::int64_t total = 0;         ///< replicas considered
    std::vector<double> mean;       ///< P
    std::vector<double> std;        ///< P
    std::vector<double> covariance; ///< P x P
    std::vector<double> quantiles;  ///< 5 x P (rows: kQuantileLevels)
};

EnsembleSummary summarize(const std::vector<double>& params, const std::vector<std::int64_t>& status,
                          int P);

}  // namespace ef

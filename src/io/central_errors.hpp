// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <vector>

#include <ensemblefit/config/fit_config.hpp>
#include <ensemblefit/fit/fit_problem.hpp>

#include "src/io/h5.hpp"

namespace ef {

/**
 * How the central fit's errors are stored (`[fit] error_scale`), and the datasets that go with
 * them in a results file:
 *
 *   /central/covariance   P x P; (J^T W J)^-1 (error_scale = none), or that times chi2/ndf
 *                         (chi2). Attributes: error_scale ("none" | "chi2"), ndf (points - free
 *                         parameters) and, once the central fit is written with chi2,
 *                         chi2_per_ndf (the factor applied).
 *   /central/covariance_unscaled   only with chi2: (J^T W J)^-1 as the fit gave it, so that a
 *                         merge rewrites the scaled one bit for bit (and users may rescale).
 *   /central/correlation  P x P, correlation_of() of the unscaled covariance: the same bits
 *                         whatever error_scale says; NaN in the rows and columns of parameters
 *                         without a variance (fixed ones: 0, a singular fit: NaN).
 *
 * With chi2 the errors are those of NIST StRD's certified standard deviations, MINPACK's and
 * scipy's curve_fit(absolute_sigma=False): the sigmas' overall scale is estimated from the fit.
 */
struct CentralErrors {
    ErrorScale scale = ErrorScale::none;
    std::int64_t ndf = -1;  ///< points - free parameters; -1 when unknown (older files)
};

/// The errors a run of `pb` stores; usage_error naming fit.error_scale when chi2 is asked for
/// with no degrees of freedom (points <= free parameters).
CentralErrors central_errors_of(const FitProblem& pb);

/// "none" | "chi2".
const char* to_string(ErrorScale scale);

/// Creates what `e` needs beside /central/covariance (NaN until the central fit is written) and
/// sets its attributes; datasets that exist already are kept.
void prepare_central_errors(h5::File& f, const CentralErrors& e, int P);

/// Writes the central fit's covariance `cov` (P x P, unscaled; empty or the wrong size: NaN),
/// scaled as `e` says with its chi2, and its correlation.
void write_central_errors(h5::File& f, const CentralErrors& e, double chi2, const std::vector<double>& cov, int P);

/// The errors a file says it stores (defaults for files without the attributes).
CentralErrors read_central_errors(const h5::File& f);

/// The unscaled central covariance of a file, whatever its error_scale.
std::vector<double> read_central_covariance_unscaled(const h5::File& f);

}  // namespace ef

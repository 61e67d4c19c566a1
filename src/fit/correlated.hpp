// SPDX-License-Identifier: MIT
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <ensemblefit/fit/fit_problem.hpp>

#include "kernels/fit/whiten.hpp"
#include "src/io/correlated_data.hpp"

namespace ef {

/**
 * The Cholesky factor of a fit's data covariance C and the arrays its WhitenView points into
 * (kernels/fit/whiten.hpp has the two forms). Built once per run, the same bits on every rank.
 *
 * C = C0 + B B^T: C0 is diag(sigma^2), or the full covariance of [data] covariance; B (n x K)
 * has one column per systematic (absolute, or relative times the t0 prediction for `:mult`)
 * and one per [normalisation.NAME] dataset (sigma_N times the t0 prediction on its rows, 0
 * elsewhere).
 *
 * t0 prescription (Ball et al., NNPDF, arXiv:0912.2276): multiplicative uncertainties are
 * relative to a fixed prediction t0, never to the data (which biases the fit low: d'Agostini)
 * nor to the current fit point (which makes C depend on the parameters, so chi^2 is no longer
 * a quadratic form and replicas no longer share one factor). Here t0 is the model at the
 * configured start values ([param.NAME] start): set the starts to a previous fit's central
 * values to iterate t0 as NNPDF does.
 */
struct Whitening {
    std::vector<double> inv_sigma, a, v, d, dense;
    WhitenView view;
};

/// B = the correlated shifts (n x K, row-major) for prediction t0 (n).
std::vector<double> correlated_shifts(const FitConfig& cfg, const CorrelatedInputs& in, const std::vector<double>& t0);

/// The structured factor of diag(sigma^2) + B B^T (B: n x K, row-major; K <= 256).
Whitening structured_whitening(const std::vector<double>& sigma, const std::vector<double>& B, int K);

/// The dense Cholesky factor of C (n x n, row-major). A pivot that is not positive is exit 3,
/// naming `what` and the pivot (1-based) with its value.
Whitening dense_whitening(const std::vector<double>& C, int n, const std::string& what);

/// Each column of T (n x cols, row-major) replaced by L^-1 column: the same arithmetic as
/// whiten_in_place() on the column, for `threads` OpenMP threads.
void whiten_columns(const WhitenView& w, double* T, long cols, int threads);

/// What whiten_problem() built, kept for the fit's quality report (src/fit/fit_quality.hpp):
/// the correlated shifts B (n x K, row-major, the t0 prediction's) and the factor of C.
struct CorrelatedFactor {
    std::vector<double> B;
    int K = 0;
    std::shared_ptr<const Whitening> whitening;  ///< null: uncorrelated data
};

/**
 * Turns `pb` into the equivalent uncorrelated problem, once, before any worker is made: reads
 * nothing (`in` from load_correlated), computes t0, factorises C = L L^T, replaces y by L^-1 y
 * and sigma by 1. A table-linear model (dis-mellin) gets its table whitened once (L^-1 T): its
 * every path, on the CPU and the GPU, then runs unchanged. Other models keep L in
 * pb.whitening and the LM whitens their values and Jacobian columns (the CPU qr path; other
 * paths are refused, exit 2). Replica smearing y + z then draws y + L z in the data's own
 * space: N(y, C), each replica's correlated shifts from Philox keyed (seed, r) as before.
 * Usage errors (exit 2): resample = bootstrap (points are not exchangeable under correlated
 * uncertainties), solver = normal for a model that is not table-linear, a t0 prediction that
 * is not finite, more than 256 sources without a covariance file.
 */
CorrelatedFactor whiten_problem(FitProblem& pb, const CorrelatedInputs& in, int threads);

/// chi^2 = r^T C^-1 r through the factor (for tests and reports): |L^-1 r|^2.
double whitened_chi2(const WhitenView& w, std::vector<double> r);

}  // namespace ef

// SPDX-License-Identifier: MIT
#pragma once

#include <ensemblefit/fit/fit_problem.hpp>

#include "kernels/fit/fit_inputs.hpp"
#include "kernels/fit/fit_plan.hpp"

namespace ef {

/**
 * The one place where a fit's path, arithmetic, dual widths, parameter arrays and LM settings
 * are decided, from the problem and its config (kernels/fit/fit_plan.hpp says what each means).
 * make_worker() calls it once per run and hands the plan to the worker it makes.
 */
FitPlan make_fit_plan(const FitProblem& problem);

/// What the kernels read for `plan`: views of the problem's model and data (the problem must
/// outlive them) and, for the Gram path, its inputs, made here once.
FitInputs fit_inputs(const FitProblem& problem, const FitPlan& plan);

/// Whether `problem` can be fitted by a GPU worker (not: a model plugin without GPU code, or
/// correlated data of a model that is not table-linear); placement's `auto` rule asks it.
bool fits_on_gpu(const FitProblem& problem);

}  // namespace ef

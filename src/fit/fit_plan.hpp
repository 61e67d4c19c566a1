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

class TableShare;

/// How fit_inputs() makes the Gram path's inputs.
struct GramBuild {
    /// Null: this process makes and holds them. A node share (src/comm/table_share.hpp): the
    /// node's ranks hold one copy, each computing a slice of it; fit_inputs() is then collective
    /// over them (the same `products` on each), and the share keeps the copy alive.
    TableShare* share = nullptr;
    /// Also the CPU worker's products, T^T and G = T^T W T packed (5.9 GFLOP for stats2), so
    /// that its make_fit_context() only takes them: where a rank of the node fits on the CPU.
    bool products = false;
    int threads = 1;  ///< OpenMP threads of this rank
};

/// What the kernels read for `plan`: views of the problem's model and data (the problem must
/// outlive them) and, for the Gram path, its inputs, made here once (per process or per node).
FitInputs fit_inputs(const FitProblem& problem, const FitPlan& plan, const GramBuild& build = {});

/// Whether `problem` can be fitted by a GPU worker (not: a model plugin without GPU code, or
/// correlated data of a model that is not table-linear); placement's `auto` rule asks it.
bool fits_on_gpu(const FitProblem& problem);

}  // namespace ef

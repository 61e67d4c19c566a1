// SPDX-License-Identifier: MIT
#pragma once

#include <memory>
#include <string>
#include <variant>
#include <vector>

#include <ensemblefit/model/formula.hpp>

#include "kernels/models/builtin_models.hpp"
#include "kernels/models/dis_mellin.hpp"
#include "kernels/models/formula_model.hpp"

namespace ef {

/// Every model a worker can run; workers std::visit it to instantiate their templates.
using ModelVariant = std::variant<LinearModel, PolynomialModel, ExponentialModel, GaussianModel,
                                  Gaussian2DModel, FormulaModel, DisMellinModel>;

/**
 * A model ready to run: the trivially copyable view (ModelVariant) plus the host storage it
 * points into (a formula's program, a physics model's tables). Internal to the library.
 */
class CompiledModel {
   public:
    ModelVariant view;
    std::vector<std::string> param_names;
    std::string description;
    double flops_per_evaluation = 0.0;  ///< values at all points; 0 when not counted
    double flops_per_point = 0.0;       ///< one value() on doubles
    /// One evaluation (prepare + all points) on Dual<double, K> for K = 4, 8, 16: one Jacobian
    /// pass. 0 when not counted.
    double flops_dual_pass[3] = {0.0, 0.0, 0.0};
    std::shared_ptr<const void> storage;
};

}  // namespace ef

// SPDX-License-Identifier: MIT
#pragma once

#include <variant>

#include "kernels/models/builtin_models.hpp"
#include "kernels/models/dis_mellin.hpp"
#include "kernels/models/formula_model.hpp"
#include "kernels/models/plugin_model.hpp"

namespace ef {

/// Every model a worker can run, as the trivially copyable view its kernels take (pointers into
/// host memory, or into device copies); workers std::visit it to instantiate their templates.
using ModelVariant = std::variant<LinearModel, PolynomialModel, ExponentialModel, GaussianModel,
                                  Gaussian2DModel, FormulaModel, DisMellinModel, PluginModel>;

}  // namespace ef

// SPDX-License-Identifier: MIT
#pragma once

#include <stdexcept>
#include <type_traits>

#include "kernels/fit/fit_plan.hpp"
#include "kernels/models/builtin_models.hpp"
#include "kernels/models/dis_mellin.hpp"
#include "kernels/models/plugin_model.hpp"

namespace ef {

/// Parameters of a model whose count never changes (0: set by the config).
template <class Model>
inline constexpr int kFixedParams = 0;
template <>
inline constexpr int kFixedParams<LinearModel> = 2;
template <>
inline constexpr int kFixedParams<ExponentialModel> = 3;
template <>
inline constexpr int kFixedParams<Gaussian2DModel> = 5;

/// Fewest parameters a model can have (widths below it are never instantiated).
template <class Model>
inline constexpr int kMinParams = 1;
template <>
inline constexpr int kMinParams<GaussianModel> = 4;

/**
 * Calls f(std::integral_constant<int, K>{}) with the plan's qr dual width K (4, 8 or 16): the
 * width make_fit_plan chose, as the template argument the per-replica LM needs. Host code shared
 * by the CPU and GPU workers; it turns the plan into a type, it decides nothing.
 */
template <class F>
void with_dual_width(const FitPlan& plan, F&& f) {
    if (plan.dual_width == 4) f(std::integral_constant<int, 4>{});
    else if (plan.dual_width == 8) f(std::integral_constant<int, 8>{});
    else f(std::integral_constant<int, 16>{});
}

/**
 * Calls f(Real{}, std::integral_constant<int, K>{}) for the normal-equations solver: Real and K
 * from the plan (float or double; 3, 5, 8 or 16 slots). Only the widths a model can be given are
 * instantiated (one for a fixed-size model, none below its fewest parameters). Host code shared
 * by the CPU and GPU workers.
 */
template <class Model, class F>
void with_normal_kernel(const Model& /*model*/, const FitPlan& plan, F&& f) {
    if constexpr (std::is_same_v<Model, DisMellinModel>) {
        // make_fit_plan sends dis-mellin's normal-equations fits down the Gram path.
        throw std::logic_error("dis-mellin fits take the batched paths, not the per-replica normal solver");
    } else if constexpr (std::is_same_v<Model, PluginModel>) {
        // A plugin's normal solver is instantiated in the plugin (its cpu_normal_* entries).
        throw std::logic_error("a plugin model runs the plugin's own entry points");
    } else {
        auto with_real = [&](auto real) {
            constexpr int fixed = kFixedParams<Model>;
            if constexpr (fixed > 0) {
                if (plan.normal_width != normal_width(fixed))
                    throw std::logic_error("fit plan: normal width does not match the model's parameters");
                f(real, std::integral_constant<int, normal_width(fixed)>{});
            } else {
                if constexpr (kMinParams<Model> <= 3) {
                    if (plan.normal_width == 3) return f(real, std::integral_constant<int, 3>{});
                }
                if (plan.normal_width == 5) f(real, std::integral_constant<int, 5>{});
                else if (plan.normal_width == 8) f(real, std::integral_constant<int, 8>{});
                else f(real, std::integral_constant<int, kNormalMaxParams>{});
            }
        };
        if (plan.single_precision) with_real(float{});
        else with_real(double{});
    }
}

}  // namespace ef

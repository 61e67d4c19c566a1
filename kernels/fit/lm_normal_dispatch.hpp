// SPDX-License-Identifier: MIT
#pragma once

#include <type_traits>

#include <ensemblefit/config/fit_config.hpp>
#include <ensemblefit/core/error.hpp>

#include "kernels/fit/lm_normal.hpp"
#include "kernels/models/builtin_models.hpp"
#include "kernels/models/dis_mellin.hpp"

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
 * Calls f(Real{}, std::integral_constant<int, K>{}) for the normal-equations solver: Real from
 * the config's precision, K the smallest of 3, 5, 8, 16 that holds all P parameters (only the one
 * width a fixed-size model needs is instantiated). Host code shared by the CPU and GPU workers.
 */
template <class Model, class F>
void dispatch_normal(const Model& /*model*/, const FitConfig& cfg, int P, F&& f) {
    if constexpr (std::is_same_v<Model, DisMellinModel>) {
        // dis-mellin never comes here: it takes the batched table or Gram path (fit_kernels).
        throw usage_error(cfg.config_file + ": dis-mellin fits take the batched table path");
    } else {
        auto with_real = [&](auto real) {
            constexpr int fixed = kFixedParams<Model>;
            if constexpr (fixed > 0) {
                f(real, std::integral_constant<int, fixed <= 3 ? 3 : (fixed <= 5 ? 5 : (fixed <= 8 ? 8 : 16))>{});
            } else {
                if constexpr (kMinParams<Model> <= 3) {
                    if (P <= 3) return f(real, std::integral_constant<int, 3>{});
                }
                if (P <= 5) f(real, std::integral_constant<int, 5>{});
                else if (P <= 8) f(real, std::integral_constant<int, 8>{});
                else f(real, std::integral_constant<int, kNormalMaxParams>{});
            }
        };
        if (cfg.precision == FitPrecision::float32) with_real(float{});
        else with_real(double{});
    }
}

}  // namespace ef

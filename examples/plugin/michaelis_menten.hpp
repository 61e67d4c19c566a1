// SPDX-License-Identifier: MIT
// A model plugin: Michaelis-Menten enzyme kinetics, the reaction rate at substrate
// concentration s. Built against the installed package by CMakeLists.txt next to this file.
#pragma once

#include "kernels/models/builtin_models.hpp"

/**
 * Michaelis-Menten rate, v = vmax s / (km + s).
 *   p[0]: vmax, the rate at saturating substrate
 *   p[1]: km, the substrate concentration at half of vmax
 * One x column per point: s. The model concept is the built-ins' (kernels/models/
 * builtin_models.hpp), plus `name` and `param_names` for the plugin table. Call functions
 * qualified, ef::exp(v), ef::log(v), ef::pow(a, b), ...: they are ef_math's (the same bits on
 * CPU and GPU) with their dual-number overloads, as the built-ins get inside namespace ef; an
 * unqualified exp(double) here would be the C library's.
 */
struct MichaelisMenten : ef::PointwiseModel {
    static constexpr const char* name = "michaelis-menten";
    static constexpr const char* param_names[] = {"vmax", "km"};

    EF_HD int num_params() const { return 2; }
    template <class T>
    EF_HD T value(const T* p, const T* /*ws*/, const double* x, int /*i*/) const {
        const T s = T(x[0]);
        return p[0] * s / (p[1] + s);
    }
};

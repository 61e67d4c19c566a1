// SPDX-License-Identifier: MIT
// The built-in gaussian2d (kernels/models/builtin_models.hpp, Gaussian2DModel) written again as
// a model plugin, for perf/plugin/bench_plugin.sh: the same formula, so any difference in speed
// is the plugin's (function pointer per unit, its own instantiation, its compiler flags).
#pragma once

#include "kernels/models/builtin_models.hpp"

/**
 * Circular 2-D Gaussian spot on a constant, y = a exp(-((x0 - u)^2 + (x1 - v)^2) / (2 s^2)) + c.
 *   p[0]: a, p[1]: u, p[2]: v, p[3]: s, p[4]: c (as gaussian2d)
 * ef::exp, qualified: at global scope an unqualified exp(double) is glibc's, not the ef_math
 * function the built-in (inside namespace ef) calls, and the bits would differ.
 */
struct SpotPlugin : ef::PointwiseModel {
    static constexpr const char* name = "spot-plugin";
    static constexpr const char* param_names[] = {"a", "u", "v", "s", "c"};

    EF_HD int num_params() const { return 5; }
    template <class T>
    EF_HD T value(const T* p, const T* /*ws*/, const double* x, int /*i*/) const {
        const T du = T(x[0]) - p[1];
        const T dv = T(x[1]) - p[2];
        const T q = (du * du + dv * dv) / (p[3] * p[3]);
        return p[0] * ef::exp(T(-0.5) * q) + p[4];
    }
};

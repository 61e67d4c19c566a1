// SPDX-License-Identifier: MIT
#pragma once

#include "kernels/core/dual.hpp"
#include "kernels/core/hd.hpp"

namespace ef {

/**
 * The model concept, shared by every model and by both workers:
 *
 *     int num_params() const;
 *     int workspace_size() const;                       // scalars of type T that prepare() fills
 *     template <class T> EF_HD void prepare(const T* p, T* ws) const;
 *     template <class T> EF_HD T value(const T* p, const T* ws, const double* x, int i) const;
 *
 * `prepare` computes what depends on the parameters but not on the data point (Mellin moments
 * of a PDF fit, say) once per evaluation; `value` returns the model at point i whose independent
 * variables start at x. Models are templated on the scalar type so that double gives values and
 * Dual<double, K> gives values plus Jacobian columns from the same code. Models are trivially
 * copyable views (pointers to tables they do not own) so they can be passed to CUDA kernels.
 */
struct PointwiseModel {
    EF_HD int workspace_size() const { return 0; }
    template <class T>
    EF_HD void prepare(const T* /*p*/, T* /*ws*/) const {}
};

/**
 * Straight line, y = a + b x.
 *   p[0]: a, intercept
 *   p[1]: b, slope
 */
struct LinearModel : PointwiseModel {
    EF_HD int num_params() const { return 2; }
    template <class T>
    EF_HD T value(const T* p, const T* /*ws*/, const double* x, int /*i*/) const {
        return p[0] + p[1] * x[0];
    }
};

/**
 * Polynomial of order n in Horner form, y = c0 + c1 x + ... + cn x^n.
 *   p[k]: c<k>, coefficient of x^k, k = 0..n
 */
struct PolynomialModel : PointwiseModel {
    int order = 1;
    EF_HD int num_params() const { return order + 1; }
    template <class T>
    EF_HD T value(const T* p, const T* /*ws*/, const double* x, int /*i*/) const {
        T acc = p[order];
        for (int k = order - 1; k >= 0; --k) acc = acc * x[0] + p[k];
        return acc;
    }
};

/**
 * Exponential decay on a constant, y = a exp(-k x) + c.
 *   p[0]: a, amplitude at x = 0
 *   p[1]: k, rate (1 / decay length; negative for growth)
 *   p[2]: c, constant offset
 */
struct ExponentialModel : PointwiseModel {
    EF_HD int num_params() const { return 3; }
    template <class T>
    EF_HD T value(const T* p, const T* /*ws*/, const double* x, int /*i*/) const {
        return p[0] * exp(-(p[1] * x[0])) + p[2];
    }
};

/**
 * Sum of m Gaussian peaks on a constant,
 * y = c + sum_j a_j exp(-(x - mu_j)^2 / (2 s_j^2)).
 *   p[0]:       c, constant background
 *   p[1 + 3j]:  a<j+1>, height of peak j
 *   p[2 + 3j]:  mu<j+1>, centre of peak j
 *   p[3 + 3j]:  s<j+1>, width (standard deviation) of peak j
 */
struct GaussianModel : PointwiseModel {
    int peaks = 1;
    EF_HD int num_params() const { return 1 + 3 * peaks; }
    template <class T>
    EF_HD T value(const T* p, const T* /*ws*/, const double* x, int /*i*/) const {
        T acc = p[0];
        for (int j = 0; j < peaks; ++j) {
            const T& a = p[1 + 3 * j];
            const T& mu = p[2 + 3 * j];
            const T& s = p[3 + 3 * j];
            const T u = (x[0] - mu) / s;
            acc += a * exp(-0.5 * (u * u));
        }
        return acc;
    }
};

/**
 * Circular 2-D Gaussian spot on a constant (localization microscopy, Gpufit's GAUSS_2D),
 * y = a exp(-((x0 - u)^2 + (x1 - v)^2) / (2 s^2)) + c, x = (x0, x1) per point.
 *   p[0]: a, amplitude
 *   p[1]: u, centre along x0
 *   p[2]: v, centre along x1
 *   p[3]: s, width (standard deviation)
 *   p[4]: c, constant background
 */
struct Gaussian2DModel : PointwiseModel {
    EF_HD int num_params() const { return 5; }
    template <class T>
    EF_HD T value(const T* p, const T* /*ws*/, const double* x, int /*i*/) const {
        // In T throughout (x converted once), so a float fit's values are float arithmetic.
        const T du = T(x[0]) - p[1];
        const T dv = T(x[1]) - p[2];
        const T q = (du * du + dv * dv) / (p[3] * p[3]);
        return p[0] * exp(T(-0.5) * q) + p[4];
    }
};

}  // namespace ef

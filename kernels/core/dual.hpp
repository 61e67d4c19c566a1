// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <type_traits>

#include "kernels/core/ef_math.hpp"
#include "kernels/core/hd.hpp"

namespace ef {

/**
 * Forward-mode dual number with K derivative slots: a value and its gradient with respect to up
 * to K seeded inputs.
 *
 * Models are templates over their scalar type; evaluating them on Dual<double, K> gives the
 * value and K columns of the Jacobian in one pass (the idea of Ceres' Jet, as plain arrays so
 * the type works unchanged in CUDA kernels). Models with more than K parameters are
 * differentiated in ceil(P / K) passes, each seeding a different block of parameters.
 */
template <class T, int K>
struct Dual {
    T v;
    T d[K];

    EF_HD Dual() : v(0) {
        for (int k = 0; k < K; ++k) d[k] = 0;
    }
    EF_HD Dual(T value) : v(value) {  // NOLINT: implicit on purpose, constants promote
        for (int k = 0; k < K; ++k) d[k] = 0;
    }
    /// A seeded variable: derivative 1 in slot `slot` (no seed when slot is out of [0, K)).
    EF_HD static Dual variable(T value, int slot) {
        Dual r(value);
        if (slot >= 0 && slot < K) r.d[slot] = 1;
        return r;
    }

    EF_HD Dual& operator+=(const Dual& o) {
        v += o.v;
        for (int k = 0; k < K; ++k) d[k] += o.d[k];
        return *this;
    }
    EF_HD Dual& operator-=(const Dual& o) {
        v -= o.v;
        for (int k = 0; k < K; ++k) d[k] -= o.d[k];
        return *this;
    }
    EF_HD Dual& operator*=(const Dual& o) {
        for (int k = 0; k < K; ++k) d[k] = d[k] * o.v + v * o.d[k];
        v *= o.v;
        return *this;
    }
    EF_HD Dual& operator/=(const Dual& o) {
        // The value is divided exactly as plain doubles are, so a model gives the same bits on
        // T = double and on T = Dual.
        const T q = v / o.v;
        for (int k = 0; k < K; ++k) d[k] = (d[k] - q * o.d[k]) / o.v;
        v = q;
        return *this;
    }
};

/// Scalar-type traits used by templated model code to stay generic over double and Dual.
template <class T>
struct ScalarTraits {
    using Real = T;
    EF_HD static T value(const T& x) { return x; }
};
template <class T, int K>
struct ScalarTraits<Dual<T, K>> {
    using Real = T;
    EF_HD static T value(const Dual<T, K>& x) { return x.v; }
};

/// The real value of a scalar or dual (for branches such as abs()).
template <class T>
EF_HD typename ScalarTraits<T>::Real value_of(const T& x) {
    return ScalarTraits<T>::value(x);
}

// Arithmetic -------------------------------------------------------------------------------
template <class T, int K>
EF_HD Dual<T, K> operator+(Dual<T, K> a, const Dual<T, K>& b) { return a += b; }
template <class T, int K>
EF_HD Dual<T, K> operator-(Dual<T, K> a, const Dual<T, K>& b) { return a -= b; }
template <class T, int K>
EF_HD Dual<T, K> operator*(Dual<T, K> a, const Dual<T, K>& b) { return a *= b; }
template <class T, int K>
EF_HD Dual<T, K> operator/(Dual<T, K> a, const Dual<T, K>& b) { return a /= b; }
template <class T, int K>
EF_HD Dual<T, K> operator-(const Dual<T, K>& a) {
    Dual<T, K> r;
    r.v = -a.v;
    for (int k = 0; k < K; ++k) r.d[k] = -a.d[k];
    return r;
}
template <class T, int K>
EF_HD Dual<T, K> operator+(const Dual<T, K>& a) { return a; }

// Mixed with the underlying real type ...
template <class T, int K>
EF_HD Dual<T, K> operator+(Dual<T, K> a, T b) { a.v += b; return a; }
template <class T, int K>
EF_HD Dual<T, K> operator+(T b, Dual<T, K> a) { a.v += b; return a; }
template <class T, int K>
EF_HD Dual<T, K> operator-(Dual<T, K> a, T b) { a.v -= b; return a; }
template <class T, int K>
EF_HD Dual<T, K> operator-(T b, const Dual<T, K>& a) { return Dual<T, K>(b) - a; }
template <class T, int K>
EF_HD Dual<T, K> operator*(Dual<T, K> a, T b) {
    a.v *= b;
    for (int k = 0; k < K; ++k) a.d[k] *= b;
    return a;
}
template <class T, int K>
EF_HD Dual<T, K> operator*(T b, Dual<T, K> a) { return a * b; }
template <class T, int K>
EF_HD Dual<T, K> operator/(Dual<T, K> a, T b) {
    a.v /= b;
    for (int k = 0; k < K; ++k) a.d[k] /= b;
    return a;
}
template <class T, int K>
EF_HD Dual<T, K> operator/(T b, const Dual<T, K>& a) { return Dual<T, K>(b) / a; }

// ... and with any other arithmetic scalar, first converted to T: a model's double constants and
// data (x) work unchanged on Dual<float, K>, rounded to float.
template <class S, class T>
inline constexpr bool kOtherScalar = std::is_arithmetic_v<S> && !std::is_same_v<S, T>;

template <class T, int K, class S, std::enable_if_t<kOtherScalar<S, T>, int> = 0>
EF_HD Dual<T, K> operator+(const Dual<T, K>& a, S b) { return a + static_cast<T>(b); }
template <class T, int K, class S, std::enable_if_t<kOtherScalar<S, T>, int> = 0>
EF_HD Dual<T, K> operator+(S b, const Dual<T, K>& a) { return static_cast<T>(b) + a; }
template <class T, int K, class S, std::enable_if_t<kOtherScalar<S, T>, int> = 0>
EF_HD Dual<T, K> operator-(const Dual<T, K>& a, S b) { return a - static_cast<T>(b); }
template <class T, int K, class S, std::enable_if_t<kOtherScalar<S, T>, int> = 0>
EF_HD Dual<T, K> operator-(S b, const Dual<T, K>& a) { return static_cast<T>(b) - a; }
template <class T, int K, class S, std::enable_if_t<kOtherScalar<S, T>, int> = 0>
EF_HD Dual<T, K> operator*(const Dual<T, K>& a, S b) { return a * static_cast<T>(b); }
template <class T, int K, class S, std::enable_if_t<kOtherScalar<S, T>, int> = 0>
EF_HD Dual<T, K> operator*(S b, const Dual<T, K>& a) { return a * static_cast<T>(b); }
template <class T, int K, class S, std::enable_if_t<kOtherScalar<S, T>, int> = 0>
EF_HD Dual<T, K> operator/(const Dual<T, K>& a, S b) { return a / static_cast<T>(b); }
template <class T, int K, class S, std::enable_if_t<kOtherScalar<S, T>, int> = 0>
EF_HD Dual<T, K> operator/(S b, const Dual<T, K>& a) { return static_cast<T>(b) / a; }

template <class T, int K>
EF_HD bool operator<(const Dual<T, K>& a, const Dual<T, K>& b) { return a.v < b.v; }
template <class T, int K>
EF_HD bool operator>(const Dual<T, K>& a, const Dual<T, K>& b) { return a.v > b.v; }

// Plain-double elementary functions --------------------------------------------------------------
// Transcendentals go through ef::math, not std:: or CUDA's libdevice, so that host and device
// give the same bits (kernels/core/ef_math.hpp says why). Declared before the Dual overloads so
// that their unqualified calls on T = double find these. sqrt, fabs, fmax are exact everywhere
// and stay std::.
EF_HD inline double exp(double x) { return math::exp(x); }
EF_HD inline double log(double x) { return math::log(x); }
EF_HD inline double pow(double x, double y) { return math::pow(x, y); }
EF_HD inline double sin(double x) { return math::sin(x); }
EF_HD inline double cos(double x) { return math::cos(x); }
EF_HD inline double tan(double x) { return math::tan(x); }
EF_HD inline double atan(double x) { return math::atan(x); }
EF_HD inline double atan2(double y, double x) { return math::atan2(y, x); }
// Float: the double function rounded to float (at most one float ulp, the same bits on host and
// device); exp, the commonest in small models, by its own shorter double kernel.
EF_HD inline float exp(float x) { return math::exp_float(x); }
EF_HD inline float log(float x) { return static_cast<float>(math::log(x)); }
EF_HD inline float pow(float x, float y) { return static_cast<float>(math::pow(x, y)); }
EF_HD inline float sin(float x) { return static_cast<float>(math::sin(x)); }
EF_HD inline float cos(float x) { return static_cast<float>(math::cos(x)); }
EF_HD inline float tan(float x) { return static_cast<float>(math::tan(x)); }
EF_HD inline float atan(float x) { return static_cast<float>(math::atan(x)); }
EF_HD inline float atan2(float y, float x) { return static_cast<float>(math::atan2(y, x)); }

// Elementary functions: chain rule with f'(v) -------------------------------------------------
namespace detail {
template <class T, int K>
EF_HD Dual<T, K> chain(const Dual<T, K>& a, T fv, T dfv) {
    Dual<T, K> r;
    r.v = fv;
    for (int k = 0; k < K; ++k) r.d[k] = dfv * a.d[k];
    return r;
}
}  // namespace detail

template <class T, int K>
EF_HD Dual<T, K> exp(const Dual<T, K>& a) {
    const T e = exp(a.v);
    return detail::chain(a, e, e);
}
template <class T, int K>
EF_HD Dual<T, K> log(const Dual<T, K>& a) {
    return detail::chain(a, log(a.v), T(1) / a.v);
}
template <class T, int K>
EF_HD Dual<T, K> sqrt(const Dual<T, K>& a) {
    using std::sqrt;
    const T s = sqrt(a.v);
    return detail::chain(a, s, T(0.5) / s);
}
template <class T, int K>
EF_HD Dual<T, K> sin(const Dual<T, K>& a) {
    return detail::chain(a, sin(a.v), cos(a.v));
}
template <class T, int K>
EF_HD Dual<T, K> cos(const Dual<T, K>& a) {
    return detail::chain(a, cos(a.v), -sin(a.v));
}
template <class T, int K>
EF_HD Dual<T, K> tan(const Dual<T, K>& a) {
    const T t = tan(a.v);
    return detail::chain(a, t, T(1) + t * t);
}
template <class T, int K>
EF_HD Dual<T, K> atan(const Dual<T, K>& a) {
    return detail::chain(a, atan(a.v), T(1) / (T(1) + a.v * a.v));
}
template <class T, int K>
EF_HD Dual<T, K> abs(const Dual<T, K>& a) {
    return a.v < T(0) ? -a : a;
}
/// a^b with both dual: exp(b log a) for a > 0; integer-valued constant exponents of negative
/// bases go through the pow(Dual, T) overload.
template <class T, int K>
EF_HD Dual<T, K> pow(const Dual<T, K>& a, const Dual<T, K>& b) {
    const T pv = pow(a.v, b.v);
    Dual<T, K> r;
    r.v = pv;
    // d(a^b) = b a^(b-1) da + a^b log(a) db; the log term is dropped where db is zero so that
    // negative bases with constant exponents keep finite derivatives.
    const T da = (a.v == T(0)) ? (b.v == T(1) ? T(1) : T(0)) : b.v * pv / a.v;
    bool has_db = false;
    for (int k = 0; k < K; ++k) has_db = has_db || (b.d[k] != T(0));
    const T db = has_db ? pv * log(a.v) : T(0);
    for (int k = 0; k < K; ++k) r.d[k] = da * a.d[k] + db * b.d[k];
    return r;
}
template <class T, int K>
EF_HD Dual<T, K> pow(const Dual<T, K>& a, T b) {
    const T pv = pow(a.v, b);
    const T da = (a.v == T(0)) ? (b == T(1) ? T(1) : T(0)) : b * pv / a.v;
    return detail::chain(a, pv, da);
}
template <class T, int K>
EF_HD Dual<T, K> pow(T a, const Dual<T, K>& b) {
    const T pv = pow(a, b.v);
    return detail::chain(b, pv, pv * log(a));
}

// The exact plain-double functions live beside the Dual overloads, so that unqualified calls
// inside namespace ef pick std:: for doubles and the templates above for duals.
using std::abs;
using std::fabs;
using std::fmax;
using std::isfinite;
using std::sqrt;

template <class T, int K>
EF_HD bool isfinite(const Dual<T, K>& a) {
    using std::isfinite;
    if (!isfinite(a.v)) return false;
    for (int k = 0; k < K; ++k)
        if (!isfinite(a.d[k])) return false;
    return true;
}

}  // namespace ef

// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <type_traits>

#include "kernels/core/dual.hpp"
#include "kernels/core/hd.hpp"

namespace ef {

/**
 * Complex number over any real scalar type T (double, Dual<double, K>, ...), host and device.
 *
 * std::complex cannot be used: it is only specified for float/double/long double, so
 * std::complex<Dual> is unspecified behaviour, and its members are not __device__. Mellin-space
 * models need complex arithmetic on dual numbers (moments of a PDF as functions of its
 * parameters) in CUDA kernels, hence this small aggregate. Branch cuts follow std::complex:
 * log and sqrt are principal (cut along the negative real axis, arg in (-pi, pi]).
 *
 * Mixed arithmetic is provided with T and with double (the latter only when T is not double,
 * so the two overload sets never collide).
 */
template <class T>
struct Complex {
    T re;
    T im;

    EF_HD Complex() : re(0), im(0) {}
    EF_HD Complex(const T& r) : re(r), im(0) {}  // NOLINT: implicit on purpose, reals promote
    EF_HD Complex(const T& r, const T& i) : re(r), im(i) {}
    /// Widening conversion, e.g. Complex<double> -> Complex<Dual<double, K>>; explicit so that
    /// mixed expressions never pick an unintended overload.
    template <class U>
    EF_HD explicit Complex(const Complex<U>& o) : re(o.re), im(o.im) {}

    EF_HD Complex& operator+=(const Complex& o) {
        re += o.re;
        im += o.im;
        return *this;
    }
    EF_HD Complex& operator-=(const Complex& o) {
        re -= o.re;
        im -= o.im;
        return *this;
    }
    EF_HD Complex& operator*=(const Complex& o) {
        const T r = re * o.re - im * o.im;
        im = re * o.im + im * o.re;
        re = r;
        return *this;
    }
    EF_HD Complex& operator/=(const Complex& o) {
        // Plain formula: the moduli met in Mellin inversion (|N| < 1e3) are far from overflow,
        // and Smith's scaled division would need value comparisons on every dual operation.
        const T inv = T(1) / (o.re * o.re + o.im * o.im);
        const T r = (re * o.re + im * o.im) * inv;
        im = (im * o.re - re * o.im) * inv;
        re = r;
        return *this;
    }
};

namespace complex_detail {
/// True when T is not double, to keep the `double` overloads apart from the `T` ones.
template <class T>
inline constexpr bool kNotDouble = !std::is_same_v<T, double>;

/// atan2 for doubles: ef::math, the same bits on host and device.
EF_HD inline double atan2_of(double y, double x) { return math::atan2(y, x); }
/// atan2 for other plain reals (found by argument-dependent lookup, e.g. instrumented scalars).
template <class T>
EF_HD T atan2_of(const T& y, const T& x) {
    using std::atan2;
    return atan2(y, x);
}
/// atan2 for dual numbers: d atan2(y, x) = (x dy - y dx) / (x^2 + y^2). Kept here (not in
/// dual.hpp) because only complex arg() needs it.
template <class T, int K>
EF_HD Dual<T, K> atan2_of(const Dual<T, K>& y, const Dual<T, K>& x) {
    const T r2 = x.v * x.v + y.v * y.v;
    const T inv = T(1) / r2;
    Dual<T, K> r;
    r.v = atan2_of(y.v, x.v);
    for (int k = 0; k < K; ++k) r.d[k] = (x.v * y.d[k] - y.v * x.d[k]) * inv;
    return r;
}
}  // namespace complex_detail

// Accessors ----------------------------------------------------------------------------------
template <class T>
EF_HD T real(const Complex<T>& z) { return z.re; }
template <class T>
EF_HD T imag(const Complex<T>& z) { return z.im; }
template <class T>
EF_HD Complex<T> conj(const Complex<T>& z) { return Complex<T>(z.re, -z.im); }
/// |z|^2 (cheap; no square root).
template <class T>
EF_HD T norm(const Complex<T>& z) { return z.re * z.re + z.im * z.im; }
template <class T>
EF_HD T abs(const Complex<T>& z) {
    using std::sqrt;
    return sqrt(norm(z));
}
/// Principal argument in (-pi, pi].
template <class T>
EF_HD T arg(const Complex<T>& z) { return complex_detail::atan2_of(z.im, z.re); }

// Complex with complex -----------------------------------------------------------------------
template <class T>
EF_HD Complex<T> operator+(Complex<T> a, const Complex<T>& b) { return a += b; }
template <class T>
EF_HD Complex<T> operator-(Complex<T> a, const Complex<T>& b) { return a -= b; }
template <class T>
EF_HD Complex<T> operator*(Complex<T> a, const Complex<T>& b) { return a *= b; }
template <class T>
EF_HD Complex<T> operator/(Complex<T> a, const Complex<T>& b) { return a /= b; }
template <class T>
EF_HD Complex<T> operator-(const Complex<T>& a) { return Complex<T>(-a.re, -a.im); }
template <class T>
EF_HD Complex<T> operator+(const Complex<T>& a) { return a; }

// Complex with its real type T ----------------------------------------------------------------
template <class T>
EF_HD Complex<T> operator+(Complex<T> a, const T& b) { a.re += b; return a; }
template <class T>
EF_HD Complex<T> operator+(const T& b, Complex<T> a) { a.re += b; return a; }
template <class T>
EF_HD Complex<T> operator-(Complex<T> a, const T& b) { a.re -= b; return a; }
template <class T>
EF_HD Complex<T> operator-(const T& b, const Complex<T>& a) { return Complex<T>(b - a.re, -a.im); }
template <class T>
EF_HD Complex<T> operator*(const Complex<T>& a, const T& b) {
    return Complex<T>(a.re * b, a.im * b);
}
template <class T>
EF_HD Complex<T> operator*(const T& b, const Complex<T>& a) {
    return Complex<T>(a.re * b, a.im * b);
}
template <class T>
EF_HD Complex<T> operator/(const Complex<T>& a, const T& b) {
    const T inv = T(1) / b;
    return Complex<T>(a.re * inv, a.im * inv);
}
template <class T>
EF_HD Complex<T> operator/(const T& b, const Complex<T>& a) { return Complex<T>(b) / a; }

// Complex with double, for T other than double (Complex<Dual> * 0.5 and the like) -------------
template <class T>
    requires complex_detail::kNotDouble<T>
EF_HD Complex<T> operator+(Complex<T> a, double b) {
    a.re += b;
    return a;
}
template <class T>
    requires complex_detail::kNotDouble<T>
EF_HD Complex<T> operator+(double b, Complex<T> a) {
    a.re += b;
    return a;
}
template <class T>
    requires complex_detail::kNotDouble<T>
EF_HD Complex<T> operator-(Complex<T> a, double b) {
    a.re -= b;
    return a;
}
template <class T>
    requires complex_detail::kNotDouble<T>
EF_HD Complex<T> operator-(double b, const Complex<T>& a) {
    return Complex<T>(b - a.re, -a.im);
}
template <class T>
    requires complex_detail::kNotDouble<T>
EF_HD Complex<T> operator*(const Complex<T>& a, double b) {
    return Complex<T>(a.re * b, a.im * b);
}
template <class T>
    requires complex_detail::kNotDouble<T>
EF_HD Complex<T> operator*(double b, const Complex<T>& a) {
    return Complex<T>(a.re * b, a.im * b);
}
template <class T>
    requires complex_detail::kNotDouble<T>
EF_HD Complex<T> operator/(const Complex<T>& a, double b) {
    const double inv = 1.0 / b;
    return Complex<T>(a.re * inv, a.im * inv);
}
template <class T>
    requires complex_detail::kNotDouble<T>
EF_HD Complex<T> operator/(double b, const Complex<T>& a) {
    return Complex<T>(T(b)) / a;
}

// Elementary functions -------------------------------------------------------------------------
/// e^z = e^re (cos im + i sin im).
template <class T>
EF_HD Complex<T> exp(const Complex<T>& z) {
    const T m = exp(z.re);
    return Complex<T>(m * cos(z.im), m * sin(z.im));
}
/// Principal logarithm: ln|z| + i arg z, arg in (-pi, pi].
template <class T>
EF_HD Complex<T> log(const Complex<T>& z) {
    return Complex<T>(T(0.5) * log(norm(z)), arg(z));
}
/// Principal square root (Re >= 0), by the cancellation-free half-angle formulas.
template <class T>
EF_HD Complex<T> sqrt(const Complex<T>& z) {
    using std::sqrt;
    const T r = sqrt(norm(z));
    if (value_of(r) == 0.0) return Complex<T>();
    if (value_of(z.re) >= 0.0) {
        const T t = sqrt(T(0.5) * (r + z.re));
        return Complex<T>(t, z.im / (T(2) * t));
    }
    using std::signbit;
    const T t = sqrt(T(0.5) * (r - z.re));
    const T u = signbit(value_of(z.im)) ? -t : t;  // -0.0 imaginary part: lower side of the cut
    return Complex<T>(z.im / (T(2) * u), u);
}
/// z^w = exp(w log z), principal branch.
template <class T>
EF_HD Complex<T> pow(const Complex<T>& z, const Complex<T>& w) { return exp(w * log(z)); }
/// z^w for a real exponent w.
template <class T>
EF_HD Complex<T> pow(const Complex<T>& z, const T& w) { return exp(log(z) * w); }
/// x^w for a positive real base x and complex exponent w: e^{w ln x} (the Mellin kernel x^-N).
template <class T>
EF_HD Complex<T> pow(const T& x, const Complex<T>& w) {
    return exp(w * log(x));
}

}  // namespace ef

// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/core/complex.hpp"
#include "kernels/core/dual.hpp"
#include "kernels/core/hd.hpp"

/**
 * Special functions and quadrature for Mellin-space theory, host and device.
 *
 * Everything is templated on the real type T, so Complex<Dual<double, K>> arguments give the
 * derivatives of Mellin moments with respect to the PDF parameters in the same pass. The
 * Gamma-function family uses Stirling's series after shifting the argument by the recurrence
 * Gamma(z + 1) = z Gamma(z): no Lanczos table (whose 15 complex divisions per call are costly on
 * dual numbers) and no reflection formula (whose branch of log sin(pi z) is awkward). On the
 * standard contour (phi = 3 pi / 4) the arguments stay within |arg z| < 3 pi / 4, where the
 * series converges after few or no shifts.
 */
namespace ef {

namespace mellin_detail {
constexpr double kHalfLog2Pi = 0.91893853320467274178;  // ln(2 pi) / 2
constexpr double kPi = 3.14159265358979323846;

/**
 * Shifts z = z0 + n until Stirling's series with 8 terms is accurate to ~1e-15: |z| >= 12 in the
 * right half-plane and |z| >= 20 in the sector 90..135 degrees (Olver's bound grows like
 * sec^{2m}(arg z / 2) there); elsewhere near the negative axis it shifts right. Returns n.
 */
template <class T>
EF_HD int stirling_shift(const Complex<T>& z) {
    const double re = value_of(z.re);
    const double im = value_of(z.im);
    const double aim = im < 0.0 ? -im : im;
    int n = 0;
    for (;;) {
        const double r = re + n;
        const double r2 = r * r + aim * aim;
        if (r >= 0.0 && r2 >= 144.0) break;
        if (r < 0.0 && -r <= aim && r2 >= 400.0) break;
        ++n;
    }
    return n;
}

/// |z|^2 of the values only (no derivative work on dual numbers), for branch decisions.
template <class T>
EF_HD double value_norm(const Complex<T>& z) {
    const double re = value_of(z.re);
    const double im = value_of(z.im);
    return re * re + im * im;
}

/// log(prod) + 2 pi i wraps: the logarithm of a product whose phase wrapped past pi `wraps`
/// times.
template <class T>
EF_HD Complex<T> log_with_wraps(const Complex<T>& prod, int wraps) {
    Complex<T> lp = log(prod);
    lp.im += T(2.0 * kPi * wraps);
    return lp;
}

/// sum_k c[k] inv2^k for k = 0..7 (Horner, from the highest term): both Stirling series' sums.
template <class T>
EF_HD Complex<T> stirling_sum(const Complex<T>& inv2, const double (&c)[8]) {
    Complex<T> series{T(c[7])};
    for (int k = 6; k >= 0; --k) series = series * inv2 + T(c[k]);
    return series;
}

/// Stirling's series for ln Gamma(w), |w| large, |arg w| < 3 pi / 4 (principal branch).
template <class T>
EF_HD Complex<T> lgamma_stirling(const Complex<T>& w) {
    // B_{2k} / (2k (2k - 1)), k = 1..8.
    constexpr double c[8] = {1.0 / 12.0,   -1.0 / 360.0,      1.0 / 1260.0, -1.0 / 1680.0,
                             1.0 / 1188.0, -691.0 / 360360.0, 1.0 / 156.0,  -3617.0 / 122400.0};
    const Complex<T> inv = T(1) / w;
    const Complex<T> series = stirling_sum(inv * inv, c);
    const Complex<T> lw = log(w);
    return (w - T(0.5)) * lw - w + T(kHalfLog2Pi) + series * inv;
}

/// Stirling's series for the digamma function psi(w), |w| large.
template <class T>
EF_HD Complex<T> digamma_stirling(const Complex<T>& w) {
    // B_{2k} / (2k), k = 1..8.
    constexpr double c[8] = {1.0 / 12.0,  -1.0 / 120.0,     1.0 / 252.0, -1.0 / 240.0,
                             1.0 / 132.0, -691.0 / 32760.0, 1.0 / 12.0,  -3617.0 / 8160.0};
    const Complex<T> inv = T(1) / w;
    const Complex<T> inv2 = inv * inv;
    return log(w) - T(0.5) * inv - stirling_sum(inv2, c) * inv2;
}
}  // namespace mellin_detail

/**
 * Principal branch of ln Gamma(z) for complex z (the analytic continuation of the real lgamma
 * from the positive axis, cut along the negative axis; equal to mpmath.loggamma). Relative
 * accuracy ~1e-15 away from the poles z = 0, -1, -2, ...
 *
 * ln Gamma(z) = ln Gamma(z + n) - ln prod_{k<n}(z + k). The product's logarithm is taken once;
 * its branch is repaired by counting how often the running product's phase wraps past pi
 * (each factor adds a phase in (0, pi) for Im z > 0, so at most one wrap a step).
 */
template <class T>
EF_HD Complex<T> lgamma(const Complex<T>& z_in) {
    // ln Gamma(conj z) = conj ln Gamma(z): work in the upper half-plane.
    const bool lower = value_of(z_in.im) < 0.0;
    const Complex<T> z = lower ? conj(z_in) : z_in;
    const int n = mellin_detail::stirling_shift(z);
    Complex<T> w = z;
    Complex<T> prod(T(1));
    int wraps = 0;
    Complex<T> r;  // minus the logarithms of the finished chunks of the product
    for (int k = 0; k < n; ++k) {
        const bool upper_before = value_of(prod.im) >= 0.0;
        prod *= w;
        if (upper_before && value_of(prod.im) < 0.0) ++wraps;
        w += T(1);
        // Long shifts (far left of the imaginary axis) would overflow the product: fold it
        // into the logarithm in chunks.
        if (mellin_detail::value_norm(prod) > 1e200) {
            r -= mellin_detail::log_with_wraps(prod, wraps);
            prod = Complex<T>(T(1));
            wraps = 0;
        }
    }
    r += mellin_detail::lgamma_stirling(w);
    if (n > 0) r -= mellin_detail::log_with_wraps(prod, wraps);
    return lower ? conj(r) : r;
}

/// Digamma psi(z) = d ln Gamma / dz: psi(z) = psi(z + n) - sum_{k<n} 1/(z + k), the sum kept as
/// one fraction so there is a single complex division.
template <class T>
EF_HD Complex<T> digamma(const Complex<T>& z) {
    const int n = mellin_detail::stirling_shift(z);
    Complex<T> w = z;
    Complex<T> num;  // sum of 1/(z+k) = num / den
    Complex<T> den(T(1));
    Complex<T> r;
    for (int k = 0; k < n; ++k) {
        num = num * w + den;
        den *= w;
        w += T(1);
        if (mellin_detail::value_norm(den) > 1e200) {  // long shifts: flush before overflow
            r -= num / den;
            num = Complex<T>();
            den = Complex<T>(T(1));
        }
    }
    r += mellin_detail::digamma_stirling(w);
    if (n > 0) r -= num / den;
    return r;
}

/// Gamma(z) / Gamma(z + beta) for complex z and real beta (the x-shape of a PDF in N space,
/// B(z, beta) / Gamma(beta)), through one exponential of the log-Gamma difference.
template <class T>
EF_HD Complex<T> gamma_ratio(const Complex<T>& z, const T& beta) {
    return exp(lgamma(z) - lgamma(z + beta));
}

/// Euler's Beta function B(p, q) = Gamma(p) Gamma(q) / Gamma(p + q) for complex p, q.
template <class T>
EF_HD Complex<T> beta(const Complex<T>& p, const Complex<T>& q) {
    return exp(lgamma(p) + lgamma(q) - lgamma(p + q));
}

/**
 * The inverse-Mellin contour N(z) = c + z e^{i phi}, z >= 0, sampled by Gauss-Legendre on
 * segments of z. `nodes[k]` are the N values, `weights[k]` the quadrature weight times the
 * segment Jacobian (b - a) / 2, and `phase` = e^{i phi}. With F(N*) = F(N)* for real f,
 *     f(x) = (1/pi) sum_k weights[k] Im[ phase x^{-N_k} F(N_k) ].
 */
struct MellinContour {
    double c = 1.9;
    double phi = 0.75 * mellin_detail::kPi;
    std::vector<Complex<double>> nodes;
    std::vector<double> weights;
    Complex<double> phase;
};

/// P_n(x) and P_n'(x) by the three-term recurrence (Gauss-Legendre's Newton steps). Host only.
inline void legendre_p(int n, double x, double& p, double& dp) {
    double p0 = 1.0;
    double p1 = x;
    for (int k = 2; k <= n; ++k) {
        const double p2 = ((2.0 * k - 1.0) * x * p1 - (k - 1.0) * p0) / k;
        p0 = p1;
        p1 = p2;
    }
    if (n == 1) p0 = 1.0;
    p = p1;
    dp = n * (x * p1 - p0) / (x * x - 1.0);
}

/// Gauss-Legendre nodes t and weights w on [-1, 1] (Newton on P_n from the Chebyshev guess),
/// accurate to rounding. Host only.
inline void gauss_legendre(int n, std::vector<double>& t, std::vector<double>& w) {
    if (n < 1) throw std::invalid_argument("gauss_legendre: n must be positive");
    t.assign(static_cast<std::size_t>(n), 0.0);
    w.assign(static_cast<std::size_t>(n), 0.0);
    for (int i = 0; i < (n + 1) / 2; ++i) {
        double x = std::cos(mellin_detail::kPi * (i + 0.75) / (n + 0.5));
        double p = 0.0;
        double dp = 0.0;
        for (int iter = 0; iter < 100; ++iter) {
            legendre_p(n, x, p, dp);
            const double dx = p / dp;
            x -= dx;
            if (std::abs(dx) < 1e-16) break;
        }
        // Recompute P_n' at the converged node for the weight.
        legendre_p(n, x, p, dp);
        const double wi = 2.0 / ((1.0 - x * x) * dp * dp);
        const auto lo = static_cast<std::size_t>(i);
        const auto hi = static_cast<std::size_t>(n - 1 - i);
        t[lo] = -x;
        t[hi] = x;
        w[lo] = wi;
        w[hi] = wi;
    }
}

/**
 * Segment breakpoints in z for the contour:
 *   standard: qcdlib's 17 segments, z <= 63 (136 nodes at 8 a segment);
 *   extended: qcdlib's extended list, + 70, 80, ..., 150 (26 segments);
 *   precise:  extended, then segments growing by 1.25 up to z >= 1000 (35 segments). The
 *             long tail is what x -> 1 needs: |x^{-N}| decays only like e^{-z ln(1/x) / sqrt 2}
 *             along the contour, so at x = 0.95 the standard list truncates the integral at
 *             the 1e-3 level (see tests/unit/test_dis_mellin.cpp for measured accuracies).
 */
enum class MellinBreakpoints { standard, extended, precise };

inline std::vector<double> mellin_breakpoints(MellinBreakpoints kind) {
    std::vector<double> b = {0, 0.1, 0.3, 0.6, 1.0, 1.6, 2.4, 3.5, 5,
                             7, 10,  14,  19,  25,  32,  40,  50,  63};
    if (kind == MellinBreakpoints::standard) return b;
    for (int z = 70; z <= 150; z += 10) b.push_back(z);
    if (kind == MellinBreakpoints::extended) return b;
    while (b.back() < 1000.0) b.push_back(1.25 * b.back());
    return b;
}

/// Builds the contour with `per_segment` Gauss-Legendre points on each segment of `breaks`.
inline MellinContour make_mellin_contour(double c,
                                         double phi,
                                         const std::vector<double>& breaks,
                                         int per_segment) {
    MellinContour m;
    m.c = c;
    m.phi = phi;
    m.phase = Complex<double>(std::cos(phi), std::sin(phi));
    std::vector<double> t;
    std::vector<double> w;
    gauss_legendre(per_segment, t, w);
    for (std::size_t s = 0; s + 1 < breaks.size(); ++s) {
        const double a = breaks[s];
        const double b = breaks[s + 1];
        const double jac = 0.5 * (b - a);
        for (std::size_t j = 0; j < t.size(); ++j) {
            const double z = jac * t[j] + 0.5 * (a + b);
            m.nodes.push_back(Complex<double>(c + z * m.phase.re, z * m.phase.im));
            m.weights.push_back(w[j] * jac);
        }
    }
    return m;
}

}  // namespace ef

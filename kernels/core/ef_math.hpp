// SPDX-License-Identifier: MIT
#pragma once

#include <cfloat>
#include <cstdint>
#include <cstring>

#include "kernels/core/hd.hpp"

/**
 * Deterministic double-precision transcendental functions, bitwise identical on host and device.
 *
 * Why: the CPU and CUDA workers run the same single-source fit, and + - * / sqrt round
 * identically on both (device code is built with --fmad=false, host code with
 * -ffp-contract=off and no -march). glibc's exp/log/pow/sin/... and CUDA's libdevice do not:
 * they differ in the last bit, which ill-conditioned fits amplify to 1e-4 relative. Every
 * transcendental a kernel or a user formula can reach is therefore computed here, from
 * correctly rounded + - * /, comparisons and exact bit operations only (no FMA, no library
 * calls), so both workers produce the same bits.
 *
 * Algorithms (textbook ones; Taylor polynomials; the only tables are constants generated with
 * mpmath: 1280 bits of 2/pi and log(1 + j/64) for 47 j):
 *   exp   Cody-Waite reduction x = k ln2 + r with a two-part ln2 (k ln2_hi exact), r kept as a
 *         double-double; e^r = (1 + r) + r^2/2 + r^3 P(r), the first terms exact (Dekker
 *         product), P the Taylor polynomial to r^14/14!; scaling by 2^k in one rounding, also
 *         into the subnormals.
 *   log   x = 2^e m, m in [sqrt(1/2), sqrt(2)); m = c (1 + ...), c = 1 + j/64 the nearest;
 *         log m = log c + 2 atanh(s), s = (m - c)/(m + c) (|s| <= 0.0058) as a double-double,
 *         the series to s^9. The sum e ln2 + log c + 2 s + ... is a double-double good to
 *         2^-67 relative, rounded once: log is correctly rounded but for 2^-14 ulp.
 *   pow   y log|x| from the same double-double log (Dekker product), then the exp kernel on
 *         the double-double. C99 Annex F special cases.
 *   sin, cos, tan  reduction by pi/2: none for |x| <= pi/4; Cody-Waite with pi/2 in four
 *         parts (33+33+33+53 bits, exact products for |x| < 2^20 pi/2, error-free sums) below
 *         2^20 pi/2; Payne-Hanek (192-bit window of 2/pi, integer arithmetic) above, so the
 *         whole double range is reduced accurately. The reduced argument is a double-double;
 *         the kernels are Taylor polynomials on |r| <= pi/4 with their leading terms in
 *         double-double and return double-doubles; tan = sin/cos divided in double-double.
 *   atan, atan2  reduction to |t| <= tan(pi/32) around atan(c_k), c_k = tan(k pi/16) rounded,
 *         t = (x - c_k)/(1 + x c_k) in double-double; atan(t) Taylor to t^19/19; |x| > 1
 *         through pi/2 - atan(1/x), atan2 through min/max quotients (double-double) and
 *         pi/2 - a, pi - a.
 *
 * Accuracy, measured against x87 long double glibc (expl, logl, ...) by
 * tests/unit/test_ef_math.cpp (2e5 random arguments per function and range, ranges covering
 * all doubles, both signs, log-uniform magnitudes, subnormal results, multiples of pi/2):
 * max error in ulps
 *     exp 0.52   log 0.50   pow 0.53   sin 0.58   cos 0.58   tan 0.59   atan 0.51   atan2 0.51
 * (the test prints the current numbers); special values follow C99 Annex F.
 * Speed (perf/bench_ef_math.cpp, perf/RESULTS.md "ef::math"; scalar, x86-64 g++ -O2):
 * exp, sin, cos, atan 1.0-1.3x the time of glibc's, tan and atan2 1.4-1.7x, log and pow ~4x
 * (glibc's are table-driven; here log is the double-double logarithm pow needs, rounded once).
 *
 * Requirements: IEEE binary64 with round-to-nearest and no excess precision
 * (FLT_EVAL_METHOD == 0, i.e. SSE2 on x86-64), and no contraction of a*b+c into an FMA: on the
 * host -ffp-contract=off (CMakeLists.txt), on the device --fmad=false.
 */
#if !defined(__CUDA_ARCH__) && defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD != 0
#error "ef_math.hpp needs FLT_EVAL_METHOD == 0 (no excess precision): build for SSE2, not x87"
#endif

namespace ef::math {

namespace detail {

/// The bits of a double (an exact reinterpretation).
EF_HD EF_INLINE std::uint64_t bits(double x) {
#ifdef __CUDA_ARCH__
    return static_cast<std::uint64_t>(__double_as_longlong(x));
#else
    std::uint64_t u;
    std::memcpy(&u, &x, sizeof u);
    return u;
#endif
}
EF_HD EF_INLINE double from_bits(std::uint64_t u) {
#ifdef __CUDA_ARCH__
    return __longlong_as_double(static_cast<long long>(u));
#else
    double x;
    std::memcpy(&x, &u, sizeof x);
    return x;
#endif
}

constexpr std::uint64_t kSignMask = 0x8000000000000000ULL;
constexpr std::uint64_t kAbsMask = 0x7fffffffffffffffULL;
constexpr std::uint64_t kExpMask = 0x7ff0000000000000ULL;
constexpr std::uint64_t kMantMask = 0x000fffffffffffffULL;

EF_HD EF_INLINE double quiet_nan() { return from_bits(0x7ff8000000000000ULL); }
EF_HD EF_INLINE double infinity() { return from_bits(kExpMask); }
EF_HD EF_INLINE bool is_nan(double x) { return (bits(x) & kAbsMask) > kExpMask; }
EF_HD EF_INLINE bool is_inf(double x) { return (bits(x) & kAbsMask) == kExpMask; }
EF_HD EF_INLINE bool sign_bit(double x) { return (bits(x) & kSignMask) != 0; }
EF_HD EF_INLINE double abs(double x) { return from_bits(bits(x) & kAbsMask); }
/// |x| with the sign of s.
EF_HD EF_INLINE double copy_sign(double x, double s) {
    return from_bits((bits(x) & kAbsMask) | (bits(s) & kSignMask));
}
/// 2^k for k in [-1022, 1023], exactly.
EF_HD EF_INLINE double pow2i(int k) {
    return from_bits(static_cast<std::uint64_t>(k + 1023) << 52);
}
/// x rounded toward zero to an integer (exact: clears fraction bits).
EF_HD EF_INLINE double trunc(double x) {
    const std::uint64_t u = bits(x);
    const int e = static_cast<int>((u >> 52) & 0x7ff) - 1023;
    if (e >= 52) return x;                       // already an integer, inf or NaN
    if (e < 0) return from_bits(u & kSignMask);  // |x| < 1
    return from_bits(u & ~(kMantMask >> e));
}
/// Round to nearest integer (ties to even) for |x| < 2^51, by the 1.5 * 2^52 shifter.
EF_HD EF_INLINE double round_small(double x) {
    constexpr double kShifter = 0x1.8p52;
    return (x + kShifter) - kShifter;
}

/// An unevaluated sum hi + lo, |lo| <= ulp(hi) / 2 after normalisation.
struct DD {
    double hi;
    double lo;
};

/// a + b exactly as s + t, for |a| >= |b| (or a == 0) (Dekker's Fast2Sum).
EF_HD EF_INLINE DD fast_two_sum(double a, double b) {
    const double s = a + b;
    return {s, b - (s - a)};
}
/// a + b exactly as s + t, any order (Knuth's TwoSum).
EF_HD EF_INLINE DD two_sum(double a, double b) {
    const double s = a + b;
    const double bb = s - a;
    return {s, (a - (s - bb)) + (b - bb)};
}
/// a * b exactly as p + e (Dekker's product with Veltkamp splitting; no FMA). Needs
/// |a|, |b| < 2^996 and no underflow in the partial products.
EF_HD EF_INLINE DD two_prod(double a, double b) {
    constexpr double kSplit = 134217729.0;  // 2^27 + 1
    const double ca = kSplit * a;
    const double ah = ca - (ca - a);
    const double al = a - ah;
    const double cb = kSplit * b;
    const double bh = cb - (cb - b);
    const double bl = b - bh;
    const double p = a * b;
    return {p, ((ah * bh - p) + ah * bl + al * bh) + al * bl};
}
EF_HD EF_INLINE DD dd_add(DD a, DD b) {
    const DD s = two_sum(a.hi, b.hi);
    return fast_two_sum(s.hi, s.lo + (a.lo + b.lo));
}
EF_HD EF_INLINE DD dd_mul(DD a, DD b) {
    const DD p = two_prod(a.hi, b.hi);
    return fast_two_sum(p.hi, p.lo + (a.hi * b.lo + a.lo * b.hi));
}
/// (a.hi + a.lo) / (b.hi + b.lo), rounded once more to a double.
EF_HD EF_INLINE double dd_div(DD a, DD b) {
    const double q = a.hi / b.hi;
    const DD p = two_prod(q, b.hi);
    const double r = (((a.hi - p.hi) - p.lo) + a.lo - q * b.lo) / b.hi;
    return q + r;
}

// Constants (hex literals generated with mpmath at 400 bits).
constexpr double kLn2Hi = 0x1.62e42fefa3800p-1;  // 42 bits: k * kLn2Hi is exact for |k| < 2^11
constexpr double kLn2Lo = 0x1.ef35793c76730p-45;
constexpr double kInvLn2 = 0x1.71547652b82fep+0;
constexpr double kPio2Hi = 0x1.921fb54442d18p+0;
constexpr double kPio2Lo = 0x1.1a62633145c07p-54;
constexpr double kPiHi = 0x1.921fb54442d18p+1;
constexpr double kPiLo = 0x1.1a62633145c07p-53;
constexpr double kPio4 = 0x1.921fb54442d18p-1;
constexpr double k3Pio4 = 0x1.2d97c7f3321d2p+1;
constexpr double kTwoOverPi = 0x1.45f306dc9c883p-1;
// pi/2 = kPio2_1 + kPio2_2 + kPio2_3 + kPio2_4 to 152 bits; the first three have 33 bits, so
// n * kPio2_i is exact for n <= 2^20.
constexpr double kPio2_1 = 0x1.921fb54400000p+0;
constexpr double kPio2_2 = 0x1.0b4611a600000p-34;
constexpr double kPio2_3 = 0x1.3198a2e000000p-69;
constexpr double kPio2_4 = 0x1.b839a252049c1p-104;
constexpr double kSqrt2 = 0x1.6a09e667f3bcdp+0;

/**
 * e^(z + zl) for z in [-746, 710] (|zl| <= ulp(z)): the exp kernel shared by exp and pow.
 */
EF_HD EF_INLINE double exp_dd(double z, double zl) {
    const double kd = round_small(z * kInvLn2);
    const int k = static_cast<int>(kd);
    const double hi = z - kd * kLn2Hi;  // exact (Sterbenz; kd * kLn2Hi is exact)
    const double lo = kd * kLn2Lo - zl;
    const DD r = two_sum(hi, -lo);  // reduced argument r.hi + r.lo, |r| <= ln2 / 2 + tiny
    const double x = r.hi;
    // Taylor coefficients 1/n!, n = 14 .. 3: truncation < 2^-70 for |x| <= 0.35.
    double p = 0x1.93974a8c07c9dp-37;
    p = p * x + 0x1.6124613a86d09p-33;
    p = p * x + 0x1.1eed8eff8d898p-29;
    p = p * x + 0x1.ae64567f544e4p-26;
    p = p * x + 0x1.27e4fb7789f5cp-22;
    p = p * x + 0x1.71de3a556c734p-19;
    p = p * x + 0x1.a01a01a01a01ap-16;
    p = p * x + 0x1.a01a01a01a01ap-13;
    p = p * x + 0x1.6c16c16c16c17p-10;
    p = p * x + 0x1.1111111111111p-7;
    p = p * x + 0x1.5555555555555p-5;
    p = p * x + 0x1.5555555555555p-3;
    // e^x = (1 + x) + x^2/2 + x^3 P(x): the first three terms exactly (x^2/2 = hz + hzl),
    // the rest (< 0.008) in double. e^(x + xl) = e^x (1 + xl + ...), e^x xl ~ xl (1 + x).
    const DD xx = two_prod(x, x);
    const double rest = (x * xx.hi) * p;
    const DD s = fast_two_sum(1.0, x);
    const DD u = two_sum(s.hi, 0.5 * xx.hi);
    const DD m = fast_two_sum(u.hi, u.lo + (s.lo + (0.5 * xx.lo + (rest + (r.lo + r.lo * x)))));
    if ((k > -1022 || (k == -1022 && m.hi >= 1.0)) && k <= 1023) return m.hi * pow2i(k);
    if (k > 1023) return (m.hi * pow2i(k - 1)) * 2.0;  // may overflow to inf, correctly
    // Subnormal (or zero) result: round m 2^k once, on the 2^-1074 grid. With a = m 2^(k+1000)
    // (exact), a < 2^-22 and adding 2^-22 puts the grid's spacing 2^-74 at a's last place.
    constexpr double kGrid = 0x1p-22;
    const double scale = pow2i(k + 1000);
    const DD g = fast_two_sum(kGrid, m.hi * scale);
    const double on_grid = g.hi + (g.lo + m.lo * scale);
    return (on_grid - kGrid) * pow2i(-1000);
}

/// x = 2^e m with m in [sqrt(1/2), sqrt(2)), for finite x > 0 (subnormals included).
EF_HD EF_INLINE double decompose(double x, int& e) {
    std::uint64_t u = bits(x);
    int bias = 1023;
    if ((u >> 52) == 0) {  // subnormal
        u = bits(x * 0x1p54);
        bias += 54;
    }
    e = static_cast<int>(u >> 52) - bias;
    double m = from_bits((u & kMantMask) | 0x3ff0000000000000ULL);
    if (m > kSqrt2) {
        m *= 0.5;
        e += 1;
    }
    return m;
}

/// log(x) as a double-double (relative error < 2^-67), finite x > 0.
EF_HD EF_INLINE DD log_dd(double x) {
    // log(1 + j/64) as hi + lo, j = -19 .. 27 (mpmath, 300 bits).
    static constexpr double kLogC[47][2] = {
        {-0x1.68ac83e9c6a14p-2, -0x1.a64eadd740178p-58},
        {-0x1.522ae0738a3d8p-2, 0x1.8f7e9b38a6979p-57},
        {-0x1.3c25277333184p-2, 0x1.2ad27e50a8ec6p-56},
        {-0x1.269621134db92p-2, -0x1.e0efadd9db02bp-56},
        {-0x1.1178e8227e47cp-2, 0x1.0e63a5f01c691p-57},
        {-0x1.f991c6cb3b379p-3, -0x1.f665066f980a2p-57},
        {-0x1.d1037f2655e7bp-3, -0x1.60629242471a2p-57},
        {-0x1.a93ed3c8ad9e3p-3, -0x1.bcafa9de97203p-57},
        {-0x1.823c16551a3c2p-3, 0x1.1232ce70be781p-57},
        {-0x1.5bf406b543db2p-3, 0x1.1f5b44c0df7e7p-61},
        {-0x1.365fcb0159016p-3, -0x1.7d411a5b944adp-58},
        {-0x1.1178e8227e47cp-3, 0x1.0e63a5f01c691p-58},
        {-0x1.da727638446a2p-4, -0x1.401fa71733019p-58},
        {-0x1.9335e5d594989p-4, 0x1.478a85704ccb7p-58},
        {-0x1.4d3115d207eacp-4, -0x1.769f42c7842ccp-58},
        {-0x1.08598b59e3a07p-4, 0x1.dd7009902bf32p-58},
        {-0x1.894aa149fb343p-5, -0x1.a8be97660a23dp-60},
        {-0x1.0415d89e74444p-5, -0x1.c05cf1d753622p-59},
        {-0x1.0205658935847p-6, -0x1.27c8e8416e71fp-60},
        {0.0, 0.0},
        {0x1.fc0a8b0fc03e4p-7, -0x1.83092c59642a1p-62},
        {0x1.f829b0e783300p-6, 0x1.33e3f04f1ef23p-60},
        {0x1.77458f632dcfcp-5, 0x1.18d3ca87b9296p-59},
        {0x1.f0a30c01162a6p-5, 0x1.85f325c5bbacdp-59},
        {0x1.341d7961bd1d1p-4, -0x1.b599f227becbbp-58},
        {0x1.6f0d28ae56b4cp-4, -0x1.906d99184b992p-58},
        {0x1.a926d3a4ad563p-4, 0x1.942f48aa70ea9p-58},
        {0x1.e27076e2af2e6p-4, -0x1.61578001e0162p-60},
        {0x1.0d77e7cd08e59p-3, 0x1.9a5dc5e9030acp-57},
        {0x1.29552f81ff523p-3, 0x1.301771c407dbfp-57},
        {0x1.44d2b6ccb7d1ep-3, 0x1.9f4f6543e1f88p-57},
        {0x1.5ff3070a793d4p-3, -0x1.bc60efafc6f6ep-58},
        {0x1.7ab890210d909p-3, 0x1.be36b2d6a0608p-59},
        {0x1.9525a9cf456b4p-3, 0x1.d904c1d4e2e26p-57},
        {0x1.af3c94e80bff3p-3, -0x1.398cff3641985p-58},
        {0x1.c8ff7c79a9a22p-3, -0x1.4f689f8434012p-57},
        {0x1.e27076e2af2e6p-3, -0x1.61578001e0162p-59},
        {0x1.fb9186d5e3e2bp-3, -0x1.caaae64f21acbp-57},
        {0x1.0a324e27390e3p-2, 0x1.7dcfde8061c03p-56},
        {0x1.1675cababa60ep-2, 0x1.ce63eab883717p-61},
        {0x1.22941fbcf7966p-2, -0x1.76f5eb09628afp-56},
        {0x1.2e8e2bae11d31p-2, -0x1.8f4cdb95ebdf9p-56},
        {0x1.3a64c556945eap-2, -0x1.c68651945f97cp-57},
        {0x1.4618bc21c5ec2p-2, 0x1.f42decdeccf1dp-56},
        {0x1.51aad872df82dp-2, 0x1.3927ac19f55e3p-59},
        {0x1.5d1bdbf5809cap-2, 0x1.4236383dc7fe1p-56},
        {0x1.686c81e9b14afp-2, -0x1.ddea0f7f58e3dp-57}};
    int e = 0;
    const double m = decompose(x, e);
    // m = c (1 + ...), c = 1 + j/64 the nearest: log m = log c + 2 atanh(s), s = (m-c)/(m+c),
    // |s| <= 0.0058, and the series 2 s (1 + s^2/3 + ...) needs only four terms.
    const double jd = round_small((m - 1.0) * 64.0);
    const double c = 1.0 + jd * 0x1p-6;
    const double f = m - c;  // exact (Sterbenz)
    const DD u = two_sum(m, c);
    // sh need not be the rounded quotient, only close: one reciprocal (off the critical path)
    // serves both sh and the correction sl.
    const double ru = 1.0 / u.hi;
    const double sh = f * ru;
    const DD p = two_prod(sh, u.hi);
    const double sl = (((f - p.hi) - p.lo) - sh * u.lo) * ru;  // s = sh + sl to ~2^-100
    const double z = sh * sh;
    // 2/3 + 2 z/5 + 2 z^2/7 + 2 z^3/9 (truncation < 2^-75 relative).
    const double q =
        0x1.5555555555555p-1 +
        z * (0x1.999999999999ap-2 + z * (0x1.2492492492492p-2 + z * 0x1.c71c71c71c71cp-3));
    const double t = (sh * z) * q;  // 2 atanh(s) - 2 s; < 2^-16 of the result, so ~2^-68
    const double* lc = kLogC[static_cast<int>(jd) + 19];
    const double dk = static_cast<double>(e);
    const DD a = two_sum(dk * kLn2Hi, lc[0]);  // dk * kLn2Hi exact
    const DD b = two_sum(a.hi, 2.0 * sh);
    return fast_two_sum(b.hi, b.lo + (a.lo + (dk * kLn2Lo + lc[1] + (2.0 * sl + t))));
}

/// Reduced argument of sin/cos/tan: x = n pi/2 + r, r = r.hi + r.lo, |r| <= pi/4 (+ tiny).
/// Returns n mod 4. x finite.
EF_HD inline int rem_pio2_large(double x, DD& r);

EF_HD EF_INLINE int rem_pio2(double x, DD& r) {
    const double ax = abs(x);
    if (ax <= kPio4) {
        r = DD{x, 0.0};
        return 0;
    }
    if (ax < 0x1.921fb54442d18p+19) {  // 2^20 pi/2: n <= 2^20, products with kPio2_1..3 exact
        const double nd = round_small(x * kTwoOverPi);
        const double w = x - nd * kPio2_1;  // exact (Sterbenz)
        const DD a = two_sum(w, -(nd * kPio2_2));
        const DD b = two_sum(a.hi, -(nd * kPio2_3));
        r = fast_two_sum(b.hi, (a.lo + b.lo) - nd * kPio2_4);
        return static_cast<int>(nd) & 3;
    }
    return rem_pio2_large(x, r);
}

/// hi and lo 64-bit words of a * b (portable: 32-bit limbs).
EF_HD EF_INLINE void mul64(std::uint64_t a, std::uint64_t b, std::uint64_t& hi, std::uint64_t& lo) {
    const std::uint64_t a0 = a & 0xffffffffULL;
    const std::uint64_t a1 = a >> 32;
    const std::uint64_t b0 = b & 0xffffffffULL;
    const std::uint64_t b1 = b >> 32;
    const std::uint64_t p00 = a0 * b0;
    const std::uint64_t p01 = a0 * b1;
    const std::uint64_t p10 = a1 * b0;
    const std::uint64_t p11 = a1 * b1;
    const std::uint64_t mid = (p00 >> 32) + (p01 & 0xffffffffULL) + (p10 & 0xffffffffULL);
    lo = (mid << 32) | (p00 & 0xffffffffULL);
    hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}

/**
 * Payne-Hanek reduction for |x| >= 2^20 pi/2: x = M 2^E (M a 53-bit integer) times the bits of
 * 2/pi that matter modulo 4 (those of weight 2^(E-i) < 4), a 192-bit window, gives
 * x 2/pi mod 4 to 2^-137; a reduced argument can be as small as ~2^-61 (the closest double to a
 * multiple of pi/2), so at least 70 significant bits remain.
 */
EF_HD inline int rem_pio2_large(double x, DD& r) {
    // Bits b_1 b_2 ... of 2/pi = 0.b_1 b_2 ..., 64 a word (generated with mpmath, 1700 bits).
    const std::uint64_t kBits[20] = {
        0xa2f9836e4e441529ULL, 0xfc2757d1f534ddc0ULL, 0xdb6295993c439041ULL,
        0xfe5163abdebbc561ULL, 0xb7246e3a424dd2e0ULL, 0x06492eea09d1921cULL,
        0xfe1deb1cb129a73eULL, 0xe88235f52ebb4484ULL, 0xe99c7026b45f7e41ULL,
        0x3991d639835339f4ULL, 0x9c845f8bbdf9283bULL, 0x1ff897ffde05980fULL,
        0xef2f118b5a0a6d1fULL, 0x6d367ecf27cb09b7ULL, 0x4f463f669e5fea2dULL,
        0x7527bac7ebe5f17bULL, 0x3d0739f78a5292eaULL, 0x6bfb5fb11f8d5d08ULL,
        0x56033046fc7b6babULL, 0xf0cfbc209af4361dULL};
    const std::uint64_t u = bits(x);
    const int ex = static_cast<int>((u >> 52) & 0x7ff);
    const std::uint64_t mant = (u & kMantMask) | 0x0010000000000000ULL;
    const int big_e = ex - 1075;  // x = mant 2^big_e, big_e >= -32 here
    // Word of bits b_{g+1} .. b_{g+64}; bits b_i with i <= 0 are zero.
    auto window = [&](int g) -> std::uint64_t {
        if (g <= -64) return 0;
        if (g < 0) return kBits[0] >> (-g);
        const int k = g >> 6;
        const int sh = g & 63;
        if (sh == 0) return kBits[k];
        return (kBits[k] << sh) | (kBits[k + 1] >> (64 - sh));
    };
    const int g0 = big_e - 2;  // first bit b_(E-1): earlier ones contribute multiples of 4
    const std::uint64_t v2 = window(g0);
    const std::uint64_t v1 = window(g0 + 64);
    const std::uint64_t v0 = window(g0 + 128);
    // P = mant * V mod 2^192; x 2/pi mod 4 = P 2^-190.
    std::uint64_t h0 = 0, l0 = 0, h1 = 0, l1 = 0, h2 = 0, l2 = 0;
    mul64(mant, v0, h0, l0);
    mul64(mant, v1, h1, l1);
    mul64(mant, v2, h2, l2);
    const std::uint64_t w0 = l0;
    const std::uint64_t w1 = h0 + l1;
    const std::uint64_t w2 = h1 + l2 + (w1 < h0 ? 1 : 0);
    int n = static_cast<int>(w2 >> 62);
    // Fraction in units of 2^-192.
    std::uint64_t f2 = (w2 << 2) | (w1 >> 62);
    std::uint64_t f1 = (w1 << 2) | (w0 >> 62);
    std::uint64_t f0 = w0 << 2;
    bool neg = false;
    if (f2 >> 63) {  // fraction >= 1/2: take n + 1 and the negative remainder
        n += 1;
        neg = true;
        f0 = ~f0 + 1;
        const std::uint64_t c0 = f0 == 0 ? 1 : 0;
        f1 = ~f1 + c0;
        const std::uint64_t c1 = (c0 != 0 && f1 == 0) ? 1 : 0;
        f2 = ~f2 + c1;
    }
    int shift = 0;
    while (f2 == 0 && shift < 128) {
        f2 = f1;
        f1 = f0;
        f0 = 0;
        shift += 64;
    }
    if (f2 == 0) {  // cannot happen for a double (no multiple of pi/2 is one); stay defined
        r = DD{0.0, 0.0};
        return n & 3;
    }
    int lz = 0;
    for (int step = 32; step > 0; step >>= 1) {
        if ((f2 >> (64 - step)) == 0) {
            f2 <<= step;
            lz += step;
        }
    }
    if (lz > 0) {
        f2 |= f1 >> (64 - lz);
        f1 = (f1 << lz) | (f0 >> (64 - lz));
    }
    shift += lz;
    const double fh = static_cast<double>(f2 >> 11) * pow2i(-53 - shift);
    const double fl = (static_cast<double>(f2 & 0x7ff) + static_cast<double>(f1 >> 11) * 0x1p-53) *
                      pow2i(-64 - shift);
    const DD p = two_prod(fh, kPio2Hi);
    DD rr = fast_two_sum(p.hi, p.lo + (fh * kPio2Lo + fl * kPio2Hi));
    if (neg != sign_bit(x)) rr = DD{-rr.hi, -rr.lo};
    if (sign_bit(x)) n = -n;
    r = rr;
    return n & 3;
}

/// sin(r.hi + r.lo), |r| <= pi/4, as a double-double.
EF_HD EF_INLINE DD sin_kernel(DD r) {
    const double x = r.hi;
    const DD zz = two_prod(x, x);
    const double z = zz.hi;
    // Taylor: sin x = x - x^3/6 + x^5 P(x^2), P to x^12/17! (truncation < 2^-60 relative).
    // x^3/6 (up to 0.1 x) is formed in double-double so that the result, and tan's quotient
    // of two such results, stay within a few hundredths of an ulp before the last rounding.
    double p = 0x1.952c77030ad4ap-49;
    p = p * z - 0x1.ae7f3e733b81fp-41;
    p = p * z + 0x1.6124613a86d09p-33;
    p = p * z - 0x1.ae64567f544e4p-26;
    p = p * z + 0x1.71de3a556c734p-19;
    p = p * z - 0x1.a01a01a01a01ap-13;
    p = p * z + 0x1.1111111111111p-7;
    const DD x3 = two_prod(x, z);
    const double x3l = x3.lo + x * zz.lo;  // x^3 = x3.hi + x3l
    const double c = -x3.hi / 6.0;
    const DD c6 = two_prod(c, 6.0);
    const double cl = ((-x3.hi - c6.hi) - c6.lo - x3l) / 6.0;  // -x^3/6 = c + cl
    const DD a = two_sum(x, c);
    const double tail = a.lo + (cl + ((x3.hi * z) * p + r.lo * (1.0 - 0.5 * z)));
    return fast_two_sum(a.hi, tail);
}

/// cos(r.hi + r.lo), |r| <= pi/4, as a double-double.
EF_HD EF_INLINE DD cos_kernel(DD r) {
    const double x = r.hi;
    const double z = x * x;
    const DD zz = two_prod(x, x);
    const double hz = 0.5 * zz.hi;  // x^2/2 = hz + 0.5 zz.lo exactly
    const DD w = fast_two_sum(1.0, -hz);
    // Taylor: cos x = 1 - x^2/2 + x^4 P(x^2), P to x^14/18!.
    double p = -0x1.6827863b97d97p-53;
    p = p * z + 0x1.ae7f3e733b81fp-45;
    p = p * z - 0x1.93974a8c07c9dp-37;
    p = p * z + 0x1.1eed8eff8d898p-29;
    p = p * z - 0x1.27e4fb7789f5cp-22;
    p = p * z + 0x1.a01a01a01a01ap-16;
    p = p * z - 0x1.6c16c16c16c17p-10;
    p = p * z + 0x1.5555555555555p-5;
    const double tail = w.lo - 0.5 * zz.lo + ((z * z) * p - x * r.lo);
    return fast_two_sum(w.hi, tail);
}

/// atan(x.hi + x.lo) for 0 <= x <= 1, as a double-double.
EF_HD EF_INLINE DD atan_kernel(double x, double xl) {
    // c_k = tan(k pi/16) rounded to double, theta_k = atan(c_k) as hi + lo (mpmath).
    constexpr double kC[5] = {0.0, 0x1.975f5e0553158p-3, 0x1.a827999fcef32p-2,
                              0x1.561b82ab7f990p-1, 1.0};
    constexpr double kThHi[5] = {0.0, 0x1.921fb54442d18p-3, 0x1.921fb54442d18p-2,
                                 0x1.2d97c7f3321d2p-1, 0x1.921fb54442d18p-1};
    constexpr double kThLo[5] = {0.0, 0x1.f93470dfef04ap-58, 0x1.c398861b78b55p-59,
                                 -0x1.8f57cafebcf16p-58, 0x1.1a62633145c07p-55};
    // Boundaries tan((2k - 1) pi/32): |t| <= tan(pi/32) = 0.0985 after reduction.
    int k = 0;
    if (x >= 0.09849140335716425) k = 1;
    if (x >= 0.3033466836073424) k = 2;
    if (x >= 0.5345111359507917) k = 3;
    if (x >= 0.8206787908286604) k = 4;
    double t = x;
    double tl = xl;
    if (k > 0) {
        const double c = kC[k];
        DD num = two_sum(x, -c);
        num.lo += xl;
        const DD pr = two_prod(x, c);
        DD den = two_sum(1.0, pr.hi);
        den.lo += pr.lo + xl * c;
        t = num.hi / den.hi;
        const DD pp = two_prod(t, den.hi);
        tl = (((num.hi - pp.hi) - pp.lo) + num.lo - t * den.lo) / den.hi;
    }
    const double z = t * t;
    // Taylor: atan t = t + t^3 P(t^2), P to t^16/19 (truncation < 2^-66 for |t| <= 0.1).
    double p = -0x1.af286bca1af28p-5;
    p = p * z + 0x1.e1e1e1e1e1e1ep-5;
    p = p * z - 0x1.1111111111111p-4;
    p = p * z + 0x1.3b13b13b13b14p-4;
    p = p * z - 0x1.745d1745d1746p-4;
    p = p * z + 0x1.c71c71c71c71cp-4;
    p = p * z - 0x1.2492492492492p-3;
    p = p * z + 0x1.999999999999ap-3;
    p = p * z - 0x1.5555555555555p-2;
    const double tail = (t * z) * p + tl;
    if (k == 0) return fast_two_sum(t, tail);
    const DD s = two_sum(kThHi[k], t);
    return fast_two_sum(s.hi, s.lo + (tail + kThLo[k]));
}

}  // namespace detail

/// e^x. Overflow gives +inf, underflow 0 (through the subnormals).
EF_HD inline double exp(double x) {
    if (detail::is_nan(x)) return x;
    if (x > 710.0) return detail::infinity();
    if (x < -746.0) return 0.0;
    return detail::exp_dd(x, 0.0);
}

/**
 * e^x rounded to float, for float arguments: double reduction and a degree-10 Taylor
 * polynomial (relative error below 3e-13 before the one rounding to float, so at most one
 * float ulp and almost always correctly rounded), about a third of exp()'s double-double work.
 * Subnormal float results come out right: 2^k p is a normal double, rounded to float once.
 */
EF_HD inline float exp_float(float xf) {
    const double x = xf;
    if (detail::is_nan(x)) return xf;
    if (x > 89.0) return static_cast<float>(detail::infinity());
    if (x < -104.0) return 0.0f;
    const double kd = detail::round_small(x * detail::kInvLn2);
    const double r = (x - kd * detail::kLn2Hi) - kd * detail::kLn2Lo;  // |r| <= 0.3466
    double p = 0x1.27e4fb7789f5cp-22;   // 1/10!
    p = p * r + 0x1.71de3a556c734p-19;  // 1/9!
    p = p * r + 0x1.a01a01a01a01ap-16;  // 1/8!
    p = p * r + 0x1.a01a01a01a01ap-13;  // 1/7!
    p = p * r + 0x1.6c16c16c16c17p-10;  // 1/6!
    p = p * r + 0x1.1111111111111p-7;   // 1/5!
    p = p * r + 0x1.5555555555555p-5;   // 1/4!
    p = p * r + 0x1.5555555555555p-3;   // 1/3!
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    return static_cast<float>(p * detail::pow2i(static_cast<int>(kd)));
}

/// Natural logarithm: log(+-0) = -inf, log(x < 0) = NaN, log(+inf) = +inf.
EF_HD inline double log(double x) {
    using namespace detail;
    if (is_nan(x)) return x;
    if (x == 0.0) return -infinity();
    if (x < 0.0) return quiet_nan();
    if (is_inf(x)) return x;
    return log_dd(x).hi;  // the double-double rounded once: within 0.5 + 2^-14 ulp
}

/**
 * x^y with the C99 Annex F special cases: pow(x, +-0) = 1 and pow(1, y) = 1 even for NaN;
 * pow(+-0, y<0) = +inf (-inf for odd integer y and -0); pow(x<0, non-integer y) = NaN;
 * pow(x<0, integer y) = +-|x|^y by parity; pow(-1, +-inf) = 1; infinities by |x| vs 1.
 */
EF_HD inline double pow(double x, double y) {
    using namespace detail;
    if (y == 0.0) return 1.0;
    if (x == 1.0) return 1.0;
    if (is_nan(x)) return x;
    if (is_nan(y)) return y;
    const double ax = abs(x);
    const double ay = abs(y);
    // Integer and odd-integer exponents (every |y| >= 2^53 is an even integer).
    const bool y_int = trunc(y) == y;
    bool y_odd = false;
    if (y_int && ay < 0x1p53) y_odd = trunc(y * 0.5) != y * 0.5;
    if (is_inf(y)) {
        if (ax == 1.0) return 1.0;
        return ((ax < 1.0) == (y > 0.0)) ? 0.0 : infinity();
    }
    if (x == 0.0) {
        if (y < 0.0) return y_odd ? copy_sign(infinity(), x) : infinity();
        return y_odd ? x : 0.0;
    }
    if (is_inf(x)) {
        const double mag = y < 0.0 ? 0.0 : infinity();
        return (x < 0.0 && y_odd) ? -mag : mag;
    }
    if (x < 0.0 && !y_int) return quiet_nan();
    const double sign = (x < 0.0 && y_odd) ? -1.0 : 1.0;
    if (ax == 1.0) return sign;
    if (ay > 0x1p64) {  // |log x| >= 2^-53 makes |y log x| >= 2^11: overflow or underflow
        return ((ax < 1.0) == (y > 0.0)) ? 0.0 : infinity();
    }
    const DD l = log_dd(ax);
    const DD p = two_prod(y, l.hi);
    const DD z = fast_two_sum(p.hi, p.lo + y * l.lo);
    if (z.hi > 710.0) return sign * infinity();
    if (z.hi < -746.0) return sign * 0.0;
    return sign * exp_dd(z.hi, z.lo);
}

/// sin x; NaN for infinite x.
EF_HD inline double sin(double x) {
    using namespace detail;
    if (abs(x) < 0x1p-27) return x;  // sin x = x (1 - x^2/6) rounds to x; keeps -0, subnormals
    if (is_nan(x)) return x;
    if (is_inf(x)) return quiet_nan();
    DD r;
    const int n = rem_pio2(x, r);
    switch (n) {
        case 0: return sin_kernel(r).hi;
        case 1: return cos_kernel(r).hi;
        case 2: return -sin_kernel(r).hi;
        default: return -cos_kernel(r).hi;
    }
}

/// cos x; NaN for infinite x.
EF_HD inline double cos(double x) {
    using namespace detail;
    if (abs(x) < 0x1p-27) return 1.0;
    if (is_nan(x)) return x;
    if (is_inf(x)) return quiet_nan();
    DD r;
    const int n = rem_pio2(x, r);
    switch (n) {
        case 0: return cos_kernel(r).hi;
        case 1: return -sin_kernel(r).hi;
        case 2: return -cos_kernel(r).hi;
        default: return sin_kernel(r).hi;
    }
}

/// tan x = sin/cos of the reduced argument, divided in double-double; NaN for infinite x.
EF_HD inline double tan(double x) {
    using namespace detail;
    if (abs(x) < 0x1p-27) return x;
    if (is_nan(x)) return x;
    if (is_inf(x)) return quiet_nan();
    DD r;
    const int n = rem_pio2(x, r);
    const DD s = sin_kernel(r);
    const DD c = cos_kernel(r);
    if ((n & 1) == 0) return dd_div(s, c);
    return -dd_div(c, s);
}

/// Arc tangent in [-pi/2, pi/2].
EF_HD inline double atan(double x) {
    using namespace detail;
    if (is_nan(x)) return x;
    const double ax = abs(x);
    if (ax < 0x1p-27) return x;  // atan x = x (1 - x^2/3) rounds to x
    if (ax > 0x1p60) return copy_sign(kPio2Hi, x);
    DD a;
    if (ax <= 1.0) {
        a = atan_kernel(ax, 0.0);
    } else {
        const double q = 1.0 / ax;
        const DD p = two_prod(q, ax);
        const double ql = ((1.0 - p.hi) - p.lo) / ax;
        const DD b = atan_kernel(q, ql);
        const DD d = two_sum(kPio2Hi, -b.hi);
        a = fast_two_sum(d.hi, d.lo + (kPio2Lo - b.lo));
    }
    return copy_sign(a.hi, x);
}

/// Arc tangent of y/x in [-pi, pi], using the signs of both (C99 Annex F special cases).
EF_HD inline double atan2(double y, double x) {
    using namespace detail;
    if (is_nan(x)) return x;
    if (is_nan(y)) return y;
    const bool xneg = sign_bit(x);
    if (y == 0.0) return xneg ? copy_sign(kPiHi, y) : y;
    if (x == 0.0) return copy_sign(kPio2Hi, y);
    if (is_inf(x)) {
        if (is_inf(y)) return copy_sign(xneg ? k3Pio4 : kPio4, y);
        return xneg ? copy_sign(kPiHi, y) : copy_sign(0.0, y);
    }
    if (is_inf(y)) return copy_sign(kPio2Hi, y);
    double ay = abs(y);
    double ax = abs(x);
    const bool swap = ay > ax;
    double num = swap ? ax : ay;
    double den = swap ? ay : ax;
    DD a;
    if (num < den * 0x1p-60) {
        a = DD{num / den, 0.0};  // atan q = q to within 2^-120 relative: one rounding
    } else {
        if (den > 0x1p900) {  // keep the Dekker products away from overflow
            num *= 0x1p-200;
            den *= 0x1p-200;
        } else if (num < 0x1p-900) {  // ... and from underflow
            num *= 0x1p200;
            den *= 0x1p200;
        }
        const double q = num / den;
        const DD p = two_prod(q, den);
        const double ql = ((num - p.hi) - p.lo) / den;
        a = atan_kernel(q, ql);
    }
    if (swap) {
        const DD d = two_sum(kPio2Hi, -a.hi);
        a = fast_two_sum(d.hi, d.lo + (kPio2Lo - a.lo));
    }
    if (xneg) {
        const DD d = two_sum(kPiHi, -a.hi);
        a = fast_two_sum(d.hi, d.lo + (kPiLo - a.lo));
    }
    return copy_sign(a.hi + a.lo, y);
}

}  // namespace ef::math

// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>

#include "kernels/core/complex.hpp"
#include "kernels/core/dual.hpp"
#include "kernels/core/hd.hpp"
#include "kernels/models/mellin_math.hpp"

namespace ef {

/**
 * Parameter layout of the `dis-mellin` model (17 parameters, 13 free by default).
 *
 * Each distribution at the input scale Q0^2 has the shape
 *     f(x) = M x^a (1 - x)^b (1 + c sqrt(x) + d x) / n(a, b, c, d),
 * normalised to its second moment, n = integral of x * x^a (1-x)^b (1 + c sqrt(x) + d x), so M
 * is the momentum fraction <x>_f. The valence M follow from the number sum rules (u_v: 2,
 * d_v: 1), the gluon's M from the momentum sum rule, so only the sea has an explicit M.
 *
 *   p[0]:  uv_a,  small-x exponent of u_v (> -1 for the number sum rule)
 *   p[1]:  uv_b,  large-x exponent of u_v, (1 - x)^b
 *   p[2]:  uv_c,  coefficient of sqrt(x) in the u_v polynomial
 *   p[3]:  uv_d,  coefficient of x in the u_v polynomial
 *   p[4]:  dv_a,  small-x exponent of d_v (> -1)
 *   p[5]:  dv_b,  large-x exponent of d_v
 *   p[6]:  dv_c,  coefficient of sqrt(x) in the d_v polynomial
 *   p[7]:  dv_d,  coefficient of x in the d_v polynomial
 *   p[8]:  sea_N, momentum fraction of the light sea S = 2 (ubar + dbar + sbar) at Q0^2
 *   p[9]:  sea_a, small-x exponent of the sea
 *   p[10]: sea_b, large-x exponent of the sea
 *   p[11]: sea_c, coefficient of sqrt(x) in the sea polynomial (fixed to 0 by default)
 *   p[12]: sea_d, coefficient of x in the sea polynomial (fixed to 0 by default)
 *   p[13]: g_a,   small-x exponent of the gluon
 *   p[14]: g_b,   large-x exponent of the gluon
 *   p[15]: g_c,   coefficient of sqrt(x) in the gluon polynomial (fixed to 0 by default)
 *   p[16]: g_d,   coefficient of x in the gluon polynomial (fixed to 0 by default)
 *
 * The sea is flavour-split with the strange fraction kappa (setting model.strange_fraction):
 * ubar = dbar = u_sea = d_sea = S / (4 + 2 kappa), s = sbar = kappa ubar. Every a must exceed
 * -c (the contour abscissa) so that the contour passes right of the pole of B(N + a, b + 1);
 * check_dis_mellin_bounds() (src/model/dis_mellin.hpp) enforces it at config time.
 *
 * Split sea ([model] sea = split; Layout::split): the sea block p[8..12] becomes ubar's
 * (ubar_N = <x>_ubar, the momentum fraction of ubar alone, and ubar_a..ubar_d), and two blocks
 * follow the gluon: p[17..21] dbar (dbar_N = <x>_dbar, dbar_a..dbar_d) and p[22..26] s + sbar
 * (s_N = <x>_{s+sbar}, s_a..s_d), 27 parameters. The quark sea is charge-symmetric (u_sea =
 * ubar, d_sea = dbar, s = sbar); the momentum sum rule gives the gluon
 * <x>_g = 1 - <x>_uv - <x>_dv - 2 ubar_N - 2 dbar_N - s_N.
 *
 * Coefficients ([model] pdf_norm = coefficients; Layout::coefficients): no sum rule is imposed;
 * three parameters uv_N, dv_N, g_N follow the others (p[17..19], or p[27..29] when split) and
 * every _N is the coefficient A of f(x) = A x^a (1-x)^b (1 + c sqrt(x) + d x) itself (the
 * number density: x f = A x^(a+1) ...), as the Les Houches toy input states its distributions.
 *
 * Default start values (also the pseudo-data truth; dis_mellin_param_table() has the bounds):
 * u_v (a, b, c, d) = (-0.45, 3.2, 0.5, 3.0), d_v = (-0.4, 4.5, 0.5, 2.0), sea_N = 0.16,
 * sea = (-1.15, 8.0, 0, 0), g = (-0.9, 5.0, 0, 0); momentum fractions u_v 0.319, d_v 0.124,
 * sea 0.16, gluon 0.397 at Q0 = 1.27 GeV.
 */
namespace dis_mellin {
constexpr int kNumParams = 17;
constexpr int kUvA = 0;      ///< first of uv_a, uv_b, uv_c, uv_d
constexpr int kDvA = 4;      ///< first of dv_a, dv_b, dv_c, dv_d
constexpr int kSeaN = 8;     ///< sea momentum fraction
constexpr int kSeaA = 9;     ///< first of sea_a, sea_b, sea_c, sea_d
constexpr int kGluonA = 13;  ///< first of g_a, g_b, g_c, g_d
constexpr int kDbarN = 17;   ///< split sea: dbar_N, then dbar_a .. dbar_d
constexpr int kStrangeN = 22;  ///< split sea: s_N, then s_a .. s_d
constexpr int kNumParamsSplit = 27;

/**
 * The moment basis at Q0^2 that the precomputed tables act on: u_v, d_v, the total light sea S
 * and the gluon. The strange sea is a fixed fraction of S, so it needs no column of its own.
 * With the split sea the basis is u_v, d_v, ubar, g, dbar, s + sbar (kMaxBasis columns): the
 * first four keep their places, so the symmetric tables are the split ones' first columns'
 * layout with kNumBasis per node.
 */
constexpr int kNumBasis = 4;
constexpr int kMaxBasis = 6;
constexpr int kBasisUv = 0;
constexpr int kBasisDv = 1;
constexpr int kBasisSea = 2;  ///< S (symmetric) or ubar (split)
constexpr int kBasisGluon = 3;
constexpr int kBasisDbar = 4;     ///< split only
constexpr int kBasisStrange = 5;  ///< split only: s + sbar

/// The run-time shape of the parameter vector and of the basis (see the layout above).
struct Layout {
    int split = 0;         ///< ubar, dbar, s + sbar with shapes of their own
    int coefficients = 0;  ///< every _N a plain coefficient, no sum rules

    EF_HD int basis() const { return split ? kMaxBasis : kNumBasis; }
    EF_HD int params() const { return (split ? kNumParamsSplit : kNumParams) + (coefficients ? 3 : 0); }
    /// Index of uv_N (then dv_N, g_N) in coefficients mode.
    EF_HD int coefficient_index() const { return split ? kNumParamsSplit : kNumParams; }
};

/// Per-flavour scale factors that turn shape moments into normalised moments:
/// q_b(N) = scale[b] * shape_b(N).
template <class T>
struct Normalisation {
    T scale[kMaxBasis];
};

namespace detail {
/// True when x is exactly zero with no derivative: a fixed zero coefficient whose term can be
/// skipped (saves two complex log-Gammas a node for the default sea and gluon).
template <class T>
EF_HD bool is_exact_zero(const T& x) {
    return value_of(x) == 0.0;
}
template <class T, int K>
EF_HD bool is_exact_zero(const Dual<T, K>& x) {
    if (!is_exact_zero(x.v)) return false;
    for (int k = 0; k < K; ++k)
        if (!is_exact_zero(x.d[k])) return false;
    return true;
}
}  // namespace detail

namespace detail {
template <class T>
struct WideDual {
    static constexpr int width = 0;
};
template <int K>
struct WideDual<Dual<double, K>> {
    static constexpr int width = K;
};
}  // namespace detail

template <class T>
EF_HD Complex<T> shape_moment_generic(const Complex<double>& n, const T* shape);

/**
 * shape_moment on wide duals through Dual<double, 4>: a flavour's shape depends on its own four
 * parameters only, so of K > 4 derivative slots at most four are non-zero. When each of the
 * four is a constant or a seed (one slot at 1, as the LM's points are), the moment is computed
 * on the four local slots and scattered back: the same operations on every non-zero component
 * (so the same bits), a fraction of the work. Otherwise the generic path.
 */
template <int K>
EF_HD Complex<Dual<double, K>> shape_moment_local(const Complex<double>& n, const Dual<double, K>* shape) {
    using D4 = Dual<double, 4>;
    D4 s[4];
    int slot[4];
    for (int i = 0; i < 4; ++i) {
        s[i] = D4(shape[i].v);
        slot[i] = -1;
        for (int k = 0; k < K; ++k) {
            const double d = shape[i].d[k];
            if (d == 0.0) continue;
            if (d != 1.0 || slot[i] >= 0) return shape_moment_generic(n, shape);  // not a seed
            slot[i] = k;
        }
        if (slot[i] >= 0) s[i].d[i] = 1.0;
    }
    const Complex<D4> r4 = shape_moment_generic(n, s);
    Complex<Dual<double, K>> r;
    r.re = Dual<double, K>(r4.re.v);
    r.im = Dual<double, K>(r4.im.v);
    for (int i = 0; i < 4; ++i)
        if (slot[i] >= 0) {
            r.re.d[slot[i]] = r4.re.d[i];
            r.im.d[slot[i]] = r4.im.d[i];
        }
    return r;
}

/**
 * Unnormalised Mellin moment of x^a (1-x)^b (1 + c sqrt(x) + d x), divided by Gamma(b + 1)
 * (which cancels in every normalised moment):
 *     shape(N) = G(N+a) + c G(N+a+1/2) + d G(N+a) (N+a)/(N+a+b+1),
 *     G(z) = Gamma(z) / Gamma(z + b + 1),
 * using B(N+a+1, b+1) = B(N+a, b+1) (N+a)/(N+a+b+1) to save two log-Gammas.
 * `shape` points at {a, b, c, d}.
 */
template <class T>
EF_HD Complex<T> shape_moment(const Complex<double>& n, const T* shape) {
    if constexpr (detail::WideDual<T>::width > 4) return shape_moment_local(n, shape);
    else return shape_moment_generic(n, shape);
}

template <class T>
EF_HD Complex<T> shape_moment_generic(const Complex<double>& n, const T* shape) {
    const T& a = shape[0];
    const T& b = shape[1];
    const T& c = shape[2];
    const T& d = shape[3];
    const Complex<T> z = Complex<T>(n) + a;
    const T beta = b + T(1);
    const Complex<T> g0 = gamma_ratio(z, beta);
    Complex<T> r = g0;
    if (!detail::is_exact_zero(d)) r += d * (g0 * z / (z + beta));
    if (!detail::is_exact_zero(c)) r += c * gamma_ratio(z + T(0.5), beta);
    return r;
}

/// Gamma(b + 1) for real b > -1 (the factor shape_moment leaves out), on any scalar type.
template <class T>
EF_HD T gamma_of_b1(const T& b) {
    return real(exp(lgamma(Complex<T>(b + T(1)))));
}

/// Coefficients mode: scale_b = A_b Gamma(b_b + 1), so q_b(N) = A_b B(N + a, b + 1) (1 + ...).
template <class T>
EF_HD Normalisation<T> coefficient_normalisation(const T* p, const Layout& lay) {
    Normalisation<T> nrm;
    const int c = lay.coefficient_index();
    nrm.scale[kBasisUv] = p[c] * gamma_of_b1(p[kUvA + 1]);
    nrm.scale[kBasisDv] = p[c + 1] * gamma_of_b1(p[kDvA + 1]);
    nrm.scale[kBasisSea] = p[kSeaN] * gamma_of_b1(p[kSeaA + 1]);
    nrm.scale[kBasisGluon] = p[c + 2] * gamma_of_b1(p[kGluonA + 1]);
    if (lay.split) {
        nrm.scale[kBasisDbar] = p[kDbarN] * gamma_of_b1(p[kDbarN + 2]);
        nrm.scale[kBasisStrange] = p[kStrangeN] * gamma_of_b1(p[kStrangeN + 2]);
    }
    return nrm;
}

/**
 * The scale factors from the sum rules: u_v(N) = 2 shape(N) / shape(1), d_v(N) = shape(N) /
 * shape(1), S(N) = sea_N shape(N) / shape(2), g(N) = (1 - <x>_uv - <x>_dv - sea_N) shape(N) /
 * shape(2). Split sea: ubar, dbar, s + sbar each normalised to its own _N, and the gluon takes
 * 1 - <x>_uv - <x>_dv - 2 ubar_N - 2 dbar_N - s_N. The symmetric layout does exactly the
 * arithmetic it always did (the same bits).
 */
template <class T>
EF_HD Normalisation<T> normalisation(const T* p, const Layout& lay = Layout{}) {
    if (lay.coefficients) return coefficient_normalisation(p, lay);
    const Complex<double> one(1.0);
    const Complex<double> two(2.0);
    Normalisation<T> nrm;
    const T uv1 = real(shape_moment(one, p + kUvA));
    const T dv1 = real(shape_moment(one, p + kDvA));
    nrm.scale[kBasisUv] = T(2) / uv1;
    nrm.scale[kBasisDv] = T(1) / dv1;
    const T x_uv = nrm.scale[kBasisUv] * real(shape_moment(two, p + kUvA));
    const T x_dv = nrm.scale[kBasisDv] * real(shape_moment(two, p + kDvA));
    nrm.scale[kBasisSea] = p[kSeaN] / real(shape_moment(two, p + kSeaA));
    T x_sea = p[kSeaN];
    if (lay.split) {
        nrm.scale[kBasisDbar] = p[kDbarN] / real(shape_moment(two, p + kDbarN + 1));
        nrm.scale[kBasisStrange] = p[kStrangeN] / real(shape_moment(two, p + kStrangeN + 1));
        x_sea = T(2) * p[kSeaN] + T(2) * p[kDbarN] + p[kStrangeN];
    }
    const T x_g = T(1) - x_uv - x_dv - x_sea;
    nrm.scale[kBasisGluon] = x_g / real(shape_moment(two, p + kGluonA));
    return nrm;
}

/// The basis moments q_b(N) at Q0^2 (u_v, d_v, S, g; split: u_v, d_v, ubar, g, dbar, s+),
/// normalised by the sum rules (or the coefficients).
template <class T>
EF_HD void input_moments(const T* p,
                         const Normalisation<T>& nrm,
                         const Complex<double>& n,
                         Complex<T>* q,
                         const Layout& lay = Layout{}) {
    q[kBasisUv] = nrm.scale[kBasisUv] * shape_moment(n, p + kUvA);
    q[kBasisDv] = nrm.scale[kBasisDv] * shape_moment(n, p + kDvA);
    q[kBasisSea] = nrm.scale[kBasisSea] * shape_moment(n, p + kSeaA);
    q[kBasisGluon] = nrm.scale[kBasisGluon] * shape_moment(n, p + kGluonA);
    if (lay.split) {
        q[kBasisDbar] = nrm.scale[kBasisDbar] * shape_moment(n, p + kDbarN + 1);
        q[kBasisStrange] = nrm.scale[kBasisStrange] * shape_moment(n, p + kStrangeN + 1);
    }
}
}  // namespace dis_mellin

/**
 * The `dis-mellin` model: LO structure function F2(x, Q^2) of a proton or neutron target from
 * parton distributions parameterised at Q0^2 (parameters: see namespace dis_mellin above).
 *
 * Everything that does not depend on the parameters (LO DGLAP evolution operators to each
 * point's Q^2 with charm/bottom thresholds, quark charges and target isospin, the Mellin kernel
 * x^{-N}, quadrature weights, e^{i phi} / pi and the factor x of F2 = x sum e_q^2 (q + qbar))
 * is folded by DisMellinTheory (src/model/dis_mellin.hpp) into one complex coefficient per
 * (point i, contour node k, basis moment b). Then
 *     prepare:  ws = q_b(N_k) for all k, b   (2 or 4 complex log-Gammas per node and flavour)
 *     value:    F2_i = sum_{k,b} Im( C[i][k][b] q_b(N_k) )
 * so a model evaluation is one dense (points x nodes*basis) complex matrix times a vector that
 * all points share. Per table entry (16 bytes) value() does 4 FLOPs on double (memory-bound),
 * 4 (K + 1) on Dual<double, K> (compute-bound for K >= 8 on GPUs).
 *
 * Layouts (interleaved re, im doubles):
 *   table: [points][num_nodes][basis][2]   (owned by DisMellinTheory; basis = layout.basis(),
 *                                           4, or 6 with the split sea)
 *   nodes: [num_nodes][2]                   contour points N_k
 *   ws:    [num_nodes][basis][2]            scalars of type T, workspace_size() of them
 * `value` reads only the table row i: `x` (the row x, Q^2, target) is not used, and i must
 * index the data the theory was built from.
 */
struct DisMellinModel {
    const double* table = nullptr;
    const double* nodes = nullptr;
    int points = 0;
    int num_nodes = 0;
    dis_mellin::Layout layout;  ///< symmetric sea, sum rules unless the config asks otherwise

    EF_HD int num_params() const { return layout.params(); }
    EF_HD int workspace_size() const { return table_width(); }

    /// The sum-rule (or coefficient) scale factors of this layout at p.
    template <class T>
    EF_HD dis_mellin::Normalisation<T> normalisation(const T* p) const {
        return dis_mellin::normalisation(p, layout);
    }

    template <class T>
    EF_HD void prepare(const T* p, T* ws) const {
        const dis_mellin::Normalisation<T> nrm = normalisation(p);
        for (int k = 0; k < num_nodes; ++k) prepare_node(p, nrm, k, ws + node_width() * k);
    }

    /// prepare() for contour node k alone (its 2 * kNumBasis workspace scalars), given the
    /// sum-rule normalisation: lets a GPU compute the nodes of many replicas in parallel with
    /// exactly the arithmetic of prepare().
    template <class T>
    EF_HD void prepare_node(const T* p, const dis_mellin::Normalisation<T>& nrm, int k, T* out) const {
        using namespace dis_mellin;
        const Complex<double> n(nodes[2 * k], nodes[2 * k + 1]);
        Complex<T> q[kMaxBasis];
        input_moments(p, nrm, n, q, layout);
        const int nb = layout.basis();
        for (int b = 0; b < nb; ++b) {
            out[2 * b] = q[b].re;
            out[2 * b + 1] = q[b].im;
        }
    }

    /**
     * The table-linear form used by the batched path (kernels/fit/lm_batched.hpp):
     * F_i = sum_k table[i * table_width() + k] * u_k with u_k = ws[k ^ 1] (Im(C q) = C.re q.im
     * + C.im q.re pairs each table entry with the other half of the moment). One GEMM of the
     * (points x table_width) table with the u columns of all replicas and all derivative
     * directions gives every prediction and Jacobian column at once.
     */
    EF_HD int table_width() const { return node_width() * num_nodes; }
    EF_HD static int table_column_source(int k) { return k ^ 1; }
    EF_HD int nodes_count() const { return num_nodes; }
    EF_HD int node_width() const { return 2 * layout.basis(); }
    /// Doubles of node_width() at most (for stack buffers of one node).
    static constexpr int kMaxNodeWidth = 2 * dis_mellin::kMaxBasis;

    template <class T>
    EF_HD T value(const T* /*p*/, const T* ws, const double* /*x*/, int i) const {
        const int row = table_width();
        const double* c = table + static_cast<std::size_t>(i) * static_cast<std::size_t>(row);
        // Im(C q) = C.re q.im + C.im q.re
        T acc(0);
        for (int j = 0; j < row; j += 2) {
            acc += ws[j + 1] * c[j];
            acc += ws[j] * c[j + 1];
        }
        return acc;
    }
};

}  // namespace ef

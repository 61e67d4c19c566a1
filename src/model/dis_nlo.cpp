// SPDX-License-Identifier: MIT
#include "src/model/dis_nlo.hpp"

#include <array>
#include <cmath>
#include <limits>
#include <vector>

namespace ef::qcd {

namespace {

constexpr double kCF = 4.0 / 3.0;
constexpr double kCA = 3.0;
constexpr double kTR = 0.5;

// --- Polygamma functions --------------------------------------------------------------------

/// Shift z to Re z >= 16 by the recurrences; `acc` collects the shifted terms via `term`.
template <class Term>
Cx shift_up(Cx& z, Term term) {
    Cx acc(0.0);
    while (z.real() < 16.0) {
        acc += term(z);
        z += 1.0;
    }
    return acc;
}

/// Horner in w = 1/z^2 over coefficients c[0] + c[1] w + ...
template <std::size_t K>
Cx series(const std::array<double, K>& c, Cx w) {
    Cx r(c[K - 1]);
    for (std::size_t k = K - 1; k-- > 0;) r = r * w + c[k];
    return r;
}

// --- 2x2 complex matrices for the singlet ------------------------------------------------------

struct M2 {
    Cx m[2][2];
};
M2 identity() {
    M2 r;
    r.m[0][0] = r.m[1][1] = 1.0;
    return r;
}
M2 operator+(const M2& a, const M2& b) {
    M2 r;
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) r.m[i][j] = a.m[i][j] + b.m[i][j];
    return r;
}
M2 operator-(const M2& a, const M2& b) {
    M2 r;
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) r.m[i][j] = a.m[i][j] - b.m[i][j];
    return r;
}
M2 operator*(Cx s, const M2& a) {
    M2 r;
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) r.m[i][j] = s * a.m[i][j];
    return r;
}
M2 operator*(const M2& a, const M2& b) {
    M2 r;
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) r.m[i][j] = a.m[i][0] * b.m[0][j] + a.m[i][1] * b.m[1][j];
    return r;
}
M2 inverse(const M2& a) {
    const Cx det = a.m[0][0] * a.m[1][1] - a.m[0][1] * a.m[1][0];
    M2 r;
    r.m[0][0] = a.m[1][1] / det;
    r.m[1][1] = a.m[0][0] / det;
    r.m[0][1] = -a.m[0][1] / det;
    r.m[1][0] = -a.m[1][0] / det;
    return r;
}

/// Eigenvalues r+, r- and projectors e+, e- of a 2x2 matrix (A = r+ e+ + r- e-).
struct Eigen2 {
    Cx rp, rm;
    M2 ep, em;
};
Eigen2 eigen(const M2& a) {
    const Cx tr = a.m[0][0] + a.m[1][1];
    const Cx diff = a.m[0][0] - a.m[1][1];
    const Cx disc = std::sqrt(diff * diff + 4.0 * a.m[0][1] * a.m[1][0]);
    Eigen2 e;
    e.rp = 0.5 * (tr + disc);
    e.rm = 0.5 * (tr - disc);
    e.ep = (1.0 / (e.rp - e.rm)) * (a - e.rm * identity());
    e.em = identity() - e.ep;
    return e;
}

M2 singlet_matrix(Cx qq, Cx qg, Cx gq, Cx gg) {
    M2 r;
    r.m[0][0] = qq;
    r.m[0][1] = qg;
    r.m[1][0] = gq;
    r.m[1][1] = gg;
    return r;
}

// --- Evolution kernels of one flavour segment --------------------------------------------------

/// U_1..U_K of the singlet U-matrix series, R(a) = R0 + sum_k a^k R_k (hep-ph/0408244 eq. 2.14).
std::vector<M2> u_matrices(const Eigen2& e, const M2& r1, double b1, int orders) {
    std::vector<M2> r(static_cast<std::size_t>(orders) + 1);
    std::vector<M2> u(static_cast<std::size_t>(orders) + 1);
    r[1] = r1;
    for (int k = 2; k <= orders; ++k) r[static_cast<std::size_t>(k)] = Cx(-b1) * r[static_cast<std::size_t>(k - 1)];
    u[0] = identity();
    for (int k = 1; k <= orders; ++k) {
        const auto ku = static_cast<std::size_t>(k);
        M2 rt = r[ku];
        for (int l = 1; l < k; ++l) rt = rt + r[static_cast<std::size_t>(l)] * u[ku - static_cast<std::size_t>(l)];
        const double kd = k;
        u[ku] = Cx(-1.0 / kd) * (e.em * rt * e.em + e.ep * rt * e.ep) +
                (1.0 / (e.rm - e.rp - kd)) * (e.ep * rt * e.em) +
                (1.0 / (e.rp - e.rm - kd)) * (e.em * rt * e.ep);
    }
    return u;
}

/// Everything the solution needs at one N and nf: P0, P1 (scale-shifted) and b1.
struct SegmentKernel {
    int nf;
    Cx p0_ns, p1_plus, p1_minus;
    M2 p0, p1;
    Eigen2 e;            ///< of R0 = P0 / beta0
    std::vector<M2> u;   ///< U_0..U_K (NLO only)
};

SegmentKernel segment_kernel(Cx n, int nf, const QcdSettings& s) {
    SegmentKernel k;
    k.nf = nf;
    const Splitting p0 = lo_splitting(n, nf);
    k.p0_ns = p0.ns;
    k.p0 = singlet_matrix(p0.qq, p0.qg, p0.gq, p0.gg);
    if (s.order >= 2) {
        const NloSplitting p1 = nlo_splitting(n, nf);
        // mu_R != mu_F: a(mu_F) = a(mu_R) (1 + beta0 ln(mu_R^2/mu_F^2) a(mu_R)) + O(a^3), so
        // a_F P0 + a_F^2 P1 = a_R P0 + a_R^2 (P1 + beta0 ln(mu_R^2/mu_F^2) P0)
        const double shift = beta0(nf) * std::log(s.mur_over_muf * s.mur_over_muf);
        k.p1_plus = p1.ns_plus + shift * p0.ns;
        k.p1_minus = p1.ns_minus + shift * p0.ns;
        k.p1 = singlet_matrix(p1.qq, p1.qg, p1.gq, p1.gg) + Cx(shift) * k.p0;
    }
    k.e = eigen(Cx(1.0 / beta0(nf)) * k.p0);
    if (s.order >= 2) {
        const double b0 = beta0(nf);
        const double b1 = beta1(nf) / b0;
        const M2 r1 = Cx(1.0 / b0) * k.p1 - Cx(b1 / b0) * k.p0;
        const int orders = s.solution == EvolutionSolution::truncated ? 1 : s.iterated_orders;
        k.u = u_matrices(k.e, r1, b1, orders);
    }
    return k;
}

/// Non-singlet factor E(a0 -> a1) for P0, P1 (hep-ph/0408244 eqs. 2.8-2.11 specialised to 1x1).
Cx ns_factor(Cx p0, Cx p1, int nf, double a0, double a1, const QcdSettings& s) {
    const double b0 = beta0(nf);
    const double b1 = beta1(nf) / b0;
    const double lr = std::log(a1 / a0);
    if (s.order < 2) return std::exp(-p0 / b0 * lr);
    if (s.solution == EvolutionSolution::truncated) {
        const Cx r1 = p1 / b0 - b1 * p0 / b0;
        return std::exp(-p0 / b0 * lr) * (1.0 - (a1 - a0) * r1);
    }
    // exact integral of -(P0 + a P1) / (beta0 a (1 + b1 a)) da
    const double lb = std::log((1.0 + b1 * a1) / (1.0 + b1 * a0));
    return std::exp(-(p0 * lr + (p1 / b1 - p0) * lb) / b0);
}

M2 u_sum(const std::vector<M2>& u, double a) {
    M2 r = identity();
    double ak = 1.0;
    for (std::size_t k = 1; k < u.size(); ++k) {
        ak *= a;
        r = r + Cx(ak) * u[k];
    }
    return r;
}

/// Singlet operator E(a0 -> a1) acting on (Sigma, g).
M2 singlet_factor(const SegmentKernel& k, double a0, double a1, const QcdSettings& s) {
    const Eigen2& e = k.e;
    const double ratio = a1 / a0;
    const M2 l = std::pow(Cx(ratio), -e.rp) * e.ep + std::pow(Cx(ratio), -e.rm) * e.em;
    if (s.order < 2) return l;
    const std::vector<M2>& u = k.u;
    if (s.solution == EvolutionSolution::truncated) return l + Cx(a1) * u[1] * l - Cx(a0) * l * u[1];
    return u_sum(u, a1) * l * inverse(u_sum(u, a0));
}

void evolve_segment(const SegmentKernel& k, double a0, double a1, const QcdSettings& s,
                    PartonMoments* moments, int count) {
    const int nf = k.nf;
    const Cx e_plus = ns_factor(k.p0_ns, k.p1_plus, nf, a0, a1, s);
    const Cx e_minus = ns_factor(k.p0_ns, k.p1_minus, nf, a0, a1, s);
    const M2 e = singlet_factor(k, a0, a1, s);
    const double inv_nf = 1.0 / nf;
    for (int i = 0; i < count; ++i) {
        PartonMoments& q = moments[i];
        Cx sigma(0.0);
        for (int f = 0; f < nf; ++f) sigma += q.qp[f];
        const Cx sigma_new = e.m[0][0] * sigma + e.m[0][1] * q.g;
        const Cx g_new = e.m[1][0] * sigma + e.m[1][1] * q.g;
        for (int f = 0; f < nf; ++f) {
            q.qp[f] = e_plus * (q.qp[f] - sigma * inv_nf) + sigma_new * inv_nf;
            q.qm[f] = e_minus * q.qm[f];
        }
        q.g = g_new;
    }
}

std::array<double, 3> thresholds(const QcdSettings& s) { return {s.mc2, s.mb2, s.mt2}; }

/// The scales from q2_from to q2_to with the thresholds strictly between inserted, in order.
std::vector<double> scale_path(double q2_from, double q2_to, const QcdSettings& s) {
    std::vector<double> path{q2_from};
    if (s.nf_fixed == 0) {
        const auto t = thresholds(s);
        if (q2_to > q2_from) {
            for (double m : t)
                if (m > q2_from && m < q2_to) path.push_back(m);
        } else {
            for (auto it = t.rbegin(); it != t.rend(); ++it)
                if (*it < q2_from && *it > q2_to) path.push_back(*it);
        }
    }
    path.push_back(q2_to);
    return path;
}

/// One stretch of the coupling at fixed nf: a at mu2 from a0 at mu2_0 (L = ln(mu2 / mu2_0)).
double run_segment(double a0, double l, int nf, const QcdSettings& s) {
    const double b0 = beta0(nf);
    const double den = 1.0 + b0 * a0 * l;
    if (!(den > 0.0)) return std::numeric_limits<double>::quiet_NaN();
    const double a_lo = a0 / den;
    if (s.order < 2) return a_lo;
    const double b1 = beta1(nf) / b0;
    if (s.coupling == CouplingSolution::expanded) return a_lo * (1.0 - b1 * a_lo * std::log(den));
    // exact solution of the truncated beta function: Newton on
    // F(a) = 1/a - 1/a0 + b1 ln(a (1 + b1 a0) / (a0 (1 + b1 a))) - beta0 L = 0
    double a = a_lo;
    for (int it = 0; it < 100; ++it) {
        const double f = 1.0 / a - 1.0 / a0 + b1 * std::log(a * (1.0 + b1 * a0) / (a0 * (1.0 + b1 * a))) - b0 * l;
        const double df = -1.0 / (a * a * (1.0 + b1 * a));
        const double step = f / df;
        a -= step;
        if (!(a > 0.0)) return std::numeric_limits<double>::quiet_NaN();
        if (std::abs(step) < 1e-16 * a) break;
    }
    return a;
}

}  // namespace

// --- Special functions ------------------------------------------------------------------------

Cx psi0(Cx z) {
    const Cx acc = shift_up(z, [](Cx w) { return -1.0 / w; });
    static const std::array<double, 7> c = {-1.0 / 12, 1.0 / 120, -1.0 / 252, 1.0 / 240, -1.0 / 132,
                                            691.0 / 32760, -1.0 / 12};
    const Cx w = 1.0 / (z * z);
    return acc + std::log(z) - 0.5 / z + w * series(c, w);
}

Cx psi1(Cx z) {
    const Cx acc = shift_up(z, [](Cx w) { return 1.0 / (w * w); });
    static const std::array<double, 7> b = {1.0 / 6, -1.0 / 30, 1.0 / 42, -1.0 / 30, 5.0 / 66,
                                            -691.0 / 2730, 7.0 / 6};
    const Cx w = 1.0 / (z * z);
    return acc + 1.0 / z + 0.5 * w + w / z * series(b, w);
}

Cx psi2(Cx z) {
    const Cx acc = shift_up(z, [](Cx w) { return -2.0 / (w * w * w); });
    static const std::array<double, 7> c = {-0.5, 1.0 / 6, -1.0 / 6, 3.0 / 10, -5.0 / 6,
                                            691.0 / 210, -35.0 / 2};
    const Cx w = 1.0 / (z * z);
    return acc - w - w / z + w * w * series(c, w);
}

Cx harmonic_s1(Cx n) { return kEulerGamma + psi0(n + 1.0); }
Cx harmonic_s2(Cx n) { return kZeta2 - psi1(n + 1.0); }
Cx harmonic_s3(Cx n) { return kZeta3 + 0.5 * psi2(n + 1.0); }

Cx mellin_li2_over_1px(Cx n) {
    auto li2_moment = [](Cx m) { return kZeta2 / m - harmonic_s1(m) / (m * m); };
    Cx sum(0.0);
    double sign = 1.0;
    Cx m = n;
    while (std::abs(m) < 30.0) {
        sum += sign * li2_moment(m);
        sign = -sign;
        m += 1.0;
    }
    // Euler transform of the smooth alternating tail: sum_j (-1)^j a_j = sum_n (-1)^n D^n a_0 / 2^(n+1)
    constexpr int kTerms = 32;
    std::array<Cx, kTerms> d;
    for (int j = 0; j < kTerms; ++j) d[static_cast<std::size_t>(j)] = li2_moment(m + static_cast<double>(j));
    Cx tail(0.0);
    double scale = 0.5;
    for (int order = 0; order < kTerms; ++order) {
        tail += (order % 2 == 0 ? scale : -scale) * d[0];
        scale *= 0.5;
        for (int j = 0; j + 1 < kTerms - order; ++j)
            d[static_cast<std::size_t>(j)] = d[static_cast<std::size_t>(j) + 1] - d[static_cast<std::size_t>(j)];
    }
    return sum + sign * tail;
}

AlternatingSums alternating_sums(Cx n, int eta) {
    const Cx half = eta > 0 ? 0.5 * n : 0.5 * (n - 1.0);
    AlternatingSums r;
    r.s2p = harmonic_s2(half);
    r.s3p = harmonic_s3(half);
    const Cx g = psi0(0.5 * (n + 1.0)) - psi0(0.5 * n);
    r.stilde = -0.625 * kZeta3 +
               static_cast<double>(eta) *
                   (harmonic_s1(n) / (n * n) - 0.5 * kZeta2 * g + mellin_li2_over_1px(n));
    return r;
}

// --- Splitting functions -----------------------------------------------------------------------

Splitting lo_splitting(Cx n, int nf) {
    const Cx s1 = harmonic_s1(n);
    const Cx n1 = n + 1.0, n2 = n + 2.0, nm = n - 1.0;
    const Cx poly = n * n + n + 2.0;
    Splitting p;
    p.ns = kCF * (3.0 + 2.0 / (n * n1) - 4.0 * s1);
    p.qq = p.ns;
    p.qg = 2.0 * nf * poly / (n * n1 * n2);
    p.gq = 2.0 * kCF * poly / (nm * n * n1);
    p.gg = kCA * (11.0 / 3.0 + 4.0 / (n * nm) + 4.0 / (n1 * n2) - 4.0 * s1) - 2.0 * nf / 3.0;
    return p;
}

double beta0(int nf) { return 11.0 - 2.0 * nf / 3.0; }
double beta1(int nf) { return 102.0 - 38.0 * nf / 3.0; }

int active_flavours(double mu2, const QcdSettings& s) {
    if (s.nf_fixed > 0) return s.nf_fixed;
    return 3 + (mu2 > s.mc2 ? 1 : 0) + (mu2 > s.mb2 ? 1 : 0) + (mu2 > s.mt2 ? 1 : 0);
}

double coupling_a(double mu2, const QcdSettings& s) {
    const std::vector<double> path = scale_path(s.q2_ref, mu2, s);
    double a = s.alphas_ref / (16.0 * std::atan(1.0));
    for (std::size_t j = 0; j + 1 < path.size(); ++j) {
        const int nf = active_flavours(std::sqrt(path[j] * path[j + 1]), s);
        a = run_segment(a, std::log(path[j + 1] / path[j]), nf, s);
    }
    return a;
}

double coupling_for_pdfs(double muf2, int nf, const QcdSettings& s) {
    const double k2 = s.mur_over_muf * s.mur_over_muf;
    if (s.nf_fixed > 0 || k2 == 1.0) return coupling_a(k2 * muf2, s);
    const auto t = thresholds(s);
    // the reference in coupling_a()'s flavour number at mu_R^2 = q2_ref (a heavy quark not
    // active at its own mass), then the PDFs' thresholds: mu_F = m_h, mu_R^2 = k^2 m_h^2, where
    // the NLO decoupling is a' = a (1 + (2/3) ln(k^2) a) (not continuous unless k = 1)
    int at = active_flavours(s.q2_ref, s);
    double mu2 = s.q2_ref;
    double a = s.alphas_ref / (16.0 * std::atan(1.0));
    const double c = s.order >= 2 ? 2.0 / 3.0 * std::log(k2) : 0.0;
    for (; at < nf; ++at) {
        const double edge = k2 * t[static_cast<std::size_t>(at - 3)];
        a = run_segment(a, std::log(edge / mu2), at, s);
        a *= 1.0 + c * a;
        mu2 = edge;
    }
    for (; at > nf; --at) {
        const double edge = k2 * t[static_cast<std::size_t>(at - 4)];
        a = run_segment(a, std::log(edge / mu2), at, s);
        a *= 1.0 - c * a;
        mu2 = edge;
    }
    return run_segment(a, std::log(k2 * muf2 / mu2), nf, s);
}

struct NodeEvolution::Kernel : SegmentKernel {};

NodeEvolution::NodeEvolution(Cx n, const QcdSettings& s) : settings_(s) {
    const int lo = s.nf_fixed > 0 ? s.nf_fixed : 3;
    const int hi = s.nf_fixed > 0 ? s.nf_fixed : 6;
    kernels_.resize(4);
    for (int nf = lo; nf <= hi; ++nf)
        static_cast<SegmentKernel&>(kernels_[static_cast<std::size_t>(nf - 3)]) = segment_kernel(n, nf, s);
}
NodeEvolution::~NodeEvolution() = default;
NodeEvolution::NodeEvolution(const NodeEvolution&) = default;
NodeEvolution::NodeEvolution(NodeEvolution&&) noexcept = default;
NodeEvolution& NodeEvolution::operator=(const NodeEvolution&) = default;
NodeEvolution& NodeEvolution::operator=(NodeEvolution&&) noexcept = default;

std::vector<PathSegment> evolution_path(double q2_from, double q2_to, const QcdSettings& s) {
    const std::vector<double> scales = scale_path(q2_from, q2_to, s);
    std::vector<PathSegment> path;
    for (std::size_t j = 0; j + 1 < scales.size(); ++j) {
        if (scales[j] == scales[j + 1]) continue;
        PathSegment seg;
        seg.nf = active_flavours(std::sqrt(scales[j] * scales[j + 1]), s);
        seg.a0 = coupling_for_pdfs(scales[j], seg.nf, s);
        seg.a1 = coupling_for_pdfs(scales[j + 1], seg.nf, s);
        path.push_back(seg);
    }
    return path;
}

void NodeEvolution::evolve(const std::vector<PathSegment>& path, PartonMoments* q, int count) const {
    for (const PathSegment& seg : path)
        evolve_segment(kernels_[static_cast<std::size_t>(seg.nf - 3)], seg.a0, seg.a1, settings_, q, count);
}

PartonMoments NodeEvolution::evolve(double q2_from, double q2_to, const PartonMoments& in) const {
    PartonMoments q = in;
    evolve(evolution_path(q2_from, q2_to, settings_), &q, 1);
    return q;
}

PartonMoments evolve_moments(Cx n, double q2_from, double q2_to, const PartonMoments& in,
                             const QcdSettings& s) {
    return NodeEvolution(n, s).evolve(q2_from, q2_to, in);
}

// --- Coefficient functions ------------------------------------------------------------------

Cx coefficient_f2_quark(Cx n) {
    // Mellin transform of C_q(z) = CF [2 (ln(1-z)/(1-z))_+ - 3/2 (1/(1-z))_+ - (1+z) ln(1-z)
    //   - (1+z^2) ln(z)/(1-z) + 3 + 2z - (9/2 + 2 zeta2) delta(1-z)]  (alpha_s / 2 pi units):
    // (ln(1-z)/(1-z))_+ -> [S1^2 + S2](N-1)/2, (1/(1-z))_+ -> -S1(N-1),
    // ln(1-z) z^j -> -S1(N+j)/(N+j), ln(z)/(1-z) z^j -> -psi'(N+j).
    const Cx nm = n - 1.0;
    const Cx s1m = harmonic_s1(nm);
    const Cx esw = s1m * s1m + harmonic_s2(nm) + 1.5 * s1m + harmonic_s1(n) / n +
                   harmonic_s1(n + 1.0) / (n + 1.0) + psi1(n) + psi1(n + 2.0) + 3.0 / n +
                   2.0 / (n + 1.0) - 4.5 - 2.0 * kZeta2;
    return 2.0 * kCF * esw;  // a = alpha_s / (4 pi) units
}

Cx coefficient_f2_gluon(Cx n) {
    // Mellin transform of C_g(z) = TR [((1-z)^2 + z^2) ln((1-z)/z) - 8 z^2 + 8 z - 1] per quark
    // or antiquark; x 2 for q + qbar and x 2 for alpha_s/(2 pi) -> a.
    const Cx n1 = n + 1.0, n2 = n + 2.0;
    const Cx esw = -harmonic_s1(n) / n + 2.0 * harmonic_s1(n1) / n1 - 2.0 * harmonic_s1(n2) / n2 +
                   1.0 / (n * n) - 2.0 / (n1 * n1) + 2.0 / (n2 * n2) - 1.0 / n + 8.0 / n1 - 8.0 / n2;
    return 4.0 * kTR * esw;
}

}  // namespace ef::qcd

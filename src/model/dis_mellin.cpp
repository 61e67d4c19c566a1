// SPDX-License-Identifier: MIT
#include "src/model/dis_mellin.hpp"

#include <array>
#include <cctype>
#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <sstream>
#include <type_traits>
#include <utility>

#include <ensemblefit/core/error.hpp>

#include "kernels/models/mellin_math.hpp"
#include "src/comm/table_share.hpp"

namespace ef {

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kEulerGamma = 0.57721566490153286061;
constexpr double kProtonMass = 0.93827208816;  // GeV (PDG 2022)
constexpr double kCF = 4.0 / 3.0;

std::string fmt(double v) {
    std::ostringstream s;
    s.precision(10);
    s << v;
    return s.str();
}

// --- Settings ------------------------------------------------------------------------------

double parse_double(const std::string& key, const std::string& text) {
    std::size_t used = 0;
    double v = 0.0;
    try {
        v = std::stod(text, &used);
    } catch (const std::exception&) {
        throw usage_error("model." + key + ": '" + text + "' is not a number");
    }
    while (used < text.size() && std::isspace(static_cast<unsigned char>(text[used]))) ++used;
    if (used != text.size() || !std::isfinite(v))
        throw usage_error("model." + key + ": '" + text + "' is not a finite number");
    return v;
}

void require(bool ok, const std::string& key, double v, const std::string& rule) {
    if (!ok) throw usage_error("model." + key + ": " + fmt(v) + " is out of range (" + rule + ")");
}

// --- Evolution -------------------------------------------------------------------------------

double beta0(int nf) { return 11.0 - 2.0 * nf / 3.0; }

/// nf active at scale mu2 (a scale strictly inside a segment).
int active_flavours(double mu2, const DisMellinSettings& s) {
    return 3 + (mu2 > s.mc * s.mc ? 1 : 0) + (mu2 > s.mb * s.mb ? 1 : 0);
}

/// a = alpha_s / (4 pi) at LO; NaN past a Landau pole.
double a_lo(double q2, const DisMellinSettings& s) {
    const double mz2 = s.mz * s.mz;
    const double mb2 = s.mb * s.mb;
    const double mc2 = s.mc * s.mc;
    auto run = [](double a0, double mu0, double mu, int nf) {
        const double den = 1.0 + beta0(nf) * a0 * std::log(mu / mu0);
        return den > 0.0 ? a0 / den : std::numeric_limits<double>::quiet_NaN();
    };
    const double az = s.alphas_mz / (4.0 * kPi);
    if (q2 >= mb2) return run(az, mz2, q2, 5);
    const double ab = run(az, mz2, mb2, 5);
    if (q2 >= mc2) return run(ab, mb2, q2, 4);
    const double ac = run(ab, mb2, mc2, 4);
    return run(ac, mc2, q2, 3);
}

/// One stretch of evolution at fixed nf: L = ln(a(end) / a(start)).
struct Segment {
    int nf;
    double log_a_ratio;
};

/// Splits Q0^2 -> q2 at the thresholds that lie strictly between (at most 3 segments).
int evolution_segments(double q2, const DisMellinSettings& s, Segment seg[3]) {
    const double q02 = s.q0_sq();
    if (q2 == q02) return 0;
    std::array<double, 4> scales{};
    std::size_t n = 0;
    scales[n++] = q02;
    const double lo = q2 < q02 ? q2 : q02;
    const double hi = q2 < q02 ? q02 : q2;
    const std::array<double, 2> thresholds = {s.mc * s.mc, s.mb * s.mb};
    if (q2 > q02) {
        for (double t : thresholds)
            if (t > lo && t < hi) scales[n++] = t;
    } else {
        for (auto it = thresholds.rbegin(); it != thresholds.rend(); ++it)
            if (*it > lo && *it < hi) scales[n++] = *it;
    }
    scales[n++] = q2;
    for (std::size_t j = 0; j + 1 < n; ++j) {
        const double mid = std::sqrt(scales[j] * scales[j + 1]);
        seg[j].nf = active_flavours(mid, s);
        seg[j].log_a_ratio = std::log(a_lo(scales[j + 1], s) / a_lo(scales[j], s));
    }
    return static_cast<int>(n) - 1;
}

/// Eigen-decomposition of the LO singlet matrix at one N and nf: P = lp ep + lm (1 - ep).
struct SingletKernel {
    Complex<double> lp, lm;
    Complex<double> ep[2][2];
};

/// Parameter-independent kernels at one contour node: P_qq and the singlet for nf = 3, 4, 5.
struct NodeKernel {
    Complex<double> pqq;
    SingletKernel singlet[3];
};

SingletKernel singlet_kernel(const DisSplitting& p) {
    using C = Complex<double>;
    const C diff = p.qq - p.gg;
    const C disc = sqrt(diff * diff + 4.0 * p.qg * p.gq);
    SingletKernel k;
    k.lp = 0.5 * (p.qq + p.gg + disc);
    k.lm = 0.5 * (p.qq + p.gg - disc);
    const C inv = C(1.0) / (k.lp - k.lm);
    k.ep[0][0] = (p.qq - k.lm) * inv;
    k.ep[0][1] = p.qg * inv;
    k.ep[1][0] = p.gq * inv;
    k.ep[1][1] = (p.gg - k.lm) * inv;
    return k;
}

NodeKernel node_kernel(const Complex<double>& n) {
    NodeKernel k;
    for (int nf = 3; nf <= 5; ++nf) {
        const DisSplitting p = dis_lo_splitting(n, nf);
        k.pqq = p.qq;
        k.singlet[nf - 3] = singlet_kernel(p);
    }
    return k;
}

using Operator = Complex<double>[kDisFlavours][dis_mellin::kNumBasis];

/// The basis at Q0^2 for a proton: u+ = u_v + S/(2+kappa), d+ = d_v + S/(2+kappa),
/// s+ = kappa S/(2+kappa), c+ = b+ = 0, g = g.
void initial_operator(const DisMellinSettings& s, Operator op) {
    using namespace dis_mellin;
    for (int f = 0; f < kDisFlavours; ++f)
        for (int b = 0; b < kNumBasis; ++b) op[f][b] = Complex<double>();
    const double share = 1.0 / (2.0 + s.strange_fraction);
    op[0][kBasisUv] = 1.0;
    op[0][kBasisSea] = share;
    op[1][kBasisDv] = 1.0;
    op[1][kBasisSea] = share;
    op[2][kBasisSea] = s.strange_fraction * share;
    op[5][kBasisGluon] = 1.0;
}

/**
 * Applies the segments to `op` in place. Within a segment each active plus-distribution is
 * split into singlet share and non-singlet remainder, q_f+ = Sigma / nf + D_f; D_f evolves with
 * P_qq, (Sigma, g) with the 2x2 matrix. A flavour that turns on enters with q_f+ = 0.
 */
void evolve(const NodeKernel& k, const Segment* seg, int nseg, Operator op) {
    using C = Complex<double>;
    for (int j = 0; j < nseg; ++j) {
        const int nf = seg[j].nf;
        const double t = -seg[j].log_a_ratio / beta0(nf);
        const SingletKernel& sk = k.singlet[nf - 3];
        const C ens = exp(k.pqq * t);
        const C ep = exp(sk.lp * t);
        const C em = exp(sk.lm * t);
        // E = ep * e+ + em * (1 - e+)
        C e[2][2];
        for (int r = 0; r < 2; ++r)
            for (int c = 0; c < 2; ++c) e[r][c] = (ep - em) * sk.ep[r][c] + (r == c ? em : C());
        const double inv_nf = 1.0 / nf;
        for (int b = 0; b < dis_mellin::kNumBasis; ++b) {
            C sigma;
            for (int f = 0; f < nf; ++f) sigma += op[f][b];
            const C g = op[5][b];
            const C sigma_new = e[0][0] * sigma + e[0][1] * g;
            const C g_new = e[1][0] * sigma + e[1][1] * g;
            for (int f = 0; f < nf; ++f)
                op[f][b] = ens * (op[f][b] - sigma * inv_nf) + sigma_new * inv_nf;
            op[5][b] = g_new;
        }
    }
}

constexpr std::array<double, 5> kCharge2 = {4.0 / 9.0, 1.0 / 9.0, 1.0 / 9.0, 4.0 / 9.0, 1.0 / 9.0};

/// One isospin pair of basis columns for a target: swapped for the neutron, averaged for the
/// deuteron.
void isospin_pair(int target, Complex<double>& u, Complex<double>& d) {
    if (target == 2) {
        const Complex<double> t = u;
        u = d;
        d = t;
    } else if (target == 3) {
        const Complex<double> mean = 0.5 * (u + d);
        u = mean;
        d = mean;
    }
}

/// Proton coefficients -> target's: the neutron swaps the roles of the u_v and d_v inputs (u <->
/// d; the symmetric light sea is u/d symmetric, a split sea swaps ubar and dbar too), the
/// deuteron is (p + n) / 2. `basis` columns (4, or 6 with the split sea).
void apply_target(int target, Complex<double>* coef, int basis = dis_mellin::kNumBasis) {
    using namespace dis_mellin;
    isospin_pair(target, coef[kBasisUv], coef[kBasisDv]);
    if (basis > kNumBasis) isospin_pair(target, coef[kBasisSea], coef[kBasisDbar]);
}

void f2_from_operator(const Operator op, int target, Complex<double> coef[dis_mellin::kNumBasis]) {
    using namespace dis_mellin;
    for (int b = 0; b < kNumBasis; ++b) {
        Complex<double> sum;
        for (int f = 0; f < 5; ++f) sum += kCharge2[static_cast<std::size_t>(f)] * op[f][b];
        coef[b] = sum;
    }
    apply_target(target, coef);
}

// --- FLOP counting ----------------------------------------------------------------------------

/// Operations counted on the current thread by Counted arithmetic.
thread_local double g_flops = 0.0;

/**
 * A double that counts the arithmetic done on it, so the FLOP counts come from running the
 * single-source model code itself rather than from a hand-maintained formula.
 */
struct Counted {
    double v;
    Counted(double x = 0.0) : v(x) {}  // NOLINT: implicit, mirrors double
    Counted& operator+=(const Counted& o) {
        g_flops += 1;
        v += o.v;
        return *this;
    }
    Counted& operator-=(const Counted& o) {
        g_flops += 1;
        v -= o.v;
        return *this;
    }
    Counted& operator*=(const Counted& o) {
        g_flops += 1;
        v *= o.v;
        return *this;
    }
    Counted& operator/=(const Counted& o) {
        g_flops += 1;
        v /= o.v;
        return *this;
    }
};
Counted operator+(Counted a, const Counted& b) { return a += b; }
Counted operator-(Counted a, const Counted& b) { return a -= b; }
Counted operator*(Counted a, const Counted& b) { return a *= b; }
Counted operator/(Counted a, const Counted& b) { return a /= b; }
Counted operator-(const Counted& a) { return Counted(-a.v); }
Counted transcendental(double v) {
    g_flops += DisMellinTheory::kTranscendentalFlops;
    return Counted(v);
}
Counted exp(const Counted& a) { return transcendental(std::exp(a.v)); }
Counted log(const Counted& a) { return transcendental(std::log(a.v)); }
Counted sin(const Counted& a) { return transcendental(std::sin(a.v)); }
Counted cos(const Counted& a) { return transcendental(std::cos(a.v)); }
Counted atan2(const Counted& y, const Counted& x) { return transcendental(std::atan2(y.v, x.v)); }

// Dual<Counted, K> mixed with double, counted like the Dual<double, K> overloads they stand for
// (dual.hpp mixes Dual<T, K> with T only, and double -> Counted -> Dual is two conversions).
template <int K>
using CDual = Dual<Counted, K>;
template <int K>
CDual<K> operator+(CDual<K> a, double b) {
    return a + Counted(b);
}
template <int K>
CDual<K> operator+(double b, CDual<K> a) {
    return a + Counted(b);
}
template <int K>
CDual<K> operator-(CDual<K> a, double b) {
    return a - Counted(b);
}
template <int K>
CDual<K> operator-(double b, const CDual<K>& a) {
    return Counted(b) - a;
}
template <int K>
CDual<K> operator*(CDual<K> a, double b) {
    return a * Counted(b);
}
template <int K>
CDual<K> operator*(double b, CDual<K> a) {
    return a * Counted(b);
}
template <int K>
CDual<K> operator/(CDual<K> a, double b) {
    return a / Counted(b);
}
template <int K>
CDual<K> operator/(double b, const CDual<K>& a) {
    return Counted(b) / a;
}
template <int K>
CDual<K>& operator+=(CDual<K>& a, double b) {
    return a += CDual<K>(Counted(b));
}
template <int K>
CDual<K>& operator-=(CDual<K>& a, double b) {
    return a -= CDual<K>(Counted(b));
}

}  // namespace

// value_of() on counted scalars returns the plain double, for the branches in the model code.
template <>
struct ScalarTraits<Counted> {
    using Real = double;
    static double value(const Counted& x) { return x.v; }
};
template <int K>
struct ScalarTraits<Dual<Counted, K>> {
    using Real = double;
    static double value(const Dual<Counted, K>& x) { return x.v.v; }
};

namespace {

/// FLOPs of prepare() and of value() for one point on scalar type T, at the default truth
/// with the first K default-free parameters seeded when T is a dual.
template <class T>
std::array<double, 2> count_flops(const DisMellinModel& m, const std::vector<DisMellinParamInfo>& table) {
    std::vector<T> p(table.size());
    int slot = 0;
    for (std::size_t j = 0; j < table.size(); ++j) {
        if constexpr (std::is_same_v<T, Counted>) {
            p[j] = Counted(table[j].start);
        } else {
            p[j] = T::variable(Counted(table[j].start), table[j].fixed ? -1 : slot);
            if (!table[j].fixed) ++slot;
        }
    }
    std::vector<T> ws(static_cast<std::size_t>(m.workspace_size()));
    const double x[3] = {0.1, 10.0, 1.0};
    g_flops = 0.0;
    m.prepare(p.data(), ws.data());
    const double prep = g_flops;
    g_flops = 0.0;
    const T v = m.value(p.data(), ws.data(), x, 0);
    (void)v;
    return {prep, g_flops};
}

std::array<double, 2> count_flops_slots(const DisMellinModel& m, int slots, const DisMellinSettings& s) {
    const std::vector<DisMellinParamInfo> t = dis_mellin_param_table(s);
    switch (slots) {
        case 0:
            return count_flops<Counted>(m, t);
        case 1:
            return count_flops<Dual<Counted, 1>>(m, t);
        case 2:
            return count_flops<Dual<Counted, 2>>(m, t);
        case 4:
            return count_flops<Dual<Counted, 4>>(m, t);
        case 8:
            return count_flops<Dual<Counted, 8>>(m, t);
        case 16:
            return count_flops<Dual<Counted, 16>>(m, t);
        case 32:
            return count_flops<Dual<Counted, 32>>(m, t);
        default:
            throw std::invalid_argument(
                "dis-mellin FLOP count: dual_slots must be 0, 1, 2, 4, "
                "8, 16 or 32");
    }
}

/// Uniform in [0, 1) from the top 53 bits: the same numbers on every standard library (unlike
/// std::uniform_real_distribution, whose algorithm is unspecified).
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

}  // namespace

// --- Settings ---------------------------------------------------------------------------------

int DisMellinSettings::num_nodes() const {
    return static_cast<int>(mellin_breakpoints(contour_breakpoints).size() - 1) * contour_nodes;
}

MellinContour DisMellinSettings::contour() const {
    return make_mellin_contour(contour_c, contour_phi_deg * kPi / 180.0,
                               mellin_breakpoints(contour_breakpoints), contour_nodes);
}

std::string dis_mellin_settings_help() {
    const DisMellinSettings d;
    const std::pair<const char*, std::string> keys[] = {
        {"q0", "input scale Q0 in GeV; the PDFs are parameterised at Q0^2 (default: " + fmt(d.q0) + ")"},
        {"alphas_mz", "alpha_s(M_Z), LO running with 3/4/5 flavours (default: " + fmt(d.alphas_mz) + ")"},
        {"mc", "charm threshold in GeV (default: " + fmt(d.mc) + ")"},
        {"mb", "bottom threshold in GeV, > mc (default: " + fmt(d.mb) + ")"},
        {"mz", "Z mass in GeV, the scale of alphas_mz, > mb (default: " + fmt(d.mz) + ")"},
        {"strange_fraction", "kappa: s = sbar = kappa ubar at Q0^2, 0..4 (default: " + fmt(d.strange_fraction) + ")"},
        {"contour_c", "abscissa c of the inverse-Mellin contour, 1 < c <= 10 (default: " + fmt(d.contour_c) + ")"},
        {"contour_phi_deg", "contour angle in degrees, 90 < phi < 180 (default: " + fmt(d.contour_phi_deg) + ")"},
        {"contour_nodes", "Gauss-Legendre points per contour segment, 1..64 (default: " +
                              std::to_string(d.contour_nodes) + ")"},
        {"contour", "breakpoints: standard (17 segments) | extended (26) | precise (35; with contour_nodes "
                    "= 24 for 1e-8 as x -> 1) (default: standard)"},
        {"order", "LO | NLO: DGLAP evolution, coupling and F2 coefficient functions (default: LO)"},
        {"alphas_ref", "alpha_s at q_ref; with q_ref replaces alphas_mz (default: unset)"},
        {"q_ref", "reference scale of alphas_ref in GeV (default: unset)"},
        {"mt", "top threshold in GeV, > mb; 0: no top (default: 0)"},
        {"nf", "0: zero-mass variable flavour number; 3..6: fixed flavour number (default: 0)"},
        {"mur_over_muf", "renormalisation / factorisation scale ratio, 1/8..8 (default: 1)"},
        {"solution", "NLO solution: iterated (exact) | truncated (default: iterated)"},
        {"alphas_running", "NLO coupling: exact (truncated beta function) | expanded (default: exact)"},
        {"sea", "symmetric (one light sea S, strange_fraction) | split (ubar, dbar, s + sbar each with "
                "its own shape: parameters ubar_*, dbar_*, s_*) (default: symmetric)"},
        {"pdf_norm", "sum_rules (valence and gluon normalised by the sum rules) | coefficients (every _N "
                     "the coefficient A of A x^a (1-x)^b (...); adds uv_N, dv_N, g_N) (default: sum_rules)"},
    };
    std::string out;
    for (const auto& [key, help] : keys)
        out += "    " + std::string(key) + std::string(18 - std::string(key).size(), ' ') + help + "\n";
    return out;
}

namespace {

/// Keys whose value is a word; returns false when `key` is not one of them.
bool parse_word_key(const std::string& key, const std::string& text, DisMellinSettings& s) {
    auto pick = [&](std::initializer_list<const char*> allowed) {
        int i = 0;
        std::string list;
        for (const char* a : allowed) {
            if (text == a) return i;
            list += (list.empty() ? "" : ", ") + std::string(a);
            ++i;
        }
        throw usage_error("model." + key + ": '" + text + "' is not allowed (" + list + ")");
    };
    if (key == "contour") {
        const MellinBreakpoints kinds[] = {MellinBreakpoints::standard, MellinBreakpoints::extended,
                                           MellinBreakpoints::precise};
        s.contour_breakpoints = kinds[pick({"standard", "extended", "precise"})];
    } else if (key == "order") {
        s.order = 1 + pick({"LO", "NLO"});
    } else if (key == "solution") {
        s.solution = pick({"iterated", "truncated"}) == 0 ? qcd::EvolutionSolution::iterated
                                                          : qcd::EvolutionSolution::truncated;
    } else if (key == "alphas_running") {
        s.coupling = pick({"exact", "expanded"}) == 0 ? qcd::CouplingSolution::exact
                                                      : qcd::CouplingSolution::expanded;
    } else if (key == "sea") {
        s.sea_split = pick({"symmetric", "split"}) == 1;
    } else if (key == "pdf_norm") {
        s.coefficients = pick({"sum_rules", "coefficients"}) == 1;
    } else {
        return false;
    }
    return true;
}

/// Keys whose value is a number; returns false when `key` is not one of them.
bool parse_number_key(const std::string& key, double v, DisMellinSettings& s) {
    const std::pair<const char*, double*> keys[] = {
        {"q0", &s.q0},          {"alphas_mz", &s.alphas_mz},     {"mc", &s.mc},
        {"mb", &s.mb},          {"mz", &s.mz},                   {"mt", &s.mt},
        {"alphas_ref", &s.alphas_ref}, {"q_ref", &s.q_ref},      {"mur_over_muf", &s.mur_over_muf},
        {"strange_fraction", &s.strange_fraction},               {"contour_c", &s.contour_c},
        {"contour_phi_deg", &s.contour_phi_deg}};
    for (const auto& [name, field] : keys)
        if (key == name) {
            *field = v;
            return true;
        }
    if (key == "contour_nodes") {
        require(v == std::floor(v) && v >= 1 && v <= 64, key, v, "an integer in 1..64");
        s.contour_nodes = static_cast<int>(v);
    } else if (key == "nf") {
        require(v == 0 || v == 3 || v == 4 || v == 5 || v == 6, key, v,
                "0 (variable flavour number) or a fixed 3..6");
        s.nf = static_cast<int>(v);
    } else {
        return false;
    }
    return true;
}

/// Range checks of the QCD keys that the LO defaults never exercise.
void validate_qcd_settings(const DisMellinSettings& s) {
    if (s.alphas_ref != 0.0 || s.q_ref != 0.0) {
        require(s.alphas_ref > 0.0 && s.alphas_ref < 2.0, "alphas_ref", s.alphas_ref,
                "0 < alphas_ref < 2 (give it with q_ref)");
        require(s.q_ref > 0.0, "q_ref", s.q_ref, "> 0 GeV (give it with alphas_ref)");
    }
    require(s.mt == 0.0 || s.mt > s.mb, "mt", s.mt, "> mb = " + fmt(s.mb) + ", or 0 for no top");
    require(s.mur_over_muf >= 0.125 && s.mur_over_muf <= 8.0, "mur_over_muf", s.mur_over_muf,
            "1/8 .. 8");
    const qcd::QcdSettings qs = s.qcd();
    const double a0 = qcd::coupling_for_pdfs(s.q0_sq(), qcd::active_flavours(s.q0_sq(), qs), qs);
    if (!(a0 > 0.0 && std::isfinite(a0)))
        throw usage_error("model.q0: " + fmt(s.q0) + " GeV is below the Landau pole of the " +
                          (s.order == 2 ? "NLO" : "LO") + " coupling");
}

}  // namespace

bool DisMellinSettings::uses_qcd() const {
    return order != 1 || alphas_ref != 0.0 || q_ref != 0.0 || mt != 0.0 || nf != 0 ||
           mur_over_muf != 1.0 || sea_split;
}

qcd::QcdSettings DisMellinSettings::qcd() const {
    qcd::QcdSettings q;
    q.order = order;
    q.alphas_ref = alphas_ref != 0.0 ? alphas_ref : alphas_mz;
    q.q2_ref = q_ref != 0.0 ? q_ref * q_ref : mz * mz;
    q.mc2 = mc * mc;
    q.mb2 = mb * mb;
    q.mt2 = mt != 0.0 ? mt * mt : 1e30;
    q.nf_fixed = nf;
    q.mur_over_muf = mur_over_muf;
    q.coupling = coupling;
    q.solution = solution;
    return q;
}

DisMellinSettings parse_dis_mellin_settings(const std::map<std::string, std::string>& options) {
    DisMellinSettings s;
    for (const auto& [key, text] : options) {
        if (parse_word_key(key, text, s)) continue;
        if (parse_number_key(key, parse_double(key, text), s)) continue;
        throw usage_error("model." + key +
                          ": unknown option of dis-mellin (allowed: order, q0, alphas_mz, "
                          "alphas_ref, q_ref, mc, mb, mt, mz, nf, mur_over_muf, solution, "
                          "alphas_running, strange_fraction, sea, pdf_norm, contour_c, "
                          "contour_phi_deg, contour_nodes, contour)");
    }
    require(s.q0 > 0.0, "q0", s.q0, "> 0 GeV");
    require(s.alphas_mz > 0.0 && s.alphas_mz < 0.5, "alphas_mz", s.alphas_mz,
            "0 < alphas_mz < 0.5");
    require(s.mc > 0.0, "mc", s.mc, "> 0 GeV");
    require(s.mb > s.mc, "mb", s.mb, "> mc = " + fmt(s.mc));
    require(s.mz > s.mb, "mz", s.mz, "> mb = " + fmt(s.mb));
    require(s.strange_fraction >= 0.0 && s.strange_fraction <= 4.0, "strange_fraction",
            s.strange_fraction, "0..4");
    require(s.contour_c > 1.0 && s.contour_c <= 10.0, "contour_c", s.contour_c,
            "1 < c <= 10: right of the N = 1 pole of the gluon splitting functions");
    require(s.contour_phi_deg > 90.0 && s.contour_phi_deg < 180.0, "contour_phi_deg",
            s.contour_phi_deg, "90 < phi < 180 degrees");
    if (s.uses_qcd()) {
        validate_qcd_settings(s);
        return s;
    }
    const double a0 = a_lo(s.q0_sq(), s);
    if (!(a0 > 0.0))
        throw usage_error("model.q0: " + fmt(s.q0) +
                          " GeV is below the LO Landau pole for "
                          "alphas_mz = " +
                          fmt(s.alphas_mz));
    return s;
}

// --- Parameters -------------------------------------------------------------------------------

const std::vector<DisMellinParamInfo>& dis_mellin_param_table() {
    // Bounds follow qcdlib's (a, b, c, d) ranges [-1.89, 10], [0, 20], [-0.5, 10], [-0.5, 10];
    // valence a stays above -1 (number sum rule) and sea_N in [0, 1].
    static const std::vector<DisMellinParamInfo> table = {
        {"uv_a", "small-x exponent of u_v", -0.45, -0.95, 10.0, false},
        {"uv_b", "large-x exponent of u_v", 3.2, 0.0, 20.0, false},
        {"uv_c", "sqrt(x) coefficient of u_v", 0.5, -0.5, 10.0, false},
        {"uv_d", "x coefficient of u_v", 3.0, -0.5, 10.0, false},
        {"dv_a", "small-x exponent of d_v", -0.4, -0.95, 10.0, false},
        {"dv_b", "large-x exponent of d_v", 4.5, 0.0, 20.0, false},
        {"dv_c", "sqrt(x) coefficient of d_v", 0.5, -0.5, 10.0, false},
        {"dv_d", "x coefficient of d_v", 2.0, -0.5, 10.0, false},
        {"sea_N", "momentum fraction of the light sea 2(ubar+dbar+sbar)", 0.16, 0.0, 1.0, false},
        {"sea_a", "small-x exponent of the sea", -1.15, -1.89, 10.0, false},
        {"sea_b", "large-x exponent of the sea", 8.0, 0.0, 20.0, false},
        {"sea_c", "sqrt(x) coefficient of the sea", 0.0, -0.5, 10.0, true},
        {"sea_d", "x coefficient of the sea", 0.0, -0.5, 10.0, true},
        {"g_a", "small-x exponent of the gluon", -0.9, -1.89, 10.0, false},
        {"g_b", "large-x exponent of the gluon", 5.0, 0.0, 20.0, false},
        {"g_c", "sqrt(x) coefficient of the gluon", 0.0, -0.5, 10.0, true},
        {"g_d", "x coefficient of the gluon", 0.0, -0.5, 10.0, true},
    };
    return table;
}

namespace {

/// A copy of the symmetric sea's five entries for one flavour of the split sea.
void add_sea_block(std::vector<DisMellinParamInfo>& out, const std::string& flavour, const std::string& what,
                   double n) {
    const auto& t = dis_mellin_param_table();
    for (int j = 0; j < 5; ++j) {
        DisMellinParamInfo p = t[static_cast<std::size_t>(dis_mellin::kSeaN + j)];
        p.name = flavour + p.name.substr(3);
        const std::size_t at = p.meaning.find("the sea");
        p.meaning = j == 0 ? "momentum fraction of " + what : p.meaning.substr(0, at) + what;
        if (j == 0) p.start = n;
        out.push_back(p);
    }
}

}  // namespace

std::vector<DisMellinParamInfo> dis_mellin_param_table(const DisMellinSettings& settings) {
    using namespace dis_mellin;
    std::vector<DisMellinParamInfo> out = dis_mellin_param_table();
    // The symmetric default's <x>_S = 0.16 with kappa = 0.5: ubar = dbar = S / 5, s + sbar = S / 5,
    // so <x>_ubar = <x>_dbar = <x>_{s+sbar} = 0.032 with the same shape: the same PDFs.
    if (settings.sea_split) {
        std::vector<DisMellinParamInfo> split(out.begin(), out.begin() + kSeaN);
        add_sea_block(split, "ubar", "ubar", 0.032);
        split.insert(split.end(), out.begin() + kGluonA, out.end());
        add_sea_block(split, "dbar", "dbar", 0.032);
        add_sea_block(split, "s", "s + sbar", 0.032);
        out = split;
    }
    if (settings.coefficients) {
        // A = scale / Gamma(b + 1) at the default shapes: the coefficients the sum rules give there.
        const std::vector<double> p = dis_mellin_default_truth();
        const Normalisation<double> nrm = normalisation(p.data());
        auto a_of = [&](int first, int b) { return nrm.scale[b] / gamma_of_b1(p[static_cast<std::size_t>(first + 1)]); };
        const double sea = a_of(kSeaA, kBasisSea);
        const double share = 1.0 / (2.0 * (2.0 + settings.strange_fraction));
        for (auto& e : out) {
            if (e.name.size() < 2 || e.name.compare(e.name.size() - 2, 2, "_N") != 0) continue;
            e.meaning = "coefficient A of " + e.meaning.substr(e.meaning.find(" of ") + 4);
            e.upper = 100.0;
            e.start = e.name == "sea_N" ? sea : e.name == "s_N" ? 2.0 * settings.strange_fraction * share * sea : share * sea;
        }
        out.push_back({"uv_N", "coefficient A of u_v", a_of(kUvA, kBasisUv), 0.0, 100.0, false});
        out.push_back({"dv_N", "coefficient A of d_v", a_of(kDvA, kBasisDv), 0.0, 100.0, false});
        out.push_back({"g_N", "coefficient A of the gluon", a_of(kGluonA, kBasisGluon), 0.0, 100.0, false});
    }
    return out;
}

std::vector<std::string> dis_mellin_param_names() {
    std::vector<std::string> names;
    for (const auto& p : dis_mellin_param_table()) names.push_back(p.name);
    return names;
}

std::vector<std::string> dis_mellin_param_names(const DisMellinSettings& settings) {
    std::vector<std::string> names;
    for (const auto& p : dis_mellin_param_table(settings)) names.push_back(p.name);
    return names;
}

std::vector<double> dis_mellin_default_truth() {
    std::vector<double> v;
    for (const auto& p : dis_mellin_param_table()) v.push_back(p.start);
    return v;
}

std::vector<double> dis_mellin_default_truth(const DisMellinSettings& settings) {
    std::vector<double> v;
    for (const auto& p : dis_mellin_param_table(settings)) v.push_back(p.start);
    return v;
}

void check_dis_mellin_bounds(const std::vector<std::string>& names,
                             const std::vector<double>& lower,
                             const std::vector<double>& start,
                             const DisMellinSettings& settings,
                             const std::vector<bool>& fixed) {
    if (lower.size() != names.size() || start.size() != names.size() ||
        (!fixed.empty() && fixed.size() != names.size()))
        throw std::invalid_argument("check_dis_mellin_bounds: list sizes differ");
    for (std::size_t j = 0; j < names.size(); ++j) {
        const std::string& n = names[j];
        double limit = 0.0;
        std::string why;
        const bool exponent_a = n == "sea_a" || n == "g_a" || n == "uv_a" || n == "dv_a" || n == "ubar_a" ||
                                n == "dbar_a" || n == "s_a";
        const bool exponent_b = n == "uv_b" || n == "dv_b" || n == "sea_b" || n == "g_b" || n == "ubar_b" ||
                                n == "dbar_b" || n == "s_b";
        if (exponent_a) {
            limit = -settings.contour_c;
            why = "the Mellin contour (model.contour_c = " + fmt(settings.contour_c) +
                  ") must pass right of the pole at N = -a";
            if ((n == "uv_a" || n == "dv_a") && limit < -1.0) {
                limit = -1.0;
                why = "the valence number sum rule needs an integrable x^a";
            }
        } else if (exponent_b) {
            limit = -1.0;
            why = "the Beta function B(N + a, b + 1) needs b > -1";
        } else {
            continue;
        }
        const bool is_fixed = !fixed.empty() && fixed[j];
        const char* field = is_fixed ? "start" : "lower";
        const double v = is_fixed ? start[j] : lower[j];
        if (!(v > limit))
            throw usage_error("param." + n + "." + field + ": must be > " + fmt(limit) + " (" +
                              why + "); got " + fmt(v));
        if (!is_fixed && !(start[j] > limit))
            throw usage_error("param." + n + ".start: must be > " + fmt(limit) + " (" + why +
                              "); got " + fmt(start[j]));
    }
}

// --- Evolution (public wrappers) ---------------------------------------------------------------

double dis_alpha_s(double q2, const DisMellinSettings& settings) {
    return 4.0 * kPi * a_lo(q2, settings);
}

DisSplitting dis_lo_splitting(const Complex<double>& n, int nf) {
    using C = Complex<double>;
    const C s1 = digamma(n + 1.0) + kEulerGamma;
    const C n1 = n + 1.0;
    const C n2 = n + 2.0;
    const C nm = n - 1.0;
    const C poly = n * n + n + 2.0;
    DisSplitting p;
    p.qq = kCF * (3.0 + 2.0 / (n * n1) - 4.0 * s1);
    p.qg = 2.0 * nf * poly / (n * n1 * n2);
    p.gq = (8.0 / 3.0) * poly / (nm * n * n1);
    p.gg = 3.0 * (11.0 / 3.0 + 4.0 / (n * nm) + 4.0 / (n1 * n2) - 4.0 * s1) - 2.0 * nf / 3.0;
    return p;
}

void dis_evolution_operator(const Complex<double>& n,
                            double q2,
                            const DisMellinSettings& settings,
                            Complex<double> op[kDisFlavours][dis_mellin::kNumBasis]) {
    Segment seg[3];
    const int nseg = evolution_segments(q2, settings, seg);
    initial_operator(settings, op);
    if (q2 < settings.q0_sq() && nseg > 1)
        throw data_error("Q2 = " + fmt(q2) + " is below Q0^2 = " + fmt(settings.q0_sq()) +
                         " across a heavy-quark threshold (backward evolution across thresholds "
                         "is not supported)");
    evolve(node_kernel(n), seg, nseg, op);
}

Complex<double> dis_nonsinglet_evolution(const Complex<double>& n,
                                         double q2,
                                         const DisMellinSettings& settings) {
    Segment seg[3];
    const int nseg = evolution_segments(q2, settings, seg);
    const Complex<double> pqq = dis_lo_splitting(n, 3).qq;
    Complex<double> e(1.0);
    for (int j = 0; j < nseg; ++j) e *= exp(pqq * (-seg[j].log_a_ratio / beta0(seg[j].nf)));
    return e;
}

void dis_f2_coefficients(const Complex<double>& n,
                         double q2,
                         int target,
                         const DisMellinSettings& settings,
                         Complex<double> coef[dis_mellin::kNumBasis]) {
    Operator op;
    dis_evolution_operator(n, q2, settings, op);
    f2_from_operator(op, target, coef);
}

// --- Theory tables ------------------------------------------------------------------------------

namespace {

/// "data row N: " for point i (rows numbered from 1, as every error message numbers them).
std::string row_of(int i) { return "data row " + std::to_string(i + 1) + ": "; }

/// The checks every point needs on either path (x, Q^2, target), and Q^2 >= Q0^2: the PDFs are
/// not evolved backwards from their input scale (`pdf` refuses the same Q^2).
void check_point(int i, double x, double q2, double target, double q02) {
    const std::string where = row_of(i);
    if (!(x > 0.0 && x < 1.0)) throw data_error(where + "x = " + fmt(x) + " must lie in (0, 1)");
    if (!(q2 > 0.0 && std::isfinite(q2)))
        throw data_error(where + "Q2 = " + fmt(q2) + " must be positive");
    if (!(target == 1.0 || target == 2.0 || target == 3.0))
        throw data_error(where + "target = " + fmt(target) +
                         " must be 1 (proton), 2 (neutron) or 3 (deuteron)");
    if (!(q2 >= q02 * (1.0 - 1e-12)))
        throw data_error(where + "Q2 = " + fmt(q2) + " GeV^2 is below Q0^2 = " + fmt(q02) +
                         " GeV^2, the PDFs' input scale (cut the point or lower [model] q0)");
}

/// The qcd:: path's check: the coupling defined at mu_R.
void check_qcd_point(int i, double q2, const DisMellinSettings& s) {
    const qcd::QcdSettings qs = s.qcd();
    const double a = qcd::coupling_for_pdfs(q2, qcd::active_flavours(q2, qs), qs);
    if (!(a > 0.0 && std::isfinite(a)))
        throw data_error(row_of(i) + "Q2 = " + fmt(q2) + " is below the Landau pole");
}

}  // namespace

DisMellinTheory::DisMellinTheory(const DisMellinSettings& settings, const std::vector<double>& rows,
                                 TableShare* share)
    : settings_(settings) {
    if (rows.size() % 3 != 0)
        throw data_error("dis-mellin data: expected rows of (x, Q2, target), got " +
                         std::to_string(rows.size()) + " values");
    points_ = static_cast<int>(rows.size() / 3);
    for (int i = 0; i < points_; ++i) {
        const std::size_t r = static_cast<std::size_t>(i) * 3;
        check_point(i, rows[r], rows[r + 1], rows[r + 2], settings_.q0_sq());
        if (settings_.uses_qcd()) check_qcd_point(i, rows[r + 1], settings_);
    }
    const MellinContour contour = settings_.contour();
    num_nodes_ = static_cast<int>(contour.nodes.size());
    nodes_.resize(2 * contour.nodes.size());
    for (std::size_t k = 0; k < contour.nodes.size(); ++k) {
        nodes_[2 * k] = contour.nodes[k].re;
        nodes_[2 * k + 1] = contour.nodes[k].im;
    }
    if (settings_.uses_qcd())
        build_qcd_table(rows, contour, share);
    else
        build_lo_table(rows, contour, share);
    if (share) {
        share->publish();
        table_note_ = share->describe();
    }
}

std::pair<int, int> DisMellinTheory::allocate_table(std::size_t count, TableShare* share) {
    if (share) {
        table_ = share->allocate(count);
        return share->slice(points_);
    }
    auto own = std::make_shared<std::vector<double>>(count, 0.0);
    table_ = std::shared_ptr<double>(own, own->data());
    return {0, points_};
}

/// The original LO tables (order LO with the default QCD keys), kept bit for bit.
void DisMellinTheory::build_lo_table(const std::vector<double>& rows, const MellinContour& contour,
                                     TableShare* share) {
    using namespace dis_mellin;
    std::vector<std::array<Segment, 3>> segs(static_cast<std::size_t>(points_));
    std::vector<int> nsegs(static_cast<std::size_t>(points_));
    for (int i = 0; i < points_; ++i) {
        const std::size_t iu = static_cast<std::size_t>(i);
        const double q2 = rows[3 * iu + 1];
        if (!(a_lo(q2, settings_) > 0.0))
            throw data_error(row_of(i) + "Q2 = " + fmt(q2) + " is below the LO Landau pole");
        nsegs[iu] = evolution_segments(q2, settings_, segs[iu].data());
    }
    const std::size_t nn = contour.nodes.size();
    std::vector<NodeKernel> kernels(nn);
    for (std::size_t k = 0; k < nn; ++k) kernels[k] = node_kernel(contour.nodes[k]);
    Operator init;
    initial_operator(settings_, init);

    const std::size_t row = 2 * static_cast<std::size_t>(kNumBasis) * nn;
    const std::pair<int, int> mine = allocate_table(static_cast<std::size_t>(points_) * row, share);
    const int first = mine.first, last = mine.second;
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (int i = first; i < last; ++i) {
        const std::size_t iu = static_cast<std::size_t>(i);
        const double x = rows[3 * iu];
        const double log_x = std::log(x);
        const int target = static_cast<int>(rows[3 * iu + 2]);
        double* out = table_.get() + iu * row;
        for (std::size_t k = 0; k < nn; ++k) {
            Operator op;
            for (int f = 0; f < kDisFlavours; ++f)
                for (int b = 0; b < kNumBasis; ++b) op[f][b] = init[f][b];
            evolve(kernels[k], segs[iu].data(), nsegs[iu], op);
            Complex<double> coef[kNumBasis];
            f2_from_operator(op, target, coef);
            // (x / pi) w_k e^{i phi} x^{-N_k}
            const Complex<double> pref =
                (x / kPi * contour.weights[k]) * contour.phase * exp(-contour.nodes[k] * log_x);
            for (int b = 0; b < kNumBasis; ++b) {
                const Complex<double> c = pref * coef[b];
                out[2 * (k * kNumBasis + static_cast<std::size_t>(b))] = c.re;
                out[2 * (k * kNumBasis + static_cast<std::size_t>(b)) + 1] = c.im;
            }
        }
    }
}


std::array<qcd::PartonMoments, dis_mellin::kMaxBasis> dis_qcd_basis(const DisMellinSettings& s) {
    using namespace dis_mellin;
    std::array<qcd::PartonMoments, kMaxBasis> q{};
    q[kBasisUv].qp[0] = q[kBasisUv].qm[0] = 1.0;
    q[kBasisDv].qp[1] = q[kBasisDv].qm[1] = 1.0;
    q[kBasisGluon].g = 1.0;
    if (s.sea_split) {  // q+ = q + qbar: a unit of ubar is 2 in u+ (u_sea = ubar), zero in u-
        q[kBasisSea].qp[0] = 2.0;
        q[kBasisDbar].qp[1] = 2.0;
        q[kBasisStrange].qp[2] = 1.0;
        return q;
    }
    const double share = 1.0 / (2.0 + s.strange_fraction);
    q[kBasisSea].qp[0] = q[kBasisSea].qp[1] = share;
    q[kBasisSea].qp[2] = s.strange_fraction * share;
    return q;
}

namespace {

/// Per contour node: the evolution kernels and, at NLO, the F2 coefficient functions.
struct QcdNode {
    qcd::NodeEvolution evolution;
    qcd::Cx cq, cg;
};

/// F2 coefficients (proton) from the evolved basis: sum_f e_f^2 [(1 + a cq) q+_f + a cg g], the
/// gluon over the nf flavours active at Q^2 (heavy quarks massless above threshold).
void qcd_f2_coefficients(const std::array<qcd::PartonMoments, dis_mellin::kMaxBasis>& q, int basis,
                         const QcdNode& node, double a, int nf, int order, Complex<double>* coef) {
    static constexpr double kE2[qcd::kFlavours] = {4.0 / 9, 1.0 / 9, 1.0 / 9, 4.0 / 9, 1.0 / 9, 4.0 / 9};
    double e2_active = 0.0;
    for (int f = 0; f < nf; ++f) e2_active += kE2[f];
    const qcd::Cx cq = order >= 2 ? 1.0 + a * node.cq : qcd::Cx(1.0);
    const qcd::Cx cg = order >= 2 ? a * node.cg * e2_active : qcd::Cx(0.0);
    for (int b = 0; b < basis; ++b) {
        qcd::Cx sum(0.0);
        for (int f = 0; f < qcd::kFlavours; ++f) sum += kE2[f] * q[static_cast<std::size_t>(b)].qp[f];
        const qcd::Cx c = cq * sum + cg * q[static_cast<std::size_t>(b)].g;
        coef[b] = Complex<double>(c.real(), c.imag());
    }
}

}  // namespace

/// Tables from the qcd:: evolution (any order, coupling reference, scheme or scale ratio).
void DisMellinTheory::build_qcd_table(const std::vector<double>& rows, const MellinContour& contour,
                                      TableShare* share) {
    using namespace dis_mellin;
    const qcd::QcdSettings qs = settings_.qcd();
    const std::size_t nn = contour.nodes.size();
    std::vector<QcdNode> nodes;
    nodes.reserve(nn);
    for (std::size_t k = 0; k < nn; ++k) {
        const qcd::Cx n(contour.nodes[k].re, contour.nodes[k].im);
        nodes.push_back({qcd::NodeEvolution(n, qs), qcd::coefficient_f2_quark(n),
                         qcd::coefficient_f2_gluon(n)});
    }
    const auto unit = dis_qcd_basis(settings_);
    const int nb = basis();
    const std::size_t row = 2 * static_cast<std::size_t>(nb) * nn;
    const std::pair<int, int> mine = allocate_table(static_cast<std::size_t>(points_) * row, share);
    const int first = mine.first, last = mine.second;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 8)
#endif
    for (int i = first; i < last; ++i) {
        const std::size_t iu = static_cast<std::size_t>(i);
        const double x = rows[3 * iu];
        const double q2 = rows[3 * iu + 1];
        const int target = static_cast<int>(rows[3 * iu + 2]);
        const auto path = qcd::evolution_path(settings_.q0_sq(), q2, qs);
        const int nf = qcd::active_flavours(q2, qs);
        const double a = qcd::coupling_for_pdfs(q2, nf, qs);  // the evolution's coupling
        double* out = table_.get() + iu * row;
        for (std::size_t k = 0; k < nn; ++k) {
            auto q = unit;
            nodes[k].evolution.evolve(path, q.data(), nb);
            Complex<double> coef[kMaxBasis];
            qcd_f2_coefficients(q, nb, nodes[k], a, nf, qs.order, coef);
            apply_target(target, coef, nb);
            const Complex<double> pref = (x / kPi * contour.weights[k]) * contour.phase *
                                         exp(-contour.nodes[k] * std::log(x));
            const std::size_t nbu = static_cast<std::size_t>(nb);
            for (std::size_t b = 0; b < nbu; ++b) {
                const Complex<double> c = pref * coef[b];
                out[2 * (k * nbu + b)] = c.re;
                out[2 * (k * nbu + b) + 1] = c.im;
            }
        }
    }
}

DisMellinModel DisMellinTheory::model() const {
    DisMellinModel m;
    m.table = table_.get();
    m.nodes = nodes_.data();
    m.points = points_;
    m.num_nodes = num_nodes_;
    m.layout = settings_.layout();
    return m;
}

double DisMellinTheory::flops_per_point(int dual_slots) const {
    // value() reads no table entry's value-dependent branch, so a zero row counts the same.
    DisMellinModel m = model();
    std::vector<double> row(static_cast<std::size_t>(m.table_width()));
    m.table = row.data();
    return count_flops_slots(m, dual_slots, settings_)[1];
}

double DisMellinTheory::flops_prepare(int dual_slots) const {
    return count_flops_slots(model(), dual_slots, settings_)[0];
}

double DisMellinTheory::flops_per_evaluation(int dual_slots) const {
    return flops_prepare(dual_slots) + points_ * flops_per_point(dual_slots);
}

// --- Pseudo-data
// ------------------------------------------------------------------------------------

DisPseudoData simulate_dis(int points,
                           std::uint64_t seed,
                           double noise,
                           const std::vector<double>& truth,
                           const DisMellinSettings& settings) {
    if (points < 1) throw usage_error("simulate dis: --points must be at least 1");
    if (!(noise >= 0.0 && noise < 1.0))
        throw usage_error("simulate dis: --noise must be a relative uncertainty in [0, 1)");
    DisPseudoData d;
    d.truth = truth.empty() ? dis_mellin_default_truth(settings) : truth;
    const int np = settings.layout().params();
    if (d.truth.size() != static_cast<std::size_t>(np))
        throw usage_error("simulate dis: the truth needs " + std::to_string(np) + " parameters, got " +
                          std::to_string(d.truth.size()));
    check_dis_mellin_bounds(dis_mellin_param_names(settings), d.truth, d.truth, settings,
                            std::vector<bool>(d.truth.size(), true));

    std::mt19937_64 rng(seed);
    const double lx0 = std::log(1e-3);
    const double lx1 = std::log(0.9);
    const double lq0 = std::log(2.0);
    const double lq1 = std::log(1000.0);
    const int protons = (points + 1) / 2;
    std::vector<double> rows;
    rows.reserve(3 * static_cast<std::size_t>(points));
    while (static_cast<int>(d.x.size()) < points) {
        const double x = std::exp(lx0 + (lx1 - lx0) * uniform01(rng));
        const double q2 = std::exp(lq0 + (lq1 - lq0) * uniform01(rng));
        const double w2 = q2 * (1.0 - x) / x + kProtonMass * kProtonMass;
        if (w2 <= 10.0) continue;
        const double target = static_cast<int>(d.x.size()) < protons ? 1.0 : 2.0;
        d.x.push_back(x);
        d.q2.push_back(q2);
        d.target.push_back(target);
        rows.insert(rows.end(), {x, q2, target});
    }

    const DisMellinTheory theory(settings, rows);
    const DisMellinModel m = theory.model();
    std::vector<double> ws(static_cast<std::size_t>(m.workspace_size()));
    m.prepare(d.truth.data(), ws.data());
    for (int i = 0; i < points; ++i) {
        const std::size_t iu = static_cast<std::size_t>(i);
        const double f2 = m.value(d.truth.data(), ws.data(), rows.data() + 3 * iu, i);
        if (!(f2 > 0.0))
            throw usage_error("simulate dis: the true parameters give F2 = " + fmt(f2) +
                              " <= 0 at x = " + fmt(d.x[iu]) + ", Q2 = " + fmt(d.q2[iu]));
        const double sigma = noise * f2;
        // Box-Muller from two uniforms; 1 - u keeps the logarithm finite.
        const double u1 = 1.0 - uniform01(rng);
        const double u2 = uniform01(rng);
        const double gauss = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * kPi * u2);
        d.f2.push_back(f2 + sigma * gauss);
        d.sigma.push_back(sigma);
    }
    return d;
}

}  // namespace ef

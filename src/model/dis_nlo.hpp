// SPDX-License-Identifier: MIT
#pragma once

#include <complex>
#include <vector>

/**
 * NLO QCD in Mellin space for dis-mellin: harmonic sums continued to complex N, the LO and NLO
 * splitting-function moments, the strong coupling at LO/NLO with flavour thresholds, the
 * N-space solution of the DGLAP equations (iterated or truncated) and the MSbar F2 coefficient
 * functions. Host-only set-up math (the tables the kernels read are built from it), so it uses
 * std::complex and may be slow: it never runs in a fit's inner loop.
 *
 * Conventions: a = alpha_s / (4 pi); dq/d ln mu_F^2 = (a P0 + a^2 P1) q; da/d ln mu^2 =
 * -beta0 a^2 - beta1 a^3 with beta0 = 11 - 2 nf / 3, beta1 = 102 - 38 nf / 3.
 * Sources: the NLO splitting functions in N space as given by E. G. Floratos, C. Kounnas,
 * R. Lacaze, Nucl. Phys. B192 (1981) 417 and A. Gonzalez-Arroyo, C. Lopez, F. J. Yndurain,
 * Nucl. Phys. B153 (1979) 161, in the analytic continuation of M. Glueck, E. Reya, A. Vogt,
 * Z. Phys. C48 (1990) 471; the solutions (U-matrix expansion, truncated and iterated) from
 * A. Vogt, Comput. Phys. Commun. 170 (2005) 65, hep-ph/0408244 (QCD-PEGASUS), sect. 2-3.
 */
namespace ef::qcd {

using Cx = std::complex<double>;

constexpr double kZeta2 = 1.64493406684822643647;
constexpr double kZeta3 = 1.20205690315959428540;
constexpr double kEulerGamma = 0.57721566490153286061;

/// psi(z), psi'(z), psi''(z) for complex z off the non-positive integers (recurrence to
/// Re z >= 16, then the asymptotic series; relative accuracy ~1e-15).
Cx psi0(Cx z);
Cx psi1(Cx z);
Cx psi2(Cx z);

/// Harmonic sums continued to complex N: S1 = gamma_E + psi(N+1), S2 = zeta2 - psi'(N+1),
/// S3 = zeta3 + psi''(N+1) / 2.
Cx harmonic_s1(Cx n);
Cx harmonic_s2(Cx n);
Cx harmonic_s3(Cx n);

/// Mellin transform of Li2(x) / (1 + x), continued to complex N (Re N > 0 or off the real
/// axis): the alternating sum sum_k (-1)^k M(N+k) of the Li2 moments M(m) = zeta2/m - S1(m)/m^2,
/// summed directly up to |N+k| >= 30 and Euler-transformed beyond (accuracy ~1e-14).
Cx mellin_li2_over_1px(Cx n);

/**
 * The alternating sums of Gonzalez-Arroyo et al. continued with the signature eta = +-1 (the
 * value of (-1)^N: +1 for even-N quantities, the "+" combinations; -1 for odd, "-"):
 *   s2p = S'_2 = S2(N/2) (eta = +1) or S2((N-1)/2) (eta = -1), likewise s3p = S'_3,
 *   stilde = S~(N) = sum_{k=1}^{N} (-1)^k S1(k) / k^2
 *          = -5/8 zeta3 + eta [S1(N)/N^2 - zeta2/2 (psi((N+1)/2) - psi(N/2)) + mellin_li2_over_1px(N)].
 */
struct AlternatingSums {
    Cx s2p, s3p, stilde;
};
AlternatingSums alternating_sums(Cx n, int eta);

/// LO splitting-function moments P0 (P_qg includes the 2 nf).
struct Splitting {
    Cx ns;             ///< non-singlet P_qq (the same for +, - and valence at LO)
    Cx qq, qg, gq, gg; ///< singlet matrix
};
Splitting lo_splitting(Cx n, int nf);

/// NLO splitting-function moments P1: non-singlet plus (q + qbar differences), minus (= valence
/// at NLO), and the singlet matrix (qq = plus + pure singlet).
struct NloSplitting {
    Cx ns_plus, ns_minus;
    Cx qq, qg, gq, gg;
};
NloSplitting nlo_splitting(Cx n, int nf);

/// How the coupling is run within a flavour segment at NLO.
enum class CouplingSolution { exact, expanded };
/// How the NLO DGLAP equation is solved (hep-ph/0408244: IMODE 1 = iterated, 4 = truncated).
enum class EvolutionSolution { iterated, truncated };

/**
 * QCD settings shared by the coupling and the evolution. Scales are squared masses in GeV^2.
 * nf_fixed = 0 is the zero-mass variable-flavour-number scheme with thresholds at mc2, mb2,
 * mt2 (nf = 3 below mc2); nf_fixed in 3..6 fixes nf everywhere (FFNS).
 */
struct QcdSettings {
    int order = 1;  ///< 1 = LO, 2 = NLO
    double alphas_ref = 0.118;
    double q2_ref = 91.1876 * 91.1876;
    double mc2 = 1.28 * 1.28;
    double mb2 = 4.18 * 4.18;
    double mt2 = 1e30;  ///< no top threshold unless given
    int nf_fixed = 0;
    double mur_over_muf = 1.0;
    CouplingSolution coupling = CouplingSolution::exact;
    EvolutionSolution solution = EvolutionSolution::iterated;
    int iterated_orders = 30;  ///< terms of the U-matrix series of the iterated solution
};

double beta0(int nf);
double beta1(int nf);
/// Flavours active strictly inside the scale region containing mu2 (fixed nf in the FFNS).
int active_flavours(double mu2, const QcdSettings& s);

/// a = alpha_s / (4 pi) at the renormalisation scale mu2 (not the factorisation scale): from
/// alphas_ref at q2_ref across the thresholds (continuous at LO and NLO). NaN past a Landau pole.
double coupling_a(double mu2, const QcdSettings& s);

/**
 * a at mu_R^2 = mur_over_muf^2 muf2 in the scheme of the PDFs' flavour number nf (the nf of the
 * segment of mu_F^2 = muf2): the coupling the evolution kernels and the F2 coefficient functions
 * at that mu_F take. With mu_R != mu_F in the VFNS the coupling changes flavour number where the
 * PDFs do, at mu_F = m_h (mu_R^2 = k^2 m_h^2, k = mur_over_muf), with the NLO decoupling
 * a^(nf+1) = a^(nf) (1 + (2/3) ln(k^2) a^(nf)); the reference alphas_ref at q2_ref is in the
 * flavour number coupling_a() has there (a heavy quark not active at its own mass). This is
 * the Les Houches benchmark's scheme (hep-ph/0204316, tables 3 and 4, the mu_R != mu_F parts,
 * met to 4e-5). coupling_a(), thresholds at mu_R = m_h, would give the kernels of one nf the
 * coupling of another inside the window between. Equal to coupling_a(muf2) for mu_R = mu_F and
 * in the FFNS.
 */
double coupling_for_pdfs(double muf2, int nf, const QcdSettings& s);

/// Parton moments at one N: q+ = q + qbar and q- = q - qbar per flavour (u, d, s, c, b, t) and g.
constexpr int kFlavours = 6;
struct PartonMoments {
    Cx qp[kFlavours];
    Cx qm[kFlavours];
    Cx g;
};

/**
 * Evolves the moments at one N from mu_F^2 = q2_from to q2_to (q2_to >= q2_from, or below it
 * within one flavour segment), splitting at the thresholds; a heavy flavour enters with zero
 * at its threshold (zero-mass VFNS, NLO matching is continuous). With mur_over_muf = k the
 * coupling is taken at mu_R^2 = k^2 mu_F^2 (coupling_for_pdfs) and P1 -> P1 + beta0 ln(k^2) P0.
 */
PartonMoments evolve_moments(Cx n, double q2_from, double q2_to, const PartonMoments& in,
                             const QcdSettings& s);

/// One flavour segment of an evolution: nf and the coupling at its ends (at mu_R).
struct PathSegment {
    int nf;
    double a0, a1;
};
/// The segments from mu_F^2 = q2_from to q2_to (thresholds strictly between split them).
std::vector<PathSegment> evolution_path(double q2_from, double q2_to, const QcdSettings& s);

/// The parameter- and scale-independent part of evolve_moments at one N (the splitting
/// functions, eigen-projectors and U matrices for every nf the settings can reach), so that a
/// table over many points costs one set-up per contour node.
class NodeEvolution {
   public:
    NodeEvolution(Cx n, const QcdSettings& s);
    ~NodeEvolution();
    NodeEvolution(const NodeEvolution&);
    NodeEvolution(NodeEvolution&&) noexcept;
    NodeEvolution& operator=(const NodeEvolution&);
    NodeEvolution& operator=(NodeEvolution&&) noexcept;
    PartonMoments evolve(double q2_from, double q2_to, const PartonMoments& in) const;
    /// Evolves `count` moment sets in place along a path from evolution_path().
    void evolve(const std::vector<PathSegment>& path, PartonMoments* q, int count) const;
    /// The kernels of one nf (3..6); public for the tests.
    struct Kernel;

   private:
    QcdSettings settings_;
    std::vector<Kernel> kernels_;  // index nf - 3
};

/**
 * The NLO MSbar coefficient functions of F2 in N space, in F2(N)/x-moment = sum_f e_f^2
 * [(1 + a cq) q+_f + a cg g] (cg per flavour, counting q and qbar): from the x-space forms of
 * Furmanski and Petronzio (Z. Phys. C11 (1982) 293; Ellis-Stirling-Webber eq. 4.80), Mellin
 * transformed analytically.
 */
Cx coefficient_f2_quark(Cx n);
Cx coefficient_f2_gluon(Cx n);

}  // namespace ef::qcd

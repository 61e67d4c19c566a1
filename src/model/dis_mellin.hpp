// SPDX-License-Identifier: MIT
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/core/complex.hpp"
#include "kernels/models/dis_mellin.hpp"
#include "src/model/dis_nlo.hpp"

/**
 * Host side of the `dis-mellin` model: settings, parameter table, bound checks, the
 * precomputed theory tables and a pseudo-data generator. The single-source math lives in
 * kernels/models/dis_mellin.hpp; this file only builds the parameter-independent tables.
 */
namespace ef {

class TableShare;

/**
 * `[model]` options of dis-mellin (all optional; defaults follow the conventions of JAM's
 * qcdlib and of PEGASUS, hep-ph/0408244). Masses and scales in GeV, angles in degrees.
 *
 *   q0               = 1.27     input scale Q0 (GeV); PDFs are parameterised at Q0^2
 *   alphas_mz        = 0.118    alpha_s(M_Z), LO running with 3/4/5 flavours
 *   mc               = 1.28     charm threshold (GeV)
 *   mb               = 4.18     bottom threshold (GeV)
 *   mz               = 91.1876  Z mass (GeV), reference scale of alphas_mz
 *   strange_fraction = 0.5      kappa: s = sbar = kappa * ubar at Q0^2
 *   contour_c        = 1.9      abscissa of the inverse-Mellin contour (> 1: right of the
 *                               N = 1 pole of the gluon splitting functions)
 *   contour_phi_deg  = 135      contour angle phi in degrees, 90 < phi < 180
 *   contour_nodes    = 8        Gauss-Legendre points per contour segment, 1..64
 *   contour          = standard breakpoints in z: standard (17 segments, z <= 63), extended
 *                               (26, z <= 150) or precise (35, z <= ~1100; what x -> 1 needs
 *                               for 1e-8 accuracy, with contour_nodes = 24)
 *   order            = LO       LO or NLO (evolution, coupling and F2 coefficient functions)
 *   alphas_ref, q_ref           alpha_s(q_ref) at any reference scale q_ref (GeV), both or
 *                               neither; unset: alphas_mz at mz
 *   mt               = 0        top threshold (GeV); 0: no top
 *   nf               = 0        0: zero-mass VFNS with thresholds mc, mb (mt); 3..6: fixed nf
 *   mur_over_muf     = 1        renormalisation / factorisation scale ratio
 *   solution         = iterated NLO solution: iterated (exact, the Les Houches benchmark's) or
 *                               truncated (hep-ph/0408244)
 *   alphas_running   = exact    NLO coupling: exact solution of the truncated beta function,
 *                               or expanded
 *   sea              = symmetric symmetric: one light sea S with strange_fraction (17
 *                               parameters, 4 basis moments); split: ubar, dbar and s + sbar
 *                               each with its own shape and momentum fraction (27 parameters,
 *                               6 basis moments; kernels/models/dis_mellin.hpp has the layout)
 *   pdf_norm         = sum_rules sum_rules: valence from the number sum rules, the gluon from
 *                               the momentum sum rule; coefficients: uv_N, dv_N, g_N join the
 *                               parameters and every _N is the coefficient A of A x^a (1-x)^b
 *                               (1 + c sqrt(x) + d x) (inputs/lh-toy.ini)
 * With the defaults (order LO, alphas_mz, no mt, VFNS, scale ratio 1, symmetric sea) the tables
 * are built by the original LO code, bit for bit; any of the new keys switches to the qcd:: code
 * (src/model/dis_nlo.hpp), which reproduces the Les Houches LO and NLO tables.
 */
struct DisMellinSettings {
    double q0 = 1.27;
    double alphas_mz = 0.118;
    double mc = 1.28;
    double mb = 4.18;
    double mz = 91.1876;
    double strange_fraction = 0.5;
    double contour_c = 1.9;
    double contour_phi_deg = 135.0;
    int contour_nodes = 8;
    MellinBreakpoints contour_breakpoints = MellinBreakpoints::standard;
    int order = 1;            ///< 1 = LO, 2 = NLO
    double alphas_ref = 0.0;  ///< 0: unset (alphas_mz at mz)
    double q_ref = 0.0;       ///< GeV; 0: unset
    double mt = 0.0;          ///< GeV; 0: no top threshold
    int nf = 0;               ///< 0: VFNS; 3..6: FFNS
    double mur_over_muf = 1.0;
    qcd::EvolutionSolution solution = qcd::EvolutionSolution::iterated;
    qcd::CouplingSolution coupling = qcd::CouplingSolution::exact;
    bool sea_split = false;     ///< sea = split
    bool coefficients = false;  ///< pdf_norm = coefficients

    double q0_sq() const { return q0 * q0; }
    /// The parameter and basis layout of the model these settings describe.
    dis_mellin::Layout layout() const { return {sea_split ? 1 : 0, coefficients ? 1 : 0}; }
    /// True when any NLO/QCD key differs from the LO defaults: the tables then come from the
    /// qcd:: code instead of the original LO evolution.
    bool uses_qcd() const;
    /// The coupling and evolution settings these describe.
    qcd::QcdSettings qcd() const;
    /// Number of contour nodes: segments x contour_nodes (136 by default).
    int num_nodes() const;
    /// The contour these settings describe.
    MellinContour contour() const;
};

/// Reads `[model]` options; throws ef::usage_error("model.KEY: ...") for unknown keys and bad
/// values (allowed keys and ranges as in DisMellinSettings).
DisMellinSettings parse_dis_mellin_settings(
    const std::map<std::string, std::string>& model_options);

/// `[model]` keys of dis-mellin, one "    key  meaning (default: V)" line each, for
/// `ensemblefit fit --help` (the same keys parse_dis_mellin_settings accepts).
std::string dis_mellin_settings_help();

/// One parameter's name, meaning and defaults (start = the pseudo-data truth).
struct DisMellinParamInfo {
    std::string name;
    std::string meaning;
    double start;
    double lower;
    double upper;
    bool fixed;  ///< fixed by default (sea_c, sea_d, g_c, g_d)
};

/// The 17 parameters in model order (kernels/models/dis_mellin.hpp documents the layout).
const std::vector<DisMellinParamInfo>& dis_mellin_param_table();
/// The parameters of the settings' layout: the 17 above, with the split sea 27 (sea_* become
/// ubar_*, then dbar_* and s_* after the gluon; defaults ubar_N = dbar_N = s_N = 0.032 with the
/// sea's shape, the same PDFs as the symmetric default), with coefficients 3 more (uv_N, dv_N,
/// g_N; every _N a coefficient, defaults those of the sum rules at the default shapes).
std::vector<DisMellinParamInfo> dis_mellin_param_table(const DisMellinSettings& settings);
/// uv_a uv_b uv_c uv_d dv_a dv_b dv_c dv_d sea_N sea_a sea_b sea_c sea_d g_a g_b g_c g_d.
std::vector<std::string> dis_mellin_param_names();
std::vector<std::string> dis_mellin_param_names(const DisMellinSettings& settings);
/// Realistic values at Q0 = 1.27 GeV (momentum fractions u_v 0.319, d_v 0.124, sea 0.16,
/// gluon 0.397); the default truth of `simulate dis` and the default start values.
std::vector<double> dis_mellin_default_truth();
std::vector<double> dis_mellin_default_truth(const DisMellinSettings& settings);

/**
 * Config-time check of the pole constraints, for the parameters that the lists name (in any
 * order; names that are not dis-mellin parameters are ignored):
 *   - every exponent a (uv_a, dv_a, sea_a, g_a, ubar_a, dbar_a, s_a) must have lower bound
 *     > -contour_c, so the
 *     contour passes right of the pole of B(N + a, b + 1) for every value the fit may try;
 *   - valence exponents uv_a, dv_a must also have lower bound > -1 (number sum rule integral);
 *   - every b must have lower bound > -1 (Beta function).
 * A fixed parameter (fixed[i], when `fixed` is not empty) is checked on its start value only.
 * Throws ef::usage_error naming `param.NAME.lower` (or `param.NAME.start`).
 */
void check_dis_mellin_bounds(const std::vector<std::string>& names,
                             const std::vector<double>& lower,
                             const std::vector<double>& start,
                             const DisMellinSettings& settings,
                             const std::vector<bool>& fixed = {});

/// alpha_s(Q^2) at LO with 3 flavours below mc^2, 4 up to mb^2, 5 above (continuous at the
/// thresholds, as LO matching is), from alphas_mz at mz^2.
double dis_alpha_s(double q2, const DisMellinSettings& settings);

/// The LO splitting functions in the a = alpha_s / (4 pi) normalisation of the notes:
/// {P_qq, P_qg, P_gq, P_gg} for nf active flavours (P_qg includes the 2 nf).
struct DisSplitting {
    Complex<double> qq, qg, gq, gg;
};
DisSplitting dis_lo_splitting(const Complex<double>& n, int nf);

/**
 * LO evolution operator from Q0^2 to q2 in the moment basis: op[f][b] is the moment of the
 * plus distribution q_f + qbar_f (f = u, d, s, c, b) or of the gluon (f = 5) at q2 per unit
 * of basis moment b (u_v, d_v, S, g; proton target) at Q0^2. Heavy quarks start from zero at
 * their threshold. Throws ef::data_error when q2 < Q0^2 crosses a threshold backwards.
 */
constexpr int kDisFlavours = 6;
void dis_evolution_operator(const Complex<double>& n,
                            double q2,
                            const DisMellinSettings& settings,
                            Complex<double> op[kDisFlavours][dis_mellin::kNumBasis]);

/// Non-singlet (valence) evolution factor from Q0^2 to q2: q_v(N, q2) = E q_v(N, Q0^2).
Complex<double> dis_nonsinglet_evolution(const Complex<double>& n,
                                         double q2,
                                         const DisMellinSettings& settings);

/**
 * F2 coefficients in the basis: F2(N)/x moment (i.e. sum_f e_f^2 (q_f + qbar_f)(N, q2)) per unit
 * basis moment at Q0^2, for target 1 (proton) or 2 (neutron, u <-> d isospin swap).
 */
void dis_f2_coefficients(const Complex<double>& n,
                         double q2,
                         int target,
                         const DisMellinSettings& settings,
                         Complex<double> coef[dis_mellin::kNumBasis]);

/**
 * Owns the parameter-independent tables of a dis-mellin fit and hands out DisMellinModel views.
 *
 * Built once per run from the data (n rows of x, Q^2, target, row-major): for each point i and
 * node k it stores C[i][k][b] = (x_i / pi) w_k e^{i phi} x_i^{-N_k} F2coef_b(N_k, Q_i^2, target_i),
 * so F2_i = sum_{k,b} Im(C q_b(N_k)). Memory: points x nodes x basis x 16 bytes (44 MB for 5000
 * points and 136 nodes with the 4 symmetric basis moments; 6 with the split sea). Views from model() point into this object's storage: they stay valid
 * while it (or a copy: copies share the read-only tables) lives, also across a move.
 *
 * With a TableShare (src/comm/table_share.hpp; a fit's ranks pass the node's) the tables are
 * one copy per node: every rank validates the data and computes the per-node kernels (cheap,
 * the same errors everywhere), then computes only its slice of the points' rows into the shared
 * memory. A row depends on its point alone, so the bits are those of a single-rank build.
 */
class DisMellinTheory {
   public:
    /// Validates the data (0 < x < 1, Q^2 > 0, target 1 proton, 2 neutron or 3 deuteron = (p+n)/2;
    /// ef::data_error naming the point)
    /// and builds the tables. `rows` holds points x 3 values.
    DisMellinTheory(const DisMellinSettings& settings, const std::vector<double>& rows,
                    TableShare* share = nullptr);

    DisMellinModel model() const;
    int points() const { return points_; }
    int num_nodes() const { return num_nodes_; }
    const DisMellinSettings& settings() const { return settings_; }
    /// How the tables are held when built through a share ("tables 43.5 MB, one copy per node
    /// shared by its 4 ranks, ..."); empty otherwise.
    const std::string& table_note() const { return table_note_; }

    /// Counted FLOPs of value() for one point: a plain-double pass when dual_slots == 0,
    /// else one pass on Dual<double, dual_slots> (dual_slots in 1, 2, 4, 8, 16, 32).
    double flops_per_point(int dual_slots = 0) const;
    /// Counted FLOPs of one model evaluation: prepare() plus value() for every point, counted
    /// by running the model code on a counting scalar at the default truth (the default-fixed
    /// zero sea/gluon c and d skip their terms; on duals the first dual_slots free parameters
    /// are seeded, as the LM driver does). Transcendentals (exp, log, sin, cos, atan2) count
    /// kTranscendentalFlops each; add, sub, mul and div count 1. A Jacobian over P free
    /// parameters takes ceil(P / dual_slots) such passes.
    double flops_per_evaluation(int dual_slots = 0) const;
    /// Counted FLOPs of one prepare() (the parameter-dependent moments).
    double flops_prepare(int dual_slots = 0) const;
    static constexpr double kTranscendentalFlops = 20.0;

   private:
    void build_lo_table(const std::vector<double>& rows, const MellinContour& contour, TableShare* share);
    void build_qcd_table(const std::vector<double>& rows, const MellinContour& contour, TableShare* share);
    /// The table's memory (this object's own, or the share's) and the points this rank computes.
    std::pair<int, int> allocate_table(std::size_t count, TableShare* share);
    int basis() const { return settings_.layout().basis(); }

    DisMellinSettings settings_;
    int points_ = 0;
    int num_nodes_ = 0;
    std::vector<double> nodes_;  // [nodes][2]
    std::shared_ptr<double> table_;  // [points][nodes][basis][2]: 4, or 6 with the split sea
    std::string table_note_;
};

/// The basis at Q0^2 as parton moments (q+ = q + qbar and q- per flavour, g) per unit of each
/// basis moment of the settings' layout (the first layout().basis() entries are used): the
/// split the tables, the PDFs and the LHAPDF export all evolve.
std::array<qcd::PartonMoments, dis_mellin::kMaxBasis> dis_qcd_basis(const DisMellinSettings& settings);

/// Pseudo-data for `ensemblefit simulate dis`: target 1 = proton, 2 = neutron.
struct DisPseudoData {
    std::vector<double> x, q2, target, f2, sigma;
    std::vector<double> truth;
};

/**
 * Draws `points` kinematic points with log-uniform x in [1e-3, 0.9] and Q^2 in [2, 1000] GeV^2,
 * rejecting those with W^2 = Q^2 (1 - x) / x + m_p^2 <= 10 GeV^2; the first half are proton,
 * the rest neutron. F2 is the model at `truth` (dis_mellin_default_truth() when empty), sigma =
 * noise * F2, and the stored f2 adds Gaussian noise N(0, sigma). Deterministic in `seed`
 * (std::mt19937_64; the simulation only, never replicas).
 */
DisPseudoData simulate_dis(int points,
                           std::uint64_t seed,
                           double noise,
                           const std::vector<double>& truth,
                           const DisMellinSettings& settings);

}  // namespace ef

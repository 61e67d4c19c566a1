// SPDX-License-Identifier: MIT
// The NLO (two-loop) MSbar splitting-function moments P1(N), a = alpha_s / (4 pi), in the form of
// Gonzalez-Arroyo, Lopez, Yndurain (non-singlet) and Floratos, Kounnas, Lacaze (singlet) with
// the analytic continuation of Glueck, Reya, Vogt, Z. Phys. C48 (1990) 471 (see dis_nlo.hpp).
// Checked by tests/unit/test_dis_nlo.cpp: P_minus(1) = 0, the momentum sum rule at N = 2, the
// large-N cusp coefficient and the Les Houches benchmark tables.
#include <complex>

#include "src/model/dis_nlo.hpp"

namespace ef::qcd {

namespace {

constexpr double kCF = 4.0 / 3.0;
constexpr double kCA = 3.0;
constexpr double kTR = 0.5;

/// Powers and shifts of N used by every term.
struct NPowers {
    Cx n, n2, n3, n4, n5, n6, n7, n8, n9;
    Cx nm, n1, np2;  // N - 1, N + 1, N + 2
    explicit NPowers(Cx x) : n(x) {
        n2 = n * n;
        n3 = n2 * n;
        n4 = n3 * n;
        n5 = n4 * n;
        n6 = n5 * n;
        n7 = n6 * n;
        n8 = n7 * n;
        n9 = n8 * n;
        nm = n - 1.0;
        n1 = n + 1.0;
        np2 = n + 2.0;
    }
};

/// The C_F (C_F - C_A/2) part of P1_ns for signature eta (+1: plus, -1: minus), per C_F^2.
Cx ns_cf_ca_half(const NPowers& p, Cx s1, Cx s2, const AlternatingSums& alt, int eta) {
    const Cx n1_2 = p.n1 * p.n1;
    const Cx n1_3 = n1_2 * p.n1;
    const Cx t = 16.0 * s1 * (2.0 * p.n + 1.0) / (p.n2 * n1_2) +
                 16.0 * (2.0 * s1 - 1.0 / (p.n * p.n1)) * (s2 - alt.s2p) + 64.0 * alt.stilde +
                 24.0 * s2 - 3.0 - 8.0 * alt.s3p - 8.0 * (3.0 * p.n3 + p.n2 - 1.0) / (p.n3 * n1_3) -
                 static_cast<double>(eta) * 16.0 * (2.0 * p.n2 + 2.0 * p.n + 1.0) / (p.n3 * n1_3);
    return -0.5 * t;
}

Cx ns_ca(const NPowers& p, Cx s1, Cx s2) {
    const Cx n1_2 = p.n1 * p.n1;
    const Cx n1_3 = n1_2 * p.n1;
    const Cx t = s1 * (536.0 / 9.0 + 8.0 * (2.0 * p.n + 1.0) / (p.n2 * n1_2)) -
                 (16.0 * s1 + 52.0 / 3.0 - 8.0 / (p.n * p.n1)) * s2 - 43.0 / 6.0 -
                 4.0 * (151.0 * p.n4 + 263.0 * p.n3 + 97.0 * p.n2 + 3.0 * p.n + 9.0) / (9.0 * p.n3 * n1_3);
    return -0.5 * t;
}

Cx ns_nf(const NPowers& p, Cx s1, Cx s2) {
    const Cx n1_2 = p.n1 * p.n1;
    const Cx t = -160.0 / 9.0 * s1 + 32.0 / 3.0 * s2 + 4.0 / 3.0 +
                 16.0 * (11.0 * p.n2 + 5.0 * p.n - 3.0) / (9.0 * p.n2 * n1_2);
    return -0.5 * t;
}

Cx ns_total(const NPowers& p, Cx s1, Cx s2, const AlternatingSums& alt, int eta, int nf) {
    return kCF * ((kCF - 0.5 * kCA) * ns_cf_ca_half(p, s1, s2, alt, eta) + kCA * ns_ca(p, s1, s2) +
                  kTR * nf * ns_nf(p, s1, s2));
}

/// Pure-singlet, quark-gluon and gluon-quark pieces (colour factors stripped).
struct SingletParts {
    Cx ps, qg_ca, qg_cf, gq_cf2, gq_cfca, gq_nf, gg_ca2, gg_ca_nf, gg_cf_nf;
};

void quark_rows(const NPowers& p, Cx s1, Cx s2, const AlternatingSums& alt, SingletParts& r) {
    const Cx n1_2 = p.n1 * p.n1, n1_3 = n1_2 * p.n1;
    const Cx n2_2 = p.np2 * p.np2, n2_3 = n2_2 * p.np2;
    const Cx poly = p.n2 + p.n + 2.0;
    r.ps = 2.0 * (5.0 * p.n5 + 32.0 * p.n4 + 49.0 * p.n3 + 38.0 * p.n2 + 28.0 * p.n + 8.0) /
           (p.nm * p.n3 * n1_3 * n2_2);
    r.qg_ca = (-2.0 * s1 * s1 + 2.0 * s2 - 2.0 * alt.s2p) * poly / (p.n * p.n1 * p.np2) +
              8.0 * s1 * (2.0 * p.n + 3.0) / (n1_2 * n2_2) +
              2.0 *
                  (p.n9 + 6.0 * p.n8 + 15.0 * p.n7 + 25.0 * p.n6 + 36.0 * p.n5 + 85.0 * p.n4 +
                   128.0 * p.n3 + 104.0 * p.n2 + 64.0 * p.n + 16.0) /
                  (p.nm * p.n3 * n1_3 * n2_3);
    r.qg_cf = (2.0 * s1 * s1 - 2.0 * s2 + 5.0) * poly / (p.n * p.n1 * p.np2) - 4.0 * s1 / p.n2 +
              (11.0 * p.n4 + 26.0 * p.n3 + 15.0 * p.n2 + 8.0 * p.n + 4.0) / (p.n3 * n1_3 * p.np2);
}

void gluon_quark_row(const NPowers& p, Cx s1, Cx s2, const AlternatingSums& alt, SingletParts& r) {
    const Cx n1_2 = p.n1 * p.n1, n1_3 = n1_2 * p.n1;
    const Cx n2_2 = p.np2 * p.np2;
    const Cx nm_2 = p.nm * p.nm;
    const Cx poly = p.n2 + p.n + 2.0;
    const Cx den = p.nm * p.n * p.n1;
    r.gq_cf2 = (-s1 * s1 + 5.0 * s1 - s2) * poly / den - 2.0 * s1 / n1_2 -
               (12.0 * p.n6 + 30.0 * p.n5 + 43.0 * p.n4 + 28.0 * p.n3 - p.n2 - 12.0 * p.n - 4.0) /
                   (2.0 * p.nm * p.n3 * n1_3);
    r.gq_cfca = (s1 * s1 + s2 - alt.s2p) * poly / den -
                s1 * (17.0 * p.n4 + 41.0 * p.n2 - 22.0 * p.n - 12.0) / (3.0 * nm_2 * p.n2 * p.n1) +
                (109.0 * p.n9 + 621.0 * p.n8 + 1400.0 * p.n7 + 1678.0 * p.n6 + 695.0 * p.n5 -
                 1031.0 * p.n4 - 1304.0 * p.n3 - 152.0 * p.n2 + 432.0 * p.n + 144.0) /
                    (9.0 * nm_2 * p.n3 * n1_3 * n2_2);
    r.gq_nf = 4.0 / 3.0 * ((s1 - 8.0 / 3.0) * poly / den + 1.0 / n1_2);
}

void gluon_gluon_row(const NPowers& p, Cx s1, const AlternatingSums& alt, SingletParts& r) {
    const Cx n1_2 = p.n1 * p.n1, n1_3 = n1_2 * p.n1;
    const Cx n2_2 = p.np2 * p.np2, n2_3 = n2_2 * p.np2;
    const Cx nm_2 = p.nm * p.nm;
    r.gg_ca2 = -(2.0 * p.n5 + 5.0 * p.n4 + 8.0 * p.n3 + 7.0 * p.n2 - 2.0 * p.n - 2.0) * 8.0 * s1 /
                   (nm_2 * p.n2 * n1_2 * n2_2) -
               67.0 / 9.0 * s1 + 8.0 / 3.0 -
               4.0 * alt.s2p * (p.n2 + p.n + 1.0) / (p.nm * p.n * p.n1 * p.np2) +
               2.0 * s1 * alt.s2p - 4.0 * alt.stilde + 0.5 * alt.s3p +
               (457.0 * p.n9 + 2742.0 * p.n8 + 6040.0 * p.n7 + 6098.0 * p.n6 + 1567.0 * p.n5 -
                2344.0 * p.n4 - 1632.0 * p.n3 + 560.0 * p.n2 + 1488.0 * p.n + 576.0) /
                   (18.0 * nm_2 * p.n3 * n1_3 * n2_3);
    r.gg_ca_nf = -2.0 * (38.0 * p.n4 + 76.0 * p.n3 + 94.0 * p.n2 + 56.0 * p.n + 12.0) /
                     (9.0 * p.nm * p.n2 * n1_2 * p.np2) +
                 20.0 / 9.0 * s1 - 4.0 / 3.0;
    r.gg_cf_nf = -2.0 * (2.0 * p.n6 + 4.0 * p.n5 + p.n4 - 10.0 * p.n3 - 5.0 * p.n2 - 4.0 * p.n - 4.0) /
                     (p.nm * p.n3 * n1_3 * p.np2) -
                 1.0;
}

}  // namespace

NloSplitting nlo_splitting(Cx n, int nf) {
    const NPowers p(n);
    const Cx s1 = harmonic_s1(n);
    const Cx s2 = harmonic_s2(n);
    const AlternatingSums plus = alternating_sums(n, +1);
    const AlternatingSums minus = alternating_sums(n, -1);
    NloSplitting r;
    r.ns_plus = ns_total(p, s1, s2, plus, +1, nf);
    r.ns_minus = ns_total(p, s1, s2, minus, -1, nf);
    SingletParts sp;
    quark_rows(p, s1, s2, plus, sp);
    gluon_quark_row(p, s1, s2, plus, sp);
    gluon_gluon_row(p, s1, plus, sp);
    const double tnf = kTR * nf;
    r.qq = r.ns_plus + 4.0 * tnf * kCF * sp.ps;
    r.qg = 4.0 * tnf * (kCA * sp.qg_ca + kCF * sp.qg_cf);
    r.gq = 4.0 * (kCF * kCF * sp.gq_cf2 + kCF * kCA * sp.gq_cfca + tnf * kCF * sp.gq_nf);
    r.gg = 4.0 * (kCA * kCA * sp.gg_ca2 + tnf * (kCA * sp.gg_ca_nf + kCF * sp.gg_cf_nf));
    return r;
}

}  // namespace ef::qcd

// SPDX-License-Identifier: MIT
// dis-mellin with the split sea (ubar, dbar, s + sbar each with its own shape) and coefficient
// normalisations: against the symmetric sea where the shapes coincide, the momentum sum rule,
// the isospin of the neutron and the bad-input errors of the new [model] keys.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <ensemblefit/core/error.hpp>

#include "kernels/core/dual.hpp"
#include "kernels/models/dis_mellin.hpp"
#include "src/model/dis_mellin.hpp"
#include "src/model/dis_pdf.hpp"

namespace {

namespace dm = ef::dis_mellin;

std::vector<double> f2_of(const ef::DisMellinSettings& s, const std::vector<double>& rows, const std::vector<double>& p) {
    const ef::DisMellinTheory theory(s, rows);
    const ef::DisMellinModel m = theory.model();
    REQUIRE(m.num_params() == static_cast<int>(p.size()));
    std::vector<double> ws(static_cast<std::size_t>(m.workspace_size()));
    m.prepare(p.data(), ws.data());
    std::vector<double> f2;
    for (int i = 0; i < theory.points(); ++i) f2.push_back(m.value(p.data(), ws.data(), rows.data() + 3 * i, i));
    return f2;
}

ef::DisMellinSettings settings(std::map<std::string, std::string> o) {
    o.emplace("contour", "precise");
    o.emplace("contour_nodes", "24");
    return ef::parse_dis_mellin_settings(o);
}

double worst_relative(const std::vector<double>& a, const std::vector<double>& b) {
    REQUIRE(a.size() == b.size());
    double w = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) w = std::max(w, std::abs(a[i] - b[i]) / std::max(std::abs(a[i]), 1e-300));
    return w;
}

const std::vector<double> kRows = {1e-4, 5.0, 1.0, 1e-3, 3.0, 2.0, 0.02, 40.0, 1.0, 0.1, 30.0, 2.0,
                                   0.3,  500.0, 1.0, 0.5, 800.0, 3.0, 0.7, 12.0, 2.0, 0.85, 100.0, 1.0};

}  // namespace

TEST_CASE("dis-mellin split sea: the default split parameters are the symmetric default PDFs", "[dis][sea]") {
    for (const char* order : {"LO", "NLO"}) {
        INFO(order);
        const ef::DisMellinSettings sym = settings({{"order", order}, {"mt", "175"}});  // both on the qcd:: code
        const ef::DisMellinSettings split = settings({{"order", order}, {"mt", "175"}, {"sea", "split"}});
        REQUIRE(split.layout().basis() == 6);
        REQUIRE(split.layout().params() == 27);
        const std::vector<double> ps = ef::dis_mellin_default_truth(sym);
        const std::vector<double> pp = ef::dis_mellin_default_truth(split);
        REQUIRE(pp.size() == 27);

        CHECK(worst_relative(f2_of(sym, kRows, ps), f2_of(split, kRows, pp)) < 1e-12);

        const std::vector<double> xs = {1e-5, 1e-3, 0.05, 0.3, 0.7};
        const ef::DisPdfEvaluator a(sym, xs, {sym.q0_sq(), 30.0, 1e4});
        const ef::DisPdfEvaluator b(split, xs, {sym.q0_sq(), 30.0, 1e4});
        const std::vector<double> va = a.values(ps.data()), vb = b.values(pp.data());
        for (std::size_t i = 0; i < va.size(); ++i) CHECK(std::abs(va[i] - vb[i]) <= 1e-12 * std::abs(va[i]) + 1e-15);
    }
}

TEST_CASE("dis-mellin split sea: coinciding shapes with other names give the same PDFs", "[dis][sea]") {
    // any common sea shape (not only the default) and any kappa: ubar_N = dbar_N = S / (2 (2 + kappa)) etc.
    const double kappa = 0.8, sea_n = 0.21;
    const ef::DisMellinSettings sym = settings({{"order", "NLO"}, {"strange_fraction", "0.8"}});
    const ef::DisMellinSettings split = settings({{"order", "NLO"}, {"sea", "split"}});
    std::vector<double> ps = ef::dis_mellin_default_truth(sym);
    ps[dm::kSeaN] = sea_n;
    ps[dm::kSeaA] = -1.05;
    ps[dm::kSeaA + 1] = 6.5;
    ps[dm::kSeaA + 2] = 0.7;
    ps[dm::kSeaA + 3] = 1.5;
    std::vector<double> pp = ef::dis_mellin_default_truth(split);
    for (int j = 0; j < 17; ++j) pp[static_cast<std::size_t>(j)] = ps[static_cast<std::size_t>(j)];
    const double ubar = sea_n / (2.0 * (2.0 + kappa));
    pp[dm::kSeaN] = ubar;
    for (int block : {dm::kDbarN, dm::kStrangeN})
        for (int j = 1; j < 5; ++j) pp[static_cast<std::size_t>(block + j)] = ps[static_cast<std::size_t>(dm::kSeaN + j)];
    pp[dm::kDbarN] = ubar;
    pp[dm::kStrangeN] = 2.0 * kappa * ubar;

    CHECK(worst_relative(f2_of(sym, kRows, ps), f2_of(split, kRows, pp)) < 1e-12);
}

TEST_CASE("dis-mellin split sea: momentum sum rule with the gluon from it, at Q0 and after NLO evolution", "[dis][sea]") {
    const ef::DisMellinSettings s = settings({{"order", "NLO"}, {"sea", "split"}});
    std::vector<double> p = ef::dis_mellin_default_truth(s);
    p[dm::kSeaN] = 0.025;  // ubar
    p[dm::kDbarN] = 0.041;
    p[dm::kDbarN + 2] = 6.0;
    p[dm::kStrangeN] = 0.02;
    p[dm::kStrangeN + 1] = -1.0;
    const ef::DisMellinModel m = ef::DisMellinTheory(s, {0.1, 10.0, 1.0}).model();
    const dm::Normalisation<double> nrm = m.normalisation(p.data());
    ef::Complex<double> q[dm::kMaxBasis];
    dm::input_moments(p.data(), nrm, ef::Complex<double>(2.0), q, m.layout);
    CHECK(std::abs(q[dm::kBasisSea].re - 0.025) < 1e-14);
    CHECK(std::abs(q[dm::kBasisDbar].re - 0.041) < 1e-14);
    CHECK(std::abs(q[dm::kBasisStrange].re - 0.02) < 1e-14);
    const double total = q[dm::kBasisUv].re + q[dm::kBasisDv].re + 2 * q[dm::kBasisSea].re + 2 * q[dm::kBasisDbar].re +
                         q[dm::kBasisStrange].re + q[dm::kBasisGluon].re;
    CHECK(std::abs(total - 1.0) < 1e-13);
    dm::input_moments(p.data(), nrm, ef::Complex<double>(1.0), q, m.layout);
    CHECK(std::abs(q[dm::kBasisUv].re - 2.0) < 1e-13);
    CHECK(std::abs(q[dm::kBasisDv].re - 1.0) < 1e-13);

    // evolved: sum over flavours of q+ plus g at N = 2 stays 1
    const auto unit = ef::dis_qcd_basis(s);
    dm::input_moments(p.data(), nrm, ef::Complex<double>(2.0), q, m.layout);
    ef::qcd::PartonMoments in{};
    for (int b = 0; b < 6; ++b) {
        for (int f = 0; f < ef::qcd::kFlavours; ++f) {
            in.qp[f] += q[b].re * unit[static_cast<std::size_t>(b)].qp[f];
            in.qm[f] += q[b].re * unit[static_cast<std::size_t>(b)].qm[f];
        }
        in.g += q[b].re * unit[static_cast<std::size_t>(b)].g;
    }
    for (double q2 : {2.0, 30.0, 1e4}) {
        const ef::qcd::PartonMoments out = ef::qcd::evolve_moments(2.0, s.q0_sq(), q2, in, s.qcd());
        ef::qcd::Cx sum = out.g;
        for (int f = 0; f < ef::qcd::kFlavours; ++f) sum += out.qp[f];
        INFO("Q2 = " << q2);
        CHECK(std::abs(sum - 1.0) < 1e-10);
    }
}

TEST_CASE("dis-mellin split sea: the neutron swaps ubar and dbar as well as u_v and d_v", "[dis][sea]") {
    const ef::DisMellinSettings s = settings({{"order", "NLO"}, {"sea", "split"}});
    std::vector<double> p = ef::dis_mellin_default_truth(s);
    p[dm::kDbarN] = 0.045;
    p[dm::kDbarN + 2] = 6.0;
    // the valence normalisations follow the number sum rules (u_v: 2, d_v: 1): use coefficients
    // so that the swap moves the distributions themselves.
    const ef::DisMellinSettings c = settings({{"order", "NLO"}, {"sea", "split"}, {"pdf_norm", "coefficients"}});
    std::vector<double> pc = ef::dis_mellin_default_truth(c), sc;
    for (std::size_t j = 0; j < 27; ++j) pc[j] = p[j];
    pc[dm::kSeaN] = 0.1;
    pc[dm::kDbarN] = 0.2;
    sc = pc;
    for (int j = 0; j < 4; ++j) std::swap(sc[static_cast<std::size_t>(dm::kUvA + j)], sc[static_cast<std::size_t>(dm::kDvA + j)]);
    for (int j = 0; j < 5; ++j) std::swap(sc[static_cast<std::size_t>(dm::kSeaN + j)], sc[static_cast<std::size_t>(dm::kDbarN + j)]);
    std::swap(sc[27], sc[28]);  // uv_N <-> dv_N

    const std::vector<double> neutron = {0.01, 20.0, 2.0, 0.2, 50.0, 2.0, 0.6, 200.0, 2.0};
    const std::vector<double> proton = {0.01, 20.0, 1.0, 0.2, 50.0, 1.0, 0.6, 200.0, 1.0};
    const std::vector<double> fn = f2_of(c, neutron, pc), fp = f2_of(c, proton, sc);

    CHECK(worst_relative(fn, fp) < 1e-12);
    CHECK(worst_relative(f2_of(c, proton, pc), fp) > 1e-3);  // the asymmetry is visible
}

TEST_CASE("dis-mellin coefficient normalisations equal the sum rules at the sum rules' coefficients", "[dis][sea]") {
    for (const char* sea : {"symmetric", "split"}) {
        INFO(sea);
        const ef::DisMellinSettings rules = settings({{"order", "NLO"}, {"sea", sea}});
        const ef::DisMellinSettings coef = settings({{"order", "NLO"}, {"sea", sea}, {"pdf_norm", "coefficients"}});
        REQUIRE(coef.layout().params() == rules.layout().params() + 3);
        const std::vector<std::string> names = ef::dis_mellin_param_names(coef);
        CHECK(names[names.size() - 3] == "uv_N");
        CHECK(names.back() == "g_N");

        CHECK(worst_relative(f2_of(rules, kRows, ef::dis_mellin_default_truth(rules)),
                             f2_of(coef, kRows, ef::dis_mellin_default_truth(coef))) < 1e-12);
    }
}

TEST_CASE("dis-mellin split sea: the Jacobian by duals matches finite differences", "[dis][sea]") {
    const ef::DisMellinSettings s = settings({{"order", "NLO"}, {"sea", "split"}});
    const ef::DisMellinTheory theory(s, kRows);
    const ef::DisMellinModel m = theory.model();
    const std::vector<double> p = ef::dis_mellin_default_truth(s);
    using D = ef::Dual<double, 4>;
    for (int q : {dm::kSeaN, dm::kDbarN + 1, dm::kStrangeN + 2, dm::kGluonA}) {
        std::vector<D> pd(p.begin(), p.end());
        pd[static_cast<std::size_t>(q)].d[0] = 1.0;
        std::vector<D> ws(static_cast<std::size_t>(m.workspace_size()));
        m.prepare(pd.data(), ws.data());
        const double h = 1e-6;
        std::vector<double> up = p, dn = p;
        up[static_cast<std::size_t>(q)] += h;
        dn[static_cast<std::size_t>(q)] -= h;
        const std::vector<double> fu = f2_of(s, kRows, up), fd = f2_of(s, kRows, dn);
        for (int i = 0; i < theory.points(); ++i) {
            const D v = m.value(pd.data(), ws.data(), kRows.data() + 3 * i, i);
            const double fdiff = (fu[static_cast<std::size_t>(i)] - fd[static_cast<std::size_t>(i)]) / (2 * h);
            INFO("parameter " << q << " point " << i);
            CHECK(std::abs(v.d[0] - fdiff) < 1e-6 * (std::abs(fdiff) + std::abs(v.v)));
        }
    }
}

TEST_CASE("dis-mellin sea and pdf_norm keys: bad values and split bounds are refused in one line", "[dis][sea]") {
    for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{{"sea", "asymmetric"}, {"pdf_norm", "free"}}) {
        try {
            ef::parse_dis_mellin_settings({{key, value}});
            FAIL("accepted " << key << " = " << value);
        } catch (const ef::Error& e) {
            CHECK(std::string(e.what()).rfind("model." + key + ": '" + value + "' is not allowed", 0) == 0);
            CHECK(e.code() == ef::ExitCode::usage);
        }
    }
    const ef::DisMellinSettings s = ef::parse_dis_mellin_settings({{"sea", "split"}});
    CHECK(s.uses_qcd());  // the split basis is built by the qcd:: code
    const std::vector<std::string> names = ef::dis_mellin_param_names(s);
    std::vector<double> start = ef::dis_mellin_default_truth(s), lower = start;
    lower[dm::kDbarN + 1] = -2.5;  // dbar_a below -contour_c
    try {
        ef::check_dis_mellin_bounds(names, lower, start, s);
        FAIL("accepted dbar_a.lower = -2.5");
    } catch (const ef::Error& e) {
        CHECK(std::string(e.what()).rfind("param.dbar_a.lower: must be > -1.9", 0) == 0);
    }
    lower = start;
    lower[dm::kStrangeN + 2] = -1.5;  // s_b
    CHECK_THROWS_WITH(ef::check_dis_mellin_bounds(names, lower, start, s), Catch::Contains("param.s_b.lower"));
}

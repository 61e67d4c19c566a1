// SPDX-License-Identifier: MIT
// The normal-equations LM ([fit] solver = normal) in double and float: exactness on a line,
// bounds, fixed parameters, failures, and on the many-small-fits problem (inputs/spot.ini) its
// agreement with the QR solver and the accuracy that float gives up.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <ensemblefit/config/fit_config.hpp>
#include <ensemblefit/core/error.hpp>
#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/io/data_table.hpp>

#include "kernels/cpu/fit_kernels.hpp"
#include "src/fit/fit_plan.hpp"

namespace {

using Strings = std::vector<std::string>;

ef::ReplicaBlock fit_range(const ef::FitProblem& pb, std::int64_t first, std::int64_t last, int threads = 2) {
    std::vector<std::int64_t> reps;
    for (std::int64_t r = first; r <= last; ++r) reps.push_back(r);
    ef::ReplicaBlock out;
    const ef::FitPlan plan = ef::make_fit_plan(pb);
    ef::cpu::fit_replicas(plan, ef::fit_inputs(pb, plan), reps.data(), static_cast<int>(reps.size()), threads, out);
    return out;
}

ef::FitProblem load(const std::string& ini, const Strings& overrides) {
    const ef::FitConfig cfg = ef::load_fit_config(std::string(EF_SOURCE_DIR) + "/" + ini, overrides);
    return ef::make_fit_problem(cfg, ef::load_data(cfg));
}

ef::FitConfig line_config(const Strings& solver) {
    ef::FitConfig c = ef::load_fit_config(std::string(EF_SOURCE_DIR) + "/inputs/example.ini", {});
    c.model_name = "linear";
    c.params.resize(2);
    c.params[0] = ef::ParamSpec{"a", 0.0};
    c.params[1] = ef::ParamSpec{"b", 0.0};
    c.replicas = 0;
    c.solver = ef::FitSolver::normal;
    c.precision = solver.front() == "float" ? ef::FitPrecision::float32 : ef::FitPrecision::float64;
    return c;
}

ef::DataTable line_data(std::vector<double> x, std::vector<double> y) {
    ef::DataTable d;
    d.n = static_cast<int>(x.size());
    d.nx = 1;
    d.x_names = {"x"};
    d.x = std::move(x);
    d.y = std::move(y);
    d.sigma.assign(static_cast<size_t>(d.n), 1.0);
    d.checksum = ef::checksum_of(d);
    return d;
}

/// Per parameter: the largest |a - b| over the replicas, in units of the reference ensemble's
/// standard deviation.
std::vector<double> max_diff_in_sigma(const ef::ReplicaBlock& a, const ef::ReplicaBlock& ref) {
    const size_t P = static_cast<size_t>(ref.P), R = ref.size();
    std::vector<double> out(P, 0.0);
    for (size_t q = 0; q < P; ++q) {
        double m = 0, m2 = 0;
        for (size_t i = 0; i < R; ++i) m += ref.params[i * P + q];
        m /= static_cast<double>(R);
        for (size_t i = 0; i < R; ++i) m2 += (ref.params[i * P + q] - m) * (ref.params[i * P + q] - m);
        const double sd = std::sqrt(m2 / static_cast<double>(R - 1));
        for (size_t i = 0; i < R; ++i)
            out[q] = std::max(out[q], std::fabs(a.params[i * P + q] - ref.params[i * P + q]) / sd);
    }
    return out;
}

}  // namespace

TEST_CASE("normal solver: a line is exact and its covariance is (X^T W X)^-1", "[normal]") {
    const auto precision = GENERATE(as<std::string>{}, "double", "float");
    const double tol = precision == "float" ? 1e-6 : 1e-12;
    const ef::FitProblem pb = ef::make_fit_problem(line_config({precision}), line_data({0, 1, 2}, {1, 3, 5}));
    const ef::ReplicaBlock out = fit_range(pb, 0, 0);
    INFO(precision);
    CHECK(out.status[0] == 0);
    CHECK(out.params[0] == Approx(1.0).margin(tol));
    CHECK(out.params[1] == Approx(2.0).margin(tol));
    REQUIRE(out.covariance.size() == 4);
    CHECK(out.covariance[0] == Approx(5.0 / 6).epsilon(tol));
    CHECK(out.covariance[1] == Approx(-3.0 / 6).epsilon(tol));
    CHECK(out.covariance[3] == Approx(3.0 / 6).epsilon(tol));
}

TEST_CASE("normal solver: bounds hold exactly, fixed parameters keep their start", "[normal]") {
    const auto precision = GENERATE(as<std::string>{}, "double", "float");
    INFO(precision);
    const ef::DataTable d = line_data({0, 0.25, 0.5, 0.75, 1}, {1.01, 1.49, 2.02, 2.5, 2.99});
    ef::FitConfig c = line_config({precision});
    c.params[1] = ef::ParamSpec{"b", 0.5, 0.1, 1.3};
    ef::ReplicaBlock out = fit_range(ef::make_fit_problem(c, d), 0, 0);
    CHECK(out.status[0] == 0);
    CHECK(out.params[1] == 1.3);  // the double bound, not its float rounding
    CHECK(out.params[0] == Approx(2.0 - 0.5 * 1.3).margin(0.02));

    c = line_config({precision});
    c.params[0] = ef::ParamSpec{"a", 0.7, -INFINITY, INFINITY, true};
    out = fit_range(ef::make_fit_problem(c, d), 0, 0);
    CHECK(out.params[0] == 0.7);  // exactly, in float too
    CHECK(out.covariance[0] == 0.0);
    CHECK(out.covariance[3] > 0.0);
}

TEST_CASE("normal solver: non-finite models fail, iteration limits stop, the run goes on", "[normal]") {
    const auto precision = GENERATE(as<std::string>{}, "double", "float");
    INFO(precision);
    const Strings prec = {"--fit.precision", precision, "--fit.solver", "normal", "--fit.replicas", "3"};
    Strings o = prec;
    o.insert(o.end(), {"--model.formula", "b1*(1-exp(-b2*x)) + log(b2 - 1)"});
    for (auto s : fit_range(load("inputs/nist/Misra1a.start2.ini", o), 0, 3).status) CHECK(s == 2);
    o = prec;
    o.insert(o.end(), {"--fit.max_iterations", "2"});
    const auto capped = fit_range(load("inputs/nist/Misra1a.start1.ini", o), 0, 3);
    for (size_t i = 0; i < capped.size(); ++i) {
        CHECK(capped.status[i] == 1);
        CHECK(capped.iterations[i] == 2);
    }
}

TEST_CASE("normal solver on 2000 spot fits: = QR in double, float within 5% of the spread", "[normal][spot]") {
    const Strings n2000 = {"--fit.replicas", "2000"};
    auto with = [&](Strings extra) {
        extra.insert(extra.begin(), n2000.begin(), n2000.end());
        return fit_range(load("inputs/spot.ini", extra), 0, 2000);
    };
    const ef::ReplicaBlock qr = with({});
    const ef::ReplicaBlock nd = with({"--fit.solver", "normal"});
    const ef::ReplicaBlock nf = with({"--fit.precision", "float"});
    const ef::ReplicaBlock builtin = with({"--fit.solver", "normal", "--model.name", "gaussian2d"});
    for (const auto* b : {&qr, &nd, &nf, &builtin})
        for (auto s : b->status) REQUIRE(s == 0);
    const auto d_normal = max_diff_in_sigma(nd, qr);
    const auto d_float = max_diff_in_sigma(nf, qr);
    const auto d_builtin = max_diff_in_sigma(builtin, nd);
    for (size_t q = 0; q < 5; ++q) {
        INFO("parameter " << q << ": normal " << d_normal[q] << ", float " << d_float[q] << ", builtin "
                          << d_builtin[q] << " (in ensemble standard deviations)");
        CHECK(d_normal[q] < 1e-5);   // measured <= 9e-7: both converged to the same minimum
        CHECK(d_float[q] < 0.05);    // measured <= 0.016: float's stopping point
        CHECK(d_builtin[q] < 1e-5);  // the compiled 2-D Gaussian = the interpreted formula
    }
    // Float gives up accuracy, so it must differ from double somewhere (a float run that
    // silently fell back to double would pass every check above).
    CHECK(*std::max_element(d_float.begin(), d_float.end()) > 1e-6);

    // Bootstrap weights in float: the same minimum as the QR solver's, within float's reach.
    const ef::ReplicaBlock bq = with({"--fit.resample", "bootstrap", "--fit.replicas", "300"});
    const ef::ReplicaBlock bf =
        with({"--fit.resample", "bootstrap", "--fit.replicas", "300", "--fit.precision", "float"});
    for (double d : max_diff_in_sigma(bf, bq)) CHECK(d < 0.05);
}

TEST_CASE("solver and precision keys: clear errors", "[normal][config]") {
    const std::string ini = std::string(EF_SOURCE_DIR) + "/inputs/spot.ini";
    using Catch::Matchers::Contains;
    REQUIRE_THROWS_WITH(ef::load_fit_config(ini, {"--fit.precision", "half"}),
                        Contains("fit.precision") && Contains("unknown precision 'half'"));
    REQUIRE_THROWS_WITH(ef::load_fit_config(ini, {"--fit.precision", "float", "--fit.solver", "qr"}),
                        Contains("fit.solver") && Contains("needs solver = normal"));
    REQUIRE_THROWS_WITH(ef::load_fit_config(ini, {"--fit.solver", "svd"}), Contains("unknown solver 'svd'"));
    CHECK(ef::load_fit_config(ini, {"--fit.precision", "float"}).solver == ef::FitSolver::normal);
    CHECK(ef::load_fit_config(ini, {}).solver == ef::FitSolver::qr);
    // Only non-default settings enter the canonical text (files from before still match).
    CHECK(ef::load_fit_config(ini, {}).canonical_text().find("solver") == std::string::npos);
    CHECK(ef::load_fit_config(ini, {"--fit.precision", "float"}).canonical_text().find("precision = float") !=
          std::string::npos);
    // dis-mellin fits in double only (its normal-equations path is tests/unit/test_dis_fit.cpp's).
    REQUIRE_THROWS_WITH(load("inputs/dis-mellin.ini", {"--fit.precision", "float"}),
                        Contains("fit.precision") && Contains("double only"));
}

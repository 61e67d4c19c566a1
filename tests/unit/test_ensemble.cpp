// SPDX-License-Identifier: MIT
// Ensemble statistics, resampling and LM behaviour on problems small enough to reason about.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/core/ensemble_summary.hpp>

#include "kernels/cpu/fit_kernels.hpp"
#include "kernels/fit/resample.hpp"
#include "src/fit/fit_plan.hpp"

namespace {

ef::ParamSpec param(const char* name, double start, double lower = -INFINITY, double upper = INFINITY,
                    bool fixed = false) {
    ef::ParamSpec p;
    p.name = name;
    p.start = start;
    p.lower = lower;
    p.upper = upper;
    p.fixed = fixed;
    return p;
}

/// y = a + b x at n points in [0, 1] with noise sigma drawn from a Philox stream `dataset`.
ef::DataTable line_data(int n, double a, double b, double sigma, std::uint64_t dataset) {
    ef::DataTable d;
    d.n = n;
    d.nx = 1;
    d.x_names = {"x"};
    const ef::ReplicaRng rng(0xda7a, dataset);
    for (int i = 0; i < n; ++i) {
        const double x = static_cast<double>(i) / (n - 1);
        d.x.push_back(x);
        d.y.push_back(a + b * x + sigma * rng.normal(static_cast<std::uint64_t>(i)));
        d.sigma.push_back(sigma);
    }
    d.checksum = ef::checksum_of(d);
    return d;
}

ef::FitConfig line_config(ef::ResampleMethod method, std::uint64_t seed, long long replicas) {
    ef::FitConfig c;
    c.config_file = "test";
    c.model_name = "linear";
    c.x_columns = {"x"};
    c.params = {param("a", 0.0), param("b", 0.0)};
    c.replicas = replicas;
    c.resample = method;
    c.seed = seed;
    return c;
}

ef::ReplicaBlock fit_all(const ef::FitProblem& pb, std::int64_t first, std::int64_t last) {
    std::vector<std::int64_t> reps;
    for (std::int64_t r = first; r <= last; ++r) reps.push_back(r);
    ef::ReplicaBlock out;
    const ef::FitPlan plan = ef::make_fit_plan(pb);
    ef::cpu::fit_replicas(plan, ef::fit_inputs(pb, plan), reps.data(), static_cast<int>(reps.size()), 2, out);
    return out;
}

/// Fraction of datasets whose replicas' 16-84% interval holds the truth, per parameter.
std::pair<double, double> coverage(ef::ResampleMethod method, int datasets, int points, int replicas) {
    const double a = 1.0, b = 2.0;
    int hit_a = 0, hit_b = 0;
    for (int d = 0; d < datasets; ++d) {
        const ef::FitProblem pb = ef::make_fit_problem(line_config(method, 100 + d, replicas),
                                                       line_data(points, a, b, 0.3, static_cast<std::uint64_t>(d)));
        const ef::ReplicaBlock out = fit_all(pb, 1, replicas);
        const ef::EnsembleSummary s = ef::summarize(out.params, out.status, 2);
        REQUIRE(s.used == replicas);
        hit_a += (s.quantiles[2] <= a && a <= s.quantiles[6]) ? 1 : 0;   // rows 16% and 84%
        hit_b += (s.quantiles[3] <= b && b <= s.quantiles[7]) ? 1 : 0;
    }
    return {static_cast<double>(hit_a) / datasets, static_cast<double>(hit_b) / datasets};
}

}  // namespace

TEST_CASE("replicas' 68% intervals cover the truth 68% +- 5% of the time", "[statistics]") {
    SECTION("smear (Monte Carlo replicas)") {
        const auto [ca, cb] = coverage(ef::ResampleMethod::smear, 1000, 20, 200);
        INFO("coverage a " << ca << ", b " << cb);
        CHECK(ca == Approx(0.68).margin(0.05));
        CHECK(cb == Approx(0.68).margin(0.05));
    }
    SECTION("bootstrap (points drawn with replacement)") {
        const auto [ca, cb] = coverage(ef::ResampleMethod::bootstrap, 1000, 80, 200);
        INFO("coverage a " << ca << ", b " << cb);
        CHECK(ca == Approx(0.68).margin(0.05));
        CHECK(cb == Approx(0.68).margin(0.05));
    }
}

TEST_CASE("a replica is a pure function of (seed, replica)", "[resample]") {
    const ef::FitProblem pb =
        ef::make_fit_problem(line_config(ef::ResampleMethod::bootstrap, 7, 50), line_data(30, 1, 2, 0.3, 1));

    const ef::ReplicaBlock all = fit_all(pb, 0, 50);
    const std::int64_t picked[] = {37, 3, 0};
    ef::ReplicaBlock some;
    const ef::FitPlan plan = ef::make_fit_plan(pb);
    ef::cpu::fit_replicas(plan, ef::fit_inputs(pb, plan), picked, 3, 1, some);

    for (int k = 0; k < 3; ++k)
        for (int q = 0; q < 2; ++q)
            CHECK(some.params[static_cast<size_t>(k * 2 + q)] == all.params[static_cast<size_t>(picked[k] * 2 + q)]);
    CHECK(all.params[0] != all.params[2]);  // replica 1 differs from the central fit
}

TEST_CASE("resampling: smear has unit normal deviates, bootstrap draws n points", "[resample]") {
    const int n = 20000;
    std::vector<double> y(n, 0.0), s(n, 1.0), yo(n), w(n);

    ef::resample_replica(0, 11, 5, n, y.data(), s.data(), yo.data(), w.data());
    double m = 0, v = 0;
    for (double z : yo) m += z;
    m /= n;
    for (double z : yo) v += (z - m) * (z - m);
    v /= n - 1;
    CHECK(std::fabs(m) < 4.0 / std::sqrt(n));
    CHECK(v == Approx(1.0).margin(0.03));

    ef::resample_replica(1, 11, 5, n, y.data(), s.data(), yo.data(), w.data());
    double total = 0, zeros = 0;
    for (double c : w) {
        total += c;
        zeros += c == 0 ? 1 : 0;
    }
    CHECK(total == n);
    CHECK(zeros / n == Approx(std::exp(-1.0)).margin(0.01));  // P(point never drawn) -> 1/e

    ef::resample_replica(1, 11, 0, n, y.data(), s.data(), yo.data(), w.data());
    CHECK(w[0] == 1.0);  // replica 0 is the data as given
}

TEST_CASE("LM on a straight line is exact and its covariance is (X^T W X)^-1", "[lm]") {
    ef::DataTable d;
    d.n = 3;
    d.nx = 1;
    d.x_names = {"x"};
    d.x = {0, 1, 2};
    d.y = {1, 3, 5};  // a = 1, b = 2 exactly
    d.sigma = {1, 1, 1};
    const ef::FitProblem pb = ef::make_fit_problem(line_config(ef::ResampleMethod::smear, 1, 0), d);

    const ef::ReplicaBlock out = fit_all(pb, 0, 0);

    CHECK(out.status[0] == 0);
    CHECK(out.params[0] == Approx(1.0).epsilon(1e-12));
    CHECK(out.params[1] == Approx(2.0).epsilon(1e-12));
    CHECK(out.chi2[0] < 1e-20);
    // X^T X = [[3, 3], [3, 5]], inverse = [[5, -3], [-3, 3]] / 6
    REQUIRE(out.covariance.size() == 4);
    CHECK(out.covariance[0] == Approx(5.0 / 6));
    CHECK(out.covariance[1] == Approx(-3.0 / 6));
    CHECK(out.covariance[3] == Approx(3.0 / 6));
}

TEST_CASE("LM respects bounds and fixed parameters", "[lm]") {
    ef::DataTable d = line_data(10, 1.0, 2.0, 0.01, 3);

    SECTION("slope capped below its optimum ends on the bound") {
        ef::FitConfig c = line_config(ef::ResampleMethod::smear, 1, 0);
        c.params[1] = param("b", 0.5, 0.0, 1.5);
        const ef::ReplicaBlock out = fit_all(ef::make_fit_problem(c, d), 0, 0);
        CHECK(out.status[0] == 0);
        CHECK(out.params[1] == 1.5);
        // With b held at 1.5 the best intercept is mean(y - 1.5 x) ~ 1 + 0.5 * mean(x) = 1.25.
        CHECK(out.params[0] == Approx(1.25).margin(0.02));
    }
    SECTION("a fixed parameter keeps its start value") {
        ef::FitConfig c = line_config(ef::ResampleMethod::smear, 1, 0);
        c.params[0] = param("a", 0.7, -INFINITY, INFINITY, true);
        const ef::ReplicaBlock out = fit_all(ef::make_fit_problem(c, d), 0, 0);
        CHECK(out.params[0] == 0.7);
        CHECK(out.covariance[0] == 0.0);
        CHECK(out.covariance[3] > 0.0);
    }
}

TEST_CASE("non-finite models and iteration limits mark the replica, never stop the run", "[lm]") {
    ef::DataTable d = line_data(10, 1.0, 2.0, 0.1, 4);
    ef::FitConfig c = line_config(ef::ResampleMethod::smear, 1, 3);
    c.model_name = "formula";

    SECTION("log of a negative number at the start: failed") {
        c.formula = "a + log(b - 5)*x";
        const ef::ReplicaBlock out = fit_all(ef::make_fit_problem(c, d), 0, 3);
        for (auto s : out.status) CHECK(s == 2);
    }
    SECTION("one iteration allowed on a nonlinear model: max_iterations") {
        c.formula = "a*exp(b*x)";
        c.params = {param("a", 1.0), param("b", 0.1)};
        c.max_iterations = 1;
        const ef::ReplicaBlock out = fit_all(ef::make_fit_problem(c, d), 0, 3);
        for (auto s : out.status) CHECK(s == 1);
    }
}

TEST_CASE("summary statistics: mean, std, covariance and interpolated quantiles", "[statistics]") {
    // Five converged replicas of one parameter and one failed replica that must be ignored.
    const std::vector<double> params = {1, 2, 3, 4, 10, 1000};
    const std::vector<std::int64_t> status = {0, 0, 0, 0, 0, 2};

    const ef::EnsembleSummary s = ef::summarize(params, status, 1);

    CHECK(s.used == 5);
    CHECK(s.mean[0] == Approx(4.0));
    CHECK(s.std[0] == Approx(std::sqrt(12.5)));  // sum of squares 50 / (5 - 1)
    CHECK(s.quantiles[2] == Approx(3.0));        // median
    CHECK(s.quantiles[1] == Approx(1.64));       // 16%: h = 0.64 between 1 and 2
    CHECK(s.quantiles[4] == Approx(9.4));        // 97.5%: h = 3.9 between 4 and 10
}

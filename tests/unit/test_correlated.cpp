// SPDX-License-Identifier: MIT
// Correlated systematics, normalisations and a full covariance: the Cholesky factor, whitening,
// replicas that carry the correlated shifts, and coverage of the truth.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include <ensemblefit/core/error.hpp>
#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/core/ensemble_summary.hpp>

#include "kernels/cpu/fit_kernels.hpp"
#include "kernels/fit/resample.hpp"
#include "src/fit/correlated.hpp"
#include "src/fit/fit_plan.hpp"

namespace {

/// n sigmas and an n x K shift matrix from a Philox stream: shifts comparable to the sigmas.
void random_structure(int n, int K, std::vector<double>& sigma, std::vector<double>& B) {
    const ef::ReplicaRng rng(77, 1);
    sigma.resize(static_cast<size_t>(n));
    B.resize(static_cast<size_t>(n) * static_cast<size_t>(K));
    for (int i = 0; i < n; ++i) sigma[static_cast<size_t>(i)] = 0.5 + std::fabs(rng.normal(static_cast<std::uint64_t>(i)));
    for (size_t j = 0; j < B.size(); ++j) B[j] = 0.7 * rng.normal(1000 + j);
}

std::vector<double> dense_covariance(const std::vector<double>& sigma, const std::vector<double>& B, int K) {
    const size_t n = sigma.size();
    std::vector<double> C(n * n, 0.0);
    for (size_t i = 0; i < n; ++i) {
        C[i * n + i] = sigma[i] * sigma[i];
        for (size_t j = 0; j < n; ++j)
            for (size_t k = 0; k < static_cast<size_t>(K); ++k) C[i * n + j] += B[i * K + k] * B[j * K + k];
    }
    return C;
}

/// r^T C^-1 r by Gaussian elimination with partial pivoting (no Cholesky anywhere).
double direct_chi2(std::vector<double> C, std::vector<double> r) {
    const size_t n = r.size();
    std::vector<double> x = r;
    for (size_t c = 0; c < n; ++c) {
        size_t piv = c;
        for (size_t i = c + 1; i < n; ++i)
            if (std::fabs(C[i * n + c]) > std::fabs(C[piv * n + c])) piv = i;
        for (size_t j = 0; j < n; ++j) std::swap(C[c * n + j], C[piv * n + j]);
        std::swap(x[c], x[piv]);
        for (size_t i = c + 1; i < n; ++i) {
            const double f = C[i * n + c] / C[c * n + c];
            for (size_t j = c; j < n; ++j) C[i * n + j] -= f * C[c * n + j];
            x[i] -= f * x[c];
        }
    }
    for (size_t c = n; c-- > 0;) {
        double s = x[c];
        for (size_t j = c + 1; j < n; ++j) s -= C[c * n + j] * x[j];
        x[c] = s / C[c * n + c];
    }
    double chi2 = 0.0;
    for (size_t i = 0; i < n; ++i) chi2 += r[i] * x[i];
    return chi2;
}

ef::ParamSpec param(const char* name, double start) {
    ef::ParamSpec p;
    p.name = name;
    p.start = start;
    return p;
}

/// y = a + b x on n points in two datasets (normalisation 5 % and 3 %), one additive
/// systematic (a tilt) and one multiplicative (2 % rising with x); pseudo-data drawn with each
/// source's shift explicit (not through the fit's factor), from Philox stream `dataset`.
struct LineProblem {
    ef::FitConfig cfg;
    ef::DataTable data;
    ef::CorrelatedInputs in;
};

LineProblem correlated_line(int n, std::uint64_t dataset, long long replicas) {
    const double a = 1.0, b = 2.0, sigma = 0.05;
    LineProblem lp;
    ef::FitConfig& c = lp.cfg;
    c.config_file = "test";
    c.model_name = "linear";
    c.x_columns = {"x"};
    c.params = {param("a", a), param("b", b)};  // the start is the truth: t0 = the true prediction
    c.replicas = replicas;
    c.seed = 11;
    c.systematics = {"tilt", "slope"};
    c.systematic_mult = {0, 1};
    c.dataset_column = "set";
    c.normalisations = {{"1", 0.05}, {"2", 0.03}};
    ef::DataTable& d = lp.data;
    d.n = n;
    d.nx = 1;
    const ef::ReplicaRng rng(0xc0, dataset);
    const double xi[4] = {rng.normal(1000001), rng.normal(1000002), rng.normal(1000003), rng.normal(1000004)};
    lp.in.n = n;
    lp.in.S = 2;
    for (int i = 0; i < n; ++i) {
        const double x = static_cast<double>(i) / (n - 1);
        const int set = i < n / 2 ? 1 : 2;
        const double truth = a + b * x;
        const double tilt = 0.04 * (x - 0.5), slope = 0.02 * x;
        const double norm = set == 1 ? 0.05 : 0.03;
        d.x.push_back(x);
        d.y.push_back(truth * (1.0 + norm * xi[set - 1]) + tilt * xi[2] + slope * truth * xi[3] +
                      sigma * rng.normal(static_cast<std::uint64_t>(i)));
        d.sigma.push_back(sigma);
        lp.in.syst.push_back(tilt);
        lp.in.syst.push_back(slope);
        lp.in.dataset.push_back(set);
    }
    lp.in.norm_rows = {n / 2, n - n / 2};
    d.checksum = ef::checksum_of(d);
    return lp;
}

ef::ReplicaBlock fit_range(const ef::FitProblem& pb, std::int64_t first, std::int64_t last) {
    std::vector<std::int64_t> reps;
    for (std::int64_t r = first; r <= last; ++r) reps.push_back(r);
    ef::ReplicaBlock out;
    const ef::FitPlan plan = ef::make_fit_plan(pb);
    ef::cpu::fit_replicas(plan, ef::fit_inputs(pb, plan), reps.data(), static_cast<int>(reps.size()), 1, out);
    return out;
}

ef::FitProblem whitened(LineProblem lp) {
    ef::FitProblem pb = ef::make_fit_problem(lp.cfg, lp.data);
    ef::whiten_problem(pb, lp.in, 1);
    return pb;
}

}  // namespace

TEST_CASE("chi2 through the whitening factor equals r^T C^-1 r", "[correlated]") {
    const int n = 60, K = 6;
    std::vector<double> sigma, B;
    random_structure(n, K, sigma, B);
    const std::vector<double> C = dense_covariance(sigma, B, K);
    std::vector<double> r(static_cast<size_t>(n));
    const ef::ReplicaRng rng(5, 5);
    for (int i = 0; i < n; ++i) r[static_cast<size_t>(i)] = rng.normal(static_cast<std::uint64_t>(i));

    const double direct = direct_chi2(C, r);
    const ef::Whitening structured = ef::structured_whitening(sigma, B, K);
    const ef::Whitening dense = ef::dense_whitening(C, n, "test");

    CHECK(ef::whitened_chi2(structured.view, r) == Approx(direct).epsilon(1e-12));
    CHECK(ef::whitened_chi2(dense.view, r) == Approx(direct).epsilon(1e-12));
}

TEST_CASE("the structured factor is the Cholesky factor of diag(sigma^2) + B B^T", "[correlated]") {
    const int n = 25, K = 3;
    std::vector<double> sigma, B;
    random_structure(n, K, sigma, B);
    const ef::Whitening s = ef::structured_whitening(sigma, B, K);
    const ef::Whitening d = ef::dense_whitening(dense_covariance(sigma, B, K), n, "test");

    // L e_j column by column from the structured form: L_jj = sigma_j d_j, L_ij = sigma_i a_i . v_j.
    double worst = 0.0;
    for (int i = 0; i < n; ++i)
        for (int j = 0; j <= i; ++j) {
            double l = 0.0;
            if (i == j) l = sigma[static_cast<size_t>(i)] * s.d[static_cast<size_t>(i)];
            else
                for (int k = 0; k < K; ++k)
                    l += sigma[static_cast<size_t>(i)] * s.a[static_cast<size_t>(i * K + k)] * s.v[static_cast<size_t>(j * K + k)];
            worst = std::fmax(worst, std::fabs(l - d.dense[static_cast<size_t>(i * n + j)]));
        }

    CHECK(worst < 1e-12);
}

TEST_CASE("whitening a table column by column gives whiten_in_place's bits", "[correlated]") {
    const int n = 40, K = 4;
    const long cols = 37;  // not a multiple of the block
    std::vector<double> sigma, B;
    random_structure(n, K, sigma, B);
    const ef::Whitening w = ef::structured_whitening(sigma, B, K);
    std::vector<double> T(static_cast<size_t>(n * cols));
    const ef::ReplicaRng rng(9, 9);
    for (size_t j = 0; j < T.size(); ++j) T[j] = rng.normal(j);
    std::vector<double> byrow = T;

    ef::whiten_columns(w.view, byrow.data(), cols, 2);

    for (long c = 0; c < cols; ++c) {
        std::vector<double> col(static_cast<size_t>(n));
        for (int i = 0; i < n; ++i) col[static_cast<size_t>(i)] = T[static_cast<size_t>(i * cols + c)];
        ef::whiten_in_place(w.view, col.data());
        for (int i = 0; i < n; ++i) REQUIRE(col[static_cast<size_t>(i)] == byrow[static_cast<size_t>(i * cols + c)]);
    }
}

TEST_CASE("a covariance that is not positive definite names its first failing pivot", "[correlated]") {
    // Rows 1, 2 fine; row 3 = row 1 + row 2 makes pivot 3 zero (or below).
    const std::vector<double> C = {4, 1, 5,  //
                                   1, 3, 4,  //
                                   5, 4, 9};
    try {
        ef::dense_whitening(C, 3, "cov.h5:/C");
        FAIL("no error");
    } catch (const ef::Error& e) {
        CHECK(e.code() == ef::ExitCode::data);
        CHECK_THAT(e.what(), Catch::Contains("cov.h5:/C") && Catch::Contains("pivot 3"));
    }
}

TEST_CASE("correlated data refuse bootstrap and the point-by-point normal solver", "[correlated]") {
    LineProblem lp = correlated_line(20, 1, 0);
    lp.cfg.resample = ef::ResampleMethod::bootstrap;
    CHECK_THROWS_AS(whitened(lp), ef::Error);
    lp.cfg.resample = ef::ResampleMethod::smear;
    lp.cfg.solver = ef::FitSolver::normal;
    CHECK_THROWS_AS(whitened(lp), ef::Error);
}

TEST_CASE("the whitened fit's chi2 is r^T C^-1 r at its parameters", "[correlated]") {
    const LineProblem lp = correlated_line(30, 3, 0);
    const ef::FitProblem pb = whitened(lp);

    const ef::ReplicaBlock out = fit_range(pb, 0, 0);

    // r = f(p) - y in the data's own space; C rebuilt densely from the same sources.
    std::vector<double> t0, r;
    for (int i = 0; i < lp.data.n; ++i) {
        const double x = lp.data.x[static_cast<size_t>(i)];
        t0.push_back(1.0 + 2.0 * x);
        r.push_back(out.params[0] + out.params[1] * x - lp.data.y[static_cast<size_t>(i)]);
    }
    const std::vector<double> B = ef::correlated_shifts(lp.cfg, lp.in, t0);
    const std::vector<double> C = dense_covariance(lp.data.sigma, B, 4);
    REQUIRE(out.status[0] == 0);
    CHECK(out.chi2[0] == Approx(direct_chi2(C, r)).epsilon(1e-10));
}

TEST_CASE("replicas draw the correlated shifts: their spread matches the central errors", "[correlated]") {
    const LineProblem lp = correlated_line(30, 4, 2000);
    const ef::FitProblem pb = whitened(lp);

    const ef::ReplicaBlock central = fit_range(pb, 0, 0);
    const ef::ReplicaBlock reps = fit_range(pb, 1, 2000);
    const ef::EnsembleSummary s = ef::summarize(reps.params, reps.status, 2);

    REQUIRE(s.used == 2000);
    for (int q = 0; q < 2; ++q) {
        const double err = std::sqrt(central.covariance[static_cast<size_t>(q * 3)]);
        CHECK(s.std[static_cast<size_t>(q)] == Approx(err).epsilon(0.05));  // 2000 replicas: 1.6 % on a std
    }
}

TEST_CASE("central errors with correlated systematics cover the truth 68 % of the time", "[correlated]") {
    const int datasets = 1500;
    int hits = 0;
    for (int t = 0; t < datasets; ++t) {
        const ef::FitProblem pb = whitened(correlated_line(30, 100 + static_cast<std::uint64_t>(t), 0));
        const ef::ReplicaBlock out = fit_range(pb, 0, 0);
        REQUIRE(out.status[0] == 0);
        const double truth[2] = {1.0, 2.0};
        for (int q = 0; q < 2; ++q) {
            const double err = std::sqrt(out.covariance[static_cast<size_t>(q * 3)]);
            hits += std::fabs(out.params[static_cast<size_t>(q)] - truth[q]) <= err ? 1 : 0;
        }
    }
    const double coverage = static_cast<double>(hits) / (2.0 * datasets);
    // 3000 intervals (two per dataset, correlated): the binomial spread is 0.9 %; 68.27 +- 3 %.
    CHECK(coverage > 0.6527);
    CHECK(coverage < 0.7127);
}

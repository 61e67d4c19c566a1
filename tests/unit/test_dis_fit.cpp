// SPDX-License-Identifier: MIT
// The bundled dis-mellin example fit (inputs/dis-mellin.ini, 5000 pseudo-data points at NLO with
// correlated systematics and normalisations, whitened as a run does: chi^2 = r^T C^-1 r) recovers
// the truth stored in its data file: the fit reaches a chi^2 no higher than the truth's, and
// the truth lies inside the fit's own 2-sigma region. For 13 free parameters with correlations
// up to 0.9986 (a, c and d of one flavour) the region is a curved valley, so it is tested by the
// likelihood ratio, chi2(truth) - chi2(fit) < 23.68 (the 95.45% quantile of chi^2 with 13
// degrees of freedom), not by the quadratic form d^T C^-1 d, which is 4928 here although the
// truth is only 15.6 above the minimum: the linearised covariance does not follow the valley.
// Each marginal pull is also within 3 sigma of the fit's own errors.
#include <catch2/catch.hpp>

#include <cmath>

#include <ensemblefit/config/fit_config.hpp>
#include <ensemblefit/fit/fit_problem.hpp>

#include "kernels/cpu/fit_kernels.hpp"
#include "src/fit/correlated.hpp"
#include "src/fit/fit_plan.hpp"
#include "src/io/h5.hpp"
#include "src/model/compiled_model.hpp"
#include "tests/common/test_helpers.hpp"

namespace {

/// The problem a run of `ini` fits, whitened on 2 threads (tests/common/test_helpers.hpp): pb.data
/// and the table are L^-1 y and L^-1 T, and chi2_at() is r^T C^-1 r.
ef::FitProblem load_example(const std::string& ini, const std::vector<std::string>& overrides) {
    return ef_test::load_problem(ini, overrides, 2);
}

double chi2_at(const ef::FitProblem& pb, const std::vector<double>& p) {
    const auto& m = std::get<ef::DisMellinModel>(pb.model->view);
    std::vector<double> ws(static_cast<size_t>(m.workspace_size()));
    m.prepare(p.data(), ws.data());
    double c = 0;
    for (int i = 0; i < pb.data.n; ++i) {
        const double r = (m.value(p.data(), ws.data(), &pb.data.x[static_cast<size_t>(3 * i)], i) -
                          pb.data.y[static_cast<size_t>(i)]) / pb.data.sigma[static_cast<size_t>(i)];
        c += r * r;
    }
    return c;
}

}  // namespace

TEST_CASE("dis-mellin: the central fit of the bundled pseudo-data recovers the truth", "[dis-mellin][fit]") {
    const ef::FitProblem pb = load_example(std::string(EF_SOURCE_DIR) + "/inputs/dis-mellin.ini", {});
    const auto truth = ef::h5::File::open_read(pb.config.data_file).attr_doubles("/", "truth");
    const int P = pb.num_params();
    REQUIRE(static_cast<int>(truth.size()) == P);

    ef::ReplicaBlock out;
    const std::int64_t central = 0;
    const ef::FitPlan plan = ef::make_fit_plan(pb);
    ef::cpu::fit_replicas(plan, ef::fit_inputs(pb, plan), &central, 1, 2, out);

    REQUIRE(out.status[0] == 0);
    const double chi2_fit = out.chi2[0];
    const double chi2_truth = chi2_at(pb, truth);
    CHECK(chi2_fit <= chi2_truth);
    CHECK(chi2_fit / (pb.data.n - 13) == Approx(1.0).margin(0.05));

    const double lr = chi2_truth - chi2_fit;
    INFO("chi2 fit " << chi2_fit << ", chi2 at truth " << chi2_truth);
    CHECK(lr < 23.68);
    int free = 0;
    for (int q = 0; q < P; ++q) {
        if (pb.config.params[static_cast<size_t>(q)].fixed) continue;
        ++free;
        const double sigma = std::sqrt(out.covariance[static_cast<size_t>(q + q * P)]);
        const double pull = (out.params[static_cast<size_t>(q)] - truth[static_cast<size_t>(q)]) / sigma;
        INFO(pb.config.params[static_cast<size_t>(q)].name << " pull " << pull);
        CHECK(std::fabs(pull) < 3.0);
    }
    CHECK(free == 13);
}

// The batched table-GEMM path (all replicas' model evaluations as one GEMM per LM round) and the
// per-replica path (each LM evaluates the model itself) are the same solver on the same
// replicas; they differ only in how F = table x moments is summed (fused multiply-adds in
// ascending order vs separate multiply and add), so fits land in the same place to the
// convergence tolerance, with the same statuses.
TEST_CASE("dis-mellin: batched table path and per-replica path agree", "[dis-mellin][fit][batched]") {
    const ef::FitProblem pb = load_example(std::string(EF_SOURCE_DIR) + "/inputs/dis-mellin.ini", {"--fit.solver", "qr"});
    const ef::FitPlan batched = ef::make_fit_plan(pb);
    REQUIRE(batched.path == ef::FitPath::table);
    ef::FitPlan per_replica = batched;  // the per-replica path whatever the model
    per_replica.path = ef::FitPath::qr;
    per_replica.dual_width = ef::qr_dual_width(batched.params.nfree);
    const std::vector<std::int64_t> reps = {0, 1, 2, 3};
    const int P = pb.num_params();
    ef::ReplicaBlock a, b;
    ef::cpu::fit_replicas(batched, ef::fit_inputs(pb, batched), reps.data(), static_cast<int>(reps.size()), 2, a);
    ef::cpu::fit_replicas(per_replica, ef::fit_inputs(pb, per_replica), reps.data(), static_cast<int>(reps.size()), 2,
                          b);
    double worst = 0.0;
    for (size_t t = 0; t < reps.size(); ++t) {
        CHECK(a.index[t] == reps[t]);
        CHECK(a.status[t] == b.status[t]);
        CHECK(a.chi2[t] == Approx(b.chi2[t]).epsilon(1e-9));
        for (int q = 0; q < P; ++q) {
            // relative to the central fit's error: parameters in flat directions move by a
            // fraction of it when the stopping iteration changes
            const double sigma = std::sqrt(a.covariance[static_cast<size_t>(q + q * P)]);
            if (!(sigma > 0)) continue;
            const double d = std::fabs(a.params[t * P + q] - b.params[t * P + q]) / sigma;
            worst = std::max(worst, d);
        }
    }
    WARN("worst |batched - per-replica| / sigma = " << worst);
    CHECK(worst < 1e-3);
    // the covariance of replica 0 exists on both paths and agrees
    REQUIRE(a.covariance.size() == b.covariance.size());
    for (int q = 0; q < P; ++q) {
        const double ca = a.covariance[static_cast<size_t>(q + q * P)];
        const double cb = b.covariance[static_cast<size_t>(q + q * P)];
        if (ca > 0) CHECK(ca == Approx(cb).epsilon(1e-4));
    }
}

// The Gram path (solver = normal: G = T^T W T once, each round's GEMM with G instead of T, 16 x 16
// Cholesky steps) against the QR table path on the same replicas: chi^2 and parameters agree to
// a small fraction of the central fit's errors (measured 2e-5 of the ensemble spread on 32
// replicas), the covariance to 1e-4.
TEST_CASE("dis-mellin: Gram (normal-equations) path agrees with the QR table path", "[dis-mellin][fit][gram]") {
    const std::string ini = std::string(EF_SOURCE_DIR) + "/inputs/dis-mellin.ini";
    const ef::FitProblem qr = load_example(ini, {"--fit.solver", "qr"});
    const ef::FitProblem gram = load_example(ini, {"--fit.solver", "normal"});
    const ef::FitPlan gram_plan = ef::make_fit_plan(gram);
    const ef::FitPlan qr_plan = ef::make_fit_plan(qr);
    REQUIRE(gram_plan.path == ef::FitPath::gram);
    REQUIRE_FALSE(qr_plan.path == ef::FitPath::gram);
    const std::vector<std::int64_t> reps = {0, 1, 2, 3, 4, 5};
    const int P = qr.num_params();
    ef::ReplicaBlock a, b;
    ef::cpu::fit_replicas(qr_plan, ef::fit_inputs(qr, qr_plan), reps.data(), static_cast<int>(reps.size()), 2, a);
    ef::cpu::fit_replicas(gram_plan, ef::fit_inputs(gram, gram_plan), reps.data(), static_cast<int>(reps.size()), 2,
                          b);
    double worst = 0.0;
    for (size_t t = 0; t < reps.size(); ++t) {
        CHECK(b.index[t] == reps[t]);
        CHECK(b.status[t] == 0);
        CHECK(b.chi2[t] == Approx(a.chi2[t]).epsilon(1e-9));
        CHECK(std::abs(b.iterations[t] - a.iterations[t]) <= 10);
        for (int q = 0; q < P; ++q) {
            const double sigma = std::sqrt(a.covariance[static_cast<size_t>(q + q * P)]);
            if (!(sigma > 0)) continue;
            worst = std::max(worst, std::fabs(a.params[t * P + q] - b.params[t * P + q]) / sigma);
        }
    }
    WARN("worst |gram - qr| / sigma = " << worst);
    CHECK(worst < 1e-3);
    CHECK(worst > 0.0);  // a different algorithm: not the QR path by another name
    REQUIRE(b.covariance.size() == a.covariance.size());
    for (int q = 0; q < P; ++q) {
        const double ca = a.covariance[static_cast<size_t>(q + q * P)];
        if (ca > 0) CHECK(b.covariance[static_cast<size_t>(q + q * P)] == Approx(ca).epsilon(1e-4));
    }
    // What the Gram path cannot do, refused with the key named.
    using Catch::Matchers::Contains;
    const auto bootstrap = ef::load_fit_config(ini, {"--fit.solver", "normal", "--fit.resample", "bootstrap"});
    REQUIRE_THROWS_WITH(ef::make_fit_problem(bootstrap, ef::load_data(bootstrap)),
                        Contains("fit.solver") && Contains("resample = smear"));
    const auto single = ef::load_fit_config(ini, {"--fit.precision", "float"});
    REQUIRE_THROWS_WITH(ef::make_fit_problem(single, ef::load_data(single)),
                        Contains("fit.precision") && Contains("double only"));
}

// dis-mellin's default solver (issue #27, perf/dis.sh solver): the Gram path where it
// applies, the QR table path where it does not (bootstrap replicas) or when asked for.
TEST_CASE("dis-mellin: auto is the Gram path with smeared replicas, QR otherwise", "[dis-mellin][fit][gram]") {
    const std::string ini = std::string(EF_SOURCE_DIR) + "/inputs/dis-mellin.ini";

    const ef::FitConfig by_default = ef::load_fit_config(ini, {});
    const ef::FitConfig bootstrap = ef::load_fit_config(ini, {"--fit.resample", "bootstrap"});
    const ef::FitConfig qr = ef::load_fit_config(ini, {"--fit.solver", "qr"});
    const ef::FitConfig other = ef::load_fit_config(std::string(EF_SOURCE_DIR) + "/inputs/example.ini", {});

    CHECK(by_default.solver == ef::FitSolver::normal);
    CHECK(bootstrap.solver == ef::FitSolver::qr);
    CHECK(qr.solver == ef::FitSolver::qr);
    CHECK(other.solver == ef::FitSolver::qr);
    const ef::FitProblem pb = ef::make_fit_problem(by_default, ef::load_data(by_default));
    CHECK(ef::make_fit_plan(pb).path == ef::FitPath::gram);
}

// [tuning] gpu_round_loop (issue #27): who drives a GPU's batched rounds; the device by default,
// the host loop a key away (the GPU tests compare the two bit for bit), anything else refused.
TEST_CASE("dis-mellin: tuning.gpu_round_loop reaches the fit plan", "[dis-mellin][fit][config]") {
    using Catch::Matchers::Contains;
    const std::string ini = std::string(EF_SOURCE_DIR) + "/inputs/dis-mellin.ini";
    CHECK(ef::make_fit_plan(load_example(ini, {})).gpu_round_loop == ef::GpuRoundLoop::device);
    CHECK(ef::make_fit_plan(load_example(ini, {"--tuning.gpu_round_loop", "host"})).gpu_round_loop ==
          ef::GpuRoundLoop::host);
    REQUIRE_THROWS_WITH(ef::load_fit_config(ini, {"--tuning.gpu_round_loop", "sideways"}),
                        Contains("tuning.gpu_round_loop") && Contains("sideways"));
}

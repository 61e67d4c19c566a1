// SPDX-License-Identifier: MIT
// `ensemblefit predict`'s pieces: the model rebuilt from a result file's stored config at
// requested points, against a direct evaluation (formula model) and against the fit's own model
// values at the data points (dis-mellin, whose tables are built at the points); the band
// statistics on values small enough to check by hand.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>

#include <ensemblefit/config/fit_config.hpp>
#include <ensemblefit/core/error.hpp>
#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/io/data_table.hpp>
#include <ensemblefit/worker/worker.hpp>

#include "src/fit/prediction.hpp"
#include "src/io/results_file.hpp"
#include "src/model/compiled_model.hpp"
#include "src/report/prediction_bands.hpp"
#include "temp_dir.hpp"

namespace {

using ef_test::TempDir;

/// Fits `replicas` (0 = the central fit) on a CPU worker and writes them, as a run does, to a new
/// result file `path`; returns the blocks' union as written.
void fit_to_file(const ef::FitProblem& pb, const std::vector<std::int64_t>& replicas, const std::string& path) {
    ef::WorkerOptions wo;
    wo.threads = 2;
    const auto worker = ef::make_worker(ef::WorkerKind::cpu, pb, wo);
    ef::WorkUnit unit;
    unit.replicas = replicas;
    ef::ReplicaBlock out;
    worker->run(unit, out);
    ef::RunIdentity id;
    id.canonical_config = pb.config.canonical_text();
    id.resolved_config = pb.config.resolved_text();
    id.model = pb.config.model_name;
    id.param_names = pb.config.param_names();
    id.replicas_total = pb.config.replicas;
    id.span = ef::shard_span(pb.config.replicas, ef::ShardSpec{});
    id.errors = ef::central_errors_of(pb);
    ef::ResultsFile f = ef::ResultsFile::create(path, id);
    f.write(out);
    f.close();
}

double rel(double a, double b) { return std::fabs(a - b) / std::max(std::fabs(b), 1e-300); }

}  // namespace

TEST_CASE("predict: a formula model at new points equals the formula evaluated directly", "[predict]") {
    TempDir dir;
    {
        std::ofstream ini(dir.file("f.ini"));
        ini << "[data]\nfile = " << EF_SOURCE_DIR << "/inputs/decay.csv\nx = t\ny = counts\nsigma = sigma\n"
            << "[model]\nname = formula\nformula = a*exp(-k*t) + c + d*t^2\n"
            << "[param.a]\nstart = 5\n[param.k]\nstart = 1\n[param.c]\nstart = 0\n[param.d]\nstart = 0\n"
            << "[fit]\nreplicas = 6\nseed = 11\n[output]\nfile = f.h5\n";
        std::ofstream pts(dir.file("points.csv"));
        pts << "t\n-1\n0\n0.37\n4\n25\n";
    }
    const ef::FitConfig cfg = ef::load_fit_config(dir.file("f.ini"), {});
    fit_to_file(ef::make_fit_problem(cfg, ef::load_data(cfg)), {0, 1, 2, 3, 4, 5, 6}, dir.file("f.h5"));
    const ef::ResultsContent c = ef::read_results(dir.file("f.h5"));

    const ef::FitProblem pb = ef::prediction_problem(dir.file("f.h5"), c.id.canonical_config, dir.file("points.csv"));
    std::vector<double> params = c.central.params;
    params.insert(params.end(), c.replicas.params.begin(), c.replicas.params.end());
    std::vector<double> got(7 * 5);
    ef::evaluate_model(pb, params.data(), 7, 2, got.data());

    const double t[] = {-1, 0, 0.37, 4, 25};
    REQUIRE(pb.data.n == 5);
    for (size_t r = 0; r < 7; ++r) {
        const double* p = &params[r * 4];
        for (size_t i = 0; i < 5; ++i) {
            const double want = p[0] * std::exp(-p[1] * t[i]) + p[2] + p[3] * t[i] * t[i];
            INFO("replica " << r << " t = " << t[i]);
            CHECK(rel(got[r * 5 + i], want) < 1e-13);
        }
    }
}

TEST_CASE("predict: dis-mellin at the data points reproduces the central fit's model values", "[predict][dis-mellin]") {
    // The fit evaluates the model through its batched table GEMM (fused multiply-adds in
    // ascending order); predict builds the table anew at the requested points and sums each
    // point's row in value(). Both must give the fit's chi2 to ~1e-12 and the same values.
    TempDir dir;
    // solver = qr: the table path (the Gram path's chi2 comes from G, agreeing to ~1e-11).
    const ef::FitConfig cfg = ef::load_fit_config(std::string(EF_SOURCE_DIR) + "/inputs/dis-mellin.ini",
                                                  {"--fit.replicas", "0", "--fit.solver", "qr"});
    const ef::FitProblem fit = ef::make_fit_problem(cfg, ef::load_data(cfg));
    fit_to_file(fit, {0}, dir.file("dis.h5"));
    const ef::ResultsContent c = ef::read_results(dir.file("dis.h5"));
    REQUIRE(c.central.status[0] == 0);

    const ef::FitProblem pb = ef::prediction_problem(dir.file("dis.h5"), c.id.canonical_config, fit.config.data_file);
    std::vector<double> f(static_cast<size_t>(pb.data.n));
    ef::evaluate_model(pb, c.central.params.data(), 1, 2, f.data());

    REQUIRE(pb.data.n == fit.data.n);
    double chi2 = 0.0;
    for (size_t i = 0; i < f.size(); ++i) {
        const double r = (f[i] - fit.data.y[i]) / fit.data.sigma[i];
        chi2 += r * r;
    }
    INFO("chi2 from the predictions " << chi2 << ", the fit's " << c.central.chi2[0]);
    CHECK(rel(chi2, c.central.chi2[0]) < 1e-12);
    std::vector<double> own(f.size());
    ef::evaluate_model(fit, c.central.params.data(), 1, 1, own.data());  // the fit's own table
    double worst = 0.0;
    for (size_t i = 0; i < f.size(); ++i) worst = std::max(worst, rel(f[i], own[i]));
    CHECK(worst < 1e-12);
}

TEST_CASE("predict: points are checked like data, naming the file", "[predict]") {
    TempDir dir;
    const std::string ini = std::string(EF_SOURCE_DIR) + "/inputs/dis-mellin.ini";
    const std::string canonical = ef::load_fit_config(ini, {}).canonical_text();
    {
        std::ofstream(dir.file("noq2.csv")) << "x,target\n0.1,1\n";
        std::ofstream(dir.file("xone.csv")) << "x,Q2,target\n0.1,10,1\n1.5,10,2\n";
        std::ofstream(dir.file("nan.csv")) << "x,Q2,target\n0.1,nan,1\n";
    }
    CHECK_THROWS_WITH(ef::prediction_problem("r.h5", canonical, dir.file("noq2.csv")), Catch::Contains("no column 'Q2'"));
    CHECK_THROWS_WITH(ef::prediction_problem("r.h5", canonical, dir.file("nan.csv")),
                      Catch::Contains("nan.csv: point 1, column 'Q2': NaN"));
    try {
        ef::prediction_problem("r.h5", canonical, dir.file("xone.csv"));
        FAIL("x = 1.5 was accepted");
    } catch (const ef::Error& e) {
        CHECK(e.code() == ef::ExitCode::data);
    }
}

TEST_CASE("prediction bands: mean, std and quantiles per point, non-finite values left out", "[predict]") {
    // Point 0: replicas 1..5; point 1: 2, 2, inf, 2, 2 (one left out).
    const std::vector<double> values = {1, 2, 2, 2, 3, INFINITY, 4, 2, 5, 2};

    const ef::PredictionBands b = ef::prediction_bands({7.0, 8.0}, values, 2);

    CHECK(b.replicas == 5);
    CHECK(b.nonfinite == 1);
    CHECK(b.central == std::vector<double>{7.0, 8.0});
    CHECK(b.mean[0] == 3.0);
    CHECK(b.std[0] == Approx(std::sqrt(2.5)));
    CHECK(b.quantiles[0 * 2 + 0] == Approx(1.1));   // 2.5 %: 1 + 0.1 x (2 - 1)
    CHECK(b.quantiles[1 * 2 + 0] == Approx(1.64));  // 16 %
    CHECK(b.quantiles[2 * 2 + 0] == 3.0);
    CHECK(b.quantiles[4 * 2 + 0] == Approx(4.9));
    CHECK(b.mean[1] == 2.0);
    CHECK(b.std[1] == 0.0);
}

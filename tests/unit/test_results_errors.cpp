// SPDX-License-Identifier: MIT
// The central fit's errors as stored and read back: [fit] error_scale = chi2 against NIST StRD's
// certified standard deviations, correlations as the covariance normalised, the merge round trip
// of a scaled covariance, and `summary` on partial files and files with no converged replica.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include <ensemblefit/config/fit_config.hpp>
#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/io/data_table.hpp>
#include <ensemblefit/core/ensemble_summary.hpp>
#include <ensemblefit/worker/worker.hpp>

#include "src/io/results_file.hpp"
#include "src/report/results_summary.hpp"
#include "temp_dir.hpp"

namespace {

using ef_test::TempDir;

/// inputs/nist/certified.csv (written by inputs/nist/generate.py from NIST's .dat files, as
/// test_nist.cpp reads it): per problem its parameters' certified values and standard deviations.
struct Certified {
    std::vector<std::string> names;
    std::vector<double> values, stddev;
};

std::map<std::string, Certified> read_certified() {
    std::ifstream in(std::string(EF_SOURCE_DIR) + "/inputs/nist/certified.csv");
    REQUIRE(in.good());
    std::map<std::string, Certified> out;
    std::string line;
    std::getline(in, line);  // problem,param,value,stddev,rss
    while (std::getline(in, line)) {
        std::stringstream ss(line);
        std::string problem, param, value, sd;
        std::getline(ss, problem, ',');
        std::getline(ss, param, ',');
        std::getline(ss, value, ',');
        std::getline(ss, sd, ',');
        out[problem].names.push_back(param);
        out[problem].values.push_back(std::stod(value));
        out[problem].stddev.push_back(std::stod(sd));
    }
    return out;
}

/// Log relative error: the number of certified digits reproduced (capped at 15).
double lre(double got, double want) {
    const double rel = std::fabs(got - want) / std::fabs(want);
    return rel == 0 ? 15.0 : std::min(15.0, -std::log10(rel));
}

/// Replica 0 of `pb` on a CPU worker: what `ensemblefit fit` hands the results file.
ef::ReplicaBlock fit_central(const ef::FitProblem& pb) {
    ef::WorkerOptions wo;
    wo.threads = 1;
    const auto worker = ef::make_worker(ef::WorkerKind::cpu, pb, wo);
    ef::WorkUnit unit;
    unit.replicas = {0};
    ef::ReplicaBlock out;
    worker->run(unit, out);
    return out;
}

/// The identity a run of `pb` writes (replicas 1..R, unsharded), as ensemble_run.cpp makes it.
ef::RunIdentity identity(const ef::FitProblem& pb, std::int64_t replicas) {
    ef::RunIdentity id;
    id.canonical_config = pb.config.canonical_text();
    id.resolved_config = pb.config.resolved_text();
    id.model = pb.config.model_name;
    id.param_names = pb.config.param_names();
    id.replicas_total = replicas;
    id.span = ef::shard_span(replicas, ef::ShardSpec{});
    id.errors = ef::central_errors_of(pb);
    return id;
}

/// Writes the central fit `c` into a new results file `path` and closes it.
void write_central(const std::string& path, const ef::RunIdentity& id, const ef::ReplicaBlock& c) {
    ef::ResultsFile f = ef::ResultsFile::create(path, id);
    f.write(c);
    f.close();
}

ef::FitProblem nist_problem(const std::string& name, const std::string& scale) {
    const std::string ini = std::string(EF_SOURCE_DIR) + "/inputs/nist/" + name + ".start2.ini";
    const ef::FitConfig cfg = ef::load_fit_config(ini, {"--fit.error_scale", scale});
    return ef::make_fit_problem(cfg, ef::load_data(cfg));
}

const char* kProblems[] = {"Misra1a", "Chwirut2", "Chwirut1", "Lanczos3", "Gauss1",  "Gauss2",  "DanWood",
                           "Misra1b", "Kirby2",   "Hahn1",    "Nelson",   "MGH17",   "Lanczos1", "Lanczos2",
                           "Gauss3",  "Misra1c",  "Misra1d",  "Roszman1", "ENSO",    "MGH09",   "Thurber",
                           "BoxBOD",  "Rat42",    "MGH10",    "Eckerle4", "Rat43",   "Bennett5"};

}  // namespace

TEST_CASE("error_scale = chi2 reproduces NIST's certified standard deviations (start 2, all 27)", "[nist][errors]") {
    // NIST certifies sd_j = sqrt(s^2 [(J^T J)^-1]_jj) with s^2 = RSS / (n - p): with sigma = 1
    // (the inputs' constant) that is /central/covariance with error_scale = chi2. Tolerance: 3
    // significant digits (LRE >= 3), as issue #22 asks, and not more because of one problem:
    // Lanczos1's data fit its model to ~1e-13, so its RSS (certified 1.4307867721e-25) is a sum
    // of squared rounding errors of the data and of the model's exp() in double; ours is
    // 1.42930e-25 (1.0e-3 relative), which puts its standard deviations at LRE 3.3 (5e-4). Every
    // other problem reproduces them to 7.5 digits or more (measured 2026-11-24; the table below
    // prints each problem's LRE), so a regression in the scaling or the covariance shows up here.
    const auto cert = read_certified();
    REQUIRE(cert.size() == 27);
    TempDir dir;
    int pass = 0;
    std::string failed;
    for (const char* name : kProblems) {
        const ef::FitProblem pb = nist_problem(name, "chi2");
        const ef::ReplicaBlock c = fit_central(pb);
        REQUIRE(c.status[0] == 0);
        const std::string path = dir.file(std::string(name) + ".h5");
        write_central(path, identity(pb, 0), c);

        const ef::h5::File f = ef::h5::File::open_read(path);
        const auto cov = f.read_double("/central/covariance");
        const size_t P = cert.at(name).names.size();
        double worst = 15.0;
        for (size_t q = 0; q < P; ++q) worst = std::min(worst, lre(std::sqrt(cov[q * P + q]), cert.at(name).stddev[q]));
        std::printf("  %-9s standard deviations LRE %5.1f\n", name, worst);
        CHECK(f.attr_string("/central/covariance", "error_scale") == "chi2");
        CHECK(f.attr_int64("/central/covariance", "ndf") == pb.data.n - static_cast<int>(P));
        CHECK(f.attr_double("/central/covariance", "chi2_per_ndf") == c.chi2[0] / (pb.data.n - static_cast<double>(P)));
        if (worst >= 3.0) ++pass;
        else failed += std::string(" ") + name;
    }
    std::printf("  certified standard deviations to >= 3 digits: %d/27\n", pass);
    INFO("below 3 digits:" << failed);
    CHECK(pass == 27);
}

TEST_CASE("error_scale: none stores (J^T W J)^-1 as before, chi2 scales it, correlation unchanged", "[errors]") {
    TempDir dir;
    const ef::FitProblem none = nist_problem("Misra1a", "none");
    const ef::FitProblem chi2 = nist_problem("Misra1a", "chi2");
    const ef::ReplicaBlock c = fit_central(none);
    write_central(dir.file("none.h5"), identity(none, 0), c);
    write_central(dir.file("chi2.h5"), identity(chi2, 0), c);

    const ef::h5::File a = ef::h5::File::open_read(dir.file("none.h5"));
    const ef::h5::File b = ef::h5::File::open_read(dir.file("chi2.h5"));
    const auto cov = a.read_double("/central/covariance");
    const auto rho = a.read_double("/central/correlation");
    const size_t P = 2;
    CHECK(cov == c.covariance);  // bit for bit what the fit gave, as before error_scale existed
    CHECK(a.attr_string("/central/covariance", "error_scale") == "none");
    CHECK_FALSE(a.exists("/central/covariance_unscaled"));
    for (size_t i = 0; i < P; ++i)
        for (size_t j = 0; j < P; ++j)
            CHECK(rho[i * P + j] == Approx(cov[i * P + j] / std::sqrt(cov[i * P + i] * cov[j * P + j])).epsilon(1e-15));
    const double factor = c.chi2[0] / static_cast<double>(none.data.n - 2);
    const auto scaled = b.read_double("/central/covariance");
    for (size_t k = 0; k < P * P; ++k) CHECK(scaled[k] == cov[k] * factor);
    CHECK(b.read_double("/central/covariance_unscaled") == cov);
    CHECK(b.read_double("/central/correlation") == rho);  // the same bits: computed before scaling
}

TEST_CASE("a scaled central covariance survives read_results and a rewrite bit for bit (merge)", "[errors]") {
    TempDir dir;
    const ef::FitProblem pb = nist_problem("Rat42", "chi2");
    write_central(dir.file("shard0.h5"), identity(pb, 0), fit_central(pb));

    const ef::ResultsContent back = ef::read_results(dir.file("shard0.h5"));
    CHECK(back.id.errors.scale == ef::ErrorScale::chi2);
    CHECK(back.id.errors.ndf == pb.data.n - 3);
    write_central(dir.file("merged.h5"), back.id, back.central);  // what run_merge does

    const ef::h5::File a = ef::h5::File::open_read(dir.file("shard0.h5"));
    const ef::h5::File b = ef::h5::File::open_read(dir.file("merged.h5"));
    for (const char* d : {"/central/covariance", "/central/covariance_unscaled", "/central/correlation"})
        CHECK(a.read_double(d) == b.read_double(d));
    CHECK(b.attr_double("/central/covariance", "chi2_per_ndf") == a.attr_double("/central/covariance", "chi2_per_ndf"));
}

TEST_CASE("error_scale = chi2 with no degrees of freedom is refused naming the key", "[errors]") {
    const std::string ini = std::string(EF_SOURCE_DIR) + "/inputs/nist/BoxBOD.start2.ini";  // 6 points, 2 params
    ef::FitConfig cfg = ef::load_fit_config(ini, {"--fit.error_scale", "chi2"});
    ef::DataTable d = ef::load_data(cfg);
    d.n = 2;
    d.x.resize(2);
    d.y.resize(2);
    d.sigma.resize(2);
    const ef::FitProblem pb = ef::make_fit_problem(cfg, d);
    CHECK_THROWS_WITH(ef::central_errors_of(pb), Catch::Contains("fit.error_scale") && Catch::Contains("2 points"));
    CHECK_THROWS_WITH(ef::load_fit_config(ini, {"--fit.error_scale", "sigma"}),
                      Catch::Contains("fit.error_scale: unknown error scale 'sigma' (allowed: none, chi2)"));
}

TEST_CASE("correlation_of: covariance normalised, NaN where a variance is 0", "[errors]") {
    // a and b correlated -0.5, c fixed (variance 0).
    const std::vector<double> cov = {4.0, -1.0, 0.0, -1.0, 1.0, 0.0, 0.0, 0.0, 0.0};

    const std::vector<double> rho = ef::correlation_of(cov, 3);

    CHECK(rho[0] == 1.0);
    CHECK(rho[4] == 1.0);
    CHECK(rho[1] == -0.5);
    CHECK(rho[3] == -0.5);
    for (int k : {2, 5, 6, 7, 8}) CHECK(std::isnan(rho[static_cast<size_t>(k)]));
}

TEST_CASE("summary of a partial file with no converged replica speaks in words, never nan", "[summary]") {
    TempDir dir;
    const ef::FitProblem pb = nist_problem("Misra1a", "none");
    const ef::RunIdentity id = identity(pb, 4);
    {
        ef::ResultsFile f = ef::ResultsFile::create(dir.file("partial.h5"), id);
        f.write(fit_central(pb));
        ef::ReplicaBlock failed;
        failed.resize(2, 2);
        failed.index = {1, 2};
        failed.status = {2, 1};  // failed, max_iterations; 3 and 4 not done
        f.write(failed);
        f.close();
    }

    const ef::ResultsSummary s = ef::read_results_summary(dir.file("partial.h5"));
    std::ostringstream table, csv, json;
    ef::write_results_summary(s, ef::SummaryFormat::table, false, table);
    ef::write_results_summary(s, ef::SummaryFormat::csv, false, csv);
    ef::write_results_summary(s, ef::SummaryFormat::json, false, json);

    CHECK(s.pending() == 2);
    CHECK(s.failed == 1);
    CHECK(s.max_iterations == 1);
    INFO(table.str());
    CHECK_THAT(table.str(), Catch::Contains("partial: 2 of 5 replica fits not done"));
    CHECK_THAT(table.str(), Catch::Contains("no replica converged, so there are no ensemble statistics"));
    CHECK_THAT(table.str(), Catch::Contains("not scaled by chi2/ndf"));
    CHECK_THAT(json.str(), Catch::Contains("\"ensemble\": null"));
    for (const std::string& text : {table.str(), csv.str(), json.str()}) {
        CHECK(text.find("nan") == std::string::npos);
        CHECK(text.find("NaN") == std::string::npos);
        CHECK(text.find("inf") == std::string::npos);
    }
}

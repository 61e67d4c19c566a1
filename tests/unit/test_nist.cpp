// SPDX-License-Identifier: MIT
// NIST StRD nonlinear regression: all 27 problems from both starts, through the same config,
// data, formula and LM path as `ensemblefit fit` (inputs/nist/, replicas = 0, sigma = 1).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include <ensemblefit/config/fit_config.hpp>
#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/io/data_table.hpp>

#include "kernels/cpu/fit_kernels.hpp"
#include "src/fit/fit_plan.hpp"

namespace {

struct Certified {
    std::vector<std::string> names;
    std::vector<double> values;
};

std::map<std::string, Certified> read_certified() {
    std::ifstream in(std::string(EF_SOURCE_DIR) + "/inputs/nist/certified.csv");
    REQUIRE(in.good());
    std::map<std::string, Certified> out;
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
        std::stringstream ss(line);
        std::string problem, param, value;
        std::getline(ss, problem, ',');
        std::getline(ss, param, ',');
        std::getline(ss, value, ',');
        out[problem].names.push_back(param);
        out[problem].values.push_back(std::stod(value));
    }
    return out;
}

/// Log relative error: the number of certified digits reproduced (capped at 15).
double lre(double got, double want) {
    const double rel = std::fabs(got - want) / std::fabs(want);
    return rel == 0 ? 15.0 : std::min(15.0, -std::log10(rel));
}

/// Fits replica 0 of one NIST config; returns the smallest LRE over its parameters.
double min_lre(const std::string& problem, int start, const Certified& cert,
               const std::vector<std::string>& overrides = {}) {
    const std::string ini = std::string(EF_SOURCE_DIR) + "/inputs/nist/" + problem + ".start" +
                            std::to_string(start) + ".ini";
    ef::FitConfig cfg = ef::load_fit_config(ini, overrides);
    ef::DataTable data = ef::load_data(cfg);
    const ef::FitProblem pb = ef::make_fit_problem(cfg, data);
    ef::ReplicaBlock out;
    const std::int64_t replica = 0;
    const ef::FitPlan plan = ef::make_fit_plan(pb);
    ef::cpu::fit_replicas(plan, ef::fit_inputs(pb, plan), &replica, 1, 1, out);
    REQUIRE(pb.config.param_names() == cert.names);
    double worst = 15.0;
    for (size_t q = 0; q < cert.values.size(); ++q) worst = std::min(worst, lre(out.params[q], cert.values[q]));
    return worst;
}

const char* kProblems[] = {"Misra1a", "Chwirut2", "Chwirut1", "Lanczos3", "Gauss1",  "Gauss2",  "DanWood",
                           "Misra1b", "Kirby2",   "Hahn1",    "Nelson",   "MGH17",   "Lanczos1", "Lanczos2",
                           "Gauss3",  "Misra1c",  "Misra1d",  "Roszman1", "ENSO",    "MGH09",   "Thurber",
                           "BoxBOD",  "Rat42",    "MGH10",    "Eckerle4", "Rat43",   "Bennett5"};

}  // namespace

TEST_CASE("NIST StRD: certified values to 6 digits from start 2 (all 27) and start 1 (>= 25)", "[nist]") {
    const auto cert = read_certified();
    REQUIRE(cert.size() == 27);

    int pass1 = 0, pass2 = 0;
    std::string failed1, failed2;
    for (const char* name : kProblems) {
        const double l1 = min_lre(name, 1, cert.at(name));
        const double l2 = min_lre(name, 2, cert.at(name));
        std::printf("  %-9s start1 LRE %5.1f   start2 LRE %5.1f\n", name, l1, l2);
        if (l1 >= 6.0) ++pass1;
        else failed1 += std::string(" ") + name;
        if (l2 >= 6.0) ++pass2;
        else failed2 += std::string(" ") + name;
    }
    std::printf("  start 1: %d/27, start 2: %d/27\n", pass1, pass2);

    INFO("start 1 below 6 digits:" << failed1);
    INFO("start 2 below 6 digits:" << failed2);
    CHECK(pass2 == 27);
    CHECK(pass1 >= 25);
}

TEST_CASE("NIST StRD with the normal-equations solver: double and float", "[nist][normal]") {
    // The normal equations square the condition number: in double they lose digits exactly on
    // NIST's stiff problems; in float, only the well-conditioned ones reach float's precision.
    const auto cert = read_certified();
    int pass_double = 0, pass_float = 0, pass_start1 = 0;
    std::string failed_double, failed_float;
    for (const char* name : kProblems) {
        const double l1 = min_lre(name, 1, cert.at(name), {"--fit.solver", "normal"});
        const double ld = min_lre(name, 2, cert.at(name), {"--fit.solver", "normal"});
        const double lf = min_lre(name, 2, cert.at(name), {"--fit.precision", "float"});
        std::printf("  %-9s normal double LRE start1 %5.1f start2 %5.1f   float start2 %5.1f\n", name, l1, ld, lf);
        if (l1 >= 6.0) ++pass_start1;
        if (ld >= 6.0) ++pass_double;
        else failed_double += std::string(" ") + name;
        if (lf >= 4.0) ++pass_float;
        else failed_float += std::string(" ") + name;
    }
    std::printf("  normal double >= 6 digits: start1 %d/27, start2 %d/27; float >= 4 digits: %d/27\n", pass_start1,
                pass_double, pass_float);
    INFO("double below 6 digits:" << failed_double);
    INFO("float below 4 digits:" << failed_float);
    // As the QR solver: all 27 from start 2, 25 from start 1 (BoxBOD and MGH10 are out of
    // reach from their first starts). Float: 16 of 27 measured to 4 digits (2026-11-21).
    CHECK(pass_double == 27);
    CHECK(pass_start1 >= 25);
    CHECK(pass_float >= 15);
}

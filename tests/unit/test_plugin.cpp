// SPDX-License-Identifier: MIT
// Model plugins (include/ensemblefit/model/model_plugin.hpp): a plugin table made from a model
// header runs, through its function pointers and the CPU worker's dispatch, exactly the code of
// the built-in model it copies, on every per-replica path; a malformed table and a missing
// library are refused with usage errors. tests/mpi/plugin.sh covers the installed package,
// dlopen and MPI.
#include <catch2/catch.hpp>

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include <ensemblefit/config/fit_config.hpp>
#include <ensemblefit/core/error.hpp>
#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/io/data_table.hpp>

#include "kernels/cpu/fit_kernels.hpp"
#include "kernels/plugin/model_plugin_entry.hpp"
#include "src/fit/fit_plan.hpp"
#include "src/model/plugin_loader.hpp"

namespace {

/// The built-in ExponentialModel's formula, written again as a plugin model would be (ef::exp
/// qualified: outside namespace ef an unqualified exp(double) is the C library's).
struct ExpDecay : ef::PointwiseModel {
    static constexpr const char* name = "exp-decay";
    static constexpr const char* param_names[] = {"a", "k", "c"};
    EF_HD int num_params() const { return 3; }
    template <class T>
    EF_HD T value(const T* p, const T* /*ws*/, const double* x, int /*i*/) const {
        return p[0] * ef::exp(-(p[1] * x[0])) + p[2];
    }
};

/// Names that do not match num_params(): the table must say so.
struct Mismatched : ExpDecay {
    static constexpr const char* param_names[] = {"a", "k"};
};

ef::ReplicaBlock fit_all(const ef::FitPlan& plan, const ef::FitInputs& in, int count) {
    std::vector<std::int64_t> reps(static_cast<size_t>(count));
    std::iota(reps.begin(), reps.end(), 0);
    ef::ReplicaBlock out;
    ef::cpu::fit_replicas(plan, in, reps.data(), count, 2, out);
    return out;
}

}  // namespace

TEST_CASE("a plugin table fits with the bits of the built-in model it copies", "[plugin]") {
    const auto solver = GENERATE(as<std::vector<std::string>>{}, std::vector<std::string>{},
                                 std::vector<std::string>{"--fit.solver=normal"},
                                 std::vector<std::string>{"--fit.precision=float"});
    const ef::FitConfig cfg = ef::load_fit_config(std::string(EF_SOURCE_DIR) + "/inputs/example.ini", solver);
    const ef::FitProblem pb = ef::make_fit_problem(cfg, ef::load_data(cfg));
    const ef::FitPlan plan = ef::make_fit_plan(pb);
    const ef::FitInputs builtin = ef::fit_inputs(pb, plan);
    ef::FitInputs plugin = builtin;
    plugin.model = ef::PluginModel{ef::plugin::PluginEntries<ExpDecay>::table()};

    const ef::ReplicaBlock a = fit_all(plan, builtin, 40);
    const ef::ReplicaBlock b = fit_all(plan, plugin, 40);

    CHECK(std::holds_alternative<ef::ExponentialModel>(builtin.model));
    CHECK(a.params == b.params);
    CHECK(a.chi2 == b.chi2);
    CHECK(a.status == b.status);
    CHECK(a.iterations == b.iterations);
    CHECK(a.covariance == b.covariance);
    CHECK(a.covariance.size() == 9);
    CHECK(a.status[0] == 0);
}

TEST_CASE("a plugin table describes its model and refuses names that do not match num_params()", "[plugin]") {
    const EfModelPlugin* good = ef::plugin::PluginEntries<ExpDecay>::table();
    const EfModelPlugin* bad = ef::plugin::PluginEntries<Mismatched>::table();
    const double p[3] = {2.0, 0.5, 1.0};
    const double x[2] = {0.0, 2.0};
    double v[2] = {0.0, 0.0};

    good->values(p, x, 1, 2, v);

    CHECK(good->abi_version == EF_MODEL_PLUGIN_ABI_VERSION);
    CHECK(std::string(good->name) == "exp-decay");
    CHECK(good->num_params == 3);
    CHECK(std::string(good->param_names[1]) == "k");
    CHECK(v[0] == 3.0);
    CHECK(v[1] == ExpDecay{}.value<double>(p, nullptr, x + 1, 1));
    CHECK(good->gpu == nullptr);
    CHECK(bad->param_names == nullptr);
}

TEST_CASE("a missing plugin library is a usage error naming the key and the path", "[plugin]") {
    try {
        ef::load_model_plugin("/nonexistent/libnone.so", "run.ini:7: model.plugin");
        FAIL("no error");
    } catch (const ef::Error& e) {
        CHECK(e.code() == ef::ExitCode::usage);
        CHECK(std::string(e.what()) == "run.ini:7: model.plugin: model plugin '/nonexistent/libnone.so': no such file");
    }
}

// SPDX-License-Identifier: MIT
// A model plugin with GPU code (examples/plugin's Michaelis-Menten model, built by this test
// build's CMake with ensemblefit_add_model and CUDA on: kernels/plugin/model_plugin_gpu.cuh)
// on the GPU worker against the CPU worker: the same bits, on the normal solver in float and
// double and on qr, at more replicas than one block. gpu_tests' main (test_gpu_fit.cpp) exits
// 77 where no GPU is visible.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <ensemblefit/config/fit_config.hpp>
#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/worker/worker.hpp>

#include "kernels/models/plugin_model.hpp"
#include "src/model/compiled_model.hpp"
#include "tests/gpu/gpu_fixture.hpp"

#ifdef EF_TEST_GPU_PLUGIN

namespace {

using ef_test::kSrc;

ef::ReplicaBlock fit_plugin(ef::WorkerKind kind, const std::vector<std::string>& overrides, int replicas) {
    std::vector<std::string> args = overrides;
    args.push_back(std::string("--model.plugin=") + EF_TEST_GPU_PLUGIN);
    args.push_back("--fit.replicas=" + std::to_string(replicas));
    const ef::FitConfig cfg = ef::load_fit_config(kSrc + "/examples/plugin/michaelis_menten.ini", args);
    const ef::FitProblem pb = ef::make_fit_problem(cfg, ef::load_data(cfg));
    const auto& plugin = std::get<ef::PluginModel>(pb.model->view);
    REQUIRE(plugin.table->abi_version == EF_MODEL_PLUGIN_ABI_VERSION);
    REQUIRE(plugin.table->gpu != nullptr);
    return ef_test::fit_replicas(pb, kind, replicas);
}

}  // namespace

TEST_CASE("gpu: a model plugin's GPU kernels give the CPU's bits (normal float, double, qr)", "[gpu][plugin]") {
    for (const std::vector<std::string>& solver :
         {std::vector<std::string>{"--fit.solver=normal", "--fit.precision=float"},
          std::vector<std::string>{"--fit.solver=normal", "--fit.precision=double"},
          std::vector<std::string>{"--fit.solver=qr", "--fit.resample=bootstrap"}}) {
        INFO(solver[0] << " " << solver[1]);

        const ef::ReplicaBlock cpu = fit_plugin(ef::WorkerKind::cpu, solver, 700);
        const ef::ReplicaBlock gpu = fit_plugin(ef::WorkerKind::gpu, solver, 700);

        ef_test::check_same_bits(cpu, gpu);
    }
}

#endif

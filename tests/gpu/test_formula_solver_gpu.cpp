// SPDX-License-Identifier: MIT
// A formula's solver kernels compiled by NVRTC at run time (`[model] compile = auto|jit` on a
// GPU worker: kernels/cuda/replica_kernels.cuh instantiated for the formula) against the CPU:
// the same bits as the CPU's compiled formula and as the GPU interpreter, on the normal solver
// in float and double and on qr, at more replicas than one block. A compile forced to fail
// leaves the interpreter running, with the same bits. gpu_tests' main (test_gpu_fit.cpp) exits
// 77 where no GPU is visible.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <ensemblefit/config/fit_config.hpp>
#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/model/formula.hpp>
#include <ensemblefit/worker/worker.hpp>

#include "src/model/compiled_model.hpp"
#include "src/model/formula_jit.hpp"
#include "tests/gpu/gpu_fixture.hpp"

namespace {

using ef_test::check_same_bits;
using ef_test::fit_replicas;
using ef_test::kSrc;

/// The problem of inputs/spot.ini (a formula) with `overrides`.
ef::FitProblem load_spot(const std::vector<std::string>& overrides) {
    const ef::FitConfig cfg = ef::load_fit_config(kSrc + "/inputs/spot.ini", overrides);
    return ef::make_fit_problem(cfg, ef::load_data(cfg));
}

/// `pb` with its formula's device compiler replaced by `jit`.
ef::FitProblem with_device_jit(ef::FitProblem pb, const ef::FormulaDeviceJit* jit) {
    auto cm = std::make_shared<ef::CompiledModel>(*pb.model);
    std::get<ef::FormulaModel>(cm->view).device_jit = jit;
    pb.model = cm;
    return pb;
}

}  // namespace

TEST_CASE("gpu: a formula's NVRTC solver kernels give the CPU's bits (normal float, double, qr)",
          "[gpu][formula][jit]") {
    struct Case {
        const char* solver;
        const char* precision;
        int replicas;
    };
    for (const Case& c : {Case{"normal", "float", 3000}, Case{"normal", "double", 3000}, Case{"qr", "double", 700}}) {
        INFO(c.solver << " " << c.precision);
        const std::vector<std::string> base = {"--fit.replicas=" + std::to_string(c.replicas),
                                               std::string("--fit.solver=") + c.solver,
                                               std::string("--fit.precision=") + c.precision};
        auto jit_args = base;
        jit_args.push_back("--model.compile=jit");
        auto interpret_args = base;
        interpret_args.push_back("--model.compile=interpret");
        const ef::FitProblem jit_pb = load_spot(jit_args);
        const auto& fm = std::get<ef::FormulaModel>(jit_pb.model->view);
        REQUIRE(fm.device_jit != nullptr);
        int compiled = 0;
        ef::FormulaDeviceJit counting;
        counting.compile = [&](const std::string& kernel, int major, int minor) {
            ef::FormulaDeviceKernel k = fm.device_jit->compile(kernel, major, minor);
            INFO(k.why);
            CHECK(k.ok);
            compiled += k.ok ? 1 : 0;
            return k;
        };

        const ef::ReplicaBlock gpu_jit =
            fit_replicas(with_device_jit(jit_pb, &counting), ef::WorkerKind::gpu, c.replicas);
        const ef::ReplicaBlock cpu_jit = fit_replicas(jit_pb, ef::WorkerKind::cpu, c.replicas);
        const ef::ReplicaBlock gpu_interpreted =
            fit_replicas(load_spot(interpret_args), ef::WorkerKind::gpu, c.replicas);

        CHECK(compiled == 1);
        check_same_bits(cpu_jit, gpu_jit);
        check_same_bits(gpu_interpreted, gpu_jit);
    }
}

TEST_CASE("gpu: a formula whose NVRTC compile fails still fits, with the interpreter's bits", "[gpu][formula][jit]") {
    const std::vector<std::string> args = {"--fit.replicas=300", "--fit.solver=normal", "--fit.precision=float",
                                           "--model.compile=jit"};
    const ef::FitProblem pb = load_spot(args);
    const ef::FormulaProgram program = ef::compile_formula("c + a * exp(-((px - u)^2 + (py - v)^2) / (2 * s^2))",
                                                           {"a", "u", "v", "s", "c"}, {"px", "py"});
    const std::string cache = (std::filesystem::temp_directory_path() / "ef-gpu-test-nvrtc-fail").string();
    int failed = 0;
    ef::FormulaDeviceJit broken;
    broken.compile = [&](const std::string& kernel, int major, int minor) {
        const std::string arch = "compute_" + std::to_string(major) + std::to_string(minor);
        ef::FormulaDeviceKernel k = ef::compile_formula_device_kernel(program, kernel, arch, cache, {"--no-such-nvrtc-option"});
        failed += k.ok ? 0 : 1;
        return k;
    };

    const ef::ReplicaBlock fallback = fit_replicas(with_device_jit(pb, &broken), ef::WorkerKind::gpu, 300);
    const ef::ReplicaBlock interpreted = fit_replicas(with_device_jit(pb, nullptr), ef::WorkerKind::gpu, 300);

    CHECK(failed == 1);
    check_same_bits(interpreted, fallback);
    std::filesystem::remove_all(cache);
}

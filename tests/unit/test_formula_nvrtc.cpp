// SPDX-License-Identifier: MIT
// The NVRTC side of formulas compiled at run time: the full solver translation unit (the kernel
// templates of kernels/cuda/replica_kernels.cuh with the formula as their model) compiles under
// NVRTC for every kernel a GPU worker asks for, up to 16 parameters; its cache hands the same
// module back; a failing compile reports NVRTC's error. NVRTC needs no GPU, only libnvrtc.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <ensemblefit/model/formula.hpp>

#include "src/model/formula_jit.hpp"
#include "src/model/formula_nvrtc.hpp"

namespace {

namespace fs = std::filesystem;

/// True when NVRTC can be opened here (else the test warns and checks nothing more).
bool have_nvrtc() {
    if (!ef::nvrtc_version().empty()) return true;
    WARN("no libnvrtc: the NVRTC solver kernels are not tested");
    return false;
}

fs::path fresh_dir(const std::string& name) {
    const fs::path d = fs::temp_directory_path() / ("ef-test-nvrtc-" + name + "-" + std::to_string(::getpid()));
    fs::remove_all(d);
    return d;
}

std::vector<std::string> names(int count) {
    std::vector<std::string> v;
    for (int k = 0; k < count; ++k) v.push_back("p" + std::to_string(k));
    return v;
}

}  // namespace

TEST_CASE("formula nvrtc solver source names the shared kernels and the formula model", "[formula][jit][nvrtc]") {
    const auto spot = ef::compile_formula("c + a * exp(-((px - u)^2 + (py - v)^2) / (2 * s^2))",
                                          {"a", "u", "v", "s", "c"}, {"px", "py"});

    const std::string src = ef::formula_nvrtc_solver_source(spot);
    const auto headers = ef::formula_nvrtc_solver_headers();

    CHECK_THAT(src, Catch::Matchers::Contains("#include \"kernels/cuda/replica_kernels.cuh\""));
    CHECK_THAT(src, Catch::Matchers::Contains("struct FormulaJitModel"));
    std::vector<std::string> header_names;
    for (const auto& h : headers) header_names.push_back(h.first);
    for (const char* needed : {"kernels/cuda/replica_kernels.cuh", "kernels/fit/lm_normal.hpp", "kernels/fit/lm.hpp",
                               "kernels/fit/resample.hpp", "Random123/philox.h", "array.h", "cmath", "vector"})
        CHECK(std::find(header_names.begin(), header_names.end(), needed) != header_names.end());
}

TEST_CASE("formula nvrtc compiles the normal and qr solver kernels, 16 parameters included", "[formula][jit][nvrtc]") {
    if (!have_nvrtc()) return;
    const fs::path cache = fresh_dir("solver");
    const auto spot = ef::compile_formula("c + a * exp(-((px - u)^2 + (py - v)^2) / (2 * s^2))",
                                          {"a", "u", "v", "s", "c"}, {"px", "py"});
    const auto wide = ef::compile_formula(
        "p0 + p1*x + p2*y + p3*x*y + p4*x^2 + p5*y^2 + p6*exp(-p7*x) + p8*sin(p9*y) + "
        "p10*cos(p11*x) + p12*atan(p13*y) + p14*sqrt(abs(p15*x))",
        names(16), {"x", "y"});
    struct Case {
        const ef::FormulaProgram* program;
        std::string kernel;
    };
    const std::string m = ef::kFormulaDeviceModel;
    const std::vector<Case> cases = {
        {&spot, "ef::cuda::normal_fit_kernel<float, 5, " + m + ">"},
        {&spot, "ef::cuda::normal_fit_kernel<double, 5, " + m + ">"},
        {&spot, "ef::cuda::lm_fit_kernel<8, " + m + ">"},
        {&wide, "ef::cuda::normal_fit_kernel<float, 16, " + m + ">"},
    };

    for (const Case& c : cases) {
        INFO(c.kernel);
        const ef::FormulaDeviceKernel k =
            ef::compile_formula_device_kernel(*c.program, c.kernel, "compute_90", cache.string(), {});

        INFO(k.why);
        REQUIRE(k.ok);
        CHECK_FALSE(k.from_cache);
        CHECK(k.seconds > 0.0);
        CHECK_THAT(k.ptx, Catch::Matchers::Contains(".entry " + k.entry + "("));
        CHECK_THAT(k.entry, Catch::Matchers::Contains("FormulaJitModel"));
    }

    // The same request again: the process's copy, then (another process) the files.
    const ef::FormulaDeviceKernel again =
        ef::compile_formula_device_kernel(spot, cases[0].kernel, "compute_90", cache.string(), {});
    CHECK(again.ok);
    CHECK(again.from_cache);
    CHECK(again.seconds == 0.0);
    int ptx_files = 0;
    for (const auto& e : fs::directory_iterator(cache)) ptx_files += e.path().extension() == ".ptx" ? 1 : 0;
    CHECK(ptx_files == 4);
    fs::remove_all(cache);
}

TEST_CASE("formula nvrtc reports a failed compile with NVRTC's error and its log file", "[formula][jit][nvrtc]") {
    if (!have_nvrtc()) return;
    const fs::path cache = fresh_dir("fail");
    const auto f = ef::compile_formula("a * x + b", {"a", "b"}, {"x"});
    const std::string kernel = std::string("ef::cuda::normal_fit_kernel<float, 3, ") + ef::kFormulaDeviceModel + ">";

    const ef::FormulaDeviceKernel k =
        ef::compile_formula_device_kernel(f, kernel, "compute_90", cache.string(), {"--no-such-nvrtc-option"});

    CHECK_FALSE(k.ok);
    CHECK(k.ptx.empty());
    CHECK_THAT(k.why, Catch::Matchers::StartsWith("NVRTC could not compile " + kernel + ": "));
    CHECK_THAT(k.why, Catch::Matchers::Contains(".log)"));
    fs::remove_all(cache);
}

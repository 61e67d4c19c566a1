// SPDX-License-Identifier: MIT
// A formula's generated device code (src/model/formula_jit.cpp, formula_nvrtc_source), compiled
// by NVRTC at run time and launched through the CUDA driver API, against the CPU interpreter:
// the same bits (any NaN equal to any NaN) on double, float and Dual<float, 16>, at more points
// than one block. gpu_tests' main (test_gpu_fit.cpp) exits 77 where no GPU is visible. The
// driver is opened with dlopen, so the test builds without CUDA headers.
#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include <ensemblefit/model/formula.hpp>

#include "kernels/core/dual.hpp"
#include "kernels/models/formula_model.hpp"
#include "src/model/formula_jit.hpp"
#include "src/model/formula_nvrtc.hpp"

namespace {

using CuResult = int;
using CuDevice = int;
using CuContext = void*;
using CuModule = void*;
using CuFunction = void*;
using CuPtr = unsigned long long;

/// The driver entry points used (cuda.h's signatures, by value types only).
struct Driver {
    void* h = nullptr;
    CuResult (*init)(unsigned) = nullptr;
    CuResult (*device_get)(CuDevice*, int) = nullptr;
    CuResult (*attribute)(int*, int, CuDevice) = nullptr;
    CuResult (*retain)(CuContext*, CuDevice) = nullptr;
    CuResult (*set_current)(CuContext) = nullptr;
    CuResult (*load)(CuModule*, const void*) = nullptr;
    CuResult (*function)(CuFunction*, CuModule, const char*) = nullptr;
    CuResult (*alloc)(CuPtr*, std::size_t) = nullptr;
    CuResult (*to_device)(CuPtr, const void*, std::size_t) = nullptr;
    CuResult (*to_host)(void*, CuPtr, std::size_t) = nullptr;
    CuResult (*launch)(CuFunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*,
                       void**, void**) = nullptr;
    CuResult (*sync)() = nullptr;
    CuResult (*release)(CuPtr) = nullptr;

    template <class Fn>
    void get(Fn& f, const char* name) {
        f = reinterpret_cast<Fn>(dlsym(h, name));
        REQUIRE(f != nullptr);
    }
    Driver() {
        h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        REQUIRE(h != nullptr);
        get(init, "cuInit");
        get(device_get, "cuDeviceGet");
        get(attribute, "cuDeviceGetAttribute");
        get(retain, "cuDevicePrimaryCtxRetain");
        get(set_current, "cuCtxSetCurrent");
        get(load, "cuModuleLoadData");
        get(function, "cuModuleGetFunction");
        get(alloc, "cuMemAlloc_v2");
        get(to_device, "cuMemcpyHtoD_v2");
        get(to_host, "cuMemcpyDtoH_v2");
        get(launch, "cuLaunchKernel");
        get(sync, "cuCtxSynchronize");
        get(release, "cuMemFree_v2");
    }
};

template <class R>
bool same_or_both_nan(const R* a, const R* b, std::size_t count) {
    for (std::size_t k = 0; k < count; ++k) {
        if (std::isnan(a[k]) && std::isnan(b[k])) continue;
        if (std::memcmp(&a[k], &b[k], sizeof(R)) != 0) return false;
    }
    return true;
}

template <class T>
bool same_bits(const T& a, const T& b) {
    if constexpr (std::is_floating_point_v<T>) {
        return same_or_both_nan(&a, &b, 1);
    } else {
        return same_or_both_nan(&a.v, &b.v, 1) && same_or_both_nan(a.d, b.d, sizeof(a.d) / sizeof(a.d[0]));
    }
}

/// Launches ef_formula_values_<slot> over n points and compares with the interpreter on the CPU.
template <class T>
void check_slot(Driver& cu, CuModule mod, int slot, const ef::FormulaProgram& prog, const std::vector<T>& p,
                const std::vector<double>& x, int nx) {
    const int n = static_cast<int>(x.size()) / nx;
    CuFunction f = nullptr;
    REQUIRE(cu.function(&f, mod, ("ef_formula_values_" + std::to_string(slot)).c_str()) == 0);
    CuPtr dp = 0, dx = 0, dout = 0;
    REQUIRE(cu.alloc(&dp, p.size() * sizeof(T)) == 0);
    REQUIRE(cu.alloc(&dx, x.size() * sizeof(double)) == 0);
    REQUIRE(cu.alloc(&dout, static_cast<std::size_t>(n) * sizeof(T)) == 0);
    REQUIRE(cu.to_device(dp, p.data(), p.size() * sizeof(T)) == 0);
    REQUIRE(cu.to_device(dx, x.data(), x.size() * sizeof(double)) == 0);
    int nx_arg = nx, n_arg = n;
    void* args[] = {&dp, &dx, &nx_arg, &n_arg, &dout};
    REQUIRE(cu.launch(f, 2, 1, 1, 128, 1, 1, 0, nullptr, args, nullptr) == 0);
    REQUIRE(cu.sync() == 0);
    std::vector<T> gpu(static_cast<std::size_t>(n));
    REQUIRE(cu.to_host(gpu.data(), dout, gpu.size() * sizeof(T)) == 0);
    cu.release(dp);
    cu.release(dx);
    cu.release(dout);

    ef::FormulaModel m;
    m.code = prog.code.data();
    m.constants = prog.constants.data();
    m.code_size = static_cast<int>(prog.code.size());
    m.params = static_cast<int>(p.size());
    for (int i = 0; i < n; ++i) {
        const T cpu = m.value<T>(p.data(), nullptr, x.data() + static_cast<long>(i) * nx, i);
        INFO("slot " << slot << ", point " << i);
        REQUIRE(same_bits(cpu, gpu[static_cast<std::size_t>(i)]));
    }
}

}  // namespace

TEST_CASE("gpu: a formula compiled by NVRTC gives the CPU interpreter's bits", "[gpu][formula][jit]") {
    Driver cu;
    REQUIRE(cu.init(0) == 0);
    CuDevice dev = 0;
    REQUIRE(cu.device_get(&dev, 0) == 0);
    int major = 0, minor = 0;
    REQUIRE(cu.attribute(&major, 75, dev) == 0);  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
    REQUIRE(cu.attribute(&minor, 76, dev) == 0);  // ..._MINOR
    CuContext ctx = nullptr;
    REQUIRE(cu.retain(&ctx, dev) == 0);
    REQUIRE(cu.set_current(ctx) == 0);
    std::vector<std::string> params;
    for (int k = 0; k < 16; ++k) params.push_back("p" + std::to_string(k));
    const std::string arch = "compute_" + std::to_string(major) + std::to_string(minor);
    std::vector<double> x;
    for (int i = 0; i < 300; ++i) {  // > one block of 128; zeros included
        x.push_back(i % 15 == 0 ? 0.0 : 0.05 * i - 7.0);
        x.push_back(i % 7 == 0 ? 0.0 : std::sin(0.3 * i) * 9.0);
    }
    for (const char* text : {"p4 + p0 * exp(-((x - p1)^2 + (y - p2)^2) / (2 * p3^2))",
                             "p0 + p1*x + p2*y + p3*x*y + p4*x^2 + p5*y^2 + p6*exp(-p7*x) + p8*sin(p9*y) + "
                             "p10*cos(p11*x) + p12*atan(p13*y) + p14*sqrt(abs(p15*x)) + log(p0) * pow(p1, p2)"}) {
        INFO(text);
        const ef::FormulaProgram prog = ef::compile_formula(text, params, {"x", "y"});
        const ef::NvrtcResult r = ef::compile_with_nvrtc(ef::formula_nvrtc_source(prog), ef::formula_nvrtc_headers(),
                                                         arch, "/usr/local/cuda/include/cccl");
        INFO(r.log);
        REQUIRE(r.ok);
        CuModule mod = nullptr;
        REQUIRE(cu.load(&mod, r.ptx.c_str()) == 0);
        std::vector<double> pd;
        for (int k = 0; k < 16; ++k) pd.push_back(1.5 + 0.25 * k);
        check_slot<double>(cu, mod, 0, prog, pd, x, 2);
        check_slot<float>(cu, mod, 1, prog, std::vector<float>(pd.begin(), pd.end()), x, 2);
        std::vector<ef::Dual<float, 16>> pf;
        for (int k = 0; k < 16; ++k) pf.push_back(ef::Dual<float, 16>::variable(static_cast<float>(pd[k]), k));
        check_slot<ef::Dual<float, 16>>(cu, mod, 11, prog, pf, x, 2);
    }
}

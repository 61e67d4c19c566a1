// SPDX-License-Identifier: MIT
#pragma once

#include <functional>
#include <string>

#include <ensemblefit/model/formula.hpp>

#include "kernels/core/dual.hpp"
#include "kernels/models/builtin_models.hpp"

namespace ef {

/**
 * The scalar types the solvers evaluate a model on, numbered: a formula compiled at run time
 * (src/model/formula_jit.cpp) has one host entry point per slot. -1: no entry point (the
 * interpreter runs). The order is the generated library's ABI; formula_jit.cpp lists the same
 * types in the same order.
 */
template <class T>
inline constexpr int kFormulaJitSlot = -1;
template <>
inline constexpr int kFormulaJitSlot<double> = 0;
template <>
inline constexpr int kFormulaJitSlot<float> = 1;
template <>
inline constexpr int kFormulaJitSlot<Dual<double, 3>> = 2;
template <>
inline constexpr int kFormulaJitSlot<Dual<double, 4>> = 3;
template <>
inline constexpr int kFormulaJitSlot<Dual<double, 5>> = 4;
template <>
inline constexpr int kFormulaJitSlot<Dual<double, 8>> = 5;
template <>
inline constexpr int kFormulaJitSlot<Dual<double, 16>> = 6;
template <>
inline constexpr int kFormulaJitSlot<Dual<float, 3>> = 7;
template <>
inline constexpr int kFormulaJitSlot<Dual<float, 4>> = 8;
template <>
inline constexpr int kFormulaJitSlot<Dual<float, 5>> = 9;
template <>
inline constexpr int kFormulaJitSlot<Dual<float, 8>> = 10;
template <>
inline constexpr int kFormulaJitSlot<Dual<float, 16>> = 11;
inline constexpr int kFormulaJitSlots = 12;

/**
 * Host entry points of one formula compiled to machine code at run time, `T f(const T* p,
 * const double* x)` for the type of each slot (stored type-erased; FormulaModel casts back).
 * They run the formula's postfix program as straight-line code with the same operations in the
 * same order, through the same ef_math functions, so they return the interpreter's bits.
 */
struct FormulaJitTable {
    using Entry = void (*)();
    Entry fn[kFormulaJitSlots] = {};
};

/// A formula's solver kernel compiled at run time for a GPU (NVRTC), as a GPU worker loads it.
struct FormulaDeviceKernel {
    bool ok = false;
    std::string ptx;         ///< the module, PTX for the device's compute capability
    std::string entry;       ///< the kernel's mangled name in the module
    std::string why;         ///< on failure: why, in one line
    double seconds = 0.0;    ///< NVRTC's compile time (0 when the module came from a cache)
    bool from_cache = false;
};

/// The type the generated device source gives the formula model, `struct { int params; }`
/// plus its value(): the Model argument of the kernel instantiations a GPU worker asks for.
inline constexpr const char kFormulaDeviceModel[] = "ef::FormulaJitModel";

/**
 * Compiles a formula's solver kernels for a GPU worker (set by the model factory from
 * `[model] compile`, src/model/formula_jit.cpp; host only). `kernel` names the instantiation,
 * e.g. "ef::cuda::normal_fit_kernel<float, 5, ef::FormulaJitModel>" (the templates of
 * kernels/cuda/replica_kernels.cuh), for compute capability major.minor. Compiled once per
 * process and kernel, and cached on disk next to the CPU objects.
 */
struct FormulaDeviceJit {
    std::function<FormulaDeviceKernel(const std::string& kernel, int cc_major, int cc_minor)> compile;
};

/**
 * A user formula as a model: interprets a FormulaProgram (postfix code) on any scalar type.
 * Holds pointers to the code and constants and their lengths, so the same struct works on host
 * memory or on copies in device memory (a GPU worker copies code_size ops and constants_size
 * doubles).
 */
struct FormulaModel : PointwiseModel {
    const FormulaOp* code = nullptr;
    const double* constants = nullptr;
    int code_size = 0;
    int constants_size = 0;
    int params = 0;
    /// Compiled entry points (host memory, host only); null: interpret. Device code always
    /// interprets (a GPU worker's copy keeps the host pointer but never calls it).
    const FormulaJitTable* jit = nullptr;
    /// Device kernels compiled at run time (host memory, host only); null: a GPU worker
    /// interprets.
    const FormulaDeviceJit* device_jit = nullptr;

    EF_HD int num_params() const { return params; }

    template <class T>
    EF_HD T value(const T* p, const T* /*ws*/, const double* x, int /*i*/) const {
#ifndef __CUDA_ARCH__
        if constexpr (kFormulaJitSlot<T> >= 0) {
            if (jit != nullptr) {
                using Fn = T (*)(const T*, const double*);
                return reinterpret_cast<Fn>(jit->fn[kFormulaJitSlot<T>])(p, x);
            }
        }
#endif
        return interpret(p, x);
    }

    /// The postfix program run on a stack, one operation per step.
    template <class T>
    EF_HD T interpret(const T* p, const double* x) const {
        // Unqualified calls: ef::exp(double) etc. (ef::math, identical on host and device) for
        // T = double, the Dual overloads for T = Dual (dual.hpp).
        T stack[kFormulaMaxStack];
        int sp = 0;
        for (int pc = 0; pc < code_size; ++pc) {
            const FormulaOp op = code[pc];
            switch (op.code) {
                case FormulaOpCode::push_const: stack[sp++] = T(constants[op.arg]); break;
                case FormulaOpCode::push_param: stack[sp++] = p[op.arg]; break;
                case FormulaOpCode::push_var: stack[sp++] = T(x[op.arg]); break;
                case FormulaOpCode::add: --sp; stack[sp - 1] = stack[sp - 1] + stack[sp]; break;
                case FormulaOpCode::sub: --sp; stack[sp - 1] = stack[sp - 1] - stack[sp]; break;
                case FormulaOpCode::mul: --sp; stack[sp - 1] = stack[sp - 1] * stack[sp]; break;
                case FormulaOpCode::div: --sp; stack[sp - 1] = stack[sp - 1] / stack[sp]; break;
                case FormulaOpCode::pow: --sp; stack[sp - 1] = pow(stack[sp - 1], stack[sp]); break;
                case FormulaOpCode::neg: stack[sp - 1] = -stack[sp - 1]; break;
                case FormulaOpCode::exp: stack[sp - 1] = exp(stack[sp - 1]); break;
                case FormulaOpCode::log: stack[sp - 1] = log(stack[sp - 1]); break;
                case FormulaOpCode::sqrt: stack[sp - 1] = sqrt(stack[sp - 1]); break;
                case FormulaOpCode::sin: stack[sp - 1] = sin(stack[sp - 1]); break;
                case FormulaOpCode::cos: stack[sp - 1] = cos(stack[sp - 1]); break;
                case FormulaOpCode::tan: stack[sp - 1] = tan(stack[sp - 1]); break;
                case FormulaOpCode::atan: stack[sp - 1] = atan(stack[sp - 1]); break;
                case FormulaOpCode::abs: stack[sp - 1] = abs(stack[sp - 1]); break;
                case FormulaOpCode::square: stack[sp - 1] = stack[sp - 1] * stack[sp - 1]; break;
            }
        }
        return stack[0];
    }
};

}  // namespace ef

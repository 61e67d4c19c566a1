// SPDX-License-Identifier: MIT
#pragma once

#include <ensemblefit/model/formula.hpp>

#include "kernels/core/dual.hpp"
#include "kernels/models/builtin_models.hpp"

namespace ef {

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

    EF_HD int num_params() const { return params; }

    template <class T>
    EF_HD T value(const T* p, const T* /*ws*/, const double* x, int /*i*/) const {
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

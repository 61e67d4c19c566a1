// SPDX-License-Identifier: MIT
// Fuzz target: the formula compiler (src/model/formula.cpp) as the formula model uses it, and
// the compiled program run by FormulaModel on doubles and on dual numbers (the evaluator keeps
// a fixed stack of kFormulaMaxStack, so a wrong max_stack is a stack overflow ASan reports).
// Input: the formula text; parameters a b c, variables x y.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <ensemblefit/model/formula.hpp>

#include "kernels/core/dual.hpp"
#include "kernels/models/formula_model.hpp"
#include "tests/fuzz/fuzz_common.hpp"

namespace {

void check_program(const ef::FormulaProgram& prog, int params, int vars) {
    if (prog.max_stack < 1 || prog.max_stack > ef::kFormulaMaxStack)
        ef::fuzz::finding("max_stack " + std::to_string(prog.max_stack) + " out of 1.." +
                          std::to_string(ef::kFormulaMaxStack));
    for (const ef::FormulaOp& op : prog.code) {
        const int limit = op.code == ef::FormulaOpCode::push_const ? static_cast<int>(prog.constants.size())
                          : op.code == ef::FormulaOpCode::push_param ? params
                          : op.code == ef::FormulaOpCode::push_var   ? vars
                                                                     : 1;
        if (op.arg < 0 || op.arg >= limit) ef::fuzz::finding("operand index out of range");
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    const std::vector<std::string> params{"a", "b", "c"};
    const std::vector<std::string> vars{"x", "y"};
    ef::fuzz::expect_only_user_errors([&] {
        ef::FormulaProgram prog;
        try {
            (void)ef::formula_names(text);
            prog = ef::compile_formula(text, params, vars);
        } catch (const ef::FormulaError& e) {
            if (e.column() < 1 || static_cast<size_t>(e.column()) > text.size() + 1)
                ef::fuzz::finding("FormulaError column " + std::to_string(e.column()) +
                                  " outside the formula (" + std::to_string(text.size()) + " bytes)");
            return;
        }
        check_program(prog, 3, 2);
        ef::FormulaModel model;
        model.code = prog.code.data();
        model.code_size = static_cast<int>(prog.code.size());
        model.constants = prog.constants.data();
        model.constants_size = static_cast<int>(prog.constants.size());
        model.params = 3;
        const double x[2] = {0.5, -2.0};
        const double p[3] = {1.5, -0.25, 3.0};
        (void)model.value(p, static_cast<const double*>(nullptr), x, 0);
        using D = ef::Dual<double, 3>;
        const D pd[3] = {D::variable(p[0], 0), D::variable(p[1], 1), D::variable(p[2], 2)};
        (void)model.value(pd, static_cast<const D*>(nullptr), x, 0);
    });
    return 0;
}

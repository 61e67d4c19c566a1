// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <stdexcept>
#include <cstddef>
#include <string>
#include <vector>

namespace ef {

/// One instruction of a compiled formula (a postfix stack program).
enum class FormulaOpCode : std::int32_t {
    push_const,  ///< push constants[arg]
    push_param,  ///< push p[arg]
    push_var,    ///< push x[arg]
    add,
    sub,
    mul,
    div,
    pow,
    neg,
    exp,
    log,
    sqrt,
    sin,
    cos,
    tan,
    atan,
    abs,
    square,  ///< x * x: what `^2` compiles to (exact derivative, no pow)
};

struct FormulaOp {
    FormulaOpCode code;
    std::int32_t arg;  ///< index for the push_* codes, unused otherwise
};

/**
 * A formula model compiled once at start into a postfix program.
 *
 * The program is evaluated by FormulaModel (kernels/models/formula_model.hpp) on doubles or on
 * dual numbers, on the host or on a device, so formula models are differentiated exactly like
 * built-in ones. `max_stack` is the deepest the evaluation stack gets.
 */
struct FormulaProgram {
    std::vector<FormulaOp> code;
    std::vector<double> constants;
    int max_stack = 0;
    std::string text;
};

/// A syntax or name error in a formula; `column` is 1-based into the formula text.
class FormulaError : public std::runtime_error {
   public:
    FormulaError(int column, const std::string& what)
        : std::runtime_error(what), column_(column) {}
    int column() const { return column_; }

   private:
    int column_;
};

/// Deepest evaluation stack a formula may need (FormulaModel keeps its stack in registers or
/// local memory, so the bound is fixed at compile time).
inline constexpr int kFormulaMaxStack = 32;

/// Longest formula text accepted, in characters: a longer one is refused before it is parsed or
/// compiled (the run-time compiler's time grows faster than the formula; issue 39).
inline constexpr std::size_t kFormulaMaxLength = 4096;

/**
 * Parses `text`: numbers, the names in `param_names` and `var_names`, the constant `pi`,
 * `+ - * / ^` (also `**` for power), unary minus, parentheses, and the functions
 * `exp log sqrt sin cos tan atan abs` (one argument) and `pow` (two). Power is right
 * associative and binds tighter than unary minus (-x^2 == -(x^2)).
 * Throws FormulaError naming the 1-based column of the first problem; a text longer than
 * kFormulaMaxLength characters is refused at column kFormulaMaxLength + 1.
 */
FormulaProgram compile_formula(const std::string& text,
                               const std::vector<std::string>& param_names,
                               const std::vector<std::string>& var_names);

/// Names (identifiers other than functions and pi) used by a formula, in order of first use.
std::vector<std::string> formula_names(const std::string& text);

}  // namespace ef

// SPDX-License-Identifier: MIT
#include <catch2/catch.hpp>

#include <ensemblefit/model/formula.hpp>

#include <cmath>
#include <functional>
#include <numbers>
#include <string>
#include <vector>

#include "kernels/core/dual.hpp"
#include "kernels/models/formula_model.hpp"

namespace {

using Names = std::vector<std::string>;
using Vec = std::vector<double>;
using D4 = ef::Dual<double, 4>;

ef::FormulaModel model_of(const ef::FormulaProgram& prog, int params) {
    ef::FormulaModel m;
    m.code = prog.code.data();
    m.constants = prog.constants.data();
    m.code_size = static_cast<int>(prog.code.size());
    m.params = params;
    return m;
}

double eval(const ef::FormulaProgram& prog, const Vec& p, const Vec& x) {
    const ef::FormulaModel m = model_of(prog, static_cast<int>(p.size()));
    return m.value<double>(p.data(), nullptr, x.data(), 0);
}

/// A formula without names, evaluated on doubles.
double eval_const(const std::string& text) {
    return eval(ef::compile_formula(text, {}, {}), {}, {});
}

/// Value and full gradient through Dual<double, 4>, seeding parameters four at a time the way
/// the workers do for models with more than K parameters.
void eval_dual(const ef::FormulaProgram& prog, const Vec& p, const Vec& x, double& value,
               Vec& grad) {
    const int n = static_cast<int>(p.size());
    const ef::FormulaModel m = model_of(prog, n);
    grad.assign(p.size(), 0.0);
    for (int block = 0; block < n; block += 4) {
        std::vector<D4> pd;
        for (int k = 0; k < n; ++k) pd.push_back(D4::variable(p[k], k - block));
        const D4 r = m.value<D4>(pd.data(), nullptr, x.data(), 0);
        value = r.v;
        for (int k = block; k < n && k < block + 4; ++k) grad[k] = r.d[k - block];
    }
}

/// Central difference with one Richardson step (error O(h^4)), steps relative to each
/// parameter so that parameters of very different size (5e-9 next to 2.6) are handled alike.
double finite_difference(const ef::FormulaProgram& prog, Vec p, const Vec& x, int k) {
    const double h = 1e-3 * std::max(std::abs(p[k]), 1e-300);
    const double p0 = p[k];
    auto central = [&](double step) {
        p[k] = p0 + step;
        const double up = eval(prog, p, x);
        p[k] = p0 - step;
        const double down = eval(prog, p, x);
        p[k] = p0;
        return (up - down) / (2 * step);
    };
    return (4 * central(h / 2) - central(h)) / 3;
}

bool rel_close(double a, double b, double rel) {
    return std::abs(a - b) <= rel * std::max(std::abs(a), std::abs(b));
}

/// Runs `text` through compile_formula and requires a FormulaError at `column` whose message
/// contains `message`.
void require_error(const std::string& text, int column, const std::string& message,
                   const Names& params = {"a", "b"}, const Names& vars = {"x"}) {
    INFO("formula: \"" << text << "\"");
    try {
        (void)ef::compile_formula(text, params, vars);
        FAIL("no FormulaError thrown");
    } catch (const ef::FormulaError& e) {
        INFO("message: " << e.what());
        CHECK(e.column() == column);
        CHECK_THAT(std::string(e.what()), Catch::Matchers::Contains(message));
    }
}

}  // namespace

TEST_CASE("formula numbers", "[formula]") {
    CHECK(eval_const("42") == 42.0);
    CHECK(eval_const("1e-3") == 1e-3);
    CHECK(eval_const("1.5e-3") == 1.5e-3);
    CHECK(eval_const("1.5E+3") == 1500.0);
    CHECK(eval_const(".5") == 0.5);
    CHECK(eval_const("2.") == 2.0);
    CHECK(eval_const("0.1") == 0.1);
    CHECK(eval_const("  7\t") == 7.0);
}

TEST_CASE("formula precedence and associativity", "[formula]") {
    CHECK(eval_const("2^3^2") == 512.0);
    CHECK(eval_const("(2^3)^2") == 64.0);
    CHECK(eval_const("2**3**2") == 512.0);
    CHECK(eval_const("2**3") == 8.0);
    CHECK(eval_const("-2^2") == -4.0);
    CHECK(eval_const("(-2)^2") == 4.0);
    CHECK(eval_const("1-2-3") == -4.0);
    CHECK(eval_const("8/4/2") == 1.0);
    CHECK(eval_const("2+3*4") == 14.0);
    CHECK(eval_const("2*3+4") == 10.0);
    CHECK(eval_const("(2+3)*4") == 20.0);
    CHECK(eval_const("[2+3]*4") == 20.0);
    CHECK(eval_const("2^-1") == 0.5);
    CHECK(eval_const("-2^-2") == -0.25);
    CHECK(eval_const("2^2*3") == 12.0);
    CHECK(eval_const("3*2^2") == 12.0);
    CHECK(eval_const("2*-3") == -6.0);
    CHECK(eval_const("+3") == 3.0);
    CHECK(eval_const("--3") == 3.0);
    CHECK(eval_const("1 - -2") == 3.0);
    CHECK(eval_const("6/2*3") == 9.0);
    CHECK(eval_const("12/(2*3)") == 2.0);
}

TEST_CASE("formula functions match <cmath>", "[formula]") {
    const double v = 0.7;
    CHECK(eval_const("exp(0.7)") == std::exp(v));
    CHECK(eval_const("log(0.7)") == std::log(v));
    CHECK(eval_const("sqrt(0.7)") == std::sqrt(v));
    CHECK(eval_const("sin(0.7)") == std::sin(v));
    CHECK(eval_const("cos(0.7)") == std::cos(v));
    CHECK(eval_const("tan(0.7)") == std::tan(v));
    CHECK(eval_const("atan(0.7)") == std::atan(v));
    CHECK(eval_const("abs(-0.7)") == v);
    CHECK(eval_const("abs(0.7)") == v);
    CHECK(eval_const("pow(0.7, 1.3)") == std::pow(v, 1.3));
    CHECK(eval_const("0.7^1.3") == std::pow(v, 1.3));
    CHECK(eval_const("exp[-0.7]") == std::exp(-v));  // NIST writes exp[...]
    CHECK(eval_const("pi") == std::numbers::pi);
    CHECK(eval_const("cos(2*pi)") == std::cos(2 * std::numbers::pi));
    CHECK(eval_const("sqrt(pow(3, 2) + 4^2)") == 5.0);
}

TEST_CASE("formula names and variables", "[formula]") {
    const Names params{"a", "b"};
    const Names vars{"x", "y"};
    const auto prog = ef::compile_formula("a*x - b/y + x^2", params, vars);
    CHECK(eval(prog, {2.0, 3.0}, {5.0, 4.0}) == 2.0 * 5.0 - 3.0 / 4.0 + 25.0);
    CHECK(prog.text == "a*x - b/y + x^2");

    // Unary minus applies after the power: -x^2 == -(x^2), also for a variable.
    const auto neg = ef::compile_formula("-x^2", {}, {"x"});
    CHECK(eval(neg, {}, {3.0}) == -9.0);

    // Identifiers with digits and underscores.
    const auto ids = ef::compile_formula("b_1 + B2*x_0", {"b_1", "B2"}, {"x_0"});
    CHECK(eval(ids, {1.0, 2.0}, {3.0}) == 7.0);
}

TEST_CASE("formula x^2 compiles to one multiplication with the exact derivative", "[formula]") {
    using Op = ef::FormulaOpCode;
    const auto sq = ef::compile_formula("(a - x)^2", {"a"}, {"x"});
    REQUIRE(sq.code.size() == 4);
    CHECK(sq.code[3].code == Op::square);
    CHECK(sq.max_stack == 2);
    for (const double a : {-3.25, 0.1, 7.0}) {
        double v = 0;
        Vec g;
        eval_dual(sq, {a}, {1.5}, v, g);
        CHECK(v == (a - 1.5) * (a - 1.5));
        CHECK(g[0] == 2 * (a - 1.5));
    }
    // Other exponents (negative, fractional, a variable) still go through pow.
    for (const char* text : {"a^-2", "a^2.5", "a^x", "a^(2)^1"}) {
        const auto p = ef::compile_formula(text, {"a"}, {"x"});
        CHECK(p.code.back().code == Op::pow);
    }
    CHECK(ef::compile_formula("a^(2)", {"a"}, {}).code.back().code == Op::square);
}

TEST_CASE("formula postfix code and stack depth", "[formula]") {
    using Op = ef::FormulaOpCode;
    const auto prog = ef::compile_formula("a + b*x", {"a", "b"}, {"x"});
    REQUIRE(prog.code.size() == 5);
    CHECK(prog.code[0].code == Op::push_param);
    CHECK(prog.code[0].arg == 0);
    CHECK(prog.code[1].code == Op::push_param);
    CHECK(prog.code[1].arg == 1);
    CHECK(prog.code[2].code == Op::push_var);
    CHECK(prog.code[2].arg == 0);
    CHECK(prog.code[3].code == Op::mul);
    CHECK(prog.code[4].code == Op::add);
    CHECK(prog.max_stack == 3);
    CHECK(prog.constants.empty());

    CHECK(ef::compile_formula("a*x + b", {"a", "b"}, {"x"}).max_stack == 2);
    CHECK(ef::compile_formula("1-2-3", {}, {}).max_stack == 2);
    CHECK(ef::compile_formula("2^3^2", {}, {}).max_stack == 3);
    CHECK(ef::compile_formula("-exp(a)", {"a"}, {}).max_stack == 1);
    CHECK(ef::compile_formula("pow(a, 2)", {"a"}, {}).max_stack == 2);

    // -1 is negation of a literal, not a folded constant.
    const auto neg = ef::compile_formula("-1", {}, {});
    REQUIRE(neg.code.size() == 2);
    CHECK(neg.code[1].code == Op::neg);
    REQUIRE(neg.constants.size() == 1);
    CHECK(neg.constants[0] == 1.0);
}

TEST_CASE("formula evaluation stack limit", "[formula]") {
    // x + (x + (x + ...)) with n terms needs exactly n stack slots.
    auto nested = [](int n) {
        std::string s = "x";
        for (int k = 1; k < n; ++k) s = "x+(" + s + ")";
        return s;
    };
    const auto ok = ef::compile_formula(nested(ef::kFormulaMaxStack), {}, {"x"});
    CHECK(ok.max_stack == ef::kFormulaMaxStack);
    CHECK(eval(ok, {}, {1.5}) == 1.5 * ef::kFormulaMaxStack);

    try {
        (void)ef::compile_formula(nested(ef::kFormulaMaxStack + 1), {}, {"x"});
        FAIL("no FormulaError thrown");
    } catch (const ef::FormulaError& e) {
        CHECK(e.column() == 1);
        CHECK_THAT(std::string(e.what()), Catch::Matchers::Contains("too deeply nested"));
    }

    // Redundant parentheses do not deepen the evaluation stack, but must not exhaust the
    // parser's recursion either.
    const std::string deep = std::string(5000, '(') + "x" + std::string(5000, ')');
    CHECK_THROWS_AS(ef::compile_formula(deep, {}, {"x"}), ef::FormulaError);
    CHECK_THROWS_AS(ef::compile_formula(std::string(5000, '-') + "x", {}, {"x"}),
                    ef::FormulaError);
    const auto modest = std::string(50, '(') + "x" + std::string(50, ')');
    CHECK(ef::compile_formula(modest, {}, {"x"}).max_stack == 1);
}

TEST_CASE("formula_names lists identifiers in order of first use", "[formula]") {
    CHECK(ef::formula_names("b1*(1-exp(-b2*x)) + b1*pi") == Names{"b1", "b2", "x"});
    CHECK(ef::formula_names("pow(x, k) * sqrt(a) + k") == Names{"x", "k", "a"});
    CHECK(ef::formula_names("2*pi").empty());
    CHECK_THROWS_AS(ef::formula_names("a*(b"), ef::FormulaError);
    CHECK_THROWS_AS(ef::formula_names(""), ef::FormulaError);
    CHECK_THROWS_AS(ef::formula_names("foo(a)"), ef::FormulaError);
    CHECK_THROWS_AS(ef::formula_names("exp"), ef::FormulaError);
}

namespace {

struct NistCase {
    std::string text;
    Names params;
    Names vars;
    Vec p;
    std::vector<Vec> xs;
    /// Value and analytic gradient at (p, x).
    std::function<double(const Vec& p, const Vec& x, Vec& grad)> exact;
};

std::vector<NistCase> nist_cases() {
    std::vector<NistCase> cases;
    cases.push_back({"b1*(1-exp(-b2*x))", {"b1", "b2"}, {"x"}, {238.94, 5.5016e-4},
                     {{77.6}, {300.0}, {790.0}},
                     [](const Vec& p, const Vec& x, Vec& g) {
                         const double e = std::exp(-p[1] * x[0]);
                         g = {1 - e, p[0] * x[0] * e};
                         return p[0] * (1 - e);
                     }});
    cases.push_back({"b1 / (1+exp(b2-b3*x))", {"b1", "b2", "b3"}, {"x"}, {72.46, 2.618, 0.0674},
                     {{9.0}, {35.0}, {79.0}},
                     [](const Vec& p, const Vec& x, Vec& g) {
                         const double e = std::exp(p[1] - p[2] * x[0]);
                         const double d = 1 + e;
                         g = {1 / d, -p[0] * e / (d * d), p[0] * x[0] * e / (d * d)};
                         return p[0] / d;
                     }});
    cases.push_back({"(b1+b2*x+b3*x^2+b4*x^3) / (1+b5*x+b6*x^2+b7*x^3)",
                     {"b1", "b2", "b3", "b4", "b5", "b6", "b7"},
                     {"x"},
                     {1288.14, 1491.08, 583.238, 75.4167, 0.966295, 0.397973, 0.0497273},
                     {{-3.067}, {-1.2}, {0.5}, {2.0}},
                     [](const Vec& p, const Vec& x, Vec& g) {
                         const double t = x[0];
                         const double num = p[0] + p[1] * t + p[2] * t * t + p[3] * t * t * t;
                         const double den = 1 + p[4] * t + p[5] * t * t + p[6] * t * t * t;
                         const double q = num / (den * den);
                         g = {1 / den, t / den, t * t / den, t * t * t / den,
                              -q * t, -q * t * t, -q * t * t * t};
                         return num / den;
                     }});
    cases.push_back({"b1*(b2+x)^(-1/b3)", {"b1", "b2", "b3"}, {"x"}, {-2523.5, 46.737, 0.932},
                     {{7.447}, {9.0}, {11.4}},
                     [](const Vec& p, const Vec& x, Vec& g) {
                         const double u = p[1] + x[0];
                         const double e = -1 / p[2];
                         const double ue = std::pow(u, e);
                         g = {ue, p[0] * e * ue / u, p[0] * ue * std::log(u) / (p[2] * p[2])};
                         return p[0] * ue;
                     }});
    cases.push_back({"b1 - b2*x1 * exp(-b3*x2)", {"b1", "b2", "b3"}, {"x1", "x2"},
                     {2.5907, 5.6178e-9, -5.7701e-2},
                     {{1.0, 180.0}, {16.0, 250.0}, {64.0, 300.0}},
                     [](const Vec& p, const Vec& x, Vec& g) {
                         const double e = std::exp(-p[2] * x[1]);
                         g = {1.0, -x[0] * e, p[1] * x[0] * x[1] * e};
                         return p[0] - p[1] * x[0] * e;
                     }});
    cases.push_back({"b1*cos(2*pi*x/12) + b2*sin(2*pi*x/12) + atan(b3/(x-b4))/pi",
                     {"b1", "b2", "b3", "b4"}, {"x"}, {10.5, 3.07, 1.2, 0.3},
                     {{5.0}, {-2.5}, {13.0}},
                     [](const Vec& p, const Vec& x, Vec& g) {
                         const double pi = std::numbers::pi;
                         const double w = 2 * pi * x[0] / 12;
                         const double s = x[0] - p[3];
                         const double r = p[2] / s;
                         const double a = 1 / ((1 + r * r) * pi);
                         g = {std::cos(w), std::sin(w), a / s, a * p[2] / (s * s)};
                         return p[0] * std::cos(w) + p[1] * std::sin(w) + std::atan(r) / pi;
                     }});
    return cases;
}

}  // namespace

TEST_CASE("formula derivatives through dual numbers", "[formula]") {
    for (const NistCase& c : nist_cases()) {
        const auto prog = ef::compile_formula(c.text, c.params, c.vars);
        CHECK(ef::formula_names(c.text).size() == c.params.size() + c.vars.size());
        for (const Vec& x : c.xs) {
            INFO("formula: " << c.text << "  x[0] = " << x[0]);
            Vec exact_grad;
            const double exact = c.exact(c.p, x, exact_grad);
            const double plain = eval(prog, c.p, x);
            CHECK(rel_close(plain, exact, 1e-13));

            double dual_value = 0;
            Vec grad;
            eval_dual(prog, c.p, x, dual_value, grad);
            CHECK(rel_close(dual_value, plain, 1e-13));
            REQUIRE(grad.size() == exact_grad.size());
            for (std::size_t k = 0; k < grad.size(); ++k) {
                INFO("d/d" << c.params[k] << ": dual " << grad[k] << ", analytic "
                           << exact_grad[k]);
                CHECK(rel_close(grad[k], exact_grad[k], 1e-12));
                const double fd = finite_difference(prog, c.p, x, static_cast<int>(k));
                INFO("finite difference " << fd);
                CHECK(rel_close(grad[k], fd, 1e-7));
            }
        }
    }
}

TEST_CASE("formula power rule on negative bases with constant exponents", "[formula]") {
    // x^2 and x^3 at negative x must keep finite, exact derivatives (the exponent is a constant
    // so no log of the base is taken).
    const auto prog = ef::compile_formula("a*x^3 + a^2", {"a"}, {"x"});
    double value = 0;
    Vec grad;
    eval_dual(prog, {-1.5}, {-2.0}, value, grad);
    CHECK(value == Approx(-1.5 * -8.0 + 2.25));
    CHECK(grad[0] == Approx(-8.0 + 2 * -1.5));
}

TEST_CASE("formula errors name the column", "[formula]") {
    require_error("a*+", 4, "unexpected end of formula");
    require_error("a*(b", 5, "missing ')' opened at column 3");
    require_error("a*[b", 5, "missing ']' opened at column 3");
    require_error("a $ b", 3, "unexpected character '$'");
    require_error("a*q", 3, "unknown name 'q' (parameters: a, b; variables: x)");
    require_error("foo(a)", 1, "unknown function 'foo'");
    require_error("pow(a)", 1, "function 'pow' takes 2 arguments");
    require_error("pow()", 1, "function 'pow' takes 2 arguments");
    require_error("exp(a, b)", 1, "function 'exp' takes 1 argument");
    require_error("", 1, "empty formula");
    require_error("   ", 1, "empty formula");

    require_error("a)", 2, "unexpected ')'");
    require_error("()", 2, "unexpected ')'");
    require_error("(a]", 3, "expected ')' opened at column 1");
    require_error("a b", 3, "unexpected 'b'");
    require_error("a,b", 2, "unexpected ','");
    require_error("pow(a,)", 7, "unexpected ')'");
    require_error("a^*b", 3, "unexpected '*'");
    require_error("a***b", 4, "unexpected '*'");
    require_error("a**", 4, "unexpected end of formula");
    require_error("2*exp", 3, "function 'exp' needs its argument in parentheses");
    require_error("b*a(x)", 3, "'a' is not a function");
    require_error("pi(x)", 1, "'pi' is not a function");
    require_error("x + 2x", 5, "malformed number '2x'");
    require_error("1.2.3", 1, "malformed number '1.2.3'");
    require_error("a*1e999", 3, "out of range");
    require_error("a + x", 5, "name 'x' is both a parameter and a variable", {"a", "x"}, {"x"});
    require_error("a", 1, "reserved", {"a", "exp"}, {"x"});
    require_error("2*q", 3, "unknown name 'q' (parameters: none; variables: none)", {}, {});
    require_error("a\x01", 2, "unexpected character byte 0x01");
}

TEST_CASE("formula length limit: a long formula is refused before it is parsed", "[formula]") {
    // a + x + x + ... (no deep nesting, a shallow stack: only the length is wrong).
    auto sum = [](std::size_t chars) {
        std::string s = "a";
        while (s.size() + 4 <= chars) s += " + x";
        return s;
    };
    const std::string fits = sum(ef::kFormulaMaxLength);
    REQUIRE(fits.size() <= ef::kFormulaMaxLength);
    CHECK(ef::compile_formula(fits, {"a"}, {"x"}).max_stack == 2);
    for (const std::size_t n : {std::size_t{10000}, std::size_t{200000}}) {
        const std::string text = sum(n);
        try {
            (void)ef::compile_formula(text, {"a"}, {"x"});
            FAIL("no FormulaError thrown");
        } catch (const ef::FormulaError& e) {
            CHECK(e.column() == static_cast<int>(ef::kFormulaMaxLength) + 1);
            CHECK(std::string(e.what()) == "formula too long (" + std::to_string(text.size()) +
                                               " characters; the limit is " +
                                               std::to_string(ef::kFormulaMaxLength) + ")");
        }
        CHECK_THROWS_AS(ef::formula_names(text), ef::FormulaError);
    }
}

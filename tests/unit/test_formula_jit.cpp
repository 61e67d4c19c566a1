// SPDX-License-Identifier: MIT
// Formulas compiled at run time (src/model/formula_jit.cpp) against the interpreter: the same
// bits for every formula of the formula tests, on every scalar type the solvers use.
#include <catch2/catch.hpp>

#include <ensemblefit/core/error.hpp>
#include <ensemblefit/model/formula.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "kernels/core/dual.hpp"
#include "kernels/models/formula_model.hpp"
#include "src/model/formula_jit.hpp"
#include "src/model/formula_nvrtc.hpp"
#include "temp_dir.hpp"

namespace {

using Names = std::vector<std::string>;
using Vec = std::vector<double>;

/// Every formula the formula tests evaluate (tests/unit/test_formula.cpp), the spot, one of 16
/// parameters, the deepest stack, and domain edges (log and sqrt of negatives, 0/0, pow of a
/// negative base, abs at 0), over parameters p0..p15 and variables x, y.
const std::vector<std::string>& formulas() {
    static const std::vector<std::string> f = {
        "42", "1e-3", "1.5e-3", "1.5E+3", ".5", "2.", "0.1", "2^3^2", "(2^3)^2", "-2^2", "(-2)^2",
        "1-2-3", "8/4/2", "2+3*4", "(2+3)*4", "2^-1", "-2^-2", "2*-3", "--3", "6/2*3", "exp(0.7)",
        "log(0.7)", "sqrt(0.7)", "sin(0.7)", "cos(0.7)", "tan(0.7)", "atan(0.7)", "abs(-0.7)",
        "pow(0.7, 1.3)", "0.7^1.3", "pi", "cos(2*pi)", "sqrt(pow(3, 2) + 4^2)",
        "p0*x - p1/y + x^2", "-x^2", "(p0 - x)^2", "p0^-2", "p0^2.5", "p0^x", "p0^(2)^1",
        "p0 + p1*x", "-exp(p0)", "pow(p0, 2)", "-1", "p0*x^3 + p0^2",
        "p0*(1-exp(-p1*x))", "p0 / (1+exp(p1-p2*x))",
        "(p0+p1*x+p2*x^2+p3*x^3) / (1+p4*x+p5*x^2+p6*x^3)", "p0*(p1+x)^(-1/p2)",
        "p0 - p1*x * exp(-p2*y)", "p0*cos(2*pi*x/12) + p1*sin(2*pi*x/12) + atan(p2/(x-p3))/pi",
        "p4 + p0 * exp(-((x - p1)^2 + (y - p2)^2) / (2 * p3^2))",
        "p0 + p1*x + p2*y + p3*x*y + p4*x^2 + p5*y^2 + p6*exp(-p7*x) + p8*sin(p9*y) + "
        "p10*cos(p11*x) + p12*atan(p13*y) + p14*sqrt(abs(p15*x))",
        "log(p0 - 10)", "sqrt(p1 - 10)", "(p0 - p0) / (p1 - p1)", "pow(-p0, 3)", "pow(-p0, p1)",
        "abs(p0 - p0)", "abs(x - p0) * tan(p1*y)", "1/(x - x)",
    };
    return f;
}

/// x + (x + (x + ...)): exactly kFormulaMaxStack stack slots.
std::string deepest() {
    std::string s = "x";
    for (int k = 1; k < ef::kFormulaMaxStack; ++k) s = "x+(" + s + ")";
    return s;
}

std::vector<ef::FormulaProgram> programs() {
    Names params;
    for (int k = 0; k < 16; ++k) params.push_back("p" + std::to_string(k));
    std::vector<ef::FormulaProgram> out;
    for (const auto& f : formulas()) out.push_back(ef::compile_formula(f, params, {"x", "y"}));
    out.push_back(ef::compile_formula(deepest(), params, {"x", "y"}));
    return out;
}

const std::vector<Vec>& points() {
    static const std::vector<Vec> x = {{1.5, -2.25}, {0.0, 0.0}, {7.3, 6.8}, {-1e3, 3e-7}};
    return x;
}

const std::vector<Vec>& parameter_sets() {
    static const std::vector<Vec> p = {
        {2.0, 3.0, 0.5, 1.25, -0.75, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.1, 1.2},
        {238.94, 5.5e-4, 72.46, 2.618, 0.0674, 1288.1, -1491.0, 583.2, 75.4, 0.97, 0.40, 0.05,
         -2.5, 46.7, 0.932, 1e-9},
        {-0.0, 1e300, -1e-300, std::numeric_limits<double>::infinity(), 10.0, 11.0, 3.0, 4.0,
         5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0},
    };
    return p;
}

template <class T>
std::string hex_bytes(const T& v) {
    unsigned char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    std::string s;
    static constexpr char kHex[] = "0123456789abcdef";
    for (size_t k = 0; k < sizeof(T); ++k) {
        if (k > 0 && k % 4 == 0) s += ' ';
        s += kHex[b[k] >> 4];
        s += kHex[b[k] & 15];
    }
    return s;
}

template <class T>
T scalar_param(double v, int /*q*/, int /*shift*/) {
    return static_cast<T>(v);
}

template <class T, int K>
struct Seed {
    /// Parameter q seeded in dual slot q - shift (several passes for models wider than K).
    static ef::Dual<T, K> make(double v, int q, int shift) {
        return ef::Dual<T, K>::variable(static_cast<T>(v), q - shift);
    }
};

/// The same bits, element by element, except that any NaN equals any NaN: IEEE 754 leaves which
/// operand's NaN (sign, payload) an operation returns to the compiler's operand order, and the
/// solvers treat every NaN alike (a non-finite trial step is refused).
template <class R>
bool same_bits_or_both_nan(const R* a, const R* b, size_t count) {
    for (size_t k = 0; k < count; ++k) {
        if (a[k] != a[k] && b[k] != b[k]) continue;
        if (std::memcmp(&a[k], &b[k], sizeof(R)) != 0) return false;
    }
    return true;
}

template <class T>
bool same_bits(const T& a, const T& b) {
    if constexpr (std::is_floating_point_v<T>) {
        return same_bits_or_both_nan(&a, &b, 1);
    } else {
        using R = decltype(a.v);
        static_assert(sizeof(T) == sizeof(a.d) + sizeof(R), "a Dual is its value and derivatives");
        return same_bits_or_both_nan(&a.v, &b.v, 1) &&
               same_bits_or_both_nan(a.d, b.d, sizeof(a.d) / sizeof(R));
    }
}

/// The interpreter and the compiled entry point on T at every point and parameter set.
template <class T, class MakeParam>
void require_same_bits(const ef::FormulaModel& interp, const ef::FormulaModel& jit,
                       MakeParam make) {
    for (const Vec& pv : parameter_sets()) {
        for (int shift : {0, 3, 8}) {
            std::vector<T> p;
            for (int q = 0; q < 16; ++q) p.push_back(make(pv[static_cast<size_t>(q)], q, shift));
            for (const Vec& x : points()) {
                const T a = interp.value<T>(p.data(), nullptr, x.data(), 0);
                const T b = jit.value<T>(p.data(), nullptr, x.data(), 0);
                INFO("slot " << ef::kFormulaJitSlot<T> << ", x = " << x[0] << ", " << x[1]
                             << ", shift " << shift << ": " << hex_bytes(a) << " vs " << hex_bytes(b));
                REQUIRE(same_bits(a, b));
            }
        }
    }
}

ef::FormulaModel model_of(const ef::FormulaProgram& prog, const ef::FormulaJitTable* jit) {
    ef::FormulaModel m;
    m.code = prog.code.data();
    m.constants = prog.constants.data();
    m.code_size = static_cast<int>(prog.code.size());
    m.constants_size = static_cast<int>(prog.constants.size());
    m.params = 16;
    m.jit = jit;
    return m;
}

template <class Real, int... Ks>
void compare_duals(const ef::FormulaModel& interp, const ef::FormulaModel& jit) {
    (require_same_bits<ef::Dual<Real, Ks>>(interp, jit, &Seed<Real, Ks>::make), ...);
}

}  // namespace

TEST_CASE("formula jit gives the interpreter's bits on every formula and scalar type", "[formula][jit]") {
    const ef_test::TempDir dir;
    const auto progs = programs();
    std::vector<const ef::FormulaProgram*> ptrs;
    for (const auto& p : progs) ptrs.push_back(&p);
    const ef::FormulaJitOptions options{ef::default_formula_jit_options().compiler, dir.path.string()};

    std::string why;
    const auto lib = ef::compile_formulas_jit(ptrs, options, &why);

    INFO(why);
    REQUIRE(lib != nullptr);
    CHECK_FALSE(lib->from_cache());
    for (size_t k = 0; k < progs.size(); ++k) {
        INFO("formula: " << progs[k].text);
        for (const auto fn : lib->table(k).fn) REQUIRE(fn != nullptr);
        const ef::FormulaModel interp = model_of(progs[k], nullptr);
        const ef::FormulaModel jit = model_of(progs[k], &lib->table(k));
        require_same_bits<double>(interp, jit, &scalar_param<double>);
        require_same_bits<float>(interp, jit, &scalar_param<float>);
        compare_duals<double, 3, 4, 5, 8, 16>(interp, jit);
        compare_duals<float, 3, 4, 5, 8, 16>(interp, jit);
    }
}

TEST_CASE("formula jit loads a compiled formula from its cache", "[formula][jit]") {
    const ef_test::TempDir dir;
    const auto prog = ef::compile_formula("a * exp(-k * x) + c", {"a", "k", "c"}, {"x"});
    const ef::FormulaJitOptions options{ef::default_formula_jit_options().compiler, dir.path.string()};
    const auto first = ef::compile_formulas_jit({&prog}, options, nullptr);
    REQUIRE(first != nullptr);

    const auto second = ef::compile_formulas_jit({&prog}, options, nullptr);

    REQUIRE(second != nullptr);
    CHECK_FALSE(first->from_cache());
    CHECK(second->from_cache());
    CHECK(second->path() == first->path());
    const double p[3] = {2.0, 0.5, 1.0};
    const double x = 3.0;
    const ef::FormulaModel m = model_of(prog, &second->table(0));
    CHECK(m.value<double>(p, nullptr, &x, 0) == model_of(prog, nullptr).value<double>(p, nullptr, &x, 0));
}

TEST_CASE("formula jit without a working compiler reports why and returns nothing", "[formula][jit]") {
    const ef_test::TempDir dir;
    const auto prog = ef::compile_formula("a + x", {"a"}, {"x"});
    std::string why;

    const auto missing = ef::compile_formulas_jit({&prog}, {"/nonexistent/c++", dir.path.string()}, &why);

    CHECK(missing == nullptr);
    CHECK_THAT(why, Catch::Matchers::Contains("no C++ compiler at /nonexistent/c++"));

    const auto failing = ef::compile_formulas_jit({&prog}, {"/bin/false", dir.path.string()}, &why);

    CHECK(failing == nullptr);
    CHECK_THAT(why, Catch::Matchers::Contains("/bin/false failed"));
    CHECK_THAT(why, Catch::Matchers::Contains(".log"));
}

TEST_CASE("formula jit writes straight-line code in the interpreter's order", "[formula][jit]") {
    const auto prog = ef::compile_formula("c + a * exp(-(x - u)^2 / 2)", {"a", "u", "c"}, {"x"});

    const std::string body = ef::formula_straight_line(prog, "  ");

    CHECK(body ==
          "  const T t0 = T(x[0]) - p[1];\n"
          "  const T t1 = t0 * t0;\n"
          "  const T t2 = -t1;\n"
          "  const T t3 = t2 / T(0x1p+1);\n"
          "  const T t4 = exp(t3);\n"
          "  const T t5 = p[0] * t4;\n"
          "  const T t6 = p[2] + t5;\n"
          "  return T(t6);\n");
}

TEST_CASE("model compile values parse and others are usage errors", "[formula][jit]") {
    CHECK(ef::parse_formula_compile("auto", "f.ini:3: model.compile") == ef::FormulaCompile::auto_);
    CHECK(ef::parse_formula_compile("jit", "f.ini:3: model.compile") == ef::FormulaCompile::jit);
    CHECK(ef::parse_formula_compile("interpret", "f.ini:3: model.compile") ==
          ef::FormulaCompile::interpret);
    try {
        (void)ef::parse_formula_compile("fast", "f.ini:3: model.compile");
        FAIL("no error thrown");
    } catch (const ef::Error& e) {
        CHECK(e.code() == ef::ExitCode::usage);
        CHECK(std::string(e.what()) == "f.ini:3: model.compile: unknown value 'fast' (allowed: auto, jit, interpret)");
    }
}

TEST_CASE("formula nvrtc source compiles under NVRTC, and a broken one reports its log", "[formula][jit][nvrtc]") {
    const auto spot = ef::compile_formula("c + a * exp(-((px - u)^2 + (py - v)^2) / (2 * s^2))",
                                          {"a", "u", "v", "s", "c"}, {"px", "py"});
    const std::string cccl = "/usr/local/cuda/include/cccl";
    if (!std::filesystem::exists(cccl)) {
        WARN("no CUDA toolkit at /usr/local/cuda: NVRTC not tested");
        return;
    }

    const ef::NvrtcResult good =
        ef::compile_with_nvrtc(ef::formula_nvrtc_source(spot), ef::formula_nvrtc_headers(), "sm_90", cccl);

    if (good.log == "NVRTC (libnvrtc.so) not found") {
        WARN("no libnvrtc: NVRTC not tested");
        return;
    }
    INFO(good.log);
    REQUIRE(good.ok);
    for (const char* entry : {".entry ef_formula_values_0(", ".entry ef_formula_values_1(",
                              ".entry ef_formula_values_11("})
        CHECK_THAT(good.ptx, Catch::Matchers::Contains(entry));

    const ef::NvrtcResult bad = ef::compile_with_nvrtc(ef::formula_nvrtc_source(spot) + "\nnot C++ at all;\n",
                                                       ef::formula_nvrtc_headers(), "sm_90", cccl);

    CHECK_FALSE(bad.ok);
    CHECK(bad.ptx.empty());
    CHECK_THAT(bad.log, Catch::Matchers::Contains("error"));
}

// The formula cache's rules (docs/security.md): a private folder, entries verified against
// their key and bytes, no link followed, nothing left behind by a failed or stopped compile.
namespace {

namespace fs = std::filesystem;

/// The cache's files other than the private folder's entries proper: temporaries of any kind.
std::vector<std::string> leftovers(const fs::path& dir) {
    std::vector<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
        const std::string name = e.path().filename().string();
        if (name.find(".tmp") != std::string::npos) out.push_back(name);
    }
    return out;
}

std::string only_so(const fs::path& dir) {
    std::string so;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".so") so = e.path().string();
    return so;
}

}  // namespace

TEST_CASE("formula cache is a private folder, and a shared or missing one refuses compiling", "[formula][jit][security]") {
    const ef_test::TempDir dir;
    const auto prog = ef::compile_formula("a * x", {"a"}, {"x"});
    const std::string cxx = ef::default_formula_jit_options().compiler;
    std::string why;

    SECTION("created 0700") {
        const std::string cache = dir.file("cache/ensemblefit/formula");
        REQUIRE(ef::compile_formulas_jit({&prog}, {cxx, cache}, &why) != nullptr);
        CHECK((fs::status(cache).permissions() & fs::perms::all) == fs::perms::owner_all);
    }
    SECTION("a folder others can write is refused") {
        const std::string cache = dir.file("shared");
        fs::create_directories(cache);
        fs::permissions(cache, fs::perms::all);
        CHECK(ef::compile_formulas_jit({&prog}, {cxx, cache}, &why) == nullptr);
        CHECK_THAT(why, Catch::Matchers::Contains("is writable by others (mode 0777)"));
        CHECK(fs::is_empty(cache));
    }
    SECTION("a link as the folder is refused") {
        fs::create_directories(dir.file("elsewhere"));
        fs::create_directory_symlink(dir.file("elsewhere"), dir.file("link"));
        CHECK(ef::compile_formulas_jit({&prog}, {cxx, dir.file("link")}, &why) == nullptr);
        CHECK_THAT(why, Catch::Matchers::Contains("is a symbolic link"));
    }
    SECTION("no folder (HOME and XDG_CACHE_HOME unset): refused, never the temporary folder") {
        CHECK(ef::compile_formulas_jit({&prog}, {cxx, ""}, &why) == nullptr);
        CHECK_THAT(why, Catch::Matchers::Contains("HOME and XDG_CACHE_HOME are unset"));
    }
}

TEST_CASE("formula cache never loads a planted library or another formula's", "[formula][jit][security]") {
    const ef_test::TempDir dir;
    const std::string cxx = ef::default_formula_jit_options().compiler;
    const std::string cache = dir.file("cache");
    const auto mine = ef::compile_formula("a * x", {"a"}, {"x"});
    const auto other = ef::compile_formula("a + x", {"a"}, {"x"});
    const ef::FormulaJitOptions options{cxx, cache};
    const double p = 3.0, x = 2.0;

    // Another formula's library (with its own record) copied under this formula's name.
    const auto b = ef::compile_formulas_jit({&other}, options, nullptr);
    REQUIRE(b != nullptr);
    const std::string other_so = b->path();
    const auto a = ef::compile_formulas_jit({&mine}, options, nullptr);
    REQUIRE(a != nullptr);
    const std::string mine_so = a->path();
    const std::string stem = mine_so.substr(0, mine_so.size() - 3);
    const std::string other_stem = other_so.substr(0, other_so.size() - 3);
    fs::remove(mine_so);
    fs::copy_file(other_so, mine_so);
    SECTION("bytes of another formula under this name") {}
    SECTION("and its record too") {
        fs::remove(stem + ".id");
        fs::copy_file(other_stem + ".id", stem + ".id");
    }
    SECTION("a library without a record") { fs::remove(stem + ".id"); }

    const auto again = ef::compile_formulas_jit({&mine}, options, nullptr);

    REQUIRE(again != nullptr);
    CHECK_FALSE(again->from_cache());  // compiled afresh: the planted file was not loaded
    CHECK(model_of(mine, &again->table(0)).value<double>(&p, nullptr, &x, 0) == 6.0);
    CHECK(leftovers(cache).empty());
}

TEST_CASE("formula cache replaces a link named like an entry, never writing through it", "[formula][jit][security]") {
    const ef_test::TempDir dir;
    const std::string cxx = ef::default_formula_jit_options().compiler;
    const std::string cache = dir.file("cache");
    const auto prog = ef::compile_formula("a * x * x", {"a"}, {"x"});
    const auto first = ef::compile_formulas_jit({&prog}, {cxx, cache}, nullptr);
    REQUIRE(first != nullptr);
    const std::string so = first->path();
    const std::string stem = so.substr(0, so.size() - 3);
    const std::string victim = dir.file("victim.txt");
    std::ofstream(victim) << "precious\n";
    for (const char* ext : {".so", ".id", ".cpp"}) {
        fs::remove(stem + ext);
        fs::create_symlink(victim, stem + ext);
    }

    const auto again = ef::compile_formulas_jit({&prog}, {cxx, cache}, nullptr);

    REQUIRE(again != nullptr);
    CHECK_FALSE(again->from_cache());
    std::ifstream in(victim);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(text == "precious\n");
    CHECK_FALSE(fs::is_symlink(stem + ".so"));
    CHECK_FALSE(fs::is_symlink(stem + ".id"));
}

TEST_CASE("formula compile that fails or outlives its limit leaves no temporary file", "[formula][jit][security]") {
    const ef_test::TempDir dir;
    const std::string cache = dir.file("cache");
    const auto prog = ef::compile_formula("a - x", {"a"}, {"x"});
    std::string why;

    SECTION("a compiler that fails") {
        CHECK(ef::compile_formulas_jit({&prog}, {"/bin/false", cache}, &why) == nullptr);
        CHECK_THAT(why, Catch::Matchers::Contains("/bin/false failed on"));
    }
    SECTION("a compiler that never finishes is stopped") {
        // A "compiler" that hangs, with a child of its own (as g++ has cc1plus): both are killed.
        const std::string slow = dir.file("slow-cxx");
        std::ofstream(slow) << "#!/bin/sh\nsleep 600 &\nwait\n";
        fs::permissions(slow, fs::perms::owner_all);
        ef::FormulaJitOptions options{slow, cache};
        options.timeout_s = 1.0;
        CHECK(ef::compile_formulas_jit({&prog}, options, &why) == nullptr);
        CHECK_THAT(why, Catch::Matchers::Contains("did not finish"));
        CHECK_THAT(why, Catch::Matchers::Contains("within 1 s and was stopped"));
    }
    CHECK(only_so(cache).empty());
    CHECK(leftovers(cache).empty());
    for (const auto& e : fs::directory_iterator(cache)) CHECK(e.path().filename().string().rfind(".tmp-", 0) != 0);
}

// SPDX-License-Identifier: MIT
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ensemblefit/model/formula.hpp>

#include "kernels/models/formula_model.hpp"

namespace ef {

/// How `[model] compile` runs a formula: auto (compiled when a compiler works, else
/// interpreted), jit (compiled, or a usage error) or interpret.
enum class FormulaCompile { auto_, jit, interpret };

/// Parses `[model] compile`; throws usage_error naming `where` for anything else.
FormulaCompile parse_formula_compile(const std::string& value, const std::string& where);

/// Seconds a formula's compile may take before the compiler is stopped (compile = auto then
/// interprets, jit refuses): a formula the compiler would chew on for hours never hangs a run.
/// `[model] compile_timeout` sets it for a run.
inline constexpr double kFormulaJitTimeout = 600.0;

/// Where and with what formulas are compiled at run time.
struct FormulaJitOptions {
    std::string compiler;   ///< the C++ compiler (the one that built ensemblefit by default)
    std::string cache_dir;  ///< private (0700, created when missing); empty: none, compiling is refused
    double timeout_s = kFormulaJitTimeout;  ///< the compiler's process group is killed after this
};

/// The defaults: the build's compiler; $XDG_CACHE_HOME/ensemblefit/formula, else
/// ~/.cache/ensemblefit/formula, else none (never a shared temporary folder; docs/security.md).
FormulaJitOptions default_formula_jit_options();

/**
 * Formulas compiled by the system C++ compiler into a shared object and loaded: one
 * FormulaJitTable per formula. The generated source is the formulas' postfix programs as
 * straight-line code over the embedded kernels/core headers (hd, ef_math, dual), so values and
 * derivatives are the interpreter's bits. The object is cached in a private folder under the
 * SHA-256 of the source, the compiler (path, size, time), the CPU and the flags, with a record
 * (STEM.id) of that key and of the library's own SHA-256: an entry is loaded only when both
 * match (a planted or another formula's library never is). Ranks compile in scratch folders and
 * rename into place, so they never see a half-written object (docs/security.md).
 */
class FormulaJitLibrary {
   public:
    ~FormulaJitLibrary();
    FormulaJitLibrary(const FormulaJitLibrary&) = delete;
    FormulaJitLibrary& operator=(const FormulaJitLibrary&) = delete;

    const FormulaJitTable& table(std::size_t k) const { return tables_.at(k); }
    const std::string& path() const { return path_; }
    bool from_cache() const { return from_cache_; }

   private:
    friend std::shared_ptr<const FormulaJitLibrary> compile_formulas_jit(
        const std::vector<const FormulaProgram*>&, const FormulaJitOptions&, std::string*);
    FormulaJitLibrary() = default;
    void* handle_ = nullptr;
    std::string path_;
    bool from_cache_ = false;
    std::vector<FormulaJitTable> tables_;
};

/// The C++ source compiled for `programs` (one entry point per formula and scalar slot).
std::string formula_cpp_source(const std::vector<const FormulaProgram*>& programs);

/// The body of `template <class T> T f(const T* p, const double* x)` for one program:
/// straight-line statements ending in `return`, each line starting with `indent`. Shared by the
/// C++ and the CUDA sources.
std::string formula_straight_line(const FormulaProgram& program, const std::string& indent);

/**
 * The device side: `struct NAME`, a model of the kernels/models concept whose value() is the
 * program's straight-line code (EF_HD, so nvcc and NVRTC compile it for the solver kernels of
 * kernels/fit as they do a built-in model). Needs kernels/core/dual.hpp before it.
 */
std::string formula_cuda_model(const FormulaProgram& program, const std::string& name);

/**
 * A self-contained NVRTC translation unit for `program`: the embedded kernels/core headers, the
 * model (formula_cuda_model, named FormulaJitModel) and `extern "C"` kernels
 * ef_formula_values_<slot>(const T* p, const double* x, int nx, int n, T* out) for double, float
 * and Dual<float, 16>: value i at x + i nx, for the GPU test that compares them with the CPU.
 * The std headers the core headers include are mapped to libcu++ (`-I<cuda>/include/cccl`).
 */
std::string formula_nvrtc_source(const FormulaProgram& program);

/// The in-memory headers formula_nvrtc_source needs under NVRTC: {name, text} pairs.
std::vector<std::pair<std::string, std::string>> formula_nvrtc_headers();

/**
 * The NVRTC translation unit of a formula's solver kernels: the kernel templates of
 * kernels/cuda/replica_kernels.cuh (the ones nvcc builds for the built-in models) and the
 * formula as ef::FormulaJitModel (formula_cuda_model). Nothing is instantiated in the text:
 * the kernel a GPU worker needs is named to NVRTC as a name expression.
 */
std::string formula_nvrtc_solver_source(const FormulaProgram& program);

/// The in-memory headers of formula_nvrtc_solver_source: the embedded kernels/ and Random123
/// headers (formula_jit_headers.hpp) and the std shims of formula_nvrtc_headers().
std::vector<std::pair<std::string, std::string>> formula_nvrtc_solver_headers();

/// The NVRTC options of formula_nvrtc_solver_source beyond compile_with_nvrtc's own.
const std::vector<std::string>& formula_nvrtc_solver_options();

/**
 * One solver kernel of `program` (`kernel`: a name expression such as
 * "ef::cuda::normal_fit_kernel<float, 5, ef::FormulaJitModel>") compiled by NVRTC for `arch`
 * ("compute_90"), with `extra_options`. Cached by a hash of source, kernel, arch, options and
 * NVRTC version: in memory for the process, and in `cache_dir` (formula-cuda-HASH.ptx and
 * .entry, written atomically; a failure's log in .log). Never throws for a compile failure:
 * ok is false and why says what NVRTC said.
 */
FormulaDeviceKernel compile_formula_device_kernel(const FormulaProgram& program, const std::string& kernel,
                                                  const std::string& arch, const std::string& cache_dir,
                                                  const std::vector<std::string>& extra_options);

/// The GPU side of `[model] compile` for a run: null for interpret, else a FormulaDeviceJit
/// that compiles `program`'s kernels on request (failures are the worker's to report: it
/// warns and interprets).
std::shared_ptr<const FormulaDeviceJit> formula_device_jit_for_run(std::shared_ptr<const FormulaProgram> program,
                                                                   FormulaCompile mode);

/// This process's seconds in the C++ compiler and NVRTC so far (formulas compiled at run time;
/// a cache hit costs none): `advise` leaves them out of a calibration run's set-up, since the
/// runs it predicts find the formulas in the cache.
double formula_compile_seconds();

/**
 * Compiles and loads `programs` (or loads them from the cache). Null when that is impossible
 * (no compiler, a compile error, an unwritable cache); `why` then says what happened, with the
 * compiler's log file.
 */
std::shared_ptr<const FormulaJitLibrary> compile_formulas_jit(
    const std::vector<const FormulaProgram*>& programs, const FormulaJitOptions& options,
    std::string* why);

/**
 * The run's choice for one formula: null for interpret, and for auto when compiling fails (the
 * interpreter runs, same bits, slower); with jit a failure is a usage_error naming `where`.
 */
std::shared_ptr<const FormulaJitLibrary> formula_jit_for_run(const FormulaProgram& program,
                                                             FormulaCompile mode,
                                                             const std::string& where,
                                                             double timeout_s = kFormulaJitTimeout);

}  // namespace ef

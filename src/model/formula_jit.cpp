// SPDX-License-Identifier: MIT
// Formulas compiled at run time by the system C++ compiler (docs/architecture.md, "Formulas
// compiled at run time").
#include "src/model/formula_jit.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <system_error>
#include <thread>

#include <ensemblefit/core/error.hpp>

#include "src/core/sha256.hpp"
#include "src/model/formula_jit_headers.hpp"
#include "src/model/formula_nvrtc.hpp"
#include "src/model/private_cache.hpp"
#include "src/run/environment.hpp"

extern char** environ;

namespace ef {
namespace {

namespace fs = std::filesystem;

/// Changes whenever the generated library's entry points change meaning.
constexpr std::uint64_t kJitAbi = 1;

/// The type of each FormulaJitTable slot, in kFormulaJitSlot order (formula_model.hpp).
constexpr const char* kSlotTypes[kFormulaJitSlots] = {
    "double",          "float",           "Dual<double, 3>", "Dual<double, 4>",
    "Dual<double, 5>", "Dual<double, 8>", "Dual<double, 16>", "Dual<float, 3>",
    "Dual<float, 4>",  "Dual<float, 5>",  "Dual<float, 8>",  "Dual<float, 16>",
};

/// The compile flags. -ffp-contract=off as in the build (CMakeLists.txt): a*b+c rounds twice,
/// as the interpreter's does, so the bits match; no flag that lets the compiler reassociate or
/// drop IEEE semantics (-ffast-math and its parts). -march=native vectorizes the dual lanes with
/// this CPU's widest registers (exact: lane-wise IEEE operations, and no FMA without
/// contraction); the CPU's identity is part of the cache key (cpu_identity), so nodes of another
/// kind sharing a home folder compile their own. -fno-math-errno only lets sqrt inline.
const std::vector<std::string>& jit_flags() {
    static const std::vector<std::string> f = {"-std=c++20", "-O3", "-ffp-contract=off", "-march=native",
                                               "-fno-math-errno", "-fPIC", "-shared", "-w"};
    return f;
}

/// This CPU's model name and feature flags (/proc/cpuinfo's first processor), for the cache key.
std::string cpu_identity() {
    std::ifstream in("/proc/cpuinfo");
    std::string line, id;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) == 0 || line.rfind("flags", 0) == 0) id += line + "\n";
        if (line.empty() && !id.empty()) break;
    }
    return id;
}

std::uint64_t fnv1a(const std::string& s, std::uint64_t h = 1469598103934665603ULL) {
    for (const unsigned char c : s) {
        h ^= c;
        h *= 1099511628211ULL;
    }
    return h;
}

std::string hex(std::uint64_t v) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
    return buf;
}

/// A double as an exact C++ literal (hexadecimal float), wrapped as T(...) like the
/// interpreter's push_const.
std::string constant_literal(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%a", v);
    return std::string("T(") + buf + ")";
}

/// A header's text without `#pragma once` and the project's own includes (the headers are
/// pasted in dependency order).
std::string pasted(const std::string& text) {
    std::istringstream in(text);
    std::string line, out;
    while (std::getline(in, line)) {
        if (line.rfind("#pragma once", 0) == 0 || line.rfind("#include \"kernels/", 0) == 0) continue;
        out += line;
        out += '\n';
    }
    return out;
}

/// The compiler's identity for the cache key: its path, size and modification time.
std::string compiler_identity(const std::string& compiler) {
    std::error_code ec;
    const fs::path p = fs::canonical(compiler, ec);
    if (ec) return compiler;
    const auto size = fs::file_size(p, ec);
    const auto time = fs::last_write_time(p, ec).time_since_epoch().count();
    return p.string() + ":" + std::to_string(size) + ":" + std::to_string(time);
}

/// What became of a compiler run.
enum class CompileOutcome { ok, failed, timed_out, not_started };

/// Waits for `pid`; past `timeout_s` seconds kills its process group (the driver and the
/// cc1plus, as and ld it started) and reports timed_out.
CompileOutcome wait_compiler(pid_t pid, double timeout_s) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    int status = 0;
    for (;;) {
        const pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) break;
        if (r < 0 && errno != EINTR) return CompileOutcome::failed;
        if (std::chrono::steady_clock::now() > deadline) {
            kill(-pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
            }
            return CompileOutcome::timed_out;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? CompileOutcome::ok : CompileOutcome::failed;
}

/// Runs the compiler (no shell: argv as built here) in a process group of its own, with its
/// output in `log` (a new file: O_EXCL, no link followed).
CompileOutcome run_compiler(const FormulaJitOptions& options, const std::string& source, const std::string& out,
                            const std::string& log) {
    std::vector<std::string> args = {options.compiler};
    for (const auto& f : jit_flags()) args.push_back(f);
    for (const char* a : {"-o", out.c_str(), source.c_str()}) args.emplace_back(a);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, options.compiler.c_str(), &actions, &attr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) return CompileOutcome::not_started;
    return wait_compiler(pid, options.timeout_s);
}

/// Writes `text` to `path` through a private temporary file and a rename (private_cache.hpp).
bool write_atomically(const fs::path& path, const std::string& text) { return write_private_file(path.string(), text); }

std::string entry_name(std::size_t formula, int slot) {
    return "ef_formula_" + std::to_string(formula) + "_" + std::to_string(slot);
}

/// Opens `so` and fills one table per formula; null when it is not a library of ours.
void* open_library(const std::string& so, std::size_t count, std::vector<FormulaJitTable>& tables) {
    void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) return nullptr;
    auto abi = reinterpret_cast<std::uint64_t (*)()>(dlsym(h, "ef_formula_jit_abi"));
    bool ok = abi != nullptr && abi() == kJitAbi;
    tables.assign(count, FormulaJitTable{});
    for (std::size_t k = 0; ok && k < count; ++k) {
        for (int s = 0; ok && s < kFormulaJitSlots; ++s) {
            void* sym = dlsym(h, entry_name(k, s).c_str());
            ok = sym != nullptr;
            // POSIX guarantees an object pointer from dlsym converts to a function pointer.
            tables[k].fn[s] = reinterpret_cast<FormulaJitTable::Entry>(sym);
        }
    }
    if (!ok) {
        dlclose(h);
        return nullptr;
    }
    return h;
}

}  // namespace

FormulaCompile parse_formula_compile(const std::string& value, const std::string& where) {
    if (value == "auto") return FormulaCompile::auto_;
    if (value == "jit") return FormulaCompile::jit;
    if (value == "interpret") return FormulaCompile::interpret;
    throw usage_error(where + ": unknown value '" + value + "' (allowed: auto, jit, interpret)");
}

FormulaJitOptions default_formula_jit_options() {
    FormulaJitOptions o;
    o.compiler = EF_JIT_CXX;
    // Never a shared temporary folder (another user could create it first): without a home
    // the cache is empty and compiling is refused (compile = auto interprets).
    const std::string home = user_cache_home();
    o.cache_dir = home.empty() ? std::string() : home + "/ensemblefit/formula";
    return o;
}

FormulaJitLibrary::~FormulaJitLibrary() {
    if (handle_ != nullptr) dlclose(handle_);
}

std::string formula_straight_line(const FormulaProgram& program, const std::string& indent) {
    std::vector<std::string> stack;
    std::string out;
    int temps = 0;
    auto emit = [&](const std::string& expr) {
        const std::string name = "t" + std::to_string(temps++);
        out += indent + "const T " + name + " = " + expr + ";\n";
        stack.push_back(name);
    };
    auto pop = [&] {
        std::string s = stack.back();
        stack.pop_back();
        return s;
    };
    for (const FormulaOp& op : program.code) {
        const std::string arg = std::to_string(op.arg);
        switch (op.code) {
            case FormulaOpCode::push_const:
                stack.push_back(constant_literal(program.constants[static_cast<std::size_t>(op.arg)]));
                break;
            case FormulaOpCode::push_param: stack.push_back("p[" + arg + "]"); break;
            case FormulaOpCode::push_var: stack.push_back("T(x[" + arg + "])"); break;
            case FormulaOpCode::add:
            case FormulaOpCode::sub:
            case FormulaOpCode::mul:
            case FormulaOpCode::div:
            case FormulaOpCode::pow: {
                const std::string b = pop();
                const std::string a = pop();
                static const char* kOps[] = {" + ", " - ", " * ", " / "};
                const int k = static_cast<int>(op.code) - static_cast<int>(FormulaOpCode::add);
                emit(op.code == FormulaOpCode::pow ? "pow(" + a + ", " + b + ")" : a + kOps[k] + b);
                break;
            }
            case FormulaOpCode::neg: emit("-" + pop()); break;
            case FormulaOpCode::square: {
                const std::string a = pop();
                emit(a + " * " + a);
                break;
            }
            default: {
                static const char* kFns[] = {"exp", "log", "sqrt", "sin", "cos", "tan", "atan", "abs"};
                const int k = static_cast<int>(op.code) - static_cast<int>(FormulaOpCode::exp);
                emit(std::string(kFns[k]) + "(" + pop() + ")");
            }
        }
    }
    // A formula that is a single name or number still returns a T.
    out += indent + "return T(" + stack.back() + ");\n";
    return out;
}

std::string formula_cpp_source(const std::vector<const FormulaProgram*>& programs) {
    std::string s = "// Generated by ensemblefit (src/model/formula_jit.cpp); do not edit.\n";
    for (std::size_t k = 0; k < kFormulaJitHeaderCount; ++k) s += pasted(kFormulaJitHeaders[k].text);
    s += "\nnamespace ef {\n";
    for (std::size_t f = 0; f < programs.size(); ++f) {
        s += "template <class T>\ninline T ef_formula_" + std::to_string(f) +
             "(const T* p, const double* x) {\n    (void)p;\n    (void)x;\n";
        s += formula_straight_line(*programs[f], "    ");
        s += "}\n";
    }
    s += "}  // namespace ef\n\nextern \"C\" {\n";
    s += "unsigned long long ef_formula_jit_abi() { return " + std::to_string(kJitAbi) + "ULL; }\n";
    for (std::size_t f = 0; f < programs.size(); ++f) {
        for (int k = 0; k < kFormulaJitSlots; ++k) {
            const std::string t = k < 2 ? std::string(kSlotTypes[k]) : std::string("ef::") + kSlotTypes[k];
            s += t + " " + entry_name(f, k) + "(const " + t + "* p, const double* x) { return ef::ef_formula_" +
                 std::to_string(f) + "<" + t + ">(p, x); }\n";
        }
    }
    s += "}\n";
    return s;
}

std::string formula_cuda_model(const FormulaProgram& program, const std::string& name) {
    std::string s = "struct " + name + " {\n    int params = 0;\n";
    s += "    EF_HD int num_params() const { return params; }\n";
    s += "    EF_HD int workspace_size() const { return 0; }\n";
    s += "    template <class T>\n    EF_HD void prepare(const T* /*p*/, T* /*ws*/) const {}\n";
    s += "    template <class T>\n    EF_HD T value(const T* p, const T* /*ws*/, const double* x, int /*i*/) const {\n";
    s += "        (void)p;\n        (void)x;\n";
    s += formula_straight_line(program, "        ");
    s += "    }\n};\n";
    return s;
}

std::string formula_nvrtc_source(const FormulaProgram& program) {
    std::string s = "// Generated by ensemblefit (src/model/formula_jit.cpp) for NVRTC; do not edit.\n";
    for (std::size_t k = 0; k < kFormulaJitHeaderCount; ++k) s += pasted(kFormulaJitHeaders[k].text);
    s += "\nnamespace ef {\n" + formula_cuda_model(program, "FormulaJitModel") + "}  // namespace ef\n\n";
    s += "template <class T>\n__device__ void ef_formula_values(const T* p, const double* x, int nx, int n, T* out) {\n"
         "    const ef::FormulaJitModel m{};\n"
         "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
         "        out[i] = m.value<T>(p, nullptr, x + static_cast<long>(i) * nx, i);\n}\n";
    const int slots[] = {0, 1, 11};
    for (const int k : slots) {
        const std::string t = k < 2 ? std::string(kSlotTypes[k]) : std::string("ef::") + kSlotTypes[k];
        s += "extern \"C\" __global__ void ef_formula_values_" + std::to_string(k) + "(const " + t +
             "* p, const double* x, int nx, int n, " + t + "* out) { ef_formula_values<" + t + ">(p, x, nx, n, out); }\n";
    }
    return s;
}

std::vector<std::pair<std::string, std::string>> formula_nvrtc_headers() {
    std::vector<std::pair<std::string, std::string>> h;
    const std::string to_cuda_std = "namespace cuda { namespace std {} }\nnamespace std { using namespace cuda::std; }\n";
    for (const char* name : {"cmath", "type_traits", "cstdint", "cstring", "cfloat", "cstddef"}) {
        h.emplace_back(name, std::string("#pragma once\n#include <cuda/std/") + name + ">\n" + to_cuda_std);
    }
    // libcu++'s <cfloat> leaves the C macros to the host's <float.h>, which NVRTC lacks.
    h[4].second += "#ifndef FLT_EPSILON\n#define FLT_EPSILON 0x1p-23F\n#endif\n"
                   "#ifndef DBL_EPSILON\n#define DBL_EPSILON 0x1p-52\n#endif\n";
    // What the solver headers name without using on the device: lm_normal.hpp's host helper
    // returns a std::vector (a declaration suffices), and Random123's array.h includes the STL
    // for host-only members (a stream type with no-op operators suffices).
    h.emplace_back("vector", "#pragma once\nnamespace std { template <class T> class allocator;\n"
                             "template <class T, class A = allocator<T>> class vector; }\n");
    for (const char* name : {"stddef.h", "algorithm", "stdexcept", "iterator", "limits"})
        h.emplace_back(name, "#pragma once\n#include <cuda/std/cstddef>\n#include <cuda/std/cstdint>\n"
                             "#include <cuda/std/limits>\n" + to_cuda_std + "using cuda::std::size_t;\n");
    h.emplace_back("iostream", "#pragma once\nnamespace std {\n"
                               "struct ostream { template <class T> ostream& operator<<(const T&) { return *this; } };\n"
                               "struct istream { template <class T> istream& operator>>(T&) { return *this; } };\n}\n");
    return h;
}

std::string formula_nvrtc_solver_source(const FormulaProgram& program) {
    // NVRTC defines neither CUDART_VERSION nor __GNUC__, through which Random123 configures
    // itself under nvcc: the two macros it would take from there.
    std::string s = "// Generated by ensemblefit (src/model/formula_jit.cpp) for NVRTC; do not edit.\n"
                    "#define CUDART_VERSION 13000\n#define R123_STATIC_INLINE static __inline__\n"
                    "#define R123_FORCE_INLINE(decl) decl\n#include \"kernels/cuda/replica_kernels.cuh\"\n\n";
    s += "namespace ef {\n" + formula_cuda_model(program, "FormulaJitModel") + "}  // namespace ef\n";
    return s;
}

std::vector<std::pair<std::string, std::string>> formula_nvrtc_solver_headers() {
    std::vector<std::pair<std::string, std::string>> h;
    for (std::size_t k = 0; k < kFormulaNvrtcHeaderCount; ++k)
        h.emplace_back(kFormulaNvrtcHeaders[k].name, kFormulaNvrtcHeaders[k].text);
    for (auto& shim : formula_nvrtc_headers()) h.push_back(std::move(shim));
    return h;
}

const std::vector<std::string>& formula_nvrtc_solver_options() {
    // -default-device: the host-only helpers in the shared headers compile as device functions
    // (never called). 161: Random123's nvcc-only pragmas.
    static const std::vector<std::string> o = {"-default-device", "-diag-suppress=161", "-I" EF_NVRTC_INCLUDE};
    return o;
}

namespace {

/// Compiled device kernels of this process, by cache key.
std::map<std::uint64_t, FormulaDeviceKernel>& device_kernel_memory() {
    static std::map<std::uint64_t, FormulaDeviceKernel> m;
    return m;
}

std::string first_error_line(const std::string& log) {
    std::istringstream in(log);
    std::string line;
    while (std::getline(in, line))
        if (line.find("error") != std::string::npos) return line;
    return log.substr(0, log.find('\n'));
}

/// A cache file's text: empty unless it is a regular file of this user (no link followed).
std::string read_file(const fs::path& p) {
    std::string text;
    return read_private_file(p.string(), text) ? text : std::string();
}

}  // namespace

namespace {
std::atomic<std::int64_t> compile_microseconds{0};
void add_compile_time(std::chrono::steady_clock::time_point t0) {
    compile_microseconds += std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

double formula_compile_seconds() { return 1e-6 * static_cast<double>(compile_microseconds.load()); }

FormulaDeviceKernel compile_formula_device_kernel(const FormulaProgram& program, const std::string& kernel,
                                                  const std::string& arch, const std::string& cache_dir,
                                                  const std::vector<std::string>& extra_options) {
    const std::string source = formula_nvrtc_solver_source(program);
    std::vector<std::string> options = formula_nvrtc_solver_options();
    options.insert(options.end(), extra_options.begin(), extra_options.end());
    std::string key = source + "\n" + kernel + "\n" + arch + "\nnvrtc " + nvrtc_version();
    for (const auto& o : options) key += " " + o;
    const std::uint64_t hash = fnv1a(key);
    static std::mutex mutex;
    const std::lock_guard<std::mutex> lock(mutex);
    auto& memory = device_kernel_memory();
    if (auto it = memory.find(hash); it != memory.end()) {
        FormulaDeviceKernel k = it->second;
        k.from_cache = true;
        k.seconds = 0.0;
        return k;
    }
    // A folder that is not private is not used: the kernels are compiled and kept in memory only.
    const bool disk = !cache_dir.empty() && prepare_private_dir(cache_dir).empty();
    const fs::path stem = fs::path(disk ? cache_dir : std::string("/nonexistent")) / ("formula-cuda-" + hex(hash));
    FormulaDeviceKernel k;
    k.ptx = disk ? read_file(stem.string() + ".ptx") : std::string();
    k.entry = disk ? read_file(stem.string() + ".entry") : std::string();
    if (!k.ptx.empty() && !k.entry.empty()) {
        k.ok = k.from_cache = true;
        memory[hash] = k;
        return k;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const NvrtcResult r = compile_with_nvrtc(source, formula_nvrtc_solver_headers(), arch, EF_NVRTC_INCLUDE "/cccl",
                                             {kernel}, options);
    k = FormulaDeviceKernel{};
    k.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    add_compile_time(t0);
    if (!r.ok) {
        const bool logged = disk && write_atomically(stem.string() + ".log", r.log);
        k.why = "NVRTC could not compile " + kernel + ": " + first_error_line(r.log) +
                (logged ? " (its log: " + stem.string() + ".log)" : "");
        return k;  // not remembered: a later worker retries (and warns again)
    }
    k.ok = true;
    k.ptx = r.ptx;
    k.entry = r.lowered.front();
    // The entry first: a reader needs both, and the .ptx appears last.
    if (disk && write_atomically(stem.string() + ".entry", k.entry)) write_atomically(stem.string() + ".ptx", k.ptx);
    memory[hash] = k;
    return k;
}

std::shared_ptr<const FormulaDeviceJit> formula_device_jit_for_run(std::shared_ptr<const FormulaProgram> program,
                                                                   FormulaCompile mode) {
    if (mode == FormulaCompile::interpret) return nullptr;
    auto jit = std::make_shared<FormulaDeviceJit>();
    const std::string cache_dir = default_formula_jit_options().cache_dir;
    jit->compile = [program, cache_dir](const std::string& kernel, int major, int minor) {
        const std::string arch = "compute_" + std::to_string(major) + std::to_string(minor);
        return compile_formula_device_kernel(*program, kernel, arch, cache_dir, {});
    };
    return jit;
}

namespace {

std::string seconds_text(double s) {
    std::ostringstream os;
    os << s;
    return os.str();
}

constexpr const char* kEntryHeader = "ensemblefit formula cache entry 1\n";

/// An entry's record (STEM.id): the SHA-256 of its key (source, compiler identity, CPU, flags)
/// and of its library's bytes.
std::string entry_record(const std::string& key_hash, const std::string& so_hash) {
    return std::string(kEntryHeader) + "key " + key_hash + "\nso " + so_hash + "\n";
}

/**
 * Opens STEM.so only when STEM.id is the record of this key and of the library's bytes as read
 * now (both regular files of this user, no link followed), and the name still holds the file
 * that was hashed: a planted library, another formula's, or a half-written one is never loaded.
 */
void* open_verified(const std::string& stem, const std::string& key_hash, std::size_t count,
                    std::vector<FormulaJitTable>& tables) {
    std::string record, bytes;
    if (!read_private_file(stem + ".id", record)) return nullptr;
    const int fd = open_private_file(stem + ".so");
    if (fd < 0) return nullptr;
    struct stat held {}, named {};
    const bool read = read_fd(fd, bytes) && fstat(fd, &held) == 0;
    close(fd);
    if (!read || record != entry_record(key_hash, sha256_hex(bytes))) return nullptr;
    if (lstat((stem + ".so").c_str(), &named) != 0 || named.st_dev != held.st_dev || named.st_ino != held.st_ino)
        return nullptr;
    return open_library(stem + ".so", count, tables);
}

/// The compile in a scratch folder; on success STEM.so and STEM.id are in place (renamed), on
/// failure STEM.cpp and STEM.log are, for the user to read. Empty, or why it failed.
std::string compile_entry(const std::string& dir, const std::string& stem, const std::string& source,
                          const std::string& key_hash, const FormulaJitOptions& options) {
    const ScratchDir scratch(dir);
    if (!scratch.ok()) return "cannot create a temporary folder in " + dir + ": " + std::strerror(errno);
    const std::string cpp = scratch.file("formula.cpp"), so = scratch.file("formula.so"), log = scratch.file("formula.log");
    if (!write_private_file(cpp, source)) return "cannot write " + cpp;
    const auto t0 = std::chrono::steady_clock::now();
    const CompileOutcome outcome = run_compiler(options, cpp, so, log);
    add_compile_time(t0);
    if (outcome != CompileOutcome::ok) {
        const bool kept = rename(cpp.c_str(), (stem + ".cpp").c_str()) == 0 && rename(log.c_str(), (stem + ".log").c_str()) == 0;
        const std::string files = kept ? stem + ".cpp (its output: " + stem + ".log)" : "the formula";
        if (outcome == CompileOutcome::timed_out)
            return options.compiler + " did not finish " + files + " within " + seconds_text(options.timeout_s) +
                   " s and was stopped ([model] compile_timeout)";
        if (outcome == CompileOutcome::not_started) return "cannot start " + options.compiler;
        return options.compiler + " failed on " + files;
    }
    std::string bytes;
    const int fd = open_private_file(so);
    const bool read = fd >= 0 && read_fd(fd, bytes);
    if (fd >= 0) close(fd);
    if (!read) return "cannot read the compiled formula " + so;
    if (!write_private_file(scratch.file("formula.id"), entry_record(key_hash, sha256_hex(bytes))) ||
        rename(so.c_str(), (stem + ".so").c_str()) != 0 || rename(scratch.file("formula.id").c_str(), (stem + ".id").c_str()) != 0)
        return "cannot write the compiled formula into " + dir;
    return "";
}

}  // namespace

std::shared_ptr<const FormulaJitLibrary> compile_formulas_jit(
    const std::vector<const FormulaProgram*>& programs, const FormulaJitOptions& options,
    std::string* why) {
    auto fail = [&](const std::string& m) -> std::shared_ptr<const FormulaJitLibrary> {
        if (why != nullptr) *why = m;
        return nullptr;
    };
    const std::string source = formula_cpp_source(programs);
    std::string key = source + "\n" + compiler_identity(options.compiler) + "\n" + cpu_identity();
    for (const auto& f : jit_flags()) key += " " + f;
    if (options.cache_dir.empty())
        return fail("no private folder for compiled formulas: HOME and XDG_CACHE_HOME are unset "
                    "(a shared temporary folder is never used)");
    const std::string dir = options.cache_dir;
    if (const std::string bad = prepare_private_dir(dir); !bad.empty()) return fail(bad);
    const std::string key_hash = sha256_hex(key);
    const std::string stem = dir + "/formula-" + key_hash.substr(0, 32);
    std::shared_ptr<FormulaJitLibrary> lib(new FormulaJitLibrary());
    lib->path_ = stem + ".so";
    lib->handle_ = open_verified(stem, key_hash, programs.size(), lib->tables_);
    lib->from_cache_ = lib->handle_ != nullptr;
    if (lib->handle_ != nullptr) return lib;
    if (access(options.compiler.c_str(), X_OK) != 0) return fail("no C++ compiler at " + options.compiler);
    if (const std::string failed = compile_entry(dir, stem, source, key_hash, options); !failed.empty())
        return fail(failed);
    lib->handle_ = open_verified(stem, key_hash, programs.size(), lib->tables_);
    if (lib->handle_ == nullptr) {
        const char* e = dlerror();
        return fail("cannot load " + lib->path_ + ": " + (e != nullptr ? e : "not a formula library"));
    }
    return lib;
}

std::shared_ptr<const FormulaJitLibrary> formula_jit_for_run(const FormulaProgram& program,
                                                             FormulaCompile mode,
                                                             const std::string& where,
                                                             double timeout_s) {
    if (mode == FormulaCompile::interpret) return nullptr;
    std::string why;
    FormulaJitOptions options = default_formula_jit_options();
    options.timeout_s = timeout_s;
    auto lib = compile_formulas_jit({&program}, options, &why);
    if (lib == nullptr && mode == FormulaCompile::jit)
        throw usage_error(where + ": compile = jit, but the formula could not be compiled: " + why);
    return lib;
}

}  // namespace ef

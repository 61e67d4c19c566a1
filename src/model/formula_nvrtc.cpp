// SPDX-License-Identifier: MIT
#include "src/model/formula_nvrtc.hpp"

#include <dlfcn.h>

#include <cstddef>

namespace ef {
namespace {

// The few NVRTC entry points used, declared here so that no CUDA header is needed (nvrtc.h:
// nvrtcResult is an int enum, nvrtcProgram an opaque pointer).
using Program = void*;
using CreateFn = int (*)(Program*, const char*, const char*, int, const char* const*, const char* const*);
using CompileFn = int (*)(Program, int, const char* const*);
using SizeFn = int (*)(Program, std::size_t*);
using GetFn = int (*)(Program, char*);
using DestroyFn = int (*)(Program*);
using AddNameFn = int (*)(Program, const char*);
using LoweredFn = int (*)(Program, const char*, const char**);
using VersionFn = int (*)(int*, int*);

struct Nvrtc {
    void* handle = nullptr;
    CreateFn create = nullptr;
    CompileFn compile = nullptr;
    SizeFn log_size = nullptr, ptx_size = nullptr;
    GetFn log = nullptr, ptx = nullptr;
    DestroyFn destroy = nullptr;
    AddNameFn add_name = nullptr;
    LoweredFn lowered = nullptr;
    VersionFn version = nullptr;
};

template <class Fn>
Fn symbol(void* h, const char* name) {
    return reinterpret_cast<Fn>(dlsym(h, name));
}

/// NVRTC, opened once per process; handle null when no libnvrtc is found.
const Nvrtc& nvrtc() {
    static const Nvrtc n = [] {
        Nvrtc r;
        for (const char* lib : {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
                                "/usr/local/cuda/lib64/libnvrtc.so"}) {
            r.handle = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
            if (r.handle != nullptr) break;
        }
        if (r.handle == nullptr) return r;
        r.create = symbol<CreateFn>(r.handle, "nvrtcCreateProgram");
        r.compile = symbol<CompileFn>(r.handle, "nvrtcCompileProgram");
        r.log_size = symbol<SizeFn>(r.handle, "nvrtcGetProgramLogSize");
        r.log = symbol<GetFn>(r.handle, "nvrtcGetProgramLog");
        r.ptx_size = symbol<SizeFn>(r.handle, "nvrtcGetPTXSize");
        r.ptx = symbol<GetFn>(r.handle, "nvrtcGetPTX");
        r.destroy = symbol<DestroyFn>(r.handle, "nvrtcDestroyProgram");
        r.add_name = symbol<AddNameFn>(r.handle, "nvrtcAddNameExpression");
        r.lowered = symbol<LoweredFn>(r.handle, "nvrtcGetLoweredName");
        r.version = symbol<VersionFn>(r.handle, "nvrtcVersion");
        if (!r.create || !r.compile || !r.log_size || !r.log || !r.ptx_size || !r.ptx || !r.destroy ||
            !r.add_name || !r.lowered || !r.version)
            r.handle = nullptr;
        return r;
    }();
    return n;
}

std::string text_of(Program p, SizeFn size, GetFn get) {
    std::size_t n = 0;
    if (size(p, &n) != 0 || n == 0) return "";
    std::string s(n, '\0');
    if (get(p, s.data()) != 0) return "";
    s.resize(n - 1);  // without the terminating NUL
    return s;
}

}  // namespace

NvrtcResult compile_with_nvrtc(const std::string& source,
                               const std::vector<std::pair<std::string, std::string>>& headers,
                               const std::string& arch, const std::string& cccl_include,
                               const std::vector<std::string>& names,
                               const std::vector<std::string>& options) {
    NvrtcResult out;
    const Nvrtc& n = nvrtc();
    if (n.handle == nullptr) {
        out.log = "NVRTC (libnvrtc.so) not found";
        return out;
    }
    std::vector<const char*> header_names, texts;
    for (const auto& [name, text] : headers) {
        header_names.push_back(name.c_str());
        texts.push_back(text.c_str());
    }
    Program prog = nullptr;
    if (n.create(&prog, source.c_str(), "formula.cu", static_cast<int>(headers.size()), texts.data(),
                 header_names.data()) != 0) {
        out.log = "nvrtcCreateProgram failed";
        return out;
    }
    for (const std::string& name : names) n.add_name(prog, name.c_str());
    const std::string arch_opt = "--gpu-architecture=" + arch;
    const std::string include_opt = "-I" + cccl_include;
    std::vector<const char*> opts = {arch_opt.c_str(), "-std=c++20", "--fmad=false", include_opt.c_str()};
    for (const std::string& o : options) opts.push_back(o.c_str());
    const int rc = n.compile(prog, static_cast<int>(opts.size()), opts.data());
    out.log = text_of(prog, n.log_size, n.log);
    if (rc == 0) out.ptx = text_of(prog, n.ptx_size, n.ptx);
    for (std::size_t k = 0; rc == 0 && k < names.size(); ++k) {
        const char* lowered = nullptr;
        if (n.lowered(prog, names[k].c_str(), &lowered) != 0 || lowered == nullptr) break;
        out.lowered.emplace_back(lowered);  // owned by the program: copied before it is destroyed
    }
    out.ok = rc == 0 && !out.ptx.empty() && out.lowered.size() == names.size();
    n.destroy(&prog);
    return out;
}

std::string nvrtc_version() {
    const Nvrtc& n = nvrtc();
    int major = 0, minor = 0;
    if (n.handle == nullptr || n.version(&major, &minor) != 0) return "";
    return std::to_string(major) + "." + std::to_string(minor);
}

}  // namespace ef

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

struct Nvrtc {
    void* handle = nullptr;
    CreateFn create = nullptr;
    CompileFn compile = nullptr;
    SizeFn log_size = nullptr, ptx_size = nullptr;
    GetFn log = nullptr, ptx = nullptr;
    DestroyFn destroy = nullptr;
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
        if (!r.create || !r.compile || !r.log_size || !r.log || !r.ptx_size || !r.ptx || !r.destroy)
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
                               const std::string& arch, const std::string& cccl_include) {
    NvrtcResult out;
    const Nvrtc& n = nvrtc();
    if (n.handle == nullptr) {
        out.log = "NVRTC (libnvrtc.so) not found";
        return out;
    }
    std::vector<const char*> names, texts;
    for (const auto& [name, text] : headers) {
        names.push_back(name.c_str());
        texts.push_back(text.c_str());
    }
    Program prog = nullptr;
    if (n.create(&prog, source.c_str(), "formula.cu", static_cast<int>(headers.size()), texts.data(),
                 names.data()) != 0) {
        out.log = "nvrtcCreateProgram failed";
        return out;
    }
    const std::string arch_opt = "--gpu-architecture=" + arch;
    const std::string include_opt = "-I" + cccl_include;
    const char* opts[] = {arch_opt.c_str(), "-std=c++20", "--fmad=false", include_opt.c_str()};
    const int rc = n.compile(prog, 4, opts);
    out.log = text_of(prog, n.log_size, n.log);
    if (rc == 0) out.ptx = text_of(prog, n.ptx_size, n.ptx);
    out.ok = rc == 0 && !out.ptx.empty();
    n.destroy(&prog);
    return out;
}

}  // namespace ef

// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ef {

/// What an NVRTC compile gave: PTX on success, else the compiler's log (or why NVRTC could not
/// be loaded).
struct NvrtcResult {
    bool ok = false;
    std::string ptx;
    std::string log;
    std::vector<std::string> lowered;  ///< the mangled name of each name expression, in order
};

/**
 * Compiles CUDA `source` with NVRTC for `arch` (e.g. "sm_90"), with in-memory `headers` and
 * the libcu++ folder `cccl_include`, and --fmad=false as the build's device code. NVRTC is
 * opened at run time (dlopen of libnvrtc.so), so a program built without CUDA can still
 * generate and check device code, and a missing NVRTC is a failure to report, not a crash.
 * `names` are C++ name expressions (e.g. a kernel template's instantiation) that NVRTC
 * instantiates and whose mangled names come back in NvrtcResult::lowered; `options` are added
 * to the compile options.
 */
NvrtcResult compile_with_nvrtc(const std::string& source,
                               const std::vector<std::pair<std::string, std::string>>& headers,
                               const std::string& arch, const std::string& cccl_include,
                               const std::vector<std::string>& names = {},
                               const std::vector<std::string>& options = {});

/// NVRTC's version as "major.minor", or "" when no libnvrtc can be opened (for cache keys).
std::string nvrtc_version();

}  // namespace ef

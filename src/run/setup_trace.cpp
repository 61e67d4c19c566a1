// SPDX-License-Identifier: MIT
#include "src/run/setup_trace.hpp"

#include <cstdio>

#include <ensemblefit/core/diagnostics.hpp>

namespace ef {

SetupTrace::SetupTrace(int rank)
    : rank_(rank), on_(diagnostics().setup_trace), last_(std::chrono::steady_clock::now()) {}

void SetupTrace::mark(const char* step) {
    if (!on_) return;
    const auto now = std::chrono::steady_clock::now();
    std::fprintf(stderr, "[setup rank %d] %s: %.3f s\n", rank_, step,
                 std::chrono::duration<double>(now - last_).count());
    last_ = now;
}

}  // namespace ef

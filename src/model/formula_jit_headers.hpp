// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>

namespace ef {

/// A kernels/core header as text, for sources generated at run time (formula_jit.cpp).
struct FormulaJitHeader {
    const char* name;  ///< its path in the source tree, e.g. "kernels/core/dual.hpp"
    const char* text;
};

/// hd.hpp, ef_math.hpp and dual.hpp in dependency order, embedded when ensemblefit is built
/// (CMakeLists.txt writes generated/formula_jit_headers.cpp), so an installed program compiles
/// formulas without its source tree, against exactly the math it was built with.
extern const FormulaJitHeader kFormulaJitHeaders[];
extern const std::size_t kFormulaJitHeaderCount;

/// The headers of kernels/cuda/replica_kernels.cuh under NVRTC: the kernels/ headers it
/// includes and Random123's Philox, each named as its includer spells it.
extern const FormulaJitHeader kFormulaNvrtcHeaders[];
extern const std::size_t kFormulaNvrtcHeaderCount;

}  // namespace ef

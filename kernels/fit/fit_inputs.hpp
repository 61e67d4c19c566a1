// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <ensemblefit/core/replica_block.hpp>

#include "kernels/fit/lm.hpp"
#include "kernels/models/model_variant.hpp"

namespace ef {

/**
 * The Gram path's per-run inputs (kernels/fit/lm_gram.hpp), made once on the host by
 * fit_inputs() (src/fit/fit_plan.cpp) so that the CPU and the GPU worker start from the same
 * bits: T^T and T^T W (Kt x n, row-major), the start point's moments u0 and prediction
 * f0 = T u0, 1 / sigma^2 and the free parameters' indices. Each worker forms G = T^T W T with
 * its own deterministic GEMM.
 */
struct GramInputs {
    int n = 0;
    long Kt = 0;
    std::vector<double> tt, wtt;  ///< Kt x n, row-major
    std::vector<double> u0;       ///< Kt
    std::vector<double> f0;       ///< n
    std::vector<double> winv;     ///< n
    std::vector<int> free_idx;
};

/**
 * What a fit reads besides its plan, all in host memory and never owned: the model's view, the
 * data (`data.weight` unused), and for the Gram path its inputs. Made by fit_inputs()
 * (src/fit/fit_plan.cpp) from a FitProblem, which must outlive it.
 */
struct FitInputs {
    ModelVariant model;
    FitDataView data;
    std::shared_ptr<const GramInputs> gram;  ///< FitPath::gram only
};

/// Row t of a block from one replica's outcome; its parameters from `p` when not null (a GPU
/// worker downloads them straight into the block).
inline void store_outcome(ReplicaBlock& out, std::size_t t, std::int64_t replica, const LmOutcome& o,
                          const double* p) {
    out.index[t] = replica;
    if (p != nullptr) std::copy(p, p + out.P, out.params.begin() + static_cast<std::ptrdiff_t>(t * out.P));
    out.chi2[t] = o.chi2;
    out.status[t] = static_cast<std::int64_t>(o.status);
    out.iterations[t] = o.iterations;
}

}  // namespace ef

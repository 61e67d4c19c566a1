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
 * Doubles in host memory that a GramInputs does not own alone: its own block, or memory the
 * ranks of a node share (an MPI-3 window, src/comm/table_share.hpp), kept alive by `keep`.
 * Empty: not made.
 */
struct HostDoubles {
    const double* ptr = nullptr;
    std::size_t count = 0;
    std::shared_ptr<const void> keep;

    const double* data() const { return ptr; }
    std::size_t size() const { return count; }
    bool empty() const { return count == 0; }
};

/**
 * The Gram path's per-run inputs (kernels/fit/lm_gram.hpp), made once on the host by
 * fit_inputs() (src/fit/fit_plan.cpp) so that the CPU and the GPU worker start from the same
 * bits: T^T and T^T W (Kt x n, row-major), the start point's moments u0 and prediction
 * f0 = T u0, 1 / sigma^2 and the free parameters' indices. Each worker forms G = T^T W T with
 * its own deterministic GEMM, unless the CPU's products are given: T^T and G packed for the CPU
 * GEMM (kernels/cpu/table_gemm.hpp), made once per node by its ranks together (then the CPU
 * worker takes them as they are; the GPU worker never reads them).
 */
struct GramInputs {
    int n = 0;
    long Kt = 0;
    HostDoubles tt, wtt;          ///< Kt x n, row-major
    std::vector<double> u0;       ///< Kt
    HostDoubles f0;               ///< n
    std::vector<double> winv;     ///< n
    std::vector<int> free_idx;
    HostDoubles packed_tt;        ///< T^T packed (Kt rows of n), or empty
    HostDoubles packed_g;         ///< G packed (Kt rows of Kt, as the CPU worker packs it), or empty
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

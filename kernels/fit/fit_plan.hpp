// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/fit/lm.hpp"
#include "kernels/fit/lm_normal.hpp"

namespace ef {

/**
 * How a fit's replicas are solved; one of four paths, chosen once per run (make_fit_plan,
 * src/fit/fit_plan.cpp) and followed by every worker:
 *  - qr:     one bounded LM per replica, QR of the stored Jacobian (kernels/fit/lm.hpp);
 *  - normal: one LM per replica on the normal equations, in double or float
 *            (kernels/fit/lm_normal.hpp);
 *  - table:  the batched LM of a table-linear model, one GEMM per round for all replicas
 *            (kernels/fit/lm_batched.hpp);
 *  - gram:   the batched normal-equations LM of a table-linear model, one GEMM with the Gram
 *            matrix per round (kernels/fit/lm_gram.hpp).
 */
enum class FitPath { qr, normal, table, gram };

/// How a GPU runs the batched paths' LM steps: a warp per replica (the 32 lanes of
/// kernels/fit/lanes.hpp on 32 threads) or one thread per replica (all 32 lanes in one thread).
/// Never changes results: both are the same arithmetic, bit for bit.
enum class GpuLmSteps { warp, thread };

/// Who drives a GPU's batched rounds: the device (the request lists built by a kernel, rounds
/// replayed as CUDA graphs, the host waiting once per graph) or the host (the requests read back
/// and the lists built and uploaded every round). Never changes results: the same lists.
enum class GpuRoundLoop { device, host };

/// The parameter arrays a worker hands its LM, in model order (host memory; GPU workers upload
/// them).
struct ParamArrays {
    std::vector<double> lower, upper, start;
    std::vector<unsigned char> fixed;
    int nfree = 0;

    int size() const { return static_cast<int>(lower.size()); }
    /// A view of these arrays (or, with other pointers, of their device copies).
    ParamBoundsView view(const double* lo, const double* hi, const unsigned char* fx) const {
        return ParamBoundsView{size(), lo, hi, fx};
    }
    ParamBoundsView view() const { return view(lower.data(), upper.data(), fixed.data()); }
};

/// Jacobian dual width of the qr path: the smallest of 4, 8, 16 that holds `nfree` free
/// parameters (wider models take several passes of 16). The width changes speed, never bits.
constexpr int qr_dual_width(int nfree) { return nfree <= 4 ? 4 : (nfree <= 8 ? 8 : 16); }

/// Slots of the normal path's state: the smallest of 3, 5, 8, 16 that holds `P` parameters.
constexpr int normal_width(int P) { return P <= 3 ? 3 : (P <= 5 ? 5 : (P <= 8 ? 8 : kNormalMaxParams)); }

/**
 * Everything about how a run fits its replicas that follows from the problem and the config,
 * decided once per run by make_fit_plan (src/fit/fit_plan.cpp) and handed to whichever worker
 * runs it; workers read it and never decide again. Plain data: kernels see no config.
 */
struct FitPlan {
    FitPath path = FitPath::qr;
    /// qr path: the Jacobian's dual width (qr_dual_width(nfree)). The batched paths always
    /// run batched::kDualWidth.
    int dual_width = 16;
    /// normal path: state slots (normal_width(P)) and arithmetic (float or double).
    int normal_width = kNormalMaxParams;
    bool single_precision = false;
    ParamArrays params;
    LmSettings settings;
    bool bootstrap = false;  ///< replicas resample by bootstrap multiplicities, else smear
    std::uint64_t seed = 1;
    GpuLmSteps gpu_lm_steps = GpuLmSteps::warp;
    GpuRoundLoop gpu_round_loop = GpuRoundLoop::device;

    int num_params() const { return params.size(); }
    bool batched() const { return path == FitPath::table || path == FitPath::gram; }
};

}  // namespace ef

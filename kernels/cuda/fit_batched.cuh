// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include <ensemblefit/core/replica_block.hpp>

#include "kernels/core/kernel_tally.hpp"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/fit/fit_inputs.hpp"
#include "kernels/fit/fit_plan.hpp"
#include "kernels/models/dis_mellin.hpp"

namespace ef::cuda {

/// The plan's parameter arrays on the device, uploaded once per worker.
struct DeviceParams {
    DeviceBuffer<double> lower, upper, start;
    DeviceBuffer<unsigned char> fixed;
    ParamBoundsView bounds;  ///< views of the device copies

    explicit DeviceParams(const ParamArrays& host) {
        const size_t P = static_cast<size_t>(host.size());
        lower.upload(host.lower.data(), P);
        upper.upload(host.upper.data(), P);
        start.upload(host.start.data(), P);
        fixed.upload(host.fixed.data(), P);
        bounds = host.view(lower.data(), upper.data(), fixed.data());
    }
};

/// Two tilings of the table GEMM with the same summation order, so the same bits (each output one
/// accumulator, fma in ascending k from 0, as the CPU's table_gemm): `blocked` (8 x 8 outputs per
/// thread in rows and columns 16 apart) and `pairs` (the same in pairs, read as double2, k tiles
/// double-buffered). Which is faster is the device's business: table_gemm_tiling() times both once.
enum class GemmTiling { blocked, pairs };

/// The faster tiling on the current device, timed on the first call (zeroed operands, 2048 x 1088
/// times 1088 x 4096) and kept for the process. Allocates and synchronises: call it outside
/// graph capture.
GemmTiling table_gemm_tiling();

/// F (n x cols, column-major) = T (n x Kt, row-major) W (Kt x cols, column-major) with the
/// batched fitter's deterministic GEMM kernel (asynchronous, default stream), the faster tiling
/// or the given one.
void launch_table_gemm(const double* T, const double* W, double* F, int n, int Kt, long cols);
void launch_table_gemm(const double* T, const double* W, double* F, int n, int Kt, long cols, GemmTiling tiling);

/**
 * The batched paths of one GPU, FitPath::table (kernels/fit/lm_batched.hpp) and FitPath::gram
 * (kernels/fit/lm_gram.hpp: G = T^T W T formed once here, then per unit b and c per replica):
 * the table or G and the data stay resident; each call fits a unit of replicas in rounds of
 * (moments kernel, deterministic GEMM, LM step kernel), with one set of per-slot arrays
 * (BatchArrays) kept across units. The same bits as the CPU worker.
 */
class BatchFitter {
   public:
    /// `device_model` points at the device copies of the table and contour nodes; `params`
    /// (the plan's, on the device) must outlive the fitter.
    BatchFitter(const FitPlan& plan, const FitInputs& in, const DisMellinModel& device_model, const double* device_y,
                const double* device_sigma, const DeviceParams& params);
    ~BatchFitter();
    void fit(const std::int64_t* replicas, int count, ReplicaBlock& out);
    /// Bytes of device memory one replica of a unit needs.
    size_t bytes_per_replica() const;

    /// Counters of the last fit (for EF_GPU_STATS): rounds, GEMM seconds and FLOPs, and what the
    /// host did per unit: launches (kernels and graphs) and host syncs (every call that waits
    /// for the device: blocking copies, event and stream synchronisations; allocations not counted).
    struct Stats {
        int rounds = 0;
        int launches = 0;
        int host_syncs = 0;
        int graphs = 0;            ///< device loop: graphs captured (one per bound)
        bool device_loop = false;  ///< [tuning] gpu_round_loop = device
        bool gemm_pairs = false;   ///< the GEMM's tiling: pairs, else blocked (table_gemm_tiling())
        double gemm_seconds = 0.0;
        double gemm_flops = 0.0;
        double step_seconds = 0.0;    ///< the LM step kernels
        double moment_seconds = 0.0;  ///< the moments kernels (prepare, nodes)
        double host_seconds = 0.0;    ///< the lists: the host loop's reading, building and uploading; the device loop's plan kernel
        double total_seconds = 0.0;
        KernelTally* tally = nullptr;  ///< also gets each round's phases and device intervals
    };
    const Stats& stats() const { return stats_; }
    /// Every later fit's rounds also go to `t` (moments, gemm, lm_steps: CUDA events), for the
    /// roofline and the trace; null: not kept.
    void record_to(KernelTally* t) { tally_ = t; }

   private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
    Stats stats_;
    KernelTally* tally_ = nullptr;
};

}  // namespace ef::cuda

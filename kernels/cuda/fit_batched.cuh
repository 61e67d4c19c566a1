// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <memory>

#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/fit/replica_block.hpp>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/models/dis_mellin.hpp"
#include "src/fit/fit_arrays.hpp"

namespace ef::cuda {

/// The parameter arrays on the device, and replica 0's covariance.
struct DeviceParams {
    ParamArrays host;
    DeviceBuffer<double> lower, upper, start, cov;
    DeviceBuffer<unsigned char> fixed;
    explicit DeviceParams(const FitConfig& cfg) : host(param_arrays(cfg)) {
        const size_t P = host.lower.size();
        lower.upload(host.lower.data(), P);
        upper.upload(host.upper.data(), P);
        start.upload(host.start.data(), P);
        fixed.upload(host.fixed.data(), P);
        cov.resize(P * P);
    }
    ParamBoundsView view() const { return host.view(lower.get(), upper.get(), fixed.get()); }
};


/// F (n x cols, column-major) = T (n x Kt, row-major) W (Kt x cols, column-major) with the
/// batched fitter's deterministic GEMM kernel (asynchronous, default stream).
void launch_table_gemm(const double* T, const double* W, double* F, int n, int Kt, long cols);

/// The batched table-model fitter of one GPU (kernels/fit/lm_batched.hpp on the device): the
/// table and data stay resident; each call fits a unit of replicas in rounds of
/// (moments kernel, deterministic table GEMM, LM step kernel).
class TableBatchFitter {
   public:
    /// `device_model` points at the device copies of the table and contour nodes.
    TableBatchFitter(const FitProblem& problem, const DisMellinModel& device_model, const double* device_y,
                     const double* device_sigma);
    ~TableBatchFitter();
    void fit(const std::int64_t* replicas, int count, ReplicaBlock& out);

    /// Counters of the last fit (for perf logs): rounds, GEMM seconds and FLOPs.
    struct Stats {
        int rounds = 0;
        double gemm_seconds = 0.0;
        double gemm_flops = 0.0;
        double step_seconds = 0.0;    ///< the LM step kernels
        double moment_seconds = 0.0;  ///< the moments kernels (prepare, nodes)
        double host_seconds = 0.0;    ///< reading each round's requests, building and uploading its lists
        double total_seconds = 0.0;
    };
    const Stats& stats() const { return stats_; }

   private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
    Stats stats_;
};

/// The Gram path of one GPU (kernels/fit/lm_gram.hpp on the device, `[fit] solver = normal` for
/// dis-mellin): G = T^T W T formed once, then per unit b and c per replica and rounds of
/// (moments kernel, deterministic GEMM with G, LM step kernel). The same bits as the CPU worker.
class GramBatchFitter {
   public:
    GramBatchFitter(const FitProblem& problem, const DisMellinModel& device_model, const double* device_y,
                    const double* device_sigma);
    ~GramBatchFitter();
    void fit(const std::int64_t* replicas, int count, ReplicaBlock& out);
    const TableBatchFitter::Stats& stats() const { return stats_; }
    /// Bytes of device memory one replica of a unit needs.
    size_t bytes_per_replica() const;

   private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
    TableBatchFitter::Stats stats_;
};

}  // namespace ef::cuda

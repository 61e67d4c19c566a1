// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <memory>

#include <ensemblefit/core/replica_block.hpp>

#include "kernels/fit/fit_inputs.hpp"
#include "kernels/fit/fit_plan.hpp"

namespace ef {
class KernelTally;
}

namespace ef::cpu {

/// What a CPU worker keeps across units, made once per run from the plan: the packed table of
/// the table path, packed T^T and G of the Gram path, 1 / sigma of the normal path.
struct FitContext;
std::shared_ptr<const FitContext> make_fit_context(const FitPlan& plan, const FitInputs& in, int threads);

/**
 * Fits `count` replicas (numbers in `replicas`) with OpenMP threads on the plan's path: resample
 * (Philox keyed by seed and replica), then the bounded LM with dual-number Jacobians, one
 * replica per thread at a time (qr, normal), or all replicas in rounds of one GEMM each (table,
 * gram: the same arithmetic as the CUDA worker's). Results go to out[0..count) in input order;
 * replica 0 also gets its covariance. `ctx` (from make_fit_context with the same plan and
 * inputs) saves the per-run set-up; nullptr makes it for this call. `tally` (may be null) gets
 * the host time of each phase of model work (kernels/core/kernel_tally.hpp): resample, moments,
 * gemm, lm_steps on the batched paths; lm (items: LM iterations) on the per-replica paths.
 */
void fit_replicas(const FitPlan& plan, const FitInputs& in, const std::int64_t* replicas, int count, int threads,
                  ReplicaBlock& out, const FitContext* ctx = nullptr, KernelTally* tally = nullptr);

}  // namespace ef::cpu

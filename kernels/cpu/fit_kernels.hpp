// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <memory>

#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/fit/replica_block.hpp>

namespace ef::cpu {

/// What a CPU worker keeps across units: the packed table of a table-linear model.
struct FitContext;
std::shared_ptr<FitContext> make_fit_context(const FitProblem& problem);

/// True when the problem takes the batched table-GEMM path (dis-mellin with at most 16 free
/// parameters) rather than one LM with its own model evaluations per replica.
bool uses_table_path(const FitProblem& problem);

/**
 * Fits `count` replicas (numbers in `replicas`) with OpenMP threads: resample (Philox keyed by
 * seed and replica), then bounded LM with dual-number Jacobians. Table-linear models go through
 * the batched path (kernels/fit/lm_batched.hpp: all replicas' model evaluations as one GEMM per
 * round, the same arithmetic as the CUDA worker's), others one replica per thread at a time.
 * Results go to out[0..count) in input order; replica 0 also gets its covariance. `ctx` (from
 * make_fit_context) saves re-packing the table per unit; nullptr packs it per call.
 */
void fit_replicas(const FitProblem& problem, const std::int64_t* replicas, int count, int threads,
                  ReplicaBlock& out, FitContext* ctx = nullptr);

/// The per-replica path whatever the model (tests compare it with the batched path).
void fit_replicas_per_replica(const FitProblem& problem, const std::int64_t* replicas, int count,
                              int threads, ReplicaBlock& out);

}  // namespace ef::cpu

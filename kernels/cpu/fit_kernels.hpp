// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/fit/replica_block.hpp>

#include "kernels/cpu/table_gemm.hpp"

namespace ef::cpu {

/// What a CPU worker keeps across units: the packed table of a table-linear model (and the
/// Gram matrix for the normal-equations path).
struct FitContext;
std::shared_ptr<FitContext> make_fit_context(const FitProblem& problem, int threads = 1);

/// True when the problem takes the batched table-GEMM path (dis-mellin with at most 16 free
/// parameters) rather than one LM with its own model evaluations per replica.
bool uses_table_path(const FitProblem& problem);

/// True for the table path with `[fit] solver = normal`: the Gram path (kernels/fit/lm_gram.hpp).
bool uses_gram_path(const FitProblem& problem);

/// Host inputs of the Gram path, shared by the CPU and CUDA workers (see make_gram_inputs).
struct GramInputs {
    int n = 0;
    long Kt = 0;
    std::vector<double> tt, wtt;  ///< T^T and T^T W, Kt x n row-major
    std::vector<double> u0, f0;   ///< Kt: moments at the start; n: T u0
    std::vector<double> winv;     ///< n: 1 / sigma^2
    std::vector<int> free_idx;
};
GramInputs make_gram_inputs(const FitProblem& problem, const PackedTable* packed_table, int threads);

/// The CPU's Gram path state: its inputs, packed T^T and packed G.
struct GramCpu {
    GramInputs in;
    PackedTable tt, g;
};

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

// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>

#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/fit/replica_block.hpp>

namespace ef::cpu {

/**
 * Fits `count` replicas (numbers in `replicas`) with OpenMP threads, one replica per thread at a
 * time: resample (Philox keyed by seed and replica), then bounded LM with dual-number
 * Jacobians. Results go to out[0..count) in input order; replica 0 also gets its covariance.
 */
void fit_replicas(const FitProblem& problem, const std::int64_t* replicas, int count, int threads,
                  ReplicaBlock& out);

}  // namespace ef::cpu

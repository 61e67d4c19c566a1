// SPDX-License-Identifier: MIT
#pragma once
// Shared by the GPU tests that compare workers: replicas 0..replicas of `pb` as one work unit on
// a worker of `kind` (8 threads on the CPU, device 0 on the GPU).
#include <cstdint>

#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/worker/worker.hpp>

namespace ef_test {

inline ef::ReplicaBlock fit_replicas(const ef::FitProblem& pb, ef::WorkerKind kind, int replicas) {
    ef::WorkUnit unit;
    for (std::int64_t r = 0; r <= replicas; ++r) unit.replicas.push_back(r);
    ef::WorkerOptions o;
    o.threads = 8;
    o.device = 0;
    ef::ReplicaBlock out;
    ef::make_worker(kind, pb, o)->run(unit, out);
    return out;
}

}  // namespace ef_test

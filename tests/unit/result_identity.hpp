// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <string>

#include "src/io/results_file.hpp"

namespace ef_test {

/// The identity of a result file of `replicas` replicas of parameters p0..p{P-1} (one shard),
/// for tests that write /replicas without a fit.
inline ef::RunIdentity result_identity(std::int64_t replicas, int P) {
    ef::RunIdentity id;
    id.canonical_config = "[fit]\nreplicas = " + std::to_string(replicas) + "\n";
    id.resolved_config = id.canonical_config;
    id.data_checksum = "0";
    id.model = "test";
    for (int q = 0; q < P; ++q) id.param_names.push_back("p" + std::to_string(q));
    id.replicas_total = replicas;
    id.span = ef::shard_span(replicas, ef::ShardSpec{});
    return id;
}

}  // namespace ef_test

// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <vector>

namespace ef {

/**
 * Results of one work unit: for each replica its number, parameters (row-major, count x P),
 * chi^2, status (ReplicaStatus codes) and iterations. When replica 0 is in the block,
 * `covariance` holds its P x P parameter covariance. This is what workers produce, what ranks
 * send to rank 0, and what the results file stores row by row.
 */
struct ReplicaBlock {
    int P = 0;
    std::vector<std::int64_t> index;
    std::vector<double> params;
    std::vector<double> chi2;
    std::vector<std::int64_t> status;
    std::vector<std::int64_t> iterations;
    std::vector<double> covariance;

    std::size_t size() const { return index.size(); }
    void resize(std::size_t count, int nparams) {
        P = nparams;
        index.assign(count, 0);
        params.assign(count * static_cast<std::size_t>(nparams), 0.0);
        chi2.assign(count, 0.0);
        status.assign(count, -1);
        iterations.assign(count, 0);
    }
    /// Serialises for MPI (bytes) and back.
    std::vector<char> pack() const;
    static ReplicaBlock unpack(const char* bytes, std::size_t size);
};

}  // namespace ef

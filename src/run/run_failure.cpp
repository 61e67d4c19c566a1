// SPDX-License-Identifier: MIT
#include "src/run/run_failure.hpp"

#include <cstdio>
#include <cstdlib>

#include <ensemblefit/core/error.hpp>

namespace ef {

void abort_run(const MpiContext& ctx, const std::exception& e) {
    std::fprintf(stderr, "ensemblefit: error on rank %d: %s\n", ctx.rank(), e.what());
    std::fflush(stderr);
    std::fflush(stdout);
    const Error* ee = dynamic_cast<const Error*>(&e);
    MPI_Abort(ctx.world(), ee ? static_cast<int>(ee->code()) : 1);
    std::abort();  // MPI_Abort does not return
}

}  // namespace ef

// SPDX-License-Identifier: MIT
#include "src/run/run_failure.hpp"

#include "src/run/output_guard.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace ef {

void abort_run(const MpiContext& ctx, const std::exception& e) {
    const Error* ee = dynamic_cast<const Error*>(&e);
    const bool lost = ee && ee->code() == ExitCode::lost;
    if (!ctx.is_root() && !lost) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const std::string where = lost ? std::string() : ctx.describe(ctx.rank()) + ": ";
    std::fflush(stdout);
    std::fprintf(stderr, "ensemblefit: error: %s%s\n", where.c_str(), e.what());
    std::fflush(stderr);
    release_output_locks();  // what this rank wrote is closed: no stale-lock note for the next run
    MPI_Abort(ctx.world(), ee ? static_cast<int>(ee->code()) : 1);
    std::abort();  // MPI_Abort does not return
}

Error rank_lost(const MpiContext& ctx, int rank, double silent_seconds, double timeout, const std::string& doing) {
    char text[160];
    std::snprintf(text, sizeof text, " has not been heard from for %.0f s %s ([run] heartbeat_timeout = %g s): ",
                  silent_seconds, doing.c_str(), timeout);
    return Error(ExitCode::lost, ctx.describe(rank) + text +
                                     "stopped, hung or unreachable; the run ends, keeping what was finished");
}

}  // namespace ef

// SPDX-License-Identifier: MIT
#pragma once

#include <exception>
#include <string>

#include <ensemblefit/comm/mpi_context.hpp>
#include <ensemblefit/core/error.hpp>

namespace ef {

/**
 * A failure in the middle of a run, seen by some ranks only: the others would wait in the next
 * collective, so this rank prints one line and ends the job with MPI_Abort (exit code from the
 * ef::Error, 1 for anything else). The line names this rank and its host ("rank 1 (node7): ..."),
 * or, for ExitCode::lost, the silent rank the message already names. Ranks other than 0 wait
 * half a second first, so that a failure every rank meets at once is printed once, by rank 0,
 * whose MPI_Abort ends the others meanwhile. The caller has flushed and closed what it wrote.
 */
[[noreturn]] void abort_run(const MpiContext& ctx, const std::exception& e);

/**
 * The error for a rank silent for longer than `[run] heartbeat_timeout` (ExitCode::lost): names
 * it and its host, how long and what it was doing (`doing`, e.g. "while holding 2 work units").
 */
Error rank_lost(const MpiContext& ctx, int rank, double silent_seconds, double timeout, const std::string& doing);

}  // namespace ef

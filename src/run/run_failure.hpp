// SPDX-License-Identifier: MIT
#pragma once

#include <exception>

#include <ensemblefit/comm/mpi_context.hpp>

namespace ef {

/**
 * A failure in the middle of a run, seen by some ranks only: the others would wait in the next
 * collective, so this rank prints one line naming itself and ends the job with MPI_Abort (exit
 * code from the ef::Error, 1 for anything else). The caller has flushed and closed what it wrote.
 */
[[noreturn]] void abort_run(const MpiContext& ctx, const std::exception& e);

}  // namespace ef

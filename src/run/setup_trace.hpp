// SPDX-License-Identifier: MIT
#pragma once

#include <chrono>

namespace ef {

/// EF_SETUP_TRACE: prints each set-up step of this rank and its time to stderr (where a short
/// job's time goes), and, after stage("end"), the steps after the last fit the same way, so
/// every 0.1 s from MPI_Init to MPI_Finalize has a name. Does nothing unless the diagnostic is on.
class SetupTrace {
   public:
    explicit SetupTrace(int rank);
    /// The time since the last mark (or since construction), as "[STAGE rank R] STEP: T s".
    void mark(const char* step);
    /// The label of the next marks ("setup" until changed; a static string).
    void stage(const char* name) { stage_ = name; }

   private:
    int rank_;
    bool on_;
    const char* stage_ = "setup";
    std::chrono::steady_clock::time_point last_;
};

/// EF_SETUP_TRACE, from main(): a step of the process outside any run (MPI_Init, the command,
/// MPI_Finalize) and its `seconds`, with the time since the process started (exec; from
/// /proc/self/stat, to the clock tick, 10 ms); rank 0 prints "[process] STEP: T s (E s since exec)".
void trace_process_step(const char* step, double seconds, int rank);

}  // namespace ef

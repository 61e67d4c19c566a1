// SPDX-License-Identifier: MIT
#pragma once

#include <chrono>

namespace ef {

/// EF_SETUP_TRACE: prints each set-up step of this rank and its time to stderr (where a short
/// job's time goes). Does nothing unless the diagnostic is on.
class SetupTrace {
   public:
    explicit SetupTrace(int rank);
    void mark(const char* step);

   private:
    int rank_;
    bool on_;
    std::chrono::steady_clock::time_point last_;
};

}  // namespace ef

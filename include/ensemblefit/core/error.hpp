// SPDX-License-Identifier: MIT
#pragma once

#include <stdexcept>
#include <string>

namespace ef {

/// Process exit codes (docs/architecture.md, "Errors and exit codes").
/// `lost`: a rank stopped answering for longer than `[run] heartbeat_timeout`; what was finished
/// is kept (a fit's file is resumable). `stopped`: a run stopped early on SIGUSR1, SIGTERM or
/// SIGINT after writing what it finished; `--resume` continues it (75 is sysexits.h's
/// EX_TEMPFAIL: "try again later").
enum class ExitCode : int { success = 0, runtime = 1, usage = 2, data = 3, lost = 4, stopped = 75 };

/**
 * An error meant for the user: a one-line message that names the file, line, key or column,
 * and the exit code the program ends with. Input is validated once, at the edge, by throwing
 * these; inside the library invariants are assertions.
 */
class Error : public std::runtime_error {
   public:
    Error(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
    ExitCode code() const { return code_; }

   private:
    ExitCode code_;
};

/// A bad command line or config (exit code 2).
inline Error usage_error(const std::string& m) { return Error(ExitCode::usage, m); }
/// Bad input data (exit code 3).
inline Error data_error(const std::string& m) { return Error(ExitCode::data, m); }
/// A failure while running (exit code 1).
inline Error runtime_error(const std::string& m) { return Error(ExitCode::runtime, m); }

}  // namespace ef

// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <vector>

#include <ensemblefit/comm/mpi_context.hpp>

#include "src/run/run_args.hpp"

namespace ef {

/// What a run does with its output path.
enum class OutputAction { create, replace, resume };

/**
 * The output rules every run command shares, checked before any work (docs/architecture.md,
 * "Output safety"):
 * - an output that is the same file as one of `inputs` (config, data, merge shards; compared by
 *   device and inode, so symlinks, `../` and hard links are caught) is refused whatever the flags;
 * - one writer per output: rank 0 takes the output's lock (lock_output) and keeps it until the
 *   process ends, so a second run on the same output is refused while this one is alive;
 * - an existing file is refused unless `--overwrite` (replace) or, for a `resumable` command,
 *   `--resume` (finish it; it must be an HDF5 file); a folder is never an output; the folder,
 *   and an existing file, must be writable.
 * Decided on rank 0 and agreed through collective(), so every rank ends with the same error.
 * `where` names the config key ("file:line: output.file"). Returns the same action on every rank.
 */
OutputAction check_output(const MpiContext& ctx, const std::string& path, const std::string& where,
                          const RunArgs& args, bool resumable, const std::vector<std::string>& inputs = {});

/**
 * The rules of check_output() on one process, as rank 0 applies them (and the unit tests):
 * refuses an input, a folder, a place it cannot write and an existing file without
 * `--overwrite` or (`resumable`) `--resume`; takes the output's lock. Returns what the run does.
 */
OutputAction decide_output(const std::string& path, const std::string& where, const RunArgs& args, bool resumable,
                           const std::vector<std::string>& inputs);

/**
 * The same rules for a command that writes from one process (merge): refuses an output that is
 * an input, takes the lock, and applies the exists/--overwrite rule. Returns create or replace.
 */
OutputAction check_serial_output(const std::string& path, const std::string& where, bool overwrite,
                                 const std::vector<std::string>& inputs);

/**
 * Takes the advisory lock of `path`: an exclusive flock on the sidecar `PATH.lock`, which holds
 * the owner's pid, host and start time. Kept until the process ends (the kernel releases it
 * when a run is killed, so a lock left by kill -9 is stale and taken over, with a note); the
 * sidecar is removed at a normal exit. A live holder: usage_error naming it (exit 2). A file
 * system without locks: one warning, and the run goes on unguarded. Taking a lock this process
 * holds already is a no-op.
 */
void lock_output(const std::string& path, const std::string& where);

/// Removes this process's lock files and releases the locks: main() calls it before
/// MPI_Finalize, when every output is closed (the launcher may kill a rank once another has
/// exited, before static destructors would run).
void release_output_locks();

/**
 * A new output written under a temporary name in the same folder (`PATH.creating`) and renamed
 * over PATH by commit() once it is complete enough to be used (a fit: its datasets created, so
 * that a later kill leaves a resumable file at PATH). Until then PATH, new or previous, is
 * untouched; a PendingOutput destroyed before commit() removes the temporary file. Use it only
 * while holding the output's lock (the temporary name is the same for every run).
 */
class PendingOutput {
   public:
    explicit PendingOutput(std::string path);
    PendingOutput(const PendingOutput&) = delete;
    PendingOutput& operator=(const PendingOutput&) = delete;
    ~PendingOutput();
    const std::string& temp_path() const { return temp_; }
    /// Syncs the temporary file, renames it over the target and syncs the folder (exit 3 on an
    /// I/O error, naming both paths).
    void commit();

   private:
    std::string path_;
    std::string temp_;
    bool committed_ = false;
};

bool file_exists(const std::string& path);

}  // namespace ef

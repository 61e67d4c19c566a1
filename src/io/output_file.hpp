// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <vector>

namespace ef {

/**
 * The one output guard of every file the program creates (docs/architecture.md, "Output
 * safety"): plain POSIX, no MPI, so every layer and command uses it (src/run/output_guard adds
 * the run commands' --resume and the agreement over the ranks).
 *
 * check_output_file() refuses, as usage errors (exit 2) naming `where` and the path:
 * - an output that is the same file as one of `inputs` (config, data, plugin, result file read;
 *   compared by device and inode, so symlinks, `../` and hard links are caught), whatever the
 *   flags;
 * - a folder, a device, a pipe or a socket (/dev/null: the output is renamed over its target),
 *   or a place that cannot be written;
 * - an existing file unless `replace` (the command's --overwrite, or a run's --resume).
 * Returns whether the file exists.
 */
bool check_output_file(const std::string& path, const std::string& where, bool replace,
                       const std::vector<std::string>& inputs);

/// Refuses `path` when it is one of `inputs` (device and inode); nothing when it does not exist.
void refuse_input_output(const std::string& path, const std::string& where, const std::vector<std::string>& inputs);

/**
 * Files written under temporary names in their own folders (`PATH.creating-XXXXXX`, created with
 * O_EXCL, so two writers never share one) and renamed over their targets together by commit(),
 * after every one of them is complete and synced: a full disk, a file size limit or a kill
 * before commit() leaves every previous file as it was, byte for byte, and no temporary file
 * (the destructor removes what was not committed). A write error is a data_error (exit 3): one
 * line naming `where`, the file and the system's reason. A symlinked target has the file it
 * points to replaced. Check each target with check_output_file() first.
 */
class OutputFiles {
   public:
    explicit OutputFiles(std::string where) : where_(std::move(where)) {}
    OutputFiles(const OutputFiles&) = delete;
    OutputFiles& operator=(const OutputFiles&) = delete;
    ~OutputFiles();
    /// Writes `bytes` to a new temporary file beside `path` and syncs it.
    void add(const std::string& path, const std::string& bytes);
    /// Renames every temporary file over its target (in the order added) and syncs the folders.
    void commit();

   private:
    struct Staged {
        std::string path, temp;
    };
    std::string where_;
    std::vector<Staged> staged_;
    bool committed_ = false;
};

/// One file through OutputFiles: written beside `path`, renamed over it when complete.
void write_output_file(const std::string& path, const std::string& where, const std::string& bytes);

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

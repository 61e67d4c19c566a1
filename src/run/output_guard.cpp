// SPDX-License-Identifier: MIT
#include "src/run/output_guard.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include <ensemblefit/core/error.hpp>

#include "src/io/h5.hpp"

namespace ef {

bool file_exists(const std::string& path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0;
}

namespace {

std::string errno_text() { return std::strerror(errno); }

/// The locks this process holds, released (sidecar removed, then unlocked) when it ends.
class HeldLocks {
   public:
    ~HeldLocks() { release(); }
    void release() {
        for (const auto& [path, fd] : locks_) {
            unlink(path.c_str());  // before the unlock: a waiting run re-checks the inode (lock_output)
            close(fd);
        }
        locks_.clear();
    }
    bool holds(const std::string& path) const {
        for (const auto& l : locks_)
            if (l.first == path) return true;
        return false;
    }
    void add(const std::string& path, int fd) { locks_.emplace_back(path, fd); }

   private:
    std::vector<std::pair<std::string, int>> locks_;
};

HeldLocks& held_locks() {
    static HeldLocks locks;
    return locks;
}

std::string read_fd(int fd) {
    std::string text(256, '\0');
    const ssize_t n = pread(fd, text.data(), text.size(), 0);
    text.resize(n > 0 ? static_cast<size_t>(n) : 0);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
    return text;
}

std::string owner_text() {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    char date[32] = {};
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return "pid " + std::to_string(getpid()) + " on " + host + " since " + date + "\n";
}

/// Locks the sidecar open on `fd`; false when the lock file was replaced meanwhile (retry).
bool lock_fd(int fd, const std::string& lock_path, const std::string& path, const std::string& where) {
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int err = errno;
        if (err == EWOULDBLOCK) {
            const std::string holder = read_fd(fd);
            close(fd);
            throw usage_error(where + ": '" + path + "' is being written by another ensemblefit run (" +
                              (holder.empty() ? "lock " + lock_path : holder) +
                              "); wait for it to end or choose another output");
        }
        close(fd);
        if (err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS) {
            unlink(lock_path.c_str());  // a lock file that locks nothing would only mislead
            std::fprintf(stderr, "ensemblefit: warning: %s: this file system has no file locks (%s); a second run "
                                 "on the same output is not refused\n", lock_path.c_str(), std::strerror(err));
            return true;
        }
        throw data_error(lock_path + ": cannot lock the output (" + std::strerror(err) + ")");
    }
    // A run that just ended removed the sidecar after we opened it: lock the file the name
    // names now, or two runs would each hold a lock on a different inode.
    struct stat mine {}, named {};
    if (fstat(fd, &mine) != 0 || stat(lock_path.c_str(), &named) != 0 || mine.st_ino != named.st_ino ||
        mine.st_dev != named.st_dev) {
        close(fd);
        return false;
    }
    const std::string previous = read_fd(fd);
    if (!previous.empty())
        std::fprintf(stderr, "ensemblefit: note: %s: taking over the lock left by a run that ended without "
                             "releasing it (%s)\n", path.c_str(), previous.c_str());
    const std::string owner = owner_text();
    if (ftruncate(fd, 0) != 0 || pwrite(fd, owner.data(), owner.size(), 0) != static_cast<ssize_t>(owner.size())) {
        const std::string why = errno_text();
        close(fd);
        throw data_error(lock_path + ": cannot write the lock file (" + why + ")");
    }
    held_locks().add(lock_path, fd);
    return true;
}

/// Refuses an output that is one of the inputs (same device and inode: links and ../ included).
void refuse_input(const std::string& path, const std::string& where, const std::vector<std::string>& inputs) {
    struct stat out {};
    if (stat(path.c_str(), &out) != 0) return;  // not there yet: it cannot be an existing input
    for (const std::string& in : inputs) {
        struct stat st {};
        if (!in.empty() && stat(in.c_str(), &st) == 0 && st.st_dev == out.st_dev && st.st_ino == out.st_ino)
            throw usage_error(where + ": '" + path + "' is the input '" + in +
                              "'; an output never replaces an input, choose another output file");
    }
}

/// The folder must exist and be writable (a usage error: the path names no place to write).
void check_writable(const std::string& path, const std::string& where, bool exists) {
    struct stat st {};
    if (exists && stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
        throw usage_error(where + ": '" + path + "' is a folder; the output must be a file");
    const auto slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
    if (access(dir.c_str(), W_OK) != 0 || (exists && access(path.c_str(), W_OK) != 0))
        throw usage_error(where + ": cannot write '" + path + "' (" + errno_text() + ")");
}

}  // namespace

OutputAction decide_output(const std::string& path, const std::string& where, const RunArgs& args, bool resumable,
                           const std::vector<std::string>& inputs) {
    refuse_input(path, where, inputs);
    const bool exists = file_exists(path);
    check_writable(path, where, exists);
    lock_output(path, where);
    if (exists && !args.resume && !args.overwrite)
        throw usage_error(where + ": '" + path + "' exists; pass " + (resumable ? "--resume to finish it or " : "") +
                          "--overwrite to replace it");
    if (exists && args.resume && resumable && !h5::is_hdf5(path))
        throw data_error(where + ": '" + path + "' is not an HDF5 file, so --resume cannot finish it " +
                         "(pass --overwrite to replace it)");
    if (exists && args.resume) return OutputAction::resume;
    return exists ? OutputAction::replace : OutputAction::create;
}

void lock_output(const std::string& path, const std::string& where) {
    // A writer turns a file-size limit (ulimit -f) into an I/O error (EFBIG) instead of a kill.
    std::signal(SIGXFSZ, SIG_IGN);
    const std::string lock_path = path + ".lock";
    if (held_locks().holds(lock_path)) return;
    for (int attempt = 0; attempt < 8; ++attempt) {
        const int fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
            throw data_error(where + ": cannot create the lock file '" + lock_path + "' (" + errno_text() + ")");
        if (lock_fd(fd, lock_path, path, where)) return;
    }
    throw data_error(where + ": the lock file '" + lock_path + "' keeps being replaced; is another run starting?");
}

void release_output_locks() { held_locks().release(); }

OutputAction check_output(const MpiContext& ctx, const std::string& path, const std::string& where,
                          const RunArgs& args, bool resumable, const std::vector<std::string>& inputs) {
    int action = 0;
    collective(ctx, [&] {
        if (ctx.is_root()) action = static_cast<int>(decide_output(path, where, args, resumable, inputs));
    });
    EF_MPI_CHECK(MPI_Bcast(&action, 1, MPI_INT, 0, ctx.world()));
    return static_cast<OutputAction>(action);
}

OutputAction check_serial_output(const std::string& path, const std::string& where, bool overwrite,
                                 const std::vector<std::string>& inputs) {
    RunArgs args;
    args.overwrite = overwrite;
    return decide_output(path, where, args, false, inputs);
}

PendingOutput::PendingOutput(std::string path) : path_(std::move(path)) {
    // Replacing a symbolic link replaces the file it points to, not the link.
    struct stat st {};
    if (lstat(path_.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
        if (char* real = realpath(path_.c_str(), nullptr)) {
            path_ = real;
            std::free(real);
        }
    }
    temp_ = path_ + ".creating";
    unlink(temp_.c_str());  // left by a run killed while creating (we hold the output's lock)
}

PendingOutput::~PendingOutput() {
    if (!committed_) unlink(temp_.c_str());
}

void PendingOutput::commit() {
    const int fd = open(temp_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        const std::string why = errno_text();
        if (fd >= 0) close(fd);
        throw data_error(temp_ + ": syncing the new output failed (" + why + "); '" + path_ + "' is unchanged");
    }
    close(fd);
    if (std::rename(temp_.c_str(), path_.c_str()) != 0)
        throw data_error(path_ + ": renaming the new output '" + temp_ + "' over it failed (" + errno_text() + ")");
    committed_ = true;
    const auto slash = path_.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path_.substr(0, slash));
    const int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);  // the rename itself on disk; a failure here loses nothing that is written
        close(dfd);
    }
}

}  // namespace ef

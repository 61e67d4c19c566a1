// SPDX-License-Identifier: MIT
#include "src/io/output_file.hpp"

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

}  // namespace

namespace {

std::string folder_of(const std::string& path) {
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

/// The file a symbolic link names (replacing a link replaces the file it points to), else `path`.
std::string link_target(const std::string& path) {
    struct stat st {};
    if (lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
        if (char* real = realpath(path.c_str(), nullptr)) {
            std::string out = real;
            std::free(real);
            return out;
        }
    }
    return path;
}

/// Syncs a folder (a rename in it on disk); a failure loses nothing that is written.
void sync_folder(const std::string& dir) {
    const int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
}

/// An output is renamed over its target: a device, a pipe or a socket (/dev/null, /dev/stdout)
/// would be replaced by a plain file, so they are refused (a usage error naming the path).
void refuse_special(const std::string& path, const std::string& where) {
    struct stat st {};
    if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
        throw usage_error(where + ": '" + path + "' is not a regular file (a device, a pipe or a socket); the output "
                                  "must be a file");
}

/// Writes all of `bytes` to `fd` and syncs it; the system's reason on failure ("" on success).
std::string write_all(int fd, const std::string& bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n < 0 ? errno_text() : "no space left";
        done += static_cast<size_t>(n);
    }
    return fsync(fd) == 0 ? "" : errno_text();
}

}  // namespace

void refuse_input_output(const std::string& path, const std::string& where, const std::vector<std::string>& inputs) {
    struct stat out {};
    if (stat(path.c_str(), &out) != 0) return;  // not there yet: it cannot be an existing input
    for (const std::string& in : inputs) {
        struct stat st {};
        if (!in.empty() && stat(in.c_str(), &st) == 0 && st.st_dev == out.st_dev && st.st_ino == out.st_ino)
            throw usage_error(where + ": '" + path + "' is the input '" + in +
                              "'; an output never replaces an input, choose another output file");
    }
}

bool check_output_file(const std::string& path, const std::string& where, bool replace,
                       const std::vector<std::string>& inputs) {
    if (path.empty()) throw usage_error(where + ": the output path is empty");
    refuse_input_output(path, where, inputs);
    struct stat st {};
    const bool exists = stat(path.c_str(), &st) == 0;
    if (exists && S_ISDIR(st.st_mode))
        throw usage_error(where + ": '" + path + "' is a folder; the output must be a file");
    refuse_special(path, where);
    const std::string dir = folder_of(link_target(path));
    if (access(dir.c_str(), W_OK) != 0 || (exists && access(path.c_str(), W_OK) != 0))
        throw usage_error(where + ": cannot write '" + path + "' (" + errno_text() + ")");
    if (exists && !replace) throw usage_error(where + ": '" + path + "' exists; pass --overwrite to replace it");
    return exists;
}

OutputFiles::~OutputFiles() {
    if (committed_) return;
    for (const Staged& s : staged_) unlink(s.temp.c_str());
}

void OutputFiles::add(const std::string& path, const std::string& bytes) {
    // A writer turns a file-size limit (ulimit -f) into an I/O error (EFBIG) instead of a kill.
    std::signal(SIGXFSZ, SIG_IGN);
    refuse_special(path, where_);
    Staged s{link_target(path), ""};
    std::string name = s.path + ".creating-XXXXXX";
    const int fd = mkstemp(name.data());  // O_EXCL, mode 0600: a new file of ours, never a link
    if (fd < 0)
        throw data_error(where_ + ": cannot create a temporary file beside '" + path + "' (" + errno_text() + ")");
    s.temp = name;
    staged_.push_back(s);
    std::string why = fchmod(fd, 0644) == 0 ? write_all(fd, bytes) : errno_text();
    if (close(fd) != 0 && why.empty()) why = errno_text();
    if (!why.empty())
        throw data_error(where_ + ": writing '" + path + "' failed (" + why + "); the previous file is unchanged");
}

void OutputFiles::commit() {
    for (const Staged& s : staged_)
        if (std::rename(s.temp.c_str(), s.path.c_str()) != 0)
            throw data_error(where_ + ": renaming the new '" + s.temp + "' over '" + s.path + "' failed (" +
                             errno_text() + ")");
    committed_ = true;
    for (const Staged& s : staged_) sync_folder(folder_of(s.path));
}

void write_output_file(const std::string& path, const std::string& where, const std::string& bytes) {
    OutputFiles out(where);
    out.add(path, bytes);
    out.commit();
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

PendingOutput::PendingOutput(std::string path) : path_(std::move(path)) {
    refuse_special(path_, "output");
    path_ = link_target(path_);  // replacing a symbolic link replaces the file it points to
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
    sync_folder(folder_of(path_));
}

}  // namespace ef

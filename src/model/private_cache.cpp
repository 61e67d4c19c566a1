// SPDX-License-Identifier: MIT
// The formula cache's file rules (private_cache.hpp, docs/security.md).
#include "src/model/private_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

namespace ef {
namespace {

namespace fs = std::filesystem;

std::string mode_text(mode_t m) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
    return buf;
}

}  // namespace

std::string prepare_private_dir(const std::string& dir) {
    std::error_code ec;
    const fs::path parent = fs::path(dir).parent_path();
    if (!parent.empty()) fs::create_directories(parent, ec);
    if (ec) return "cannot create the formula cache " + dir + ": " + ec.message();
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
        return "cannot create the formula cache " + dir + ": " + std::strerror(errno);
    struct stat st {};
    if (lstat(dir.c_str(), &st) != 0) return "cannot create the formula cache " + dir + ": " + std::strerror(errno);
    if (S_ISLNK(st.st_mode)) return "the formula cache " + dir + " is a symbolic link; it must be a folder of yours";
    if (!S_ISDIR(st.st_mode)) return "the formula cache " + dir + " is not a folder";
    if (st.st_uid != geteuid())
        return "the formula cache " + dir + " belongs to user id " + std::to_string(st.st_uid) + ", not to you";
    if ((st.st_mode & 022) != 0)
        return "the formula cache " + dir + " is writable by others (mode " + mode_text(st.st_mode) +
               "); make it private (chmod 700) or remove it";
    if ((st.st_mode & 077) != 0 && chmod(dir.c_str(), 0700) != 0)
        return "cannot make the formula cache " + dir + " private: " + std::strerror(errno);
    return "";
}

bool write_private_file(const std::string& path, const std::string& text) {
    // A name of our own making in the folder: O_EXCL refuses one that exists, link or not.
    static std::atomic<std::uint64_t> serial{0};
    const std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(serial++);
    const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    bool ok = true;
    for (std::size_t done = 0; ok && done < text.size();) {
        const ssize_t n = write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        ok = n > 0;
        done += ok ? static_cast<std::size_t>(n) : 0;
    }
    ok = close(fd) == 0 && ok;
    // rename() replaces whatever has the name (a link included) without following it.
    ok = ok && rename(tmp.c_str(), path.c_str()) == 0;
    if (!ok) unlink(tmp.c_str());
    return ok;
}

int open_private_file(const std::string& path) {
    const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

bool read_fd(int fd, std::string& text) {
    text.clear();
    if (lseek(fd, 0, SEEK_SET) != 0) return false;
    std::vector<char> buf(1 << 16);
    for (;;) {
        const ssize_t n = read(fd, buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return false;
        if (n == 0) return true;
        text.append(buf.data(), static_cast<std::size_t>(n));
    }
}

bool read_private_file(const std::string& path, std::string& text) {
    const int fd = open_private_file(path);
    if (fd < 0) return false;
    const bool ok = read_fd(fd, text);
    close(fd);
    return ok;
}

ScratchDir::ScratchDir(const std::string& parent) {
    std::string pattern = parent + "/.tmp-XXXXXX";
    std::vector<char> name(pattern.begin(), pattern.end());
    name.push_back('\0');
    if (mkdtemp(name.data()) != nullptr) path_ = name.data();
}

ScratchDir::~ScratchDir() {
    if (path_.empty()) return;
    std::error_code ec;
    fs::remove_all(path_, ec);
}

}  // namespace ef

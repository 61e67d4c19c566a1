// SPDX-License-Identifier: MIT
#pragma once

#include <string>

namespace ef {

/**
 * The file rules of the formula cache (docs/security.md): the folder is this user's alone, and
 * nothing in it is trusted by its name. A folder that another user could write, or a name that
 * is a symbolic link, is never used; files are written under a fresh name (O_CREAT | O_EXCL |
 * O_NOFOLLOW) and renamed into place, so a link planted under an entry's name is replaced, not
 * followed; a file is read only when it is a regular file of this user, opened without
 * following links. Paths are plain strings, for the compiler child and dlopen.
 */

/// Creates `dir` (mode 0700) when missing and checks it: a real folder (not a link), owned by
/// this user, writable by no one else (a private one of ours readable by others is tightened to
/// 0700). Empty when usable, else why not, naming the folder.
std::string prepare_private_dir(const std::string& dir);

/// Writes `text` to `path` under a fresh temporary name in the same folder and renames it into
/// place; false (and no temporary file left) on any failure.
bool write_private_file(const std::string& path, const std::string& text);

/// Opens `path` for reading without following a link: a regular file owned by this user and not
/// writable by others; -1 otherwise. The descriptor is close-on-exec.
int open_private_file(const std::string& path);

/// The whole content of `path` (open_private_file's rules); false when it cannot be read.
bool read_private_file(const std::string& path, std::string& text);

/// The whole content of the open file `fd` from its start; false on a read error.
bool read_fd(int fd, std::string& text);

/**
 * A fresh folder (mkdtemp, 0700) inside a private folder, for a compiler's output: removed with
 * everything in it when this goes out of scope, so a failed or killed compile leaves nothing.
 */
class ScratchDir {
   public:
    explicit ScratchDir(const std::string& parent);
    ~ScratchDir();
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;
    bool ok() const { return !path_.empty(); }
    std::string file(const std::string& name) const { return path_ + "/" + name; }

   private:
    std::string path_;
};

}  // namespace ef

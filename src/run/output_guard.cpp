// SPDX-License-Identifier: MIT
#include "src/run/output_guard.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <ensemblefit/core/error.hpp>

namespace ef {

bool file_exists(const std::string& path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0;
}

namespace {

OutputAction decide(const std::string& path, const std::string& where, const RunArgs& args, bool resumable) {
    const bool exists = file_exists(path);
    if (exists && !args.resume && !args.overwrite)
        throw usage_error(where + ": '" + path + "' exists; pass " + (resumable ? "--resume to finish it or " : "") +
                          "--overwrite to replace it");
    if (exists && args.resume) return OutputAction::resume;
    // Writability is probed without touching an existing file: a replaced file is only
    // truncated once everything else has been validated.
    const auto slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
    if (access(dir.c_str(), W_OK) != 0 || (exists && access(path.c_str(), W_OK) != 0))
        throw usage_error(where + ": cannot write '" + path + "' (" + std::strerror(errno) + ")");
    return exists ? OutputAction::replace : OutputAction::create;
}

}  // namespace

OutputAction check_output(const MpiContext& ctx, const std::string& path, const std::string& where,
                          const RunArgs& args, bool resumable) {
    int action = 0;
    collective(ctx, [&] {
        if (ctx.is_root()) action = static_cast<int>(decide(path, where, args, resumable));
    });
    EF_MPI_CHECK(MPI_Bcast(&action, 1, MPI_INT, 0, ctx.world()));
    return static_cast<OutputAction>(action);
}

}  // namespace ef

// SPDX-License-Identifier: MIT
#include "src/run/output_guard.hpp"

#include <filesystem>

#include <ensemblefit/core/error.hpp>

#include "src/io/h5.hpp"

namespace ef {

namespace {

/// Whether `a` and `b` name one file: the same inode where both exist, else the same place.
bool same_place(const std::string& a, const std::string& b) {
    std::error_code ec1, ec2;
    if (std::filesystem::exists(a, ec1) && std::filesystem::exists(b, ec2))
        return std::filesystem::equivalent(a, b, ec1) && !ec1;
    const auto ca = std::filesystem::weakly_canonical(std::filesystem::absolute(a), ec1);
    const auto cb = std::filesystem::weakly_canonical(std::filesystem::absolute(b), ec2);
    return !ec1 && !ec2 && ca == cb;
}

/// The files written beside the output: same rules, and none of them the output or another.
void check_companions(const std::string& path, const std::string& where, const RunArgs& args,
                      const std::vector<std::string>& inputs, const std::vector<CompanionOutput>& companions) {
    std::vector<CompanionOutput> all = companions;
    if (!args.trace.empty()) all.push_back({args.trace, "--trace"});
    std::vector<std::string> taken{path};
    for (const CompanionOutput& c : all) {
        for (const std::string& t : taken)
            if (same_place(c.path, t))
                throw usage_error(c.where + ": '" + c.path + "' is also the output '" + t + "' (" + where +
                                  "); choose another file");
        check_output_file(c.path, c.where, args.overwrite || args.resume, inputs);
        taken.push_back(c.path);
    }
}

}  // namespace

OutputAction decide_output(const std::string& path, const std::string& where, const RunArgs& args, bool resumable,
                           const std::vector<std::string>& inputs, const std::vector<CompanionOutput>& companions) {
    const bool exists = check_output_file(path, where, true, inputs);  // input, folder, writable
    lock_output(path, where);
    if (exists && !args.resume && !args.overwrite)
        throw usage_error(where + ": '" + path + "' exists; pass " + (resumable ? "--resume to finish it or " : "") +
                          "--overwrite to replace it");
    if (exists && args.resume && resumable && !h5::is_hdf5(path))
        throw data_error(where + ": '" + path + "' is not an HDF5 file, so --resume cannot finish it " +
                         "(pass --overwrite to replace it)");
    check_companions(path, where, args, inputs, companions);
    if (exists && args.resume) return OutputAction::resume;
    return exists ? OutputAction::replace : OutputAction::create;
}

OutputAction check_output(const MpiContext& ctx, const std::string& path, const std::string& where,
                          const RunArgs& args, bool resumable, const std::vector<std::string>& inputs,
                          const std::vector<CompanionOutput>& companions) {
    int action = 0;
    collective(ctx, [&] {
        if (ctx.is_root())
            action = static_cast<int>(decide_output(path, where, args, resumable, inputs, companions));
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

}  // namespace ef

// SPDX-License-Identifier: MIT
#include "src/model/plugin_loader.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <ensemblefit/core/error.hpp>

#include "src/core/sha256.hpp"
#include "src/model/plugin_guard.hpp"
#include "src/model/private_cache.hpp"

namespace ef {
namespace {

/// dlerror()'s text, or `fallback` when it has none.
std::string last_dl_error(const char* fallback) {
    const char* e = dlerror();
    return e != nullptr ? e : fallback;
}

/// The table's own consistency: a name, entry points, one name per parameter.
void check_table(const EfModelPlugin& t, const std::string& at) {
    if (t.name == nullptr || t.cpu_qr == nullptr || t.cpu_normal_f64 == nullptr || t.cpu_normal_f32 == nullptr ||
        t.values == nullptr)
        throw usage_error(at + ": its plugin table lacks a name or an entry point (build it with ensemblefit_add_model)");
    if (t.num_params < 1 || t.param_names == nullptr)
        throw usage_error(at + ": model '" + t.name + "' declares " + std::to_string(t.num_params) +
                          " parameters in num_params() but a different number of param_names");
}

/// The SHA-256 of the library's bytes, read through one descriptor, and that descriptor's
/// file identity; the caller checks that `path` still names that file when it opens it.
std::string hash_library(const std::string& path, const std::string& at, struct stat& held) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw usage_error(at + " cannot be read: " + std::strerror(errno));
    std::string bytes;
    const bool ok = fstat(fd, &held) == 0 && read_fd(fd, bytes);
    close(fd);
    if (!ok) throw usage_error(at + " cannot be read");
    return sha256_hex(bytes);
}

}  // namespace

std::shared_ptr<const LoadedPlugin> load_model_plugin(const std::string& path, const std::string& where) {
    const std::string at = where + ": model plugin '" + path + "'";
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
        throw usage_error(at + ": no such file");
    // A name without a slash would be searched on the library path, not in the current folder.
    const std::string open_path = path.find('/') == std::string::npos ? "./" + path : path;
    struct stat held {}, named {};
    const std::string sha = hash_library(open_path, at, held);
    if (stat(open_path.c_str(), &named) != 0 || named.st_dev != held.st_dev || named.st_ino != held.st_ino)
        throw usage_error(at + " was replaced while it was being read; try again");
    guard_plugin_crashes(path + "' (SHA-256 " + sha.substr(0, 12) + "...");  // its constructors run in dlopen
    dlerror();
    void* handle = dlopen(open_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) throw usage_error(at + " cannot be loaded: " + last_dl_error("dlopen failed"));
    dlerror();
    void* sym = dlsym(handle, EF_MODEL_PLUGIN_SYMBOL);
    if (sym == nullptr) {
        dlclose(handle);  // nothing of it ran
        throw usage_error(at + " has no entry point " EF_MODEL_PLUGIN_SYMBOL
                          " (is it a model plugin? build it with ensemblefit_add_model)");
    }
    // POSIX: a data pointer from dlsym converts to the function pointer it is.
    const auto entry = reinterpret_cast<EfModelPluginEntry>(sym);
    const EfModelPlugin* table = entry();
    if (table == nullptr) throw usage_error(at + ": its entry point returned no table");
    // A version-1 table is a version-2 table without GPU code (model_plugin.hpp).
    if (table->abi_version > EF_MODEL_PLUGIN_ABI_VERSION || table->abi_version < EF_MODEL_PLUGIN_ABI_OLDEST)
        throw usage_error(at + " was built for plugin ABI version " + std::to_string(table->abi_version) +
                          ", this ensemblefit loads version " + std::to_string(EF_MODEL_PLUGIN_ABI_VERSION) +
                          ": rebuild it against this installation");
    if (table->abi_version == 1 && table->gpu != nullptr)
        throw usage_error(at + ": a version-1 plugin table with GPU code: rebuild it against this installation");
    if (table->gpu != nullptr && table->gpu->launch == nullptr)
        throw usage_error(at + ": its GPU table has no launch entry (build it with ensemblefit_add_model)");
    check_table(*table, at);
    guard_plugin_crashes(std::string(table->name) + "' (" + path);  // its model runs from now on
    auto lp = std::make_shared<LoadedPlugin>();
    lp->path = path;
    lp->real_path = std::filesystem::canonical(open_path, ec).string();
    if (ec) lp->real_path = std::filesystem::absolute(open_path).lexically_normal().string();
    lp->sha256 = sha;
    lp->table = table;
    for (int q = 0; q < table->num_params; ++q) lp->param_names.emplace_back(table->param_names[q]);
    return lp;
}

}  // namespace ef

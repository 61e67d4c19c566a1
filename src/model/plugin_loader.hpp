// SPDX-License-Identifier: MIT
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <ensemblefit/model/model_plugin.hpp>

namespace ef {

/**
 * A model plugin library opened with dlopen and checked: its table's ABI version equals this
 * program's, its entry points and parameter names are present. The library stays loaded for the
 * rest of the process (its code may still run on OpenMP threads), so this never dlcloses.
 */
struct LoadedPlugin {
    std::string path;  ///< as opened (relative paths resolved against the config file's folder)
    std::string real_path;  ///< the library's absolute path, links resolved (stored in result files)
    std::string sha256;     ///< SHA-256 of the library file's bytes, as they were loaded
    const EfModelPlugin* table = nullptr;
    std::vector<std::string> param_names;
};

/**
 * Opens the plugin at `path`; `where` locates the key that named it ("FILE:LINE: model.plugin").
 * The file is hashed (SHA-256) before dlopen runs any of its code, and the name must still hold
 * the file that was hashed (the hash is part of a run's identity: --resume and merge compare it).
 * Throws usage_error (exit 2) with one line for a missing file, a library that cannot be loaded,
 * one without the ensemblefit_model_plugin symbol, a different ABI version or a malformed table.
 */
std::shared_ptr<const LoadedPlugin> load_model_plugin(const std::string& path, const std::string& where);

}  // namespace ef

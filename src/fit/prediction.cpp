// SPDX-License-Identifier: MIT
#include "src/fit/prediction.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <variant>
#include <vector>

#include <unistd.h>

#include <ensemblefit/config/fit_config.hpp>
#include <ensemblefit/core/error.hpp>

#include "src/model/compiled_model.hpp"

namespace ef {
namespace {

/// A temporary file holding `text`, removed when this goes out of scope: load_fit_config reads
/// configs from files.
class TempConfig {
   public:
    explicit TempConfig(const std::string& text) {
        const std::string pattern = (std::filesystem::temp_directory_path() / "ef-predict-XXXXXX").string();
        std::vector<char> name(pattern.begin(), pattern.end());
        name.push_back('\0');
        const int fd = mkstemp(name.data());
        if (fd < 0) throw runtime_error("predict: cannot create a temporary file in " + pattern);
        close(fd);
        path_ = name.data();
        std::ofstream(path_) << text;
    }
    ~TempConfig() { std::remove(path_.c_str()); }
    TempConfig(const TempConfig&) = delete;
    TempConfig& operator=(const TempConfig&) = delete;
    const std::string& path() const { return path_; }

   private:
    std::string path_;
};

}  // namespace

DataTable read_prediction_points(const std::string& path, const std::vector<std::string>& names) {
    const std::vector<std::vector<double>> cols = read_columns(path, names);
    DataTable d;
    d.nx = static_cast<int>(names.size());
    d.x_names = names;
    d.n = static_cast<int>(cols.front().size());
    if (d.n == 0) throw data_error(path + ": no points (no data rows)");
    d.x.resize(static_cast<size_t>(d.n) * static_cast<size_t>(d.nx));
    for (size_t c = 0; c < names.size(); ++c) {
        for (size_t i = 0; i < static_cast<size_t>(d.n); ++i) {
            const double v = cols[c][i];
            if (!std::isfinite(v))
                throw data_error(path + ": point " + std::to_string(i + 1) + ", column '" + names[c] +
                                 "': " + (std::isnan(v) ? "NaN" : "infinite value"));
            d.x[i * names.size() + c] = v;
        }
    }
    d.y.assign(static_cast<size_t>(d.n), 0.0);
    d.sigma.assign(static_cast<size_t>(d.n), 1.0);
    d.checksum = checksum_of(d);
    return d;
}

namespace {

/// The stored config read back with the points as its data and `more` overrides.
FitConfig stored_config(const std::string& source, const TempConfig& ini, const std::string& points_path,
                        const std::vector<std::string>& more) {
    // The stored config names no data or output file: the points stand for the data.
    std::vector<std::string> overrides = {"--data.file=" + points_path, "--output.file=" + source};
    overrides.insert(overrides.end(), more.begin(), more.end());
    try {
        return load_fit_config(ini.path(), overrides);
    } catch (const Error& e) {
        throw usage_error(source + ": its stored config (attribute canonical_config) cannot be read back: " +
                          e.what());
    }
}

/// The library a stored plugin config may load: the one the user names, or with --trust-plugin
/// the absolute path the file records; otherwise a usage error saying which and how to allow it.
std::string allowed_plugin(const std::string& source, const FitConfig& cfg, const RunIdentity& id,
                           const PredictModelChoice& choice) {
    if (!choice.plugin.empty()) return choice.plugin;
    const std::string named = cfg.model_options.count("plugin") ? cfg.model_options.at("plugin") : std::string();
    const std::string what = "'" + named + "'" +
                             (id.plugin_sha256.empty() ? std::string()
                                                       : " (" + id.plugin_name + ", SHA-256 " + id.plugin_sha256 + ")");
    if (choice.trust && !id.plugin_path.empty()) return id.plugin_path;
    if (choice.trust)
        throw usage_error(source + ": --trust-plugin: the file records no path for its model plugin " + what +
                          " (written before plugins were part of a run's identity); name it with --model.plugin PATH");
    throw usage_error(source + ": the fit's model is the plugin " + what +
                      "; a result file never loads code by itself: name the library with --model.plugin PATH" +
                      (id.plugin_path.empty() ? std::string() : ", or pass --trust-plugin to load " + id.plugin_path));
}

}  // namespace

FitProblem prediction_problem(const std::string& source, const RunIdentity& id, const std::string& points_path,
                              const PredictModelChoice& choice) {
    const TempConfig ini(id.canonical_config);
    const std::string compile = "--model.compile=" + (choice.compile.empty() ? std::string("interpret") : choice.compile);
    FitConfig cfg = stored_config(source, ini, points_path, {compile});
    if (cfg.model_name != "plugin" && !choice.plugin.empty())
        throw usage_error(source + ": --model.plugin: the fit's model is '" + cfg.model_name + "', not a plugin");
    if (cfg.model_name == "plugin")  // the library the user allows, never the stored (relative) name
        cfg = stored_config(source, ini, points_path, {compile, "--model.plugin=" + allowed_plugin(source, cfg, id, choice)});
    DataTable points = read_prediction_points(points_path, cfg.x_columns);
    FitProblem pb = make_fit_problem(std::move(cfg), std::move(points));
    RunIdentity here;
    here.plugin_name = pb.model->plugin.name;
    here.plugin_sha256 = pb.model->plugin.sha256;
    here.plugin_abi = pb.model->plugin.abi;
    if (!id.plugin_sha256.empty())
        if (const std::string d = plugin_difference(here, "here (" + pb.model->plugin.path + ")", id, "in the file");
            !d.empty())
            throw usage_error(source + ": " + d + "; predict needs the library the fit ran");
    return pb;
}

FitProblem prediction_problem(const std::string& source, const std::string& canonical_config,
                              const std::string& points_path) {
    RunIdentity id;
    id.canonical_config = canonical_config;
    return prediction_problem(source, id, points_path, PredictModelChoice{});
}

void evaluate_model(const FitProblem& pb, const double* params, std::size_t count, int threads, double* out) {
    const int n = pb.data.n;
    const int nx = pb.data.nx;
    const size_t P = static_cast<size_t>(pb.num_params());
    const double* x = pb.data.x.data();
    std::visit(
        [&](const auto& m) {
            const size_t ws_size = static_cast<size_t>(std::max(1, m.workspace_size()));
#pragma omp parallel num_threads(std::max(1, threads))
            {
                std::vector<double> ws(ws_size);
#pragma omp for schedule(dynamic, 1)
                for (long r = 0; r < static_cast<long>(count); ++r) {
                    const double* p = params + static_cast<size_t>(r) * P;
                    m.prepare(p, ws.data());
                    double* row = out + static_cast<size_t>(r) * static_cast<size_t>(n);
                    for (int i = 0; i < n; ++i) row[i] = m.value(p, ws.data(), x + static_cast<long>(i) * nx, i);
                }
            }
        },
        pb.model->view);
}

}  // namespace ef

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

FitProblem prediction_problem(const std::string& source, const std::string& canonical_config,
                              const std::string& points_path) {
    const TempConfig ini(canonical_config);
    FitConfig cfg;
    try {
        // The stored config names no data or output file: the points stand for the data.
        cfg = load_fit_config(ini.path(), {"--data.file=" + points_path, "--output.file=" + source});
    } catch (const Error& e) {
        throw usage_error(source + ": its stored config (attribute canonical_config) cannot be read back: " +
                          e.what());
    }
    DataTable points = read_prediction_points(points_path, cfg.x_columns);
    return make_fit_problem(std::move(cfg), std::move(points));
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

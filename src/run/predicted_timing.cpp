// SPDX-License-Identifier: MIT
#include "src/run/predicted_timing.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include <ensemblefit/core/error.hpp>

#include "src/core/text.hpp"
#include "src/io/output_file.hpp"

namespace ef {

namespace {

constexpr const char* kHeader = "placement\tranks\tcpu_ranks\tthreads\tgpus\tranks_per_gpu\twall_s\truntime_s\tefficiency\trecommended";

std::vector<std::string> split_tabs(const std::string& line) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, '\t')) cells.push_back(cell);
    return cells;
}

/// A row's cells as numbers; false when one is not a number.
bool parse_row(const std::vector<std::string>& c, PredictedRow& r) {
    if (c.size() != 10) return false;
    double v[9];
    for (size_t k = 1; k < 10; ++k) {
        char* end = nullptr;
        v[k - 1] = std::strtod(c[k].c_str(), &end);
        if (c[k].empty() || *end != '\0' || !(v[k - 1] >= 0) || v[k - 1] > 1e12) return false;
    }
    r.placement = advise::Placement{static_cast<int>(v[1]), static_cast<int>(v[2]), static_cast<int>(v[3]),
                                    static_cast<int>(v[4])};
    r.wall = v[5];
    r.runtime = v[6];
    r.efficiency = v[7];
    r.recommended = v[8] != 0;
    return r.placement.ranks() == static_cast<int>(v[0]) && r.placement.ranks() > 0;
}

}  // namespace

void write_prediction_file(const std::string& path, const std::string& comment,
                           const std::vector<advise::Prediction>& rows, size_t recommended) {
    std::string text;
    std::stringstream lines(comment);
    std::string line;
    while (std::getline(lines, line)) text += "# " + line + "\n";
    text += std::string(kHeader) + "\n";
    for (size_t i = 0; i < rows.size(); ++i) {
        const advise::Placement& p = rows[i].placement;
        char row[512];
        std::snprintf(row, sizeof row, "%s\t%d\t%d\t%d\t%d\t%d\t%.6g\t%.6g\t%.4f\t%d\n", p.label().c_str(), p.ranks(),
                      p.cpu_ranks, p.threads, p.gpus, p.ranks_per_gpu, rows[i].wall, rows[i].runtime, rows[i].efficiency,
                      i == recommended ? 1 : 0);
        text += row;
    }
    write_output_file(path, "advise: -o", text);  // checked by cmd_advise before the calibration
}

std::vector<PredictedRow> read_prediction_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw usage_error("--predicted " + path + ": no such file (write one with ensemblefit advise -o)");
    std::vector<PredictedRow> rows;
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
        if (line.empty() || line[0] == '#' || line.rfind("placement\t", 0) == 0) continue;  // comments, header
        PredictedRow r;
        if (!parse_row(split_tabs(line), r))
            throw data_error(path + ":" + std::to_string(n) + ": not a prediction row (label, ranks, cpu_ranks, "
                             "threads, gpus, ranks_per_gpu, wall_s, runtime_s, efficiency, recommended; tab-separated): '" +
                             excerpt(line) + "'");
        rows.push_back(r);
    }
    if (rows.empty()) throw data_error(path + ": no prediction rows (written by ensemblefit advise -o?)");
    return rows;
}

const PredictedRow* match_prediction(const std::vector<PredictedRow>& rows, int cpu_ranks, int gpu_ranks,
                                     int threads) {
    for (const PredictedRow& r : rows) {
        const advise::Placement& p = r.placement;
        if (p.cpu_ranks == cpu_ranks && p.gpu_ranks() == gpu_ranks && (cpu_ranks == 0 || p.threads == threads))
            return &r;
    }
    return nullptr;
}

advise::Placement placement_of(const std::vector<std::string>& rows) {
    advise::Placement p;
    std::set<std::string> gpus;  // host and device of each GPU rank
    int gpu_ranks = 0;
    for (const std::string& row : rows) {
        const std::vector<std::string> c = split_tabs(row);
        if (c.size() < 4) continue;
        if (c[2].rfind("gpu", 0) == 0) {
            ++gpu_ranks;
            gpus.insert(c[1] + "/" + c[2].substr(0, c[2].find(':')));
        } else {
            if (p.cpu_ranks++ == 0) p.threads = std::max(1, std::atoi(c[3].c_str()));
        }
    }
    p.gpus = static_cast<int>(gpus.size());
    p.ranks_per_gpu = p.gpus > 0 ? gpu_ranks / p.gpus : 0;
    return p;
}

void store_prediction(h5::File& f, const std::vector<std::string>& groups, const std::string& path,
                      const std::vector<std::string>& placement) {
    const std::vector<PredictedRow> rows = read_prediction_file(path);
    const advise::Placement me = placement_of(placement);
    const PredictedRow* row = match_prediction(rows, me.cpu_ranks, me.gpu_ranks(), me.threads);
    const bool matched = row != nullptr;
    if (!matched) {
        for (const PredictedRow& r : rows)
            if (r.recommended || !row) row = &r;
        std::fprintf(stderr, "ensemblefit: warning: --predicted %s: no row for this run's placement (%s); stored "
                     "the recommended one (%s) with predicted_placement_matches = 0\n",
                     path.c_str(), me.label().c_str(), row->label().c_str());
    }
    for (const std::string& g : groups) {
        f.set_attr(g, "predicted_wall_seconds", row->wall);
        f.set_attr(g, "predicted_runtime_seconds", row->runtime);
        f.set_attr(g, "predicted_parallel_efficiency", row->efficiency);
        f.set_attr(g, "predicted_placement", row->label());
        f.set_attr(g, "prediction_file", path);
        f.set_attr(g, "predicted_placement_matches", static_cast<std::int64_t>(matched ? 1 : 0));
    }
}

}  // namespace ef

// SPDX-License-Identifier: MIT
#include "src/io/correlated_data.hpp"

#include <cmath>
#include <cstdlib>
#include <string>

#include <ensemblefit/core/error.hpp>

#include "src/core/text.hpp"
#include "src/io/commondata.hpp"
#include "src/io/h5.hpp"
#include "src/io/h5_numeric.hpp"

namespace ef {
namespace {

/// FNV-1a continued over more doubles (data_table.cpp's checksum_of, extended).
void mix_into(std::uint64_t& h, const std::vector<double>& v) {
    const auto* b = reinterpret_cast<const unsigned char*>(v.data());
    for (size_t i = 0; i < v.size() * sizeof(double); ++i) {
        h ^= b[i];
        h *= 1099511628211ULL;
    }
}

void check_finite(const std::string& file, const std::string& what, const std::vector<double>& v, int cols) {
    for (size_t i = 0; i < v.size(); ++i)
        if (!std::isfinite(v[i]))
            throw data_error(file + ": row " + std::to_string(i / static_cast<size_t>(cols) + 1) + ": " + what +
                             (cols > 1 ? " (column " + std::to_string(i % static_cast<size_t>(cols) + 1) + ")" : "") +
                             ": " + (std::isnan(v[i]) ? "NaN" : "infinite value"));
}

/// The n x n covariance of FILE.h5:/path, finite and symmetric (to 1e-12 of its largest entry).
std::vector<double> read_covariance(const FitConfig& cfg, int n) {
    const auto colon = cfg.covariance.rfind(':');
    const std::string file = cfg.covariance.substr(0, colon);
    const std::string path = cfg.covariance.substr(colon + 1);
    const std::string at = cfg.where("data.covariance") + ": " + file + ":" + path;
    if (!h5::is_hdf5(file)) throw data_error(at + ": not an HDF5 file (or not readable)");
    const h5::File f = h5::File::open_read(file);
    if (!f.exists(path)) throw data_error(at + ": no such dataset");
    const std::string why = h5::not_numbers(f, path);
    if (!why.empty()) throw data_error(at + ": " + why);
    const auto shape = f.shape(path);
    if (shape.size() != 2 || shape[0] != static_cast<std::uint64_t>(n) || shape[1] != static_cast<std::uint64_t>(n))
        throw data_error(at + ": must be " + std::to_string(n) + " x " + std::to_string(n) + " (the data's rows)");
    std::vector<double> c = f.read_double(path);
    check_finite(file + ":" + path, "covariance", c, n);
    double big = 0.0;
    for (double x : c) big = std::fmax(big, std::fabs(x));
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < i; ++j) {
            const double a = c[static_cast<size_t>(i) * n + j], b = c[static_cast<size_t>(j) * n + i];
            if (std::fabs(a - b) > 1e-12 * big)
                throw data_error(at + ": not symmetric: entry (" + std::to_string(i + 1) + ", " + std::to_string(j + 1) +
                                 ") differs from (" + std::to_string(j + 1) + ", " + std::to_string(i + 1) + ")");
        }
    return c;
}

/// Rows of each [normalisation.NAME] dataset; a NAME that is not a number is exit 2, a dataset
/// with no row exit 3.
std::vector<int> normalisation_rows(const FitConfig& cfg, const std::vector<double>& dataset) {
    std::vector<int> rows;
    for (const auto& [name, sigma] : cfg.normalisations) {
        const std::string key = "normalisation." + name + ".sigma";
        char* end = nullptr;
        const double id = std::strtod(name.c_str(), &end);
        if (end != name.c_str() + name.size() || !std::isfinite(id))
            throw usage_error(cfg.where(key) + ": [normalisation." + excerpt(name) + "]: NAME must be a value of the "
                              "dataset column '" + cfg.dataset_column + "' (a number)");
        int count = 0;
        for (double v : dataset) count += v == id ? 1 : 0;
        if (count == 0)
            throw data_error(cfg.where(key) + ": [normalisation." + excerpt(name) + "]: no row of " + cfg.data_file +
                             " has dataset " + name + " in column '" + cfg.dataset_column + "'");
        rows.push_back(count);
    }
    return rows;
}

}  // namespace

CorrelatedInputs load_correlated(const FitConfig& cfg, DataTable& data) {
    CorrelatedInputs in;
    in.n = data.n;
    if (!cfg.correlated()) return in;
    in.S = static_cast<int>(cfg.systematics.size());
    std::vector<std::string> names = cfg.systematics;
    if (!cfg.dataset_column.empty()) names.push_back(cfg.dataset_column);
    const auto cols = names.empty() ? std::vector<std::vector<double>>{} : read_columns(cfg.data_file, names);
    for (size_t c = 0; c < cols.size(); ++c) {
        if (cols[c].size() != static_cast<size_t>(data.n))
            throw data_error(cfg.data_file + ": column '" + names[c] + "' has " + std::to_string(cols[c].size()) +
                             " rows, the data have " + std::to_string(data.n));
        const std::string what = c < static_cast<size_t>(in.S) ? "systematic column '" + names[c] + "'"
                                                                : "dataset column '" + names[c] + "'";
        check_finite(cfg.data_file, what, cols[c], 1);
    }
    in.syst.resize(static_cast<size_t>(data.n) * static_cast<size_t>(in.S));
    for (int k = 0; k < in.S; ++k)
        for (int i = 0; i < data.n; ++i)
            in.syst[static_cast<size_t>(i) * static_cast<size_t>(in.S) + static_cast<size_t>(k)] =
                cols[static_cast<size_t>(k)][static_cast<size_t>(i)];
    if (!cfg.dataset_column.empty()) in.dataset = cols.back();
    in.norm_rows = normalisation_rows(cfg, in.dataset);
    if (!cfg.covariance.empty()) in.covariance = read_covariance(cfg, data.n);
    mix_into(data.checksum, in.syst);
    mix_into(data.checksum, in.dataset);
    mix_into(data.checksum, in.covariance);
    return in;
}

void load_fit_data(FitConfig& cfg, DataTable& data, CorrelatedInputs& in) {
    if (cfg.commondata.empty()) {
        data = load_data(cfg);
        in = load_correlated(cfg, data);
        return;
    }
    load_commondata(cfg, data, in);
    in.norm_rows = normalisation_rows(cfg, in.dataset);
    mix_into(data.checksum, in.syst);
    mix_into(data.checksum, in.dataset);
    // The treatments are not in the values: an ADD column and a MULT one of the same numbers differ.
    std::vector<double> mult(cfg.systematic_mult.begin(), cfg.systematic_mult.end());
    mix_into(data.checksum, mult);
}

}  // namespace ef

// SPDX-License-Identifier: MIT
#include <ensemblefit/io/data_table.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <sys/stat.h>

#include <ensemblefit/core/error.hpp>

#include "src/config/capacity.hpp"
#include "src/core/text.hpp"
#include "src/io/commondata.hpp"
#include "src/io/h5.hpp"
#include "src/io/h5_numeric.hpp"

namespace ef {
namespace {

std::vector<std::string> split_csv(const std::string& line) {
    std::vector<std::string> cells;
    std::string cell;
    std::stringstream ss(line);
    while (std::getline(ss, cell, ',')) cells.push_back(trim(cell));
    if (!line.empty() && line.back() == ',') cells.emplace_back();
    return cells;
}

struct ColumnSource {
    std::vector<std::vector<double>> values;
    std::vector<int> lines;  ///< CSV line of each row (empty for HDF5)
};

/// The longest CSV line read; a longer one is refused (a binary or endless file).
constexpr size_t kMaxCsvLine = 16u << 20;

/// The most rows a table holds (DataTable::n is an int).
constexpr std::int64_t kMaxRows = std::numeric_limits<int>::max();

/// Refuses `rows` rows of `bytes_per_row` (what the run keeps per data row) that cannot fit:
/// data_error `at` + "N rows ... need SIZE of memory ...; the largest ... allows is K rows".
void check_rows(const std::string& at, std::int64_t rows, double bytes_per_row) {
    const double need = static_cast<double>(rows) * bytes_per_row;
    if (exceeds_memory(need))
        throw data_error(at + std::to_string(rows) + " rows: " +
                         memory_refusal(need, "the data (" + format_bytes(bytes_per_row) + " per row)",
                                        std::to_string(static_cast<std::int64_t>(std::min<double>(
                                            static_cast<double>(kMaxRows), largest_count(bytes_per_row)))) +
                                            " rows"));
    if (rows > kMaxRows)
        throw data_error(at + std::to_string(rows) + " rows; at most " + std::to_string(kMaxRows) + " are supported");
}

/// A header naming a column twice is ambiguous: refused, naming the column and both places.
void check_unique(const std::string& at, const std::vector<std::string>& header) {
    for (size_t a = 0; a < header.size(); ++a)
        for (size_t b = a + 1; b < header.size(); ++b)
            if (!header[a].empty() && header[a] == header[b])
                throw data_error(at + "column '" + excerpt(header[a]) + "' appears twice in the header (columns " +
                                 std::to_string(a + 1) + " and " + std::to_string(b + 1) + ")");
}

ColumnSource read_csv(const std::string& path, const std::vector<std::string>& names, double bytes_per_row) {
    std::ifstream in(path);
    if (!in) throw data_error(path + ": cannot open data file (" + std::strerror(errno) + ")");
    ColumnSource src;
    src.values.resize(names.size());
    std::vector<int> index(names.size(), -1);
    std::vector<std::string> header;
    std::string raw;
    int line = 0;
    bool too_long = false;
    while (read_line(in, raw, kMaxCsvLine, too_long)) {
        ++line;
        if (too_long)
            throw data_error(path + ":" + std::to_string(line) + ": line longer than " + std::to_string(kMaxCsvLine) +
                             " characters (not a CSV file?)");
        const std::string s = trim(raw);
        if (s.empty() || s[0] == '#') continue;
        const std::vector<std::string> cells = split_csv(s);
        if (header.empty()) {
            header = cells;
            check_unique(path + ":" + std::to_string(line) + ": ", header);
            for (size_t c = 0; c < names.size(); ++c) {
                for (size_t h = 0; h < header.size(); ++h)
                    if (header[h] == names[c]) index[c] = static_cast<int>(h);
                if (index[c] < 0) {
                    std::string all;
                    for (const auto& h : header) all += (all.empty() ? "" : ", ") + h;
                    throw data_error(path + ":" + std::to_string(line) + ": no column '" + excerpt(names[c]) +
                                     "' (columns: " + excerpt(all, 200) + ")");
                }
            }
            continue;
        }
        if (src.lines.size() % 65536 == 0)
            check_rows(path + ":" + std::to_string(line) + ": more than ", static_cast<std::int64_t>(src.lines.size()),
                       bytes_per_row);
        if (cells.size() != header.size())
            throw data_error(path + ":" + std::to_string(line) + ": " + std::to_string(cells.size()) +
                             " cells, the header has " + std::to_string(header.size()));
        for (size_t c = 0; c < names.size(); ++c) {
            const std::string& cell = cells[static_cast<size_t>(index[c])];
            char* end = nullptr;
            errno = 0;
            const double v = std::strtod(cell.c_str(), &end);
            if (cell.empty() || end != cell.c_str() + cell.size())
                throw data_error(path + ":" + std::to_string(line) + ": column '" + names[c] +
                                 "': not a number: '" + excerpt(cell) + "'");
            src.values[c].push_back(v);
        }
        src.lines.push_back(line);
    }
    if (header.empty()) throw data_error(path + ": empty data file (no header row)");
    return src;
}

ColumnSource read_h5(const std::string& path, const std::vector<std::string>& names, double bytes_per_row) {
    const h5::File f = h5::File::open_read(path);
    ColumnSource src;
    for (const auto& name : names) {
        if (!f.exists(name)) {
            std::string all;
            for (const auto& s : f.list("/")) all += (all.empty() ? "" : ", ") + s;
            throw data_error(path + ": no dataset '" + excerpt(name) + "' (datasets: " + excerpt(all, 200) + ")");
        }
        const std::string why = h5::not_numbers(f, name);
        if (!why.empty()) throw data_error(path + ": '" + excerpt(name) + "' " + why);
        const auto shape = f.shape(name);
        if (shape.size() != 1)
            throw data_error(path + ": dataset '" + excerpt(name) + "' must be 1-D, it has " +
                             std::to_string(shape.size()) + " dimensions");
        check_rows(path + ": dataset '" + excerpt(name) + "' declares ",
                   static_cast<std::int64_t>(std::min<std::uint64_t>(shape[0], INT64_MAX)), bytes_per_row);
        try {
            src.values.push_back(f.read_double(name));
        } catch (const Error&) {
            throw data_error(path + ": dataset '" + excerpt(name) + "' cannot be read (a damaged or truncated file?)");
        }
        if (src.values.back().size() != src.values.front().size())
            throw data_error(path + ": dataset '" + name + "' has " +
                             std::to_string(src.values.back().size()) + " rows, '" + names.front() +
                             "' has " + std::to_string(src.values.front().size()));
    }
    return src;
}

}  // namespace

std::vector<std::vector<double>> read_columns(const std::string& path,
                                              const std::vector<std::string>& names) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0)
        throw data_error(path + ": cannot open data file (" + std::strerror(errno) + ")");
    if (S_ISDIR(st.st_mode)) throw data_error(path + ": cannot open data file (it is a folder)");
    const double bytes_per_row = 16.0 * static_cast<double>(names.size());
    return h5::is_hdf5(path) ? read_h5(path, names, bytes_per_row).values
                             : read_csv(path, names, bytes_per_row).values;
}

std::uint64_t checksum_of(const DataTable& d) {
    std::uint64_t h = 1469598103934665603ULL;
    auto mix = [&](const std::vector<double>& v) {
        const auto* b = reinterpret_cast<const unsigned char*>(v.data());
        for (size_t i = 0; i < v.size() * sizeof(double); ++i) {
            h ^= b[i];
            h *= 1099511628211ULL;
        }
    };
    mix(d.x);
    mix(d.y);
    mix(d.sigma);
    return h;
}

DataTable load_data(const FitConfig& cfg) {
    if (!cfg.commondata.empty()) {  // the rows of the commondata sets; their systematics: load_fit_data
        FitConfig c = cfg;
        DataTable d;
        CorrelatedInputs unused;
        load_commondata(c, d, unused);
        return d;
    }
    struct stat st {};
    if (stat(cfg.data_file.c_str(), &st) != 0)
        throw usage_error(cfg.where("data.file") + ": cannot open data file '" + cfg.data_file +
                          "' (" + std::strerror(errno) + ")");
    if (S_ISDIR(st.st_mode))
        throw usage_error(cfg.where("data.file") + ": cannot open data file '" + cfg.data_file + "' (it is a folder)");
    std::vector<std::string> names = cfg.x_columns;
    names.push_back(cfg.y_column);
    if (!cfg.sigma_is_constant) names.push_back(cfg.sigma);
    const bool hdf5 = h5::is_hdf5(cfg.data_file);
    // Per data row a run keeps: the columns read, the table (x, y, sigma) and a replica's
    // resampled y and Jacobian row in each of at least one thread.
    const double bytes_per_row = 8.0 * (2.0 * static_cast<double>(names.size()) + 2.0 +
                                        static_cast<double>(cfg.params.size()) + 2.0);
    const ColumnSource src = hdf5 ? read_h5(cfg.data_file, names, bytes_per_row)
                                  : read_csv(cfg.data_file, names, bytes_per_row);

    DataTable d;
    d.nx = static_cast<int>(cfg.x_columns.size());
    d.x_names = cfg.x_columns;
    d.n = static_cast<int>(src.values.front().size());
    if (d.n == 0) throw data_error(cfg.data_file + ": no data rows");
    const auto free_params = std::count_if(cfg.params.begin(), cfg.params.end(), [](const ParamSpec& p) { return !p.fixed; });
    if (d.n < free_params)
        throw data_error(cfg.data_file + ": " + std::to_string(d.n) + " data row(s) for " + std::to_string(free_params) +
                         " free parameters; a fit needs at least as many rows as free parameters");
    d.x.resize(static_cast<size_t>(d.n) * d.nx);
    d.y = src.values[static_cast<size_t>(d.nx)];
    d.sigma = cfg.sigma_is_constant ? std::vector<double>(static_cast<size_t>(d.n), cfg.sigma_constant)
                                    : src.values[static_cast<size_t>(d.nx) + 1];
    auto where = [&](int i) {
        return hdf5 ? cfg.data_file + ": row " + std::to_string(i + 1)
                    : cfg.data_file + ":" + std::to_string(src.lines[static_cast<size_t>(i)]);
    };
    for (int i = 0; i < d.n; ++i) {
        for (int c = 0; c < d.nx; ++c) {
            const double v = src.values[static_cast<size_t>(c)][static_cast<size_t>(i)];
            if (!std::isfinite(v))
                throw data_error(where(i) + ": column '" + names[static_cast<size_t>(c)] + "': " +
                                 (std::isnan(v) ? "NaN" : "infinite value"));
            d.x[static_cast<size_t>(i) * d.nx + c] = v;
        }
        if (!std::isfinite(d.y[static_cast<size_t>(i)]))
            throw data_error(where(i) + ": column '" + cfg.y_column + "': " +
                             (std::isnan(d.y[static_cast<size_t>(i)]) ? "NaN" : "infinite value"));
        const double s = d.sigma[static_cast<size_t>(i)];
        if (!cfg.sigma_is_constant && (!std::isfinite(s) || !(s > 0.0))) {
            std::ostringstream os;
            os << s;
            throw data_error(where(i) + ": column '" + cfg.sigma +
                             "': uncertainties must be positive and finite, got " + os.str());
        }
    }
    d.checksum = checksum_of(d);
    return d;
}

}  // namespace ef

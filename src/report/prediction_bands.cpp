// SPDX-License-Identifier: MIT
#include "src/report/prediction_bands.hpp"

#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>

#include <ensemblefit/core/error.hpp>
#include <ensemblefit/core/ensemble_summary.hpp>

#include "src/io/h5.hpp"
#include "src/run/output_guard.hpp"

namespace ef {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Empty for a value that does not exist, else 17 significant digits (round trip).
std::string cell(double v) {
    if (!std::isfinite(v)) return "";
    char b[32];
    std::snprintf(b, sizeof b, "%.17g", v);
    return b;
}

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

void write_csv(std::ostream& os, const PredictionOutput& o) {
    const DataTable& pts = *o.points;
    const PredictionBands& b = *o.bands;
    const size_t n = static_cast<size_t>(b.n);
    for (const auto& name : pts.x_names) os << name << ",";
    os << "central,mean,std,q2.5,q16,q50,q84,q97.5";
    if (o.replica_index)
        for (const std::int64_t r : *o.replica_index) os << ",r" << r;
    os << "\n";
    for (size_t i = 0; i < n; ++i) {
        for (size_t c = 0; c < static_cast<size_t>(pts.nx); ++c) os << cell(pts.x[i * static_cast<size_t>(pts.nx) + c]) << ",";
        os << cell(b.central[i]) << "," << cell(b.mean[i]) << "," << cell(b.std[i]);
        for (size_t l = 0; l < 5; ++l) os << "," << cell(b.quantiles[l * n + i]);
        if (o.replica_values)
            for (size_t r = 0; r < o.replica_index->size(); ++r) os << "," << cell((*o.replica_values)[r * n + i]);
        os << "\n";
    }
}

void write_h5(const std::string& path, const PredictionOutput& o) {
    const DataTable& pts = *o.points;
    const PredictionBands& b = *o.bands;
    const size_t n = static_cast<size_t>(b.n);
    h5::File f = h5::File::create(path);
    for (size_t c = 0; c < static_cast<size_t>(pts.nx); ++c) {
        std::vector<double> col(n);
        for (size_t i = 0; i < n; ++i) col[i] = pts.x[i * static_cast<size_t>(pts.nx) + c];
        f.write("/" + pts.x_names[c], col);
    }
    f.write("/prediction/central", b.central);
    f.write("/prediction/mean", b.mean);
    f.write("/prediction/std", b.std);
    f.write("/prediction/quantiles", b.quantiles, n);
    f.set_attr("/prediction/quantiles", "levels_percent",
               std::vector<double>(std::begin(kQuantileLevels), std::end(kQuantileLevels)));
    if (o.replica_index) {
        f.write("/prediction/replica_index", *o.replica_index);
        f.write("/prediction/replicas", *o.replica_values, n);
    }
    f.set_attr("/prediction", "replicas_used", b.replicas);
    f.set_attr("/", "source", o.source);
    f.set_attr("/", "model", o.model);
    f.set_attr("/", "x_columns", pts.x_names);
    f.close();
}

}  // namespace

PredictionBands prediction_bands(const std::vector<double>& central, const std::vector<double>& values, int n) {
    PredictionBands b;
    b.n = n;
    const size_t N = static_cast<size_t>(n);
    b.replicas = N > 0 ? static_cast<std::int64_t>(values.size() / N) : 0;
    b.central = central.size() == N ? central : std::vector<double>(N, kNaN);
    b.mean.assign(N, kNaN);
    b.std.assign(N, kNaN);
    b.quantiles.assign(5 * N, kNaN);
    std::vector<double> col;
    for (size_t i = 0; i < N; ++i) {
        col.clear();
        for (std::int64_t r = 0; r < b.replicas; ++r) {
            const double v = values[static_cast<size_t>(r) * N + i];
            if (std::isfinite(v)) col.push_back(v);
        }
        b.nonfinite += b.replicas - static_cast<std::int64_t>(col.size());
        if (col.empty()) continue;
        const double m = static_cast<double>(col.size());
        double acc = 0.0;
        for (const double v : col) acc += v;
        b.mean[i] = acc / m;
        if (col.size() >= 2) {
            double ss = 0.0;
            for (const double v : col) ss += (v - b.mean[i]) * (v - b.mean[i]);
            b.std[i] = std::sqrt(ss / (m - 1.0));
        }
        const std::array<double, 5> q = quantiles_of(col);
        for (size_t l = 0; l < 5; ++l) b.quantiles[l * N + i] = q[l];
    }
    return b;
}

void write_prediction(const std::string& path, const PredictionOutput& o, const std::string& named) {
    if (path == "-") {
        write_csv(std::cout, o);
        std::cout.flush();
    } else if (ends_with(named.empty() ? path : named, ".csv")) {
        const std::string& shown = named.empty() ? path : named;
        std::ofstream os(path);
        if (!os) throw data_error("cannot write '" + shown + "' (" + std::strerror(errno) + ")");
        write_csv(os, o);
        os.close();  // the last buffer is written here: a full disk shows now, not never
        if (os.fail())
            throw data_error("writing '" + shown + "' failed (" + std::strerror(errno) +
                             "); the previous file is unchanged");
    } else {
        write_h5(path, o);
    }
}

void write_prediction_file(const std::string& path, const PredictionOutput& out) {
    if (path == "-") {
        write_prediction(path, out);
        return;
    }
    PendingOutput pending(path);
    write_prediction(pending.temp_path(), out, path);
    pending.commit();
}

}  // namespace ef

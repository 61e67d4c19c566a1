// SPDX-License-Identifier: MIT
#include "src/report/results_summary.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <ensemblefit/core/error.hpp>

#include "src/io/central_errors.hpp"
#include "src/report/summary_format.hpp"

namespace ef {
namespace {

/// The `formula = ...` line of a canonical config's [model] section ("" when there is none).
std::string formula_of(const std::string& canonical) {
    std::istringstream in(canonical);
    std::string line, section;
    while (std::getline(in, line)) {
        if (!line.empty() && line.front() == '[') section = line;
        if (section == "[model]" && line.rfind("formula = ", 0) == 0) return line.substr(10);
    }
    return "";
}

void read_central(const h5::File& f, ResultsSummary& r) {
    r.central_in_file = r.id.span.central && f.exists("/central/params");
    if (!r.central_in_file) return;
    r.central_status = f.read_int64("/central/status")[0];
    r.central_iterations = f.read_int64("/central/iterations")[0];
    r.central_chi2 = f.read_double("/central/chi2")[0];
    r.central_params = f.read_double("/central/params");
    r.central_covariance = f.read_double("/central/covariance");
    r.errors = read_central_errors(f);
    // Files from before /central/correlation: the same function on the unscaled covariance.
    r.central_correlation = f.exists("/central/correlation")
                                ? f.read_double("/central/correlation")
                                : correlation_of(read_central_covariance_unscaled(f), r.P());
    if (f.has_attr("/central/covariance", "chi2_per_ndf"))
        r.chi2_per_ndf = f.attr_double("/central/covariance", "chi2_per_ndf");
}

/// Which central values sit on a bound of their free parameter ([param.NAME] lower, upper and
/// fixed as the canonical config writes them; read line by line as formula_of() reads [model]).
std::vector<int> bounds_hit(const std::string& canonical, const std::vector<std::string>& names,
                            const std::vector<double>& central) {
    std::vector<int> hit(names.size(), 0);
    if (central.size() != names.size()) return hit;
    std::istringstream in(canonical);
    std::string line, param;
    double lower = -INFINITY, upper = INFINITY;
    auto finish = [&] {
        const auto it = std::find(names.begin(), names.end(), param);
        if (it == names.end()) return;
        const double v = central[static_cast<std::size_t>(it - names.begin())];
        auto on = [&](double b) { return std::isfinite(b) && std::abs(v - b) <= 1e-9 * std::max(1.0, std::abs(b)); };
        hit[static_cast<std::size_t>(it - names.begin())] = on(lower) ? -1 : on(upper) ? 1 : 0;
    };
    bool fixed = false;
    while (std::getline(in, line)) {
        if (line.rfind("[", 0) == 0) {
            if (!param.empty() && !fixed) finish();
            param = line.rfind("[param.", 0) == 0 ? line.substr(7, line.size() - 8) : "";
            lower = -INFINITY, upper = INFINITY, fixed = false;
        } else if (!param.empty() && line.rfind("lower = ", 0) == 0) {
            lower = std::strtod(line.c_str() + 8, nullptr);
        } else if (!param.empty() && line.rfind("upper = ", 0) == 0) {
            upper = std::strtod(line.c_str() + 8, nullptr);
        } else if (!param.empty() && line == "fixed = true") {
            fixed = true;
        }
    }
    if (!param.empty() && !fixed) finish();
    return hit;
}

}  // namespace

ResultsSummary summary_of(const h5::File& f, const ReplicaBlock& reps, const EnsembleSummary& s) {
    ResultsSummary r;
    r.path = f.path();
    r.id = read_run_identity(f);
    r.formula = formula_of(r.id.canonical_config);
    if (f.has_attr("/", "merged_from")) r.merged_from = f.attr_strings("/", "merged_from");
    read_central(f, r);
    r.quality = read_fit_quality(f);
    if (!r.central_params.empty()) r.at_bound = bounds_hit(r.id.canonical_config, r.id.param_names, r.central_params);
    for (const std::int64_t st : reps.status) {
        if (st == 0) ++r.converged;
        else if (st == 1) ++r.max_iterations;
        else if (st == 2) ++r.failed;
        else ++r.not_done;
    }
    r.ensemble = s;
    if (r.ensemble.correlation.empty()) r.ensemble.correlation = correlation_of(s.covariance, s.P);
    return r;
}

ResultsSummary read_results_summary(const std::string& path) {
    if (!std::ifstream(path)) throw usage_error(path + ": no such file (or it cannot be read)");
    if (!h5::is_hdf5(path)) throw usage_error(path + ": not an HDF5 file (summary reads ensemblefit fit results)");
    const h5::File f = h5::File::open_read(path);
    const RunIdentity id = read_run_identity(f);
    check_results_layout(f, id);  // shapes and types before anything is read by them
    ReplicaBlock reps;
    reps.P = static_cast<int>(id.param_names.size());
    reps.params = f.read_double("/replicas/params");
    reps.status = f.read_int64("/replicas/status");
    reps.index = f.read_int64("/replicas/index");
    check_results_values(f, id, reps);
    return summary_of(f, reps, summarize(reps.params, reps.status, reps.P));
}

void write_results_summary(const ResultsSummary& s, SummaryFormat format, bool all_correlations, std::ostream& os) {
    switch (format) {
        case SummaryFormat::table: write_summary_table(s, all_correlations, os); break;
        case SummaryFormat::csv: write_summary_csv(s, os); break;
        case SummaryFormat::json: write_summary_json(s, os); break;
    }
    os.flush();
}

}  // namespace ef

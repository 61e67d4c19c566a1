// SPDX-License-Identifier: MIT
// The table, CSV and JSON forms of a ResultsSummary. Values that do not exist (no converged
// replica, no central fit in a shard, a parameter without variance) are words or "-" in the
// table, empty cells in CSV and null in JSON: never "nan".
#include "src/report/summary_format.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "src/core/text.hpp"

namespace ef {
namespace {

/// 6 significant digits for people, "-" where there is no value.
std::string num(double v) {
    if (!std::isfinite(v)) return "-";
    char b[32];
    std::snprintf(b, sizeof b, "%.6g", v);
    return b;
}

/// 17 significant digits (round trip) for scripts; `none` where there is no value.
std::string exact(double v, const char* none) {
    if (!std::isfinite(v)) return none;
    char b[32];
    std::snprintf(b, sizeof b, "%.17g", v);
    return b;
}

const char* status_words(std::int64_t s) {
    switch (s) {
        case 0: return "converged";
        case 1: return "stopped at max_iterations";
        case 2: return "failed";
        default: return "not done";
    }
}

bool central_done(const ResultsSummary& s) { return s.central_in_file && s.central_status >= 0; }
bool has_ensemble(const ResultsSummary& s) { return s.converged > 0; }

/// sqrt of the stored covariance's diagonal (scaled or not, as the file says).
std::vector<double> central_errors(const ResultsSummary& s) {
    std::vector<double> e(static_cast<size_t>(s.P()), std::nan(""));
    if (!central_done(s)) return e;
    for (size_t q = 0; q < e.size(); ++q) e[q] = std::sqrt(s.central_covariance[q * e.size() + q]);
    return e;
}

// --- table ---------------------------------------------------------------------------------

void table_header(const ResultsSummary& s, std::ostream& os) {
    os << s.path << ": ";
    if (!s.merged_from.empty()) {
        os << "merged from " << s.merged_from.size() << " shard file(s)";
    } else if (s.id.shard.count > 1) {
        os << "shard " << s.id.shard.index << "/" << s.id.shard.count << " (replicas " << s.id.span.begin << ".."
           << s.id.span.end - 1 << (s.id.span.central ? " and the central fit" : "") << ")";
    } else {
        os << "one run";
    }
    const std::int64_t fits = s.replicas_in_file() + (s.central_in_file ? 1 : 0);
    if (s.pending() > 0)
        os << ", partial: " << s.pending() << " of " << fits
           << " replica fits not done (a stopped run: --resume finishes it)\n";
    else
        os << ", complete\n";
    os << "  model: " << s.id.model << (s.formula.empty() ? "" : " (" + s.formula + ")") << ", " << s.P()
       << " parameters; " << s.id.replicas_total << " replicas configured\n";
}

void table_central_line(const ResultsSummary& s, std::ostream& os) {
    os << "\ncentral fit (replica 0): ";
    if (!s.central_in_file) {
        os << "not in this file (shard 0 holds it)\n";
        return;
    }
    if (s.central_status < 0) {
        os << "not done yet\n";
        return;
    }
    os << "chi2 = " << num(s.central_chi2);
    if (s.errors.ndf > 0)
        os << " for " << s.errors.ndf << " degrees of freedom (chi2/ndf = "
           << num(s.central_chi2 / static_cast<double>(s.errors.ndf)) << ")";
    os << ", " << status_words(s.central_status) << " after " << s.central_iterations << " iteration"
       << (s.central_iterations == 1 ? "" : "s") << "\n";
}

void table_parameters(const ResultsSummary& s, std::ostream& os) {
    size_t w = 11;
    for (const auto& n : s.id.param_names) w = std::max(w, n.size() + 2);
    const bool ens = has_ensemble(s);
    os << "\n  " << pad("parameter", w) << pad("central", 14);
    if (ens) os << pad("+-fit", 12) << pad("mean", 14) << pad("std", 12) << pad("16%", 14) << "84%";
    else os << "+-fit";
    os << "\n";
    const std::vector<double> err = central_errors(s);
    const size_t P = static_cast<size_t>(s.P());
    for (size_t q = 0; q < P; ++q) {
        os << "  " << pad(s.id.param_names[q], w) << pad(num(central_done(s) ? s.central_params[q] : NAN), 14);
        if (!ens) os << num(err[q]);
        else
            os << pad(num(err[q]), 12) << pad(num(s.ensemble.mean[q]), 14) << pad(num(s.ensemble.std[q]), 12)
               << pad(num(s.ensemble.quantiles[P + q]), 14) << num(s.ensemble.quantiles[3 * P + q]);
        if (q < s.at_bound.size() && s.at_bound[q] != 0)
            os << (s.at_bound[q] < 0 ? "  * at its lower bound" : "  * at its upper bound");
        os << "\n";
    }
    if (!central_done(s)) return;
    if (std::any_of(s.at_bound.begin(), s.at_bound.end(), [](int b) { return b != 0; }))
        os << "(* the central fit ended on the parameter's bound: its +-fit is the curvature of chi2 there\n"
              "   as if there were no bound, not an interval: the data do not constrain it beyond the\n"
              "   bound. The replicas' 16%/84% quantiles are the uncertainty to quote, one-sided at the\n"
              "   bound; or widen or free the bound)\n";
    if (s.errors.scale == ErrorScale::chi2)
        os << "(+-fit: sqrt of the diagonal of the central covariance (J^T W J)^-1 x chi2/ndf = "
           << num(s.chi2_per_ndf) << ", scaled: [fit] error_scale = chi2)\n";
    else
        os << "(+-fit: sqrt of the diagonal of the central covariance (J^T W J)^-1, not scaled by chi2/ndf: "
              "[fit] error_scale = none)\n";
}

void table_replicas(const ResultsSummary& s, std::ostream& os) {
    if (s.replicas_in_file() == 0) {
        os << "\nreplicas: none in this file, so there are no ensemble statistics\n";
        return;
    }
    os << "\nreplicas: " << s.replicas_in_file() << " in this file: " << s.converged << " converged, "
       << s.max_iterations << " at max_iterations, " << s.failed << " failed, " << s.not_done << " not done; ";
    if (s.converged == 0)
        os << "no replica converged, so there are no ensemble statistics (mean, std, quantiles)\n";
    else if (s.converged == 1)
        os << "statistics over the 1 converged replica (one replica has no spread: std '-')\n";
    else
        os << "statistics over the " << s.converged << " converged\n";
}

/// /quality: chi2 / N per data set and in total, the correlated sources' fitted shifts and
/// pulls, the spread of the replicas' chi2 against the central data.
void table_quality(const ResultsSummary& s, std::ostream& os) {
    const FitQuality& q = s.quality;
    if (q.empty()) return;
    os << "\nfit quality of the central fit (chi2 with the data's full covariance, src/fit/fit_quality.hpp):\n";
    os << "  " << pad("data set", 24) << pad("N", 8) << pad("chi2", 12) << "chi2/N\n";
    for (size_t d = 0; d < q.dataset_names.size(); ++d)
        os << "  " << pad(q.dataset_names[d], 24) << pad(std::to_string(q.dataset_n[d]), 8)
           << pad(num(q.dataset_chi2[d]), 12) << num(q.dataset_chi2[d] / static_cast<double>(q.dataset_n[d])) << "\n";
    os << "  " << pad("total", 24) << pad(std::to_string(q.n), 8) << pad(num(q.chi2), 12)
       << num(q.chi2 / static_cast<double>(q.n)) << "\n";
    if (!q.dataset_names.empty())
        os << "  (a data set's chi2 uses its own block of the covariance: the parts add up to the total\n"
              "   only when no correlated source spans two data sets)\n";
    if (!q.source_names.empty()) {
        os << "\ncorrelated sources, fitted shifts (nuisance parameters, in units of their 1 sigma, the theory\n"
              "at the central fit):\n";
        os << "  " << pad("source", 28) << pad("shift", 12) << pad("+-", 12) << "pull\n";
        for (size_t k = 0; k < q.source_names.size(); ++k)
            os << "  " << pad(q.source_names[k], 28) << pad(num(q.shift[k]), 12) << pad(num(q.shift_error[k]), 12)
               << num(q.pull[k]) << (std::abs(q.pull[k]) > 3.0 ? "  * pull beyond 3" : "") << "\n";
    }
    std::vector<double> c;
    for (double v : q.replica_chi2)
        if (std::isfinite(v)) c.push_back(v);
    if (!c.empty()) {
        std::sort(c.begin(), c.end());
        double mean = 0.0;
        for (double v : c) mean += v;
        mean /= static_cast<double>(c.size());
        os << "replicas' chi2 against the central data (" << c.size() << "): mean " << num(mean) << ", median "
           << num(c[c.size() / 2]) << ", min " << num(c.front()) << ", max " << num(c.back())
           << " (each in /quality/replica_chi2)\n";
    }
}

struct Pair {
    size_t a, b;
    double rho, other;
};

/// The strongest correlations (largest |rho|) of the ensemble when it has a spread, else of the
/// central fit; the other matrix's value beside each.
void table_top_correlations(const ResultsSummary& s, std::ostream& os) {
    const size_t P = static_cast<size_t>(s.P());
    const bool ens = s.converged >= 2;
    const std::vector<double> none(P * P, NAN);
    const std::vector<double>& ranked = ens ? s.ensemble.correlation : (central_done(s) ? s.central_correlation : none);
    const std::vector<double>& other = ens && central_done(s) ? s.central_correlation : none;
    std::vector<Pair> pairs;
    for (size_t a = 0; a < P; ++a)
        for (size_t b = a + 1; b < P; ++b)
            if (std::isfinite(ranked[a * P + b])) pairs.push_back({a, b, ranked[a * P + b], other[a * P + b]});
    if (pairs.empty()) {
        os << "\ncorrelations: none defined (fewer than two parameters with a variance"
           << (ens || central_done(s) ? "" : ", no converged replica and no central fit") << ")\n";
        return;
    }
    std::stable_sort(pairs.begin(), pairs.end(),
                     [](const Pair& x, const Pair& y) { return std::fabs(x.rho) > std::fabs(y.rho); });
    const size_t shown = std::min<size_t>(pairs.size(), 10);
    os << "\nstrongest correlations (" << shown << " of " << pairs.size() << " pairs, by |rho|; "
       << (ens ? "ensemble of the converged replicas" : "central fit")
       << (ens && central_done(s) ? ", central fit in brackets" : "") << "; all: --correlations):\n";
    size_t w = 4;
    for (const auto& n : s.id.param_names) w = std::max(w, n.size() + 2);
    char b[64];
    for (size_t k = 0; k < shown; ++k) {
        const Pair& p = pairs[k];
        std::snprintf(b, sizeof b, "%+.3f", p.rho);
        os << "  " << pad(s.id.param_names[p.a], w) << pad(s.id.param_names[p.b], w) << b;
        if (std::isfinite(p.other)) {
            std::snprintf(b, sizeof b, "  (%+.3f)", p.other);
            os << b;
        }
        os << "\n";
    }
}

void table_matrix(const ResultsSummary& s, const std::string& title, const std::vector<double>& m, std::ostream& os) {
    const size_t P = static_cast<size_t>(s.P());
    size_t w = 8;
    for (const auto& n : s.id.param_names) w = std::max(w, n.size() + 2);
    os << "\n" << title << " ('-': no variance, e.g. a fixed parameter):\n  " << pad("", w);
    for (const auto& n : s.id.param_names) os << pad(n, w);
    os << "\n";
    char b[32];
    for (size_t a = 0; a < P; ++a) {
        os << "  " << pad(s.id.param_names[a], w);
        for (size_t c = 0; c < P; ++c) {
            std::snprintf(b, sizeof b, "%+.3f", m[a * P + c]);
            os << pad(std::isfinite(m[a * P + c]) ? b : "-", w);
        }
        os << "\n";
    }
}

void table_all_correlations(const ResultsSummary& s, std::ostream& os) {
    if (s.converged >= 2)
        table_matrix(s, "correlation matrix of the ensemble (" + std::to_string(s.converged) + " converged replicas)",
                     s.ensemble.correlation, os);
    if (central_done(s)) table_matrix(s, "correlation matrix of the central fit", s.central_correlation, os);
    if (s.converged < 2 && !central_done(s))
        os << "\ncorrelations: none (fewer than two converged replicas and no central fit)\n";
}

// --- JSON ----------------------------------------------------------------------------------

std::string quoted(const std::string& v) {
    std::string out = "\"";
    for (const char c : v) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char b[8];
            std::snprintf(b, sizeof b, "\\u%04x", c);
            out += b;
        } else {
            out += c;
        }
    }
    return out + "\"";
}

std::string json_array(const double* v, size_t n) {
    std::string out = "[";
    for (size_t k = 0; k < n; ++k) out += (k ? ", " : "") + exact(v[k], "null");
    return out + "]";
}

std::string json_matrix(const std::vector<double>& m, size_t P) {
    std::string out = "[";
    for (size_t a = 0; a < P; ++a) out += (a ? ", " : "") + json_array(m.data() + a * P, P);
    return out + "]";
}

std::string json_strings(const std::vector<std::string>& v) {
    std::string out = "[";
    for (size_t k = 0; k < v.size(); ++k) out += (k ? ", " : "") + quoted(v[k]);
    return out + "]";
}

void json_central(const ResultsSummary& s, std::ostream& os) {
    const size_t P = static_cast<size_t>(s.P());
    if (!s.central_in_file) {
        os << "null";
        return;
    }
    const bool done = central_done(s);
    const std::vector<double> err = central_errors(s);
    const double ndf = static_cast<double>(s.errors.ndf);
    os << "{\"status\": " << quoted(status_words(s.central_status)) << ", \"done\": " << (done ? "true" : "false")
       << ", \"chi2\": " << exact(done ? s.central_chi2 : NAN, "null") << ", \"iterations\": " << s.central_iterations
       << ", \"ndf\": " << (s.errors.ndf >= 0 ? std::to_string(s.errors.ndf) : "null")
       << ", \"chi2_per_ndf\": " << exact(done && ndf > 0 ? s.central_chi2 / ndf : NAN, "null")
       << ", \"error_scale\": " << quoted(to_string(s.errors.scale))
       << ", \"errors_scaled_by\": " << exact(s.errors.scale == ErrorScale::chi2 && done ? s.chi2_per_ndf : NAN, "null")
       << ",\n    \"params\": " << json_array(s.central_params.data(), P) << ",\n    \"errors\": "
       << json_array(err.data(), P) << ",\n    \"covariance\": " << json_matrix(s.central_covariance, P)
       << ",\n    \"correlation\": " << json_matrix(s.central_correlation, P) << "}";
}

/// /quality (null for a file without it); each replica's chi2 stays in the file.
void json_quality(const ResultsSummary& s, std::ostream& os) {
    const FitQuality& q = s.quality;
    if (q.empty()) {
        os << "null";
        return;
    }
    std::vector<double> n(q.dataset_n.begin(), q.dataset_n.end());
    os << "{\"chi2\": " << exact(q.chi2, "null") << ", \"n\": " << q.n
       << ",\n    \"datasets\": " << json_strings(q.dataset_names) << ", \"dataset_chi2\": "
       << json_array(q.dataset_chi2.data(), q.dataset_chi2.size()) << ", \"dataset_n\": " << json_array(n.data(), n.size())
       << ",\n    \"sources\": " << json_strings(q.source_names) << ", \"shift\": " << json_array(q.shift.data(), q.shift.size())
       << ", \"shift_error\": " << json_array(q.shift_error.data(), q.shift_error.size())
       << ", \"pull\": " << json_array(q.pull.data(), q.pull.size()) << "}";
}

void json_ensemble(const ResultsSummary& s, std::ostream& os) {
    const size_t P = static_cast<size_t>(s.P());
    if (!has_ensemble(s)) {
        os << "null";
        return;
    }
    const EnsembleSummary& e = s.ensemble;
    os << "{\"replicas_used\": " << e.used << ",\n    \"mean\": " << json_array(e.mean.data(), P)
       << ",\n    \"std\": " << json_array(e.std.data(), P) << ",\n    \"quantiles\": {";
    for (size_t l = 0; l < 5; ++l)
        os << (l ? ", " : "") << "\"" << num(kQuantileLevels[l]) << "\": " << json_array(e.quantiles.data() + l * P, P);
    os << "},\n    \"covariance\": " << json_matrix(e.covariance, P)
       << ",\n    \"correlation\": " << json_matrix(e.correlation, P) << "}";
}

}  // namespace

void write_summary_table(const ResultsSummary& s, bool all_correlations, std::ostream& os) {
    table_header(s, os);
    table_central_line(s, os);
    table_parameters(s, os);
    table_replicas(s, os);
    table_quality(s, os);
    if (all_correlations) table_all_correlations(s, os);
    else table_top_correlations(s, os);
}

void write_summary_csv(const ResultsSummary& s, std::ostream& os) {
    const size_t P = static_cast<size_t>(s.P());
    const std::vector<double> err = central_errors(s);
    const bool ens = has_ensemble(s);
    os << "parameter,central,error,error_scale,mean,std,q2.5,q16,q50,q84,q97.5,converged_replicas\n";
    for (size_t q = 0; q < P; ++q) {
        os << s.id.param_names[q] << "," << exact(central_done(s) ? s.central_params[q] : NAN, "") << ","
           << exact(err[q], "") << "," << (central_done(s) ? to_string(s.errors.scale) : "") << ","
           << exact(ens ? s.ensemble.mean[q] : NAN, "") << "," << exact(ens ? s.ensemble.std[q] : NAN, "");
        for (size_t l = 0; l < 5; ++l) os << "," << exact(ens ? s.ensemble.quantiles[l * P + q] : NAN, "");
        os << "," << s.converged << "\n";
    }
}

void write_summary_json(const ResultsSummary& s, std::ostream& os) {
    os << "{\"file\": " << quoted(s.path) << ", \"model\": " << quoted(s.id.model)
       << ", \"formula\": " << (s.formula.empty() ? "null" : quoted(s.formula))
       << ",\n  \"param_names\": " << json_strings(s.id.param_names) << ",\n  \"complete\": "
       << (s.pending() == 0 ? "true" : "false") << ", \"pending_fits\": " << s.pending()
       << ", \"merged_from\": " << (s.merged_from.empty() ? "null" : json_strings(s.merged_from))
       << ",\n  \"shard\": {\"index\": " << s.id.shard.index << ", \"count\": " << s.id.shard.count
       << ", \"first_replica\": " << s.id.span.begin << ", \"last_replica\": " << s.id.span.end - 1
       << ", \"has_central\": " << (s.id.span.central ? "true" : "false") << "}"
       << ",\n  \"replicas\": {\"configured\": " << s.id.replicas_total << ", \"in_file\": " << s.replicas_in_file()
       << ", \"converged\": " << s.converged << ", \"max_iterations\": " << s.max_iterations
       << ", \"failed\": " << s.failed << ", \"not_done\": " << s.not_done << "},\n  \"central\": ";
    json_central(s, os);
    os << ",\n  \"ensemble\": ";
    json_ensemble(s, os);
    os << ",\n  \"quality\": ";
    json_quality(s, os);
    os << "\n}\n";
}

}  // namespace ef

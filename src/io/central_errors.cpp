// SPDX-License-Identifier: MIT
#include "src/io/central_errors.hpp"

#include <limits>
#include <string>

#include <ensemblefit/core/error.hpp>
#include <ensemblefit/core/ensemble_summary.hpp>

namespace ef {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Writes a whole P x P dataset, creating it (NaN-filled) when missing: files from before a
/// dataset existed get it on --resume.
void put_matrix(h5::File& f, const std::string& name, const std::vector<double>& m, int P) {
    const std::uint64_t Pz = static_cast<std::uint64_t>(P);
    if (!f.exists(name)) f.create_double(name, Pz, Pz, kNaN);
    f.write_rows(name, 0, Pz, m.data());
}

}  // namespace

const char* to_string(ErrorScale scale) { return scale == ErrorScale::chi2 ? "chi2" : "none"; }

CentralErrors central_errors_of(const FitProblem& pb) {
    CentralErrors e;
    e.scale = pb.config.error_scale;
    std::int64_t nfree = 0;
    for (const auto& p : pb.config.params) nfree += p.fixed ? 0 : 1;
    e.ndf = static_cast<std::int64_t>(pb.data.n) - nfree;
    if (e.scale == ErrorScale::chi2 && e.ndf <= 0)
        throw usage_error(pb.config.where("fit.error_scale") + ": chi2 needs more data points than free parameters (" +
                          std::to_string(pb.data.n) + " points, " + std::to_string(nfree) + " free)");
    return e;
}

void prepare_central_errors(h5::File& f, const CentralErrors& e, int P) {
    const std::uint64_t Pz = static_cast<std::uint64_t>(P);
    if (!f.exists("/central/correlation")) f.create_double("/central/correlation", Pz, Pz, kNaN);
    if (e.scale == ErrorScale::chi2 && !f.exists("/central/covariance_unscaled"))
        f.create_double("/central/covariance_unscaled", Pz, Pz, kNaN);
    f.set_attr("/central/covariance", "error_scale", std::string(to_string(e.scale)));
    if (e.ndf >= 0) f.set_attr("/central/covariance", "ndf", e.ndf);
}

void write_central_errors(h5::File& f, const CentralErrors& e, double chi2, const std::vector<double>& cov, int P) {
    const size_t PP = static_cast<size_t>(P) * static_cast<size_t>(P);
    const std::vector<double> raw = cov.size() == PP ? cov : std::vector<double>(PP, kNaN);
    prepare_central_errors(f, e, P);
    put_matrix(f, "/central/correlation", correlation_of(raw, P), P);
    if (e.scale == ErrorScale::none) {
        put_matrix(f, "/central/covariance", raw, P);
        return;
    }
    const double factor = chi2 / static_cast<double>(e.ndf);
    std::vector<double> scaled(PP);
    for (size_t k = 0; k < PP; ++k) scaled[k] = raw[k] * factor;
    put_matrix(f, "/central/covariance_unscaled", raw, P);
    put_matrix(f, "/central/covariance", scaled, P);
    f.set_attr("/central/covariance", "chi2_per_ndf", factor);
}

CentralErrors read_central_errors(const h5::File& f) {
    CentralErrors e;
    if (!f.exists("/central/covariance")) return e;
    if (f.has_attr("/central/covariance", "error_scale") &&
        f.attr_string("/central/covariance", "error_scale") == "chi2")
        e.scale = ErrorScale::chi2;
    if (f.has_attr("/central/covariance", "ndf")) e.ndf = f.attr_int64("/central/covariance", "ndf");
    return e;
}

std::vector<double> read_central_covariance_unscaled(const h5::File& f) {
    return f.read_double(f.exists("/central/covariance_unscaled") ? "/central/covariance_unscaled"
                                                                  : "/central/covariance");
}

}  // namespace ef

// SPDX-License-Identifier: MIT
#include "src/report/summary_table.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "src/core/text.hpp"

namespace ef {
namespace {

std::string num(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.6g", v);
    return b;
}

const char* status_name(std::int64_t s) {
    switch (s) {
        case 0: return "converged";
        case 1: return "max_iterations";
        case 2: return "failed";
        default: return "not done";
    }
}

}  // namespace

void print_problem(const FitProblem& pb, const RunIdentity& id, std::ostream& os) {
    const FitConfig& c = pb.config;
    int nfree = 0;
    for (const auto& p : c.params) nfree += p.fixed ? 0 : 1;
    os << "ensemblefit fit " << c.config_file << "\n"
       << "  model:    " << pb.describe_model() << "\n"
       << "  data:     " << c.data_file << " (" << pb.data.n << " points, " << pb.data.nx
       << " variable" << (pb.data.nx == 1 ? "" : "s") << ")\n"
       << "  params:   " << c.params.size() << " (" << nfree << " free)\n"
       << "  replicas: " << c.replicas << " (" << (c.resample == ResampleMethod::smear ? "smear" : "bootstrap")
       << ", seed " << c.seed << ")";
    if (id.shard.count > 1)
        os << "; shard " << id.shard.index << "/" << id.shard.count << " holds replicas " << id.span.begin
           << ".." << id.span.end - 1 << (id.span.central ? " and the central fit" : "");
    os << "\n";
    if (pb.model_flops() > 0)
        os << "  cost:     " << num(pb.model_flops_per_point()) << " FLOP per data point, " << num(pb.model_flops())
           << " per model evaluation, " << num(pb.flops_per_iteration())
           << " per replica LM iteration (Jacobian + trial + "
           << (c.solver == FitSolver::normal ? "normal equations" : "QR") << ")\n";
}

void print_summary(const FitProblem& pb, const h5::File& f, const ReplicaBlock& reps,
                   const EnsembleSummary& s, std::ostream& os) {
    const int P = pb.num_params();
    const auto names = pb.config.param_names();
    const bool central = f.exists("/central/params");
    std::vector<double> cp, cov;
    if (central) {
        cp = f.read_double("/central/params");
        cov = f.read_double("/central/covariance");
        const double chi2 = f.read_double("/central/chi2")[0];
        const auto st = f.read_int64("/central/status")[0];
        const auto it = f.read_int64("/central/iterations")[0];
        int nfree = 0;
        for (const auto& p : pb.config.params) nfree += p.fixed ? 0 : 1;
        const int ndf = pb.data.n - nfree;
        os << "\ncentral fit (replica 0): chi2 = " << num(chi2) << " for " << ndf << " degrees of freedom"
           << (ndf > 0 ? " (chi2/ndf = " + num(chi2 / ndf) + ")" : "") << ", " << status_name(st) << " after "
           << it << " iteration" << (it == 1 ? "" : "s") << "\n";
    }
    os << "\n  " << pad("parameter", 14) << pad("central", 14) << pad("+-fit", 12) << pad("mean", 14)
       << pad("std", 12) << pad("16%", 14) << "84%\n";
    for (int q = 0; q < P; ++q) {
        const size_t Q = static_cast<size_t>(q);
        os << "  " << pad(names[Q], 14);
        if (central) {
            os << pad(num(cp[Q]), 14) << pad(num(std::sqrt(cov[Q * static_cast<size_t>(P) + Q])), 12);
        } else {
            os << pad("-", 14) << pad("-", 12);
        }
        os << pad(num(s.mean[Q]), 14) << pad(num(s.std[Q]), 12)
           << pad(num(s.quantiles[1 * static_cast<size_t>(P) + Q]), 14)
           << num(s.quantiles[3 * static_cast<size_t>(P) + Q]) << "\n";
    }
    std::int64_t counts[3] = {0, 0, 0};
    for (auto st : reps.status)
        if (st >= 0 && st <= 2) ++counts[st];
    os << "\nreplicas: " << reps.size() << " in this file: " << counts[0] << " converged, " << counts[1]
       << " at max_iterations, " << counts[2] << " failed; statistics over " << s.used << " converged\n";
    os << "(+-fit: sqrt of the central fit's (J^T W J)^-1 diagonal, not scaled by chi2/ndf)\n";
    os.flush();
}

}  // namespace ef

// SPDX-License-Identifier: MIT
#include "src/fit/summary_table.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "src/core/text.hpp"
#include "src/report/results_summary.hpp"

namespace ef {
namespace {

std::string num(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.6g", v);
    return b;
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
    ResultsSummary r = summary_of(f, reps, s);
    if (r.errors.ndf < 0) {  // an output from before the ndf attribute, resumed
        std::int64_t nfree = 0;
        for (const auto& p : pb.config.params) nfree += p.fixed ? 0 : 1;
        r.errors.ndf = pb.data.n - nfree;
    }
    os << "\n";
    write_results_summary(r, SummaryFormat::table, false, os);
}

void print_file_summary(const std::string& path, std::ostream& os) {
    os << "\n";
    write_results_summary(read_results_summary(path), SummaryFormat::table, false, os);
}

}  // namespace ef

// SPDX-License-Identifier: MIT
// `ensemblefit predict`: the fitted model and its ensemble band at points the user chooses.
#include <mpi.h>

#include <climits>
#include <cstdio>
#include <iostream>
#include <memory>

#include <boost/program_options.hpp>

#include <ensemblefit/core/error.hpp>

#include "src/cli/commands.hpp"
#include "src/run/run_args.hpp"
#include "src/fit/prediction.hpp"
#include "src/io/results_file.hpp"
#include "src/report/prediction_bands.hpp"
#include "src/run/output_guard.hpp"
#include "src/run/placement.hpp"

namespace po = boost::program_options;

namespace ef {
namespace {

const char* kPredictUsage =
    "usage: ensemblefit predict FILE.h5 --at POINTS.csv|POINTS.h5 [-o OUT.h5|OUT.csv] [--replicas]\n"
    "                           [--overwrite] [--model.plugin LIB.so | --trust-plugin] [--model.compile MODE]\n\n"
    "Evaluates the model of a fit's result file at the given points for the central fit and\n"
    "every converged replica, and writes per point: central value, mean, std and the 2.5, 16, 50,\n"
    "84 and 97.5 % quantiles over the replicas (and each replica's value with --replicas). The\n"
    "model is rebuilt from the config stored in FILE.h5 at the points (for dis-mellin its tables\n"
    "are computed there), so the run's data file is not needed. POINTS holds the x columns by the\n"
    "names [data] x gives them (dis-mellin: x, Q2, target), as CSV with a header row or as 1-D\n"
    "HDF5 datasets. OUT: .csv one row per point, otherwise HDF5 (the x columns at the root and\n"
    "/prediction/central, mean, std, quantiles, replicas, replica_index); without -o the CSV goes\n"
    "to standard output. Under mpirun the replicas are split over the ranks. A result file never\n"
    "loads code by itself: a plugin model needs --model.plugin (the library, named again) or\n"
    "--trust-plugin (the library at the path the file records), with the SHA-256 the file\n"
    "records; a formula is interpreted unless --model.compile says otherwise (docs/security.md).\n\noptions";

struct PredictArgs {
    std::string source, at, output = "-";
    bool replicas = false;
    bool overwrite = false;
    PredictModelChoice model;
};

/// Parses the arguments; false for --help (printed by rank 0).
bool parse_predict_args(const std::vector<std::string>& args, const MpiContext& ctx, PredictArgs& a) {
    po::options_description desc(kPredictUsage);
    desc.add_options()("help,h", "this text")("at", po::value<std::string>(&a.at), "the points: CSV or HDF5")(
        "output,o", po::value<std::string>(&a.output), "OUT.csv or OUT.h5 (default: CSV on standard output)")(
        "replicas", "also write every replica's value at every point")("overwrite", "replace an existing OUT")(
        "file", po::value<std::string>(&a.source), "the fit's result file")(
        "model.plugin", po::value<std::string>(&a.model.plugin), "the model plugin library of a plugin fit")(
        "trust-plugin", "load the plugin library at the path the result file records")(
        "model.compile", po::value<std::string>(&a.model.compile), "auto | jit | interpret for a formula (default interpret)");
    po::positional_options_description pos;
    pos.add("file", 1);
    po::variables_map vm;
    if (!parse_program_options("predict", args, desc, pos, vm, ctx)) return false;
    a.replicas = vm.count("replicas") > 0;
    a.overwrite = vm.count("overwrite") > 0;
    a.model.trust = vm.count("trust-plugin") > 0;
    if (a.source.empty()) throw usage_error("predict: no result file given (ensemblefit predict FILE.h5 --at POINTS)");
    if (a.at.empty()) throw usage_error("predict: --at POINTS.csv|POINTS.h5 is required");
    if (a.output == a.source || a.output == a.at)
        throw usage_error("predict: -o '" + a.output + "' would replace an input");
    return true;
}

/// What every rank reads: the problem at the points, the central fit's parameters (empty when
/// the file has none done) and the converged replicas' numbers and parameters.
struct PredictInputs {
    std::unique_ptr<FitProblem> pb;
    std::vector<double> central;
    std::vector<std::int64_t> index;
    std::vector<double> params;  ///< index.size() x P
};

PredictInputs read_inputs(const PredictArgs& a) {
    if (!file_exists(a.source)) throw usage_error(a.source + ": no such file");
    if (!h5::is_hdf5(a.source)) throw usage_error(a.source + ": not an HDF5 file (predict reads fit results)");
    const ResultsContent c = read_results(a.source);
    PredictInputs in;
    in.pb = std::make_unique<FitProblem>(prediction_problem(a.source, c.id, a.at, a.model));
    const size_t P = static_cast<size_t>(c.replicas.P);
    // The model evaluates num_params() values per replica: the stored config must have the
    // parameters (and order) the datasets hold, read_results checked them against param_names.
    if (in.pb->config.param_names() != c.id.param_names)
        throw data_error(a.source + ": its stored config (attribute canonical_config) has " +
                         std::to_string(in.pb->num_params()) + " parameters, its datasets (/replicas/params, "
                         "attribute param_names) " + std::to_string(P) +
                         (static_cast<size_t>(in.pb->num_params()) == P ? ", named differently" : "") + "; the file is not one ensemblefit wrote");
    if (c.id.span.central && c.central.status[0] >= 0) in.central = c.central.params;
    for (size_t r = 0; r < c.replicas.size(); ++r) {
        if (c.replicas.status[r] != 0) continue;
        in.index.push_back(c.replicas.index[r]);
        in.params.insert(in.params.end(), c.replicas.params.begin() + static_cast<std::ptrdiff_t>(r * P),
                         c.replicas.params.begin() + static_cast<std::ptrdiff_t>((r + 1) * P));
    }
    return in;
}

/// Each rank evaluates a contiguous block of the replicas; rank 0 gathers them in replica order
/// (values on rank 0, replicas x points; empty elsewhere).
std::vector<double> evaluate_replicas(const PredictInputs& in, const MpiContext& ctx, int threads) {
    const std::int64_t R = static_cast<std::int64_t>(in.index.size());
    const std::int64_t n = in.pb->data.n;
    if (static_cast<double>(R) * static_cast<double>(n) > INT_MAX)
        throw usage_error("predict: " + std::to_string(R) + " replicas x " + std::to_string(n) +
                          " points is more than one gather holds; predict at fewer points at a time");
    std::vector<int> counts(static_cast<size_t>(ctx.size())), displs(counts.size());
    for (int k = 0; k < ctx.size(); ++k) {
        const std::int64_t b = R * k / ctx.size(), e = R * (k + 1) / ctx.size();
        counts[static_cast<size_t>(k)] = static_cast<int>((e - b) * n);
        displs[static_cast<size_t>(k)] = static_cast<int>(b * n);
    }
    const std::int64_t first = R * ctx.rank() / ctx.size(), last = R * (ctx.rank() + 1) / ctx.size();
    std::vector<double> mine(static_cast<size_t>((last - first) * n));
    const size_t P = static_cast<size_t>(in.pb->num_params());
    evaluate_model(*in.pb, in.params.data() + static_cast<size_t>(first) * P, static_cast<size_t>(last - first),
                   threads, mine.data());
    std::vector<double> all(ctx.is_root() ? static_cast<size_t>(R * n) : 0);
    EF_MPI_CHECK(MPI_Gatherv(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(), counts.data(),
                             displs.data(), MPI_DOUBLE, 0, ctx.world()));
    return all;
}

int cmd_predict(const std::vector<std::string>& args, const MpiContext& ctx) {
    PredictArgs a;
    if (!parse_predict_args(args, ctx, a)) return 0;
    if (a.output != "-") {
        RunArgs run;
        run.overwrite = a.overwrite;
        check_output(ctx, a.output, "predict: -o", run, false, {a.source, a.at});
    }
    PredictInputs in;
    collective(ctx, [&] { in = read_inputs(a); });
    const int threads = resolve_threads(0, ctx.local_size()).threads;
    const std::vector<double> values = evaluate_replicas(in, ctx, threads);
    if (!ctx.is_root()) return 0;
    std::vector<double> central(in.central.empty() ? 0 : static_cast<size_t>(in.pb->data.n));
    if (!in.central.empty()) evaluate_model(*in.pb, in.central.data(), 1, threads, central.data());
    const PredictionBands bands = prediction_bands(central, values, in.pb->data.n);
    PredictionOutput out{a.source, in.pb->config.model_name, &in.pb->data, &bands, nullptr, nullptr};
    if (a.replicas) {
        out.replica_index = &in.index;
        out.replica_values = &values;
    }
    write_prediction_file(a.output, out);
    std::string note = bands.nonfinite > 0 ? "; " + std::to_string(bands.nonfinite) + " non-finite values left out" : "";
    std::fprintf(stderr, "predict: %d points: %s%lld converged replicas of %s -> %s%s\n", in.pb->data.n,
                 in.central.empty() ? "no central fit in the file, " : "the central fit and ",
                 static_cast<long long>(in.index.size()), a.source.c_str(),
                 a.output == "-" ? "standard output" : a.output.c_str(), note.c_str());
    return 0;
}

const CommandRegistrar reg("predict", "FILE.h5 --at POINTS: the fitted model and its replica band at given points",
                           &cmd_predict);

}  // namespace
}  // namespace ef

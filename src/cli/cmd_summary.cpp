// SPDX-License-Identifier: MIT
// `ensemblefit summary`: what a fit's result file holds, read back (finished, partial, merged).
#include <cstdio>
#include <iostream>
#include <sstream>

#include <boost/program_options.hpp>

#include <ensemblefit/core/error.hpp>

#include "src/cli/commands.hpp"
#include "src/run/run_args.hpp"
#include "src/report/results_summary.hpp"

namespace po = boost::program_options;

namespace ef {
namespace {

const char* kSummaryUsage =
    "usage: ensemblefit summary FILE.h5 [--format table|csv|json] [--correlations]\n\n"
    "What a fit's result file holds, for a finished, a partial (stopped: replicas not done) or a\n"
    "merged file, or a shard: the central fit (replica 0) with chi2/ndf and its errors, saying\n"
    "whether they are scaled by chi2/ndf ([fit] error_scale); mean, std and the 16/84 % quantiles\n"
    "over the converged replicas; how many replicas converged, stopped at max_iterations, failed\n"
    "or are not done; and the correlations (table: the 10 strongest pairs; --correlations: the\n"
    "whole matrices of the ensemble and of the central fit). Statistics are recomputed from\n"
    "/replicas as the run computes /summary, so a partial file has them too.\n"
    "  table  for people;  csv  one row per parameter (empty cells where there is no value);\n"
    "  json   one object for scripts (null where there is no value; all five quantiles and both\n"
    "         correlation matrices).\n\noptions";

int cmd_summary(const std::vector<std::string>& args, const MpiContext& ctx) {
    po::options_description desc(kSummaryUsage);
    std::string file, format = "table";
    desc.add_options()("help,h", "this text")("format", po::value<std::string>(&format),
                                              "table | csv | json (default: table)")(
        "correlations", "table: every correlation (both matrices), not only the strongest pairs")(
        "file", po::value<std::string>(&file), "result file");
    po::positional_options_description pos;
    pos.add("file", 1);
    po::variables_map vm;
    if (!parse_program_options("summary", args, desc, pos, vm, ctx)) return 0;
    if (file.empty()) throw usage_error("summary: no result file given (ensemblefit summary FILE.h5)");
    SummaryFormat f = SummaryFormat::table;
    if (format == "csv") f = SummaryFormat::csv;
    else if (format == "json") f = SummaryFormat::json;
    else if (format != "table")
        throw usage_error("summary: --format: unknown format '" + format + "' (allowed: table, csv, json)");
    if (!ctx.is_root()) return 0;
    write_results_summary(read_results_summary(file), f, vm.count("correlations") > 0, std::cout);
    return 0;
}

const CommandRegistrar reg("summary", "FILE.h5: central fit, ensemble statistics, correlations (table, csv, json)",
                           &cmd_summary);

}  // namespace
}  // namespace ef

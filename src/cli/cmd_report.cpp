// SPDX-License-Identifier: MIT
// `ensemblefit report`: one row per run, the way scaling studies are written up.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <boost/program_options.hpp>

#include <ensemblefit/core/error.hpp>

#include "src/cli/commands.hpp"
#include "src/run/run_args.hpp"
#include "src/report/kernel_roofline.hpp"
#include "src/report/timing_file.hpp"

namespace po = boost::program_options;

namespace ef {
namespace {

const char* const kPhases[] = {"setup", "compute", "comm", "sync", "sched", "idle", "io"};

/// One row of the table (and of the CSV): `r` against `base`.
void print_row(const std::string& label, const RunTiming& r, const RunTiming& base, std::FILE* csv) {
    PopMetrics m = r.metrics;
    apply_baseline(m, r.ranks, base.ranks, base.metrics.runtime);
    const double ideal = static_cast<double>(r.ranks.size()) / static_cast<double>(base.ranks.size());
    const double scaling = m.speedup / ideal;
    double total = 0;
    double share[kPhaseCount] = {};
    for (const auto& k : r.ranks) {
        total += k.wall;
        for (int p = 0; p < kPhaseCount; ++p) share[p] += k.phase[static_cast<size_t>(p)];
    }
    for (double& s : share) s = total > 0 ? s / total : 0.0;
    const std::string workers = describe_workers(r.placement);
    const std::string name = label.size() > 28 ? "..." + label.substr(label.size() - 25) : label;
    std::printf("%-28s %5zu %-14s %-8s %9.3f %7.3f %6.3f %6.3f %6.3f %6.3f %6.3f %6.3f |", name.c_str(),
                r.ranks.size(), workers.c_str(), r.policy.c_str(), m.runtime, m.speedup, scaling,
                m.parallel_efficiency, m.load_balance, m.communication_efficiency, m.computation_scalability,
                m.global_efficiency);
    for (double s : share) std::printf(" %5.1f%%", 100 * s);
    std::printf("\n");
    if (!csv) return;
    std::fprintf(csv, "%s,%zu,%s,%s,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f", label.c_str(), r.ranks.size(),
                 workers.c_str(), r.policy.c_str(), m.runtime, m.speedup, scaling, m.parallel_efficiency,
                 m.load_balance, m.communication_efficiency, m.computation_scalability, m.global_efficiency);
    for (double s : share) std::fprintf(csv, ",%.6f", s);
    std::fprintf(csv, "\n");
}

std::FILE* open_csv(const std::string& path) {
    if (path.empty()) return nullptr;
    std::FILE* out = std::fopen(path.c_str(), "w");
    if (!out) throw usage_error("report: cannot write --csv " + path);
    std::fprintf(out, "file,ranks,workers,policy,wall_s,speedup,scaling_efficiency,parallel_efficiency,load_balance,"
                      "communication_efficiency,computation_scalability,global_efficiency");
    for (const char* p : kPhases) std::fprintf(out, ",%s", p);
    std::fprintf(out, "\n");
    return out;
}

/// Under a run's row: what `advise` predicted for it (--predicted) against what it measured.
void print_predicted(const RunTiming& r) {
    if (r.predicted_wall <= 0) return;
    const double err = r.metrics.runtime > 0 ? (r.predicted_runtime - r.metrics.runtime) / r.metrics.runtime : 0.0;
    std::printf("    predicted %.3f s (parallel efficiency %.3f) for %s%s; measured %.3f s (%.3f): error %+.1f %%; "
                "the whole command with start-up and exit: predicted %.3f s\n",
                r.predicted_runtime, r.predicted_efficiency, r.predicted_placement.c_str(),
                r.predicted_matches ? "" : " (not this run's placement)", r.metrics.runtime,
                r.metrics.parallel_efficiency, 100 * err, r.predicted_wall);
}

/// The table over `runs` (each file's totals over its run records; with `per_run`, every record
/// on its own row below its file's).
void print_report(const std::vector<RunTiming>& runs, const RunTiming& base, bool per_run, std::FILE* csv) {
    std::printf("%-28s %5s %-14s %-8s %9s %7s %6s %6s %6s %6s %6s %6s | %s\n", "file", "ranks", "workers", "policy",
                "wall_s", "speedup", "scal", "PE", "LB", "CommE", "CompSc", "GE",
                "phase shares: setup compute comm sync sched idle io");
    for (const RunTiming& r : runs) {
        print_row(r.file + (r.runs.size() > 1 ? " (" + std::to_string(r.runs.size()) + " runs)" : ""), r, base, csv);
        if (r.runs.size() == 1) print_predicted(r);
        if (!per_run) continue;
        for (size_t k = 0; k < r.runs.size(); ++k) {
            print_row("  run " + std::to_string(k), r.runs[k], base, csv);
            print_predicted(r.runs[k]);
            std::printf("    %s  %s\n", r.runs[k].date.c_str(), r.runs[k].command.c_str());
        }
    }
    std::printf("baseline: %s (%zu ranks, %.3f s). scal = speedup / (ranks / baseline ranks); PE = LB x CommE; "
                "GE = PE x CompSc; a file that several runs worked on (--resume, merge) counts their sum\n",
                base.file.c_str(), base.ranks.size(), base.metrics.runtime);
}

int cmd_report(const std::vector<std::string>& args, const MpiContext& ctx) {
    po::options_description desc(
        "usage: ensemblefit report FILE.h5 [FILE.h5 ...] [--csv OUT.csv] [--baseline FILE.h5] [--runs] [--roofline]\n\n"
        "One row per file: ranks, workers, runtime, speedup and scaling efficiency against the\n"
        "baseline (the given one, else the file with the fewest ranks), the POP efficiencies\n"
        "(parallel = load balance x communication; computation scalability and global efficiency\n"
        "against the baseline) and each phase's share of the ranks' total time. A file that several\n"
        "runs worked on (--resume, or shards joined by merge) counts the sum of their records.\n\noptions");
    std::vector<std::string> files;
    std::string csv, baseline;
    desc.add_options()("help,h", "this text")("csv", po::value<std::string>(&csv), "also write the table as CSV")(
        "baseline", po::value<std::string>(&baseline), "run to compare against (default: fewest ranks)")(
        "runs", "also one row per run record of each file, with its date and command line")(
        "roofline", "also each file's model work (/timing/kernels): FLOPs, bytes, time, rates, fraction of ceiling")(
        "files", po::value<std::vector<std::string>>(&files), "result files");
    po::positional_options_description pos;
    pos.add("files", -1);
    po::variables_map vm;
    if (!parse_program_options("report", args, desc, pos, vm, ctx)) return 0;
    if (files.empty()) throw usage_error("report: no result files given");
    if (!ctx.is_root()) return 0;
    std::vector<RunTiming> runs;
    for (const auto& f : files) runs.push_back(read_run_timing(f));
    std::stable_sort(runs.begin(), runs.end(),
                     [](const RunTiming& a, const RunTiming& b) { return a.ranks.size() < b.ranks.size(); });
    const RunTiming base = baseline.empty() ? runs.front() : read_run_timing(baseline);
    std::FILE* out = open_csv(csv);
    print_report(runs, base, vm.count("runs") > 0, out);
    if (out) std::fclose(out);
    if (vm.count("roofline") == 0) return 0;
    for (const RunTiming& r : runs) {
        const std::vector<KernelRecord> k = read_kernels(h5::File::open_read(r.file), "/timing");
        std::printf("\nroofline: %s\n%s", r.file.c_str(), k.empty() ? "  (no /timing/kernels: a run from before them)\n"
                                                                   : format_kernels(k).c_str());
    }
    return 0;
}

const CommandRegistrar reg("report", "scaling-study table (and CSV) over result files", &cmd_report);

}  // namespace
}  // namespace ef

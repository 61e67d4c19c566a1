// SPDX-License-Identifier: MIT
// `ensemblefit report`: one row per run, the way scaling studies are written up.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <boost/program_options.hpp>

#include <ensemblefit/core/error.hpp>

#include "src/cli/commands.hpp"
#include "src/report/timing_file.hpp"

namespace po = boost::program_options;

namespace ef {
namespace {

int cmd_report(const std::vector<std::string>& args, const MpiContext& ctx) {
    po::options_description desc(
        "usage: ensemblefit report FILE.h5 [FILE.h5 ...] [--csv OUT.csv] [--baseline FILE.h5]\n\n"
        "One row per run: ranks, workers, runtime, speedup and scaling efficiency against the\n"
        "baseline (the given one, else the run with the fewest ranks), the POP efficiencies\n"
        "(parallel = load balance x communication; computation scalability and global efficiency\n"
        "against the baseline) and each phase's share of the ranks' total time.\n\noptions");
    std::vector<std::string> files;
    std::string csv, baseline;
    desc.add_options()("help,h", "this text")("csv", po::value<std::string>(&csv), "also write the table as CSV")(
        "baseline", po::value<std::string>(&baseline), "run to compare against (default: fewest ranks)")(
        "files", po::value<std::vector<std::string>>(&files), "result files");
    po::positional_options_description pos;
    pos.add("files", -1);
    po::variables_map vm;
    try {
        po::store(po::command_line_parser(args).options(desc).positional(pos).run(), vm);
        po::notify(vm);
    } catch (const po::error& e) {
        throw usage_error(std::string("report: ") + e.what());
    }
    if (vm.count("help")) {
        if (ctx.is_root()) std::printf("%s\n", [&] { std::ostringstream o; o << desc; return o.str(); }().c_str());
        return 0;
    }
    if (files.empty()) throw usage_error("report: no result files given");
    if (!ctx.is_root()) return 0;

    std::vector<RunTiming> runs;
    for (const auto& f : files) runs.push_back(read_run_timing(f));
    std::stable_sort(runs.begin(), runs.end(),
                     [](const RunTiming& a, const RunTiming& b) { return a.ranks.size() < b.ranks.size(); });
    const RunTiming base = baseline.empty() ? runs.front() : read_run_timing(baseline);

    const char* phases[] = {"setup", "compute", "comm", "sync", "sched", "idle", "io"};
    std::FILE* out = nullptr;
    if (!csv.empty()) {
        out = std::fopen(csv.c_str(), "w");
        if (!out) throw usage_error("report: cannot write --csv " + csv);
        std::fprintf(out, "file,ranks,workers,policy,wall_s,speedup,scaling_efficiency,parallel_efficiency,load_balance,"
                          "communication_efficiency,computation_scalability,global_efficiency");
        for (const char* p : phases) std::fprintf(out, ",%s", p);
        std::fprintf(out, "\n");
    }
    std::printf("%-28s %5s %-14s %-8s %9s %7s %6s %6s %6s %6s %6s %6s | %s\n", "file", "ranks", "workers", "policy",
                "wall_s", "speedup", "scal", "PE", "LB", "CommE", "CompSc", "GE", "phase shares: setup compute comm sync sched idle io");
    for (RunTiming& r : runs) {
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
        std::string name = r.file.size() > 28 ? "..." + r.file.substr(r.file.size() - 25) : r.file;
        std::printf("%-28s %5zu %-14s %-8s %9.3f %7.3f %6.3f %6.3f %6.3f %6.3f %6.3f %6.3f |", name.c_str(),
                    r.ranks.size(), workers.c_str(), r.policy.c_str(), m.runtime, m.speedup, scaling,
                    m.parallel_efficiency, m.load_balance, m.communication_efficiency, m.computation_scalability,
                    m.global_efficiency);
        for (double s : share) std::printf(" %5.1f%%", 100 * s);
        std::printf("\n");
        if (out) {
            std::fprintf(out, "%s,%zu,%s,%s,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f", r.file.c_str(), r.ranks.size(),
                         workers.c_str(), r.policy.c_str(), m.runtime, m.speedup, scaling, m.parallel_efficiency,
                         m.load_balance, m.communication_efficiency, m.computation_scalability, m.global_efficiency);
            for (double s : share) std::fprintf(out, ",%.6f", s);
            std::fprintf(out, "\n");
        }
    }
    std::printf("baseline: %s (%zu ranks, %.3f s). scal = speedup / (ranks / baseline ranks); PE = LB x CommE; "
                "GE = PE x CompSc\n", base.file.c_str(), base.ranks.size(), base.metrics.runtime);
    if (out) std::fclose(out);
    return 0;
}

const CommandRegistrar reg("report", "scaling-study table (and CSV) over result files", &cmd_report);

}  // namespace
}  // namespace ef

// SPDX-License-Identifier: MIT
// `ensemblefit report`: one row per run, the way scaling studies are written up: strong or weak
// scaling per group of runs (GPU ranks, CPU ranks, mixed), where each run's time went, CSV for
// perf/plot_scaling.py.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include <boost/program_options.hpp>

#include <ensemblefit/core/error.hpp>

#include "src/cli/commands.hpp"
#include "src/io/output_file.hpp"
#include "src/report/kernel_roofline.hpp"
#include "src/report/scaling_study.hpp"
#include "src/report/timing_file.hpp"
#include "src/run/run_args.hpp"

namespace po = boost::program_options;

namespace ef {
namespace {

const char* const kPhases[] = {"setup", "compute", "comm", "sync", "sched", "idle", "io"};
const char* const kGroups[] = {"gpu", "cpu", "mixed"};

ScalingInput scaling_input(const RunTiming& r) {
    ScalingInput s;
    s.workers = worker_mix(r.placement);
    if (s.workers.ranks() != static_cast<int>(r.ranks.size()))  // a file without placement rows
        s.workers = WorkerMix{0, static_cast<int>(r.ranks.size()), 0};
    for (const RankTiming& k : r.ranks) s.items += static_cast<double>(k.replicas);
    s.runtime = r.metrics.runtime;
    return s;
}

/// What a report is asked to allow: runs whose ranks shared cores as points of the study
/// (`--include-shared`), and runs that did different work side by side (`--different-work`).
struct StudyOptions {
    std::string baseline;
    ScalingMode forced = ScalingMode::automatic;
    bool include_shared = false;
    bool different_work = false;
};

/// The runs grouped by workers (GPU ranks, CPU ranks, both), each group against its baseline:
/// the given one for its group, else the group's run with the fewest units (GPU ranks, CPU
/// cores) whose ranks had cores of their own. Runs whose ranks shared cores are marked and,
/// unless asked, take no part in the baseline, the mode or the group's claim.
struct Study {
    std::vector<RunTiming> runs;  ///< by group (gpu, cpu, mixed), then units
    std::map<std::string, RunTiming> base;
    std::map<std::string, ScalingMode> mode;  ///< per group: forced, detected, or automatic
    std::vector<std::string> notes;
    bool include_shared = false;
    /// Whether run `r` counts as a point of the study (its ranks had cores of their own, or asked).
    bool counts(const RunTiming& r) const { return include_shared || r.shared_cores.empty(); }
};

std::string group_of(const RunTiming& r) { return scaling_input(r).workers.group(); }
int units_of(const RunTiming& r) { return scaling_input(r).workers.units(); }

/// "key = 50 in a.h5, 10 in b.h5" from work_difference's "key = 50 here, 10 in the file".
std::string name_difference(std::string d, const std::string& a, const std::string& b) {
    const std::string here = " here, ", file = " in the file";
    if (d.size() > file.size() && d.compare(d.size() - file.size(), file.size(), file) == 0)
        d.replace(d.size() - file.size(), file.size(), " in " + b);
    const auto h = d.find(here);
    if (h != std::string::npos) d.replace(h, here.size(), " in " + a + ", ");
    return d;
}

/// Refuses (exit 2, one line naming both files) runs that did different work, unless asked:
/// another config than the first run's (placement and output aside), or, within a group whose
/// mode is detected, replica counts neither the same nor proportional to the units.
void check_same_work(const Study& s, const StudyOptions& o) {
    if (o.different_work || s.runs.empty()) return;
    const std::string ask = ": different work is no scaling point (--different-work compares them anyway)";
    const RunTiming& first = s.runs.front();
    std::vector<const RunTiming*> all;  // the runs and a --baseline given apart
    for (const RunTiming& r : s.runs) all.push_back(&r);
    for (const auto& [g, b] : s.base) all.push_back(&b);
    for (const RunTiming* r : all) {
        const std::string d = work_difference(first.config, r->config, false);
        if (!d.empty())
            throw usage_error("report: " + first.file + " and " + r->file + " did different work (" +
                              name_difference(d, first.file, r->file) + ")" + ask);
    }
    if (o.forced != ScalingMode::automatic) return;  // --strong / --weak: the comparison as asked
    for (const auto& [g, b] : s.base) {
        if (g == "mixed" || s.mode.at(g) != ScalingMode::automatic) continue;
        const ScalingInput bi = scaling_input(b);
        const RunTiming* seen[3] = {nullptr, nullptr, nullptr};  // the first run of each mode
        for (const RunTiming& r : s.runs) {
            const ScalingInput ri = scaling_input(r);
            if (group_of(r) != g || !s.counts(r) || ri.workers.units() == bi.workers.units()) continue;
            const ScalingMode m = scaling_point(ri, bi, ScalingMode::automatic).mode;
            if (!seen[static_cast<int>(m)]) seen[static_cast<int>(m)] = &r;
        }
        const RunTiming* x = seen[0] ? &b : seen[1];
        const RunTiming* y = seen[0] ? seen[0] : seen[2];
        if (!x || !y) continue;
        const ScalingInput xi = scaling_input(*x), yi = scaling_input(*y);
        char what[240];
        std::snprintf(what, sizeof what, "%.0f items on %d unit(s), %.0f on %d: %s", xi.items, xi.workers.units(),
                      yi.items, yi.workers.units(),
                      seen[0] ? "neither the same nor proportional to the cores"
                              : "one the same as the baseline's, the other proportional to the cores");
        throw usage_error("report: " + x->file + " and " + y->file + " did different work (" + what + ")" + ask);
    }
}

Study make_study(std::vector<RunTiming> runs, const StudyOptions& o) {
    const std::string& baseline = o.baseline;
    const ScalingMode forced = o.forced;
    Study s;
    s.include_shared = o.include_shared;
    auto rank_of = [](const std::string& g) { return std::find(std::begin(kGroups), std::end(kGroups), g) - kGroups; };
    std::stable_sort(runs.begin(), runs.end(), [&](const RunTiming& a, const RunTiming& b) {
        const auto ga = rank_of(group_of(a)), gb = rank_of(group_of(b));
        return ga != gb ? ga < gb : units_of(a) != units_of(b) ? units_of(a) < units_of(b) : a.ranks.size() < b.ranks.size();
    });
    s.runs = std::move(runs);
    for (const RunTiming& r : s.runs) {  // a group whose every run shared cores keeps its smallest
        const std::string g = group_of(r);
        if (s.base.count(g) == 0 || (!s.counts(s.base[g]) && s.counts(r))) {
            s.base[g] = r;
        } else if (s.counts(r) && units_of(r) == units_of(s.base[g]) && baseline.empty() &&
                   scaling_input(r).items != scaling_input(s.base[g]).items) {
            s.notes.push_back("several " + g + " runs have the fewest cores and different work (" + s.base[g].file +
                              ", " + r.file + "): one study per report, or name the baseline with --baseline");
        }
    }
    if (!baseline.empty()) {
        RunTiming b = read_run_timing(baseline);
        s.base[group_of(b)] = std::move(b);
    }
    for (auto& [g, b] : s.base) {
        std::vector<ScalingInput> in;
        for (const RunTiming& r : s.runs)
            if (group_of(r) == g && s.counts(r)) in.push_back(scaling_input(r));
        s.mode[g] = forced != ScalingMode::automatic ? forced : detect_study_mode(in, scaling_input(b));
    }
    check_same_work(s, o);
    return s;
}

/// A row's numbers: the scaling point against its group's baseline, or for a mixed run its
/// throughput against the GPU-only run with as many GPU ranks ("speedup") and against the
/// sum of its parts' per-rank throughputs ("efficiency").
ScalingPoint point_of(const Study& s, const RunTiming& r, ScalingMode forced) {
    const ScalingInput in = scaling_input(r);
    const std::string g = in.workers.group();
    // the study's mode (forced, or agreed by every run) also labels the runs of the baseline's size
    if (g != "mixed")
        return scaling_point(in, scaling_input(s.base.at(g)), forced != ScalingMode::automatic ? forced : s.mode.at(g));
    ScalingPoint p;
    p.mode = ScalingMode::automatic;
    for (const RunTiming& o : s.runs) {
        const ScalingInput oi = scaling_input(o);
        if (oi.workers.group() == "gpu" && oi.workers.gpu == in.workers.gpu && oi.items > 0 && in.runtime > 0)
            p.speedup = (in.items / in.runtime) / (oi.items / oi.runtime);
    }
    const auto gpu = s.base.find("gpu"), cpu = s.base.find("cpu");
    p.efficiency = mixed_efficiency(in, gpu == s.base.end() ? 0.0 : rank_throughput(scaling_input(gpu->second)),
                                    cpu == s.base.end() ? 0.0 : rank_throughput(scaling_input(cpu->second)));
    return p;
}

std::string mode_label(const std::string& group, const ScalingPoint& p) {
    return group == "mixed" ? std::string("mixed") : to_string(p.mode);
}

/// One row of the table (and of the CSV).
void print_row(const std::string& label, const RunTiming& r, const Study& s, ScalingMode forced, std::FILE* csv) {
    const std::string g = group_of(r);
    PopMetrics m = r.metrics;
    const RunTiming& base = s.base.count(g) ? s.base.at(g) : r;
    apply_baseline(m, r.ranks, base.ranks, base.metrics.runtime);
    const ScalingPoint p = point_of(s, r, forced);
    // POP's computation scalability against the work the baseline would do for this run's
    // (weak scaling: N times its own), so that it is 1 when the compute per item is unchanged
    m.computation_scalability *= g == "mixed" ? 1.0 : p.assumed_work;
    m.global_efficiency = m.parallel_efficiency * m.computation_scalability;
    double total = 0;
    double share[kPhaseCount] = {};
    for (const auto& k : r.ranks) {
        total += k.wall;
        for (int q = 0; q < kPhaseCount; ++q) share[q] += k.phase[static_cast<size_t>(q)];
    }
    for (double& x : share) x = total > 0 ? x / total : 0.0;
    const std::string workers = describe_workers(r.placement);
    const std::string mode = mode_label(g, p);
    const std::string name = label.size() > 28 ? "..." + label.substr(label.size() - 25) : label;
    const ScalingInput in = scaling_input(r);
    const std::string cores = std::to_string(in.workers.units()) + (r.shared_cores.empty() ? "" : "*");
    std::printf("%-28s %5zu %5s %-14s %-8s %-6s %9.3f %7.3f %6.3f %6.3f %6.3f %6.3f %6.3f %6.3f |", name.c_str(),
                r.ranks.size(), cores.c_str(), workers.c_str(), r.policy.c_str(), mode.c_str(), m.runtime, p.speedup, p.efficiency,
                m.parallel_efficiency, m.load_balance, m.communication_efficiency, m.computation_scalability,
                m.global_efficiency);
    for (double x : share) std::printf(" %5.1f%%", 100 * x);
    std::printf("\n");
    if (!csv) return;
    std::fprintf(csv, "%s,%zu,%s,%s,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f", label.c_str(), r.ranks.size(),
                 workers.c_str(), r.policy.c_str(), m.runtime, p.speedup, p.efficiency, m.parallel_efficiency,
                 m.load_balance, m.communication_efficiency, m.computation_scalability, m.global_efficiency);
    for (double x : share) std::fprintf(csv, ",%.6f", x);
    std::fprintf(csv, ",%s,%s,%d,%d,%.0f,%s", mode.c_str(), g.c_str(), in.workers.gpu, in.workers.cpu, in.items,
                 base.file.c_str());
    for (int q = 0; q < kPhaseCount; ++q) {
        double mean = 0, max = 0;
        for (const auto& k : r.ranks) {
            mean += k.phase[static_cast<size_t>(q)] / static_cast<double>(r.ranks.size());
            max = std::max(max, k.phase[static_cast<size_t>(q)]);
        }
        std::fprintf(csv, ",%.6f,%.6f", mean, max);
    }
    std::fprintf(csv, ",%d,%d\n", in.workers.units(), r.shared_cores.empty() ? 0 : 1);
}

/// The CSV's table, built in memory (`buf`, `len`) and written through the output guard at the end.
std::FILE* open_csv(const std::string& path, char** buf, size_t* len) {
    if (path.empty()) return nullptr;
    std::FILE* out = open_memstream(buf, len);
    if (!out) throw runtime_error("report: --csv " + path + ": no memory for the table");
    std::fprintf(out, "file,ranks,workers,policy,wall_s,speedup,scaling_efficiency,parallel_efficiency,load_balance,"
                      "communication_efficiency,computation_scalability,global_efficiency");
    for (const char* p : kPhases) std::fprintf(out, ",%s", p);
    std::fprintf(out, ",mode,group,gpu_ranks,cpu_ranks,items,baseline");
    for (const char* p : kPhases) std::fprintf(out, ",%s_mean_s,%s_max_s", p, p);
    std::fprintf(out, ",cores,shared_cores\n");
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

/// Where each run's time went: per phase, the mean over its ranks and the slowest rank's
/// seconds (set-up that every rank repeats shows as a large mean; rank 0's output as a large
/// max with a small mean).
void print_phases(const std::vector<RunTiming>& runs) {
    std::printf("\nwhere the time went, seconds per phase: mean over the ranks / the largest rank's\n%-28s %5s %9s",
                "file", "ranks", "wall_s");
    for (const char* p : kPhases) std::printf(" %15s", p);
    std::printf("\n");
    for (const RunTiming& r : runs) {
        const std::string name = r.file.size() > 28 ? "..." + r.file.substr(r.file.size() - 25) : r.file;
        std::printf("%-28s %5zu %9.3f", name.c_str(), r.ranks.size(), r.metrics.runtime);
        for (int q = 0; q < kPhaseCount; ++q) {
            double mean = 0, max = 0;
            for (const auto& k : r.ranks) {
                mean += k.phase[static_cast<size_t>(q)] / static_cast<double>(r.ranks.size());
                max = std::max(max, k.phase[static_cast<size_t>(q)]);
            }
            char cell[40];
            std::snprintf(cell, sizeof cell, "%.3f/%.3f", mean, max);
            std::printf(" %15s", cell);
        }
        std::printf("\n");
    }
}

/// Whether every run of group `g` has its baseline's units (then nothing scaled).
bool one_size(const Study& s, const std::string& g) {
    for (const RunTiming& r : s.runs)
        if (group_of(r) == g && units_of(r) != units_of(s.base.at(g))) return false;
    return true;
}

/// One line per group: its mode, how it was decided, its baseline and the efficiency formula.
void print_study(const Study& s, ScalingMode forced) {
    for (const auto& [g, b] : s.base) {
        const ScalingMode m = s.mode.at(g);
        const char* how = forced != ScalingMode::automatic ? "as asked"
                          : m == ScalingMode::strong       ? "detected: the same total work on every run"
                          : m == ScalingMode::weak         ? "detected: work proportional to the ranks"
                                                           : "the runs' work is neither constant nor proportional "
                                                             "to the ranks: speedup = work ratio x T1/TN";
        if (g == "mixed") {
            std::printf("mixed (GPU and CPU ranks): speedup = throughput / that of the GPU-only run with as many GPU "
                        "ranks; efficiency = throughput / (GPU ranks x a GPU rank's + CPU ranks x a CPU rank's "
                        "throughput, from the gpu and cpu baselines; a part without one counts 0)\n");
            continue;
        }
        if (forced == ScalingMode::automatic && one_size(s, g)) {
            std::printf("%s ranks: every run on %zu rank(s), nothing scaled; baseline %s (%.3f s)\n", g.c_str(),
                        b.ranks.size(), b.file.c_str(), b.metrics.runtime);
            continue;
        }
        std::printf("%s ranks: %s scaling (%s); baseline %s (%zu rank(s), %.3f s); %s\n", g.c_str(), to_string(m), how,
                    b.file.c_str(), b.ranks.size(), b.metrics.runtime,
                    m == ScalingMode::weak     ? "efficiency = T1/TN, speedup = N x T1/TN (scaled)"
                    : m == ScalingMode::strong ? "speedup = T1/TN, efficiency = speedup / N"
                                               : "efficiency = speedup / N");
    }
    for (const auto& [g, b] : s.base) {  // the claim: the largest point that counts
        const RunTiming* top = nullptr;
        for (const RunTiming& r : s.runs)
            if (g != "mixed" && group_of(r) == g && s.counts(r) && units_of(r) > units_of(b) &&
                (!top || units_of(r) > units_of(*top)))  // of equal cores, the fewest ranks
                top = &r;
        if (!top) continue;
        const ScalingPoint p = point_of(s, *top, forced);
        std::printf("%s ranks: at %d %s, %s efficiency %.3f (speedup %.3f, %s)%s\n", g.c_str(), units_of(*top),
                    g == "gpu" ? "GPU ranks" : "cores", to_string(p.mode), p.efficiency, p.speedup, top->file.c_str(),
                    s.include_shared ? "" : " of the runs whose ranks had cores of their own");
    }
    bool shared = false;
    for (const RunTiming& r : s.runs) {
        if (r.shared_cores.empty()) continue;
        if (!shared)
            std::printf("* ranks without cores of their own (their time is no measure of their cores): %s\n",
                        s.include_shared ? "counted as points all the same (--include-shared)"
                                         : "left out of the baseline, the mode and the claims above "
                                           "(--include-shared puts them back)");
        shared = true;
        std::printf("  %s: %s\n", r.file.c_str(), r.shared_cores.c_str());
    }
    for (const std::string& n : s.notes) std::printf("note: %s\n", n.c_str());
}

/// The table over the study's runs (each file's totals over its run records; with `per_run`,
/// every record on its own row below its file's).
void print_report(const Study& s, ScalingMode forced, bool per_run, std::FILE* csv) {
    std::printf("%-28s %5s %5s %-14s %-8s %-6s %9s %7s %6s %6s %6s %6s %6s %6s | %s\n", "file", "ranks", "cores", "workers",
                "policy", "mode", "wall_s", "speedup", "eff", "PE", "LB", "CommE", "CompSc", "GE",
                "phase shares: setup compute comm sync sched idle io");
    for (const RunTiming& r : s.runs) {
        print_row(r.file + (r.runs.size() > 1 ? " (" + std::to_string(r.runs.size()) + " runs)" : ""), r, s, forced,
                  csv);
        if (r.runs.size() == 1) print_predicted(r);
        if (!per_run) continue;
        for (size_t k = 0; k < r.runs.size(); ++k) {
            print_row("  run " + std::to_string(k), r.runs[k], s, forced, csv);
            print_predicted(r.runs[k]);
            std::printf("    %s  %s\n", r.runs[k].date.c_str(), r.runs[k].command.c_str());
        }
    }
    print_study(s, forced);
    std::printf("PE = LB x CommE; GE = PE x CompSc (POP, against the group's baseline); a file that several runs "
                "worked on (--resume, merge) counts their sum\n");
    print_phases(s.runs);
}

ScalingMode forced_mode(const po::variables_map& vm) {
    if (vm.count("weak") && vm.count("strong")) throw usage_error("report: --weak and --strong exclude each other");
    return vm.count("weak") ? ScalingMode::weak : vm.count("strong") ? ScalingMode::strong : ScalingMode::automatic;
}

int cmd_report(const std::vector<std::string>& args, const MpiContext& ctx) {
    po::options_description desc(
        "usage: ensemblefit report FILE.h5 [FILE.h5 ...] [--csv OUT.csv] [--baseline FILE.h5] [--weak|--strong]\n"
        "                          [--include-shared] [--different-work] [--runs] [--roofline] [--overwrite]\n\n"
        "One row per file, grouped by workers (GPU ranks, CPU ranks, both). Each group is a scaling\n"
        "study against its baseline (the given one, else its run with the fewest cores): strong when\n"
        "every run did the same total work (speedup T1/TN, efficiency speedup/N), weak when the work\n"
        "grew with the cores (efficiency T1/TN, scaled speedup N x T1/TN), detected from the items\n"
        "(replicas, positions) the ranks did unless --weak or --strong says. N counts cores (CPU\n"
        "ranks x threads) and GPU ranks. Runs whose ranks shared cores or had more threads than cores\n"
        "(their stored placement says so) are marked * and left out of the baseline, the mode and the\n"
        "claims unless --include-shared. Runs of other configs, or whose replicas are neither the same\n"
        "nor proportional to the cores, are refused unless --different-work. A mixed run is set\n"
        "against the GPU-only run with as many GPUs and against its parts' throughputs. Then the POP\n"
        "efficiencies (parallel = load balance x communication; computation scalability and global\n"
        "efficiency against the baseline), each phase's share of the ranks' time, and where each run's\n"
        "time went in seconds. Plot the CSV with perf/plot_scaling.py. A file that several runs worked\n"
        "on (--resume, or shards joined by merge) counts the sum of their records.\n\noptions");
    std::vector<std::string> files;
    std::string csv, baseline;
    desc.add_options()("help,h", "this text")("csv", po::value<std::string>(&csv), "also write the table as CSV")(
        "baseline", po::value<std::string>(&baseline), "run to compare its group against (default: fewest cores)")(
        "weak", "weak scaling: the work grew with the ranks (default: detected)")(
        "strong", "strong scaling: the same work on every run (default: detected)")(
        "runs", "also one row per run record of each file, with its date and command line")(
        "overwrite", "replace an existing --csv file")(
        "include-shared", "count runs whose ranks shared cores as points of the study (they are still marked)")(
        "different-work", "compare runs of other configs or replica counts (default: refused)")(
        "roofline", "also each file's model work (/timing/kernels): FLOPs, bytes, time, rates, fraction of ceiling")(
        "files", po::value<std::vector<std::string>>(&files), "result files");
    po::positional_options_description pos;
    pos.add("files", -1);
    po::variables_map vm;
    if (!parse_program_options("report", args, desc, pos, vm, ctx)) return 0;
    if (files.empty()) throw usage_error("report: no result files given");
    const ScalingMode forced = forced_mode(vm);
    if (!ctx.is_root()) return 0;
    std::vector<std::string> inputs = files;
    inputs.push_back(baseline);
    if (!csv.empty()) check_output_file(csv, "report: --csv", vm.count("overwrite") > 0, inputs);
    std::vector<RunTiming> runs;
    for (const auto& f : files) runs.push_back(read_run_timing(f));
    StudyOptions opt;
    opt.baseline = baseline;
    opt.forced = forced;
    opt.include_shared = vm.count("include-shared") > 0;
    opt.different_work = vm.count("different-work") > 0;
    const Study study = make_study(std::move(runs), opt);
    char* table = nullptr;
    size_t table_size = 0;
    std::FILE* out = open_csv(csv, &table, &table_size);
    print_report(study, forced, vm.count("runs") > 0, out);
    if (out) {
        std::fclose(out);
        const std::string text(table, table_size);
        std::free(table);
        write_output_file(csv, "report: --csv", text);
    }
    if (out) std::printf("plot: /usr/bin/python3 perf/plot_scaling.py %s -o scaling.png\n", csv.c_str());
    if (vm.count("roofline") == 0) return 0;
    for (const RunTiming& r : study.runs) {
        const std::vector<KernelRecord> k = read_kernels(h5::File::open_read(r.file), "/timing");
        std::printf("\nroofline: %s\n%s", r.file.c_str(), k.empty() ? "  (no /timing/kernels: a run from before them)\n"
                                                                   : format_kernels(k).c_str());
    }
    return 0;
}

const CommandRegistrar reg("report", "scaling-study table (and CSV) over result files", &cmd_report);

}  // namespace
}  // namespace ef

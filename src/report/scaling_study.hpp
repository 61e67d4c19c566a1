// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <vector>

namespace ef {

/// How a study's runs relate: strong (the same total work on more ranks) or weak (work
/// proportional to the ranks). `automatic` asks detect_scaling_mode() to decide from the runs.
enum class ScalingMode { automatic, strong, weak };
const char* to_string(ScalingMode m);

/// The workers of a run, from its placement rows: ranks whose worker is a GPU, and the others,
/// with the cores (OpenMP threads) of the others: 1 rank x 2 threads is 2 cores, as 2 x 1 is.
struct WorkerMix {
    int gpu = 0;
    int cpu = 0;
    int cpu_cores = 0;  ///< the CPU ranks' threads summed (0: not known, one core per rank)
    int ranks() const { return gpu + cpu; }
    /// What a scaling study counts: GPU ranks, and cores (ranks x threads) of the CPU ranks.
    int units() const { return gpu + (cpu_cores > 0 ? cpu_cores : cpu); }
    int cpu_units() const { return cpu_cores > 0 ? cpu_cores : cpu; }
    /// "gpu", "cpu" or "mixed": runs of one group are compared with each other.
    std::string group() const;
};

/// Placement rows ("rank\thost\tworker\tthreads\t..."): a worker text starting with "gpu" counts
/// as a GPU rank, every other as a CPU rank with its threads as cores.
WorkerMix worker_mix(const std::vector<std::string>& placement);

/// What a scaling point needs of a run: its workers, the items it processed (replica fits, or
/// scan positions x iterations) and its runtime (the slowest rank's wall seconds).
struct ScalingInput {
    WorkerMix workers;
    double items = 0;
    double runtime = 0;
};

/**
 * One run against the study's baseline (normally its 1-unit run). With work ratio w = items /
 * base items and unit ratio n = units / base units (WorkerMix::units: GPU ranks, CPU cores):
 *   strong (w = 1):  speedup = T_base / T,          efficiency = speedup / n;
 *   weak   (w = n):  speedup = n x T_base / T (scaled speedup), efficiency = T_base / T;
 *   otherwise:       speedup = w x T_base / T (throughput ratio),  efficiency = speedup / n.
 * All three are the throughput ratio against n units' ideal throughput; a forced mode takes
 * w = 1 (strong) or w = n (weak) whatever the items say.
 */
struct ScalingPoint {
    ScalingMode mode = ScalingMode::automatic;  ///< detected or forced; automatic: neither fits
    double work_ratio = 1.0;    ///< items / the baseline's items
    double assumed_work = 1.0;  ///< the work ratio the arithmetic took: 1, unit_ratio or work_ratio
    double unit_ratio = 1.0;
    double speedup = 0.0;
    double efficiency = 0.0;
};

/// The mode whose work ratio (1 for strong, n for weak) is within 10 % of w, or within 50 % and
/// less than half as far (on a log scale) as the other's; automatic when neither is; strong when
/// n == 1 and w == 1 (a baseline is both).
ScalingMode detect_scaling_mode(double work_ratio, double unit_ratio);

ScalingPoint scaling_point(const ScalingInput& run, const ScalingInput& base, ScalingMode forced);

/// The mode of a whole study: every run that is not the baseline's size must agree (strong or
/// weak); automatic when they disagree or none tells (all runs as large as the baseline).
ScalingMode detect_study_mode(const std::vector<ScalingInput>& runs, const ScalingInput& base);

/**
 * A mixed run (GPU and CPU ranks) against what its parts deliver alone: ideal throughput =
 * gpu ranks x one GPU rank's throughput + cpu cores x one CPU core's (items per second per unit,
 * from the studies' own baselines; 0 when the study has no such run). Returns measured /
 * ideal throughput, 0 when no ideal is known.
 */
double mixed_efficiency(const ScalingInput& run, double gpu_rank_throughput, double cpu_rank_throughput);

/// Items per second per unit of a run (its throughput shared evenly over its GPU ranks and cores).
double rank_throughput(const ScalingInput& run);

/// The first setting that makes two runs' work differ, as "key = A_VALUE here, B_VALUE in the file"
/// (empty when none does): their configs (the `canonical_config`, else the `config` attribute) compared key by
/// key, leaving out how a run was placed and written ([run], [output], [sched], [tuning],
/// [debug]) and, with `replicas_too` false, fit.replicas (a study's mode judges those).
std::string work_difference(const std::string& config_a, const std::string& config_b, bool replicas_too);

}  // namespace ef

// SPDX-License-Identifier: MIT
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <ensemblefit/sched/phase_timer.hpp>

namespace ef {

/// One rank's account of a run.
struct RankTiming {
    std::array<double, kPhaseCount> phase{};  ///< seconds per Phase
    double wall = 0.0;
    std::int64_t replicas = 0;  ///< items done by this rank: replica fits, or scan positions
    std::int64_t units = 0;     ///< work units done (replica blocks, or mini-batches)
    std::int64_t mpi_calls = 0;
    std::int64_t mpi_bytes = 0;
    std::vector<double> extra;  ///< the problem's own columns (TimingColumns::extra)
};

/**
 * What a problem calls the counts of RankTiming, and its own per-rank columns: a fit counts
 * replicas in units and MPI messages; a reconstruction counts positions in mini-batches and
 * gradient sums, and adds its gradient time and model traffic. Stored with /timing (attribute
 * `columns`) so that `report` reads any run back.
 */
struct TimingColumns {
    std::string items = "replicas";
    std::string units = "units";
    std::string calls = "mpi_calls";
    std::string bytes = "mpi_bytes";
    std::vector<std::string> extra;
};

/**
 * POP efficiency metrics (https://pop-coe.eu methodology) from per-rank phase times:
 * load balance = mean(compute) / max(compute); communication efficiency = max(compute) /
 * runtime; parallel efficiency = their product. Without an ideal-network replay, transfer
 * efficiency is approximated as (runtime - mean comm) / runtime and serialization efficiency as
 * communication efficiency / transfer efficiency. With a baseline run (fewer ranks, same
 * problem): computation scalability = total compute of the baseline / total compute now, global
 * efficiency = parallel efficiency x computation scalability, speedup = runtime ratio.
 */
struct PopMetrics {
    int ranks = 0;
    double runtime = 0.0;
    double load_balance = 1.0;
    double communication_efficiency = 1.0;
    double parallel_efficiency = 1.0;
    double transfer_efficiency = 1.0;
    double serialization_efficiency = 1.0;
    double computation_scalability = 0.0;  ///< 0 without baseline
    double global_efficiency = 0.0;        ///< 0 without baseline
    double speedup = 0.0;                  ///< 0 without baseline
};

PopMetrics pop_metrics(const std::vector<RankTiming>& ranks);
/// Adds the baseline-relative metrics.
void apply_baseline(PopMetrics& m, const std::vector<RankTiming>& now, const std::vector<RankTiming>& base,
                    double base_runtime);

/// The end-of-run table (phases per rank, the problem's columns, metrics).
std::string format_timing_table(const std::vector<RankTiming>& ranks, const PopMetrics& m,
                                const TimingColumns& columns = {});
/// The same as JSON, for scripts (sidecar file next to the output).
std::string timing_json(const std::vector<RankTiming>& ranks, const PopMetrics& m,
                        const std::vector<std::string>& placement, const std::string& extra_json_fields,
                        const TimingColumns& columns = {});

}  // namespace ef

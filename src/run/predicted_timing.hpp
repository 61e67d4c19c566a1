// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <vector>

#include "src/io/h5.hpp"
#include "src/run/advise_model.hpp"

namespace ef {

/// One row of a prediction file (`ensemblefit advise -o FILE`): a placement and its prediction.
struct PredictedRow {
    advise::Placement placement;
    double wall = 0.0;        ///< seconds of the whole command
    double runtime = 0.0;     ///< seconds of what /timing measures (without launch and exit)
    double efficiency = 0.0;  ///< POP parallel efficiency
    bool recommended = false;
    std::string label() const { return placement.label(); }
};

/**
 * The prediction file: '#' comment lines (what was advised, for whom), a header line, then one
 * tab-separated row per placement: label, ranks, cpu_ranks, threads, gpus, ranks_per_gpu,
 * wall_s, runtime_s, efficiency, recommended (0/1). Plain text so that scripts and people read it too.
 */
void write_prediction_file(const std::string& path, const std::string& comment,
                           const std::vector<advise::Prediction>& rows, size_t recommended);

/// Reads a prediction file; exit 2 when it does not exist, 3 naming FILE:LINE when a row is
/// malformed or there is none.
std::vector<PredictedRow> read_prediction_file(const std::string& path);

/// The row for a run's placement: the same CPU ranks, GPU ranks and threads per CPU rank (a
/// run without CPU ranks matches any threads); nullptr when the file has none.
const PredictedRow* match_prediction(const std::vector<PredictedRow>& rows, int cpu_ranks, int gpu_ranks,
                                     int threads);

/// A run's placement rows ("rank\thost\tworker\tthreads...") as advise counts it.
advise::Placement placement_of(const std::vector<std::string>& rows);

/**
 * Stores the prediction for this run beside its measured timing, as attributes of `group`
 * (/timing and the run's record): predicted_wall_seconds (the whole command),
 * predicted_runtime_seconds (comparable with runtime_seconds), predicted_parallel_efficiency,
 * predicted_placement, prediction_file. A run whose placement the file does not hold gets the
 * recommended row with predicted_placement_matches = 0 and a warning on stderr.
 */
void store_prediction(h5::File& f, const std::vector<std::string>& groups, const std::string& path,
                      const std::vector<std::string>& placement);

}  // namespace ef

// SPDX-License-Identifier: MIT
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/core/replica_block.hpp>
#include <ensemblefit/core/ensemble_summary.hpp>

#include "src/io/h5.hpp"
#include "src/io/results_file.hpp"

namespace ef {

/// One paragraph: model, data size, parameters, replicas, shard.
void print_problem(const FitProblem& pb, const RunIdentity& id, std::ostream& os);
/// The end-of-run table: the summary table of `ensemblefit summary` (results_summary.hpp) for
/// the open output: central fit with its errors, ensemble statistics, replica outcomes in words.
void print_summary(const FitProblem& pb, const h5::File& file, const ReplicaBlock& replicas,
                   const EnsembleSummary& s, std::ostream& os);
/// The summary table of the result file `path` (read-only): what `merge` ends with.
void print_file_summary(const std::string& path, std::ostream& os);

}  // namespace ef

// SPDX-License-Identifier: MIT
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/fit/replica_block.hpp>
#include <ensemblefit/report/ensemble_summary.hpp>

#include "src/io/h5.hpp"
#include "src/io/results_file.hpp"

namespace ef {

/// One paragraph: model, data size, parameters, replicas, shard.
void print_problem(const FitProblem& pb, const RunIdentity& id, std::ostream& os);
/// The end-of-run table: central fit with its errors, ensemble statistics, replica outcomes.
void print_summary(const FitProblem& pb, const h5::File& file, const ReplicaBlock& replicas,
                   const EnsembleSummary& s, std::ostream& os);

}  // namespace ef

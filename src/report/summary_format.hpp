// SPDX-License-Identifier: MIT
#pragma once

#include <ostream>

#include "src/report/results_summary.hpp"

namespace ef {

/// The three formats of write_results_summary() (results_summary.hpp documents them).
void write_summary_table(const ResultsSummary& s, bool all_correlations, std::ostream& os);
void write_summary_csv(const ResultsSummary& s, std::ostream& os);
void write_summary_json(const ResultsSummary& s, std::ostream& os);

}  // namespace ef

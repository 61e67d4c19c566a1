// SPDX-License-Identifier: MIT
#pragma once

#include <vector>

#include "src/report/kernel_roofline.hpp"

namespace ef {

struct FitProblem;

/**
 * The fit's rows of /timing/kernels from its workers' phases summed over the ranks
 * (gather_kernel_sums): the GEMMs' FLOPs and bytes as the launchers counted them; the moments'
 * and LM steps' FLOPs estimated from the model's counted cost (per column: prepare(), and
 * 2 nfree per value of the product read); the per-replica paths' "lm" as --dry-run counts an LM
 * iteration, times the iterations run. GPU rows are set against `gpu` (the probed ceilings).
 */
std::vector<KernelRecord> fit_kernel_records(const FitProblem& pb, const std::vector<KernelSum>& sums,
                                             const Ceilings& gpu);

}  // namespace ef

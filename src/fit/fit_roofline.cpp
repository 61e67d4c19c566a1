// SPDX-License-Identifier: MIT
#include "src/fit/fit_roofline.hpp"

#include <algorithm>

#include <ensemblefit/fit/fit_problem.hpp>

#include "kernels/fit/fit_plan.hpp"

namespace ef {

namespace {

int free_params(const FitProblem& pb) {
    int nfree = 0;
    for (const auto& p : pb.config.params) nfree += p.fixed ? 0 : 1;
    return nfree;
}

/// FLOPs, bytes and what they are, of one phase, from what its launcher counted.
void count_phase(const FitProblem& pb, const KernelSum& s, KernelRecord& k) {
    const int nfree = free_params(pb);
    if (s.name == "lm") {  // items: LM iterations
        const int K = qr_dual_width(nfree);
        const double passes = 1.0 + static_cast<double>((nfree + K - 1) / K);
        k.flops = pb.flops_per_iteration() * s.items;
        k.bytes = s.items * passes * pb.data.n * (pb.data.nx + 2) * 8.0;
        k.what = "FLOP counted per LM iteration x iterations; bytes: the data per model pass (estimated)";
    } else if (s.name == "moments") {  // items: columns
        const double prepare = std::max(0.0, pb.model_flops() - pb.data.n * pb.model_flops_per_point());
        k.flops = prepare * s.items;
        k.what = "FLOP: the counted prepare() per moment column (estimated); bytes: the columns written";
    } else if (s.name == "lm_steps") {  // bytes: the product read, 8 per value
        k.flops = s.bytes / 8.0 * 2.0 * nfree;
        k.what = "FLOP: 2 nfree per value of the product (estimated); bytes: the product read";
    } else if (s.name == "gemm" || s.name == "gemm_rhs") {
        k.what = "FLOP and bytes counted: 2 rows K cols; the matrix, columns and product once";
    } else if (s.name == "resample") {
        k.what = "bytes counted: the resampled data written; FLOPs (the generator's) not counted";
    } else {
        k.what = "as the worker counted";
    }
}

}  // namespace

std::vector<KernelRecord> fit_kernel_records(const FitProblem& pb, const std::vector<KernelSum>& sums,
                                             const Ceilings& gpu) {
    std::vector<KernelRecord> out;
    for (const KernelSum& s : sums) {
        KernelRecord k = kernel_record(s, gpu);
        count_phase(pb, s, k);
        k.what += s.gpu ? "; time: CUDA events" : "; time: host clock";
        out.push_back(k);
    }
    return out;
}

}  // namespace ef

// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <vector>

#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/fit/replica_block.hpp>

#include "kernels/fit/lm.hpp"
#include "kernels/fit/lm_batched.hpp"
#include "kernels/fit/lm_gram.hpp"

namespace ef {

/// The parameter arrays a worker hands its LM, in model order (host memory; GPU workers upload
/// them). Internal to the library.
struct ParamArrays {
    std::vector<double> lower, upper, start;
    std::vector<unsigned char> fixed;
    int nfree = 0;

    /// A view of these arrays (or, with other pointers, of their device copies).
    ParamBoundsView view(const double* lo, const double* hi, const unsigned char* fx) const {
        return ParamBoundsView{static_cast<int>(lower.size()), lo, hi, fx};
    }
    ParamBoundsView view() const { return view(lower.data(), upper.data(), fixed.data()); }
};

inline ParamArrays param_arrays(const FitConfig& cfg) {
    ParamArrays a;
    for (const ParamSpec& s : cfg.params) {
        a.lower.push_back(s.lower);
        a.upper.push_back(s.upper);
        a.start.push_back(s.start);
        a.fixed.push_back(s.fixed ? 1 : 0);
        a.nfree += s.fixed ? 0 : 1;
    }
    return a;
}

inline LmSettings lm_settings(const FitConfig& cfg) {
    LmSettings s;
    s.max_iterations = cfg.max_iterations;
    s.ftol = cfg.ftol;
    s.xtol = cfg.xtol;
    s.gtol = cfg.gtol;
    return s;
}

/// The problem-wide fields of a batch (sizes, resampling, bounds, settings, data, start); the
/// caller sets the per-slot arrays. Pointers may be host or device memory.
inline batched::BatchView batch_view(const FitProblem& pb, int nfree, const ParamBoundsView& bounds,
                                     const double* start, const double* y0, const double* sigma) {
    batched::BatchView b;
    b.n = pb.data.n;
    b.P = pb.num_params();
    b.nfree = nfree;
    b.stride = static_cast<long>(LmScratchLayout(b.n, b.P).total);
    b.bootstrap = pb.config.resample == ResampleMethod::bootstrap ? 1 : 0;
    b.seed = pb.config.seed;
    b.bounds = bounds;
    b.settings = lm_settings(pb.config);
    b.y0 = y0;
    b.sigma = sigma;
    b.start = start;
    return b;
}

/// The problem-wide fields of a Gram-path batch (kernels/fit/lm_gram.hpp); the caller sets the
/// per-slot arrays. Pointers may be host or device memory.
inline gram::GramView gram_view(const FitProblem& pb, const ParamBoundsView& bounds, const int* free_idx,
                                int nfree, long Kt, const double* start, const double* u0) {
    gram::GramView v;
    v.P = pb.num_params();
    v.nfree = nfree;
    v.Kt = Kt;
    v.bounds = bounds;
    v.settings = lm_settings(pb.config);
    v.free_idx = free_idx;
    v.start = start;
    v.u0 = u0;
    return v;
}

/// Row t of a block from one replica's outcome; its parameters from `p` when not null (a GPU
/// worker downloads them straight into the block).
inline void store_outcome(ReplicaBlock& out, std::size_t t, std::int64_t replica, const LmOutcome& o,
                          const double* p) {
    out.index[t] = replica;
    if (p != nullptr) std::copy(p, p + out.P, out.params.begin() + static_cast<std::ptrdiff_t>(t * out.P));
    out.chi2[t] = o.chi2;
    out.status[t] = static_cast<std::int64_t>(o.status);
    out.iterations[t] = o.iterations;
}

}  // namespace ef

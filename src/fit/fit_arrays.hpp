// SPDX-License-Identifier: MIT
#pragma once

#include <vector>

#include <ensemblefit/fit/fit_problem.hpp>

#include "kernels/fit/lm.hpp"
#include "kernels/fit/lm_batched.hpp"

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

}  // namespace ef

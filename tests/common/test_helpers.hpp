// SPDX-License-Identifier: MIT
// Helpers the unit tests and the GPU tests (tests/gpu/gpu_fixture.hpp) share, CUDA-free: a fit
// problem loaded as a run loads it, and a reconstruction worker's gradients and Adam steps.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include <ensemblefit/config/fit_config.hpp>
#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/recon/recon_worker.hpp>

#include "src/fit/correlated.hpp"

namespace ef_test {

/// The problem a run of `ini` fits, correlated uncertainties whitened as a run whitens them with
/// `threads` threads (inputs/dis-mellin.ini: its table becomes L^-1 T, so chi2 = r^T C^-1 r;
/// src/fit/correlated.hpp).
inline ef::FitProblem load_problem(const std::string& ini, const std::vector<std::string>& overrides = {},
                                   int threads = 8) {
    ef::FitConfig cfg = ef::load_fit_config(ini, overrides);
    ef::DataTable data;
    ef::CorrelatedInputs correlated;
    ef::load_fit_data(cfg, data, correlated);  // as the run loads it: commondata sets included
    ef::FitProblem pb = ef::make_fit_problem(cfg, std::move(data));
    ef::whiten_problem(pb, correlated, threads);
    return pb;
}

/// The batch's gradients (object and probe) as the worker returns them; its terms in `t`.
inline std::vector<double> batch_gradients(ef::ReconWorker& w, const ef::ReconBatch& b, ef::ReconBatchTerms& t) {
    t = w.gradients(b, true, true);
    size_t count = 0;
    const double* p = w.gradient_buffer(true, count);
    return std::vector<double>(p, p + count);
}

/// max |a - ref| / max |ref| (the absolute difference where ref is all zero).
inline double max_rel_diff(const std::vector<double>& a, const std::vector<double>& ref) {
    double m = 0, d = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        m = std::max(m, std::abs(ref[i]));
        d = std::max(d, std::abs(a[i] - ref[i]));
    }
    return m > 0 ? d / m : d;
}

/// `count` Adam steps on batch `b` (object and probe; fixed gradient scale).
inline void adam_steps(ef::ReconWorker& w, const ef::ReconBatch& b, int count) {
    for (int t = 1; t <= count; ++t) {
        ef::ReconBatchTerms terms;
        batch_gradients(w, b, terms);
        ef::ReconUpdate u;
        u.probe = true;
        u.grad_scale = 1e-3;
        u.lr_p0 = u.lr_p1 = 1e-2;
        u.lr_probe = 0.05;
        u.t_object = u.t_probe = t;
        w.update(u);
    }
}

}  // namespace ef_test

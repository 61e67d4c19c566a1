// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include <ensemblefit/core/replica_block.hpp>

#include "kernels/fit/fit_inputs.hpp"
#include "kernels/fit/fit_plan.hpp"
#include "kernels/fit/lm.hpp"
#include "kernels/fit/lm_normal.hpp"
#include "kernels/fit/plan_dispatch.hpp"
#include "kernels/fit/resample.hpp"

namespace ef::cpu {

/**
 * The per-replica CPU paths (qr, normal) as templates on the model: the built-in models
 * instantiate them in kernels/cpu/fit_kernels.cpp, a model plugin in its own shared library
 * (kernels/plugin/model_plugin_entry.hpp), so a plugin runs the same code as a built-in. OpenMP
 * threads take one replica at a time; results go to out[0..count) in input order (out sized by
 * the caller), replica 0 also gets its covariance.
 */
template <int K, class Model>
void fit_with(const Model& model, const FitPlan& plan, const FitDataView& data, const std::int64_t* replicas,
              int count, int threads, ReplicaBlock& out) {
    const int P = plan.num_params();
    const int n = data.n;
    const ParamBoundsView bounds = plan.params.view();
    const std::vector<double>& start = plan.params.start;
    const LmWorkspaceLayout<K> layout(n, P, model.workspace_size());

#pragma omp parallel num_threads(threads)
    {
        std::vector<double> work(layout.total), y(static_cast<size_t>(n)), w(static_cast<size_t>(n));
        std::vector<double> p(static_cast<size_t>(P)), cov(static_cast<size_t>(P) * P);
#pragma omp for schedule(dynamic, 1)
        for (int t = 0; t < count; ++t) {
            const std::int64_t r = replicas[t];
            resample_replica(plan.bootstrap ? 1 : 0, plan.seed, static_cast<std::uint64_t>(r), n, data.y, data.sigma,
                             y.data(), w.data());
            const FitDataView view{n,           data.nx, data.x, y.data(), data.sigma,
                                   plan.bootstrap ? w.data() : nullptr, data.white};
            p = start;
            const LmOutcome o = lm_fit<K>(model, view, bounds, plan.settings, p.data(), work.data(),
                                          r == 0 ? cov.data() : nullptr);
            store_outcome(out, static_cast<size_t>(t), r, o, p.data());
            if (r == 0) out.covariance = cov;
        }
    }
}

/// The normal path, one replica per thread at a time, in Real arithmetic; `inv_sigma` is
/// normal_inv_sigma<Real>(sigma), made once per run.
template <class Real, int K, class Model>
void fit_normal_with(const Model& model, const FitPlan& plan, const FitDataView& data, const Real* inv_sigma,
                     const std::int64_t* replicas, int count, int threads, ReplicaBlock& out) {
    const int P = plan.num_params();
    const int n = data.n;
    const ParamBoundsView bounds = plan.params.view();

#pragma omp parallel num_threads(threads)
    {
        std::vector<Real> y(static_cast<size_t>(n)), w(static_cast<size_t>(n));
        std::vector<double> p(static_cast<size_t>(P)), cov(static_cast<size_t>(P) * P);
#pragma omp for schedule(dynamic, 16)
        for (int t = 0; t < count; ++t) {
            const std::int64_t r = replicas[t];
            resample_replica_strided<Real>(plan.bootstrap ? 1 : 0, plan.seed, static_cast<std::uint64_t>(r), n,
                                           data.y, data.sigma, y.data(), w.data(), 1);
            const NormalFitData<Real> view{n, data.nx, data.x, inv_sigma, y.data(),
                                           plan.bootstrap ? w.data() : nullptr, 1};
            p = plan.params.start;
            const LmOutcome o = lm_normal_fit<Real, K>(model, view, bounds, plan.settings, p.data(),
                                                       r == 0 ? cov.data() : nullptr);
            store_outcome(out, static_cast<size_t>(t), r, o, p.data());
            if (r == 0) out.covariance = cov;
        }
    }
}

/// The qr path at the plan's dual width.
template <class Model>
void fit_qr_path(const Model& model, const FitPlan& plan, const FitDataView& data, const std::int64_t* replicas,
                 int count, int threads, ReplicaBlock& out) {
    with_dual_width(plan, [&](auto width) {
        fit_with<decltype(width)::value>(model, plan, data, replicas, count, threads, out);
    });
}

/// The normal path in Real (the plan's precision) at the plan's width.
template <class Real, class Model>
void fit_normal_path(const Model& model, const FitPlan& plan, const FitDataView& data, const Real* inv_sigma,
                     const std::int64_t* replicas, int count, int threads, ReplicaBlock& out) {
    if (plan.single_precision != std::is_same_v<Real, float>)
        throw std::logic_error("fit plan: the normal path's precision does not match the entry point");
    with_normal_kernel(model, plan, [&](auto real, auto width) {
        if constexpr (std::is_same_v<decltype(real), Real>)
            fit_normal_with<Real, decltype(width)::value>(model, plan, data, inv_sigma, replicas, count, threads, out);
    });
}

}  // namespace ef::cpu

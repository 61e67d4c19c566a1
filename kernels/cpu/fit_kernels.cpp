// SPDX-License-Identifier: MIT
#include "kernels/cpu/fit_kernels.hpp"

#include <omp.h>

#include <vector>

#include "kernels/fit/lm.hpp"
#include "kernels/fit/resample.hpp"
#include "src/model/compiled_model.hpp"

namespace ef::cpu {
namespace {

template <int K, class Model>
void fit_with(const Model& model, const FitProblem& pb, const std::int64_t* replicas, int count,
              int threads, ReplicaBlock& out) {
    const FitConfig& cfg = pb.config;
    const DataTable& data = pb.data;
    const int P = pb.num_params();
    const int n = data.n;
    std::vector<double> lower(static_cast<size_t>(P)), upper(static_cast<size_t>(P)), start(static_cast<size_t>(P));
    std::vector<unsigned char> fixed(static_cast<size_t>(P));
    for (int q = 0; q < P; ++q) {
        const ParamSpec& s = cfg.params[static_cast<size_t>(q)];
        lower[static_cast<size_t>(q)] = s.lower;
        upper[static_cast<size_t>(q)] = s.upper;
        start[static_cast<size_t>(q)] = s.start;
        fixed[static_cast<size_t>(q)] = s.fixed ? 1 : 0;
    }
    const ParamBoundsView bounds{P, lower.data(), upper.data(), fixed.data()};
    LmSettings settings;
    settings.max_iterations = cfg.max_iterations;
    settings.ftol = cfg.ftol;
    settings.xtol = cfg.xtol;
    settings.gtol = cfg.gtol;
    const bool bootstrap = cfg.resample == ResampleMethod::bootstrap;
    const LmWorkspaceLayout<K> layout(n, P, model.workspace_size());

#pragma omp parallel num_threads(threads)
    {
        std::vector<double> work(layout.total), y(static_cast<size_t>(n)), w(static_cast<size_t>(n));
        std::vector<double> p(static_cast<size_t>(P)), cov(static_cast<size_t>(P) * P);
#pragma omp for schedule(dynamic, 1)
        for (int t = 0; t < count; ++t) {
            const std::int64_t r = replicas[t];
            resample_replica(bootstrap ? 1 : 0, cfg.seed, static_cast<std::uint64_t>(r), n,
                             data.y.data(), data.sigma.data(), y.data(), w.data());
            const FitDataView view{n, data.nx, data.x.data(), y.data(), data.sigma.data(),
                                   bootstrap ? w.data() : nullptr};
            p = start;
            const LmOutcome o = lm_fit<K>(model, view, bounds, settings, p.data(), work.data(),
                                          r == 0 ? cov.data() : nullptr);
            out.index[static_cast<size_t>(t)] = r;
            for (int q = 0; q < P; ++q) out.params[static_cast<size_t>(t) * P + q] = p[static_cast<size_t>(q)];
            out.chi2[static_cast<size_t>(t)] = o.chi2;
            out.status[static_cast<size_t>(t)] = static_cast<std::int64_t>(o.status);
            out.iterations[static_cast<size_t>(t)] = o.iterations;
            if (r == 0) out.covariance = cov;
        }
    }
}

}  // namespace

void fit_replicas(const FitProblem& pb, const std::int64_t* replicas, int count, int threads,
                  ReplicaBlock& out) {
    out.resize(static_cast<size_t>(count), pb.num_params());
    out.covariance.clear();
    int nfree = 0;
    for (const auto& s : pb.config.params) nfree += s.fixed ? 0 : 1;
    std::visit(
        [&](const auto& model) {
            // Dual width: the smallest of 4, 8, 16 that holds every free parameter (wider
            // models take several passes of 16).
            if (nfree <= 4) fit_with<4>(model, pb, replicas, count, threads, out);
            else if (nfree <= 8) fit_with<8>(model, pb, replicas, count, threads, out);
            else fit_with<16>(model, pb, replicas, count, threads, out);
        },
        pb.model->view);
}

}  // namespace ef::cpu

// SPDX-License-Identifier: MIT
#include "kernels/cpu/fit_kernels.hpp"

#include <omp.h>

#include <vector>

#include "kernels/cpu/table_gemm.hpp"
#include "kernels/fit/lm.hpp"
#include "kernels/fit/lm_batched.hpp"
#include "kernels/fit/lm_normal_dispatch.hpp"
#include "kernels/fit/resample.hpp"
#include "src/fit/fit_arrays.hpp"
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
    const ParamArrays pa = param_arrays(cfg);
    const ParamBoundsView bounds = pa.view();
    const LmSettings settings = lm_settings(cfg);
    const std::vector<double>& start = pa.start;
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

/// The normal-equations solver, one replica per thread at a time, in Real arithmetic.
template <class Real, int K, class Model>
void fit_normal_with(const Model& model, const FitProblem& pb, const std::int64_t* replicas, int count,
                     int threads, ReplicaBlock& out) {
    const FitConfig& cfg = pb.config;
    const DataTable& data = pb.data;
    const int P = pb.num_params();
    const int n = data.n;
    const ParamArrays pa = param_arrays(cfg);
    const ParamBoundsView bounds = pa.view();
    const LmSettings settings = lm_settings(cfg);
    const bool bootstrap = cfg.resample == ResampleMethod::bootstrap;
    const std::vector<Real> inv_sigma = normal_inv_sigma<Real>(data.sigma);

#pragma omp parallel num_threads(threads)
    {
        std::vector<Real> y(static_cast<size_t>(n)), w(static_cast<size_t>(n));
        std::vector<double> p(static_cast<size_t>(P)), cov(static_cast<size_t>(P) * P);
#pragma omp for schedule(dynamic, 16)
        for (int t = 0; t < count; ++t) {
            const std::int64_t r = replicas[t];
            resample_replica_strided<Real>(bootstrap ? 1 : 0, cfg.seed, static_cast<std::uint64_t>(r), n,
                                           data.y.data(), data.sigma.data(), y.data(), w.data(), 1);
            const NormalFitData<Real> view{n, data.nx, data.x.data(), inv_sigma.data(), y.data(),
                                           bootstrap ? w.data() : nullptr, 1};
            p = pa.start;
            const LmOutcome o = lm_normal_fit<Real, K>(model, view, bounds, settings, p.data(),
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

/// Host arrays behind a batched::BatchView.
struct BatchStorage {
    std::vector<double> work, params, y, w, cov;
    std::vector<LmState> state;
    std::vector<int> request;
    std::vector<std::int64_t> replica;
    std::vector<batched::JDual> pd;
    std::vector<batched::JNorm> jnorm;
    std::vector<batched::VNorm> vnorm;
};

/**
 * The batched table-model path on the CPU: rounds of (moments per slot, one GEMM for all
 * requests, LM steps per slot) until every replica is done (kernels/fit/lm_batched.hpp).
 */
void fit_table_batched(const DisMellinModel& model, const PackedTable& packed, const FitProblem& pb,
                       const std::int64_t* replicas, int count, int threads, ReplicaBlock& out) {
    using namespace batched;
    const FitConfig& cfg = pb.config;
    const DataTable& data = pb.data;
    const int P = pb.num_params();
    const int n = data.n;
    BatchStorage st;
    const ParamArrays pa = param_arrays(cfg);
    const LmScratchLayout layout(n, P);
    BatchView b = batch_view(pb, pa.nfree, pa.view(), pa.start.data(), data.y.data(), data.sigma.data());
    const size_t slots = static_cast<size_t>(count);
    st.work.resize(slots * layout.total);
    st.params.resize(slots * P);
    st.y.resize(slots * n);
    st.w.resize(slots * n);
    st.state.resize(slots);
    st.request.resize(slots);
    st.replica.assign(replicas, replicas + count);
    st.pd.resize(slots * P);
    st.jnorm.resize(slots);
    st.vnorm.resize(slots);
    st.cov.assign(static_cast<size_t>(P) * P, 0.0);
    b.work = st.work.data();
    b.params = st.params.data();
    b.y = st.y.data();
    b.w = st.w.data();
    b.state = st.state.data();
    b.request = st.request.data();
    b.replica = st.replica.data();
    b.pd = st.pd.data();
    b.jnorm = st.jnorm.data();
    b.vnorm = st.vnorm.data();
    b.cov = st.cov.data();
    for (int s = 0; s < count; ++s)
        if (replicas[s] == 0) b.cov_slot = s;

#pragma omp parallel for num_threads(threads) schedule(static)
    for (int s = 0; s < count; ++s) start_slot(b, s);

    const long Kt = model.table_width();
    const int nodes = model.nodes_count();
    std::vector<int> list, kind;
    std::vector<long> col_of;  // first W column of each listed slot
    std::vector<int> owner;    // listed slot of each W column
    std::vector<double> W;
    while (true) {
        list.clear();
        kind.clear();
        col_of.clear();
        owner.clear();
        long cols = 0;
        for (int s = 0; s < count; ++s) {
            const int q = st.request[static_cast<size_t>(s)];
            if (q == static_cast<int>(LmRequest::done)) continue;
            const int k = q == static_cast<int>(LmRequest::jacobian) ? kJacobian : kResiduals;
            list.push_back(s);
            kind.push_back(k);
            col_of.push_back(cols);
            for (int c = 0; c < columns_for(b, k); ++c) owner.push_back(static_cast<int>(list.size() - 1));
            cols += columns_for(b, k);
        }
        if (list.empty()) break;
        const int m = static_cast<int>(list.size());
        W.resize(static_cast<size_t>(cols) * Kt);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
        for (int t = 0; t < m; ++t) {
            prepare_slot(model, b, list[t], kind[t]);
            for (int k = 0; k < nodes; ++k) node_columns(model, b, list[t], kind[t], k, W.data(), col_of[t]);
        }
        table_gemm(packed, W.data(), cols, threads, [&](int i0, long c0, const double* tile) {
            for (int jj = 0; jj < 8 && c0 + jj < cols; ++jj) {
                const int t = owner[static_cast<size_t>(c0 + jj)];
                const int j = static_cast<int>(c0 + jj - col_of[static_cast<size_t>(t)]);
                for (int ii = 0; ii < 4 && i0 + ii < n; ++ii)
                    store_output(b, list[static_cast<size_t>(t)], kind[static_cast<size_t>(t)], j, i0 + ii,
                                 tile[ii * 8 + jj]);
            }
        });
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
        for (int t = 0; t < m; ++t) finish_slot(SerialLanes{}, b, list[t], kind[t]);
    }

    for (int s = 0; s < count; ++s) {
        const LmOutcome o = lm_outcome(st.state[static_cast<size_t>(s)]);
        out.index[static_cast<size_t>(s)] = replicas[s];
        for (int q = 0; q < P; ++q) out.params[static_cast<size_t>(s) * P + q] = st.params[static_cast<size_t>(s) * P + q];
        out.chi2[static_cast<size_t>(s)] = o.chi2;
        out.status[static_cast<size_t>(s)] = static_cast<std::int64_t>(o.status);
        out.iterations[static_cast<size_t>(s)] = o.iterations;
        if (replicas[s] == 0) out.covariance = st.cov;
    }
}

}  // namespace

struct FitContext {
    PackedTable packed;
};

bool uses_table_path(const FitProblem& pb) {
    return std::holds_alternative<DisMellinModel>(pb.model->view) &&
           param_arrays(pb.config).nfree <= batched::kDualWidth;
}

std::shared_ptr<FitContext> make_fit_context(const FitProblem& pb) {
    auto ctx = std::make_shared<FitContext>();
    if (uses_table_path(pb)) {
        const auto& m = std::get<DisMellinModel>(pb.model->view);
        ctx->packed = pack_table(m.table, m.points, m.table_width());
    }
    return ctx;
}

void fit_replicas(const FitProblem& pb, const std::int64_t* replicas, int count, int threads,
                  ReplicaBlock& out, FitContext* ctx) {
    if (!uses_table_path(pb)) {
        fit_replicas_per_replica(pb, replicas, count, threads, out);
        return;
    }
    out.resize(static_cast<size_t>(count), pb.num_params());
    out.covariance.clear();
    std::shared_ptr<FitContext> own;
    if (ctx == nullptr) {
        own = make_fit_context(pb);
        ctx = own.get();
    }
    fit_table_batched(std::get<DisMellinModel>(pb.model->view), ctx->packed, pb, replicas, count, threads, out);
}

void fit_replicas_per_replica(const FitProblem& pb, const std::int64_t* replicas, int count, int threads,
                              ReplicaBlock& out) {
    out.resize(static_cast<size_t>(count), pb.num_params());
    out.covariance.clear();
    const int nfree = param_arrays(pb.config).nfree;
    if (pb.config.solver == FitSolver::normal) {
        std::visit(
            [&](const auto& model) {
                dispatch_normal(model, pb.config, pb.num_params(), [&](auto real, auto width) {
                    fit_normal_with<decltype(real), decltype(width)::value>(model, pb, replicas, count, threads, out);
                });
            },
            pb.model->view);
        return;
    }
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

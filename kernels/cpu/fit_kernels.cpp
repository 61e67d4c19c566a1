// SPDX-License-Identifier: MIT
#include "kernels/cpu/fit_kernels.hpp"

#include <omp.h>

#include <vector>

#include "kernels/cpu/table_gemm.hpp"
#include "kernels/fit/lm.hpp"
#include "kernels/fit/lm_batched.hpp"
#include "kernels/fit/lm_gram.hpp"
#include "kernels/fit/lm_normal_dispatch.hpp"
#include "kernels/fit/resample.hpp"
#include "kernels/fit/round_plan.hpp"
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
            store_outcome(out, static_cast<size_t>(t), r, o, p.data());
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
            store_outcome(out, static_cast<size_t>(t), r, o, p.data());
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
    RoundPlan plan;
    std::vector<double> W;
    while (plan.build(st.request.data(), count, [&](int k) { return columns_for(b, k); })) {
        const int m = plan.size();
        W.resize(static_cast<size_t>(plan.cols) * Kt);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
        for (int t = 0; t < m; ++t) {
            prepare_slot(model, b, plan.slot[t], plan.kind[t]);
            for (int k = 0; k < nodes; ++k) node_columns(model, b, plan.slot[t], plan.kind[t], k, W.data(), plan.col0[t]);
        }
        table_gemm(packed, W.data(), plan.cols, threads, [&](int i0, long c0, const double* tile) {
            for (int jj = 0; jj < 8 && c0 + jj < plan.cols; ++jj) {
                const size_t t = static_cast<size_t>(plan.owner[static_cast<size_t>(c0 + jj)]);
                const int j = static_cast<int>(c0 + jj - plan.col0[t]);
                for (int ii = 0; ii < 4 && i0 + ii < n; ++ii)
                    store_output(b, plan.slot[t], plan.kind[t], j, i0 + ii, tile[ii * 8 + jj]);
            }
        });
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
        for (int t = 0; t < m; ++t) finish_slot(SerialLanes{}, b, plan.slot[t], plan.kind[t]);
    }

    for (int s = 0; s < count; ++s) {
        store_outcome(out, static_cast<size_t>(s), replicas[s], lm_outcome(st.state[static_cast<size_t>(s)]),
                      st.params.data() + static_cast<size_t>(s) * P);
        if (replicas[s] == 0) out.covariance = st.cov;
    }
}

/// Column-major (rows x cols) F = T W from table_gemm's 4 x 8 tiles.
void gemm_into(const PackedTable& t, const double* W, long cols, int threads, double* F) {
    const int rows = t.rows;
    table_gemm(t, W, cols, threads, [&](int i0, long c0, const double* tile) {
        for (int jj = 0; jj < 8 && c0 + jj < cols; ++jj)
            for (int ii = 0; ii < 4 && i0 + ii < rows; ++ii) F[(c0 + jj) * rows + i0 + ii] = tile[ii * 8 + jj];
    });
}

}  // namespace

/**
 * What the Gram path (kernels/fit/lm_gram.hpp) needs once per run, on the host: T^T and
 * T^T W (Kt x n, row-major), the start point's moments u0 and prediction f0 = T u0, 1 / sigma^2,
 * and the free parameters' indices. The CUDA worker uploads these and forms G and each
 * replica's b with its own GEMM kernel (the same bits as table_gemm).
 */
GramInputs make_gram_inputs(const FitProblem& pb, const PackedTable* packed_t, int threads) {
    const auto& m = std::get<DisMellinModel>(pb.model->view);
    const int n = m.points;
    const long Kt = m.table_width();
    GramInputs g;
    g.n = n;
    g.Kt = Kt;
    g.winv.resize(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) g.winv[static_cast<size_t>(i)] = 1.0 / (pb.data.sigma[static_cast<size_t>(i)] * pb.data.sigma[static_cast<size_t>(i)]);
    g.tt.resize(static_cast<size_t>(Kt) * n);
    g.wtt.resize(static_cast<size_t>(Kt) * n);
    for (int i = 0; i < n; ++i)
        for (long k = 0; k < Kt; ++k) {
            const double v = m.table[static_cast<long>(i) * Kt + k];
            g.tt[static_cast<size_t>(k * n + i)] = v;
            g.wtt[static_cast<size_t>(k * n + i)] = v * g.winv[static_cast<size_t>(i)];
        }
    const ParamArrays pa = param_arrays(pb.config);
    for (int q = 0; q < static_cast<int>(pa.fixed.size()); ++q)
        if (!pa.fixed[static_cast<size_t>(q)]) g.free_idx.push_back(q);
    // u0: the moments at the start point (a value request's columns).
    g.u0.assign(static_cast<size_t>(Kt), 0.0);
    const batched::VNorm vn = dis_mellin::normalisation(pa.start.data());
    for (int k = 0; k < m.nodes_count(); ++k) {
        double out[2 * dis_mellin::kNumBasis];
        m.prepare_node(pa.start.data(), vn, k, out);
        for (int e = 0; e < DisMellinModel::node_width(); ++e)
            g.u0[static_cast<size_t>(DisMellinModel::table_column_source(k * DisMellinModel::node_width() + e))] = out[e];
    }
    g.f0.resize(static_cast<size_t>(n));
    PackedTable own;
    if (packed_t == nullptr) {
        own = pack_table(m.table, n, static_cast<int>(Kt));
        packed_t = &own;
    }
    gemm_into(*packed_t, g.u0.data(), 1, threads, g.f0.data());
    return g;
}

namespace {

/**
 * The Gram path on the CPU: b and c per replica, then rounds of (moments per slot, one GEMM with
 * G, the LM per slot) until every replica is done.
 */
void fit_gram_batched(const DisMellinModel& model, const GramCpu& gc, const FitProblem& pb,
                      const std::int64_t* replicas, int count, int threads, ReplicaBlock& out) {
    using namespace gram;
    const GramInputs& g = gc.in;
    const int P = pb.num_params();
    const int n = g.n;
    const long Kt = g.Kt;
    const int nfree = static_cast<int>(g.free_idx.size());
    const size_t slots = static_cast<size_t>(count);
    std::vector<double> params(slots * P), H(slots * Kt * (1 + nfree)), vh(slots * 2 * Kt), bvec(slots * Kt),
        cvec(slots), E(slots * n),
        cov(static_cast<size_t>(P) * P, 0.0);
    std::vector<State> state(slots);
    std::vector<int> request(slots);
    std::vector<batched::JDual> pd(slots * P);
    std::vector<batched::JNorm> jnorm(slots);
    std::vector<batched::VNorm> vnorm(slots);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int s = 0; s < count; ++s)
        replica_columns(n, pb.config.seed, replicas[s], pb.data.y.data(), pb.data.sigma.data(), g.f0.data(),
                        g.winv.data(), E.data() + static_cast<size_t>(s) * n, cvec[static_cast<size_t>(s)]);
    gemm_into(gc.tt, E.data(), count, threads, bvec.data());

    const ParamArrays pa = param_arrays(pb.config);
    GramView v = gram_view(pb, pa.view(), g.free_idx.data(), nfree, Kt, pa.start.data(), g.u0.data());
    v.params = params.data();
    v.state = state.data();
    v.request = request.data();
    v.pd = pd.data();
    v.jnorm = jnorm.data();
    v.vnorm = vnorm.data();
    v.H = H.data();
    v.vh = vh.data();
    v.b = bvec.data();
    v.c = cvec.data();
    v.cov = cov.data();
    for (int s = 0; s < count; ++s)
        if (replicas[s] == 0) v.cov_slot = s;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int s = 0; s < count; ++s) start_slot(v, s);

    const int nodes = model.nodes_count();
    batched::RoundPlan plan;
    std::vector<double> W;
    while (plan.build(request.data(), count, [&](int k) { return columns_for(v, k); })) {
        const int m = plan.size();
        W.resize(static_cast<size_t>(plan.cols) * Kt);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
        for (int t = 0; t < m; ++t) {
            prepare_slot(model, v, plan.slot[t], plan.kind[t]);
            for (int k = 0; k < nodes; ++k) node_columns(model, v, plan.slot[t], plan.kind[t], k, W.data(), plan.col0[t]);
        }
        table_gemm(gc.g, W.data(), plan.cols, threads, [&](int i0, long c0, const double* tile) {
            for (int jj = 0; jj < 8 && c0 + jj < plan.cols; ++jj) {
                const size_t t = static_cast<size_t>(plan.owner[static_cast<size_t>(c0 + jj)]);
                const int j = static_cast<int>(c0 + jj - plan.col0[t]);
                for (int ii = 0; ii < 4 && i0 + ii < Kt; ++ii) store_h(v, plan.slot[t], j, i0 + ii, tile[ii * 8 + jj]);
            }
        });
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
        for (int t = 0; t < m; ++t) finish_slot(SerialLanes{}, v, plan.slot[t], plan.kind[t], W.data(), plan.col0[t]);
    }

    for (int s = 0; s < count; ++s) {
        store_outcome(out, static_cast<size_t>(s), replicas[s], normal_outcome(state[static_cast<size_t>(s)]),
                      params.data() + static_cast<size_t>(s) * P);
        if (replicas[s] == 0) out.covariance = cov;
    }
}

}  // namespace

struct FitContext {
    PackedTable packed;
    std::unique_ptr<GramCpu> gram;
};

bool uses_table_path(const FitProblem& pb) {
    return std::holds_alternative<DisMellinModel>(pb.model->view) &&
           param_arrays(pb.config).nfree <= batched::kDualWidth;
}

bool uses_gram_path(const FitProblem& pb) { return uses_table_path(pb) && pb.config.solver == FitSolver::normal; }

std::shared_ptr<FitContext> make_fit_context(const FitProblem& pb, int threads) {
    auto ctx = std::make_shared<FitContext>();
    if (uses_table_path(pb)) {
        const auto& m = std::get<DisMellinModel>(pb.model->view);
        ctx->packed = pack_table(m.table, m.points, m.table_width());
        if (uses_gram_path(pb)) {
            // G = T^T W T, once: the table GEMM of T^T by the columns of W T.
            auto gc = std::make_unique<GramCpu>();
            gc->in = make_gram_inputs(pb, &ctx->packed, threads);
            const int n = gc->in.n;
            const int Kt = static_cast<int>(gc->in.Kt);
            gc->tt = pack_table(gc->in.tt.data(), Kt, n);
            std::vector<double> G(static_cast<size_t>(Kt) * Kt);
            gemm_into(gc->tt, gc->in.wtt.data(), Kt, threads, G.data());
            gc->g = pack_table(G.data(), Kt, Kt);
            ctx->gram = std::move(gc);
        }
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
        own = make_fit_context(pb, threads);
        ctx = own.get();
    }
    if (ctx->gram) {
        fit_gram_batched(std::get<DisMellinModel>(pb.model->view), *ctx->gram, pb, replicas, count, threads, out);
        return;
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

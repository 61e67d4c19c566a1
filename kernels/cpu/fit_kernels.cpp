// SPDX-License-Identifier: MIT
#include "kernels/cpu/fit_kernels.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <span>
#include <type_traits>
#include <vector>

#include "kernels/core/kernel_tally.hpp"
#include "kernels/cpu/replica_paths.hpp"
#include "kernels/cpu/table_gemm.hpp"
#include "kernels/fit/batch_arrays.hpp"
#include "kernels/fit/lm.hpp"
#include "kernels/fit/lm_batched.hpp"
#include "kernels/fit/lm_gram.hpp"
#include "kernels/fit/lm_normal.hpp"
#include "kernels/fit/plan_dispatch.hpp"
#include "kernels/fit/resample.hpp"
#include "kernels/fit/round_plan.hpp"

namespace ef::cpu {

struct FitContext {
    PackedTable table;                ///< table path: T
    PackedTable tt, g;                ///< Gram path: T^T and G = T^T W T
    std::vector<float> inv_sigma_f;   ///< normal path in float: 1 / sigma
    std::vector<double> inv_sigma_d;  ///< normal path in double: 1 / sigma

    template <class Real>
    const std::vector<Real>& inv_sigma() const {
        if constexpr (std::is_same_v<Real, float>) return inv_sigma_f;
        else return inv_sigma_d;
    }
};

namespace {

/**
 * Rounds until every slot is done, for either batched path (kernels/fit/lm_batched.hpp,
 * lm_gram.hpp): moments per requesting slot, one GEMM of `matrix` (T: rows = n, or G: rows = Kt)
 * with all the round's columns, then each slot's LM steps. `tally` (may be null) gets each
 * phase's host time: moments (items: columns; bytes: W written), the GEMM (2 rows Kt cols FLOP;
 * bytes: the matrix, W and the product once), the LM steps (items: columns; bytes: the product
 * read).
 */
template <class View>
void run_rounds(const DisMellinModel& model, const View& v, int count, const PackedTable& matrix, long rows,
                int threads, KernelTally* tally) {
    const long Kt = model.table_width();
    const int nodes = model.nodes_count();
    batched::RoundPlan plan;
    std::vector<double> W;
    while (plan.build(v.request, count, [&](int k) { return columns_for(v, k); })) {
        const int m = plan.size();
        const double cols = static_cast<double>(plan.cols), kt = static_cast<double>(Kt), r = static_cast<double>(rows);
        W.resize(static_cast<size_t>(plan.cols) * Kt);
        {
            KernelTally::Scope phase(tally, "moments", 0, 8.0 * cols * kt, cols);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
            for (int t = 0; t < m; ++t) {
                prepare_slot(model, v, plan.slot[t], plan.kind[t]);
                for (int k = 0; k < nodes; ++k) node_columns(model, v, plan.slot[t], plan.kind[t], k, W.data(), plan.col0[t]);
            }
        }
        {
            KernelTally::Scope phase(tally, "gemm", 2.0 * r * kt * cols, 8.0 * (r * kt + kt * cols + r * cols), cols);
            table_gemm(matrix, W.data(), plan.cols, threads, [&](int i0, long c0, const double* tile) {
                for (int jj = 0; jj < 8 && c0 + jj < plan.cols; ++jj) {
                    const size_t t = static_cast<size_t>(plan.owner[static_cast<size_t>(c0 + jj)]);
                    const int j = static_cast<int>(c0 + jj - plan.col0[t]);
                    for (int ii = 0; ii < 4 && i0 + ii < rows; ++ii)
                        batched::store_column(v, plan.slot[t], plan.kind[t], j, i0 + ii, tile[ii * 8 + jj]);
                }
            });
        }
        KernelTally::Scope phase(tally, "lm_steps", 0, 8.0 * r * cols, cols);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
        for (int t = 0; t < m; ++t)
            batched::finish_request(SerialLanes{}, v, plan.slot[t], plan.kind[t], W.data(), plan.col0[t]);
    }
}

/// A batched unit's results into `out`: each slot's outcome and parameters, replica 0's
/// covariance.
template <class State, class Outcome>
void store_unit(const BatchArrays<HostArray>& a, const State* state, const std::int64_t* replicas, int count,
                Outcome outcome, ReplicaBlock& out) {
    const size_t P = static_cast<size_t>(out.P);
    for (int s = 0; s < count; ++s) {
        store_outcome(out, static_cast<size_t>(s), replicas[s], outcome(state[s]), a.params.data() + s * P);
        if (replicas[s] == 0) out.covariance.assign(a.cov.data(), a.cov.data() + P * P);
    }
}

/// The QR table path on the CPU: rounds of (moments, one GEMM with T, LM steps) until every
/// replica is done.
void fit_table(const DisMellinModel& model, const FitContext& ctx, const FitPlan& plan, const FitDataView& data,
               const std::int64_t* replicas, int count, int threads, ReplicaBlock& out, KernelTally* tally) {
    BatchArrays<HostArray> a;
    batched::BatchView b = batch_view(plan, data.n, plan.params.view(), plan.params.start.data(), data.y, data.sigma);
    a.attach(b, count, replicas);
    std::copy(replicas, replicas + count, a.replica.data());
    {  // resampling: each replica's data (y and weights written once)
        KernelTally::Scope phase(tally, "resample", 0, 16.0 * data.n * count, count);
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int s = 0; s < count; ++s) start_slot(b, s);
    }
    run_rounds(model, b, count, ctx.table, data.n, threads, tally);
    store_unit(a, a.lm_state.data(), replicas, count, [](const LmState& st) { return lm_outcome(st); }, out);
}

/// The Gram path on the CPU: b and c per replica, then rounds of (moments, one GEMM with G, LM
/// steps) until every replica is done.
void fit_gram(const DisMellinModel& model, const FitContext& ctx, const FitPlan& plan, const GramInputs& g,
              const FitDataView& data, const std::int64_t* replicas, int count, int threads, ReplicaBlock& out,
              KernelTally* tally) {
    const int n = g.n;
    BatchArrays<HostArray> a;
    gram::GramView v = gram_view(plan, plan.params.view(), g.free_idx.data(), g.Kt, plan.params.start.data(),
                                 g.u0.data());
    a.attach(v, count, n, replicas);
    {  // resampling: each replica's weighted residual column E, then b = T^T E (a GEMM)
        KernelTally::Scope phase(tally, "resample", 0, 8.0 * n * count, count);
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int s = 0; s < count; ++s)
            gram::replica_columns(n, plan.seed, replicas[s], data.y, data.sigma, g.f0.data(), g.winv.data(),
                                  a.E.data() + static_cast<size_t>(s) * n, a.c.data()[s]);
    }
    {
        const double kt = static_cast<double>(g.Kt), c = count;
        KernelTally::Scope phase(tally, "gemm_rhs", 2.0 * kt * n * c, 8.0 * (kt * n + n * c + kt * c), c);
        table_gemm_into(ctx.tt, a.E.data(), count, threads, a.b.data());
    }
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int s = 0; s < count; ++s) start_slot(v, s);
    run_rounds(model, v, count, ctx.g, g.Kt, threads, tally);
    store_unit(a, a.gram_state.data(), replicas, count, [](const gram::State& st) { return normal_outcome(st); },
               out);
}

/// A plugin model's per-replica path: the plugin's own instantiation of replica_paths.hpp.
void fit_plugin(const PluginModel& model, const FitPlan& plan, const FitDataView& data, const FitContext& ctx,
                const std::int64_t* replicas, int count, int threads, ReplicaBlock& out) {
    const EfModelPlugin& t = *model.table;
    const char* failed = nullptr;
    if (plan.path == FitPath::qr) failed = t.cpu_qr(&plan, &data, nullptr, replicas, count, threads, &out);
    else if (plan.single_precision)
        failed = t.cpu_normal_f32(&plan, &data, ctx.inv_sigma_f.data(), replicas, count, threads, &out);
    else failed = t.cpu_normal_f64(&plan, &data, ctx.inv_sigma_d.data(), replicas, count, threads, &out);
    if (failed != nullptr) throw std::runtime_error(std::string("model plugin '") + t.name + "': " + failed);
}

}  // namespace

std::shared_ptr<const FitContext> make_fit_context(const FitPlan& plan, const FitInputs& in, int threads) {
    auto ctx = std::make_shared<FitContext>();
    if (plan.path == FitPath::table) {
        const auto& m = std::get<DisMellinModel>(in.model);
        ctx->table = pack_table(m.table, m.points, m.table_width());
    } else if (plan.path == FitPath::gram) {
        // G = T^T W T, once: the table GEMM of T^T by the columns of W T (or as the node's ranks
        // made it together: the same bits, src/fit/fit_plan.cpp).
        const GramInputs& g = *in.gram;
        const int Kt = static_cast<int>(g.Kt);
        if (!g.packed_tt.empty() && !g.packed_g.empty()) {
            ctx->tt = packed_view(g.packed_tt.data(), Kt, g.n, g.packed_tt.keep);
            ctx->g = packed_view(g.packed_g.data(), Kt, Kt, g.packed_g.keep);
            return ctx;
        }
        ctx->tt = pack_table(g.tt.data(), Kt, g.n);
        std::vector<double> G(static_cast<size_t>(Kt) * Kt);
        table_gemm_into(ctx->tt, g.wtt.data(), Kt, threads, G.data());
        ctx->g = pack_table(G.data(), Kt, Kt);
    } else if (plan.path == FitPath::normal) {
        const std::span<const double> sigma(in.data.sigma, static_cast<size_t>(in.data.n));
        if (plan.single_precision) ctx->inv_sigma_f = normal_inv_sigma<float>(sigma);
        else ctx->inv_sigma_d = normal_inv_sigma<double>(sigma);
    }
    return ctx;
}

void fit_replicas(const FitPlan& plan, const FitInputs& in, const std::int64_t* replicas, int count, int threads,
                  ReplicaBlock& out, const FitContext* ctx, KernelTally* tally) {
    out.resize(static_cast<size_t>(count), plan.num_params());
    out.covariance.clear();
    std::shared_ptr<const FitContext> own;
    if (ctx == nullptr) {
        own = make_fit_context(plan, in, threads);
        ctx = own.get();
    }
    const FitDataView& data = in.data;
    switch (plan.path) {
        case FitPath::table:
            fit_table(std::get<DisMellinModel>(in.model), *ctx, plan, data, replicas, count, threads, out, tally);
            return;
        case FitPath::gram:
            fit_gram(std::get<DisMellinModel>(in.model), *ctx, plan, *in.gram, data, replicas, count, threads, out, tally);
            return;
        case FitPath::normal:
        case FitPath::qr: {
            // The per-replica paths time as one phase, "lm" (resampling and LM of each replica
            // on its thread); items: the LM iterations, which the run turns into FLOPs.
            const auto t0 = KernelTally::Clock::now();
            std::visit(
                [&](const auto& model) {
                    if constexpr (std::is_same_v<std::decay_t<decltype(model)>, PluginModel>)
                        fit_plugin(model, plan, data, *ctx, replicas, count, threads, out);
                    else if (plan.path == FitPath::qr)
                        fit_qr_path(model, plan, data, replicas, count, threads, out);
                    else if (plan.single_precision)
                        fit_normal_path<float>(model, plan, data, ctx->inv_sigma_f.data(), replicas, count, threads,
                                               out);
                    else
                        fit_normal_path<double>(model, plan, data, ctx->inv_sigma_d.data(), replicas, count, threads,
                                                out);
                },
                in.model);
            if (tally) {
                double iterations = 0;
                for (std::int64_t it : out.iterations) iterations += static_cast<double>(it);
                tally->add("lm", std::chrono::duration<double>(KernelTally::Clock::now() - t0).count(), 0, 0, iterations);
            }
            return;
        }
    }
}

}  // namespace ef::cpu

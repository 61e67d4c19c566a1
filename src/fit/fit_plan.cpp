// SPDX-License-Identifier: MIT
#include "src/fit/fit_plan.hpp"

#include <memory>
#include <variant>

#include "kernels/cpu/table_gemm.hpp"
#include "kernels/fit/lm_batched.hpp"
#include "src/fit/correlated.hpp"
#include "src/model/compiled_model.hpp"

namespace ef {
namespace {

ParamArrays param_arrays(const FitConfig& cfg) {
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

LmSettings lm_settings(const FitConfig& cfg) {
    LmSettings s;
    s.max_iterations = cfg.max_iterations;
    s.ftol = cfg.ftol;
    s.xtol = cfg.xtol;
    s.gtol = cfg.gtol;
    return s;
}

/**
 * The Gram path's inputs on the host (kernels/fit/fit_inputs.hpp): T^T and T^T W, 1 / sigma^2,
 * the free parameters' indices, the start point's moments u0 (a value request's columns) and
 * f0 = T u0 from the CPU's deterministic GEMM (the same bits as the GPU's).
 */
GramInputs make_gram_inputs(const DisMellinModel& m, const FitPlan& plan, const FitDataView& data) {
    const int n = m.points;
    const long Kt = m.table_width();
    GramInputs g;
    g.n = n;
    g.Kt = Kt;
    g.winv.resize(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) g.winv[static_cast<size_t>(i)] = 1.0 / (data.sigma[i] * data.sigma[i]);
    g.tt.resize(static_cast<size_t>(Kt) * n);
    g.wtt.resize(static_cast<size_t>(Kt) * n);
    for (int i = 0; i < n; ++i)
        for (long k = 0; k < Kt; ++k) {
            const double v = m.table[static_cast<long>(i) * Kt + k];
            g.tt[static_cast<size_t>(k * n + i)] = v;
            g.wtt[static_cast<size_t>(k * n + i)] = v * g.winv[static_cast<size_t>(i)];
        }
    const ParamArrays& pa = plan.params;
    for (int q = 0; q < pa.size(); ++q)
        if (!pa.fixed[static_cast<size_t>(q)]) g.free_idx.push_back(q);
    g.u0.assign(static_cast<size_t>(Kt), 0.0);
    const batched::VNorm vn = m.normalisation(pa.start.data());
    for (int k = 0; k < m.nodes_count(); ++k) {
        double out[DisMellinModel::kMaxNodeWidth];
        m.prepare_node(pa.start.data(), vn, k, out);
        for (int e = 0; e < m.node_width(); ++e)
            g.u0[static_cast<size_t>(DisMellinModel::table_column_source(k * m.node_width() + e))] = out[e];
    }
    g.f0.resize(static_cast<size_t>(n));
    const cpu::PackedTable t = cpu::pack_table(m.table, n, static_cast<int>(Kt));
    cpu::table_gemm_into(t, g.u0.data(), 1, 1, g.f0.data());
    return g;
}

}  // namespace

FitPlan make_fit_plan(const FitProblem& pb) {
    const FitConfig& cfg = pb.config;
    FitPlan plan;
    plan.params = param_arrays(cfg);
    plan.settings = lm_settings(cfg);
    plan.bootstrap = cfg.resample == ResampleMethod::bootstrap;
    plan.seed = cfg.seed;
    plan.single_precision = cfg.precision == FitPrecision::float32;
    plan.gpu_lm_steps = cfg.gpu_lm_steps == "thread" ? GpuLmSteps::thread : GpuLmSteps::warp;
    plan.gpu_round_loop = cfg.gpu_round_loop == "host" ? GpuRoundLoop::host : GpuRoundLoop::device;
    const bool normal = cfg.solver == FitSolver::normal;
    // A table-linear model takes the batched paths while one pass of duals holds its free
    // parameters (more: the qr path, several passes per Jacobian).
    const bool table = std::holds_alternative<DisMellinModel>(pb.model->view) &&
                       plan.params.nfree <= batched::kDualWidth;
    if (table) plan.path = normal ? FitPath::gram : FitPath::table;
    else plan.path = normal ? FitPath::normal : FitPath::qr;
    plan.dual_width = plan.batched() ? batched::kDualWidth : qr_dual_width(plan.params.nfree);
    plan.normal_width = normal_width(plan.num_params());
    return plan;
}

FitInputs fit_inputs(const FitProblem& pb, const FitPlan& plan) {
    FitInputs in;
    in.model = pb.model->view;
    const DataTable& d = pb.data;
    in.data = FitDataView{d.n, d.nx, d.x.data(), d.y.data(), d.sigma.data(), nullptr,
                          pb.whitening ? &pb.whitening->view : nullptr};
    if (plan.path == FitPath::gram)
        in.gram = std::make_shared<const GramInputs>(make_gram_inputs(std::get<DisMellinModel>(in.model), plan, in.data));
    return in;
}

bool fits_on_gpu(const FitProblem& problem) {
    const auto* plugin = std::get_if<PluginModel>(&problem.model->view);
    return !(plugin != nullptr && plugin->table->gpu == nullptr) && problem.whitening == nullptr;
}

}  // namespace ef

// SPDX-License-Identifier: MIT
#include "src/fit/fit_plan.hpp"

#include <algorithm>
#include <memory>
#include <utility>
#include <variant>
#include <vector>

#include "kernels/cpu/table_gemm.hpp"
#include "kernels/fit/lm_batched.hpp"
#include "src/comm/table_share.hpp"
#include "src/fit/correlated.hpp"
#include "src/model/compiled_model.hpp"
#include "src/run/setup_trace.hpp"

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

/// Doubles rounded up to a whole cache line (64 bytes), so that each array starts on one.
std::size_t whole_lines(std::size_t doubles) { return (doubles + 7) / 8 * 8; }

/// Where the Gram inputs' large arrays lie in one block of doubles: the same offsets on every
/// rank of a node (all of it zero-filled first).
struct GramLayout {
    std::size_t tt = 0, wtt = 0, f0 = 0, packed_tt = 0, packed_g = 0, total = 0;
    GramLayout(int n, long Kt, bool products) {
        const std::size_t kn = whole_lines(static_cast<std::size_t>(Kt) * n);
        const std::size_t panels = static_cast<std::size_t>((Kt + 3) / 4);
        wtt = kn;
        f0 = 2 * kn;
        packed_tt = f0 + whole_lines(static_cast<std::size_t>(n));
        packed_g = packed_tt + (products ? whole_lines(panels * 4 * n) : 0);
        total = packed_g + (products ? whole_lines(panels * 4 * Kt) : 0);
    }
};

/// Rows [first, last) of x = 4 p (panels of 4: a slice of panels is a slice of whole rows).
std::pair<int, int> panel_rows(std::pair<int, int> panels, long rows) {
    return {4 * panels.first, static_cast<int>(std::min<long>(4L * panels.second, rows))};
}

/// The small per-rank part: 1 / sigma^2, the free parameters' indices and u0 (a value
/// request's columns at the start point).
void gram_small_inputs(const DisMellinModel& m, const FitPlan& plan, const FitDataView& data, GramInputs& g) {
    g.winv.resize(static_cast<size_t>(g.n));
    for (int i = 0; i < g.n; ++i) g.winv[static_cast<size_t>(i)] = 1.0 / (data.sigma[i] * data.sigma[i]);
    const ParamArrays& pa = plan.params;
    for (int q = 0; q < pa.size(); ++q)
        if (!pa.fixed[static_cast<size_t>(q)]) g.free_idx.push_back(q);
    g.u0.assign(static_cast<size_t>(g.Kt), 0.0);
    const batched::VNorm vn = m.normalisation(pa.start.data());
    for (int k = 0; k < m.nodes_count(); ++k) {
        double out[DisMellinModel::kMaxNodeWidth];
        m.prepare_node(pa.start.data(), vn, k, out);
        for (int e = 0; e < m.node_width(); ++e)
            g.u0[static_cast<size_t>(DisMellinModel::table_column_source(k * m.node_width() + e))] = out[e];
    }
}

/**
 * This rank's rows [k0, k1) of T^T and T^T W (copies and one product each: no sums), and of T^T
 * packed for the CPU GEMM when `packed` is not null; the rows [i0, i1) of f0 = T u0 from the
 * CPU's deterministic GEMM (each element's sum over k whole, so its bits are those of the
 * whole product, and the GPU's).
 */
void gram_rows(const DisMellinModel& m, GramInputs& g, double* tt, double* wtt, double* f0, double* packed,
               std::pair<int, int> k_rows, std::pair<int, int> i_rows, int threads) {
    const int n = g.n;
    const long Kt = g.Kt;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int k = k_rows.first; k < k_rows.second; ++k)
        for (int i = 0; i < n; ++i) {
            const double v = m.table[static_cast<long>(i) * Kt + k];
            tt[static_cast<size_t>(k) * n + i] = v;
            wtt[static_cast<size_t>(k) * n + i] = v * g.winv[static_cast<size_t>(i)];
        }
    if (packed != nullptr && k_rows.second > k_rows.first)
        cpu::pack_into(tt + static_cast<size_t>(k_rows.first) * n, k_rows.second - k_rows.first, n,
                       packed + static_cast<size_t>(k_rows.first) * n);
    // In blocks of 256 points: a packed copy of the block, not of the whole table, at a time.
    for (int i0 = i_rows.first; i0 < i_rows.second; i0 += 256) {
        const int rows = std::min(256, i_rows.second - i0);
        const cpu::PackedTable t = cpu::pack_table(m.table + static_cast<long>(i0) * Kt, rows, static_cast<int>(Kt));
        cpu::table_gemm_into(t, g.u0.data(), 1, threads, f0 + i0);
    }
}

/**
 * This rank's columns [c0, c1) of G = T^T W T (the table GEMM of packed T^T by those columns of
 * W T, every element's sum over the n points whole), packed as the CPU worker packs G: its
 * column c is the packed table's row c, so a slice of whole panels of columns is a slice of
 * the packed G.
 */
void gram_product(const GramInputs& g, const double* packed_tt, const double* wtt, double* packed_g,
                  std::pair<int, int> cols, int threads) {
    const int Kt = static_cast<int>(g.Kt);
    const int count = cols.second - cols.first;
    if (count <= 0) return;
    const cpu::PackedTable tt = cpu::packed_view(packed_tt, Kt, g.n, nullptr);
    std::vector<double> F(static_cast<size_t>(Kt) * count);
    cpu::table_gemm_into(tt, wtt + static_cast<size_t>(cols.first) * g.n, count, threads, F.data());
    cpu::pack_into(F.data(), count, Kt, packed_g + static_cast<size_t>(cols.first) * Kt);
}

/**
 * The Gram path's inputs on the host (kernels/fit/fit_inputs.hpp): T^T and T^T W, 1 / sigma^2,
 * the free parameters' indices, the start point's moments u0 (a value request's columns) and
 * f0 = T u0 from the CPU's deterministic GEMM (the same bits as the GPU's); with `products`,
 * T^T and G = T^T W T packed for the CPU worker. Through a node share the node's ranks hold one
 * copy and each computes a slice of whole output elements (rows of T^T, points of f0, columns
 * of G), so no sum is split and the bits are those of one rank alone.
 */
GramInputs make_gram_inputs(const DisMellinModel& m, const FitPlan& plan, const FitDataView& data,
                            const GramBuild& build) {
    GramInputs g;
    g.n = m.points;
    g.Kt = m.table_width();
    gram_small_inputs(m, plan, data, g);
    const GramLayout at(g.n, g.Kt, build.products);
    SetupTrace trace(-1);  // EF_SETUP_TRACE: the Gram set-up's steps (the node's ranks wait for each other)
    trace.stage("gram");
    std::shared_ptr<double> block;
    if (build.share) block = build.share->allocate(at.total);
    else {
        auto own = std::make_shared<std::vector<double>>(at.total, 0.0);
        block = std::shared_ptr<double>(own, own->data());
    }
    trace.mark("window (allocate)");
    double* base = block.get();
    const auto view = [&](std::size_t offset, std::size_t count) { return HostDoubles{base + offset, count, block}; };
    const std::size_t kn = static_cast<std::size_t>(g.Kt) * g.n;
    g.tt = view(at.tt, kn);
    g.wtt = view(at.wtt, kn);
    g.f0 = view(at.f0, static_cast<std::size_t>(g.n));
    const auto slice = [&](long rows) {
        const int panels = static_cast<int>((rows + 3) / 4);
        return panel_rows(build.share ? build.share->slice(panels) : std::pair<int, int>{0, panels}, rows);
    };
    const std::pair<int, int> k_rows = slice(g.Kt);
    gram_rows(m, g, base + at.tt, base + at.wtt, base + at.f0, build.products ? base + at.packed_tt : nullptr, k_rows,
              slice(g.n), build.threads);
    trace.mark("this rank's rows of T^T, T^T W, f0");
    if (build.share) build.share->publish();  // all of T^T W and packed T^T, for G's columns
    trace.mark("publish (every rank's rows)");
    if (!build.products) return g;
    gram_product(g, base + at.packed_tt, base + at.wtt, base + at.packed_g, k_rows, build.threads);
    trace.mark("this rank's columns of G");
    if (build.share) build.share->publish();
    trace.mark("publish (every rank's columns)");
    const std::size_t panels = static_cast<std::size_t>((g.Kt + 3) / 4);
    g.packed_tt = view(at.packed_tt, panels * 4 * g.n);
    g.packed_g = view(at.packed_g, panels * 4 * g.Kt);
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

FitInputs fit_inputs(const FitProblem& pb, const FitPlan& plan, const GramBuild& build) {
    FitInputs in;
    in.model = pb.model->view;
    const DataTable& d = pb.data;
    in.data = FitDataView{d.n, d.nx, d.x.data(), d.y.data(), d.sigma.data(), nullptr,
                          pb.whitening ? &pb.whitening->view : nullptr};
    if (plan.path == FitPath::gram)
        in.gram = std::make_shared<const GramInputs>(
            make_gram_inputs(std::get<DisMellinModel>(in.model), plan, in.data, build));
    return in;
}

bool fits_on_gpu(const FitProblem& problem) {
    const auto* plugin = std::get_if<PluginModel>(&problem.model->view);
    return !(plugin != nullptr && plugin->table->gpu == nullptr) && problem.whitening == nullptr;
}

}  // namespace ef

// SPDX-License-Identifier: MIT
// `ensemblefit export dis-table`: the dis-mellin theory table, data, parameters and replica data
// of a config, for peers outside the framework (perf/peers/dis_numpy.py fits exactly the same
// replicas from it).
#include <cmath>
#include <cstdio>
#include <string>
#include <variant>
#include <vector>

#include <ensemblefit/config/fit_config.hpp>
#include <ensemblefit/core/error.hpp>
#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/io/data_table.hpp>

#include "kernels/fit/resample.hpp"
#include "src/cli/commands.hpp"
#include "src/io/h5.hpp"
#include "src/model/compiled_model.hpp"
#include "src/run/output_guard.hpp"
#include "src/run/run_args.hpp"

namespace ef {
namespace {

void export_help() {
    std::printf(
        "usage: ensemblefit export dis-table CONFIG.ini --out TABLE.h5 [--replicas R] [--overwrite]\n"
        "                                    [--section.key VALUE ...]\n\n"
        "Writes what a peer implementation needs to fit exactly the replicas `ensemblefit fit`\n"
        "fits for a dis-mellin config:\n"
        "  /nodes            (nodes x 2)          contour points N_k (re, im)\n"
        "  /table            (points x nodes*4*2) C[i][k][b] (re, im), b = u_v, d_v, S, g;\n"
        "                                         F2_i = sum_{k,b} Im(C[i][k][b] q_b(N_k))\n"
        "  /data/x           (points x 3)         x, Q2, target;  /data/y, /data/sigma\n"
        "  /params/start, lower, upper, fixed (0/1) in model order; attribute names\n"
        "  /replicas/index   (R+1)                0..R\n"
        "  /replicas/y       ((R+1) x points)     resampled data of each replica (replica 0 = data)\n"
        "  /replicas/weight  ((R+1) x points)     bootstrap multiplicities (all 1 for smear)\n"
        "and, as root attributes, the LM settings (max_iterations, ftol, xtol, gtol), seed,\n"
        "resample method, the canonical config, the data checksum and the counted FLOPs\n"
        "(flops_per_point, flops_per_evaluation, flops_per_iteration, flops_dual_pass_k4/8/16).\n"
        "R defaults to the config's [fit] replicas; config keys can be overridden as for `fit`.\n");
}

/// The table, nodes and data: what a peer needs to evaluate the model.
void write_table(h5::File& f, const FitProblem& pb) {
    const DisMellinModel& m = std::get<DisMellinModel>(pb.model->view);
    const int n = pb.data.n;
    const int nodes = m.num_nodes;
    const std::size_t row = static_cast<std::size_t>(m.table_width());
    f.write("/nodes", std::vector<double>(m.nodes, m.nodes + 2 * nodes), 2);
    f.write("/table", std::vector<double>(m.table, m.table + static_cast<std::size_t>(n) * row), row);
    const std::string basis = m.layout.split ? "u_v, d_v, ubar, g, dbar, s+sbar" : "u_v, d_v, S, g";
    f.set_attr("/table", "layout", "[points][nodes][basis " + basis + "][re, im]; F2_i = sum Im(C q_b(N_k))");
    f.write("/data/x", pb.data.x, static_cast<std::uint64_t>(pb.data.nx));
    f.set_attr("/data/x", "columns", pb.data.x_names);
    f.write("/data/y", pb.data.y);
    f.write("/data/sigma", pb.data.sigma);
}

void write_params(h5::File& f, const FitProblem& pb) {
    std::vector<double> start, lower, upper;
    std::vector<std::int64_t> fixed;
    for (const auto& p : pb.config.params) {
        start.push_back(p.start);
        lower.push_back(p.lower);
        upper.push_back(p.upper);
        fixed.push_back(p.fixed ? 1 : 0);
    }
    f.write("/params/start", start);
    f.write("/params/lower", lower);
    f.write("/params/upper", upper);
    f.write("/params/fixed", fixed);
    f.set_attr("/params", "names", pb.config.param_names());
}

/// Replicas 0..R as the fit draws them (Philox keyed by seed and replica).
void write_replicas(h5::File& f, const FitProblem& pb, long long replicas) {
    const int n = pb.data.n;
    const bool bootstrap = pb.config.resample == ResampleMethod::bootstrap;
    const std::uint64_t rows = static_cast<std::uint64_t>(replicas) + 1;
    f.create_double("/replicas/y", rows, static_cast<std::uint64_t>(n), 0.0);
    f.create_double("/replicas/weight", rows, static_cast<std::uint64_t>(n), 0.0);
    std::vector<std::int64_t> index(rows);
    std::vector<double> y(static_cast<size_t>(n)), w(static_cast<size_t>(n));
    for (std::uint64_t r = 0; r < rows; ++r) {
        index[r] = static_cast<std::int64_t>(r);
        resample_replica(bootstrap ? 1 : 0, pb.config.seed, r, n, pb.data.y.data(), pb.data.sigma.data(),
                         y.data(), w.data());
        f.write_rows("/replicas/y", r, 1, y.data());
        f.write_rows("/replicas/weight", r, 1, w.data());
    }
    f.write("/replicas/index", index);
}

void write_settings(h5::File& f, const FitProblem& pb) {
    const bool bootstrap = pb.config.resample == ResampleMethod::bootstrap;
    f.set_attr("/", "config", pb.config.config_file);
    f.set_attr("/", "canonical_config", pb.config.canonical_text());
    f.set_attr("/", "data_checksum", static_cast<std::int64_t>(pb.data.checksum));
    f.set_attr("/", "seed", static_cast<std::int64_t>(pb.config.seed));
    f.set_attr("/", "resample", std::string(bootstrap ? "bootstrap" : "smear"));
    f.set_attr("/", "max_iterations", static_cast<std::int64_t>(pb.config.max_iterations));
    f.set_attr("/", "ftol", pb.config.ftol);
    f.set_attr("/", "xtol", pb.config.xtol);
    f.set_attr("/", "gtol", pb.config.gtol);
    f.set_attr("/", "num_params", static_cast<std::int64_t>(pb.num_params()));
    f.set_attr("/", "flops_per_point", pb.model_flops_per_point());
    f.set_attr("/", "flops_per_evaluation", pb.model_flops());
    f.set_attr("/", "flops_per_iteration", pb.flops_per_iteration());
    f.set_attr("/", "flops_dual_pass_k4", pb.model->flops_dual_pass[0]);
    f.set_attr("/", "flops_dual_pass_k8", pb.model->flops_dual_pass[1]);
    f.set_attr("/", "flops_dual_pass_k16", pb.model->flops_dual_pass[2]);
    f.set_attr("/", "model", pb.describe_model());
}

int cmd_export_dis_table(const std::vector<std::string>& args, const MpiContext& ctx) {
    RunArgs run;
    std::string out;
    long long replicas = -1;
    const std::vector<ArgOption> options = {
        {"--out", true, [&](const std::string& v) { out = v; }},
        {"--replicas", true,
         [&](const std::string& v) {
             const double r = parse_number_arg("export dis-table: --replicas", v);
             if (r < 0 || r > 1e9 || r != std::floor(r))
                 throw usage_error("export dis-table: --replicas expects a whole number in 0..1e9, got '" + v + "'");
             replicas = static_cast<long long>(r);
         }},
    };
    if (!parse_run_args("export dis-table", args, false, options, run)) {
        if (ctx.is_root()) export_help();
        return 0;
    }
    if (out.empty()) throw usage_error("export dis-table: --out TABLE.h5 is required");
    if (file_exists(out) && !run.overwrite)
        throw usage_error("export dis-table: '" + out + "' exists; pass --overwrite to replace it");

    FitConfig cfg = load_fit_config(run.config_path, run.overrides);
    if (cfg.model_name != "dis-mellin")
        throw usage_error(cfg.where("model.name") + ": export dis-table needs model dis-mellin, got '" +
                          cfg.model_name + "'");
    if (replicas < 0) replicas = cfg.replicas;
    DataTable data = load_data(cfg);
    const FitProblem pb = make_fit_problem(cfg, data);  // params in model order, bounds checked
    if (!ctx.is_root() || run.dry_run) return 0;

    check_serial_output(out, "export dis-table: --out", run.overwrite, {run.config_path, cfg.data_file});
    PendingOutput pending(out);  // created under a temporary name, renamed when written
    h5::File f = h5::File::create(pending.temp_path());
    write_table(f, pb);
    write_params(f, pb);
    write_replicas(f, pb, replicas);
    write_settings(f, pb);
    f.close();
    pending.commit();
    std::printf("wrote %s: %d points, %d contour nodes, %d parameters, replicas 0..%lld (%s, seed %llu)\n",
                out.c_str(), pb.data.n, std::get<DisMellinModel>(pb.model->view).num_nodes, pb.num_params(), replicas,
                pb.config.resample == ResampleMethod::bootstrap ? "bootstrap" : "smear",
                static_cast<unsigned long long>(pb.config.seed));
    return 0;
}

const CommandRegistrar reg("export dis-table", "dis-mellin table, data and replicas for peer implementations",
                           &cmd_export_dis_table);

}  // namespace
}  // namespace ef

// SPDX-License-Identifier: MIT
// `ensemblefit export dis-table`: the dis-mellin theory table, data, parameters and replica data
// of a config, for peers outside the framework (perf/peers/dis_numpy.py fits exactly the same
// replicas from it).
#include <sys/stat.h>

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

int cmd_export_dis_table(const std::vector<std::string>& args, const MpiContext& ctx) {
    std::string config_path, out;
    long long replicas = -1;
    bool overwrite = false;
    std::vector<std::string> overrides;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto value = [&](const std::string& name) -> std::string {
            if (i + 1 >= args.size()) throw usage_error("export dis-table: " + name + " expects a value");
            return args[++i];
        };
        if (a == "-h" || a == "--help") {
            if (ctx.is_root()) export_help();
            return 0;
        } else if (a == "--out") {
            out = value(a);
        } else if (a.rfind("--out=", 0) == 0) {
            out = a.substr(6);
        } else if (a == "--replicas") {
            const std::string v = value(a);
            try {
                size_t used = 0;
                replicas = std::stoll(v, &used);
                if (used != v.size()) throw std::invalid_argument(v);
            } catch (const std::exception&) {
                throw usage_error("export dis-table: --replicas expects an integer, got '" + v + "'");
            }
        } else if (a == "--overwrite") {
            overwrite = true;
        } else if (a.rfind("--", 0) == 0 && a.find('.') != std::string::npos) {
            const auto eq = a.find('=');
            if (eq != std::string::npos) overrides.push_back(a);
            else overrides.push_back(a + "=" + value(a));
        } else if (a.rfind("-", 0) == 0) {
            throw usage_error("export dis-table: unknown option '" + a + "'");
        } else if (config_path.empty()) {
            config_path = a;
        } else {
            throw usage_error("export dis-table: unexpected argument '" + a + "' (one config file only)");
        }
    }
    if (config_path.empty()) throw usage_error("export dis-table: no config file given");
    if (out.empty()) throw usage_error("export dis-table: --out TABLE.h5 is required");
    struct stat st {};
    if (stat(out.c_str(), &st) == 0 && !overwrite)
        throw usage_error("export dis-table: '" + out + "' exists; pass --overwrite to replace it");

    FitConfig cfg = load_fit_config(config_path, overrides);
    if (cfg.model_name != "dis-mellin")
        throw usage_error(cfg.where("model.name") + ": export dis-table needs model dis-mellin, got '" +
                          cfg.model_name + "'");
    if (replicas < 0) replicas = cfg.replicas;
    DataTable data = load_data(cfg);
    const FitProblem pb = make_fit_problem(cfg, data);  // params in model order, bounds checked
    if (!ctx.is_root()) return 0;

    const DisMellinModel& m = std::get<DisMellinModel>(pb.model->view);
    const int n = pb.data.n;
    const int nodes = m.num_nodes;
    const std::size_t row = static_cast<std::size_t>(2 * dis_mellin::kNumBasis * nodes);

    h5::File f = h5::File::create(out);
    f.write("/nodes", std::vector<double>(m.nodes, m.nodes + 2 * nodes), 2);
    f.write("/table", std::vector<double>(m.table, m.table + static_cast<std::size_t>(n) * row), row);
    f.set_attr("/table", "layout",
               std::string("[points][nodes][basis u_v, d_v, S, g][re, im]; F2_i = sum Im(C q_b(N_k))"));
    f.write("/data/x", pb.data.x, static_cast<std::uint64_t>(pb.data.nx));
    f.set_attr("/data/x", "columns", pb.data.x_names);
    f.write("/data/y", pb.data.y);
    f.write("/data/sigma", pb.data.sigma);

    const int P = pb.num_params();
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

    f.set_attr("/", "config", pb.config.config_file);
    f.set_attr("/", "canonical_config", pb.config.canonical_text());
    f.set_attr("/", "data_checksum", static_cast<std::int64_t>(pb.data.checksum));
    f.set_attr("/", "seed", static_cast<std::int64_t>(pb.config.seed));
    f.set_attr("/", "resample", std::string(bootstrap ? "bootstrap" : "smear"));
    f.set_attr("/", "max_iterations", static_cast<std::int64_t>(pb.config.max_iterations));
    f.set_attr("/", "ftol", pb.config.ftol);
    f.set_attr("/", "xtol", pb.config.xtol);
    f.set_attr("/", "gtol", pb.config.gtol);
    f.set_attr("/", "num_params", static_cast<std::int64_t>(P));
    f.set_attr("/", "flops_per_point", pb.model_flops_per_point());
    f.set_attr("/", "flops_per_evaluation", pb.model_flops());
    f.set_attr("/", "flops_per_iteration", pb.flops_per_iteration());
    f.set_attr("/", "flops_dual_pass_k4", pb.model->flops_dual_pass[0]);
    f.set_attr("/", "flops_dual_pass_k8", pb.model->flops_dual_pass[1]);
    f.set_attr("/", "flops_dual_pass_k16", pb.model->flops_dual_pass[2]);
    f.set_attr("/", "model", pb.describe_model());
    f.close();
    std::printf("wrote %s: %d points, %d contour nodes, %d parameters, replicas 0..%lld (%s, seed %llu)\n",
                out.c_str(), n, nodes, P, replicas, bootstrap ? "bootstrap" : "smear",
                static_cast<unsigned long long>(pb.config.seed));
    return 0;
}

const CommandRegistrar reg("export dis-table", "dis-mellin table, data and replicas for peer implementations",
                           &cmd_export_dis_table);

}  // namespace
}  // namespace ef

// SPDX-License-Identifier: MIT
#include <algorithm>
#include <cmath>
#include <sstream>
#include <tuple>

#include <ensemblefit/core/error.hpp>
#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/model/formula.hpp>

#include "kernels/fit/fit_plan.hpp"
#include "kernels/fit/lm.hpp"
#include "kernels/fit/lm_normal.hpp"
#include "src/config/capacity.hpp"
#include "src/model/compiled_model.hpp"
#include "src/config/ini_scan.hpp"
#include "src/model/dis_mellin.hpp"
#include "src/model/formula_jit.hpp"
#include "src/model/plugin_loader.hpp"

namespace ef {

std::vector<std::string> builtin_param_names(const FitConfig& c) {
    if (c.model_name == "linear") return {"a", "b"};
    if (c.model_name == "exponential") return {"a", "k", "c"};
    if (c.model_name == "gaussian2d") return {"a", "u", "v", "s", "c"};
    if (c.model_name == "polynomial") {
        std::vector<std::string> n;
        for (int k = 0; k <= c.order; ++k) n.push_back("c" + std::to_string(k));
        return n;
    }
    if (c.model_name == "gaussian") {
        std::vector<std::string> n = {"c"};
        for (int j = 1; j <= c.peaks; ++j) {
            n.push_back("a" + std::to_string(j));
            n.push_back("mu" + std::to_string(j));
            n.push_back("s" + std::to_string(j));
        }
        return n;
    }
    return {};
}

namespace {

std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
}

/// Puts cfg.params into the order of `names`, refusing missing and unknown sections (messages
/// name the model as `model`).
void order_params(FitConfig& cfg, const std::vector<std::string>& names, const std::string& model) {
    std::vector<ParamSpec> ordered;
    for (const auto& n : names) {
        auto it = std::find_if(cfg.params.begin(), cfg.params.end(),
                               [&](const ParamSpec& p) { return p.name == n; });
        if (it == cfg.params.end())
            throw usage_error(cfg.config_file + ": missing section [param." + n + "] for model '" +
                              model + "' (parameters: " + join(names) + ")");
        ordered.push_back(*it);
    }
    for (const auto& p : cfg.params)
        if (std::find(names.begin(), names.end(), p.name) == names.end())
            throw usage_error(cfg.where("param." + p.name + ".start") + ": model '" + model +
                              "' has no parameter '" + p.name + "' (parameters: " + join(names) + ")");
    cfg.params = ordered;
}

void order_params(FitConfig& cfg, const std::vector<std::string>& names) { order_params(cfg, names, cfg.model_name); }

/// A model plugin (`[model] plugin = lib.so`): loaded, checked, its parameter names matched
/// against the [param.NAME] sections. A relative path set in the file is taken from its folder.
void compile_plugin_model(FitConfig& cfg, CompiledModel& cm) {
    std::string path = cfg.model_options.at("plugin");
    const auto origin = cfg.origins.find("model.plugin");
    if (!path.empty() && path[0] != '/' && origin != cfg.origins.end() && origin->second.line > 0)
        path = ini::folder_of(cfg.config_file) + path;
    auto lp = load_model_plugin(path, cfg.where("model.plugin"));
    order_params(cfg, lp->param_names, lp->table->name);
    cm.view = PluginModel{lp->table};
    cm.param_names = lp->param_names;
    cm.description = std::string("plugin ") + lp->table->name + " (" + lp->path + ")";
    cm.storage = lp;
    cm.plugin = {lp->table->name, lp->sha256, lp->real_path, static_cast<int>(lp->table->abi_version)};
}

/// A formula model: the formula compiled against the parameter and x column names; every
/// parameter must appear in it.
void compile_formula_model(const FitConfig& cfg, const DataTable& data, CompiledModel& cm) {
    auto prog = std::make_shared<FormulaProgram>();
    try {
        *prog = compile_formula(cfg.formula, cfg.param_names(), data.x_names);
    } catch (const FormulaError& e) {
        throw usage_error(cfg.where("model.formula") + ": column " + std::to_string(e.column()) +
                          ": " + e.what());
    }
    // A parameter the formula never uses has a zero Jacobian column: refuse it early.
    std::vector<bool> used(cfg.params.size(), false);
    for (const auto& op : prog->code)
        if (op.code == FormulaOpCode::push_param) used[static_cast<size_t>(op.arg)] = true;
    for (size_t q = 0; q < used.size(); ++q)
        if (!used[q])
            throw usage_error(cfg.where("param." + cfg.params[q].name + ".start") + ": parameter '" +
                              cfg.params[q].name + "' does not appear in the formula");
    FormulaModel fm;
    fm.code = prog->code.data();
    fm.constants = prog->constants.data();
    fm.code_size = static_cast<int>(prog->code.size());
    fm.constants_size = static_cast<int>(prog->constants.size());
    fm.params = static_cast<int>(cfg.params.size());
    const FormulaCompile mode = parse_formula_compile(cfg.model_compile, cfg.where("model.compile"));
    auto jit = formula_jit_for_run(*prog, mode, cfg.where("model.compile"), cfg.model_compile_timeout);
    if (jit) fm.jit = &jit->table(0);
    auto device_jit = formula_device_jit_for_run(prog, mode);  // compiles only when a GPU worker asks
    fm.device_jit = device_jit.get();
    cm.view = fm;
    cm.param_names = cfg.param_names();
    cm.description = "formula: " + cfg.formula;
    cm.flops_per_evaluation = data.n * static_cast<double>(prog->code.size());
    cm.storage = std::make_shared<std::tuple<std::shared_ptr<FormulaProgram>, std::shared_ptr<const FormulaJitLibrary>,
                                             std::shared_ptr<const FormulaDeviceJit>>>(prog, jit, device_jit);
}

/// An error of the dis-mellin checks, whose messages start "model.KEY: " or "param.NAME.FIELD: ",
/// located where that key was set ("FILE:LINE: model.q0: ...", or "--model.q0: ...").
Error located(const FitConfig& cfg, const Error& e) {
    const std::string m = e.what();
    const auto colon = m.find(": ");
    const std::string key = m.substr(0, colon == std::string::npos ? 0 : colon);
    const bool is_key = (key.rfind("model.", 0) == 0 || key.rfind("param.", 0) == 0) &&
                        key.find(' ') == std::string::npos;
    return Error(e.code(), is_key ? cfg.where(key) + m.substr(colon) : cfg.config_file + ": " + m);
}

/// The Mellin tables (4 complex numbers per contour node and data point, 6 with the split sea), refused before they
/// are allocated when they cannot fit.
void check_table_memory(const FitConfig& cfg, const DataTable& data, const DisMellinSettings& settings) {
    double nodes = 64;
    try {
        nodes = DisMellinTheory(settings, {data.x[0], data.x[1], data.x[2]}).num_nodes();
    } catch (const Error&) {  // the full table reports the data point
    }
    const double each = 16.0 * settings.layout().basis() * nodes;
    const double need = each * data.n;
    if (exceeds_memory(need))
        throw data_error(cfg.data_file + ": " + std::to_string(data.n) + " rows: " +
                         memory_refusal(need, "the dis-mellin tables (" + format_bytes(each) + " per row)",
                                        std::to_string(static_cast<long long>(largest_count(each))) + " rows"));
}

/// dis-mellin: its [model] options and bounds checked, its theory tables built on the data's x.
void compile_dis_mellin_model(FitConfig& cfg, const DataTable& data, CompiledModel& cm, TableShare* share) {
    DisMellinSettings settings;
    try {
        settings = parse_dis_mellin_settings(cfg.model_options);
    } catch (const Error& e) {
        throw located(cfg, e);
    }
    if (data.nx != 3)
        throw usage_error(cfg.where("data.x") + ": dis-mellin needs three x columns: x, Q2, target "
                                                "(1 proton, 2 neutron), got " + std::to_string(data.nx));
    const auto names = dis_mellin_param_names(settings);
    order_params(cfg, names);
    std::vector<double> lower, start;
    std::vector<bool> fixed;
    for (const auto& p : cfg.params) {
        lower.push_back(p.lower);
        start.push_back(p.start);
        fixed.push_back(p.fixed);
    }
    try {
        check_dis_mellin_bounds(names, lower, start, settings, fixed);
    } catch (const Error& e) {
        throw located(cfg, e);
    }
    check_table_memory(cfg, data, settings);
    std::shared_ptr<DisMellinTheory> theory;
    try {
        theory = std::make_shared<DisMellinTheory>(settings, data.x, share);
    } catch (const Error& e) {
        if (e.code() != ExitCode::data) throw;
        throw Error(e.code(), cfg.data_file + ": " + e.what());  // "FILE: data row N: ..."
    }
    cm.view = theory->model();
    cm.param_names = names;
    const std::string order = settings.order >= 2 ? "NLO" : "LO";
    cm.description = "dis-mellin: " + order + " F2 of p/n from Mellin-space PDFs, " + std::to_string(theory->num_nodes()) +
                     " contour nodes, Q0 = " + std::to_string(settings.q0).substr(0, 4) + " GeV" +
                     (theory->table_note().empty() ? "" : "; " + theory->table_note());
    cm.flops_per_evaluation = theory->flops_per_evaluation(0);
    cm.flops_per_point = theory->flops_per_point(0);
    cm.flops_dual_pass[0] = theory->flops_per_evaluation(4);
    cm.flops_dual_pass[1] = theory->flops_per_evaluation(8);
    cm.flops_dual_pass[2] = theory->flops_per_evaluation(16);
    cm.storage = theory;
}

/// The built-in models of kernels/models/builtin_models.hpp.
void compile_builtin_model(FitConfig& cfg, const DataTable& data, CompiledModel& cm) {
    const double n = data.n;
    const auto names = builtin_param_names(cfg);
    if (names.empty())
        throw usage_error(cfg.where("model.name") + ": model '" + cfg.model_name +
                          "' is not available in this build");
    order_params(cfg, names);
    cm.param_names = names;
    if (cfg.model_name == "linear") {
        cm.view = LinearModel{};
        cm.description = "linear: a + b x";
        cm.flops_per_evaluation = 2 * n;
    } else if (cfg.model_name == "polynomial") {
        PolynomialModel m;
        m.order = cfg.order;
        cm.view = m;
        cm.description = "polynomial of order " + std::to_string(cfg.order);
        cm.flops_per_evaluation = 2 * n * cfg.order;
    } else if (cfg.model_name == "exponential") {
        cm.view = ExponentialModel{};
        cm.description = "exponential: a exp(-k x) + c";
        cm.flops_per_evaluation = 4 * n;  // exp counted as one
    } else if (cfg.model_name == "gaussian2d") {
        if (data.nx != 2)
            throw usage_error(cfg.where("data.x") + ": gaussian2d needs two x columns (the pixel "
                                                    "coordinates), got " + std::to_string(data.nx));
        cm.view = Gaussian2DModel{};
        cm.description = "gaussian2d: a exp(-((x0 - u)^2 + (x1 - v)^2) / (2 s^2)) + c";
        cm.flops_per_evaluation = 11 * n;  // exp counted as one
    } else {
        GaussianModel m;
        m.peaks = cfg.peaks;
        cm.view = m;
        cm.description = std::to_string(cfg.peaks) + " Gaussian peak(s) on a constant";
        cm.flops_per_evaluation = 7 * n * cfg.peaks + n;
    }
}

/// What the solvers support: parameter counts, and the normal-equations solver's limits.
void check_solver_limits(const FitConfig& cfg) {
    if (static_cast<int>(cfg.params.size()) > kMaxParams)
        throw usage_error(cfg.config_file + ": " + std::to_string(cfg.params.size()) +
                          " parameters; at most " + std::to_string(kMaxParams) + " are supported");
    if (cfg.solver == FitSolver::normal) {
        const std::string what = cfg.precision == FitPrecision::float32 ? "precision = float" : "solver = normal";
        if (cfg.model_name == "dis-mellin" && cfg.precision == FitPrecision::float32)
            throw usage_error(cfg.where("fit.precision") + ": dis-mellin fits in double only");
        if (cfg.model_name == "dis-mellin" && cfg.resample != ResampleMethod::smear)
            throw usage_error(cfg.where("fit.solver") + ": solver = normal for dis-mellin needs resample = smear "
                              "(its Gram matrix T^T W T is shared by replicas with the same weights)");
        if (cfg.model_name == "dis-mellin" &&
            std::count_if(cfg.params.begin(), cfg.params.end(), [](const ParamSpec& p) { return !p.fixed; }) > 16)
            throw usage_error(cfg.where("fit.solver") + ": solver = normal for dis-mellin fits at most 16 free "
                              "parameters");
        if (cfg.model_name != "dis-mellin" && static_cast<int>(cfg.params.size()) > kNormalMaxParams)
            throw usage_error(cfg.where(cfg.precision == FitPrecision::float32 ? "fit.precision" : "fit.solver") +
                              ": " + what + " fits at most " + std::to_string(kNormalMaxParams) +
                              " parameters, the model has " + std::to_string(cfg.params.size()));
    }
    if (std::all_of(cfg.params.begin(), cfg.params.end(), [](const ParamSpec& p) { return p.fixed; }))
        throw usage_error(cfg.config_file + ": every parameter is fixed; nothing to fit");
}

}  // namespace

FitProblem make_fit_problem(FitConfig cfg, DataTable data) { return make_fit_problem(std::move(cfg), std::move(data), nullptr); }

FitProblem make_fit_problem(FitConfig cfg, DataTable data, TableShare* share) {
    auto cm = std::make_shared<CompiledModel>();
    if (cfg.model_name == "formula") compile_formula_model(cfg, data, *cm);
    else if (cfg.model_name == "dis-mellin") compile_dis_mellin_model(cfg, data, *cm, share);
    else if (cfg.model_name == "plugin") compile_plugin_model(cfg, *cm);
    else compile_builtin_model(cfg, data, *cm);
    if (cm->flops_per_point == 0.0 && data.n > 0) cm->flops_per_point = cm->flops_per_evaluation / data.n;
    check_solver_limits(cfg);

    FitProblem pb;
    pb.config = std::move(cfg);
    pb.data = std::move(data);
    pb.model = cm;
    return pb;
}

std::string FitProblem::describe_model() const { return model->description; }
double FitProblem::model_flops() const { return model->flops_per_evaluation; }
double FitProblem::model_flops_per_point() const { return model->flops_per_point; }

double FitProblem::flops_per_iteration() const {
    int nfree = 0;
    for (const auto& p : config.params) nfree += p.fixed ? 0 : 1;
    // The qr path's dual width (the ladder make_fit_plan uses) and its dual pass's counted cost.
    const int K = qr_dual_width(nfree);
    const int k_index = K == 4 ? 0 : (K == 8 ? 1 : 2);
    const double passes = static_cast<double>((nfree + K - 1) / K);
    // Without a counted dual pass, a dual evaluation costs about (K + 1) double evaluations.
    const double pass = model->flops_dual_pass[k_index] > 0 ? model->flops_dual_pass[k_index]
                                                             : (K + 1) * model->flops_per_evaluation;
    const double n = data.n;
    // The step's linear algebra: Householder QR of the n x nfree Jacobian, or (normal solver)
    // J^T W J and J^T W r accumulated point by point and a small Cholesky solve.
    const double f = nfree;
    const double algebra = config.solver == FitSolver::normal ? n * (f * f + 4.0 * f) + f * f * f / 3.0
                                                              : 2.0 * f * f * (n - f / 3.0) + 4.0 * n * f;
    return passes * pass + model->flops_per_evaluation + algebra;
}

}  // namespace ef

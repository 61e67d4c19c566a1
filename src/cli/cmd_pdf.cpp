// SPDX-License-Identifier: MIT
// `ensemblefit pdf`: x f(x, Q^2) of a dis-mellin fit's replicas on a grid, with ensemble bands.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include <boost/program_options.hpp>

#include <ensemblefit/config/fit_config.hpp>
#include <ensemblefit/core/error.hpp>

#include "src/cli/commands.hpp"
#include "src/config/capacity.hpp"
#include "src/io/results_file.hpp"
#include "src/model/dis_pdf.hpp"
#include "src/report/prediction_bands.hpp"
#include "src/run/output_guard.hpp"
#include "src/run/run_args.hpp"

namespace po = boost::program_options;

namespace ef {
namespace {

const char* kPdfUsage =
    "usage: ensemblefit pdf FILE.h5|CONFIG.ini --q2 LIST [--x LIST | --x-grid N]\n"
    "                       [-o OUT.h5|OUT.csv] [--replicas] [--overwrite] [--section.key VALUE]\n\n"
    "x f(x, Q2) of a dis-mellin fit for g, u, ubar, d, dbar, s, c, b, u_v, d_v and the light sea\n"
    "2 (ubar + dbar + s), for the central fit and every converged replica, evolved as the fit's\n"
    "tables evolve (the stored [model] settings: order, coupling, thresholds). Writes what\n"
    "`predict` writes, one point per (Q2, distribution, x): the columns x, Q2 and pdf (the index\n"
    "of the distribution in the attribute/column order above), central, mean, std and the 2.5,\n"
    "16, 50, 84, 97.5 % quantiles (each replica's value with --replicas). Every Q2 must be at or\n"
    "above Q0^2. --x-grid N: N points log-spaced in [1e-5, 0.1) and N linear in [0.1, 0.9]\n"
    "(N at most 100000). At most 1e7 points (x values x Q2 values x 11) in one run.\n"
    "CONFIG.ini (a dis-mellin fit config, no fit needed): the PDFs at its [param.*] start values,\n"
    "as the central column (no replicas); e.g. inputs/lh-toy.ini, the Les Houches toy input.\n"
    "Every config key can be overridden as for `fit` (--model.order LO, --param.g_a.start 0.2).\n\n"
    "options";

/// The documented limits of one pdf run (docs/operations.md): --x-grid N gives 2N x values; the
/// points (x values x Q2 values x distributions) are at most kMaxPdfPoints.
constexpr int kMaxXGrid = 100000;
constexpr double kMaxPdfPoints = 1e7;

struct PdfArgs {
    std::string source, output = "-", q2_list, x_list;
    int x_grid = 0;
    bool replicas = false, overwrite = false;
    std::vector<std::string> overrides;  ///< "--section.key=VALUE", for a CONFIG.ini
};

std::vector<double> parse_list(const std::string& what, const std::string& text) {
    std::vector<double> v;
    std::stringstream ss(text);
    for (std::string item; std::getline(ss, item, ',');) {
        std::size_t used = 0;
        double d = 0.0;
        try {
            d = std::stod(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used == 0 || !std::isfinite(d)) throw usage_error("pdf: " + what + ": '" + item + "' is not a number");
        v.push_back(d);
    }
    if (v.empty()) throw usage_error("pdf: " + what + " is empty");
    return v;
}

std::vector<double> x_values(const PdfArgs& a) {
    if (!a.x_list.empty()) return parse_list("--x", a.x_list);
    const int n = a.x_grid > 0 ? a.x_grid : 20;
    std::vector<double> x;
    for (int i = 0; i < n; ++i) x.push_back(std::pow(10.0, -5.0 + 4.0 * i / n));
    for (int i = 0; i < n; ++i) x.push_back(0.1 + 0.8 * i / (n - 1 > 0 ? n - 1 : 1));
    return x;
}

bool is_config_path(const std::string& path) {
    return path.size() > 4 && path.compare(path.size() - 4, 4, ".ini") == 0;
}

/// Moves the `--section.key VALUE` / `--section.key=VALUE` config overrides out of `args` (as
/// `fit` takes them: a dot in the option's name) into `overrides`, as "--section.key=VALUE".
std::vector<std::string> split_overrides(const std::vector<std::string>& args, std::vector<std::string>& overrides) {
    std::vector<std::string> rest;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        const std::string name = a.substr(0, a.find('='));
        if (a.rfind("--", 0) != 0 || name.find('.') == std::string::npos) {
            rest.push_back(a);
            continue;
        }
        if (a.find('=') != std::string::npos) {
            overrides.push_back(a);
        } else {
            if (i + 1 >= args.size()) throw usage_error("pdf: " + a + " needs a value");
            overrides.push_back(a + "=" + args[++i]);
        }
    }
    return rest;
}

bool parse_pdf_args(const std::vector<std::string>& all_args, const MpiContext& ctx, PdfArgs& a) {
    const std::vector<std::string> args = split_overrides(all_args, a.overrides);
    po::options_description desc(kPdfUsage);
    desc.add_options()("help,h", "this text")("q2", po::value<std::string>(&a.q2_list), "Q2 values in GeV^2, comma-separated")(
        "x", po::value<std::string>(&a.x_list), "x values, comma-separated")(
        "x-grid", po::value<int>(&a.x_grid), "N: a default x grid of 2N points (default 20)")(
        "output,o", po::value<std::string>(&a.output), "OUT.csv or OUT.h5 (default: CSV on standard output)")(
        "replicas", "also write every replica's value")("overwrite", "replace an existing OUT")(
        "file", po::value<std::string>(&a.source), "the fit's result file, or a dis-mellin config");
    po::positional_options_description pos;
    pos.add("file", 1);
    po::variables_map vm;
    if (!parse_program_options("pdf", args, desc, pos, vm, ctx)) return false;
    a.replicas = vm.count("replicas") > 0;
    a.overwrite = vm.count("overwrite") > 0;
    if (a.source.empty()) throw usage_error("pdf: no result file given (ensemblefit pdf FILE.h5 --q2 LIST)");
    if (a.q2_list.empty()) throw usage_error("pdf: --q2 LIST is required");
    if (!a.x_list.empty() && a.x_grid != 0) throw usage_error("pdf: give --x or --x-grid, not both");
    if (vm.count("x-grid") && (a.x_grid < 2 || a.x_grid > kMaxXGrid))
        throw usage_error("pdf: --x-grid must be in 2.." + std::to_string(kMaxXGrid) + ", got " + std::to_string(a.x_grid));
    if (a.output == a.source) throw usage_error("pdf: -o '" + a.output + "' would replace the result file");
    if (!a.overrides.empty() && !is_config_path(a.source))
        throw usage_error("pdf: " + a.overrides.front().substr(0, a.overrides.front().find('=')) +
                          ": --section.key overrides apply to a CONFIG.ini, not to a result file");
    return true;
}

std::string number_text(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3g", v);
    return b;
}

/// Refuses a grid beyond kMaxPdfPoints points, or whose values (`replicas` and the central) do
/// not fit in memory, naming the options, before anything is evaluated.
void check_grid(std::size_t nx, std::size_t nq2, std::size_t replicas) {
    const double points = static_cast<double>(nx) * static_cast<double>(nq2) * static_cast<double>(dis_pdf_names().size());
    if (points > kMaxPdfPoints)
        throw usage_error("pdf: --x/--x-grid and --q2 ask for " + std::to_string(nx) + " x values x " +
                          std::to_string(nq2) + " Q2 values x " + std::to_string(dis_pdf_names().size()) +
                          " distributions = " + number_text(points) + " points; at most 1e7 in one run (split the grid)");
    const double bytes = points * 8.0 * (static_cast<double>(replicas) + 12.0);
    if (exceeds_memory(bytes))
        throw usage_error("pdf: --x/--x-grid and --q2: " + memory_refusal(bytes, "the values", "fewer points or replicas"));
}

/// The points table write_prediction prints: (x, Q2, pdf index) in [q2][name][x] order.
DataTable pdf_points(const std::vector<double>& x, const std::vector<double>& q2) {
    DataTable t;
    t.nx = 3;
    t.x_names = {"x", "Q2", "pdf"};
    const std::size_t names = dis_pdf_names().size();
    for (double q : q2)
        for (std::size_t n = 0; n < names; ++n)
            for (double xv : x) t.x.insert(t.x.end(), {xv, q, static_cast<double>(n)});
    t.n = static_cast<int>(t.x.size() / 3);
    t.y.assign(static_cast<std::size_t>(t.n), 0.0);
    t.sigma.assign(static_cast<std::size_t>(t.n), 1.0);
    return t;
}

/// A config's [model] settings and its parameters' start values in the layout's order.
DisMellinSettings config_start(const std::string& path, const std::vector<std::string>& overrides,
                               std::vector<double>& start) {
    const FitConfig cfg = load_fit_config(path, overrides);
    if (cfg.model_name != "dis-mellin")
        throw usage_error(cfg.where("model.name") + ": pdf needs a dis-mellin config, got '" + cfg.model_name + "'");
    DisMellinSettings settings;
    try {
        settings = parse_dis_mellin_settings(cfg.model_options);
    } catch (const Error& e) {  // "model.KEY: ..." located at the key's line
        const std::string m = e.what();
        const std::size_t colon = m.find(": ");
        const std::string key = m.substr(0, colon == std::string::npos ? 0 : colon);
        const bool is_key = key.rfind("model.", 0) == 0 && key.find(' ') == std::string::npos;
        throw Error(e.code(), is_key ? cfg.where(key) + m.substr(colon) : path + ": " + m);
    }
    const std::vector<std::string> names = dis_mellin_param_names(settings);
    start.clear();
    for (const auto& n : names) {
        const auto it = std::find_if(cfg.params.begin(), cfg.params.end(), [&](const ParamSpec& p) { return p.name == n; });
        if (it == cfg.params.end())
            throw usage_error(path + ": missing section [param." + n + "] for model 'dis-mellin'");
        start.push_back(it->start);
    }
    for (const auto& p : cfg.params)
        if (std::find(names.begin(), names.end(), p.name) == names.end())
            throw usage_error(cfg.where("param." + p.name + ".start") + ": model 'dis-mellin' has no parameter '" +
                              p.name + "' with these [model] settings");
    return settings;
}

/// pdf on a config: the start values' PDFs as the central column.
int pdf_of_config(const PdfArgs& a) {
    std::vector<double> start;
    const DisMellinSettings settings = config_start(a.source, a.overrides, start);
    const std::vector<double> x = x_values(a), q2 = parse_list("--q2", a.q2_list);
    check_grid(x.size(), q2.size(), 0);
    const DisPdfEvaluator pdf(settings, x, q2);
    const std::vector<double> central = pdf.values(start.data());
    const DataTable points = pdf_points(x, q2);
    const PredictionBands bands = prediction_bands(central, {}, points.n);
    const PredictionOutput out{a.source, "dis-mellin pdf", &points, &bands, nullptr, nullptr};
    write_prediction_file(a.output, out);
    std::fprintf(stderr, "pdf: %zu x, %zu Q2, %zu distributions at the start values of %s -> %s\n", x.size(),
                 q2.size(), dis_pdf_names().size(), a.source.c_str(), a.output.c_str());
    return 0;
}

int cmd_pdf(const std::vector<std::string>& args, const MpiContext& ctx) {
    PdfArgs a;
    if (!parse_pdf_args(args, ctx, a)) return 0;
    if (a.output != "-") {
        RunArgs run;
        run.overwrite = a.overwrite;
        check_output(ctx, a.output, "pdf: -o", run, false, {a.source});
    }
    if (!ctx.is_root()) return 0;
    if (!file_exists(a.source)) throw usage_error(a.source + ": no such file");
    if (is_config_path(a.source)) return pdf_of_config(a);
    const ResultsContent c = read_results(a.source);
    if (c.id.canonical_config.find("name = dis-mellin") == std::string::npos)
        throw usage_error("pdf: " + a.source + " is not a dis-mellin fit");
    const DisMellinSettings settings = dis_mellin_settings_of(a.source, c.id.canonical_config, c.id.param_names);
    const std::vector<double> x = x_values(a), q2 = parse_list("--q2", a.q2_list);
    check_grid(x.size(), q2.size(), static_cast<std::size_t>(std::count(c.replicas.status.begin(), c.replicas.status.end(), 0)));
    const DisPdfEvaluator pdf(settings, x, q2);
    const std::size_t P = static_cast<std::size_t>(c.replicas.P);
    std::vector<double> central;
    if (c.id.span.central && c.central.status[0] >= 0) central = pdf.values(c.central.params.data());
    std::vector<std::int64_t> index;
    std::vector<double> values;
    for (std::size_t r = 0; r < c.replicas.size(); ++r) {
        if (c.replicas.status[r] != 0) continue;
        index.push_back(c.replicas.index[r]);
        const std::vector<double> v = pdf.values(c.replicas.params.data() + r * P);
        values.insert(values.end(), v.begin(), v.end());
    }
    const DataTable points = pdf_points(x, q2);
    const PredictionBands bands = prediction_bands(central, values, points.n);
    PredictionOutput out{a.source, "dis-mellin pdf", &points, &bands, nullptr, nullptr};
    if (a.replicas) {
        out.replica_index = &index;
        out.replica_values = &values;
    }
    write_prediction_file(a.output, out);
    std::fprintf(stderr, "pdf: %zu x, %zu Q2, %zu distributions, %zu converged replicas of %s -> %s\n", x.size(),
                 q2.size(), dis_pdf_names().size(), index.size(), a.source.c_str(), a.output.c_str());
    return 0;
}

const CommandRegistrar reg("pdf", "x f(x, Q2) of a dis-mellin fit's replicas on a grid", &cmd_pdf);

}  // namespace
}  // namespace ef

// SPDX-License-Identifier: MIT
// `ensemblefit simulate dis`: pseudo-data for the dis-mellin model, truth stored in the file.
#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <sstream>

#include <boost/program_options.hpp>

#include <ensemblefit/config/fit_config.hpp>
#include <ensemblefit/core/error.hpp>

#include "src/cli/commands.hpp"
#include "src/config/capacity.hpp"
#include "src/config/ini_scan.hpp"
#include "src/core/text.hpp"
#include "src/io/h5.hpp"
#include "src/model/dis_mellin.hpp"
#include "src/run/output_guard.hpp"

namespace po = boost::program_options;

namespace ef {
namespace {

/// The points' arrays (x, Q2, target, F2, dF2, the rows) and their Mellin tables (4 complex
/// numbers per contour node), refused before they are allocated when they cannot fit.
void check_memory(long long points, const DisMellinSettings& settings) {
    double nodes = 64;  // when one point does not build (a Q0 above every Q2), simulate_dis says why
    try {
        nodes = DisMellinTheory(settings, {0.1, 1000.0, 1.0}).num_nodes();
    } catch (const Error&) {
    }
    const double each = 8.0 * (8.0 + 8.0 * nodes);
    const double need = each * static_cast<double>(points);
    if (exceeds_memory(need))
        throw usage_error("simulate dis: --points " + std::to_string(points) + " " +
                          memory_refusal(need, "the points and their Mellin tables (" + format_bytes(each) + " per point)",
                                         std::to_string(static_cast<long long>(largest_count(each))) + " points"));
}

/// What `simulate dis` was asked for.
struct SimulateDisArgs {
    std::string out, truth_config, order;
    long long points = 5000;
    long long seed = 1;
    double noise = 0.02;
    int syst = 0;            ///< correlated systematic sources (columns sys1..sysS)
    double syst_size = 0.01;  ///< relative size of each systematic
    int datasets = 1;        ///< datasets (column dataset, 1..D)
    double norm_sigma = 0.0;  ///< relative normalisation uncertainty of every dataset
    bool overwrite = false;
};

/**
 * The correlated part of the pseudo-data (nothing when syst = 0 and norm_sigma = 0): column k
 * of sys (n x S) is syst_size F2 cos(k pi t), t = log(x / 1e-3) / log(900) (smooth, one more
 * sign change per k), dataset d(i) = 1 + i D / n (contiguous blocks: D = 2 is proton, neutron),
 * and the data move by F2 (norm_sigma eta_d(i) + sum_k syst_size cos(k pi t) xi_k) with eta, xi
 * standard normal from their own generator (seeded by (seed, 2)), so the uncorrelated draws are
 * unchanged.
 */
struct CorrelatedPseudoData {
    std::vector<std::vector<double>> sys;
    std::vector<double> dataset, shifts;
};

CorrelatedPseudoData add_correlated(const SimulateDisArgs& a, DisPseudoData& d) {
    CorrelatedPseudoData c;
    const size_t n = d.x.size();
    // Its own stream: seeded from (seed, 2), so no --seed's shifts repeat another seed's noise.
    std::seed_seq seq{static_cast<std::uint64_t>(a.seed), std::uint64_t{2}};
    std::mt19937_64 rng(seq);
    std::normal_distribution<double> normal;
    for (int k = 0; k < a.syst + a.datasets; ++k) c.shifts.push_back(normal(rng));
    c.sys.assign(static_cast<size_t>(a.syst), std::vector<double>(n));
    for (size_t i = 0; i < n; ++i) {
        const double f2 = d.sigma[i] / a.noise;  // the true F2
        const double t = std::log(d.x[i] / 1e-3) / std::log(900.0);
        const int set = 1 + static_cast<int>(static_cast<long long>(i) * a.datasets / static_cast<long long>(n));
        c.dataset.push_back(set);
        double shift = f2 * a.norm_sigma * c.shifts[static_cast<size_t>(a.syst + set - 1)];
        for (int k = 0; k < a.syst; ++k) {
            const double s = a.syst_size * f2 * std::cos((k + 1) * 3.141592653589793 * t);
            c.sys[static_cast<size_t>(k)][i] = s;
            shift += s * c.shifts[static_cast<size_t>(k)];
        }
        d.f2[i] += shift;
    }
    return c;
}

SimulateDisArgs parse_simulate_dis(const std::vector<std::string>& args, const MpiContext& ctx, bool& help) {
    po::options_description desc(
        "usage: ensemblefit simulate dis --out FILE.h5 [options]\n\n"
        "Pseudo-data for [model] name = dis-mellin: F2 on proton and neutron targets at x in\n"
        "[1e-3, 0.9] and Q2 in [2, 1000] GeV^2 (log-uniform, W2 > 10 GeV^2), from stated true\n"
        "parameters, with relative uncertainty `noise` and Gaussian noise of that size. Writes\n"
        "1-D datasets x, Q2, target (1 proton, 2 neutron), F2, dF2 and the truth as attributes;\n"
        "with --syst or --norm-sigma also sys1..sysS (absolute systematic shifts) and dataset,\n"
        "the data moved by one draw of every correlated source (attribute correlated_shifts).\n\noptions");
    SimulateDisArgs a;
    std::string points_text = "5000";
    desc.add_options()("help,h", "this text")("out", po::value<std::string>(&a.out), "output HDF5 file (required)")(
        "points", po::value<std::string>(&points_text)->default_value("5000"), "number of data points")(
        "seed", po::value<long long>(&a.seed)->default_value(1), "seed of the simulation")(
        "noise", po::value<double>(&a.noise)->default_value(0.02), "relative uncertainty of F2")(
        "truth", po::value<std::string>(&a.truth_config),
        "a dis-mellin config whose [param.NAME] start values (and [model] settings) are the truth "
        "(default: the model's built-in truth); its [model] order = NLO makes NLO pseudo-data")(
        "order", po::value<std::string>(&a.order), "LO | NLO without --truth (default LO)")(
        "syst", po::value<int>(&a.syst)->default_value(0), "correlated systematic sources (0..64)")(
        "syst-size", po::value<double>(&a.syst_size)->default_value(0.01), "relative size of each systematic")(
        "datasets", po::value<int>(&a.datasets)->default_value(1), "datasets in column 'dataset' (1..64)")(
        "norm-sigma", po::value<double>(&a.norm_sigma)->default_value(0.0),
        "relative normalisation uncertainty of each dataset (0 = none)")("overwrite", "replace an existing output file");
    po::variables_map vm;
    try {
        po::store(po::command_line_parser(args).options(desc).run(), vm);
        po::notify(vm);
    } catch (const po::error& e) {
        throw usage_error("simulate dis: " + excerpt(e.what(), 200));
    }
    help = vm.count("help") > 0;
    if (help) {
        std::ostringstream os;
        os << desc;
        if (ctx.is_root()) std::printf("%s\n", os.str().c_str());
        return a;
    }
    a.overwrite = vm.count("overwrite") > 0;
    if (a.out.empty()) throw usage_error("simulate dis: --out FILE.h5 is required");
    a.points = ini::to_integer(points_text, "simulate dis: --points", 10, std::numeric_limits<int>::max());
    if (!(a.noise > 0.0) || a.noise >= 1.0) throw usage_error("simulate dis: --noise must be in (0, 1)");
    if (a.seed < 0) throw usage_error("simulate dis: --seed must be >= 0");
    if (a.syst < 0 || a.syst > 64 || !(a.syst_size > 0.0 && a.syst_size < 1.0))
        throw usage_error("simulate dis: --syst must be in 0..64 and --syst-size in (0, 1)");
    if (a.datasets < 1 || a.datasets > 64 || !(a.norm_sigma >= 0.0 && a.norm_sigma < 1.0))
        throw usage_error("simulate dis: --datasets must be in 1..64 and --norm-sigma in [0, 1)");
    if (!a.order.empty() && a.order != "LO" && a.order != "NLO")
        throw usage_error("simulate dis: --order must be LO or NLO, got '" + excerpt(a.order) + "'");
    return a;
}

/// The truth and the QCD settings: the built-in truth, or a config's starts and [model] keys.
DisMellinSettings truth_of(const SimulateDisArgs& a, std::vector<double>& truth) {
    DisMellinSettings settings;
    if (!a.order.empty()) settings = parse_dis_mellin_settings({{"order", a.order}});
    truth = dis_mellin_default_truth();
    if (a.truth_config.empty()) return settings;
    const FitConfig cfg = load_fit_config(a.truth_config, {});
    settings = parse_dis_mellin_settings(cfg.model_options);
    truth = dis_mellin_default_truth(settings);  // the layout's (split sea, coefficients)
    const std::vector<std::string> names = dis_mellin_param_names(settings);
    for (const auto& p : cfg.params) {
        size_t q = 0;
        while (q < names.size() && names[q] != p.name) ++q;
        if (q == names.size()) throw usage_error(cfg.where("param." + p.name + ".start") + ": not a dis-mellin parameter");
        truth[q] = p.start;
    }
    return settings;
}

void write_pseudo_data(h5::File& f, const SimulateDisArgs& a, const DisPseudoData& d, const CorrelatedPseudoData& c,
                       const DisMellinSettings& settings) {
    f.write("/x", d.x);
    f.write("/Q2", d.q2);
    f.write("/target", d.target);
    f.write("/F2", d.f2);
    f.write("/dF2", d.sigma);
    f.set_attr("/", "truth", d.truth);
    f.set_attr("/", "truth_names", dis_mellin_param_names(settings));
    f.set_attr("/", "noise", a.noise);
    f.set_attr("/", "seed", static_cast<std::int64_t>(a.seed));
    for (size_t k = 0; k < c.sys.size(); ++k) f.write("/sys" + std::to_string(k + 1), c.sys[k]);
    if (a.syst > 0 || a.norm_sigma > 0.0) {
        f.write("/dataset", c.dataset);
        f.set_attr("/", "correlated_shifts", c.shifts);
        f.set_attr("/", "syst_size", a.syst_size);
        f.set_attr("/", "norm_sigma", a.norm_sigma);
    }
    f.set_attr("/target", "meaning", std::string("1 proton, 2 neutron"));
}

int cmd_simulate_dis(const std::vector<std::string>& args, const MpiContext& ctx) {
    bool help = false;
    const SimulateDisArgs a = parse_simulate_dis(args, ctx, help);
    if (help) return 0;
    struct stat st {};
    if (stat(a.out.c_str(), &st) == 0 && !a.overwrite)
        throw usage_error("simulate dis: '" + a.out + "' exists; pass --overwrite to replace it");
    if (!ctx.is_root()) return 0;

    std::vector<double> truth;
    const DisMellinSettings settings = truth_of(a, truth);
    check_memory(a.points, settings);
    DisPseudoData d = simulate_dis(static_cast<int>(a.points), static_cast<std::uint64_t>(a.seed), a.noise, truth, settings);
    const CorrelatedPseudoData c = add_correlated(a, d);
    check_serial_output(a.out, "simulate dis: --out", a.overwrite, {a.truth_config});
    PendingOutput pending(a.out);  // created under a temporary name, renamed when written
    h5::File f = h5::File::create(pending.temp_path());
    write_pseudo_data(f, a, d, c, settings);
    f.set_attr("/", "generator", std::string("ensemblefit simulate dis (") + (settings.order == 2 ? "NLO" : "LO") +
                                     " F2, Mellin-space PDFs at Q0 = " + std::to_string(settings.q0) + " GeV)");
    f.close();
    pending.commit();
    std::printf("wrote %s: %lld points (%lld proton, %lld neutron), noise %.3g, seed %lld", a.out.c_str(), a.points,
                a.points - a.points / 2, a.points / 2, a.noise, a.seed);
    if (a.syst > 0 || a.norm_sigma > 0.0)
        std::printf(", %d systematic(s) of %.3g, %d dataset(s) with normalisation %.3g", a.syst, a.syst_size,
                    a.datasets, a.norm_sigma);
    std::printf("\n");
    return 0;
}

const CommandRegistrar reg("simulate dis", "pseudo-data for the dis-mellin model", &cmd_simulate_dis);

}  // namespace
}  // namespace ef

// SPDX-License-Identifier: MIT
// `ensemblefit simulate dis`: pseudo-data for the dis-mellin model, truth stored in the file.
#include <sys/stat.h>

#include <cstdio>
#include <limits>
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

int cmd_simulate_dis(const std::vector<std::string>& args, const MpiContext& ctx) {
    po::options_description desc(
        "usage: ensemblefit simulate dis --out FILE.h5 [options]\n\n"
        "Pseudo-data for [model] name = dis-mellin: F2 on proton and neutron targets at x in\n"
        "[1e-3, 0.9] and Q2 in [2, 1000] GeV^2 (log-uniform, W2 > 10 GeV^2), from stated true\n"
        "parameters, with relative uncertainty `noise` and Gaussian noise of that size. Writes\n"
        "1-D datasets x, Q2, target (1 proton, 2 neutron), F2, dF2 and the truth as attributes.\n\noptions");
    std::string out, truth_config;
    std::string points_text = "5000";
    long long seed = 1;
    double noise = 0.02;
    desc.add_options()("help,h", "this text")("out", po::value<std::string>(&out), "output HDF5 file (required)")(
        "points", po::value<std::string>(&points_text)->default_value("5000"), "number of data points")(
        "seed", po::value<long long>(&seed)->default_value(1), "seed of the simulation")(
        "noise", po::value<double>(&noise)->default_value(0.02), "relative uncertainty of F2")(
        "truth", po::value<std::string>(&truth_config),
        "a dis-mellin config whose [param.NAME] start values (and [model] settings) are the truth "
        "(default: the model's built-in truth); its [model] order = NLO makes NLO pseudo-data")("overwrite", "replace an existing output file");
    po::variables_map vm;
    try {
        po::store(po::command_line_parser(args).options(desc).run(), vm);
        po::notify(vm);
    } catch (const po::error& e) {
        throw usage_error("simulate dis: " + excerpt(e.what(), 200));
    }
    if (vm.count("help")) {
        std::ostringstream os;
        os << desc;
        if (ctx.is_root()) std::printf("%s\n", os.str().c_str());
        return 0;
    }
    if (out.empty()) throw usage_error("simulate dis: --out FILE.h5 is required");
    const long long points = ini::to_integer(points_text, "simulate dis: --points", 10, std::numeric_limits<int>::max());
    if (!(noise > 0.0) || noise >= 1.0) throw usage_error("simulate dis: --noise must be in (0, 1)");
    if (seed < 0) throw usage_error("simulate dis: --seed must be >= 0");
    struct stat st {};
    if (stat(out.c_str(), &st) == 0 && !vm.count("overwrite"))
        throw usage_error("simulate dis: '" + out + "' exists; pass --overwrite to replace it");
    if (!ctx.is_root()) return 0;

    DisMellinSettings settings;
    std::vector<double> truth = dis_mellin_default_truth();
    const std::vector<std::string> names = dis_mellin_param_names();
    if (!truth_config.empty()) {
        const FitConfig cfg = load_fit_config(truth_config, {});
        settings = parse_dis_mellin_settings(cfg.model_options);
        for (const auto& p : cfg.params) {
            size_t q = 0;
            while (q < names.size() && names[q] != p.name) ++q;
            if (q == names.size())
                throw usage_error(cfg.where("param." + p.name + ".start") + ": not a dis-mellin parameter");
            truth[q] = p.start;
        }
    }
    check_memory(points, settings);
    const DisPseudoData d =
        simulate_dis(static_cast<int>(points), static_cast<std::uint64_t>(seed), noise, truth, settings);
    check_serial_output(out, "simulate dis: --out", vm.count("overwrite") > 0, {truth_config});
    PendingOutput pending(out);  // created under a temporary name, renamed when written
    h5::File f = h5::File::create(pending.temp_path());
    f.write("/x", d.x);
    f.write("/Q2", d.q2);
    f.write("/target", d.target);
    f.write("/F2", d.f2);
    f.write("/dF2", d.sigma);
    f.set_attr("/", "truth", d.truth);
    f.set_attr("/", "truth_names", names);
    f.set_attr("/", "noise", noise);
    f.set_attr("/", "seed", static_cast<std::int64_t>(seed));
    f.set_attr("/", "generator", std::string("ensemblefit simulate dis (") +
                                     (settings.order == 2 ? "NLO" : "LO") +
                                     " F2, Mellin-space PDFs at Q0 = " + std::to_string(settings.q0) + " GeV)");
    f.set_attr("/target", "meaning", std::string("1 proton, 2 neutron"));
    f.close();
    pending.commit();
    std::printf("wrote %s: %lld points (%lld proton, %lld neutron), noise %.3g, seed %lld\n", out.c_str(), points,
                points - points / 2, points / 2, noise, seed);
    return 0;
}

const CommandRegistrar reg("simulate dis", "pseudo-data for the dis-mellin model", &cmd_simulate_dis);

}  // namespace
}  // namespace ef

// SPDX-License-Identifier: MIT
// plugin_reference CONFIG [--section.key=value ...]: every replica of a Michaelis-Menten fit,
// with the model header of examples/plugin compiled into this program (the project's own build
// and flags) and run through the per-replica LM paths directly, one thread. Prints one line per
// replica, "index p... chi2 status iterations" with doubles in %a, then "cov" and replica 0's
// covariance, for tests/mpi/plugin.sh to compare bit for bit with what the plugin built against
// the installed package wrote.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/core/replica_block.hpp>

#include "examples/plugin/michaelis_menten.hpp"
#include "kernels/cpu/replica_paths.hpp"
#include "src/fit/fit_plan.hpp"

int main(int argc, char** argv) try {
    if (argc < 2) {
        std::fprintf(stderr, "usage: plugin_reference CONFIG [--section.key=value ...]\n");
        return 2;
    }
    const std::vector<std::string> overrides(argv + 2, argv + argc);
    ef::FitConfig cfg = ef::load_fit_config(argv[1], overrides);
    // The problem (parameter order, bounds, data) as the program makes it; the fit below uses
    // this program's instantiation of the model, not the plugin's.
    const ef::FitProblem pb = ef::make_fit_problem(cfg, ef::load_data(cfg));
    const ef::FitPlan plan = ef::make_fit_plan(pb);
    const ef::FitInputs in = ef::fit_inputs(pb, plan);
    std::vector<std::int64_t> replicas(static_cast<size_t>(pb.config.replicas) + 1);
    std::iota(replicas.begin(), replicas.end(), 0);
    const int count = static_cast<int>(replicas.size());
    ef::ReplicaBlock out;
    out.resize(replicas.size(), plan.num_params());
    const std::span<const double> sigma(in.data.sigma, static_cast<size_t>(in.data.n));
    if (plan.path == ef::FitPath::qr) {
        ef::cpu::fit_qr_path(MichaelisMenten{}, plan, in.data, replicas.data(), count, 1, out);
    } else if (plan.single_precision) {
        const auto inv = ef::normal_inv_sigma<float>(sigma);
        ef::cpu::fit_normal_path<float>(MichaelisMenten{}, plan, in.data, inv.data(), replicas.data(), count, 1, out);
    } else {
        const auto inv = ef::normal_inv_sigma<double>(sigma);
        ef::cpu::fit_normal_path<double>(MichaelisMenten{}, plan, in.data, inv.data(), replicas.data(), count, 1, out);
    }
    for (size_t t = 0; t < out.size(); ++t) {
        std::printf("%lld", static_cast<long long>(out.index[t]));
        for (int q = 0; q < out.P; ++q) std::printf(" %a", out.params[t * static_cast<size_t>(out.P) + static_cast<size_t>(q)]);
        std::printf(" %a %lld %lld\n", out.chi2[t], static_cast<long long>(out.status[t]),
                    static_cast<long long>(out.iterations[t]));
    }
    std::printf("cov");
    for (const double c : out.covariance) std::printf(" %a", c);
    std::printf("\n");
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "plugin_reference: %s\n", e.what());
    return 1;
}

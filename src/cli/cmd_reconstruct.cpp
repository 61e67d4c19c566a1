// SPDX-License-Identifier: MIT
// `ensemblefit reconstruct CONFIG.ini`: distributed ptychographic reconstruction.
#include <cstdio>
#include <string>
#include <vector>

#include <ensemblefit/core/error.hpp>
#include <ensemblefit/recon/recon_config.hpp>
#include <ensemblefit/recon/reconstruction.hpp>

#include "src/cli/commands.hpp"

namespace ef {
namespace {

int cmd_reconstruct(const std::vector<std::string>& args, const MpiContext& ctx) {
    ReconRunOptions opt;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "-h" || a == "--help") {
            if (ctx.is_root())
                std::printf("usage: ensemblefit reconstruct CONFIG.ini [options] [--section.key VALUE ...]\n\n"
                            "Ptychographic reconstruction (single slice, mixed-state probe, Adam over mini-batches)\n"
                            "of an HDF5 or CXI dataset; run under mpirun for several CPU and/or GPU ranks.\n\n"
                            "options:\n"
                            "  --overwrite     replace an existing output file (refused otherwise)\n"
                            "  --dry-run       read and check everything, print the plan, reconstruct nothing\n"
                            "  --debug.speeds W0,W1,...[/W0,W1,.../...]\n"
                            "                  per-rank speeds used instead of the measured ones at successive\n"
                            "                  rebalance points (the last list repeats): forces unequal shares\n"
                            "  -h, --help      this text\n\n%s",
                            recon_config_help().c_str());
            return 0;
        } else if (a == "--overwrite") {
            opt.overwrite = true;
        } else if (a == "--dry-run") {
            opt.dry_run = true;
        } else if (a == "--debug.speeds") {
            if (i + 1 >= args.size()) throw usage_error(a + ": expects a value");
            opt.debug_speeds = args[++i];
        } else if (a.rfind("--debug.speeds=", 0) == 0) {
            opt.debug_speeds = a.substr(15);
        } else if (a.rfind("--", 0) == 0 && a.find('.') != std::string::npos) {
            if (a.find('=') != std::string::npos) {
                opt.overrides.push_back(a);
            } else {
                if (i + 1 >= args.size()) throw usage_error(a + ": expects a value");
                opt.overrides.push_back(a + "=" + args[++i]);
            }
        } else if (a.rfind("-", 0) == 0) {
            throw usage_error("reconstruct: unknown option '" + a + "' (see ensemblefit reconstruct --help)");
        } else if (opt.config_path.empty()) {
            opt.config_path = a;
        } else {
            throw usage_error("reconstruct: unexpected argument '" + a + "' (one config file only)");
        }
    }
    if (opt.config_path.empty())
        throw usage_error("reconstruct: no config file given (see ensemblefit reconstruct --help)");
    run_reconstruct(opt, ctx);
    return 0;
}

const CommandRegistrar reg("reconstruct", "CONFIG.ini: ptychographic reconstruction (CPU/GPU ranks)", &cmd_reconstruct);

}  // namespace
}  // namespace ef

// SPDX-License-Identifier: MIT
// `ensemblefit reconstruct CONFIG.ini`: distributed ptychographic reconstruction.
#include <cstdio>
#include <string>
#include <vector>

#include <ensemblefit/recon/recon_config.hpp>
#include <ensemblefit/recon/reconstruction.hpp>

#include "src/cli/commands.hpp"
#include "src/run/run_args.hpp"

namespace ef {
namespace {

void reconstruct_help() {
    std::printf("usage: ensemblefit reconstruct CONFIG.ini [options] [--section.key VALUE ...]\n\n"
                "Ptychographic reconstruction (single slice, mixed-state probe, Adam over mini-batches)\n"
                "of an HDF5 or CXI dataset; run under mpirun for several CPU and/or GPU ranks.\n\n"
                "options:\n"
                "  --resume        continue from the output's last checkpoint (written every\n"
                "                  output.checkpoint_every iterations or checkpoint_minutes, and when\n"
                "                  SIGUSR1/SIGTERM/SIGINT stops the run): ends bitwise equal to an\n"
                "                  uninterrupted run\n"
                "  --overwrite     replace an existing output file (refused otherwise)\n"
                "  --dry-run       read and check everything, print the plan, reconstruct nothing\n"
                "  --predicted F   a prediction of `ensemblefit advise -o F`: stored beside /timing\n"
                "  --trace F.json  every rank's phases as a Chrome trace (Perfetto, chrome://tracing)\n"
                "  --debug.speeds W0,W1,...[/W0,W1,.../...]\n"
                "                  per-rank speeds used instead of the measured ones at successive\n"
                "                  rebalance points (the last list repeats): forces unequal shares\n"
                "  -h, --help      this text\n\n%s",
                recon_config_help().c_str());
}

int cmd_reconstruct(const std::vector<std::string>& args, const MpiContext& ctx) {
    ReconRunOptions opt;
    const std::vector<ArgOption> options = {
        {"--debug.speeds", true, [&](const std::string& v) { opt.debug_speeds = v; }},
    };
    if (!parse_run_args("reconstruct", args, true, options, opt)) {
        if (ctx.is_root()) reconstruct_help();
        return 0;
    }
    run_reconstruct(opt, ctx);
    return 0;
}

const CommandRegistrar reg("reconstruct", "CONFIG.ini: ptychographic reconstruction (CPU/GPU ranks)", &cmd_reconstruct);

}  // namespace
}  // namespace ef

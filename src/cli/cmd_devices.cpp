// SPDX-License-Identifier: MIT
// `ensemblefit devices`: the GPUs each rank sees and their measured ceilings.
#include <cstdio>
#include <sstream>

#include <ensemblefit/core/config.hpp>
#include <ensemblefit/core/error.hpp>
#include <ensemblefit/worker/device_probe.hpp>

#include "src/cli/commands.hpp"
#include "src/core/text.hpp"

namespace ef {
namespace {

int cmd_devices(const std::vector<std::string>& args, const MpiContext& ctx) {
    bool measure = true;
    for (const auto& a : args) {
        if (a == "--no-probe") {
            measure = false;
        } else if (a != "-h" && a != "--help") {
            throw usage_error("devices: unknown argument '" + excerpt(a) + "' (allowed: --no-probe, --help)");
        } else {
            if (ctx.is_root())
                std::printf("usage: ensemblefit devices [--no-probe]\n\nLists the GPUs visible to each rank and "
                            "measures FP64/FP32 FMA throughput, device memory bandwidth (copy, read + write)\n"
                            "and pinned host-to-device bandwidth with a short probe (the ceilings used for "
                            "roofline fractions). The ranks of a node probe one after another.\n");
            return 0;
        }
    }
    std::ostringstream os;
    // One node-local rank at a time, so probes on a shared GPU do not disturb each other.
    std::vector<DeviceInfo> devs;
    for (int turn = 0; turn < ctx.local_size(); ++turn) {
        if (turn == ctx.local_rank()) devs = probe_devices(measure && ctx.local_rank() == 0);
        MPI_Barrier(ctx.world());
    }
    if (devs.empty()) os << ctx.rank() << "\t" << ctx.host() << "\t(no CUDA device" << (EF_HAVE_CUDA ? "" : "; built without CUDA") << ")\n";
    for (const auto& d : devs) {
        char line[512];
        if (measure && ctx.local_rank() == 0)
            std::snprintf(line, sizeof line, "%d\t%s\t%d: %s, %d SMs, %.1f GiB\tFP64 %.1f TFLOP/s, FP32 %.1f TFLOP/s, "
                          "memory %.0f GB/s, host->device %.1f GB/s, table GEMM %.1f TFLOP/s (cuBLAS DGEMM %.1f)\n",
                          ctx.rank(), ctx.host().c_str(), d.ordinal, d.name.c_str(), d.sms, d.memory_gib, d.fp64_tflops,
                          d.fp32_tflops, d.device_bandwidth_gbs, d.h2d_bandwidth_gbs, d.table_gemm_tflops,
                          d.cublas_dgemm_tflops);
        else
            std::snprintf(line, sizeof line, "%d\t%s\t%d: %s, %d SMs, %.1f GiB\n", ctx.rank(), ctx.host().c_str(),
                          d.ordinal, d.name.c_str(), d.sms, d.memory_gib);
        os << line;
    }
    const auto all = ctx.gather(os.str());
    if (ctx.is_root()) {
        std::printf("rank\thost\tdevice\tmeasured peaks (probed by the first rank of each node)\n");
        for (const auto& s : all) std::printf("%s", s.c_str());
    }
    return 0;
}

const CommandRegistrar reg("devices", "GPUs visible to each rank, with measured peaks", &cmd_devices);

}  // namespace
}  // namespace ef

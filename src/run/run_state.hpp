// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <vector>

#include <ensemblefit/comm/mpi_context.hpp>
#include <ensemblefit/run/run_args.hpp>
#include <ensemblefit/run/run_settings.hpp>
#include <ensemblefit/sched/phase_timer.hpp>

#include "src/run/placement.hpp"
#include "src/run/trace.hpp"

namespace ef {

/**
 * What a RunSession decided for this rank, in the order it decides it (settings, placement),
 * and the clocks of the run. The problem it runs reads the decisions and never makes them
 * again; it charges its time to `timer` (and `timeline` under --trace).
 */
struct RunState {
    RunState(const MpiContext& c, const RunArgs& a) : ctx(c), args(a) {
        if (!a.trace.empty()) timer.record_to(&timeline);
    }
    RunState(const RunState&) = delete;
    RunState& operator=(const RunState&) = delete;

    const MpiContext& ctx;
    const RunArgs& args;
    RunSettings settings;                ///< the config's [run] keys (parse_run_settings)
    std::string binding;                 ///< how this rank's cores were decided (apply_binding)
    ThreadPlan threads;                  ///< OpenMP threads of this rank (resolve_threads)
    DevicePlan device;                   ///< this rank's worker kind and GPU (choose_device)
    std::vector<std::string> placement;  ///< every rank's row, on rank 0 (gather_placement)
    PhaseTimer timer;
    PhaseTrace timeline;  ///< --trace

    /// This rank's GPU, -1 for a CPU worker.
    int gpu() const { return device.kind == WorkerKind::gpu ? device.device : -1; }
};

}  // namespace ef

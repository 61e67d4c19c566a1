// SPDX-License-Identifier: MIT
#pragma once

namespace ef {

/**
 * Print-only diagnostics, switched on by environment variables (docs/architecture.md,
 * "Environment variables"). They never change what a run computes, only what it prints to
 * stderr. Read once at start by read_diagnostics() (src/run/environment.cpp, the one place that
 * reads the environment) and handed down to the workers in their options.
 */
struct Diagnostics {
    bool setup_trace = false;       ///< EF_SETUP_TRACE: each rank's set-up steps and their times
    bool gpu_stats = false;         ///< EF_GPU_STATS: launches and LM rounds per GPU unit
    bool recon_comm_trace = false;  ///< EF_RECON_COMM_TRACE=1: the reconstruction's sum and update times
    bool recon_peer_trace = false;  ///< EF_RECON_PEER_TRACE=1: the GPU peer sum's set-up
    bool recon_phases = false;      ///< EF_RECON_PHASES=1: GPU time per reconstruction phase (events)
};

/// The diagnostics of this process, read from the environment on first call.
const Diagnostics& diagnostics();

}  // namespace ef

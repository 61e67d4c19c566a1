// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <vector>

#include <ensemblefit/comm/mpi_context.hpp>

#include "src/run/advise_model.hpp"

namespace ef::advise {

/// What `advise` is asked about: the config, its overrides and the machine it plans for.
struct AdviseRequest {
    std::string config;
    std::vector<std::string> overrides;  ///< the user's --section.key=VALUE tokens
    bool recon = false;                  ///< a reconstruction config (else a fit)
    int cores = 1;
    double budget = 15.0;  ///< seconds for all calibration runs
    double items = 0;      ///< the fit's replica fits (set by calibrate from the config)
    bool cpu = true, gpu = false;
    bool mpirun = false;   ///< mpirun can be started from here (a reconstruction then calibrates 2 ranks too)
    double gpu_context = 0;  ///< seconds to create the GPU's context, timed before anything else touched it
};

/// One short calibration run of the real command: the items its one unit held, and the
/// seconds of its phases as /timing recorded them.
struct CalibrationPoint {
    std::string workers;  ///< cpu | gpu
    int threads = 1;
    double items = 0;     ///< fit: replica fits of the unit; reconstruction: positions per mini-batch
    double units = 1;     ///< units (mini-batches) the run computed
    double compute = 0, io = 0, outside = 0;  ///< outside: everything else, to the call's return
    double allreduce_bytes = 0;  ///< reconstruction: bytes summed per mini-batch
    double iterations = 0;       ///< fit: mean LM iterations per replica fit
    double compiled = 0;         ///< seconds compiling formulas (not in `outside`: later runs hit the cache)
};

/**
 * Runs the calibration of `req` in this process on `self` (one rank), each run silenced and
 * writing into a temporary folder that is removed after: for every worker kind asked for,
 * units of growing size on one thread (then one on every core, for the thread efficiency)
 * until the budget would be passed. Returns the model of the problem with its measured
 * worker speeds; `points` gets every run, for the table of what was measured.
 */
ProblemModel calibrate(AdviseRequest req, const MpiContext& self, std::vector<CalibrationPoint>& points);

/**
 * Wall seconds of `mpirun --bind-to none --oversubscribe -np RANKS <this program> ARGS...`, in
 * the environment this process started with (start_environment()), output discarded.
 * Negative when mpirun is not found, fails, or takes over 60 s.
 */
double run_mpirun(int ranks, const std::vector<std::string>& args);

/// Seconds since this process started (its launcher's and MPI's start-up until now).
double process_age_seconds();

}  // namespace ef::advise

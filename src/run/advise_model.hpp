// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace ef::advise {

/// y = a + b x: the cost of a work unit against the items in it (a: the unit's fixed cost).
struct Linear {
    double a = 0.0;
    double b = 0.0;
    double at(double x) const { return a + b * x; }
};

/**
 * y = a + b x with a, b >= 0, robust to timing noise: b by least squares over the larger half of
 * the points (one point: through the origin), a the median of y - b x over all points (the
 * small units tell the fixed cost). No spread in x: the mean of y. Empty: zero.
 */
Linear fit_linear(const std::vector<double>& x, const std::vector<double>& y);

/**
 * What the calibration of one worker kind measured: a unit's compute seconds against its items
 * (replica fits of a fit unit, positions of a mini-batch) on one rank alone, on one thread for a
 * CPU worker; the speed on `cores` threads relative to `cores` times one thread; the seconds a
 * run spends outside compute and output (set-up: config, data, model, worker or device).
 */
struct WorkerSpeed {
    bool measured = false;
    Linear unit;
    double thread_efficiency = 1.0;  ///< at all the node's cores; 1 thread is 1 by definition
    double fixed = 0.0;           ///< on one thread
    /// The part of `fixed` that a rank's threads share (the model's tables, built with the
    /// rank's threads): a rank with T threads spends fixed - threaded + threaded / T. Every rank
    /// builds its own, so ranks do not share it.
    double fixed_threaded = 0.0;
    /// Reconstruction: seconds a mini-batch costs beyond its compute with 2 ranks (their sums and
    /// barriers; 2 ranks on one GPU: also the two contexts taking turns), from a 2-rank run.
    double batch_sync = 0.0;
    bool batch_sync_measured = false;
    double fixed_at(int threads) const { return fixed - fixed_threaded + fixed_threaded / std::max(threads, 1); }
};

/// The problem as the prediction sees it, from its config and the calibration runs.
struct ProblemModel {
    bool recon = false;
    double items = 0.0;       ///< fit: replica fits (R + 1); reconstruction: scan positions
    double iterations = 1.0;  ///< reconstruction: passes over the positions
    double trial_iterations = 0.0;  ///< reconstruction: more passes before them (probe.defocus = auto's trials)
    double batch = 1.0;       ///< reconstruction: positions per mini-batch (over all ranks)
    int cores = 1;            ///< cores of the node (or of the allocation)
    double launch = 0.0;      ///< seconds to start one rank's process and MPI, and to end it
    double launch_per_rank = 0.08;  ///< more seconds per further rank (mpirun spawns them)
    Linear io;                ///< output seconds against items (fit) or a constant (reconstruction)
    double allreduce_bytes = 0.0;   ///< reconstruction: bytes of the gradient sum per mini-batch
    double bandwidth = 4e9;   ///< bytes per second of a sum between ranks of one node
    double gpu_context = 0.0;   ///< seconds to create a GPU's context (measured once; in gpu.fixed)
    double gpu_teardown = 0.0;  ///< seconds to destroy it with what the runs left in it (in gpu.fixed)
    WorkerSpeed cpu, gpu;
};

/// Where the ranks run: CPU ranks with `threads` OpenMP threads each, and GPU ranks
/// (`gpus` devices with `ranks_per_gpu` ranks each).
struct Placement {
    int cpu_ranks = 0;
    int threads = 1;
    int gpus = 0;
    int ranks_per_gpu = 0;
    int ranks() const { return cpu_ranks + gpus * ranks_per_gpu; }
    int gpu_ranks() const { return gpus * ranks_per_gpu; }
    /// "4 cpu x 1 thread", "1 gpu x 2 ranks", "1 gpu x 2 ranks + 1 cpu x 1 thread".
    std::string label() const;
};

struct Prediction {
    Placement placement;
    double wall = 0.0;        ///< seconds of the whole command: start-up to exit
    double runtime = 0.0;     ///< the part a run's /timing measures (wall without the first rank's launch and exit)
    double compute = 0.0;     ///< seconds the busiest rank computes
    double efficiency = 0.0;  ///< predicted POP parallel efficiency: mean compute / wall
    std::string bound;        ///< what limits the placement, in words
};

/// The placements advise compares: CPU ranks at 1, 2, 4, ... cores (threads filling the
/// cores), each GPU with every count of `ranks_per_gpu`, and GPU ranks beside CPU ranks on
/// the cores the GPU ranks leave.
std::vector<Placement> candidate_placements(int cores, int gpus, const std::vector<int>& ranks_per_gpu, bool cpu,
                                            bool gpu);

Prediction predict(const ProblemModel& m, const Placement& p);

/// The index of the fastest prediction; one within 3 % of it (what the model can tell apart)
/// wins when it uses fewer GPUs, then fewer cores, then fewer threads per rank.
size_t recommend(const std::vector<Prediction>& rows);

}  // namespace ef::advise

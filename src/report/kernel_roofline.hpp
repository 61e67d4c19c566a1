// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <vector>

#include <ensemblefit/comm/mpi_context.hpp>
#include <ensemblefit/report/timing_report.hpp>

#include "src/io/h5.hpp"

namespace ef {

class KernelTally;

/**
 * One phase of model work of a run on the roofline: what it did (FLOPs as counted by the model's
 * cost count, bytes of the traffic it reads and writes), how long it took (rank-seconds over the
 * ranks), and the ceilings of the device it ran on where they were measured (`devices`); 0 where
 * not counted or not measured. Stored as /timing/kernels/<name> (attributes), read by
 * `report --roofline` and perf/plot_roofline.py.
 */
struct KernelRecord {
    std::string name;
    std::string what;  ///< how the counts were obtained, in words
    double flops = 0, bytes = 0, seconds = 0;
    double ceiling_flops = 0, ceiling_bytes = 0;  ///< per second, of the device (0: not probed)
    double flop_rate() const { return seconds > 0 ? flops / seconds : 0.0; }
    double byte_rate() const { return seconds > 0 ? bytes / seconds : 0.0; }
    double intensity() const { return bytes > 0 ? flops / bytes : 0.0; }
    /// Achieved over the roofline's bound at this intensity (min(peak, intensity x bandwidth)).
    double fraction() const;
};

/// One phase of model work (a KernelTally entry) summed over the ranks of one worker kind.
struct KernelSum {
    std::string name;  ///< the tally's name ("gemm", "window forward")
    bool gpu = false;
    double seconds = 0, flops = 0, bytes = 0, items = 0;
    long calls = 0;
    int ranks = 0;  ///< ranks that ran it
};

/**
 * Collective: every rank's tally (null: none) to rank 0, summed per worker kind and phase in
 * the order first seen (rank 0's first). Rank 0 gets the sums, the others nothing.
 */
std::vector<KernelSum> gather_kernel_sums(const MpiContext& ctx, const KernelTally* tally, bool gpu);

/// The measured ceilings a run's GPU rows are set against, per second.
struct Ceilings {
    double flops = 0, bytes = 0;
    std::string device;  ///< the probed device's name
};

/**
 * Collective, after the run's work: the first GPU rank probes its device (`device`: its
 * ordinal, -1 on a CPU rank; kernels/cuda/device_probe.cu, probe_ceilings: tens of
 * milliseconds) and every rank gets its FMA throughput (FP32 with `single_precision`, else
 * FP64) and device memory bandwidth. No GPU rank: zeros (no CPU ceiling is probed).
 */
Ceilings gpu_ceilings(const MpiContext& ctx, int device, bool single_precision);

/// A tally name as an HDF5 group name and a table cell ("window forward" -> "window_forward");
/// GPU phases get "gpu_" before it.
std::string kernel_row_name(const KernelSum& s);

/// A summed tally as a /timing/kernels row: its name, seconds, counted FLOPs and bytes, and on
/// a GPU the measured ceilings (`what` is the caller's: what it counted and how it was timed).
KernelRecord kernel_record(const KernelSum& s, const Ceilings& gpu);

/**
 * The POP host/device split of a run with GPU ranks (docs/architecture.md, "Roofline, trace and
 * the host/device split"). Host side: the MPI parallel efficiency of every rank's compute phase
 * (load balance x communication, as /timing has it) times the device offload efficiency (the
 * GPU ranks' kernel seconds over their compute seconds). Device side: load balance (mean over
 * max kernel seconds), communication (max kernel over max kernel-plus-transfer seconds, the
 * transfers between devices timed apart from the kernels: the reconstruction's device-side
 * sums; none in a fit) and orchestration (the busiest device's seconds over the runtime); their
 * product is the device parallel efficiency, mean device seconds over the runtime. The two
 * sides are never multiplied together.
 */
struct DeviceSplit {
    int gpu_ranks = 0;
    double host_parallel = 0, offload = 0;
    double device_load_balance = 0, device_communication = 1, orchestration = 0;
    double host() const { return host_parallel * offload; }
    double device() const { return device_load_balance * device_communication * orchestration; }
};

/// Each rank's device seconds: in kernels (its tally's sum; -1 on a CPU rank) and in transfers
/// between devices timed apart from them (the reconstruction's device-side sums).
struct DeviceTimes {
    std::vector<double> kernels, transfers;
};
/// Collective: every rank's device seconds to rank 0 (empty elsewhere).
DeviceTimes gather_device_seconds(const MpiContext& ctx, const KernelTally* tally, bool gpu, double transfers = 0);
/// Rank 0: the split from each rank's compute phase and device seconds.
DeviceSplit device_split(const std::vector<RankTiming>& ranks, const DeviceTimes& device, double runtime,
                         double host_parallel);
/// As attributes of each group (device_* and host_* names) and as the report's lines.
void write_device_split(h5::File& f, const std::vector<std::string>& groups, const DeviceSplit& s);
std::string format_device_split(const DeviceSplit& s);

void write_kernels(h5::File& f, const std::vector<std::string>& groups, const std::vector<KernelRecord>& kernels);
std::vector<KernelRecord> read_kernels(const h5::File& f, const std::string& group);
/// The table `report --roofline` prints for one file.
std::string format_kernels(const std::vector<KernelRecord>& kernels);

}  // namespace ef

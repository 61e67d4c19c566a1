// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <vector>

#include "src/io/h5.hpp"

namespace ef {

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

void write_kernels(h5::File& f, const std::vector<std::string>& groups, const std::vector<KernelRecord>& kernels);
std::vector<KernelRecord> read_kernels(const h5::File& f, const std::string& group);
/// The table `report --roofline` prints for one file.
std::string format_kernels(const std::vector<KernelRecord>& kernels);

}  // namespace ef

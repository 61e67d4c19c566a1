// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <vector>

namespace ef {

/// One GPU and the ceilings measured on it by a short probe (roofline denominators).
struct DeviceInfo {
    int ordinal = 0;
    std::string name;
    double memory_gib = 0.0;
    int sms = 0;
    double fp64_tflops = 0.0;        ///< measured FMA throughput (2 FLOP per FMA)
    double fp32_tflops = 0.0;
    double device_bandwidth_gbs = 0.0;  ///< device-to-device copy, bytes read + written
    double h2d_bandwidth_gbs = 0.0;     ///< pinned host to device
    /// FP64 GEMM at the stats2 table shape (5000 x 1088 times 1088 x 35840): the batched
    /// fitter's deterministic kernel and cuBLAS's DGEMM (which may use FP64 tensor cores).
    double table_gemm_tflops = 0.0;
    double cublas_dgemm_tflops = 0.0;
};

/// The visible devices; with `measure`, runs the probe on each (about a second per device).
/// Empty when built without CUDA or when no device is visible.
std::vector<DeviceInfo> probe_devices(bool measure);

/// The roofline's ceilings of device `ordinal` only, by a shorter probe (tens of milliseconds:
/// FP64 and FP32 FMA throughput, device memory bandwidth; no GEMM, no host copies), for a run's
/// /timing/kernels. Zeros when built without CUDA or when the probe fails.
DeviceInfo probe_ceilings(int ordinal);

}  // namespace ef

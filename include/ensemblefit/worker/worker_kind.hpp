// SPDX-License-Identifier: MIT
#pragma once

#include <string>

namespace ef {

/// What a rank computes on: OpenMP threads on its cores, or one GPU. Shared by the fit's and
/// the reconstruction's workers, so neither problem's headers need the other's.
enum class WorkerKind { cpu, gpu };

inline const char* to_string(WorkerKind kind) { return kind == WorkerKind::cpu ? "cpu" : "gpu"; }

/// Number of CUDA devices visible to this process (0 when built without CUDA or none found).
int cuda_device_count();
/// Name of device `ordinal` ("" when unavailable).
std::string cuda_device_name(int ordinal);
/// PCI bus id of device `ordinal` ("0000:3b:00.0"; "" when unavailable).
std::string cuda_device_pci_bus_id(int ordinal);
/// Creates device `ordinal`'s primary context on the calling thread (the driver's start and the
/// context, 0.1-0.3 s on a large GPU), so a thread can pay for it while the run reads its data;
/// the worker made later on that device finds it ready. Errors are cleared and dropped: the
/// worker reports them. Does nothing without CUDA.
void cuda_create_context(int ordinal);
/// Seconds to destroy the calling process's context on device `ordinal` with everything in it
/// (cudaDeviceReset: what a GPU rank's exit pays); 0 without CUDA.
double cuda_reset_seconds(int ordinal);

}  // namespace ef

// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>

/**
 * The binary interface between ensemblefit and a model plugin: a shared library built by
 * `ensemblefit_add_model()` (cmake/ensemblefitModelPlugin.cmake) from one header-only model.
 *
 * The library exports one C symbol, `ensemblefit_model_plugin`, returning a table of plain
 * data and function pointers. `[model] plugin = lib.so` dlopens it, reads the table and refuses
 * it unless `abi_version` equals the program's EF_MODEL_PLUGIN_ABI_VERSION: the entry points take
 * the program's own C++ types (FitPlan, FitDataView, ReplicaBlock) by pointer, so a plugin must be
 * built against the headers of the package that loads it, and the version changes whenever those
 * types or this table change. Everything else (names, the LM code) comes from the plugin.
 *
 * Why a C table and not a C++ class: dlsym finds one unmangled name, and a missing or stale
 * plugin is told apart from a wrong one before any C++ object crosses the boundary.
 *
 * Version 2 added the GPU entry points (`gpu`, EfModelPluginGpu). A version-1 table has the same
 * layout with `gpu` always null, so the loader still takes it: its CPU entries run unchanged.
 */
#define EF_MODEL_PLUGIN_ABI_VERSION 2

/// The oldest table version the loader still takes (see above).
#define EF_MODEL_PLUGIN_ABI_OLDEST 1

/// The symbol a plugin exports (a function returning const EfModelPlugin*).
#define EF_MODEL_PLUGIN_SYMBOL "ensemblefit_model_plugin"

namespace ef {
struct FitPlan;
struct FitDataView;
struct ReplicaBlock;
}  // namespace ef

extern "C" {

/**
 * One CPU fit path: fits replicas[0..count) with `threads` OpenMP threads into out[0..count)
 * (`out` sized by the caller). `inv_sigma` is the normal path's 1 / sigma in its precision
 * (float* or double*), unused by the qr path. Exceptions do not cross: a failure is returned as
 * a message (static or thread-local storage), nullptr on success.
 */
typedef const char* (*EfPluginCpuFit)(const ef::FitPlan* plan, const ef::FitDataView* data, const void* inv_sigma,
                                      const std::int64_t* replicas, int count, int threads, ef::ReplicaBlock* out);

/// Values of the model at n points (x row-major, nx per point) for parameters p, in double.
typedef void (*EfPluginValues)(const double* p, const double* x, int nx, int n, double* out);

/**
 * Launches one of the plugin's solver kernels: the templates of kernels/cuda/replica_kernels.cuh
 * instantiated for its model by nvcc (kernels/plugin/model_plugin_gpu.cuh). `kernel` names one,
 * "normal_fit_kernel<float, 5>" or "lm_fit_kernel<8>"; `args` points to the kernel's `nargs`
 * arguments after the model (the plugin puts its model first), as cudaLaunchKernel takes them;
 * `stream` is a cudaStream_t of the caller's device. Returns nullptr on success, else a message.
 */
typedef const char* (*EfPluginGpuLaunch)(const char* kernel, unsigned blocks, unsigned threads, void* stream,
                                         int nargs, void** args);

/// A plugin's GPU code (ABI version 2).
struct EfModelPluginGpu {
    EfPluginGpuLaunch launch;
    int workspace_size;  ///< the model's workspace_size(): the qr path's per-replica scratch
};

/// What a plugin library describes about itself; see the file comment.
struct EfModelPlugin {
    std::uint32_t abi_version;       ///< EF_MODEL_PLUGIN_ABI_VERSION of the headers it was built with
    const char* name;                ///< the model's name (its `name` member)
    int num_params;                  ///< parameters, in the order of param_names
    const char* const* param_names;  ///< num_params names, matched against the [param.NAME] sections
    EfPluginValues values;           ///< predictions (ensemblefit predict)
    EfPluginCpuFit cpu_qr;           ///< FitPath::qr, dual widths 4, 8 and 16
    EfPluginCpuFit cpu_normal_f64;   ///< FitPath::normal in double
    EfPluginCpuFit cpu_normal_f32;   ///< FitPath::normal in float
    const EfModelPluginGpu* gpu;     ///< GPU entry points; nullptr: the plugin has no GPU code
};

/// The type of the exported symbol.
typedef const EfModelPlugin* (*EfModelPluginEntry)(void);
}

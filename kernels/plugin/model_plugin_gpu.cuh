// SPDX-License-Identifier: MIT
#pragma once
// The GPU part of a model plugin: the per-replica solver kernels of
// kernels/cuda/replica_kernels.cuh (the ones nvcc builds for the built-in models and NVRTC for
// formulas) instantiated for the plugin's model, and the launcher the plugin table exports
// (EfModelPluginGpu). ensemblefit_add_model() compiles it with nvcc when CUDA is on, with the
// flags of the built-ins' device code (--fmad=false), so a plugin fits with the same bits.

#include <cuda_runtime.h>

#include <cstring>

#include <ensemblefit/model/model_plugin.hpp>

#include "kernels/cuda/replica_kernels.cuh"

namespace ef::plugin {

/// The kernels of Model a GPU worker may ask for, by name (EfPluginGpuLaunch).
template <class Model>
struct PluginGpuEntries {
    struct Kernel {
        const char* name;
        const void* fn;
    };
    static constexpr int kArgs = 17;  ///< arguments after the model, both kernels

    static const Kernel* find(const char* name) {
        static const Kernel kernels[] = {
            {"normal_fit_kernel<float, 3>", reinterpret_cast<const void*>(&cuda::normal_fit_kernel<float, 3, Model>)},
            {"normal_fit_kernel<float, 5>", reinterpret_cast<const void*>(&cuda::normal_fit_kernel<float, 5, Model>)},
            {"normal_fit_kernel<float, 8>", reinterpret_cast<const void*>(&cuda::normal_fit_kernel<float, 8, Model>)},
            {"normal_fit_kernel<float, 16>", reinterpret_cast<const void*>(&cuda::normal_fit_kernel<float, 16, Model>)},
            {"normal_fit_kernel<double, 3>", reinterpret_cast<const void*>(&cuda::normal_fit_kernel<double, 3, Model>)},
            {"normal_fit_kernel<double, 5>", reinterpret_cast<const void*>(&cuda::normal_fit_kernel<double, 5, Model>)},
            {"normal_fit_kernel<double, 8>", reinterpret_cast<const void*>(&cuda::normal_fit_kernel<double, 8, Model>)},
            {"normal_fit_kernel<double, 16>",
             reinterpret_cast<const void*>(&cuda::normal_fit_kernel<double, 16, Model>)},
            {"lm_fit_kernel<4>", reinterpret_cast<const void*>(&cuda::lm_fit_kernel<4, Model>)},
            {"lm_fit_kernel<8>", reinterpret_cast<const void*>(&cuda::lm_fit_kernel<8, Model>)},
            {"lm_fit_kernel<16>", reinterpret_cast<const void*>(&cuda::lm_fit_kernel<16, Model>)},
        };
        for (const Kernel& k : kernels)
            if (std::strcmp(k.name, name) == 0) return &k;
        return nullptr;
    }

    static const char* launch(const char* kernel, unsigned blocks, unsigned threads, void* stream, int nargs,
                              void** args) {
        const Kernel* k = find(kernel);
        if (k == nullptr) return "model plugin: no such GPU kernel";
        if (nargs != kArgs) return "model plugin: wrong number of kernel arguments";
        Model model{};
        void* all[kArgs + 1] = {&model};
        for (int a = 0; a < kArgs; ++a) all[a + 1] = args[a];
        const cudaError_t e = cudaLaunchKernel(k->fn, dim3(blocks), dim3(threads), all, 0,
                                               static_cast<cudaStream_t>(stream));
        return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
    }

    static const EfModelPluginGpu* table() {
        static const EfModelPluginGpu t{&launch, Model{}.workspace_size()};
        return &t;
    }
};

}  // namespace ef::plugin

/// Defines the GPU table of a plugin for model type TYPE, in its one .cu translation unit
/// (ensemblefit_add_model writes this line); model_plugin_entry.hpp's table points to it.
#define EF_DEFINE_MODEL_PLUGIN_GPU(TYPE)                                                              \
    extern "C" __attribute__((visibility("hidden"))) const EfModelPluginGpu* ensemblefit_model_plugin_gpu() { \
        return ::ef::plugin::PluginGpuEntries<TYPE>::table();                                       \
    }

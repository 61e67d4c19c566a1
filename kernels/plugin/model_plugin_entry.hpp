// SPDX-License-Identifier: MIT
#pragma once

#include <exception>
#include <string>
#include <vector>

#include <ensemblefit/model/model_plugin.hpp>

#include "kernels/cpu/replica_paths.hpp"

/// The plugin's GPU table, defined by its nvcc-compiled part (model_plugin_gpu.cuh) when it has
/// one: weak and hidden, so a plugin built without CUDA links it as null.
extern "C" __attribute__((weak, visibility("hidden"))) const EfModelPluginGpu* ensemblefit_model_plugin_gpu();

namespace ef::plugin {

/**
 * The entry points of a model plugin for `Model` (the concept of kernels/models/builtin_models.hpp
 * plus `static constexpr const char* name` and `static constexpr const char* param_names[]`):
 * each one instantiates the per-replica LM paths of kernels/cpu/replica_paths.hpp, the code the
 * built-in models get, and turns an exception into a message (none may cross a C boundary).
 */
template <class Model>
struct PluginEntries {
    template <class F>
    static const char* guarded(F&& f) noexcept {
        try {
            f();
            return nullptr;
        } catch (const std::exception& e) {
            thread_local std::string what;
            what = e.what();
            return what.c_str();
        } catch (...) {
            return "unknown exception in the model plugin";
        }
    }

    static const char* qr(const FitPlan* plan, const FitDataView* data, const void* /*inv_sigma*/,
                          const std::int64_t* replicas, int count, int threads, ReplicaBlock* out) {
        return guarded([&] { cpu::fit_qr_path(Model{}, *plan, *data, replicas, count, threads, *out); });
    }

    template <class Real>
    static const char* normal(const FitPlan* plan, const FitDataView* data, const void* inv_sigma,
                              const std::int64_t* replicas, int count, int threads, ReplicaBlock* out) {
        return guarded([&] {
            cpu::fit_normal_path<Real>(Model{}, *plan, *data, static_cast<const Real*>(inv_sigma), replicas, count,
                                       threads, *out);
        });
    }

    static void values(const double* p, const double* x, int nx, int n, double* out) {
        const Model m{};
        std::vector<double> ws(static_cast<size_t>(m.workspace_size() > 0 ? m.workspace_size() : 1));
        m.prepare(p, ws.data());
        for (int i = 0; i < n; ++i) out[i] = m.value(p, ws.data(), x + static_cast<long>(i) * nx, i);
    }

    /// The table; param_names is nullptr when the model's num_params() and its names disagree
    /// (the loader refuses that plugin).
    static const EfModelPlugin* table() {
        constexpr int names = static_cast<int>(sizeof(Model::param_names) / sizeof(Model::param_names[0]));
        const int params = Model{}.num_params();
        static const EfModelPlugin t{EF_MODEL_PLUGIN_ABI_VERSION,
                                     Model::name,
                                     params,
                                     names == params ? Model::param_names : nullptr,
                                     &values,
                                     &qr,
                                     &normal<double>,
                                     &normal<float>,
                                     ensemblefit_model_plugin_gpu != nullptr ? ensemblefit_model_plugin_gpu() : nullptr};
        return &t;
    }
};

}  // namespace ef::plugin

/// Defines the exported entry of a plugin for model type TYPE (cmake/ensemblefitModelPlugin.cmake
/// writes this line; a test may write it too, in one translation unit).
#define EF_DEFINE_MODEL_PLUGIN(TYPE)                                                      \
    extern "C" __attribute__((visibility("default"))) const EfModelPlugin* ensemblefit_model_plugin() { \
        return ::ef::plugin::PluginEntries<TYPE>::table();                               \
    }

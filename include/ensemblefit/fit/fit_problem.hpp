// SPDX-License-Identifier: MIT
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <ensemblefit/config/fit_config.hpp>
#include <ensemblefit/io/data_table.hpp>

namespace ef {

class CompiledModel;
class TableShare;
struct Whitening;

/**
 * Everything a worker needs to fit replicas: the resolved config (with `params` reordered into
 * the model's parameter order), the validated data, and the compiled model. Built once per rank
 * and shared read-only by all threads; replica r's result depends on nothing else.
 */
struct FitProblem {
    FitConfig config;
    DataTable data;
    std::shared_ptr<const CompiledModel> model;
    /// Correlated data whose model is not table-linear: the Cholesky factor the LM whitens the
    /// model's values with (src/fit/correlated.hpp); null otherwise (data already whitened).
    std::shared_ptr<const Whitening> whitening;

    int num_params() const { return static_cast<int>(config.params.size()); }
    /// Model name and a one-line description of its size and cost.
    std::string describe_model() const;
    /// Model FLOPs for one evaluation at all points (values only), 0 when not counted.
    double model_flops() const;
    /// Model FLOPs for one value at one point (doubles).
    double model_flops_per_point() const;
    /// FLOPs of one LM iteration of one replica: Jacobian passes on duals, one trial
    /// evaluation, and the QR of the n x P Jacobian (or, with solver = normal, the normal
    /// equations' accumulation and solve). 0 when the model's cost is not counted.
    double flops_per_iteration() const;
};

/**
 * Compiles the configured model against the data and checks the [param.NAME] sections against
 * the model's parameters. Throws ef::Error (exit code 2) naming the key or formula column.
 */
FitProblem make_fit_problem(FitConfig config, DataTable data);
/// The same, with the model's parameter-independent tables (dis-mellin) built through `share`:
/// one copy per node, each rank computing a slice (src/comm/table_share.hpp); collective over
/// the sharing ranks. Null: this process builds and holds all of them.
FitProblem make_fit_problem(FitConfig config, DataTable data, TableShare* share);

/// The parameter names a built-in model expects, in order (empty for `formula`).
std::vector<std::string> builtin_param_names(const FitConfig& config);

}  // namespace ef

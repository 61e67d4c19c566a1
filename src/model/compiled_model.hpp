// SPDX-License-Identifier: MIT
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/models/model_variant.hpp"

namespace ef {

/**
 * A model ready to run: the trivially copyable view (ModelVariant) plus the host storage it
 * points into (a formula's program, a physics model's tables). Internal to the library.
 */
class CompiledModel {
   public:
    ModelVariant view;
    std::vector<std::string> param_names;
    std::string description;
    double flops_per_evaluation = 0.0;  ///< values at all points; 0 when not counted
    double flops_per_point = 0.0;       ///< one value() on doubles
    /// One evaluation (prepare + all points) on Dual<double, K> for K = 4, 8, 16: one Jacobian
    /// pass. 0 when not counted.
    double flops_dual_pass[3] = {0.0, 0.0, 0.0};
    std::shared_ptr<const void> storage;
    /// A model plugin's identity (empty for the other models): its table's name and ABI
    /// version, the SHA-256 of the library's bytes and its absolute path. Result files store
    /// them; --resume, merge and predict compare them (docs/security.md).
    struct Plugin {
        std::string name, sha256, path;
        int abi = 0;
    } plugin;
};

}  // namespace ef

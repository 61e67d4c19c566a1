// SPDX-License-Identifier: MIT
#pragma once

#include <memory>

#include <ensemblefit/worker/worker.hpp>

#include "kernels/fit/fit_inputs.hpp"
#include "kernels/fit/fit_plan.hpp"

namespace ef::cuda {

/**
 * The CUDA worker that runs `plan` on GPU options.device (kernels/cuda/fit_kernels.cu): the
 * data, parameters and model tables go to the device once; a unit runs the batched paths'
 * rounds or one thread per replica. `in` views host memory that outlives the worker. Throws
 * usage_error when no GPU is visible (and, built without CUDA, always: src/worker/cuda_stub.cpp).
 * CUDA-free, for src/worker.
 */
std::unique_ptr<Worker> make_fit_worker(FitPlan plan, FitInputs in, const WorkerOptions& options);

}  // namespace ef::cuda

// SPDX-License-Identifier: MIT
// The CUDA fitting worker: one thread per replica runs the same single-source resampling and
// bounded LM (kernels/fit/*.hpp) as the CPU worker, on a device copy of the data and of the
// model's tables. Per-backend code here is only memory, launch and batching.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <ensemblefit/core/error.hpp>
#include <ensemblefit/worker/worker.hpp>

#include "kernels/cpu/fit_kernels.hpp"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/fit_batched.cuh"
#include "kernels/fit/lm.hpp"
#include "kernels/fit/lm_normal_dispatch.hpp"
#include "kernels/fit/resample.hpp"
#include "src/fit/fit_arrays.hpp"
#include "src/model/compiled_model.hpp"

namespace ef {
namespace {

using cuda::DeviceBuffer;
using cuda::TableBatchFitter;

/**
 * Bytes per replica in flight: LM scratch (Jacobian n x P dominates), resampled y and weights.
 * One launch fits `count` replicas, one per thread, 64 threads per block.
 */
template <int K, class Model>
__global__ void lm_fit_kernel(Model model, FitDataView data, ParamBoundsView bounds, LmSettings settings,
                              int bootstrap, std::uint64_t seed, const std::int64_t* replicas, int count,
                              const double* start, double* ybuf, double* wbuf, double* work, size_t work_stride,
                              double* params, double* chi2, std::int64_t* status, std::int64_t* iterations,
                              double* central_cov) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count) return;
    const int n = data.n;
    const int P = bounds.P;
    const std::int64_t r = replicas[t];
    double* y = ybuf + static_cast<size_t>(t) * n;
    double* w = wbuf + static_cast<size_t>(t) * n;
    resample_replica(bootstrap, seed, static_cast<std::uint64_t>(r), n, data.y, data.sigma, y, w);
    FitDataView view = data;
    view.y = y;
    view.weight = bootstrap ? w : nullptr;
    double* p = params + static_cast<size_t>(t) * P;
    for (int q = 0; q < P; ++q) p[q] = start[q];
    const LmOutcome o = lm_fit<K>(model, view, bounds, settings, p, work + static_cast<size_t>(t) * work_stride,
                                  r == 0 ? central_cov : nullptr);
    chi2[t] = o.chi2;
    status[t] = static_cast<std::int64_t>(o.status);
    iterations[t] = o.iterations;
}

/**
 * The normal-equations LM, one thread per replica with its whole state in registers: the
 * thread resamples its replica into column t of the point-major y (and w) arrays, so that a
 * warp's 32 replicas read consecutive addresses at every point, then fits.
 */
template <class Real, int K, class Model>
__global__ void normal_fit_kernel(Model model, NormalFitData<Real> data, ParamBoundsView bounds, LmSettings settings,
                                  int bootstrap, std::uint64_t seed, const double* y0, const double* sigma,
                                  const std::int64_t* replicas, int count, const double* start, Real* ybuf,
                                  Real* wbuf, double* params, double* chi2, std::int64_t* status,
                                  std::int64_t* iterations, double* central_cov) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count) return;
    const std::int64_t r = replicas[t];
    resample_replica_strided<Real>(bootstrap, seed, static_cast<std::uint64_t>(r), data.n, y0, sigma, ybuf + t,
                                   bootstrap ? wbuf + t : nullptr, count);
    NormalFitData<Real> view = data;
    view.y = ybuf + t;
    view.w = bootstrap ? wbuf + t : nullptr;
    view.stride = count;
    double* p = params + static_cast<size_t>(t) * bounds.P;
    for (int q = 0; q < bounds.P; ++q) p[q] = start[q];
    const LmOutcome o = lm_normal_fit<Real, K>(model, view, bounds, settings, p, r == 0 ? central_cov : nullptr);
    chi2[t] = o.chi2;
    status[t] = static_cast<std::int64_t>(o.status);
    iterations[t] = o.iterations;
}

/// Device copies of what a model view points to, and the view rewritten to point at them.
struct DeviceModel {
    ModelVariant view;
    DeviceBuffer<FormulaOp> code;
    DeviceBuffer<double> doubles_a;
    DeviceBuffer<double> doubles_b;
};

void upload_model(const CompiledModel& cm, DeviceModel& dm) {
    dm.view = cm.view;
    if (auto* f = std::get_if<FormulaModel>(&dm.view)) {
        const auto* prog = static_cast<const FormulaProgram*>(cm.storage.get());
        dm.code.upload(prog->code.data(), prog->code.size());
        dm.doubles_a.resize(1);  // a formula may have no constants at all
        dm.doubles_a.upload(prog->constants.data(), prog->constants.size());
        f->code = dm.code.get();
        f->constants = dm.doubles_a.get();
    } else if (auto* d = std::get_if<DisMellinModel>(&dm.view)) {
        const size_t table = static_cast<size_t>(d->points) * d->num_nodes * 2 * dis_mellin::kNumBasis;
        dm.doubles_a.upload(d->table, table);
        dm.doubles_b.upload(d->nodes, 2 * static_cast<size_t>(d->num_nodes));
        d->table = dm.doubles_a.get();
        d->nodes = dm.doubles_b.get();
    }
}

class CudaWorker final : public Worker {
   public:
    CudaWorker(const FitProblem& pb, int device) : pb_(pb), device_(device) {
        const bool trace = std::getenv("EF_SETUP_TRACE") != nullptr;
        auto mark = [&, t0 = std::chrono::steady_clock::now()](const char* what) mutable {
            if (!trace) return;
            const auto t1 = std::chrono::steady_clock::now();
            std::fprintf(stderr, "[setup gpu %d] %s: %.3f s\n", device_, what, std::chrono::duration<double>(t1 - t0).count());
            t0 = t1;
        };
        EF_CUDA_CHECK(cudaSetDevice(device_));
        EF_CUDA_CHECK(cudaFree(nullptr));  // creates the context here, so the trace can time it
        mark("context");
        dp_ = std::make_unique<cuda::DeviceParams>(pb.config);  // on this rank's device
        cudaDeviceProp prop{};
        EF_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
        name_ = prop.name;
        free_bytes_ = 0;
        size_t total = 0;
        EF_CUDA_CHECK(cudaMemGetInfo(&free_bytes_, &total));
        // The LM keeps per-thread arrays (formula stacks of duals) in local memory.
        EF_CUDA_CHECK(cudaDeviceSetLimit(cudaLimitStackSize, 16384));
        mark("properties and stack limit");
        const DataTable& d = pb.data;
        x_.upload(d.x.data(), d.x.size());
        y_.upload(d.y.data(), d.y.size());
        sigma_.upload(d.sigma.data(), d.sigma.size());
        upload_model(*pb.model, model_);
        mark("data, bounds and model upload");
        if (pb.config.solver == FitSolver::normal && !cpu::uses_table_path(pb)) preload_normal_kernel();
        if (cpu::uses_gram_path(pb))
            gram_ = std::make_unique<cuda::GramBatchFitter>(pb, std::get<DisMellinModel>(model_.view), y_.get(),
                                                            sigma_.get());
        else if (cpu::uses_table_path(pb))
            table_ = std::make_unique<TableBatchFitter>(pb, std::get<DisMellinModel>(model_.view), y_.get(),
                                                        sigma_.get());
        mark("kernels and batched fitter");
    }

    WorkerKind kind() const override { return WorkerKind::gpu; }
    std::string describe() const override { return "gpu " + std::to_string(device_) + ": " + name_; }

    void run(const WorkUnit& unit, ReplicaBlock& out) override {
        EF_CUDA_CHECK(cudaSetDevice(device_));
        const int P = pb_.num_params();
        const int total = static_cast<int>(unit.replicas.size());
        out.resize(static_cast<size_t>(total), P);
        out.covariance.clear();
        if (table_ || gram_) {
            run_table(unit, out);
            return;
        }
        if (pb_.config.solver == FitSolver::normal) {
            std::visit(
                [&](const auto& model) {
                    dispatch_normal(model, pb_.config, P, [&](auto real, auto width) {
                        run_normal<decltype(real), decltype(width)::value>(model, unit, out);
                    });
                },
                model_.view);
            return;
        }
        const int nfree = param_arrays(pb_.config).nfree;
        std::visit(
            [&](const auto& model) {
                using M = std::decay_t<decltype(model)>;
                // Each Jacobian column is computed by the same operations whatever the dual
                // width, so the width changes speed, never bits. dis-mellin runs the batched
                // table path (run_table); with more than 16 free parameters it is refused
                // (make_cuda_worker), which also keeps its heavy per-thread instantiation out
                // of the device build.
                if constexpr (std::is_same_v<M, DisMellinModel>) {
                    throw usage_error("dis-mellin on the GPU needs at most 16 free parameters");
                } else {
                    if (nfree <= 4) run_with<4>(model, unit, out);
                    else if (nfree <= 8) run_with<8>(model, unit, out);
                    else run_with<16>(model, unit, out);
                }
            },
            model_.view);
    }

   private:
    /// Table-linear models: the batched LM (one GEMM per round for all replicas), in chunks
    /// that fit in half the free memory.
    void run_table(const WorkUnit& unit, ReplicaBlock& out) {
        const int P = pb_.num_params();
        const int n = pb_.data.n;
        const auto& m = std::get<DisMellinModel>(model_.view);
        const int nfree = param_arrays(pb_.config).nfree;
        const size_t per_slot =
            gram_ ? gram_->bytes_per_replica()
                  : (LmScratchLayout(n, P).total + 2 * static_cast<size_t>(n) +
                     static_cast<size_t>(1 + nfree) * m.table_width() + static_cast<size_t>(P) * 17 + 256) *
                        sizeof(double);
        const int chunk = static_cast<int>(std::max<size_t>(1, std::min<size_t>((free_bytes_ / 2) / per_slot, 1 << 20)));
        const int total = static_cast<int>(unit.replicas.size());
        ReplicaBlock part;
        for (int b0 = 0; b0 < total; b0 += chunk) {
            const int count = std::min(chunk, total - b0);
            part.resize(static_cast<size_t>(count), P);
            part.covariance.clear();
            if (gram_) gram_->fit(unit.replicas.data() + b0, count, part);
            else table_->fit(unit.replicas.data() + b0, count, part);
            if (std::getenv("EF_GPU_STATS") != nullptr) {
                const auto& st = gram_ ? gram_->stats() : table_->stats();
                std::fprintf(stderr, "[gpu %d] %d replicas: %.3f s, %d rounds, table GEMM %.3f s at %.2f TFLOP/s, LM steps %.3f s, "
                             "moments %.3f s, host lists %.3f s\n",
                             device_, count, st.total_seconds, st.rounds, st.gemm_seconds,
                             st.gemm_seconds > 0 ? st.gemm_flops / st.gemm_seconds / 1e12 : 0.0, st.step_seconds,
                             st.moment_seconds, st.host_seconds);
            }
            for (int t = 0; t < count; ++t) {
                const size_t d = static_cast<size_t>(b0 + t);
                out.index[d] = part.index[static_cast<size_t>(t)];
                out.chi2[d] = part.chi2[static_cast<size_t>(t)];
                out.status[d] = part.status[static_cast<size_t>(t)];
                out.iterations[d] = part.iterations[static_cast<size_t>(t)];
                for (int q = 0; q < P; ++q)
                    out.params[d * P + q] = part.params[static_cast<size_t>(t) * P + q];
            }
            if (!part.covariance.empty()) out.covariance = part.covariance;
        }
    }

    /// The state of one of the two streams of the normal solver's pipeline: its device arrays
    /// and the page-locked copies of its results.
    struct NormalLane {
        cuda::Stream stream;
        DeviceBuffer<double> ybuf, wbuf, params, chi2, cov;
        DeviceBuffer<std::int64_t> reps, status, iters;
        cuda::PinnedBuffer<double> h_params, h_chi2, h_cov;
        cuda::PinnedBuffer<std::int64_t> h_reps, h_status, h_iters;
        int b0 = 0, count = 0;  ///< the piece of the unit in flight (count 0: none)
    };

    /**
     * The normal-equations solver (kernels/fit/lm_normal.hpp) in Real. A unit is cut into
     * pieces (at most a quarter of the unit, and what fits in a quarter of the free memory);
     * pieces alternate between two streams, so one piece's results travel to the host while
     * the next piece computes.
     */
    template <class Real, int K, class Model>
    void run_normal(const Model& model, const WorkUnit& unit, ReplicaBlock& out) {
        const FitConfig& cfg = pb_.config;
        const int n = pb_.data.n;
        const int P = pb_.num_params();
        const bool bootstrap = cfg.resample == ResampleMethod::bootstrap;
        const size_t per_replica = static_cast<size_t>(n) * sizeof(Real) * (bootstrap ? 2 : 1) +
                                   (static_cast<size_t>(P) + 4) * sizeof(double);
        const int total = static_cast<int>(unit.replicas.size());
        const size_t fit_in = std::max<size_t>(1, (free_bytes_ / 4) / per_replica);
        const int piece = static_cast<int>(std::min<size_t>(fit_in, std::max(1, (total + 3) / 4)));
        // Real arrays carved from double buffers kept across units (no cudaMalloc per unit).
        const auto real_size = [](size_t count) { return (count * sizeof(Real) + sizeof(double) - 1) / sizeof(double); };
        const std::vector<Real> inv_sigma = normal_inv_sigma<Real>(pb_.data.sigma);
        nsigma_.resize(real_size(inv_sigma.size()));
        EF_CUDA_CHECK(cudaMemcpy(nsigma_.get(), inv_sigma.data(), inv_sigma.size() * sizeof(Real), cudaMemcpyHostToDevice));
        const NormalFitData<Real> data{n, pb_.data.nx, x_.get(), reinterpret_cast<const Real*>(nsigma_.get()), nullptr,
                                       nullptr, 1};
        const ParamBoundsView bounds = dp_->view();
        const LmSettings s = lm_settings(cfg);
        const bool stats = std::getenv("EF_GPU_STATS") != nullptr;
        const auto t0 = std::chrono::steady_clock::now();
        double host_wait = 0.0;
        // A lane's finished piece into `out` (waits for its stream).
        auto drain = [&](NormalLane& l) {
            if (l.count == 0) return;
            const auto w0 = std::chrono::steady_clock::now();
            EF_CUDA_CHECK(cudaStreamSynchronize(l.stream.get()));
            host_wait += std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
            const size_t c = static_cast<size_t>(l.count), b0 = static_cast<size_t>(l.b0);
            std::copy(l.h_params.get(), l.h_params.get() + c * P, out.params.data() + b0 * P);
            std::copy(l.h_chi2.get(), l.h_chi2.get() + c, out.chi2.data() + b0);
            std::copy(l.h_status.get(), l.h_status.get() + c, out.status.data() + b0);
            std::copy(l.h_iters.get(), l.h_iters.get() + c, out.iterations.data() + b0);
            for (size_t t = 0; t < c; ++t) {
                out.index[b0 + t] = unit.replicas[b0 + t];
                if (unit.replicas[b0 + t] == 0)
                    out.covariance.assign(l.h_cov.get(), l.h_cov.get() + static_cast<size_t>(P) * P);
            }
            l.count = 0;
        };
        int launched = 0;
        for (int b0 = 0; b0 < total; b0 += piece) {
            NormalLane& l = normal_lanes_[launched++ % 2];
            drain(l);
            const int count = std::min(piece, total - b0);
            const size_t c = static_cast<size_t>(count);
            l.b0 = b0;
            l.count = count;
            l.ybuf.resize(real_size(c * n));
            l.wbuf.resize(real_size(bootstrap ? c * n : 1));
            l.params.resize(c * P);
            l.chi2.resize(c);
            l.status.resize(c);
            l.iters.resize(c);
            l.reps.resize(c);
            l.cov.resize(static_cast<size_t>(P) * P);
            l.h_reps.resize(c);
            l.h_params.resize(c * P);
            l.h_chi2.resize(c);
            l.h_status.resize(c);
            l.h_iters.resize(c);
            l.h_cov.resize(static_cast<size_t>(P) * P);
            const cudaStream_t st = l.stream.get();
            std::copy(unit.replicas.begin() + b0, unit.replicas.begin() + b0 + count, l.h_reps.get());
            EF_CUDA_CHECK(cudaMemcpyAsync(l.reps.get(), l.h_reps.get(), c * sizeof(std::int64_t), cudaMemcpyHostToDevice, st));
            const int threads = 64;
            cudaGetLastError();
            normal_fit_kernel<Real, K><<<(count + threads - 1) / threads, threads, 0, st>>>(
                model, data, bounds, s, bootstrap ? 1 : 0, cfg.seed, y_.get(), sigma_.get(), l.reps.get(), count,
                dp_->start.get(), reinterpret_cast<Real*>(l.ybuf.get()), reinterpret_cast<Real*>(l.wbuf.get()),
                l.params.get(), l.chi2.get(), l.status.get(), l.iters.get(), l.cov.get());
            EF_CUDA_CHECK(cudaGetLastError());
            EF_CUDA_CHECK(cudaMemcpyAsync(l.h_params.get(), l.params.get(), c * P * sizeof(double), cudaMemcpyDeviceToHost, st));
            EF_CUDA_CHECK(cudaMemcpyAsync(l.h_chi2.get(), l.chi2.get(), c * sizeof(double), cudaMemcpyDeviceToHost, st));
            EF_CUDA_CHECK(cudaMemcpyAsync(l.h_status.get(), l.status.get(), c * sizeof(std::int64_t), cudaMemcpyDeviceToHost, st));
            EF_CUDA_CHECK(cudaMemcpyAsync(l.h_iters.get(), l.iters.get(), c * sizeof(std::int64_t), cudaMemcpyDeviceToHost, st));
            EF_CUDA_CHECK(cudaMemcpyAsync(l.h_cov.get(), l.cov.get(), static_cast<size_t>(P) * P * sizeof(double),
                                          cudaMemcpyDeviceToHost, st));
        }
        drain(normal_lanes_[launched % 2]);
        drain(normal_lanes_[(launched + 1) % 2]);
        if (stats) {
            const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            std::fprintf(stderr, "[gpu %d] normal solver, %s, %d replicas in %d pieces on 2 streams: %.4f s (%.3g fits/s), "
                         "host waiting %.4f s\n", device_, sizeof(Real) == 4 ? "float" : "double", total, launched, sec,
                         total / sec, host_wait);
        }
    }

    /// Loads the normal solver's kernel for this problem now (CUDA loads modules lazily, at the
    /// first launch), so that the load counts as setup, not as the first unit's compute.
    void preload_normal_kernel() {
        std::visit(
            [&](const auto& model) {
                using M = std::decay_t<decltype(model)>;
                dispatch_normal(model, pb_.config, pb_.num_params(), [&](auto real, auto width) {
                    cudaFuncAttributes a{};
                    EF_CUDA_CHECK(cudaFuncGetAttributes(&a, normal_fit_kernel<decltype(real), decltype(width)::value, M>));
                });
            },
            model_.view);
    }

    /// A batch's results (device arrays params_ .. cov_) into out[b0, b0 + count).
    void download_batch(const WorkUnit& unit, int b0, int count, int P, ReplicaBlock& out) {
        params_.download(out.params.data() + static_cast<size_t>(b0) * P, static_cast<size_t>(count) * P);
        chi2_.download(out.chi2.data() + b0, static_cast<size_t>(count));
        status_.download(out.status.data() + b0, static_cast<size_t>(count));
        iters_.download(out.iterations.data() + b0, static_cast<size_t>(count));
        for (int t = 0; t < count; ++t) {
            out.index[static_cast<size_t>(b0 + t)] = unit.replicas[static_cast<size_t>(b0 + t)];
            if (unit.replicas[static_cast<size_t>(b0 + t)] == 0) {
                out.covariance.resize(static_cast<size_t>(P) * P);
                cov_.download(out.covariance.data(), static_cast<size_t>(P) * P);
            }
        }
    }

    template <int K, class Model>
    void run_with(const Model& model, const WorkUnit& unit, ReplicaBlock& out) {
        const FitConfig& cfg = pb_.config;
        const int n = pb_.data.n;
        const int P = pb_.num_params();
        const LmWorkspaceLayout<K> layout(n, P, model.workspace_size());
        const size_t per_replica = (layout.total + 2 * static_cast<size_t>(n) + 2 * P + 4) * sizeof(double);
        // Batches as large as half the free memory allows (the unit may be larger).
        const size_t fit_in = std::max<size_t>(1, (free_bytes_ / 2) / per_replica);
        const int total = static_cast<int>(unit.replicas.size());
        const FitDataView data{n, pb_.data.nx, x_.get(), y_.get(), sigma_.get(), nullptr};
        const ParamBoundsView bounds = dp_->view();
        const LmSettings s = lm_settings(cfg);
        for (int b0 = 0; b0 < total; b0 += static_cast<int>(fit_in)) {
            const int count = std::min<int>(total - b0, static_cast<int>(fit_in));
            reps_.upload(unit.replicas.data() + b0, static_cast<size_t>(count));
            ybuf_.resize(static_cast<size_t>(count) * n);
            wbuf_.resize(static_cast<size_t>(count) * n);
            work_.resize(static_cast<size_t>(count) * layout.total);
            params_.resize(static_cast<size_t>(count) * P);
            chi2_.resize(static_cast<size_t>(count));
            status_.resize(static_cast<size_t>(count));
            iters_.resize(static_cast<size_t>(count));
            cov_.resize(static_cast<size_t>(P) * P);
            const int threads = 64;
            const int blocks = (count + threads - 1) / threads;
            cudaGetLastError();  // a failure reported earlier must not be blamed on this launch
            lm_fit_kernel<K><<<blocks, threads>>>(model, data, bounds, s, cfg.resample == ResampleMethod::bootstrap,
                                                   cfg.seed, reps_.get(), count, dp_->start.get(), ybuf_.get(),
                                                   wbuf_.get(), work_.get(), layout.total, params_.get(),
                                                   chi2_.get(), status_.get(), iters_.get(), cov_.get());
            EF_CUDA_CHECK(cudaGetLastError());
            EF_CUDA_CHECK(cudaDeviceSynchronize());
            download_batch(unit, b0, count, P, out);
        }
    }

    const FitProblem& pb_;
    int device_;
    std::string name_;
    size_t free_bytes_ = 0;
    std::unique_ptr<cuda::DeviceParams> dp_;
    DeviceModel model_;
    std::unique_ptr<TableBatchFitter> table_;
    std::unique_ptr<cuda::GramBatchFitter> gram_;
    NormalLane normal_lanes_[2];
    DeviceBuffer<double> x_, y_, sigma_, ybuf_, wbuf_, work_, params_, chi2_, cov_, nsigma_;
    DeviceBuffer<std::int64_t> reps_, status_, iters_;
};

}  // namespace

std::unique_ptr<Worker> make_cuda_worker(const FitProblem& problem, const WorkerOptions& options) {
    if (cuda_device_count() == 0)
        throw usage_error("run.workers = gpu: no CUDA device is visible to this rank");
    if (std::holds_alternative<DisMellinModel>(problem.model->view) && !cpu::uses_table_path(problem))
        throw usage_error(problem.config.config_file +
                          ": dis-mellin on the GPU worker fits at most 16 free parameters (fix one, or use --run.workers cpu)");
    return std::make_unique<CudaWorker>(problem, options.device);
}

}  // namespace ef

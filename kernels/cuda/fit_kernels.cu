// SPDX-License-Identifier: MIT
// The CUDA fitting worker: one thread per replica runs the same single-source resampling and
// bounded LM (kernels/fit/*.hpp) as the CPU worker, on a device copy of the data and of the
// model's tables. Per-backend code here is only memory, launch and batching.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <ensemblefit/core/error.hpp>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/fit_batched.cuh"
#include "kernels/cuda/fit_kernels.hpp"
#include "kernels/fit/lm.hpp"
#include "kernels/fit/plan_dispatch.hpp"
#include "kernels/fit/resample.hpp"

namespace ef::cuda {
namespace {

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

void upload_model(const ModelVariant& host, DeviceModel& dm) {
    dm.view = host;
    if (auto* f = std::get_if<FormulaModel>(&dm.view)) {
        dm.code.upload(f->code, static_cast<size_t>(f->code_size));
        dm.doubles_a.grow(1);  // a formula may have no constants at all
        dm.doubles_a.upload(f->constants, static_cast<size_t>(f->constants_size));
        f->code = dm.code.data();
        f->constants = dm.doubles_a.data();
    } else if (auto* d = std::get_if<DisMellinModel>(&dm.view)) {
        const size_t table = static_cast<size_t>(d->points) * static_cast<size_t>(d->table_width());
        dm.doubles_a.upload(d->table, table);
        dm.doubles_b.upload(d->nodes, 2 * static_cast<size_t>(d->num_nodes));
        d->table = dm.doubles_a.data();
        d->nodes = dm.doubles_b.data();
    }
}

/// Runs a fit plan on one GPU: the batched paths through BatchFitter, the per-replica paths
/// (qr, normal) with one thread per replica.
class CudaWorker final : public Worker {
   public:
    CudaWorker(FitPlan plan, FitInputs in, const WorkerOptions& options)
        : plan_(std::move(plan)), in_(std::move(in)), device_(options.device), diag_(options.diag) {
        auto mark = [&, t0 = std::chrono::steady_clock::now()](const char* what) mutable {
            if (!diag_.setup_trace) return;
            const auto t1 = std::chrono::steady_clock::now();
            std::fprintf(stderr, "[setup gpu %d] %s: %.3f s\n", device_, what, std::chrono::duration<double>(t1 - t0).count());
            t0 = t1;
        };
        EF_CUDA_CHECK(cudaSetDevice(device_));
        EF_CUDA_CHECK(cudaFree(nullptr));  // creates the context here, so the trace can time it
        mark("context");
        dp_ = std::make_unique<DeviceParams>(plan_.params);  // on this rank's device
        cudaDeviceProp prop{};
        EF_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
        name_ = prop.name;
        free_bytes_ = 0;
        size_t total = 0;
        EF_CUDA_CHECK(cudaMemGetInfo(&free_bytes_, &total));
        // The LM keeps per-thread arrays (formula stacks of duals) in local memory.
        EF_CUDA_CHECK(cudaDeviceSetLimit(cudaLimitStackSize, 16384));
        mark("properties and stack limit");
        const FitDataView& d = in_.data;
        x_.upload(d.x, static_cast<size_t>(d.n) * d.nx);
        y_.upload(d.y, static_cast<size_t>(d.n));
        sigma_.upload(d.sigma, static_cast<size_t>(d.n));
        upload_model(in_.model, model_);
        if (plan_.path == FitPath::normal) {
            if (plan_.single_precision) upload_inv_sigma<float>();
            else upload_inv_sigma<double>();
        }
        mark("data, bounds and model upload");
        if (plan_.path == FitPath::normal) preload_normal_kernel();
        if (plan_.batched())
            batch_ = std::make_unique<BatchFitter>(plan_, in_, std::get<DisMellinModel>(model_.view), y_.data(),
                                                   sigma_.data(), *dp_);
        mark("kernels and batched fitter");
    }

    WorkerKind kind() const override { return WorkerKind::gpu; }
    std::string describe() const override { return "gpu " + std::to_string(device_) + ": " + name_; }

    void run(const WorkUnit& unit, ReplicaBlock& out) override {
        EF_CUDA_CHECK(cudaSetDevice(device_));
        const int total = static_cast<int>(unit.replicas.size());
        out.resize(static_cast<size_t>(total), plan_.num_params());
        out.covariance.clear();
        switch (plan_.path) {
            case FitPath::table:
            case FitPath::gram:
                run_batched(unit, out);
                return;
            case FitPath::normal:
                std::visit(
                    [&](const auto& model) {
                        with_normal_kernel(model, plan_, [&](auto real, auto width) {
                            run_normal<decltype(real), decltype(width)::value>(model, unit, out);
                        });
                    },
                    model_.view);
                return;
            case FitPath::qr:
                std::visit(
                    [&](const auto& model) {
                        using M = std::decay_t<decltype(model)>;
                        // dis-mellin runs the batched paths; with more than 16 free parameters
                        // the GPU worker refuses it (make_worker), which also keeps its heavy
                        // per-thread instantiation out of the device build.
                        if constexpr (std::is_same_v<M, DisMellinModel>) {
                            throw usage_error("dis-mellin on the GPU needs at most 16 free parameters");
                        } else if constexpr (std::is_same_v<M, PluginModel>) {
                            // make_worker refuses a plugin without GPU code before this worker exists.
                            throw usage_error("model plugin: no GPU code");
                        } else {
                            with_dual_width(plan_, [&](auto width) { run_with<decltype(width)::value>(model, unit, out); });
                        }
                    },
                    model_.view);
                return;
        }
    }

   private:
    /// The batched paths (one GEMM per round for all replicas), in chunks that fit in half the
    /// free memory.
    void run_batched(const WorkUnit& unit, ReplicaBlock& out) {
        const int P = plan_.num_params();
        const size_t per_slot = batch_->bytes_per_replica();
        const int chunk = static_cast<int>(std::max<size_t>(1, std::min<size_t>((free_bytes_ / 2) / per_slot, 1 << 20)));
        const int total = static_cast<int>(unit.replicas.size());
        ReplicaBlock part;
        for (int b0 = 0; b0 < total; b0 += chunk) {
            const int count = std::min(chunk, total - b0);
            part.resize(static_cast<size_t>(count), P);
            part.covariance.clear();
            batch_->fit(unit.replicas.data() + b0, count, part);
            if (diag_.gpu_stats) print_batch_stats(count);
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

    /// EF_GPU_STATS: where the last batched chunk's time went.
    void print_batch_stats(int count) const {
        const BatchFitter::Stats& st = batch_->stats();
        std::fprintf(stderr, "[gpu %d] %d replicas: %.3f s, %d rounds, table GEMM %.3f s at %.2f TFLOP/s, LM steps %.3f s, "
                     "moments %.3f s, host lists %.3f s\n",
                     device_, count, st.total_seconds, st.rounds, st.gemm_seconds,
                     st.gemm_seconds > 0 ? st.gemm_flops / st.gemm_seconds / 1e12 : 0.0, st.step_seconds,
                     st.moment_seconds, st.host_seconds);
    }

    /// 1 / sigma in the normal path's Real, once per run: Real arrays are carved from double
    /// buffers (no cudaMalloc per unit).
    template <class Real>
    void upload_inv_sigma() {
        const std::vector<Real> inv = normal_inv_sigma<Real>(std::span<const double>(in_.data.sigma, static_cast<size_t>(in_.data.n)));
        nsigma_.grow(real_size<Real>(inv.size()));
        EF_CUDA_CHECK(cudaMemcpy(nsigma_.data(), inv.data(), inv.size() * sizeof(Real), cudaMemcpyHostToDevice));
    }
    /// Doubles that hold `count` values of Real.
    template <class Real>
    static size_t real_size(size_t count) { return (count * sizeof(Real) + sizeof(double) - 1) / sizeof(double); }

    /// The state of one of the two streams of the normal solver's pipeline: its device arrays
    /// and the page-locked copies of its results.
    struct NormalLane {
        Stream stream;
        DeviceBuffer<double> ybuf, wbuf, params, chi2, cov;
        DeviceBuffer<std::int64_t> reps, status, iters;
        PinnedBuffer<double> h_params, h_chi2, h_cov;
        PinnedBuffer<std::int64_t> h_reps, h_status, h_iters;
        int b0 = 0, count = 0;  ///< the piece of the unit in flight (count 0: none)

        /// Arrays for a piece of c replicas of n points (P parameters; weights when bootstrap).
        template <class Real>
        void grow(size_t c, int n, int P, bool bootstrap) {
            ybuf.grow(real_size<Real>(c * n));
            wbuf.grow(real_size<Real>(bootstrap ? c * n : 1));
            params.grow(c * P);
            chi2.grow(c);
            status.grow(c);
            iters.grow(c);
            reps.grow(c);
            cov.grow(static_cast<size_t>(P) * P);
            h_reps.grow(c);
            h_params.grow(c * P);
            h_chi2.grow(c);
            h_status.grow(c);
            h_iters.grow(c);
            h_cov.grow(static_cast<size_t>(P) * P);
        }
        /// The piece's results to the page-locked copies (asynchronous, on the lane's stream).
        void fetch(int P) {
            const size_t c = static_cast<size_t>(count);
            const cudaStream_t st = stream.get();
            EF_CUDA_CHECK(cudaMemcpyAsync(h_params.data(), params.data(), c * P * sizeof(double), cudaMemcpyDeviceToHost, st));
            EF_CUDA_CHECK(cudaMemcpyAsync(h_chi2.data(), chi2.data(), c * sizeof(double), cudaMemcpyDeviceToHost, st));
            EF_CUDA_CHECK(cudaMemcpyAsync(h_status.data(), status.data(), c * sizeof(std::int64_t), cudaMemcpyDeviceToHost, st));
            EF_CUDA_CHECK(cudaMemcpyAsync(h_iters.data(), iters.data(), c * sizeof(std::int64_t), cudaMemcpyDeviceToHost, st));
            EF_CUDA_CHECK(cudaMemcpyAsync(h_cov.data(), cov.data(), static_cast<size_t>(P) * P * sizeof(double),
                                          cudaMemcpyDeviceToHost, st));
        }
        /// The finished piece into `out` (waits for the stream); returns the seconds waited.
        double drain(const WorkUnit& unit, int P, ReplicaBlock& out) {
            if (count == 0) return 0.0;
            const auto w0 = std::chrono::steady_clock::now();
            EF_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
            const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
            const size_t c = static_cast<size_t>(count), first = static_cast<size_t>(b0);
            std::copy(h_params.data(), h_params.data() + c * P, out.params.data() + first * P);
            std::copy(h_chi2.data(), h_chi2.data() + c, out.chi2.data() + first);
            std::copy(h_status.data(), h_status.data() + c, out.status.data() + first);
            std::copy(h_iters.data(), h_iters.data() + c, out.iterations.data() + first);
            for (size_t t = 0; t < c; ++t) {
                out.index[first + t] = unit.replicas[first + t];
                if (unit.replicas[first + t] == 0)
                    out.covariance.assign(h_cov.data(), h_cov.data() + static_cast<size_t>(P) * P);
            }
            count = 0;
            return waited;
        }
    };

    /**
     * The normal-equations solver (kernels/fit/lm_normal.hpp) in Real. A unit is cut into
     * pieces (at most a quarter of the unit, and what fits in a quarter of the free memory);
     * pieces alternate between two streams, so one piece's results travel to the host while
     * the next piece computes.
     */
    template <class Real, int K, class Model>
    void run_normal(const Model& model, const WorkUnit& unit, ReplicaBlock& out) {
        const int n = in_.data.n;
        const int P = plan_.num_params();
        const bool bootstrap = plan_.bootstrap;
        const size_t per_replica = static_cast<size_t>(n) * sizeof(Real) * (bootstrap ? 2 : 1) +
                                   (static_cast<size_t>(P) + 4) * sizeof(double);
        const int total = static_cast<int>(unit.replicas.size());
        const size_t fit_in = std::max<size_t>(1, (free_bytes_ / 4) / per_replica);
        const int piece = static_cast<int>(std::min<size_t>(fit_in, std::max(1, (total + 3) / 4)));
        const NormalFitData<Real> data{n, in_.data.nx, x_.data(), reinterpret_cast<const Real*>(nsigma_.data()),
                                       nullptr, nullptr, 1};
        const auto t0 = std::chrono::steady_clock::now();
        double host_wait = 0.0;
        int launched = 0;
        for (int b0 = 0; b0 < total; b0 += piece) {
            NormalLane& l = normal_lanes_[launched++ % 2];
            host_wait += l.drain(unit, P, out);
            const int count = std::min(piece, total - b0);
            const size_t c = static_cast<size_t>(count);
            l.b0 = b0;
            l.count = count;
            l.template grow<Real>(c, n, P, bootstrap);
            const cudaStream_t st = l.stream.get();
            std::copy(unit.replicas.begin() + b0, unit.replicas.begin() + b0 + count, l.h_reps.data());
            EF_CUDA_CHECK(cudaMemcpyAsync(l.reps.data(), l.h_reps.data(), c * sizeof(std::int64_t), cudaMemcpyHostToDevice, st));
            const int threads = 64;
            cudaGetLastError();
            normal_fit_kernel<Real, K><<<(count + threads - 1) / threads, threads, 0, st>>>(
                model, data, dp_->bounds, plan_.settings, bootstrap ? 1 : 0, plan_.seed, y_.data(), sigma_.data(),
                l.reps.data(), count, dp_->start.data(), reinterpret_cast<Real*>(l.ybuf.data()),
                reinterpret_cast<Real*>(l.wbuf.data()), l.params.data(), l.chi2.data(), l.status.data(), l.iters.data(),
                l.cov.data());
            EF_CUDA_CHECK(cudaGetLastError());
            l.fetch(P);
        }
        host_wait += normal_lanes_[launched % 2].drain(unit, P, out);
        host_wait += normal_lanes_[(launched + 1) % 2].drain(unit, P, out);
        if (diag_.gpu_stats) {
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
                with_normal_kernel(model, plan_, [&](auto real, auto width) {
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

    /// The qr path, one thread per replica, in batches as large as half the free memory allows.
    template <int K, class Model>
    void run_with(const Model& model, const WorkUnit& unit, ReplicaBlock& out) {
        const int n = in_.data.n;
        const int P = plan_.num_params();
        const LmWorkspaceLayout<K> layout(n, P, model.workspace_size());
        const size_t per_replica = (layout.total + 2 * static_cast<size_t>(n) + 2 * P + 4) * sizeof(double);
        const size_t fit_in = std::max<size_t>(1, (free_bytes_ / 2) / per_replica);
        const int total = static_cast<int>(unit.replicas.size());
        const FitDataView data{n, in_.data.nx, x_.data(), y_.data(), sigma_.data(), nullptr};
        for (int b0 = 0; b0 < total; b0 += static_cast<int>(fit_in)) {
            const int count = std::min<int>(total - b0, static_cast<int>(fit_in));
            reps_.upload(unit.replicas.data() + b0, static_cast<size_t>(count));
            ybuf_.grow(static_cast<size_t>(count) * n);
            wbuf_.grow(static_cast<size_t>(count) * n);
            work_.grow(static_cast<size_t>(count) * layout.total);
            params_.grow(static_cast<size_t>(count) * P);
            chi2_.grow(static_cast<size_t>(count));
            status_.grow(static_cast<size_t>(count));
            iters_.grow(static_cast<size_t>(count));
            cov_.grow(static_cast<size_t>(P) * P);
            const int threads = 64;
            const int blocks = (count + threads - 1) / threads;
            cudaGetLastError();  // a failure reported earlier must not be blamed on this launch
            lm_fit_kernel<K><<<blocks, threads>>>(model, data, dp_->bounds, plan_.settings, plan_.bootstrap ? 1 : 0,
                                                   plan_.seed, reps_.data(), count, dp_->start.data(), ybuf_.data(),
                                                   wbuf_.data(), work_.data(), layout.total, params_.data(),
                                                   chi2_.data(), status_.data(), iters_.data(), cov_.data());
            EF_CUDA_CHECK(cudaGetLastError());
            EF_CUDA_CHECK(cudaDeviceSynchronize());
            download_batch(unit, b0, count, P, out);
        }
    }

    const FitPlan plan_;
    const FitInputs in_;  ///< host views into the problem, which outlives the worker
    int device_;
    Diagnostics diag_;
    std::string name_;
    size_t free_bytes_ = 0;
    std::unique_ptr<DeviceParams> dp_;
    DeviceModel model_;
    std::unique_ptr<BatchFitter> batch_;
    NormalLane normal_lanes_[2];
    DeviceBuffer<double> x_, y_, sigma_, ybuf_, wbuf_, work_, params_, chi2_, cov_, nsigma_;
    DeviceBuffer<std::int64_t> reps_, status_, iters_;
};

}  // namespace

std::unique_ptr<Worker> make_fit_worker(FitPlan plan, FitInputs in, const WorkerOptions& options) {
    if (cuda_device_count() == 0)
        throw usage_error("run.workers = gpu: no CUDA device is visible to this rank");
    return std::make_unique<CudaWorker>(std::move(plan), std::move(in), options);
}

}  // namespace ef::cuda

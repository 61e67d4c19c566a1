// SPDX-License-Identifier: MIT
// The CUDA fitting worker: one thread per replica runs the same single-source resampling and
// bounded LM (kernels/fit/*.hpp) as the CPU worker, on a device copy of the data and of the
// model's tables. Per-backend code here is only memory, launch and batching.
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

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
#include "kernels/cuda/replica_kernels.cuh"
#include "kernels/fit/lm.hpp"
#include "kernels/fit/plan_dispatch.hpp"
#include "kernels/fit/resample.hpp"

namespace ef::cuda {
namespace {

/**
 * The driver entry points that load and launch a module compiled at run time (a formula's
 * solver kernel, NVRTC). Opened with dlopen from the driver the runtime already loaded, so the
 * library links no libcuda (it must load on machines without a GPU). Null when missing.
 */
struct DriverApi {
    CUresult (*load)(CUmodule*, const void*) = nullptr;
    CUresult (*function)(CUfunction*, CUmodule, const char*) = nullptr;
    CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                       void**, void**) = nullptr;
    CUresult (*unload)(CUmodule) = nullptr;
    bool ok() const { return load && function && launch && unload; }
};

const DriverApi& driver_api() {
    static const DriverApi api = [] {
        DriverApi d;
        void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (h == nullptr) return d;
        // POSIX: an object pointer from dlsym converts to a function pointer.
        d.load = reinterpret_cast<decltype(d.load)>(dlsym(h, "cuModuleLoadData"));
        d.function = reinterpret_cast<decltype(d.function)>(dlsym(h, "cuModuleGetFunction"));
        d.launch = reinterpret_cast<decltype(d.launch)>(dlsym(h, "cuLaunchKernel"));
        d.unload = reinterpret_cast<decltype(d.unload)>(dlsym(h, "cuModuleUnload"));
        return d;
    }();
    return api;
}

/// The Model argument of a formula's compiled kernel: the generated ef::FormulaJitModel is
/// `struct { int params; }` plus member functions (formula_jit.cpp, formula_cuda_model).
struct FormulaJitModelArg {
    int params = 0;
};

/**
 * A formula's solver kernel compiled at run time and loaded into this worker's context: the
 * kernel the plan needs (normal_fit_kernel<Real, K> or lm_fit_kernel<K> of
 * replica_kernels.cuh), launched with the interpreter kernel's arguments.
 */
class JitKernel {
   public:
    JitKernel() = default;
    JitKernel(const JitKernel&) = delete;
    JitKernel& operator=(const JitKernel&) = delete;
    ~JitKernel() {
        if (module_ != nullptr) driver_api().unload(module_);
    }

    /// Loads `k`'s module; false (and `why`) when the driver refuses it.
    bool load(const FormulaDeviceKernel& k, std::string& why) {
        const DriverApi& d = driver_api();
        if (!d.ok()) {
            why = "the CUDA driver's module API (libcuda.so.1) is not available";
            return false;
        }
        CUresult rc = d.load(&module_, k.ptx.c_str());
        if (rc == CUDA_SUCCESS) rc = d.function(&function_, module_, k.entry.c_str());
        if (rc != CUDA_SUCCESS) {
            why = "the driver could not load the compiled kernel (CUresult " + std::to_string(static_cast<int>(rc)) + ")";
            function_ = nullptr;
            return false;
        }
        return true;
    }
    explicit operator bool() const { return function_ != nullptr; }

    /// Launches the kernel on `stream` with `args` (the interpreter kernel's, the model first).
    template <class... Args>
    void launch(int blocks, int threads, cudaStream_t stream, Args... args) const {
        void* ptrs[] = {static_cast<void*>(&args)...};
        const CUresult rc = driver_api().launch(function_, static_cast<unsigned>(blocks), 1, 1,
                                                static_cast<unsigned>(threads), 1, 1, 0, stream, ptrs, nullptr);
        if (rc != CUDA_SUCCESS)
            throw Error(ExitCode::runtime, "cuLaunchKernel (formula kernel) failed: CUresult " +
                                               std::to_string(static_cast<int>(rc)));
    }

   private:
    CUmodule module_ = nullptr;
    CUfunction function_ = nullptr;
};

/// The normal solver's kernel for Real, K and Model: its launch, and its name as a plugin's
/// launcher and NVRTC (with the model added) know it.
template <class Real, int K, class Model>
struct NormalKernel {
    template <class... Args>
    static void run(int blocks, int threads, cudaStream_t stream, const Model& model, Args... args) {
        normal_fit_kernel<Real, K, Model><<<blocks, threads, 0, stream>>>(model, args...);
    }
    static std::string name() {
        return std::string("normal_fit_kernel<") + (sizeof(Real) == 4 ? "float" : "double") + ", " +
               std::to_string(K) + ">";
    }
};

/// The qr path's kernel for K and Model (as NormalKernel).
template <int K, class Model>
struct QrKernel {
    template <class... Args>
    static void run(int blocks, int threads, cudaStream_t stream, const Model& model, Args... args) {
        lm_fit_kernel<K, Model><<<blocks, threads, 0, stream>>>(model, args...);
    }
    static std::string name() { return "lm_fit_kernel<" + std::to_string(K) + ">"; }
};

/// with_normal_kernel's choice of Real and K for a model whose parameter count only the plan
/// knows (a plugin's): K from the plan's normal width.
template <class F>
void with_plan_normal_kernel(const FitPlan& plan, F&& f) {
    auto with_real = [&](auto real) {
        if (plan.normal_width == 3) f(real, std::integral_constant<int, 3>{});
        else if (plan.normal_width == 5) f(real, std::integral_constant<int, 5>{});
        else if (plan.normal_width == 8) f(real, std::integral_constant<int, 8>{});
        else f(real, std::integral_constant<int, kNormalMaxParams>{});
    };
    if (plan.single_precision) with_real(float{});
    else with_real(double{});
}

/// The per-replica workspace of a model (a plugin's from its GPU table).
template <class Model>
int workspace_of(const Model& model) {
    if constexpr (std::is_same_v<Model, PluginModel>) return model.table->gpu->workspace_size;
    else return model.workspace_size();
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

/**
 * Two events around one launch group on a stream, read into a KernelTally once the stream is
 * known to have passed them: the per-replica paths' "lm" phase (items: the LM iterations of the
 * replicas it fitted) and its device interval.
 */
struct LaunchEvents {
    cudaEvent_t begin{}, end{};  // made at first use, on the worker's device (not at construction)
    LaunchEvents() = default;
    ~LaunchEvents() {
        if (begin) cudaEventDestroy(begin);
        if (end) cudaEventDestroy(end);
    }
    LaunchEvents(const LaunchEvents&) = delete;
    LaunchEvents& operator=(const LaunchEvents&) = delete;
    static void record(cudaEvent_t& e, cudaStream_t s) {
        if (!e) EF_CUDA_CHECK(cudaEventCreate(&e));
        EF_CUDA_CHECK(cudaEventRecord(e, s));
    }
    void start(cudaStream_t s = nullptr) { record(begin, s); }
    void stop(cudaStream_t s = nullptr) { record(end, s); }
    void tally(KernelTally& t, const char* name, const ReplicaBlock& out, int b0, int count) const {
        EF_CUDA_CHECK(cudaEventSynchronize(end));
        float ms = 0;
        EF_CUDA_CHECK(cudaEventElapsedTime(&ms, begin, end));
        double iterations = 0;
        for (int i = b0; i < b0 + count; ++i) iterations += static_cast<double>(out.iterations[static_cast<size_t>(i)]);
        t.add(name, 1e-3 * ms, 0, 0, iterations);
        t.interval_ending(name, KernelTally::Clock::now(), 1e-3 * ms);
    }
};

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
        cc_major_ = prop.major;
        cc_minor_ = prop.minor;
        if (prepare_formula_kernel()) mark("formula kernel (NVRTC and module load)");
        if (plan_.path == FitPath::normal && !jit_) preload_normal_kernel();
        if (plan_.batched())
            batch_ = std::make_unique<BatchFitter>(plan_, in_, std::get<DisMellinModel>(model_.view), y_.data(),
                                                   sigma_.data(), *dp_);
        if (batch_) batch_->record_to(&tally_);
        mark("kernels and batched fitter");
    }

    WorkerKind kind() const override { return WorkerKind::gpu; }
    std::string describe() const override { return "gpu " + std::to_string(device_) + ": " + name_; }
    const KernelTally* kernel_tally() const override { return &tally_; }

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
                        auto go = [&](auto real, auto width) {
                            run_normal<decltype(real), decltype(width)::value>(model, unit, out);
                        };
                        // A plugin's kernels are instantiated in the plugin, for every width.
                        if constexpr (std::is_same_v<std::decay_t<decltype(model)>, PluginModel>)
                            with_plan_normal_kernel(plan_, go);
                        else
                            with_normal_kernel(model, plan_, go);
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
                        } else {
                            // make_worker refuses a plugin without GPU code before this worker exists.
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
                     "moments %.3f s, %s lists %.3f s; %s loop: %d launches, %d host syncs, %d graphs per unit; GEMM tiling %s\n",
                     device_, count, st.total_seconds, st.rounds, st.gemm_seconds,
                     st.gemm_seconds > 0 ? st.gemm_flops / st.gemm_seconds / 1e12 : 0.0, st.step_seconds,
                     st.moment_seconds, st.device_loop ? "device" : "host", st.host_seconds,
                     st.device_loop ? "device" : "host", st.launches, st.host_syncs, st.graphs,
                     st.gemm_pairs ? "pairs" : "blocked");
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
        LaunchEvents ev;        ///< around the piece's kernel (the roofline's "lm" phase)

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
        auto drain = [&](NormalLane& l) {  // the finished piece, and its device time to the tally
            const int first = l.b0, c = l.count;
            host_wait += l.drain(unit, P, out);
            if (c > 0) l.ev.tally(tally_, "lm", out, first, c);
        };
        for (int b0 = 0; b0 < total; b0 += piece) {
            NormalLane& l = normal_lanes_[launched++ % 2];
            drain(l);
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
            l.ev.start(st);
            launch_fit<NormalKernel<Real, K, Model>>(model, (count + threads - 1) / threads, threads, st, data,
                       dp_->bounds, plan_.settings, bootstrap ? 1 : 0, plan_.seed, y_.data(), sigma_.data(),
                       l.reps.data(), count, dp_->start.data(), reinterpret_cast<Real*>(l.ybuf.data()),
                       reinterpret_cast<Real*>(l.wbuf.data()), l.params.data(), l.chi2.data(), l.status.data(),
                       l.iters.data(), l.cov.data());
            EF_CUDA_CHECK(cudaGetLastError());
            l.ev.stop(st);
            l.fetch(P);
        }
        drain(normal_lanes_[launched % 2]);
        drain(normal_lanes_[(launched + 1) % 2]);
        if (diag_.gpu_stats) {
            const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            std::fprintf(stderr, "[gpu %d] normal solver, %s%s, %d replicas in %d pieces on 2 streams: %.4f s (%.3g fits/s), "
                         "host waiting %.4f s\n", device_, sizeof(Real) == 4 ? "float" : "double", formula_note_.c_str(),
                         total, launched, sec, total / sec, host_wait);
        }
    }

    /**
     * Launches a per-replica solver kernel (NormalKernel or QrKernel): a plugin's through its
     * launcher (the plugin instantiated it), a formula's compiled at run time when there is one
     * (its model argument is the formula's parameter count), else nvcc's. All take the same
     * arguments after the model, on the same stream.
     */
    template <class Kernel, class Model, class... Args>
    void launch_fit(const Model& model, int blocks, int threads, cudaStream_t stream, Args... args) {
        if constexpr (std::is_same_v<Model, PluginModel>) {
            void* ptrs[] = {static_cast<void*>(&args)...};
            const char* e = model.table->gpu->launch(Kernel::name().c_str(), static_cast<unsigned>(blocks),
                                                     static_cast<unsigned>(threads), stream,
                                                     static_cast<int>(sizeof...(args)), ptrs);
            if (e != nullptr) throw runtime_error(std::string("model plugin '") + model.table->name + "': " + e);
        } else {
            if constexpr (std::is_same_v<Model, FormulaModel>) {
                if (jit_) return jit_.launch(blocks, threads, stream, FormulaJitModelArg{model.params}, args...);
            }
            Kernel::run(blocks, threads, stream, model, args...);
        }
    }

    /// The name expression of the solver kernel a formula needs under this plan (kernels of
    /// replica_kernels.cuh, the same widths as with_normal_kernel and with_dual_width give the
    /// interpreter); empty for the batched paths.
    std::string formula_kernel_name() const {
        const std::string m = kFormulaDeviceModel;
        std::string name;
        if (plan_.path == FitPath::normal) {
            with_normal_kernel(FormulaModel{}, plan_, [&](auto real, auto width) {
                name = NormalKernel<decltype(real), decltype(width)::value, FormulaModel>::name();
            });
        } else if (plan_.path == FitPath::qr) {
            with_dual_width(plan_, [&](auto width) { name = QrKernel<decltype(width)::value, FormulaModel>::name(); });
        }
        // "normal_fit_kernel<float, 5>" -> "ef::cuda::normal_fit_kernel<float, 5, ef::FormulaJitModel>"
        if (!name.empty()) name = "ef::cuda::" + name.substr(0, name.size() - 1) + ", " + m + ">";
        return name;
    }

    /**
     * `[model] compile = auto|jit` on a formula: its solver kernel compiled by NVRTC (or taken
     * from the cache) and loaded. A failure is one warning line, and the interpreter runs.
     * Returns whether the model is a formula (for the set-up trace).
     */
    bool prepare_formula_kernel() {
        const auto* f = std::get_if<FormulaModel>(&model_.view);
        if (f == nullptr) return false;
        formula_note_ = ", formula interpreted";
        const std::string kernel = formula_kernel_name();
        if (f->device_jit == nullptr || !f->device_jit->compile || kernel.empty()) return true;
        const FormulaDeviceKernel k = f->device_jit->compile(kernel, cc_major_, cc_minor_);
        std::string why = k.why;
        if (k.ok && jit_.load(k, why)) {
            char note[96];
            if (k.from_cache) std::snprintf(note, sizeof note, ", formula NVRTC-compiled (cached)");
            else std::snprintf(note, sizeof note, ", formula NVRTC-compiled (compile %.2f s)", k.seconds);
            formula_note_ = note;
        } else {
            std::fprintf(stderr, "ensemblefit: warning: gpu %d: the formula's %s was not compiled, the interpreter "
                         "runs: %s\n", device_, kernel.c_str(), why.c_str());
            formula_note_ = ", formula interpreted (NVRTC failed)";
        }
        if (diag_.gpu_stats || diag_.setup_trace)
            std::fprintf(stderr, "[gpu %d] %s%s\n", device_, kernel.c_str(), formula_note_.c_str());
        return true;
    }

    /// Loads the normal solver's kernel for this problem now (CUDA loads modules lazily, at the
    /// first launch), so that the load counts as setup, not as the first unit's compute.
    void preload_normal_kernel() {
        std::visit(
            [&](const auto& model) {
                using M = std::decay_t<decltype(model)>;
                if constexpr (!std::is_same_v<M, PluginModel>) {  // a plugin loads its own module
                    with_normal_kernel(model, plan_, [&](auto real, auto width) {
                        cudaFuncAttributes a{};
                        EF_CUDA_CHECK(cudaFuncGetAttributes(&a, normal_fit_kernel<decltype(real), decltype(width)::value, M>));
                    });
                }
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
        const LmWorkspaceLayout<K> layout(n, P, workspace_of(model));
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
            qr_ev_.start();
            launch_fit<QrKernel<K, Model>>(model, blocks, threads, nullptr, data, dp_->bounds, plan_.settings,
                       plan_.bootstrap ? 1 : 0, plan_.seed, reps_.data(), count, dp_->start.data(), ybuf_.data(),
                       wbuf_.data(), work_.data(), layout.total, params_.data(), chi2_.data(), status_.data(),
                       iters_.data(), cov_.data());
            EF_CUDA_CHECK(cudaGetLastError());
            qr_ev_.stop();
            EF_CUDA_CHECK(cudaDeviceSynchronize());
            download_batch(unit, b0, count, P, out);
            qr_ev_.tally(tally_, "lm", out, b0, count);
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
    int cc_major_ = 0, cc_minor_ = 0;
    JitKernel jit_;             ///< a formula's solver kernel compiled at run time, when loaded
    std::string formula_note_;  ///< for EF_GPU_STATS: how a formula runs ("" for other models)
    NormalLane normal_lanes_[2];
    DeviceBuffer<double> x_, y_, sigma_, ybuf_, wbuf_, work_, params_, chi2_, cov_, nsigma_;
    DeviceBuffer<std::int64_t> reps_, status_, iters_;
    KernelTally tally_;   // the phases of model work (kernel_tally())
    LaunchEvents qr_ev_;  // around the qr path's kernel
};

}  // namespace

std::unique_ptr<Worker> make_fit_worker(FitPlan plan, FitInputs in, const WorkerOptions& options) {
    if (cuda_device_count() == 0)
        throw usage_error("run.workers = gpu: no CUDA device is visible to this rank");
    return std::make_unique<CudaWorker>(std::move(plan), std::move(in), options);
}

}  // namespace ef::cuda

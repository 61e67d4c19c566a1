// SPDX-License-Identifier: MIT
// The CUDA side of the batched table-model LM (kernels/fit/lm_batched.hpp): per round, one
// thread per requesting replica prepares its point, one thread per (replica, contour node)
// writes the moment columns, one deterministic GEMM multiplies the table by all columns (each
// output summed in ascending k with fused multiply-adds, as the CPU's table_gemm does), and one
// thread per replica advances its LM. Per-backend code here is memory, launches and the GEMM.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/fit_batched.cuh"
#include "kernels/cuda/warp_lanes.cuh"
#include "kernels/fit/batch_arrays.hpp"
#include "kernels/fit/lm_batched.hpp"
#include "kernels/fit/lm_gram.hpp"
#include "kernels/fit/round_plan.hpp"

namespace ef::cuda {
namespace {

using namespace ef::batched;
using ef::cuda::WarpLanes;

/// Which slot, request kind and first column each listed request has; owner of each column.
struct RoundLists {
    const int* slot;
    const int* kind;
    const long* col0;
    const int* owner;  // per column: index into the lists
    int count;
    long cols;
};

template <class View>
__global__ void start_kernel(View b, int count) {
    const int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s < count) start_slot(b, s);
}

template <class View>
__global__ void prepare_kernel(DisMellinModel m, View b, RoundLists l) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < l.count) prepare_slot(m, b, l.slot[t], l.kind[t]);
}

template <class View>
__global__ void nodes_kernel(DisMellinModel m, View b, RoundLists l, double* W) {
    const long idx = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
    const int nodes = m.nodes_count();
    if (idx >= static_cast<long>(l.count) * nodes) return;
    const int t = static_cast<int>(idx / nodes);
    const int k = static_cast<int>(idx % nodes);
    node_columns(m, b, l.slot[t], l.kind[t], k, W, l.col0[t]);
}

/// The LM steps (kernels/fit/round_plan.hpp's finish_request, either path), one thread per
/// replica (the 32 lanes of the reductions in one thread)...
template <class View>
__global__ void finish_thread_kernel(View b, RoundLists l, const double* W) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < l.count) finish_request(SerialLanes{}, b, l.slot[t], l.kind[t], W, l.col0[t]);
}
/// ... or one warp per replica: the same arithmetic (kernels/fit/lanes.hpp), 32x the threads.
template <class View>
__global__ void finish_warp_kernel(View b, RoundLists l, const double* W) {
    const int t = static_cast<int>((static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x) / kLanes);
    if (t < l.count) finish_request(WarpLanes{static_cast<int>(threadIdx.x % kLanes)}, b, l.slot[t], l.kind[t], W, l.col0[t]);
}

/// Each slot's origin-shifted data columns E and c (kernels/fit/lm_gram.hpp).
__global__ void gram_columns_kernel(int n, std::uint64_t seed, const std::int64_t* replicas, int count,
                                    const double* y0, const double* sigma, const double* f0, const double* winv,
                                    double* E, double* c) {
    const int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s < count) gram::replica_columns(n, seed, replicas[s], y0, sigma, f0, winv, E + static_cast<long>(s) * n, c[s]);
}

// Table GEMM F(n x cols) = T(n x Kt, row-major) W(Kt x cols, column-major): 128 x 128 outputs
// per block of 16 x 16 threads, 8 x 8 per thread (rows ty + 16 i, columns tx + 16 j), k tiles of
// 8 through shared memory with the next tile prefetched into registers. Each output is one
// accumulator updated by fma in ascending k: the same bits as the CPU's table_gemm.
constexpr int kBM = 128;
constexpr int kBN = 128;
constexpr int kBK = 8;

/// Epilogue of the rounds of either path: F(row, col) into the owning slot's residuals and
/// Jacobian (QR table path) or its H (Gram path).
template <class View>
struct SlotStore {
    View v;
    RoundLists l;
    __device__ void operator()(long row, long col, double f) const {
        const int t = l.owner[col];
        store_column(v, l.slot[t], l.kind[t], static_cast<int>(col - l.col0[t]), row, f);
    }
};
/// Plain column-major F (the probe that compares with cuBLAS).
struct PlainStore {
    double* F;
    long ld;
    __device__ void operator()(long row, long col, double v) const { F[col * ld + row] = v; }
};

template <class Store>
__global__ void __launch_bounds__(256) table_gemm_kernel(const double* __restrict__ T, const double* __restrict__ W,
                                                         int n, int Kt, long cols, Store store) {
    __shared__ double As[kBK][kBM];
    __shared__ double Bs[kBK][kBN];
    const int tx = threadIdx.x % 16;
    const int ty = threadIdx.x / 16;
    const int tid = threadIdx.x;
    const long row0 = static_cast<long>(blockIdx.y) * kBM;
    const long col0 = static_cast<long>(blockIdx.x) * kBN;
    double acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0;
    // Tile loads: 1024 values of A and of B, 4 per thread; thread tid loads k = tid % 8 of
    // rows / columns tid / 8 + 32 r.
    const int lk = tid % kBK;
    const int lr = tid / kBK;
    double ra[4], rb[4];
    auto load = [&](int k0) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const long row = row0 + lr + 32 * r;
            ra[r] = row < n ? T[row * Kt + k0 + lk] : 0.0;
            const long col = col0 + lr + 32 * r;
            rb[r] = col < cols ? W[col * Kt + k0 + lk] : 0.0;
        }
    };
    load(0);
    for (int k0 = 0; k0 < Kt; k0 += kBK) {
        __syncthreads();
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            As[lk][lr + 32 * r] = ra[r];
            Bs[lk][lr + 32 * r] = rb[r];
        }
        __syncthreads();
        if (k0 + kBK < Kt) load(k0 + kBK);
#pragma unroll
        for (int k = 0; k < kBK; ++k) {
            double a[8], bv[8];
#pragma unroll
            for (int i = 0; i < 8; ++i) a[i] = As[k][ty + 16 * i];
#pragma unroll
            for (int j = 0; j < 8; ++j) bv[j] = Bs[k][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = __fma_rn(a[i], bv[j], acc[i][j]);
        }
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        const long col = col0 + tx + 16 * j;
        if (col >= cols) continue;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const long row = row0 + ty + 16 * i;
            if (row < n) store(row, col, acc[i][j]);
        }
    }
}

dim3 gemm_grid(int n, long cols) {
    return dim3(static_cast<unsigned>((cols + kBN - 1) / kBN), static_cast<unsigned>((n + kBM - 1) / kBM));
}

int blocks_for(long n, int threads) { return static_cast<int>((n + threads - 1) / threads); }

/// The device side of one round: its request lists and the W columns, grown as needed.
struct RoundBuffers {
    DeviceBuffer<int> slot, kind, owner;
    DeviceBuffer<long> col0;
    DeviceBuffer<double> W;
    RoundLists upload(const batched::RoundPlan& p, long Kt) {
        slot.upload(p.slot.data(), p.slot.size());
        kind.upload(p.kind.data(), p.kind.size());
        col0.upload(p.col0.data(), p.col0.size());
        owner.upload(p.owner.data(), p.owner.size());
        W.grow(static_cast<size_t>(p.cols) * Kt);
        return RoundLists{slot.data(), kind.data(), col0.data(), owner.data(), p.size(), p.cols};
    }
};

/// Timing events of the rounds.
struct RoundEvents {
    cudaEvent_t em{}, e0{}, e1{}, e2{};
    RoundEvents() {
        EF_CUDA_CHECK(cudaEventCreate(&em));
        EF_CUDA_CHECK(cudaEventCreate(&e0));
        EF_CUDA_CHECK(cudaEventCreate(&e1));
        EF_CUDA_CHECK(cudaEventCreate(&e2));
    }
    ~RoundEvents() {
        cudaEventDestroy(em);
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
        cudaEventDestroy(e2);
    }
};

constexpr int kThreads = 64;

/**
 * A unit's start into `t`: its resampling (events em..e0: the table path's start kernel, or
 * the Gram path's columns E and c) and, on the Gram path, b = T^T E (e0..e1, "gemm_rhs"); the
 * counts as the CPU worker's (kernels/cpu/fit_kernels.cpp). Waits for e0 (or e1), which the
 * first round's request download waits for anyway.
 */
void record_start(KernelTally& t, const RoundEvents& ev, bool gram, int n, int count, long Kt) {
    const cudaEvent_t last = gram ? ev.e1 : ev.e0;
    EF_CUDA_CHECK(cudaEventSynchronize(last));
    const KernelTally::Clock::time_point end = KernelTally::Clock::now();
    float ms[2] = {};
    EF_CUDA_CHECK(cudaEventElapsedTime(&ms[0], ev.em, ev.e0));
    if (gram) EF_CUDA_CHECK(cudaEventElapsedTime(&ms[1], ev.e0, ev.e1));
    const double c = count, kt = static_cast<double>(Kt), s0 = 1e-3 * ms[0], s1 = 1e-3 * ms[1];
    t.add("resample", s0, 0, (gram ? 8.0 : 16.0) * n * c, c);
    using D = KernelTally::Clock::duration;
    t.interval_ending("resample", end - std::chrono::duration_cast<D>(std::chrono::duration<double>(s1)), s0);
    if (!gram) return;
    t.add("gemm_rhs", s1, 2.0 * kt * n * c, 8.0 * (kt * n + n * c + kt * c), c);
    t.interval_ending("gemm_rhs", end, s1);
}

/// One round's phases into `t` (the roofline's rows, the trace's device intervals): the times
/// from the round's events, which have completed; the counts as the CPU worker's run_rounds
/// counts them (kernels/cpu/fit_kernels.cpp).
void record_round(KernelTally& t, const RoundEvents& ev, int rows, long Kt, long cols) {
    float ms[3] = {};
    EF_CUDA_CHECK(cudaEventElapsedTime(&ms[0], ev.em, ev.e0));
    EF_CUDA_CHECK(cudaEventElapsedTime(&ms[1], ev.e0, ev.e1));
    EF_CUDA_CHECK(cudaEventElapsedTime(&ms[2], ev.e1, ev.e2));
    const KernelTally::Clock::time_point end = KernelTally::Clock::now();
    const double c = static_cast<double>(cols), kt = static_cast<double>(Kt), r = rows;
    const double s0 = 1e-3 * ms[0], s1 = 1e-3 * ms[1], s2 = 1e-3 * ms[2];
    t.add("moments", s0, 0, 8.0 * c * kt, c);
    t.add("gemm", s1, 2.0 * r * kt * c, 8.0 * (r * kt + kt * c + r * c), c);
    t.add("lm_steps", s2, 0, 8.0 * r * c, c);
    using D = KernelTally::Clock::duration;
    t.interval_ending("lm_steps", end, s2);
    t.interval_ending("gemm", end - std::chrono::duration_cast<D>(std::chrono::duration<double>(s2)), s1);
    t.interval_ending("moments", end - std::chrono::duration_cast<D>(std::chrono::duration<double>(s1 + s2)), s0);
}

/**
 * Rounds until every slot is done, for either path: moments (prepare and nodes kernels), the
 * deterministic GEMM of `table` (rows x Kt, row-major) with the round's columns through the
 * epilogue SlotStore, then the LM steps (a warp or a thread per replica: the plan's
 * gpu_lm_steps). The request codes come back to the host once per round to build the next
 * round's lists.
 */
template <class View>
void run_rounds(const DisMellinModel& model, const View& b, int count, const double* table, int rows, bool warp,
                const DeviceBuffer<int>& request, RoundBuffers& rb, RoundEvents& ev, BatchFitter::Stats& stats) {
    const long Kt = model.table_width();
    const int nodes = model.nodes_count();
    std::vector<int> req(static_cast<size_t>(count));
    batched::RoundPlan plan;
    while (true) {
        const auto hr = std::chrono::steady_clock::now();
        request.download(req.data(), req.size());
        if (!plan.build(req.data(), count, [&](int k) { return columns_for(b, k); })) break;
        ++stats.rounds;
        const int m = plan.size();
        const RoundLists l = rb.upload(plan, Kt);
        const auto h0 = std::chrono::steady_clock::now();
        EF_CUDA_CHECK(cudaEventRecord(ev.em));
        prepare_kernel<<<blocks_for(m, kThreads), kThreads>>>(model, b, l);
        EF_CUDA_CHECK(cudaGetLastError());
        nodes_kernel<<<blocks_for(static_cast<long>(m) * nodes, kThreads), kThreads>>>(model, b, l, rb.W.data());
        EF_CUDA_CHECK(cudaGetLastError());
        EF_CUDA_CHECK(cudaEventRecord(ev.e0));
        table_gemm_kernel<<<gemm_grid(rows, plan.cols), 256>>>(table, rb.W.data(), rows, static_cast<int>(Kt), plan.cols,
                                                                SlotStore<View>{b, l});
        EF_CUDA_CHECK(cudaGetLastError());
        EF_CUDA_CHECK(cudaEventRecord(ev.e1));
        if (warp)
            finish_warp_kernel<<<blocks_for(static_cast<long>(m) * kLanes, 128), 128>>>(b, l, rb.W.data());
        else
            finish_thread_kernel<<<blocks_for(m, kThreads), kThreads>>>(b, l, rb.W.data());
        EF_CUDA_CHECK(cudaGetLastError());
        EF_CUDA_CHECK(cudaEventRecord(ev.e2));
        EF_CUDA_CHECK(cudaEventSynchronize(ev.e2));
        float ms = 0.0f;
        EF_CUDA_CHECK(cudaEventElapsedTime(&ms, ev.em, ev.e0));
        stats.moment_seconds += ms * 1e-3;
        EF_CUDA_CHECK(cudaEventElapsedTime(&ms, ev.e0, ev.e1));
        stats.gemm_seconds += ms * 1e-3;
        EF_CUDA_CHECK(cudaEventElapsedTime(&ms, ev.e1, ev.e2));
        stats.step_seconds += ms * 1e-3;
        if (stats.tally) record_round(*stats.tally, ev, rows, Kt, plan.cols);
        stats.gemm_flops += 2.0 * rows * static_cast<double>(Kt) * static_cast<double>(plan.cols);
        // Host side of the round: reading the requests, building and uploading the lists.
        stats.host_seconds += std::chrono::duration<double>(h0 - hr).count();
    }
    EF_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace

void launch_table_gemm(const double* T, const double* W, double* F, int n, int Kt, long cols) {
    table_gemm_kernel<<<gemm_grid(n, cols), 256>>>(T, W, n, Kt, cols, PlainStore{F, n});
    EF_CUDA_CHECK(cudaGetLastError());
}

/// A fitted unit into `out`: each slot's outcome (parameters already downloaded into out),
/// replica 0's covariance from the device.
template <class State, class Outcome>
void store_unit(const DeviceBuffer<State>& state, const DeviceBuffer<double>& cov, const std::int64_t* replicas,
                int count, Outcome outcome, ReplicaBlock& out) {
    std::vector<State> h_state(static_cast<size_t>(count));
    state.download(h_state.data(), h_state.size());
    const size_t PP = static_cast<size_t>(out.P) * out.P;
    for (int s = 0; s < count; ++s) {
        store_outcome(out, static_cast<size_t>(s), replicas[s], outcome(h_state[static_cast<size_t>(s)]), nullptr);
        if (replicas[s] == 0) {
            out.covariance.resize(PP);
            cov.download(out.covariance.data(), PP);
        }
    }
}

struct BatchFitter::Impl {
    FitPlan plan;
    DisMellinModel model;  // device pointers
    const double* y0;
    const double* sigma;
    const DeviceParams& dp;
    int n = 0;  ///< data points
    BatchArrays<DeviceBuffer> arrays;
    RoundBuffers rb;
    RoundEvents ev;
    // Gram path: its inputs on the device and G.
    long Kt = 0;
    DeviceBuffer<double> tt, G, u0, f0, winv;
    DeviceBuffer<int> free_idx;

    Impl(const FitPlan& p, const FitInputs& in, const DisMellinModel& m, const double* dy, const double* ds,
         const DeviceParams& params)
        : plan(p), model(m), y0(dy), sigma(ds), dp(params), n(in.data.n), Kt(m.table_width()) {
        if (plan.path == FitPath::gram) upload_gram(*in.gram);
    }

    /// The Gram inputs (made on the host, the CPU worker's bits), then G = T^T (W T) with the
    /// deterministic GEMM.
    void upload_gram(const GramInputs& g) {
        n = g.n;
        Kt = g.Kt;
        free_idx.upload(g.free_idx.data(), g.free_idx.size());
        tt.upload(g.tt.data(), g.tt.size());
        u0.upload(g.u0.data(), g.u0.size());
        f0.upload(g.f0.data(), g.f0.size());
        winv.upload(g.winv.data(), g.winv.size());
        DeviceBuffer<double> wtt;
        wtt.upload(g.wtt.data(), g.wtt.size());
        G.grow(static_cast<size_t>(Kt) * Kt);
        launch_table_gemm(tt.data(), wtt.data(), G.data(), static_cast<int>(Kt), n, Kt);
        EF_CUDA_CHECK(cudaDeviceSynchronize());
    }

    bool warp() const { return plan.gpu_lm_steps == GpuLmSteps::warp; }

    /// The QR table path: resample and start every slot, then the rounds with T.
    void fit_table(const std::int64_t* replicas, int count, BatchFitter::Stats& stats) {
        BatchView b = batch_view(plan, n, dp.bounds, dp.start.data(), y0, sigma);
        arrays.attach(b, count, replicas);
        arrays.replica.upload(replicas, static_cast<size_t>(count));
        cudaGetLastError();
        EF_CUDA_CHECK(cudaEventRecord(ev.em));
        start_kernel<<<blocks_for(count, kThreads), kThreads>>>(b, count);
        EF_CUDA_CHECK(cudaGetLastError());
        EF_CUDA_CHECK(cudaEventRecord(ev.e0));
        if (stats.tally) record_start(*stats.tally, ev, false, n, count, 0);
        run_rounds(model, b, count, model.table, n, warp(), arrays.request, rb, ev, stats);
    }

    /// The Gram path: each slot's E and c, b = T^T E, start every slot, then the rounds with G.
    void fit_gram(const std::int64_t* replicas, int count, BatchFitter::Stats& stats) {
        gram::GramView v = gram_view(plan, dp.bounds, free_idx.data(), Kt, dp.start.data(), u0.data());
        arrays.attach(v, count, n, replicas);
        arrays.replica.upload(replicas, static_cast<size_t>(count));
        cudaGetLastError();
        EF_CUDA_CHECK(cudaEventRecord(ev.em));
        gram_columns_kernel<<<blocks_for(count, kThreads), kThreads>>>(n, plan.seed, arrays.replica.data(), count, y0,
                                                                       sigma, f0.data(), winv.data(), arrays.E.data(),
                                                                       arrays.c.data());
        EF_CUDA_CHECK(cudaGetLastError());
        EF_CUDA_CHECK(cudaEventRecord(ev.e0));
        launch_table_gemm(tt.data(), arrays.E.data(), arrays.b.data(), static_cast<int>(Kt), n, count);
        EF_CUDA_CHECK(cudaEventRecord(ev.e1));
        start_kernel<<<blocks_for(count, kThreads), kThreads>>>(v, count);
        EF_CUDA_CHECK(cudaGetLastError());
        if (stats.tally) record_start(*stats.tally, ev, true, n, count, Kt);
        run_rounds(model, v, count, G.data(), static_cast<int>(Kt), warp(), arrays.request, rb, ev, stats);
    }
};

BatchFitter::BatchFitter(const FitPlan& plan, const FitInputs& in, const DisMellinModel& device_model,
                         const double* device_y, const double* device_sigma, const DeviceParams& params)
    : impl_(std::make_unique<Impl>(plan, in, device_model, device_y, device_sigma, params)) {}
BatchFitter::~BatchFitter() = default;

size_t BatchFitter::bytes_per_replica() const {
    const Impl& d = *impl_;
    const int P = d.plan.num_params();
    const size_t nfree = static_cast<size_t>(d.plan.params.nfree);
    if (d.plan.path == FitPath::gram)
        return (static_cast<size_t>(d.Kt) * (1 + nfree) * 2 + 3 * static_cast<size_t>(d.Kt) + d.n + P * 18 + 64) *
                   sizeof(double) + sizeof(gram::State);
    return (LmScratchLayout(d.n, P).total + 2 * static_cast<size_t>(d.n) + (1 + nfree) * d.model.table_width() +
            static_cast<size_t>(P) * 17 + 256) * sizeof(double);
}

void BatchFitter::fit(const std::int64_t* replicas, int count, ReplicaBlock& out) {
    Impl& d = *impl_;
    const auto t_start = std::chrono::steady_clock::now();
    stats_ = Stats{};
    stats_.tally = tally_;
    const size_t slots = static_cast<size_t>(count);
    const int P = d.plan.num_params();
    if (d.plan.path == FitPath::gram) {
        d.fit_gram(replicas, count, stats_);
        d.arrays.params.download(out.params.data(), slots * P);
        store_unit(d.arrays.gram_state, d.arrays.cov, replicas, count,
                   [](const gram::State& st) { return normal_outcome(st); }, out);
    } else {
        d.fit_table(replicas, count, stats_);
        d.arrays.params.download(out.params.data(), slots * P);
        store_unit(d.arrays.lm_state, d.arrays.cov, replicas, count, [](const LmState& st) { return lm_outcome(st); },
                   out);
    }
    stats_.total_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
}

}  // namespace ef::cuda

// SPDX-License-Identifier: MIT
// The CUDA side of the batched table-model LM (kernels/fit/lm_batched.hpp): per round, one
// thread per requesting replica prepares its point, one thread per (replica, contour node)
// writes the moment columns, one deterministic GEMM multiplies the table by all columns (each
// output summed in ascending k with fused multiply-adds, as the CPU's table_gemm does), and one
// thread per replica advances its LM. Per-backend code here is memory, launches and the GEMM.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
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
/// The host loop knows count and cols; the device loop's kernels read them from dcount and
/// dcols, which plan_kernel wrote on the device.
struct RoundLists {
    const int* slot;
    const int* kind;
    const long* col0;
    const int* owner;  // per column: index into the lists
    int count;
    long cols;
    const int* dcount = nullptr;
    const long* dcols = nullptr;
    __device__ int size() const { return dcount ? *dcount : count; }
};

template <class View>
__global__ void start_kernel(View b, int count) {
    const int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s < count) start_slot(b, s);
}

template <class View>
__global__ void prepare_kernel(DisMellinModel m, View b, RoundLists l) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < l.size()) prepare_slot(m, b, l.slot[t], l.kind[t]);
}

template <class View>
__global__ void nodes_kernel(DisMellinModel m, View b, RoundLists l, double* W) {
    const long idx = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
    const int nodes = m.nodes_count();
    if (idx >= static_cast<long>(l.size()) * nodes) return;
    const int t = static_cast<int>(idx / nodes);
    const int k = static_cast<int>(idx % nodes);
    node_columns(m, b, l.slot[t], l.kind[t], k, W, l.col0[t]);
}

/// The LM steps (kernels/fit/round_plan.hpp's finish_request, either path), one thread per
/// replica (the 32 lanes of the reductions in one thread)...
template <class View>
__global__ void finish_thread_kernel(View b, RoundLists l, const double* W) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < l.size()) finish_request(SerialLanes{}, b, l.slot[t], l.kind[t], W, l.col0[t]);
}
/// ... or one warp per replica: the same arithmetic (kernels/fit/lanes.hpp), 32x the threads.
template <class View>
__global__ void finish_warp_kernel(View b, RoundLists l, const double* W) {
    const int t = static_cast<int>((static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x) / kLanes);
    if (t < l.size()) finish_request(WarpLanes{static_cast<int>(threadIdx.x % kLanes)}, b, l.slot[t], l.kind[t], W, l.col0[t]);
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
// accumulator updated by fma in ascending k: the same bits as the CPU's table_gemm. Any Kt: in
// the last tile the k past Kt load T = +0 and W = -0, whose product -0 leaves every accumulator
// as it was (-0 + -0 = -0, x + -0 = x), so the bits are the chain's over k < Kt alone. The Gram
// path's products have Kt = the data's point count (G = T^T (W T), b = T^T E), which need not be
// a multiple of 8 (reading on into the next row there gave issue 37's wrong G and b).
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
    /// The round's columns (the launch's `cols` is the host loop's count or the device loop's bound).
    __device__ long columns(long cols) const { return l.dcols ? *l.dcols : cols; }
};
/// Plain column-major F (the probe that compares with cuBLAS).
struct PlainStore {
    double* F;
    long ld;
    __device__ void operator()(long row, long col, double v) const { F[col * ld + row] = v; }
    __device__ long columns(long cols) const { return cols; }
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
    cols = store.columns(cols);
    if (col0 >= cols) return;  // the device loop's grid is sized for its bound (whole block)
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
        const int k = k0 + lk;  // past Kt (its last tile, Kt not a multiple of 8): +0 times -0
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const long row = row0 + lr + 32 * r;
            ra[r] = row < n && k < Kt ? T[row * Kt + k] : 0.0;
            const long col = col0 + lr + 32 * r;
            rb[r] = col < cols ? (k < Kt ? W[col * Kt + k] : -0.0) : 0.0;
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

/**
 * Tiling "pairs" of the same GEMM: the same 128 x 128 block tile and 8 x 8 outputs per thread,
 * each output the same single accumulator updated by fma in ascending k from 0 (so the same bits
 * as table_gemm_kernel and the CPU), but with the k tiles double-buffered in shared memory (one
 * barrier per tile instead of two), each thread's rows and columns in pairs (2 ty + 32 i +
 * {0, 1}, 2 tx + 32 j + {0, 1}), read as double2: 8 shared loads per k step instead of 16, and
 * the tiles' rows padded by kPad doubles so that a warp's tile stores (8 k x 4 rows) fall in
 * distinct banks (two wavefronts, not eight; the rows stay 16-byte aligned).
 */
constexpr int kPad = 4;
template <class Store>
__global__ void __launch_bounds__(256) table_gemm_pairs_kernel(const double* __restrict__ T,
                                                               const double* __restrict__ W, int n, int Kt, long cols,
                                                               Store store) {
    __shared__ __align__(16) double As[2][kBK][kBM + kPad];
    __shared__ __align__(16) double Bs[2][kBK][kBN + kPad];
    const int tx = threadIdx.x % 16;
    const int ty = threadIdx.x / 16;
    const int tid = threadIdx.x;
    const long row0 = static_cast<long>(blockIdx.y) * kBM;
    const long col0 = static_cast<long>(blockIdx.x) * kBN;
    cols = store.columns(cols);
    if (col0 >= cols) return;  // the device loop's grid is sized for its bound (whole block)
    double acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0;
    const int lk = tid % kBK;
    const int lr = tid / kBK;
    double ra[4], rb[4];
    auto load = [&](int k0) {
        const int k = k0 + lk;  // past Kt (its last tile, Kt not a multiple of 8): +0 times -0
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const long row = row0 + lr + 32 * r;
            ra[r] = row < n && k < Kt ? T[row * Kt + k] : 0.0;
            const long col = col0 + lr + 32 * r;
            rb[r] = col < cols ? (k < Kt ? W[col * Kt + k] : -0.0) : 0.0;
        }
    };
    auto put = [&](int buf) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            As[buf][lk][lr + 32 * r] = ra[r];
            Bs[buf][lk][lr + 32 * r] = rb[r];
        }
    };
    load(0);
    put(0);
    __syncthreads();
    int buf = 0;
    for (int k0 = 0; k0 < Kt; k0 += kBK) {
        const bool next = k0 + kBK < Kt;
        if (next) load(k0 + kBK);
#pragma unroll
        for (int k = 0; k < kBK; ++k) {
            double a[8], bv[8];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const double2 x = *reinterpret_cast<const double2*>(&As[buf][k][2 * ty + 32 * i]);
                a[2 * i] = x.x;
                a[2 * i + 1] = x.y;
                const double2 y = *reinterpret_cast<const double2*>(&Bs[buf][k][2 * tx + 32 * i]);
                bv[2 * i] = y.x;
                bv[2 * i + 1] = y.y;
            }
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = __fma_rn(a[i], bv[j], acc[i][j]);
        }
        // The other buffer was last read before the previous barrier: write it, then one barrier.
        if (next) put(buf ^ 1);
        __syncthreads();
        buf ^= 1;
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        const long col = col0 + 2 * tx + 32 * (j / 2) + j % 2;
        if (col >= cols) continue;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const long row = row0 + 2 * ty + 32 * (i / 2) + i % 2;
            if (row < n) store(row, col, acc[i][j]);
        }
    }
}

/// The table GEMM with either tiling, on `stream` (the same bits either way).
template <class Store>
void launch_gemm(GemmTiling tiling, const double* T, const double* W, int n, int Kt, long cols, Store store,
                 cudaStream_t stream) {
    if (tiling == GemmTiling::pairs)
        table_gemm_pairs_kernel<<<gemm_grid(n, cols), 256, 0, stream>>>(T, W, n, Kt, cols, store);
    else
        table_gemm_kernel<<<gemm_grid(n, cols), 256, 0, stream>>>(T, W, n, Kt, cols, store);
    EF_CUDA_CHECK(cudaGetLastError());
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
    /// Room for the device loop's lists: `count` requests and `cols` columns at most.
    void reserve(int count, long cols, long Kt) {
        slot.grow(static_cast<size_t>(count));
        kind.grow(static_cast<size_t>(count));
        col0.grow(static_cast<size_t>(count));
        owner.grow(static_cast<size_t>(cols));
        W.grow(static_cast<size_t>(cols) * Kt);
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

/// Milliseconds between two completed events, in seconds.
double event_seconds(cudaEvent_t a, cudaEvent_t b) {
    float ms = 0.0f;
    EF_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms * 1e-3;
}

/// The same for events a graph recorded; 0 where the driver gives no time (a print-only figure
/// must not fail the fit).
double graph_event_seconds(cudaEvent_t a, cudaEvent_t b) {
    float ms = 0.0f;
    if (cudaEventElapsedTime(&ms, a, b) != cudaSuccess) {
        cudaGetLastError();
        return 0.0;
    }
    return ms * 1e-3;
}

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

/// One round's phases into `t` (the roofline's rows, the trace's device intervals), the round
/// having ended at `end` after s0 (moments), s1 (GEMM) and s2 (LM steps) seconds of device time;
/// the counts as the CPU worker's run_rounds counts them (kernels/cpu/fit_kernels.cpp).
void tally_round(KernelTally& t, KernelTally::Clock::time_point end, double s0, double s1, double s2, int rows,
                 long Kt, long cols) {
    const double c = static_cast<double>(cols), kt = static_cast<double>(Kt), r = rows;
    t.add("moments", s0, 0, 8.0 * c * kt, c);
    t.add("gemm", s1, 2.0 * r * kt * c, 8.0 * (r * kt + kt * c + r * c), c);
    t.add("lm_steps", s2, 0, 8.0 * r * c, c);
    using D = KernelTally::Clock::duration;
    t.interval_ending("lm_steps", end, s2);
    t.interval_ending("gemm", end - std::chrono::duration_cast<D>(std::chrono::duration<double>(s2)), s1);
    t.interval_ending("moments", end - std::chrono::duration_cast<D>(std::chrono::duration<double>(s1 + s2)), s0);
}

/// tally_round for the host loop's round, from its events, which have completed.
void record_round(KernelTally& t, const RoundEvents& ev, int rows, long Kt, long cols) {
    tally_round(t, KernelTally::Clock::now(), event_seconds(ev.em, ev.e0), event_seconds(ev.e0, ev.e1),
                event_seconds(ev.e1, ev.e2), rows, Kt, cols);
}

/**
 * One round's kernels on `stream`, for either loop: moments (prepare and nodes kernels), the
 * deterministic GEMM of `table` (rows x Kt, row-major) with the round's columns through the
 * epilogue SlotStore, then the LM steps (a warp or a thread per replica: the plan's
 * gpu_lm_steps). Grids for `m` requests and `cols` columns (the host loop's counts, the device
 * loop's bounds); e[0..3] recorded before the moments, the GEMM, the steps and after them
 * (`record` cudaEventRecordExternal while a graph is captured).
 */
template <class View>
void launch_round(const DisMellinModel& model, const View& b, const RoundLists& l, int m, long cols,
                  const double* table, int rows, bool warp, GemmTiling tiling, double* W, cudaStream_t st,
                  const cudaEvent_t* e, unsigned record) {
    const long Kt = model.table_width();
    const int nodes = model.nodes_count();
    EF_CUDA_CHECK(cudaEventRecordWithFlags(e[0], st, record));
    prepare_kernel<<<blocks_for(m, kThreads), kThreads, 0, st>>>(model, b, l);
    EF_CUDA_CHECK(cudaGetLastError());
    nodes_kernel<<<blocks_for(static_cast<long>(m) * nodes, kThreads), kThreads, 0, st>>>(model, b, l, W);
    EF_CUDA_CHECK(cudaGetLastError());
    EF_CUDA_CHECK(cudaEventRecordWithFlags(e[1], st, record));
    launch_gemm(tiling, table, W, rows, static_cast<int>(Kt), cols, SlotStore<View>{b, l}, st);
    EF_CUDA_CHECK(cudaEventRecordWithFlags(e[2], st, record));
    if (warp)
        finish_warp_kernel<<<blocks_for(static_cast<long>(m) * kLanes, 128), 128, 0, st>>>(b, l, W);
    else
        finish_thread_kernel<<<blocks_for(m, kThreads), kThreads, 0, st>>>(b, l, W);
    EF_CUDA_CHECK(cudaGetLastError());
    EF_CUDA_CHECK(cudaEventRecordWithFlags(e[3], st, record));
}

/// Rounds a unit may take before its loop counts as a bug: 64 per LM iteration allowed (each
/// iteration is one Jacobian round and its trial rounds, whose damping grows until it succeeds
/// or fails far sooner). A bounded loop: a wrong list ends the run instead of hanging it.
template <class View>
long round_cap(const View& b) {
    return 64L * (static_cast<long>(b.settings.max_iterations) + 1);
}

[[noreturn]] inline void round_cap_exceeded(long cap) {
    throw std::logic_error("batched GPU fit: replicas still active after " + std::to_string(cap) +
                           " rounds (the LM's iteration limit allows fewer)");
}

/**
 * The host loop ([tuning] gpu_round_loop = host): the request codes come back to the host once
 * per round to build the next round's lists (batched::RoundPlan), which are uploaded.
 */
template <class View>
void run_rounds(const DisMellinModel& model, const View& b, int count, const double* table, int rows, bool warp,
                GemmTiling tiling, const DeviceBuffer<int>& request, RoundBuffers& rb, RoundEvents& ev,
                BatchFitter::Stats& stats) {
    const long Kt = model.table_width();
    const cudaEvent_t e[4] = {ev.em, ev.e0, ev.e1, ev.e2};
    std::vector<int> req(static_cast<size_t>(count));
    batched::RoundPlan plan;
    while (true) {
        const auto hr = std::chrono::steady_clock::now();
        request.download(req.data(), req.size());
        ++stats.host_syncs;
        if (!plan.build(req.data(), count, [&](int k) { return columns_for(b, k); })) break;
        if (++stats.rounds > round_cap(b)) round_cap_exceeded(round_cap(b));
        const RoundLists l = rb.upload(plan, Kt);
        stats.host_syncs += 4;
        const auto h0 = std::chrono::steady_clock::now();
        launch_round(model, b, l, plan.size(), plan.cols, table, rows, warp, tiling, rb.W.data(), nullptr, e,
                     cudaEventRecordDefault);
        stats.launches += 4;
        EF_CUDA_CHECK(cudaEventSynchronize(ev.e2));
        ++stats.host_syncs;
        stats.moment_seconds += event_seconds(ev.em, ev.e0);
        stats.gemm_seconds += event_seconds(ev.e0, ev.e1);
        stats.step_seconds += event_seconds(ev.e1, ev.e2);
        if (stats.tally) record_round(*stats.tally, ev, rows, Kt, plan.cols);
        stats.gemm_flops += 2.0 * rows * static_cast<double>(Kt) * static_cast<double>(plan.cols);
        // Host side of the round: reading the requests, building and uploading the lists.
        stats.host_seconds += std::chrono::duration<double>(h0 - hr).count();
    }
    EF_CUDA_CHECK(cudaDeviceSynchronize());
    ++stats.host_syncs;
}

/// What plan_kernel wrote for one round of a graph: its requests and columns.
struct RoundCount {
    int count;
    long cols;
};

/// The device loop's lists, written by plan_kernel.
struct DeviceLists {
    int* slot;
    int* kind;
    long* col0;
    int* owner;
    int* count;
    long* cols;
};

constexpr int kPlanThreads = 1024;

/**
 * batched::RoundPlan::build on the device, one block: the requesting slots in slot order, each
 * one's kind and first column, every column's owner, and the totals (into *d.count, *d.cols and
 * *log). Thread t takes a contiguous run of slots; an exclusive scan of the runs' counts places
 * them. The same lists as the host builds, so the same bits.
 */
template <class View>
__global__ void __launch_bounds__(kPlanThreads) plan_kernel(View b, int count, DeviceLists d, RoundCount* log) {
    __shared__ int sn[kPlanThreads];
    __shared__ long sc[kPlanThreads];
    const int tid = threadIdx.x;
    const int per = (count + kPlanThreads - 1) / kPlanThreads;
    const int s0 = min(count, tid * per);
    const int s1 = min(count, s0 + per);
    auto kind_of = [](int q) { return q == static_cast<int>(LmRequest::jacobian) ? 0 : 1; };
    int n = 0;
    long c = 0;
    for (int s = s0; s < s1; ++s) {
        const int q = b.request[s];
        if (q == static_cast<int>(LmRequest::done)) continue;
        ++n;
        c += columns_for(b, kind_of(q));
    }
    sn[tid] = n;
    sc[tid] = c;
    __syncthreads();
    for (int off = 1; off < kPlanThreads; off <<= 1) {  // inclusive scan (Hillis-Steele)
        const int an = tid >= off ? sn[tid - off] : 0;
        const long ac = tid >= off ? sc[tid - off] : 0;
        __syncthreads();
        sn[tid] += an;
        sc[tid] += ac;
        __syncthreads();
    }
    int t = sn[tid] - n;
    long col = sc[tid] - c;
    for (int s = s0; s < s1; ++s) {
        const int q = b.request[s];
        if (q == static_cast<int>(LmRequest::done)) continue;
        const int k = kind_of(q);
        const int cs = columns_for(b, k);
        d.slot[t] = s;
        d.kind[t] = k;
        d.col0[t] = col;
        for (int j = 0; j < cs; ++j) d.owner[col + j] = t;
        ++t;
        col += cs;
    }
    if (tid == kPlanThreads - 1) {
        *d.count = sn[tid];
        *d.cols = sc[tid];
        log->count = sn[tid];
        log->cols = sc[tid];
    }
}

/// Rounds per graph of the device loop: the host waits once per kGraphRounds rounds, and a
/// unit ends with at most kGraphRounds - 1 empty rounds (every kernel exits at once).
constexpr int kGraphRounds = 16;
constexpr int kEventsPerRound = 5;

/// An instantiated graph, destroyed with its owner.
struct GraphExec {
    cudaGraphExec_t exec = nullptr;
    GraphExec() = default;
    GraphExec(const GraphExec&) = delete;
    GraphExec& operator=(const GraphExec&) = delete;
    ~GraphExec() { reset(); }
    void reset() {
        if (exec) cudaGraphExecDestroy(exec);
        exec = nullptr;
    }
};

/// The device loop's state, kept across units: its stream, the round totals plan_kernel writes,
/// the per-round log (device and pinned host) and timing events.
struct DeviceLoop {
    Stream stream;
    DeviceBuffer<int> dcount;
    DeviceBuffer<long> dcols;
    DeviceBuffer<RoundCount> dlog;
    PinnedBuffer<RoundCount> hlog;
    std::vector<cudaEvent_t> ev;
    cudaEvent_t ready{};
    DeviceLoop() : ev(static_cast<size_t>(kGraphRounds) * kEventsPerRound) {
        dcount.resize(1);
        dcols.resize(1);
        dlog.resize(kGraphRounds + 1);
        hlog.resize(kGraphRounds + 1);
        for (cudaEvent_t& e : ev) EF_CUDA_CHECK(cudaEventCreate(&e));
        EF_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    }
    ~DeviceLoop() {
        for (cudaEvent_t e : ev) cudaEventDestroy(e);
        cudaEventDestroy(ready);
    }
    DeviceLoop(const DeviceLoop&) = delete;
    DeviceLoop& operator=(const DeviceLoop&) = delete;
};

/// The kernels of a device-loop round, with the unit's fixed arguments.
template <class View>
struct DeviceRounds {
    const DisMellinModel& model;
    const View& b;
    int count;
    const double* table;
    int rows;
    bool warp;
    GemmTiling tiling;
    RoundBuffers& rb;
    DeviceLoop& dl;

    DeviceLists lists() {
        return DeviceLists{rb.slot.data(), rb.kind.data(), rb.col0.data(), rb.owner.data(), dl.dcount.data(),
                           dl.dcols.data()};
    }

    /// kGraphRounds rounds whose grids hold `bound` requests, then the next round's lists (its
    /// totals in log[kGraphRounds]: zero when the unit is done), captured and instantiated.
    void capture(int bound, GraphExec& g) {
        g.reset();
        const cudaStream_t st = dl.stream.get();
        const DeviceLists d = lists();
        const RoundLists l{rb.slot.data(), rb.kind.data(), rb.col0.data(), rb.owner.data(), 0, 0,
                           dl.dcount.data(), dl.dcols.data()};
        const long cols = static_cast<long>(bound) * columns_for(b, kJacobian);
        EF_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        for (int r = 0; r < kGraphRounds; ++r) {
            const cudaEvent_t* e = dl.ev.data() + static_cast<size_t>(r) * kEventsPerRound;
            EF_CUDA_CHECK(cudaEventRecordWithFlags(e[0], st, cudaEventRecordExternal));
            plan_kernel<<<1, kPlanThreads, 0, st>>>(b, count, d, dl.dlog.data() + r);
            EF_CUDA_CHECK(cudaGetLastError());
            launch_round(model, b, l, bound, cols, table, rows, warp, tiling, rb.W.data(), st, e + 1,
                         cudaEventRecordExternal);
        }
        plan_kernel<<<1, kPlanThreads, 0, st>>>(b, count, d, dl.dlog.data() + kGraphRounds);
        EF_CUDA_CHECK(cudaGetLastError());
        cudaGraph_t graph = nullptr;
        EF_CUDA_CHECK(cudaStreamEndCapture(st, &graph));
        const cudaError_t err = cudaGraphInstantiate(&g.exec, graph, 0);
        cudaGraphDestroy(graph);
        EF_CUDA_CHECK(err);
    }

    /// Adds one graph's rounds to the counters; false when the unit is done.
    bool account(BatchFitter::Stats& stats) {
        const long Kt = model.table_width();
        // The roofline's rows and the trace's intervals, laid back from now: the graph's
        // rounds ran one after another and ended just before the host's wait returned.
        auto end = KernelTally::Clock::now();
        for (int r = kGraphRounds - 1; r >= 0; --r) {
            const RoundCount& rc = dl.hlog.data()[r];
            const cudaEvent_t* e = dl.ev.data() + static_cast<size_t>(r) * kEventsPerRound;
            const double lists = graph_event_seconds(e[0], e[1]);  // built on the device
            const double s0 = graph_event_seconds(e[1], e[2]), s1 = graph_event_seconds(e[2], e[3]);
            const double s2 = graph_event_seconds(e[3], e[4]);
            if (rc.count > 0) ++stats.rounds;
            stats.host_seconds += lists;
            stats.moment_seconds += s0;
            stats.gemm_seconds += s1;
            stats.step_seconds += s2;
            stats.gemm_flops += 2.0 * rows * static_cast<double>(Kt) * static_cast<double>(rc.cols);
            if (stats.tally && rc.count > 0) tally_round(*stats.tally, end, s0, s1, s2, rows, Kt, rc.cols);
            using D = KernelTally::Clock::duration;
            end -= std::chrono::duration_cast<D>(std::chrono::duration<double>(lists + s0 + s1 + s2));
        }
        return dl.hlog.data()[kGraphRounds].count > 0;
    }
};

/**
 * The device loop ([tuning] gpu_round_loop = device, the default): plan_kernel builds each
 * round's lists from the request codes on the GPU, and the rounds run as CUDA graphs of
 * kGraphRounds rounds each, the host reading only each graph's small log. Every kernel reads
 * the round's count from the device, so a graph's grids are sized for a bound: the active
 * requests when it was captured (they only decrease), recaptured when they fall to a quarter.
 * Rounds after the last active one are empty (each kernel exits at once).
 */
template <class View>
void run_rounds_device(const DeviceRounds<View>& unit, BatchFitter::Stats& stats) {
    DeviceRounds<View> u = unit;
    const long per = columns_for(u.b, kJacobian);
    u.rb.reserve(u.count, static_cast<long>(u.count) * per, u.model.table_width());
    const cudaStream_t st = u.dl.stream.get();
    EF_CUDA_CHECK(cudaEventRecord(u.dl.ready, nullptr));  // after start_kernel (default stream)
    EF_CUDA_CHECK(cudaStreamWaitEvent(st, u.dl.ready, 0));
    GraphExec g;
    int bound = u.count, captured = 0;
    while (true) {
        if (captured == 0 || (bound <= captured / 4 && captured > 64)) {
            u.capture(bound, g);
            captured = bound;
            ++stats.graphs;
        }
        EF_CUDA_CHECK(cudaGraphLaunch(g.exec, st));
        ++stats.launches;
        EF_CUDA_CHECK(cudaMemcpyAsync(u.dl.hlog.data(), u.dl.dlog.data(), (kGraphRounds + 1) * sizeof(RoundCount),
                                      cudaMemcpyDeviceToHost, st));
        EF_CUDA_CHECK(cudaStreamSynchronize(st));
        ++stats.host_syncs;
        if (!u.account(stats)) break;
        if (stats.rounds > round_cap(u.b)) round_cap_exceeded(round_cap(u.b));
        bound = u.dl.hlog.data()[kGraphRounds].count;
    }
}

}  // namespace

void launch_table_gemm(const double* T, const double* W, double* F, int n, int Kt, long cols, GemmTiling tiling) {
    launch_gemm(tiling, T, W, n, Kt, cols, PlainStore{F, n}, nullptr);
}

void launch_table_gemm(const double* T, const double* W, double* F, int n, int Kt, long cols) {
    launch_table_gemm(T, W, F, n, Kt, cols, table_gemm_tiling());
}

GemmTiling table_gemm_tiling() {
    // Zeroed operands at a stats2-like shape (1088 = the table's width), each tiling warmed up
    // once and then timed three times; the faster one's best against the other's.
    static const GemmTiling chosen = [] {
        const int n = 2048, K = 1088;
        const long cols = 4096;
        DeviceBuffer<double> T(static_cast<size_t>(n) * K), W(static_cast<size_t>(K) * cols),
            F(static_cast<size_t>(n) * cols);
        cudaEvent_t a{}, b{};
        EF_CUDA_CHECK(cudaEventCreate(&a));
        EF_CUDA_CHECK(cudaEventCreate(&b));
        auto best = [&](GemmTiling g) {
            double s = 1e30;
            for (int rep = 0; rep < 4; ++rep) {
                EF_CUDA_CHECK(cudaEventRecord(a));
                launch_table_gemm(T.data(), W.data(), F.data(), n, K, cols, g);
                EF_CUDA_CHECK(cudaEventRecord(b));
                EF_CUDA_CHECK(cudaEventSynchronize(b));
                if (rep > 0) s = std::min(s, event_seconds(a, b));
            }
            return s;
        };
        const double blocked = best(GemmTiling::blocked);
        const double pairs = best(GemmTiling::pairs);
        cudaEventDestroy(a);
        cudaEventDestroy(b);
        return pairs < blocked ? GemmTiling::pairs : GemmTiling::blocked;
    }();
    return chosen;
}

/// A fitted unit into `out`: each slot's outcome (parameters already downloaded into out),
/// replica 0's covariance from the device.
template <class State, class Outcome>
void store_unit(const DeviceBuffer<State>& state, const DeviceBuffer<double>& cov, const std::int64_t* replicas,
                int count, Outcome outcome, ReplicaBlock& out, int& syncs) {
    std::vector<State> h_state(static_cast<size_t>(count));
    state.download(h_state.data(), h_state.size());
    ++syncs;
    const size_t PP = static_cast<size_t>(out.P) * out.P;
    for (int s = 0; s < count; ++s) {
        store_outcome(out, static_cast<size_t>(s), replicas[s], outcome(h_state[static_cast<size_t>(s)]), nullptr);
        if (replicas[s] == 0) {
            out.covariance.resize(PP);
            cov.download(out.covariance.data(), PP);
            ++syncs;
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
    DeviceLoop dl;
    GemmTiling tiling = table_gemm_tiling();  // before any capture: it allocates and synchronises
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

    /// The rounds of a started unit, with `table` (rows x Kt): the plan's loop.
    template <class View>
    void rounds(const View& v, int count, const double* table, int rows, BatchFitter::Stats& stats) {
        stats.device_loop = plan.gpu_round_loop == GpuRoundLoop::device;
        stats.gemm_pairs = tiling == GemmTiling::pairs;
        if (stats.device_loop)
            run_rounds_device(DeviceRounds<View>{model, v, count, table, rows, warp(), tiling, rb, dl}, stats);
        else
            run_rounds(model, v, count, table, rows, warp(), tiling, arrays.request, rb, ev, stats);
    }

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
        stats.launches += 1;
        stats.host_syncs += 1;  // the replicas' upload
        rounds(b, count, model.table, n, stats);
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
        stats.launches += 3;
        stats.host_syncs += 1;  // the replicas' upload
        rounds(v, count, G.data(), static_cast<int>(Kt), stats);
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
                   [](const gram::State& st) { return normal_outcome(st); }, out, stats_.host_syncs);
    } else {
        d.fit_table(replicas, count, stats_);
        d.arrays.params.download(out.params.data(), slots * P);
        store_unit(d.arrays.lm_state, d.arrays.cov, replicas, count, [](const LmState& st) { return lm_outcome(st); },
                   out, stats_.host_syncs);
    }
    stats_.host_syncs += 1;  // the parameters' download
    stats_.total_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
}

}  // namespace ef::cuda

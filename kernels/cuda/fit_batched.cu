// SPDX-License-Identifier: MIT
// The CUDA side of the batched table-model LM (kernels/fit/lm_batched.hpp): per round, one
// thread per requesting replica prepares its point, one thread per (replica, contour node)
// writes the moment columns, one deterministic GEMM multiplies the table by all columns (each
// output summed in ascending k with fused multiply-adds, as the CPU's table_gemm does), and one
// thread per replica advances its LM. Per-backend code here is memory, launches and the GEMM.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/fit_batched.cuh"
#include "kernels/cuda/warp_lanes.cuh"
#include "kernels/fit/lm_batched.hpp"
#include "src/fit/fit_arrays.hpp"

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

__global__ void start_kernel(BatchView b, int count) {
    const int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s < count) start_slot(b, s);
}

__global__ void prepare_kernel(DisMellinModel m, BatchView b, RoundLists l) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < l.count) prepare_slot(m, b, l.slot[t], l.kind[t]);
}

__global__ void nodes_kernel(DisMellinModel m, BatchView b, RoundLists l, double* W) {
    const long idx = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
    const int nodes = m.nodes_count();
    if (idx >= static_cast<long>(l.count) * nodes) return;
    const int t = static_cast<int>(idx / nodes);
    const int k = static_cast<int>(idx % nodes);
    node_columns(m, b, l.slot[t], l.kind[t], k, W, l.col0[t]);
}

/// The LM steps, one thread per replica (the 32 lanes of the reductions in one thread)...
__global__ void finish_thread_kernel(BatchView b, RoundLists l) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < l.count) finish_slot(SerialLanes{}, b, l.slot[t], l.kind[t]);
}
/// ... or one warp per replica: the same arithmetic (kernels/fit/lanes.hpp), 32x the threads.
__global__ void finish_warp_kernel(BatchView b, RoundLists l) {
    const int t = static_cast<int>((static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x) / kLanes);
    if (t < l.count) finish_slot(WarpLanes{static_cast<int>(threadIdx.x % kLanes)}, b, l.slot[t], l.kind[t]);
}

// Table GEMM F(n x cols) = T(n x Kt, row-major) W(Kt x cols, column-major): 128 x 128 outputs
// per block of 16 x 16 threads, 8 x 8 per thread (rows ty + 16 i, columns tx + 16 j), k tiles of
// 8 through shared memory with the next tile prefetched into registers. Each output is one
// accumulator updated by fma in ascending k: the same bits as the CPU's table_gemm.
constexpr int kBM = 128;
constexpr int kBN = 128;
constexpr int kBK = 8;

/// Epilogue of the LM rounds: F(i, c) into the owning slot's residuals / Jacobian.
struct SlotStore {
    BatchView b;
    RoundLists l;
    __device__ void operator()(long row, long col, double v) const {
        const int t = l.owner[col];
        store_output(b, l.slot[t], l.kind[t], static_cast<int>(col - l.col0[t]), static_cast<int>(row), v);
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

}  // namespace

void launch_table_gemm(const double* T, const double* W, double* F, int n, int Kt, long cols) {
    table_gemm_kernel<<<gemm_grid(n, cols), 256>>>(T, W, n, Kt, cols, PlainStore{F, n});
    EF_CUDA_CHECK(cudaGetLastError());
}

struct TableBatchFitter::Impl {
    const FitProblem& pb;
    DisMellinModel model;  // device pointers
    const double* y0;
    const double* sigma;
    int nfree = 0;
    /// LM steps by a warp per replica (default) or a thread per replica (EF_GPU_LM_STEPS=thread).
    bool warp_steps = true;
    DeviceBuffer<double> lower, upper, start, work, params, y, w, cov, W;
    DeviceBuffer<unsigned char> fixed;
    DeviceBuffer<LmState> state;
    DeviceBuffer<int> request, slot, kind, owner;
    DeviceBuffer<long> col0;
    DeviceBuffer<std::int64_t> replica;
    DeviceBuffer<JDual> pd;
    DeviceBuffer<JNorm> jnorm;
    DeviceBuffer<VNorm> vnorm;
    cudaEvent_t e0{}, e1{}, e2{};

    Impl(const FitProblem& p, const DisMellinModel& m, const double* dy, const double* ds)
        : pb(p), model(m), y0(dy), sigma(ds) {
        const ParamArrays pa = param_arrays(pb.config);
        nfree = pa.nfree;
        const size_t P = pa.lower.size();
        lower.upload(pa.lower.data(), P);
        upper.upload(pa.upper.data(), P);
        start.upload(pa.start.data(), P);
        fixed.upload(pa.fixed.data(), P);
        cov.resize(P * P);
        const char* steps = std::getenv("EF_GPU_LM_STEPS");
        warp_steps = !(steps != nullptr && std::string(steps) == "thread");
        EF_CUDA_CHECK(cudaEventCreate(&e0));
        EF_CUDA_CHECK(cudaEventCreate(&e1));
        EF_CUDA_CHECK(cudaEventCreate(&e2));
    }
    ~Impl() {
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
        cudaEventDestroy(e2);
    }
};

TableBatchFitter::TableBatchFitter(const FitProblem& problem, const DisMellinModel& device_model,
                                   const double* device_y, const double* device_sigma)
    : impl_(std::make_unique<Impl>(problem, device_model, device_y, device_sigma)) {}
TableBatchFitter::~TableBatchFitter() = default;

void TableBatchFitter::fit(const std::int64_t* replicas, int count, ReplicaBlock& out) {
    Impl& d = *impl_;
    const auto t_start = std::chrono::steady_clock::now();
    stats_ = Stats{};
    const FitConfig& cfg = d.pb.config;
    const int n = d.pb.data.n;
    const int P = d.pb.num_params();
    const LmScratchLayout layout(n, P);
    const size_t slots = static_cast<size_t>(count);
    d.work.resize(slots * layout.total);
    d.params.resize(slots * P);
    d.y.resize(slots * n);
    d.w.resize(slots * n);
    d.state.resize(slots);
    d.request.resize(slots);
    d.replica.upload(replicas, slots);
    d.pd.resize(slots * P);
    d.jnorm.resize(slots);
    d.vnorm.resize(slots);

    const ParamArrays pa = param_arrays(cfg);
    BatchView b = batch_view(d.pb, d.nfree, pa.view(d.lower.get(), d.upper.get(), d.fixed.get()), d.start.get(),
                             d.y0, d.sigma);
    b.work = d.work.get();
    b.params = d.params.get();
    b.y = d.y.get();
    b.w = d.w.get();
    b.state = d.state.get();
    b.request = d.request.get();
    b.replica = d.replica.get();
    b.pd = d.pd.get();
    b.jnorm = d.jnorm.get();
    b.vnorm = d.vnorm.get();
    b.cov = d.cov.get();
    for (int s = 0; s < count; ++s)
        if (replicas[s] == 0) b.cov_slot = s;

    constexpr int kThreads = 64;
    cudaGetLastError();
    start_kernel<<<blocks_for(count, kThreads), kThreads>>>(b, count);
    EF_CUDA_CHECK(cudaGetLastError());

    const long Kt = d.model.table_width();
    const int nodes = d.model.nodes_count();
    std::vector<int> req(slots), h_slot, h_kind, h_owner;
    std::vector<long> h_col0;
    while (true) {
        d.request.download(req.data(), slots);
        h_slot.clear();
        h_kind.clear();
        h_col0.clear();
        h_owner.clear();
        long cols = 0;
        for (int s = 0; s < count; ++s) {
            const int q = req[static_cast<size_t>(s)];
            if (q == static_cast<int>(LmRequest::done)) continue;
            const int k = q == static_cast<int>(LmRequest::jacobian) ? kJacobian : kResiduals;
            h_owner.insert(h_owner.end(), static_cast<size_t>(columns_for(b, k)), static_cast<int>(h_slot.size()));
            h_slot.push_back(s);
            h_kind.push_back(k);
            h_col0.push_back(cols);
            cols += columns_for(b, k);
        }
        if (h_slot.empty()) break;
        ++stats_.rounds;
        const int m = static_cast<int>(h_slot.size());
        d.slot.upload(h_slot.data(), h_slot.size());
        d.kind.upload(h_kind.data(), h_kind.size());
        d.col0.upload(h_col0.data(), h_col0.size());
        d.owner.upload(h_owner.data(), h_owner.size());
        d.W.resize(static_cast<size_t>(cols) * Kt);
        const RoundLists l{d.slot.get(), d.kind.get(), d.col0.get(), d.owner.get(), m, cols};
        prepare_kernel<<<blocks_for(m, kThreads), kThreads>>>(d.model, b, l);
        EF_CUDA_CHECK(cudaGetLastError());
        nodes_kernel<<<blocks_for(static_cast<long>(m) * nodes, kThreads), kThreads>>>(d.model, b, l, d.W.get());
        EF_CUDA_CHECK(cudaGetLastError());
        EF_CUDA_CHECK(cudaEventRecord(d.e0));
        table_gemm_kernel<<<gemm_grid(n, cols), 256>>>(d.model.table, d.W.get(), n, static_cast<int>(Kt), cols,
                                                        SlotStore{b, l});
        EF_CUDA_CHECK(cudaGetLastError());
        EF_CUDA_CHECK(cudaEventRecord(d.e1));
        if (d.warp_steps)
            finish_warp_kernel<<<blocks_for(static_cast<long>(m) * kLanes, 128), 128>>>(b, l);
        else
            finish_thread_kernel<<<blocks_for(m, kThreads), kThreads>>>(b, l);
        EF_CUDA_CHECK(cudaGetLastError());
        EF_CUDA_CHECK(cudaEventRecord(d.e2));
        EF_CUDA_CHECK(cudaEventSynchronize(d.e2));
        float ms = 0.0f;
        EF_CUDA_CHECK(cudaEventElapsedTime(&ms, d.e0, d.e1));
        stats_.gemm_seconds += ms * 1e-3;
        EF_CUDA_CHECK(cudaEventElapsedTime(&ms, d.e1, d.e2));
        stats_.step_seconds += ms * 1e-3;
        stats_.gemm_flops += 2.0 * n * static_cast<double>(Kt) * static_cast<double>(cols);
    }
    EF_CUDA_CHECK(cudaDeviceSynchronize());

    std::vector<LmState> h_state(slots);
    d.state.download(h_state.data(), slots);
    d.params.download(out.params.data(), slots * P);
    for (int s = 0; s < count; ++s) {
        const LmOutcome o = lm_outcome(h_state[static_cast<size_t>(s)]);
        out.index[static_cast<size_t>(s)] = replicas[s];
        out.chi2[static_cast<size_t>(s)] = o.chi2;
        out.status[static_cast<size_t>(s)] = static_cast<std::int64_t>(o.status);
        out.iterations[static_cast<size_t>(s)] = o.iterations;
        if (replicas[s] == 0) {
            out.covariance.resize(static_cast<size_t>(P) * P);
            d.cov.download(out.covariance.data(), static_cast<size_t>(P) * P);
        }
    }
    stats_.total_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
}

}  // namespace ef::cuda

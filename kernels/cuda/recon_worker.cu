// SPDX-License-Identifier: MIT
// The CUDA reconstruction worker: PtychoEngine over CudaBackend. Only memory, launches,
// reductions and cuFFT plans are here; every formula is a functor of kernels/recon/ptycho_math.hpp,
// the same code the CPU worker runs.
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <cufft.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ensemblefit/core/error.hpp>

#include "kernels/core/kernel_tally.hpp"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/pattern_stream.cuh"
#include "kernels/cuda/peer_sum.cuh"
#include "kernels/recon/engine_worker.hpp"
#include "kernels/recon/ptycho_math.hpp"
#include "kernels/recon/recon_backends.hpp"
#include "kernels/recon/window_passes.hpp"

namespace ef::recon {

namespace {

using cuda::DeviceBuffer;
using cuda::PinnedBuffer;

/**
 * NCCL, loaded at run time (dlopen "libnccl.so.2"), so that building needs no NCCL and a machine
 * without it falls back to MPI sums of host buffers. Only the handful of entry points used, with
 * the types and enum values of NCCL 2's stable ABI (ncclFloat64 = 8, ncclSum = 0).
 */
namespace nccl {

using Result = int;        // ncclResult_t, 0 = ncclSuccess
using Comm = void*;        // ncclComm_t
struct UniqueId {
    char internal[128];
};
constexpr int kInt8 = 0;
constexpr int kFloat64 = 8;
constexpr int kSum = 0;

struct Api {
    void* lib = nullptr;
    Result (*get_unique_id)(UniqueId*) = nullptr;
    Result (*comm_init_rank)(Comm*, int, UniqueId, int) = nullptr;
    Result (*all_reduce)(const void*, void*, size_t, int, int, Comm, cudaStream_t) = nullptr;
    Result (*all_gather)(const void*, void*, size_t, int, Comm, cudaStream_t) = nullptr;  // optional
    Result (*comm_destroy)(Comm) = nullptr;
    Result (*group_start)() = nullptr;  // optional: without them, two sums are two launches
    Result (*group_end)() = nullptr;
    const char* (*error_string)(Result) = nullptr;
    std::string error;
};

/// The process's NCCL, loaded once; `error` says why not when lib is null.
Api& api() {
    static Api a = [] {
        Api x;
        // NVLink multicast (NVLS) can take a shared host's GPUs out of service: keep it off
        // unless the user decided otherwise.
        setenv("NCCL_NVLS_ENABLE", "0", 0);
        x.lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
        if (!x.lib) x.lib = dlopen("libnccl.so", RTLD_NOW | RTLD_LOCAL);
        if (!x.lib) {
            const char* e = dlerror();
            x.error = std::string("cannot load libnccl.so.2 (") + (e ? e : "?") + "); add its folder to LD_LIBRARY_PATH";
            return x;
        }
        x.get_unique_id = reinterpret_cast<Result (*)(UniqueId*)>(dlsym(x.lib, "ncclGetUniqueId"));
        x.comm_init_rank = reinterpret_cast<Result (*)(Comm*, int, UniqueId, int)>(dlsym(x.lib, "ncclCommInitRank"));
        x.all_reduce = reinterpret_cast<Result (*)(const void*, void*, size_t, int, int, Comm, cudaStream_t)>(
            dlsym(x.lib, "ncclAllReduce"));
        x.all_gather = reinterpret_cast<Result (*)(const void*, void*, size_t, int, Comm, cudaStream_t)>(
            dlsym(x.lib, "ncclAllGather"));
        x.comm_destroy = reinterpret_cast<Result (*)(Comm)>(dlsym(x.lib, "ncclCommDestroy"));
        x.group_start = reinterpret_cast<Result (*)()>(dlsym(x.lib, "ncclGroupStart"));
        x.group_end = reinterpret_cast<Result (*)()>(dlsym(x.lib, "ncclGroupEnd"));
        if (!x.group_start || !x.group_end) x.group_start = x.group_end = nullptr;
        x.error_string = reinterpret_cast<const char* (*)(Result)>(dlsym(x.lib, "ncclGetErrorString"));
        if (!x.get_unique_id || !x.comm_init_rank || !x.all_reduce || !x.comm_destroy) {
            x.error = "libnccl.so.2 lacks ncclGetUniqueId/ncclCommInitRank/ncclAllReduce/ncclCommDestroy";
            x.lib = nullptr;
        }
        return x;
    }();
    return a;
}

std::string describe(Result r) {
    const Api& a = api();
    return "NCCL error " + std::to_string(r) + (a.error_string ? std::string(": ") + a.error_string(r) : std::string());
}

}  // namespace nccl

constexpr int kBlock = 256;

template <class F>
__global__ void for_each_kernel(std::int64_t n, F f) {
    for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
        f(i);
}

/// f(r, c): columns on grid x, rows on grid y (striding past 65535 rows): no index division.
template <class F>
__global__ void for_each_rows_kernel(std::int64_t rows, int cols, F f) {
    const int c = static_cast<int>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y) f(r, c);
}

/// The sum of every thread's `s` over a block of kBlock threads, valid on thread 0: a fixed
/// shared-memory tree, so the result depends only on the block size (no atomics).
__device__ Sum2 block_tree_sum(Sum2 s) {
    __shared__ double sa[kBlock];
    __shared__ double sb[kBlock];
    sa[threadIdx.x] = s.a;
    sb[threadIdx.x] = s.b;
    __syncthreads();
    for (int stride = kBlock / 2; stride > 0; stride >>= 1) {
        if (static_cast<int>(threadIdx.x) < stride) {
            sa[threadIdx.x] += sa[threadIdx.x + stride];
            sb[threadIdx.x] += sb[threadIdx.x + stride];
        }
        __syncthreads();
    }
    return Sum2{sa[0], sb[0]};
}

/**
 * Block (p, g) sums elements [p * span, (p + 1) * span) of group g and writes partial
 * g * parts + p. Thread t takes every blockDim-th element from t, then a fixed shared-memory
 * tree: the result depends only on the launch shape, never on timing (no atomics).
 */
template <class F>
__global__ void reduce_groups_kernel(std::int64_t size, std::int64_t span, F f, Sum2* partial) {
    const std::int64_t g = blockIdx.y;
    const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x) * span;
    const std::int64_t end = begin + span < size ? begin + span : size;
    Sum2 s;
    for (std::int64_t e = begin + threadIdx.x; e < end; e += blockDim.x) s += f(g, e);
    const Sum2 total = block_tree_sum(s);
    if (threadIdx.x == 0) partial[g * gridDim.x + blockIdx.x] = total;
}

/// Block g: out[g] = sum over p of partial[g * parts + p]; thread t adds p = t, t + blockDim, ...
/// in order, then a fixed shared-memory tree (deterministic, no atomics).
__global__ void sum_partials_kernel(std::int64_t parts, const Sum2* partial, Sum2* out) {
    const std::int64_t g = blockIdx.x;
    Sum2 s;
    for (std::int64_t p = threadIdx.x; p < parts; p += blockDim.x) s += partial[g * parts + p];
    const Sum2 total = block_tree_sum(s);
    if (threadIdx.x == 0) out[g] = total;
}

/**
 * The probe-gradient spectrum and the position-gradient terms in one read of F G_P: thread i =
 * (k, q) loops over the batch in order, summing its spectrum element in double exactly as
 * ProbeGradientSpectrum does (same terms, same order), while each position's terms are summed
 * over the block (warp shuffles, then the warps in order) into partial[j * blocks + block];
 * sum_partials_kernel then adds the blocks in order. No atomics: the result depends only on the
 * launch shape.
 */
template <class T>
__global__ void spectrum_positions_kernel(ProbeGradientSpectrum<T> spec, bool want_spec, PositionGradientTerm<T> pos,
                                          Sum2* partial) {
    constexpr int kWarps = kBlock / 32;
    __shared__ double sa[32][kWarps];
    __shared__ double sb[32][kWarps];
    const PtychoDims d = pos.d;
    const int n = d.h * d.w;
    const std::int64_t kn = static_cast<std::int64_t>(d.modes) * n;
    const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const bool active = i < kn;
    const int ei = active ? static_cast<int>(i) : 0;
    const int k = ei / n;
    const int q = ei - k * n;
    const int u = q / d.w, v = q % d.w;
    const T fy = fft_freq<T>(u, d.h), fx = fft_freq<T>(v, d.w);
    const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
    Cx<double> acc{0.0, 0.0};
    const std::int64_t b = spec.batch;
    for (std::int64_t j0 = 0; j0 < b; j0 += 32) {
        const int m = static_cast<int>(b - j0 < 32 ? b - j0 : 32);
        for (int jj = 0; jj < m; ++jj) {
            const std::int64_t j = j0 + jj;
            Sum2 t;
            if (active) {
                const Cx<T> w = ramp_at(pos.ramp, d, j, u, v);
                if (want_spec) {
                    const Cx<T> z = spec.term(j, i, w);
                    acc.re += static_cast<double>(z.re);
                    acc.im += static_cast<double>(z.im);
                }
                t = pos.term(j, ei, w, fy, fx);
            }
            for (int off = 16; off > 0; off >>= 1) {
                t.a += __shfl_down_sync(0xffffffffu, t.a, off);
                t.b += __shfl_down_sync(0xffffffffu, t.b, off);
            }
            if (lane == 0) {
                sa[jj][warp] = t.a;
                sb[jj][warp] = t.b;
            }
        }
        __syncthreads();
        if (static_cast<int>(threadIdx.x) < m) {
            Sum2 s;
            for (int w = 0; w < kWarps; ++w) {
                s.a += sa[threadIdx.x][w];
                s.b += sb[threadIdx.x][w];
            }
            partial[(j0 + threadIdx.x) * gridDim.x + blockIdx.x] = s;
        }
        __syncthreads();
    }
    if (active && want_spec) spec.finish(i, acc);
}

/// Shared memory CudaBlock::sum() works in: 2 doubles for each of up to 32 warps.
inline constexpr int kBlockSumDoubles = 64;

/// A CUDA thread block of Threads threads as window_fft.hpp's Block: ranks, barriers, a
/// fixed-order sum, and the loaded bytes each thread keeps in flight (wfft::stream,
/// Lines::fetched), for 128 x 128 windows (1024 threads, 64 registers each). stream()'s former
/// 32 bytes kept one of the backward pass's 24-byte patch inputs in flight per thread; 64 (two)
/// took one benchmark batch from 2.11 to 1.98 ms (H100, perf/RESULTS.md, seventh session), and
/// after Cx's alignment and the evict-first hints 48 spilled least and ran 1.53 against 1.55 ms
/// with 64; 96 and larger fetches spilled more.
template <int Threads, bool Clusters = false>
struct CudaBlock {
    static constexpr int kSize = Threads;
    /// Launched in thread-block clusters (compute capability 9.0): cluster_sync() and peer().
    static constexpr bool kClusters = Clusters;
    static constexpr int kStreamBytes = 48;
    static constexpr int kFetchBytes = 48;
    double* scratch;  ///< kBlockSumDoubles of shared memory
    EF_HD int rank() const {
#ifdef __CUDA_ARCH__
        return static_cast<int>(threadIdx.x);
#else
        return 0;
#endif
    }
    EF_HD void sync() const {
#ifdef __CUDA_ARCH__
        __syncthreads();
#endif
    }
    /// The block's sum of s, valid on rank 0: warp shuffles, then the warps in order (the
    /// result depends only on the block size).
    EF_HD Sum2 sum(Sum2 s) const {
#ifdef __CUDA_ARCH__
        for (int off = 16; off > 0; off >>= 1) {
            s.a += __shfl_down_sync(0xffffffffu, s.a, off);
            s.b += __shfl_down_sync(0xffffffffu, s.b, off);
        }
        const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
        if (lane == 0) {
            scratch[2 * warp] = s.a;
            scratch[2 * warp + 1] = s.b;
        }
        __syncthreads();
        Sum2 t;
        if (threadIdx.x == 0)
            for (int w = 0; w < Threads / 32; ++w) {
                t.a += scratch[2 * w];
                t.b += scratch[2 * w + 1];
            }
        __syncthreads();
        return t;
#else
        return s;
#endif
    }
    /// Barrier of the cluster's blocks; their shared-memory writes before it are visible to
    /// the others after it.
    EF_HD void cluster_sync() const {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        cooperative_groups::this_cluster().sync();
#elif defined(__CUDA_ARCH__)
        __trap();  // clusters are launched only where the device has them
#endif
    }
    /// `p` (this block's shared memory) in the shared memory of the cluster's block `rank`.
    template <class U>
    EF_HD const U* peer(const U* p, int rank) const {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        return cooperative_groups::this_cluster().map_shared_rank(const_cast<U*>(p), static_cast<unsigned>(rank));
#else
        (void)rank;
        return p;
#endif
    }
};

/// Threads per window block: every thread has a job in every FFT stage. For 128 x 128, 1024
/// threads ran one benchmark batch in 3.27 ms against 4.03 ms with 512 (H100; perf/RESULTS.md at
/// aa7c658), and CudaBlock's loads in flight are tuned for 1024 threads at 64 registers.
template <int N>
constexpr int window_threads() {
    return N == 128 ? 1024 : N == 64 ? 256 : 128;
}
/// Shared memory of a window block: the window, the twiddles, the sum scratch.
template <int N>
constexpr std::size_t window_smem(std::size_t real_bytes) {
    return static_cast<std::size_t>(wfft::Radix<N>::kStored + N) * 2 * real_bytes +
           kBlockSumDoubles * sizeof(double);
}

/// Block b runs f for positions b, b + gridDim.x, ... with its window in shared memory, and
/// F::kScratch values of scratch there too when `scratch` (else f keeps them in global memory).
template <class F, int Threads, bool Clusters = false>
__global__ void __launch_bounds__(Threads) window_kernel(F f, std::int64_t count, Sum2* out, bool scratch) {
    using T = typename F::Real;
    constexpr int N = F::kN;
    extern __shared__ double window_shared[];
    auto* win = reinterpret_cast<Cx<T>*>(window_shared);
    Cx<T>* tw = win + wfft::Radix<N>::kStored;
    const CudaBlock<Threads, Clusters> blk{reinterpret_cast<double*>(tw + N)};
    T* const own = scratch ? reinterpret_cast<T*>(blk.scratch + kBlockSumDoubles) : nullptr;
    for (int i = static_cast<int>(threadIdx.x); i < N; i += static_cast<int>(blockDim.x)) tw[i] = f.twiddles[i];
    __syncthreads();
    for (std::int64_t j = blockIdx.x; j < count; j += gridDim.x) {
        const Sum2 s = f(blk, j, win, tw, own);
        if (out && threadIdx.x == 0) out[j] = s;
    }
}

/// cuFFT entry points per precision (only float is built: the GPU worker runs float32).
template <class T>
struct CufftTraits;
template <>
struct CufftTraits<float> {
    static constexpr cufftType kType = CUFFT_C2C;
    static cufftResult exec(cufftHandle p, Cx<float>* d, int dir) {
        return cufftExecC2C(p, reinterpret_cast<cufftComplex*>(d), reinterpret_cast<cufftComplex*>(d), dir);
    }
};

/**
 * The CUDA backend of PtychoEngine: one device, one stream, grid-stride kernels over the
 * single-source functors, deterministic two-level reductions (their shape from the group size
 * alone), cuFFT plans sharing one work area: the batch's transforms through one plan of a fixed
 * count (fft_batch), the probe's through a plan of K.
 */
template <class T>
class CudaBackend {
   public:
    static constexpr bool kHostMemory = false;
    template <class U>
    using Buffer = DeviceBuffer<U>;
    template <class U>
    using HostBuffer = PinnedBuffer<U>;

    /// On device `o.device`; the [tuning] choices and diagnostics of `o`, decided here once.
    explicit CudaBackend(const ReconWorkerOptions& o)
        : h_(o.h), w_(o.w), device_(o.device), peer_(o.peer_trace), phases_(o.phase_trace) {
        EF_CUDA_CHECK(cudaSetDevice(device_));
        EF_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
        cudaDeviceProp prop{};
        EF_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
        sms_ = prop.multiProcessorCount;
        smem_optin_ = static_cast<int>(prop.sharedMemPerBlockOptin);
        name_ = prop.name;
        defer_ = o.tuning.deferred != TuningSwitch::off;
        window_ = o.tuning.window != TuningSwitch::off;
        window_scratch_ = o.tuning.window_scratch;
        window_clusters_ = o.tuning.window_clusters;
        stream_mode_ = o.stream;
    }
    ~CudaBackend() {
        if (phases_) print_phases();
        if (comm_) nccl::api().comm_destroy(comm_);
        for (auto& [count, plan] : plans_) cufftDestroy(plan);
        for (cudaEvent_t e : events_) cudaEventDestroy(e);
        for (cudaEvent_t e : stamps_) cudaEventDestroy(e);
        for (cudaEvent_t e : stage_ev_)
            if (e) cudaEventDestroy(e);
        for (cudaEvent_t e : queued_)
            if (e) cudaEventDestroy(e);
        if (copy_stream_) cudaStreamDestroy(copy_stream_);
        for (cudaEvent_t e : side_ev_)
            if (e) cudaEventDestroy(e);
        if (side_) cudaStreamDestroy(side_);
        cudaStreamDestroy(stream_);
    }
    CudaBackend(const CudaBackend&) = delete;
    CudaBackend& operator=(const CudaBackend&) = delete;

    const std::string& name() const { return name_; }

    template <class F>
    void for_each(std::int64_t n, const F& f) {
        if (n <= 0) return;
        const std::int64_t blocks = std::min<std::int64_t>((n + kBlock - 1) / kBlock, std::int64_t(1) << 30);
        for_each_kernel<<<static_cast<unsigned>(blocks), kBlock, 0, current()>>>(n, f);
        EF_CUDA_CHECK(cudaGetLastError());
    }

    template <class F>
    void for_each_rows(std::int64_t rows, int cols, const F& f) {
        if (rows <= 0 || cols <= 0) return;
        const dim3 grid(static_cast<unsigned>((cols + kBlock - 1) / kBlock),
                        static_cast<unsigned>(std::min<std::int64_t>(rows, 65535)));
        for_each_rows_kernel<<<grid, kBlock, 0, current()>>>(rows, cols, f);
        EF_CUDA_CHECK(cudaGetLastError());
    }

    /// out[g] = sum over e of f(g, e) (deterministic): in host memory at the next synchronize(),
    /// or, with `out_on_device`, in device memory in stream order.
    template <class F>
    void reduce_groups(std::int64_t groups, std::int64_t size, const F& f, Sum2* out, bool out_on_device = false) {
        if (groups <= 0) return;
        // Parts per group from the group's size alone (at least 8 elements per thread, at most 32
        // parts): never from the number of groups (the batch share) or the device, so that a
        // position's sum has the same bits whatever share of the batch this rank has.
        const std::int64_t parts = std::clamp<std::int64_t>(size / (8 * kBlock), 1, 32);
        const std::int64_t span = (size + parts - 1) / parts;
        if (partial_.size() < static_cast<size_t>(groups * parts)) partial_.resize(static_cast<size_t>(groups * parts));
        const dim3 grid(static_cast<unsigned>(parts), static_cast<unsigned>(groups));
        reduce_groups_kernel<<<grid, kBlock, 0, stream_>>>(size, span, f, partial_.data());
        EF_CUDA_CHECK(cudaGetLastError());
        finish_groups(groups, parts, out, out_on_device);
    }

    /// The probe-gradient spectrum (when want_spec) and the position terms in one pass (one read
    /// of F G_P instead of two); false (nothing done) for an empty batch.
    bool spectrum_and_positions(std::int64_t b, const ProbeGradientSpectrum<T>& spec, bool want_spec,
                                const PositionGradientTerm<T>& pos, Sum2* out, bool out_on_device = false) {
        if (b <= 0) return false;
        const std::int64_t kn = static_cast<std::int64_t>(pos.d.modes) * pos.d.h * pos.d.w;
        const std::int64_t blocks = (kn + kBlock - 1) / kBlock;
        if (partial_.size() < static_cast<size_t>(b * blocks)) partial_.resize(static_cast<size_t>(b * blocks));
        spectrum_positions_kernel<<<static_cast<unsigned>(blocks), kBlock, 0, stream_>>>(spec, want_spec, pos, partial_.data());
        EF_CUDA_CHECK(cudaGetLastError());
        finish_groups(b, blocks, out, out_on_device);
        return true;
    }

    /**
     * Window size of the window-resident passes: square windows of 32, 64 or 128 pixels whose
     * block fits the device's shared memory; 0 (cuFFT and element-wise passes) otherwise or with
     * tuning.window = off.
     */
    int window_size(const PtychoDims& d) {
        if (!window_ || d.h != d.w || !(d.h == 32 || d.h == 64 || d.h == 128)) return 0;
        const std::size_t need = d.h == 128 ? window_smem<128>(sizeof(T)) : d.h == 64 ? window_smem<64>(sizeof(T))
                                                                                      : window_smem<32>(sizeof(T));
        return need <= static_cast<std::size_t>(smem_optin_) ? d.h : 0;
    }
    /// Window blocks that run at once: one per multiprocessor (a window fills its shared memory).
    int parallel_units() const { return sms_; }
    /// One block per position (grid-stride past 65535), results to `out` at the next synchronize()
    /// (or in stream order, with `out_on_device`).
    /// With `clusters` = G > 1 (window_clusters() said yes), the blocks run in clusters of G
    /// consecutive ones and `out` gets the sum of each cluster's results, in block order.
    template <class F>
    void window_pass(const F& f, std::int64_t count, Sum2* out, bool out_on_device = false, int clusters = 1) {
        if (count <= 0) return;
        const WindowLaunch wl = window_launch<F>();
        if (clusters > 1 && (!wl.scratch || count % clusters))
            throw std::logic_error("window pass: clusters need the scratch in shared memory and whole clusters");
        if (out && partial_.size() < static_cast<size_t>(count)) partial_.resize(static_cast<size_t>(count));
        Sum2* partial = out ? partial_.data() : nullptr;
        launch_window<F, window_threads<F::kN>()>(f, count, wl.smem, partial, wl.scratch, clusters);
        if (out) finish_groups(count / clusters, clusters, out, out_on_device);
    }
    /**
     * Whether F's pass can run its mode groups (G of them: 2 or 4) as thread-block clusters,
     * the G blocks of a position sharing their shared memory (WindowForward then adds the
     * groups' intensities itself: no WindowModulus pass). Needs compute capability 9.0, the
     * scratch in shared memory and room for a cluster; tuning.window_clusters = false turns it off.
     */
    template <class F>
    bool window_clusters(int groups) {
        if ((groups != 2 && groups != 4) || !window_clusters_) return false;
        const WindowLaunch wl = window_launch<F>();
        return wl.scratch && cluster_room<F, window_threads<F::kN>()>(groups, wl.smem);
    }

   private:
    struct WindowLaunch {
        std::size_t smem;
        bool scratch;  ///< F::kScratch values in shared memory
    };
    template <class F>
    WindowLaunch window_launch() const {
        constexpr int N = F::kN;
        std::size_t smem = window_smem<N>(sizeof(typename F::Real));
        const std::size_t with_scratch = smem + F::kScratch * sizeof(typename F::Real);
        const bool scratch = F::kScratch > 0 && window_scratch_ && with_scratch <= static_cast<std::size_t>(smem_optin_);
        return {scratch ? with_scratch : smem, scratch};
    }
    /// The kernel with its shared memory size set (once per kernel: the attribute is per device).
    template <class F, int Threads, bool Clusters>
    auto window_fn(std::size_t smem) {
        const auto fn = window_kernel<F, Threads, Clusters>;
        const void* kernel = reinterpret_cast<const void*>(fn);
        if (std::find(window_ready_.begin(), window_ready_.end(), kernel) == window_ready_.end()) {
            EF_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
            window_ready_.push_back(kernel);
        }
        return fn;
    }
    static cudaLaunchConfig_t cluster_config(unsigned grid, int threads, std::size_t smem, cudaStream_t stream,
                                             cudaLaunchAttribute& attr, int clusters) {
        cudaLaunchConfig_t cfg{};
        cfg.gridDim = dim3(grid);
        cfg.blockDim = dim3(static_cast<unsigned>(threads));
        cfg.dynamicSmemBytes = smem;
        cfg.stream = stream;
        attr.id = cudaLaunchAttributeClusterDimension;
        attr.val.clusterDim.x = static_cast<unsigned>(clusters);
        attr.val.clusterDim.y = 1;
        attr.val.clusterDim.z = 1;
        cfg.attrs = &attr;
        cfg.numAttrs = 1;
        return cfg;
    }
    /// Whether clusters of `groups` window blocks fit the device (cached per kernel and size).
    template <class F, int Threads>
    bool cluster_room(int groups, std::size_t smem) {
        const auto fn = window_fn<F, Threads, true>(smem);
        const auto key = std::make_pair(reinterpret_cast<const void*>(fn), groups);
        const auto it = cluster_room_.find(key);
        if (it != cluster_room_.end()) return it->second > 0;
        int major = 0;
        EF_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_));
        int fit = 0;
        if (major >= 9) {
            cudaLaunchAttribute attr{};
            const cudaLaunchConfig_t cfg = cluster_config(static_cast<unsigned>(groups * sms_), Threads, smem, stream_, attr, groups);
            if (cudaOccupancyMaxActiveClusters(&fit, fn, &cfg) != cudaSuccess) {
                cudaGetLastError();
                fit = 0;
            }
        }
        cluster_room_[key] = fit;
        return fit > 0;
    }

    template <class F, int Threads>
    void launch_window(const F& f, std::int64_t count, std::size_t smem, Sum2* partial, bool scratch, int clusters) {
        // whole clusters: block g of a cluster is mode group g of every position it takes
        const auto grid = static_cast<unsigned>(std::min<std::int64_t>(count, 65535 - 65535 % std::max(clusters, 1)));
        if (clusters > 1) {
            const auto fn = window_fn<F, Threads, true>(smem);
            cudaLaunchAttribute attr{};
            const cudaLaunchConfig_t cfg = cluster_config(grid, Threads, smem, stream_, attr, clusters);
            EF_CUDA_CHECK(cudaLaunchKernelEx(&cfg, fn, f, count, partial, scratch));
        } else {
            window_fn<F, Threads, false>(smem)<<<grid, Threads, smem, stream_>>>(f, count, partial, scratch);
        }
        EF_CUDA_CHECK(cudaGetLastError());
    }

   public:
    /// Sums partial[g * parts + p] over p (ascending) per group on the device, copies the sums
    /// into pinned memory and hands them to `out` at the next synchronize(): no wait here.
    /// With `out_on_device`, the sums go straight to `out` in device memory.
    void finish_groups(std::int64_t groups, std::int64_t parts, Sum2* out, bool out_on_device) {
        if (out_on_device) {
            sum_partials_kernel<<<static_cast<unsigned>(groups), kBlock, 0, stream_>>>(parts, partial_.data(), out);
            EF_CUDA_CHECK(cudaGetLastError());
            return;
        }
        const size_t slot = pending_.size();
        if (group_sums_.size() <= slot) {
            group_sums_.resize(slot + 1);
            host_sums_.resize(slot + 1);
        }
        group_sums_[slot].resize(std::max(group_sums_[slot].size(), static_cast<size_t>(groups)));
        if (host_sums_[slot].size() < static_cast<size_t>(groups)) host_sums_[slot].resize(static_cast<size_t>(groups));
        sum_partials_kernel<<<static_cast<unsigned>(groups), kBlock, 0, stream_>>>(parts, partial_.data(),
                                                                                  group_sums_[slot].data());
        EF_CUDA_CHECK(cudaGetLastError());
        EF_CUDA_CHECK(cudaMemcpyAsync(host_sums_[slot].data(), group_sums_[slot].data(), static_cast<size_t>(groups) * sizeof(Sum2),
                                      cudaMemcpyDeviceToHost, stream_));
        pending_.push_back({out, static_cast<size_t>(groups)});
        // partial_ is reused by the next reduction on the same stream: stream order keeps it safe.
    }

    /// Phase marks: GPU time between consecutive marks (events, read at each synchronize) goes
    /// to tally() under the first one's name ("" ends a phase), with the counts added meanwhile
    /// and, for the trace, the interval; the phase trace (EF_RECON_PHASES=1) also prints the
    /// sums when the worker ends.
    void mark(const char* name) {
        if (marks_.size() == events_.size()) {
            cudaEvent_t e;
            EF_CUDA_CHECK(cudaEventCreate(&e));
            events_.push_back(e);
        }
        EF_CUDA_CHECK(cudaEventRecord(events_[marks_.size()], stream_));
        marks_.push_back(name);
        mark_counts_.resize(marks_.size());
        mark_counts_.back() = {0.0, 0.0};
    }
    /// FLOPs and bytes of the open phase (the roofline's counts).
    void count(double flops, double bytes) {
        if (marks_.empty()) return;
        mark_counts_.back().first += flops;
        mark_counts_.back().second += bytes;
    }
    /// The FFTs of the open phase: 5 n log2 n FLOPs, the windows read and written once.
    void count_fft(std::int64_t count) {
        const double n = static_cast<double>(h_) * w_, c = static_cast<double>(count);
        this->count(fft_flops(n, c), 2.0 * sizeof(Cx<T>) * n * c);
    }
    const KernelTally& tally() const { return tally_; }

    void fft(Cx<T>* data, std::int64_t count, bool inverse) {
        if (count <= 0) return;
        EF_CUFFT_CHECK(CufftTraits<T>::exec(plan_for(count), data, inverse ? CUFFT_INVERSE : CUFFT_FORWARD));
        count_fft(count);
    }

    /**
     * The batch's transforms (b x K windows, b this rank's share): cuFFT may choose its
     * algorithm, and so its rounding, by the batch count of a plan (bit-for-bit reproducibility
     * is promised for one plan configuration only), so a plan per count would make the bits of
     * every window depend on the share (seen for 48, 80 and 96 pixels: 1 GPU against 2, and
     * throughput balancing moving shares). Instead every batch transform runs one plan of a
     * fixed count (fft_chunk(): from the window size only) over whole chunks; the buffers hold
     * fft_rows(count) windows, and the windows past `count` are computed and ignored.
     */
    void fft_batch(Cx<T>* data, std::int64_t count, bool inverse) {
        if (count <= 0) return;
        const std::int64_t chunk = fft_chunk();
        const cufftHandle plan = plan_for(chunk);
        const std::int64_t n = static_cast<std::int64_t>(h_) * w_;
        for (std::int64_t c = 0; c < count; c += chunk)
            EF_CUFFT_CHECK(CufftTraits<T>::exec(plan, data + c * n, inverse ? CUFFT_INVERSE : CUFFT_FORWARD));
        count_fft(fft_rows(count));
    }
    /// Windows a batch buffer of `count` windows holds for fft_batch(): whole chunks.
    std::int64_t fft_rows(std::int64_t count) const {
        const std::int64_t chunk = fft_chunk();
        return (count + chunk - 1) / chunk * chunk;
    }
    /// The fixed count of the batch plans: the power of two of windows nearest above 2^20
    /// points (8 MiB of complex floats: large enough that a launch is not bound by its
    /// latency), a function of the window size alone. 128 x 128: 64 windows; 80 x 80: 256.
    std::int64_t fft_chunk() const {
        const std::int64_t n = static_cast<std::int64_t>(h_) * w_;
        std::int64_t c = 1;
        while (c * n < (std::int64_t(1) << 20)) c *= 2;
        return c;
    }

    template <class U>
    void upload(U* dst, const U* src, std::size_t n) {
        if (n) EF_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(U), cudaMemcpyHostToDevice, stream_));
    }
    template <class U>
    void download(U* dst, const U* src, std::size_t n) {
        if (n) EF_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(U), cudaMemcpyDeviceToHost, stream_));
        synchronize();
    }
    /**
     * Copies `bytes` to device memory without waiting: through one of kStageSlots page-locked
     * blocks, reused once the copy that last used it has run (so the host can prepare batches
     * ahead of the device, kStageSlots - 1 at most), on a copy stream, so that the copy runs
     * beside the work already queued. It waits for the work queued before the previous call
     * only, and the work queued after this call waits for it: `dst` must not be read by work
     * queued after the previous call (the engine alternates two staging areas).
     */
    void upload_staged(void* dst, const void* src, std::size_t bytes) {
        if (!bytes) return;
        if (!copy_stream_) {
            EF_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
            for (cudaEvent_t& e : queued_) EF_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        }
        const unsigned s = stage_next_ % kStageSlots;
        if (!stage_ev_[s]) EF_CUDA_CHECK(cudaEventCreateWithFlags(&stage_ev_[s], cudaEventDisableTiming));
        else EF_CUDA_CHECK(cudaEventSynchronize(stage_ev_[s]));
        if (stage_pin_[s].size() < bytes) stage_pin_[s].resize(bytes);
        std::memcpy(stage_pin_[s].data(), src, bytes);
        if (stage_next_) EF_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, queued_[(stage_next_ - 1) % 2], 0));
        EF_CUDA_CHECK(cudaEventRecord(queued_[stage_next_ % 2], stream_));
        EF_CUDA_CHECK(cudaMemcpyAsync(dst, stage_pin_[s].data(), bytes, cudaMemcpyHostToDevice, copy_stream_));
        EF_CUDA_CHECK(cudaEventRecord(stage_ev_[s], copy_stream_));
        EF_CUDA_CHECK(cudaStreamWaitEvent(stream_, stage_ev_[s], 0));
        ++stage_next_;
    }
    /**
     * for_each() and for_each_rows() between side_begin() and side_end() run on a second stream,
     * after the side's earlier work and (with `after_main`) after the work queued so far, beside
     * what is queued next; side_join() makes later work wait for it.
     */
    void side_begin(bool after_main = true) {
        ensure_side();
        if (after_main) {
            EF_CUDA_CHECK(cudaEventRecord(side_ev_[0], stream_));
            EF_CUDA_CHECK(cudaStreamWaitEvent(side_, side_ev_[0], 0));
        }
        side_on_ = true;
    }
    void side_end() {
        EF_CUDA_CHECK(cudaEventRecord(side_ev_[1], side_));
        side_on_ = false;
    }
    /// The stream launches go to: the side stream between side_begin() and side_end().
    cudaStream_t current() const { return side_on_ ? side_ : stream_; }
    void ensure_side() {
        if (side_) return;
        EF_CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
        for (cudaEvent_t& e : side_ev_) EF_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    }
    void side_join() { EF_CUDA_CHECK(cudaStreamWaitEvent(stream_, side_ev_[1], 0)); }
    /// Deferred steps (PtychoEngine::begin_deferred) unless tuning.deferred = off.
    bool defer_steps() const { return defer_; }
    /// Time stamp i on the stream (an event, read by stamp_seconds()).
    void stamp(std::size_t i) {
        while (stamps_.size() <= i) {
            cudaEvent_t e;
            EF_CUDA_CHECK(cudaEventCreate(&e));
            stamps_.push_back(e);
        }
        EF_CUDA_CHECK(cudaEventRecord(stamps_[i], stream_));
    }
    /// Seconds of device time from stamp i to stamp j (waits for j).
    double stamp_seconds(std::size_t i, std::size_t j) {
        EF_CUDA_CHECK(cudaEventSynchronize(stamps_.at(j)));
        float ms = 0;
        EF_CUDA_CHECK(cudaEventElapsedTime(&ms, stamps_.at(i), stamps_.at(j)));
        return 1e-3 * static_cast<double>(ms);
    }

    /// Waits for the stream; hands over pending reduction results and times the marked phases.
    void synchronize() {
        if (!marks_.empty()) mark("");
        if (side_) EF_CUDA_CHECK(cudaStreamSynchronize(side_));
        EF_CUDA_CHECK(cudaStreamSynchronize(stream_));
        pattern_stream_.collect();
        for (size_t i = 0; i < pending_.size(); ++i)
            std::copy(host_sums_[i].data(), host_sums_[i].data() + pending_[i].second, pending_[i].first);
        pending_.clear();
        if (marks_.size() > 1) tally_phases();
        marks_.clear();
    }

    // ---- streamed patterns (run.stream; kernels/cuda/pattern_stream.cuh) ------------------------
    /**
     * Whether the rank's patterns (pattern_bytes) are streamed per batch from page-locked host
     * memory instead of kept in device memory: run.stream = on or off, or (auto) whether they,
     * a batch's work space (batch_bytes, PtychoEngine::batch_bytes) and a margin (5 % of the
     * device, at least 512 MiB) exceed the device's free memory, counting the resident share
     * this replaces (held_bytes). The model is allocated by now, so free memory accounts for it.
     * stream_note() says what was decided and why.
     */
    bool stream_patterns(std::size_t pattern_bytes, std::size_t batch_bytes, std::size_t held_bytes) {
        const auto gib = [](double bytes) { return bytes / 1073741824.0; };
        char why[320];
        stream_note_.clear();
        if (stream_mode_ == TuningSwitch::off) return false;
        if (stream_mode_ == TuningSwitch::on) {
            std::snprintf(why, sizeof why, "run.stream = on (%.2f GiB of patterns)", gib(static_cast<double>(pattern_bytes)));
        } else {
            std::size_t free = 0, total = 0;
            EF_CUDA_CHECK(cudaSetDevice(device_));
            EF_CUDA_CHECK(cudaMemGetInfo(&free, &total));
            const std::size_t margin = std::max<std::size_t>(std::size_t(512) << 20, total / 20);
            if (pattern_bytes + batch_bytes + margin <= free + held_bytes) return false;
            std::snprintf(why, sizeof why,
                          "run.stream = auto: %.2f GiB of patterns + %.2f GiB of batch work space + a %.2f GiB margin "
                          "> %.2f GiB free on the device",
                          gib(static_cast<double>(pattern_bytes)), gib(static_cast<double>(batch_bytes)),
                          gib(static_cast<double>(margin)), gib(static_cast<double>(free + held_bytes)));
        }
        stream_note_ = "gpu " + std::to_string(device_) + ": patterns streamed per batch from page-locked host memory, " +
                       "uploads overlapped with compute (" + why + ")";
        return true;
    }
    /// Page-locked room for the share (count floats), which the engine fills.
    float* stream_host(std::size_t count) {
        synchronize();
        return pattern_stream_.host(count);
    }
    /// Queues the upload of the batch's rows (n floats each) on the copy stream; its device slot.
    const float* stream_batch(const std::int64_t* rows, std::int64_t b, std::int64_t n) {
        return pattern_stream_.queue(stream_, rows, b, n);
    }
    /// The compute stream waits for the last stream_batch()'s upload.
    void stream_wait() {
        mark("stream wait");
        pattern_stream_.wait(stream_);
    }
    const std::string& stream_note() const { return stream_note_; }
    ReconStreamTiming stream_timing() {
        synchronize();
        ReconStreamTiming t;
        t.batches = pattern_stream_.batches();
        t.bytes = pattern_stream_.bytes();
        t.upload = pattern_stream_.upload_seconds();
        t.wait = pattern_stream_.wait_seconds();
        return t;
    }

    std::vector<char> device_sum_id() {
        nccl::Api& a = nccl::api();
        if (!a.lib) return {};
        nccl::UniqueId id{};
        if (a.get_unique_id(&id) != 0) return {};
        return std::vector<char>(id.internal, id.internal + sizeof id.internal);
    }
    bool device_sum_init(const std::vector<char>& id, int ranks, int rank, std::string& why) {
        nccl::Api& a = nccl::api();
        if (!a.lib) {
            why = a.error;
            return false;
        }
        if (id.size() != sizeof(nccl::UniqueId)) {
            why = "no NCCL id from rank 0";
            return false;
        }
        nccl::UniqueId uid{};
        std::memcpy(uid.internal, id.data(), sizeof uid.internal);
        EF_CUDA_CHECK(cudaSetDevice(device_));
        const nccl::Result r = a.comm_init_rank(&comm_, ranks, uid, rank);
        if (r != 0) {
            why = nccl::describe(r);
            comm_ = nullptr;
            return false;
        }
        ranks_ = ranks;
        rank_ = rank;
        return true;
    }
    /**
     * After device_sum_init(), on every rank alike: sums of `grad` (the start of its allocation,
     * `count` doubles) by direct loads between the GPUs (peer::Sum) instead of NCCL, where every
     * rank can open the others' memory; false, with why, when they stay with NCCL.
     */
    bool peer_sum_init(double* grad, std::int64_t count, std::string& why) {
        nccl::Api& a = nccl::api();
        if (!comm_ || !a.all_gather) {
            why = "this NCCL has no ncclAllGather to exchange the memory handles";
            return false;
        }
        DeviceBuffer<unsigned char> dev;
        auto gather = [&](const void* mine, void* all, std::size_t bytes) {
            dev.resize(bytes * static_cast<size_t>(ranks_));
            EF_CUDA_CHECK(cudaMemcpyAsync(dev.data() + bytes * static_cast<size_t>(rank_), mine, bytes,
                                          cudaMemcpyHostToDevice, stream_));
            const nccl::Result r = a.all_gather(dev.data() + bytes * static_cast<size_t>(rank_), dev.data(), bytes,
                                                nccl::kInt8, comm_, stream_);
            if (r != 0) throw runtime_error("ncclAllGather of the peer-sum handles failed: " + nccl::describe(r));
            download(static_cast<unsigned char*>(all), dev.data(), bytes * static_cast<size_t>(ranks_));
        };
        EF_CUDA_CHECK(cudaSetDevice(device_));
        return peer_.init(grad, count, ranks_, rank_, gather, why);
    }
    /**
     * In-place sum over ranks of `count` doubles in device memory (and of `extra_count` more at
     * `extra`, in the same NCCL group), started on this worker's stream (the update that follows
     * is ordered after it; synchronize() waits for it). With peer sums and `split` > 0, the
     * first `split` doubles (the object's part, made on the side stream) are summed on the side
     * stream, beside the rest and the loss terms on this one; side_join() waits for them.
     */
    void device_sum(double* data, std::size_t count, double* extra = nullptr, std::size_t extra_count = 0,
                    std::size_t split = 0) {
        // Every use of the summed gradients rounds them to T first (the Adam steps, the probe
        // spectrum's inverse FFT): for float, peer sums may round them where they are made.
        constexpr bool kNarrow = sizeof(T) == sizeof(float);
        const auto n = static_cast<std::int64_t>(count), extra_n = static_cast<std::int64_t>(extra ? extra_count : 0);
        const bool peer = data == peer_.data() && peer_.fits(0, n, extra_n);
        // Two sums at once where the object's part is on the side stream (every rank decides alike).
        const auto part = static_cast<std::int64_t>(split);
        const bool two = peer && part > 0 && part < n && peer_.split_blocks() >= 16 && peer_.fits(part, n - part, 0);
        const std::int64_t at = two ? part : 0;
        if (split > 0 && at == 0) {  // the side stream's part, then all of it here
            ensure_side();
            EF_CUDA_CHECK(cudaEventRecord(side_ev_[1], side_));
            side_join();
        }
        if (peer) {
            mark("peer sum");
            if (at > 0) {
                peer_.run(0, 0, at, nullptr, 0, side_, peer_.split_blocks(), kNarrow);
                EF_CUDA_CHECK(cudaGetLastError());
                EF_CUDA_CHECK(cudaEventRecord(side_ev_[1], side_));
            }
            peer_.run(1, at, n - at, extra, extra_n, stream_, at > 0 ? peer_.split_blocks() : peer_.blocks(), kNarrow);
            EF_CUDA_CHECK(cudaGetLastError());
            return;
        }
        mark("nccl allreduce");
        nccl::Api& a = nccl::api();
        const bool group = extra_count && a.group_start;
        nccl::Result r = group ? a.group_start() : 0;
        if (r == 0) r = a.all_reduce(data, data, count, nccl::kFloat64, nccl::kSum, comm_, stream_);
        if (r == 0 && extra_count) r = a.all_reduce(extra, extra, extra_count, nccl::kFloat64, nccl::kSum, comm_, stream_);
        if (group) {
            const nccl::Result e = a.group_end();
            if (r == 0) r = e;
        }
        if (r != 0) throw runtime_error("ncclAllReduce of the gradients failed: " + nccl::describe(r));
    }

   private:
    /// The marked phases since the last synchronize (the stream is idle now) into tally_ and
    /// phase_ms_; each phase's interval on the host's clock from its length and the lengths
    /// after it (the last mark completed just before now).
    void tally_phases() {
        const KernelTally::Clock::time_point now = KernelTally::Clock::now();
        std::vector<float> ms(marks_.size() - 1, 0.0f);
        for (size_t i = 0; i + 1 < marks_.size(); ++i)
            EF_CUDA_CHECK(cudaEventElapsedTime(&ms[i], events_[i], events_[i + 1]));
        double after = 0;  // seconds from the end of phase i to the last mark
        for (size_t i = ms.size(); i-- > 0;) {
            const double sec = 1e-3 * ms[i];
            if (!marks_[i].empty()) {
                tally_.add(marks_[i], sec, mark_counts_[i].first, mark_counts_[i].second);
                tally_.interval_ending(marks_[i], now - std::chrono::duration_cast<KernelTally::Clock::duration>(
                                                           std::chrono::duration<double>(after)), sec);
                auto it = std::find_if(phase_ms_.begin(), phase_ms_.end(), [&](const auto& p) { return p.first == marks_[i]; });
                if (it == phase_ms_.end()) phase_ms_.push_back({marks_[i], ms[i]});
                else it->second += ms[i];
            }
            after += sec;
        }
    }

    void print_phases() const {
        double total = 0;
        for (const auto& p : phase_ms_) total += p.second;
        std::fprintf(stderr, "gpu phases (EF_RECON_PHASES, GPU time between marks):\n");
        for (const auto& p : phase_ms_)
            std::fprintf(stderr, "  %-22s %10.1f ms  %5.1f%%\n", p.first.c_str(), p.second, total > 0 ? 100.0 * p.second / total : 0.0);
        std::fprintf(stderr, "  %-22s %10.1f ms\n", "total", total);
    }

    cufftHandle plan_for(std::int64_t count) {
        const auto it = plans_.find(count);
        if (it != plans_.end()) return it->second;
        cufftHandle plan;
        EF_CUFFT_CHECK(cufftCreate(&plan));
        EF_CUFFT_CHECK(cufftSetAutoAllocation(plan, 0));
        int dims[2] = {h_, w_};
        const int dist = h_ * w_;
        size_t work = 0;
        EF_CUFFT_CHECK(cufftMakePlanMany(plan, 2, dims, nullptr, 1, dist, nullptr, 1, dist, CufftTraits<T>::kType,
                                         static_cast<int>(count), &work));
        EF_CUFFT_CHECK(cufftSetStream(plan, stream_));
        plans_[count] = plan;
        if (work > work_.size()) {
            synchronize();
            work_.resize(work);
            for (auto& [c, p] : plans_) EF_CUFFT_CHECK(cufftSetWorkArea(p, work_.data()));
        } else {
            EF_CUFFT_CHECK(cufftSetWorkArea(plan, work_.data()));
        }
        return plan;
    }

    int h_, w_, device_;
    peer::Sum peer_;            // sums by direct loads (peer_sum_init)
    bool phases_;               // the phase trace (EF_RECON_PHASES): mark() times phases
    // [tuning], decided in the constructor
    bool defer_ = true;            // deferred steps
    bool window_ = true;           // window-resident passes where the window fits
    bool window_scratch_ = true;   // their scratch in shared memory where it fits
    bool window_clusters_ = true;  // mode groups as thread-block clusters where they fit
    TuningSwitch stream_mode_ = TuningSwitch::automatic;  // run.stream
    PatternStream pattern_stream_;  // streamed patterns (stream_patterns())
    std::string stream_note_;
    int sms_ = 1;
    int smem_optin_ = 0;  // shared memory a block may opt in to
    std::string name_;
    cudaStream_t stream_ = nullptr;
    nccl::Comm comm_ = nullptr;
    int ranks_ = 1, rank_ = 0;  // of comm_
    std::map<std::int64_t, cufftHandle> plans_;
    DeviceBuffer<unsigned char> work_;
    DeviceBuffer<Sum2> partial_;
    std::vector<DeviceBuffer<Sum2>> group_sums_;       // per pending reduction
    std::vector<PinnedBuffer<Sum2>> host_sums_;        // their host copies
    std::vector<std::pair<Sum2*, size_t>> pending_;    // where each goes at synchronize()
    std::vector<const void*> window_ready_;  // window kernels given their shared memory size
    std::map<std::pair<const void*, int>, int> cluster_room_;  // window_clusters(): clusters that fit
    std::vector<cudaEvent_t> events_;
    std::vector<std::string> marks_;
    std::vector<std::pair<double, double>> mark_counts_;  // FLOPs and bytes counted in each marked phase
    KernelTally tally_;                                   // the marked phases (tally())
    std::vector<cudaEvent_t> stamps_;         // stamp()
    static constexpr unsigned kStageSlots = 4;  // upload_staged()
    PinnedBuffer<unsigned char> stage_pin_[kStageSlots];
    cudaEvent_t stage_ev_[kStageSlots] = {};
    unsigned stage_next_ = 0;
    cudaStream_t copy_stream_ = nullptr;  // upload_staged()'s copies
    cudaStream_t side_ = nullptr;         // side_begin() .. side_end(), the split sum's object part
    cudaEvent_t side_ev_[2] = {};         // its start and its end
    bool side_on_ = false;
    cudaEvent_t queued_[2] = {};          // the work queued before each of the last two calls
    std::vector<std::pair<std::string, double>> phase_ms_;
};

}  // namespace

std::unique_ptr<ReconWorker> make_cuda_recon_worker(const ReconWorkerOptions& o) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        cudaGetLastError();
        throw usage_error("run.workers = gpu: no CUDA device is visible to this rank");
    }
    if (o.device < 0 || o.device >= count)
        throw usage_error("run.workers = gpu: device " + std::to_string(o.device) + " does not exist (" +
                          std::to_string(count) + " visible)");
    auto be = std::make_unique<CudaBackend<float>>(o);
    const std::string what = "gpu " + std::to_string(o.device) + ": " + be->name() + ", float32, cuFFT";
    return std::make_unique<EngineWorker<float, CudaBackend<float>>>(WorkerKind::gpu, what, std::move(be), o);
}

}  // namespace ef::recon

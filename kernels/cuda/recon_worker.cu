// SPDX-License-Identifier: MIT
// The CUDA reconstruction worker: PtychoEngine over CudaBackend. Only memory, launches,
// reductions and cuFFT plans are here; every formula is a functor of kernels/recon/ptycho_math.hpp,
// the same code the CPU worker runs.
#include <cuda_runtime.h>
#include <cufft.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ensemblefit/core/error.hpp>
#include <ensemblefit/worker/worker.hpp>

#include "kernels/recon/engine_worker.hpp"
#include "kernels/recon/ptycho_math.hpp"
#include "kernels/recon/recon_backends.hpp"

namespace ef::recon {

namespace {

[[noreturn]] void cuda_fail(const char* call, const char* what, const char* file, int line) {
    throw runtime_error(std::string("CUDA call failed: ") + call + ": " + what + " (" + file + ":" +
                        std::to_string(line) + ")");
}

#define EF_CUDA_CHECK(call)                                                                         \
    do {                                                                                            \
        const cudaError_t ef_cuda_rc = (call);                                                      \
        if (ef_cuda_rc != cudaSuccess) cuda_fail(#call, cudaGetErrorString(ef_cuda_rc), __FILE__, __LINE__); \
    } while (0)

#define EF_CUFFT_CHECK(call)                                                                        \
    do {                                                                                            \
        const cufftResult ef_cufft_rc = (call);                                                     \
        if (ef_cufft_rc != CUFFT_SUCCESS)                                                           \
            cuda_fail(#call, ("cufftResult " + std::to_string(static_cast<int>(ef_cufft_rc))).c_str(), __FILE__, __LINE__); \
    } while (0)

/// Owns `size` elements of U in device memory, zeroed on allocation.
template <class U>
class DeviceBuffer {
   public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(std::size_t n) { resize(n); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
    ~DeviceBuffer() {
        if (p_) cudaFree(p_);
    }
    void resize(std::size_t n) {
        if (n == n_) return;
        if (p_) EF_CUDA_CHECK(cudaFree(p_));
        p_ = nullptr;
        n_ = n;
        if (n == 0) return;
        EF_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(U)));
        EF_CUDA_CHECK(cudaMemset(p_, 0, n * sizeof(U)));
    }
    U* data() { return p_; }
    const U* data() const { return p_; }
    std::size_t size() const { return n_; }

   private:
    U* p_ = nullptr;
    std::size_t n_ = 0;
};

/// Page-locked host memory (the gradient buffer crosses PCIe every step of a multi-rank run).
template <class U>
class PinnedBuffer {
   public:
    PinnedBuffer() = default;
    PinnedBuffer(const PinnedBuffer&) = delete;
    PinnedBuffer& operator=(const PinnedBuffer&) = delete;
    ~PinnedBuffer() {
        if (p_) cudaFreeHost(p_);
    }
    void resize(std::size_t n) {
        if (n == n_) return;
        if (p_) EF_CUDA_CHECK(cudaFreeHost(p_));
        p_ = nullptr;
        n_ = n;
        if (n) {
            EF_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&p_), n * sizeof(U)));
            std::fill(p_, p_ + n, U{});
        }
    }
    U* data() { return p_; }
    std::size_t size() const { return n_; }

   private:
    U* p_ = nullptr;
    std::size_t n_ = 0;
};

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
constexpr int kFloat64 = 8;
constexpr int kSum = 0;

struct Api {
    void* lib = nullptr;
    Result (*get_unique_id)(UniqueId*) = nullptr;
    Result (*comm_init_rank)(Comm*, int, UniqueId, int) = nullptr;
    Result (*all_reduce)(const void*, void*, size_t, int, int, Comm, cudaStream_t) = nullptr;
    Result (*comm_destroy)(Comm) = nullptr;
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
        x.comm_destroy = reinterpret_cast<Result (*)(Comm)>(dlsym(x.lib, "ncclCommDestroy"));
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

/**
 * Block (p, g) sums elements [p * span, (p + 1) * span) of group g and writes partial
 * g * parts + p. Thread t takes every blockDim-th element from t, then a fixed shared-memory
 * tree: the result depends only on the launch shape, never on timing (no atomics).
 */
template <class F>
__global__ void reduce_groups_kernel(std::int64_t size, std::int64_t span, F f, Sum2* partial) {
    __shared__ double sa[kBlock];
    __shared__ double sb[kBlock];
    const std::int64_t g = blockIdx.y;
    const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x) * span;
    const std::int64_t end = begin + span < size ? begin + span : size;
    Sum2 s;
    for (std::int64_t e = begin + threadIdx.x; e < end; e += blockDim.x) s += f(g, e);
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
    if (threadIdx.x == 0) {
        Sum2 out;
        out.a = sa[0];
        out.b = sb[0];
        partial[g * gridDim.x + blockIdx.x] = out;
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
 * single-source functors, deterministic two-level reductions, cuFFT plans per batch count
 * sharing one work area.
 */
template <class T>
class CudaBackend {
   public:
    static constexpr bool kHostMemory = false;
    template <class U>
    using Buffer = DeviceBuffer<U>;
    template <class U>
    using HostBuffer = PinnedBuffer<U>;

    CudaBackend(int h, int w, int device) : h_(h), w_(w), device_(device) {
        EF_CUDA_CHECK(cudaSetDevice(device));
        EF_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
        cudaDeviceProp prop{};
        EF_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
        sms_ = prop.multiProcessorCount;
        name_ = prop.name;
    }
    ~CudaBackend() {
        if (comm_) nccl::api().comm_destroy(comm_);
        for (auto& [count, plan] : plans_) cufftDestroy(plan);
        cudaStreamDestroy(stream_);
    }
    CudaBackend(const CudaBackend&) = delete;
    CudaBackend& operator=(const CudaBackend&) = delete;

    const std::string& name() const { return name_; }

    template <class F>
    void for_each(std::int64_t n, const F& f) {
        if (n <= 0) return;
        const std::int64_t blocks = std::min<std::int64_t>((n + kBlock - 1) / kBlock, std::int64_t(1) << 30);
        for_each_kernel<<<static_cast<unsigned>(blocks), kBlock, 0, stream_>>>(n, f);
        EF_CUDA_CHECK(cudaGetLastError());
    }

    template <class F>
    void for_each_rows(std::int64_t rows, int cols, const F& f) {
        if (rows <= 0 || cols <= 0) return;
        const dim3 grid(static_cast<unsigned>((cols + kBlock - 1) / kBlock),
                        static_cast<unsigned>(std::min<std::int64_t>(rows, 65535)));
        for_each_rows_kernel<<<grid, kBlock, 0, stream_>>>(rows, cols, f);
        EF_CUDA_CHECK(cudaGetLastError());
    }

    template <class F>
    void reduce_groups(std::int64_t groups, std::int64_t size, const F& f, Sum2* out) {
        if (groups <= 0) return;
        // Enough blocks to fill the device (4 per SM), none smaller than 8 elements per thread.
        std::int64_t parts = std::max<std::int64_t>(1, (4 * sms_ + groups - 1) / groups);
        parts = std::min<std::int64_t>(parts, std::max<std::int64_t>(1, size / (8 * kBlock)));
        const std::int64_t span = (size + parts - 1) / parts;
        if (partial_.size() < static_cast<size_t>(groups * parts)) partial_.resize(static_cast<size_t>(groups * parts));
        const dim3 grid(static_cast<unsigned>(parts), static_cast<unsigned>(groups));
        reduce_groups_kernel<<<grid, kBlock, 0, stream_>>>(size, span, f, partial_.data());
        EF_CUDA_CHECK(cudaGetLastError());
        host_partial_.resize(static_cast<size_t>(groups * parts));
        download(host_partial_.data(), partial_.data(), host_partial_.size());
        for (std::int64_t g = 0; g < groups; ++g) {
            Sum2 s;
            for (std::int64_t p = 0; p < parts; ++p) s += host_partial_[static_cast<size_t>(g * parts + p)];
            out[g] = s;
        }
    }

    void fft(Cx<T>* data, std::int64_t count, bool inverse) {
        if (count <= 0) return;
        EF_CUFFT_CHECK(CufftTraits<T>::exec(plan_for(count), data, inverse ? CUFFT_INVERSE : CUFFT_FORWARD));
    }

    template <class U>
    void upload(U* dst, const U* src, std::size_t n) {
        if (n) EF_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(U), cudaMemcpyHostToDevice, stream_));
    }
    template <class U>
    void download(U* dst, const U* src, std::size_t n) {
        if (n) EF_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(U), cudaMemcpyDeviceToHost, stream_));
        EF_CUDA_CHECK(cudaStreamSynchronize(stream_));
    }
    void synchronize() { EF_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

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
        return true;
    }
    /// In-place sum over ranks of `count` doubles in device memory, on this worker's stream;
    /// returns when it is done (the update that follows reads the sum).
    void device_sum(double* data, std::size_t count) {
        const nccl::Result r = nccl::api().all_reduce(data, data, count, nccl::kFloat64, nccl::kSum, comm_, stream_);
        if (r != 0) throw runtime_error("ncclAllReduce of the gradients failed: " + nccl::describe(r));
        synchronize();
    }

   private:
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
    int sms_ = 1;
    std::string name_;
    cudaStream_t stream_ = nullptr;
    nccl::Comm comm_ = nullptr;
    std::map<std::int64_t, cufftHandle> plans_;
    DeviceBuffer<unsigned char> work_;
    DeviceBuffer<Sum2> partial_;
    std::vector<Sum2> host_partial_;
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
    auto be = std::make_unique<CudaBackend<float>>(o.h, o.w, o.device);
    const std::string what = "gpu " + std::to_string(o.device) + ": " + be->name() + ", float32, cuFFT";
    return std::make_unique<EngineWorker<float, CudaBackend<float>>>(WorkerKind::gpu, what, std::move(be), o);
}

}  // namespace ef::recon

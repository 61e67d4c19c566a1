// SPDX-License-Identifier: MIT
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>

#include <ensemblefit/core/error.hpp>

namespace ef::cuda {

/// Throws for a failed CUDA (or CUDA library) call: the call, what the library said and the
/// source location. EF_CUDA_CHECK and EF_CUFFT_CHECK end here. `code` says whose failure it is
/// (docs/architecture.md, "Errors and exit codes"): 1 (a bug) unless the caller knows better.
[[noreturn]] inline void fail(const char* call, const std::string& what, const char* file, int line,
                              ::ef::ExitCode code = ::ef::ExitCode::runtime) {
    throw ::ef::Error(code, std::string("CUDA call failed: ") + call + ": " + what + " (" + file + ":" +
                                std::to_string(line) + ")");
}

/// Whose failure a CUDA error is: the device's memory ran out (3, like host memory), the device
/// or its driver failed or went away (4: the rank lost its device, like a rank lost), the
/// program was not built for this device or driver (2: a set-up error, rebuild or reconfigure);
/// anything else (an illegal address, a launch failure) is a bug (1).
inline ::ef::ExitCode exit_code_of(cudaError_t rc) {
    switch (rc) {
        case cudaErrorMemoryAllocation:
            return ::ef::ExitCode::data;
        case cudaErrorECCUncorrectable:
        case cudaErrorNvlinkUncorrectable:
        case cudaErrorHardwareStackError:
        case cudaErrorLaunchTimeout:
        case cudaErrorDevicesUnavailable:
        case cudaErrorNoDevice:
        case cudaErrorDeviceUninitialized:
        case cudaErrorSystemNotReady:
            return ::ef::ExitCode::lost;
        case cudaErrorNoKernelImageForDevice:
        case cudaErrorUnsupportedPtxVersion:
        case cudaErrorInsufficientDriver:
        case cudaErrorSystemDriverMismatch:
            return ::ef::ExitCode::usage;
        default:
            return ::ef::ExitCode::runtime;
    }
}

}  // namespace ef::cuda

/// Every CUDA runtime call goes through this: a failure throws with the call, the CUDA error
/// string and the source location.
#define EF_CUDA_CHECK(call)                                                                        \
    do {                                                                                           \
        const cudaError_t ef_cuda_rc = (call);                                                     \
        if (ef_cuda_rc != cudaSuccess)                                                             \
            ::ef::cuda::fail(#call, cudaGetErrorString(ef_cuda_rc), __FILE__, __LINE__,            \
                             ::ef::cuda::exit_code_of(ef_cuda_rc));                                \
    } while (0)

/// The same for cuFFT calls (the file that uses it includes cufft.h).
#define EF_CUFFT_CHECK(call)                                                                       \
    do {                                                                                           \
        const cufftResult ef_cufft_rc = (call);                                                    \
        if (ef_cufft_rc != CUFFT_SUCCESS)                                                          \
            ::ef::cuda::fail(#call, "cufftResult " + std::to_string(static_cast<int>(ef_cufft_rc)), \
                             __FILE__, __LINE__);                                                  \
    } while (0)

namespace ef::cuda {

/**
 * Owns device memory for size() values of T; no naked cudaFree in logic. Two ways to size it,
 * for two kinds of use:
 *  - resize(n): exactly n values, zeroed, and finished before it returns (the memset runs on the
 *    legacy default stream, which does not order with a non-blocking stream). For buffers that
 *    are sized rarely and read before they are written (the reconstruction's).
 *  - grow(n): at least n values, contents not kept, nothing waited for. For scratch sized per
 *    unit of work and written before it is read (the fit's per-slot arrays), so that sizing it
 *    costs nothing once the largest unit has been seen.
 */
template <class T>
class DeviceBuffer {
   public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(std::size_t n) { resize(n); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
        if (this != &o) {
            release();
            p_ = std::exchange(o.p_, nullptr);
            n_ = std::exchange(o.n_, 0);
        }
        return *this;
    }
    ~DeviceBuffer() { release(); }

    /// Exactly n values, all zero (see the class comment).
    void resize(std::size_t n) {
        if (n == n_) return;
        if (p_) EF_CUDA_CHECK(cudaFree(p_));
        p_ = nullptr;
        n_ = n;
        if (n == 0) return;
        EF_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)));
        EF_CUDA_CHECK(cudaMemset(p_, 0, n * sizeof(T)));
        EF_CUDA_CHECK(cudaDeviceSynchronize());
    }
    /// At least n values (never shrinks); contents are not kept when it grows.
    void grow(std::size_t n) {
        if (n <= n_) return;
        release();
        EF_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)));
        n_ = n;
    }
    /// Grows to n values and copies them from the host (synchronous).
    void upload(const T* host, std::size_t n) {
        if (n == 0) return;
        grow(n);
        EF_CUDA_CHECK(cudaMemcpy(p_, host, n * sizeof(T), cudaMemcpyHostToDevice));
    }
    /// The first n values to the host (synchronous).
    void download(T* host, std::size_t n) const {
        if (n) EF_CUDA_CHECK(cudaMemcpy(host, p_, n * sizeof(T), cudaMemcpyDeviceToHost));
    }
    T* data() { return p_; }
    const T* data() const { return p_; }
    std::size_t size() const { return n_; }

   private:
    void release() {
        if (p_) cudaFree(p_);
        p_ = nullptr;
        n_ = 0;
    }
    T* p_ = nullptr;
    std::size_t n_ = 0;
};

/// Page-locked host memory for size() values of T (asynchronous copies need it); resize() and
/// grow() as DeviceBuffer's.
template <class T>
class PinnedBuffer {
   public:
    PinnedBuffer() = default;
    PinnedBuffer(const PinnedBuffer&) = delete;
    PinnedBuffer& operator=(const PinnedBuffer&) = delete;
    PinnedBuffer(PinnedBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
    ~PinnedBuffer() { release(); }

    /// Exactly n values, each T{}.
    void resize(std::size_t n) {
        if (n == n_) return;
        if (p_) EF_CUDA_CHECK(cudaFreeHost(p_));
        p_ = nullptr;
        n_ = n;
        if (n) {
            EF_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&p_), n * sizeof(T)));
            std::fill(p_, p_ + n, T{});
        }
    }
    /// At least n values (never shrinks); contents are not kept when it grows.
    void grow(std::size_t n) {
        if (n <= n_) return;
        release();
        EF_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&p_), n * sizeof(T)));
        n_ = n;
    }
    T* data() { return p_; }
    const T* data() const { return p_; }
    std::size_t size() const { return n_; }

   private:
    void release() {
        if (p_) cudaFreeHost(p_);
        p_ = nullptr;
        n_ = 0;
    }
    T* p_ = nullptr;
    std::size_t n_ = 0;
};

/// An owned CUDA stream.
class Stream {
   public:
    Stream() { EF_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
    ~Stream() { cudaStreamDestroy(s_); }
    cudaStream_t get() const { return s_; }

   private:
    cudaStream_t s_{};
};

}  // namespace ef::cuda

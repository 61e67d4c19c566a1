// SPDX-License-Identifier: MIT
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <utility>

#include <ensemblefit/core/error.hpp>

/// Every CUDA runtime call goes through this: a failure throws with the call, the CUDA error
/// string and the source location.
#define EF_CUDA_CHECK(call)                                                                   \
    do {                                                                                      \
        const cudaError_t ef_cuda_rc = (call);                                                \
        if (ef_cuda_rc != cudaSuccess)                                                        \
            throw ::ef::runtime_error(std::string("CUDA call failed: ") + #call + ": " +      \
                                      cudaGetErrorString(ef_cuda_rc) + " (" + __FILE__ + ":" + \
                                      std::to_string(__LINE__) + ")");                        \
    } while (0)

namespace ef::cuda {

/// Owns device memory for `n` values of T; no naked cudaFree in logic.
template <class T>
class DeviceBuffer {
   public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(size_t n) { resize(n); }
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

    /// Grows (never shrinks) to at least n values; contents are not kept.
    void resize(size_t n) {
        if (n <= n_) return;
        release();
        EF_CUDA_CHECK(cudaMalloc(&p_, n * sizeof(T)));
        n_ = n;
    }
    void upload(const T* host, size_t n) {
        if (n == 0) return;
        resize(n);
        if (n) EF_CUDA_CHECK(cudaMemcpy(p_, host, n * sizeof(T), cudaMemcpyHostToDevice));
    }
    void download(T* host, size_t n) const {
        if (n) EF_CUDA_CHECK(cudaMemcpy(host, p_, n * sizeof(T), cudaMemcpyDeviceToHost));
    }
    T* get() const { return p_; }
    size_t size() const { return n_; }

   private:
    void release() {
        if (p_) cudaFree(p_);
        p_ = nullptr;
        n_ = 0;
    }
    T* p_ = nullptr;
    size_t n_ = 0;
};

/// Page-locked host memory for `n` values of T (asynchronous copies need it), grown as needed.
template <class T>
class PinnedBuffer {
   public:
    PinnedBuffer() = default;
    PinnedBuffer(const PinnedBuffer&) = delete;
    PinnedBuffer& operator=(const PinnedBuffer&) = delete;
    ~PinnedBuffer() { release(); }
    /// Grows (never shrinks) to at least n values; contents are not kept.
    void resize(size_t n) {
        if (n <= n_) return;
        release();
        EF_CUDA_CHECK(cudaMallocHost(&p_, n * sizeof(T)));
        n_ = n;
    }
    T* get() const { return p_; }

   private:
    void release() {
        if (p_) cudaFreeHost(p_);
        p_ = nullptr;
        n_ = 0;
    }
    T* p_ = nullptr;
    size_t n_ = 0;
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

// SPDX-License-Identifier: MIT
#pragma once

#include <omp.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include <ensemblefit/recon/recon_worker.hpp>

#include "kernels/core/kernel_tally.hpp"
#include "kernels/recon/ptycho_math.hpp"
#include "kernels/recon/window_fft.hpp"

namespace ef::recon {

/// Owns `size` elements of U, 64-byte aligned (what FFTW's SIMD codelets want), zeroed.
template <class U>
class AlignedBuffer {
   public:
    AlignedBuffer() = default;
    explicit AlignedBuffer(std::size_t n) { resize(n); }
    AlignedBuffer(const AlignedBuffer&) = delete;
    AlignedBuffer& operator=(const AlignedBuffer&) = delete;
    AlignedBuffer(AlignedBuffer&& o) noexcept
        : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
    AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
        if (this != &o) {
            std::free(p_);
            p_ = std::exchange(o.p_, nullptr);
            n_ = std::exchange(o.n_, 0);
        }
        return *this;
    }
    ~AlignedBuffer() { std::free(p_); }

    /// Reallocates to n elements (contents are not kept) and zeroes them.
    void resize(std::size_t n) {
        if (n == n_) return;
        std::free(p_);
        p_ = nullptr;
        n_ = n;
        if (n == 0) return;
        const std::size_t bytes = (n * sizeof(U) + 63) / 64 * 64;
        p_ = static_cast<U*>(std::aligned_alloc(64, bytes));
        if (!p_) throw std::bad_alloc();
        std::memset(static_cast<void*>(p_), 0, bytes);
    }
    U* data() { return p_; }
    const U* data() const { return p_; }
    std::size_t size() const { return n_; }

   private:
    U* p_ = nullptr;
    std::size_t n_ = 0;
};

/**
 * Batched in-place 2-D FFTs of h x w complex windows on the CPU, unnormalised, forward with
 * exp(-2 pi i ...) (FFTW's and cuFFT's convention). One FFTW plan per direction for a single
 * window is made at construction (the planner is not thread-safe) and executed on every window
 * from an OpenMP loop through the new-array interface, so a window's result never depends on the
 * batch size or its split over threads or ranks. With FFTW_ESTIMATE (the default) the plan, and
 * so every bit, is the same in every process; FFTW_MEASURE picks by timing, which may differ
 * between processes. Implemented in kernels/cpu/recon_fft.cpp for float and double.
 */
template <class T>
class CpuFft {
   public:
    CpuFft(int h, int w, int threads, bool measure);
    ~CpuFft();
    CpuFft(const CpuFft&) = delete;
    CpuFft& operator=(const CpuFft&) = delete;

    void run(Cx<T>* data, std::int64_t count, bool inverse);
    /// "FFTW (measured plans)" or "FFTW (estimated plans)".
    static const char* describe(bool measure);

   private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

/**
 * The CPU backend of PtychoEngine (kernels/recon/ptycho_engine.hpp): host memory, OpenMP loops
 * over the single-source functors, per-group reductions in a fixed order (so results do not
 * depend on the thread count), FFTW transforms.
 */
template <class T>
class CpuBackend {
   public:
    static constexpr bool kHostMemory = true;
    template <class U>
    using Buffer = AlignedBuffer<U>;
    template <class U>
    using HostBuffer = AlignedBuffer<U>;

    /// `tuning`: the [tuning] choices, decided here once (automatic = off for both on the CPU).
    CpuBackend(int h, int w, int threads, bool fft_measure, const ReconTuning& tuning = {})
        : threads_(threads < 1 ? 1 : threads), n_(static_cast<std::int64_t>(h) * w), fft_(h, w, threads_, fft_measure),
          window_(tuning.window == TuningSwitch::on), defer_(tuning.deferred == TuningSwitch::on) {}

    int threads() const { return threads_; }

    /// Loops shorter than this run on the calling thread: a parallel region costs microseconds,
    /// and far more when the cores are shared (spinning threads wait for descheduled ones).
    static constexpr std::int64_t kMinParallel = 1 << 15;

    /// f(i) for i in [0, n).
    template <class F>
    void for_each(std::int64_t n, const F& f) {
#pragma omp parallel for num_threads(threads_) schedule(static) if (n >= kMinParallel && threads_ > 1)
        for (std::int64_t i = 0; i < n; ++i) f(i);
    }

    /// f(r, c) for r in [0, rows), c in [0, cols): threads over rows, a plain inner loop.
    template <class F>
    void for_each_rows(std::int64_t rows, int cols, const F& f) {
        if (rows < 2 * threads_) {  // few rows: share the flat index space instead
            for_each(rows * cols, [&](std::int64_t i) { f(i / cols, static_cast<int>(i % cols)); });
            return;
        }
#pragma omp parallel for num_threads(threads_) schedule(static) if (rows * cols >= kMinParallel)
        for (std::int64_t r = 0; r < rows; ++r)
            for (int c = 0; c < cols; ++c) f(r, c);
    }

    /// out[g] = sum over e in [0, size) of f(g, e), summed in ascending e (host memory is the
    /// device's here, so `out_on_device` changes nothing).
    template <class F>
    void reduce_groups(std::int64_t groups, std::int64_t size, const F& f, Sum2* out, bool out_on_device = false) {
        (void)out_on_device;
#pragma omp parallel for num_threads(threads_) schedule(static) if (groups * size >= kMinParallel && threads_ > 1)
        for (std::int64_t g = 0; g < groups; ++g) {
            Sum2 s;
            for (std::int64_t e = 0; e < size; ++e) s += f(g, e);
            out[g] = s;
        }
    }

    void fft(Cx<T>* data, std::int64_t count, bool inverse) {
        fft_.run(data, count, inverse);
        count_fft(count);
    }
    /// The batch's transforms (b x K windows): each window through the one single-window plan,
    /// so nothing depends on the count; no padding.
    void fft_batch(Cx<T>* data, std::int64_t count, bool inverse) { fft(data, count, inverse); }
    std::int64_t fft_rows(std::int64_t count) const { return count; }
    /// The FFTs of the open phase: 5 n log2 n FLOPs, the windows read and written once.
    void count_fft(std::int64_t count) {
        const double c = static_cast<double>(count);
        marks_.count(fft_flops(static_cast<double>(n_), c), 2.0 * sizeof(Cx<T>) * static_cast<double>(n_) * c);
    }

    /**
     * Window size of the window-resident passes (window_passes.hpp), 0 for the FFTW sequence.
     * FFTW is the faster CPU transform, so they run here only with tuning.window = on (tests use
     * it to check the GPU's sequence on the CPU).
     */
    int window_size(const PtychoDims& d) const {
        if (!window_ || d.h != d.w) return 0;
        return d.h == 32 || d.h == 64 || d.h == 128 ? d.h : 0;
    }
    /// Blocks the device runs at once (window passes split modes to fill them): none here.
    int parallel_units() const { return 0; }
    /// f(block, j, window, twiddles, scratch) for j in [0, count), a window buffer and
    /// F::kScratch values of scratch per thread; out[j] gets each result when out is set.
    /// No clusters of blocks here (window_clusters() says no).
    template <class F>
    bool window_clusters(int) const {
        return false;
    }
    template <class F>
    void window_pass(const F& f, std::int64_t count, Sum2* out, bool out_on_device = false, int clusters = 1) {
        (void)out_on_device;
        if (clusters != 1) throw std::logic_error("window pass: no clusters on the CPU");
        constexpr int N = F::kN;
#pragma omp parallel num_threads(threads_) if (threads_ > 1 && count > 1)
        {
            AlignedBuffer<Cx<T>> win(static_cast<std::size_t>(wfft::Radix<N>::kStored));
            AlignedBuffer<typename F::Real> scratch(static_cast<std::size_t>(F::kScratch > 0 ? F::kScratch : 1));
            const wfft::SerialBlock blk;
#pragma omp for schedule(static)
            for (std::int64_t j = 0; j < count; ++j) {
                const Sum2 s = f(blk, j, win.data(), f.twiddles, F::kScratch > 0 ? scratch.data() : nullptr);
                if (out) out[j] = s;
            }
        }
    }
    /// No single pass for the probe spectrum and the position terms here: the engine runs both.
    template <class S, class P>
    bool spectrum_and_positions(std::int64_t, const S&, bool, const P&, Sum2*, bool = false) {
        return false;
    }
    /// Phase marks: the time from one to the next (the host's clock: work here is synchronous)
    /// and the counts added meanwhile go to tally() under the first one's name; "" ends a phase.
    void mark(const char* name) { marks_.mark(name); }
    void count(double flops, double bytes) { marks_.count(flops, bytes); }
    const KernelTally& tally() const { return marks_.tally(); }

    template <class U>
    void upload(U* dst, const U* src, std::size_t n) {
        if (n) std::memcpy(static_cast<void*>(dst), src, n * sizeof(U));
    }
    template <class U>
    void download(U* dst, const U* src, std::size_t n) {
        if (n) std::memcpy(static_cast<void*>(dst), src, n * sizeof(U));
    }
    /// The GPU copies through page-locked memory without waiting; here a copy is a copy.
    void upload_staged(void* dst, const void* src, std::size_t bytes) {
        if (bytes) std::memcpy(dst, src, bytes);
    }
    void synchronize() { marks_.mark(""); }
    void side_begin(bool = true) {}  // one stream of work here: nothing beside it
    void side_end() {}
    void side_join() {}

    /// Deferred steps (PtychoEngine::begin_deferred): only with tuning.deferred = on here, which
    /// tests use to check them against the per-batch steps; a CPU step has nothing to overlap.
    bool defer_steps() const { return defer_; }
    /// Time stamps on the device's timeline (the host's here, where work is synchronous).
    void stamp(std::size_t i) {
        if (stamps_.size() <= i) stamps_.resize(i + 1);
        stamps_[i] = std::chrono::steady_clock::now();
    }
    /// Seconds from stamp i to stamp j.
    double stamp_seconds(std::size_t i, std::size_t j) {
        return std::chrono::duration<double>(stamps_.at(j) - stamps_.at(i)).count();
    }

    // No device-side sums on the CPU: ranks sum host buffers with MPI.
    std::vector<char> device_sum_id() { return {}; }
    bool device_sum_init(const std::vector<char>&, int, int, std::string& why) {
        why = "CPU worker";
        return false;
    }
    bool peer_sum_init(double*, std::int64_t, std::string& why) {
        why = "CPU worker";
        return false;
    }
    void device_sum(double*, std::size_t, double* = nullptr, std::size_t = 0, std::size_t = 0) {}

   private:
    int threads_;
    std::int64_t n_;  // points of a window
    CpuFft<T> fft_;
    bool window_;  // window-resident passes (tuning.window = on)
    bool defer_;   // deferred steps (tuning.deferred = on)
    std::vector<std::chrono::steady_clock::time_point> stamps_;
    HostPhaseMarks marks_;
};

}  // namespace ef::recon

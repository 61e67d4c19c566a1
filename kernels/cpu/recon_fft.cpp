// SPDX-License-Identifier: MIT
// Batched 2-D FFTs for the CPU reconstruction backend: FFTW plans (EF_HAVE_FFTW, linked by the
// build) or, without FFTW, a built-in transform so that the library still links and runs.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <map>
#include <mutex>
#include <stdexcept>
#include <vector>

#ifdef EF_HAVE_FFTW
#include <fftw3.h>
#endif

#include "kernels/recon/cpu_backend.hpp"

namespace ef::recon {

namespace {

// ---- built-in fallback: separable 2-D, radix-2 where the length is a power of two ----------

template <class T>
class Dft1d {
   public:
    explicit Dft1d(int n) : n_(n), pow2_(n > 0 && (n & (n - 1)) == 0), tw_(static_cast<size_t>(n)) {
        for (int k = 0; k < n; ++k) {
            const double a = -2.0 * M_PI * k / n;
            tw_[static_cast<size_t>(k)] = {static_cast<T>(std::cos(a)), static_cast<T>(std::sin(a))};
        }
    }
    /// In place on x[0], x[stride], ...; `tmp` holds n values.
    void run(std::complex<T>* x, std::int64_t stride, bool inverse, std::complex<T>* tmp) const {
        for (int i = 0; i < n_; ++i) tmp[i] = x[i * stride];
        if (pow2_) {
            for (int i = 1, j = 0; i < n_; ++i) {  // bit reversal
                int bit = n_ >> 1;
                for (; j & bit; bit >>= 1) j ^= bit;
                j ^= bit;
                if (i < j) std::swap(tmp[i], tmp[j]);
            }
            for (int len = 2; len <= n_; len <<= 1) {
                const int step = n_ / len;
                for (int i = 0; i < n_; i += len)
                    for (int k = 0; k < len / 2; ++k) {
                        std::complex<T> t = tw_[static_cast<size_t>(k * step)];
                        if (inverse) t = std::conj(t);
                        const std::complex<T> a = tmp[i + k];
                        const std::complex<T> b = tmp[i + k + len / 2] * t;
                        tmp[i + k] = a + b;
                        tmp[i + k + len / 2] = a - b;
                    }
            }
            for (int i = 0; i < n_; ++i) x[i * stride] = tmp[i];
        } else {
            for (int k = 0; k < n_; ++k) {
                std::complex<T> acc = 0;
                for (int i = 0; i < n_; ++i) {
                    std::complex<T> t = tw_[static_cast<size_t>((static_cast<long>(i) * k) % n_)];
                    acc += tmp[i] * (inverse ? std::conj(t) : t);
                }
                x[k * stride] = acc;
            }
        }
    }

   private:
    int n_;
    bool pow2_;
    std::vector<std::complex<T>> tw_;
};

#ifdef EF_HAVE_FFTW
template <class T>
struct Fftw;
template <>
struct Fftw<float> {
    using plan = fftwf_plan;
    using complex = fftwf_complex;
    static plan many(int rank, const int* n, int howmany, complex* in, int dist, int sign, unsigned flags) {
        return fftwf_plan_many_dft(rank, n, howmany, in, nullptr, 1, dist, in, nullptr, 1, dist, sign, flags);
    }
    static void execute(plan p, complex* in) { fftwf_execute_dft(p, in, in); }
    static void destroy(plan p) { fftwf_destroy_plan(p); }
};
template <>
struct Fftw<double> {
    using plan = fftw_plan;
    using complex = fftw_complex;
    static plan many(int rank, const int* n, int howmany, complex* in, int dist, int sign, unsigned flags) {
        return fftw_plan_many_dft(rank, n, howmany, in, nullptr, 1, dist, in, nullptr, 1, dist, sign, flags);
    }
    static void execute(plan p, complex* in) { fftw_execute_dft(p, in, in); }
    static void destroy(plan p) { fftw_destroy_plan(p); }
};

/// FFTW's planner is process-global and not thread-safe: serialise planning over all CpuFft.
std::mutex& planner_mutex() {
    static std::mutex m;
    return m;
}
#endif

}  // namespace

template <class T>
struct CpuFft<T>::Impl {
    int h, w, threads;
    bool measure;
    Dft1d<T> rows, cols;
#ifdef EF_HAVE_FFTW
    using F = Fftw<T>;
    // One plan per direction for a single transform, executed on every window with the
    // new-array interface: each window then goes through exactly the same arithmetic whatever
    // the batch size or its split over threads and ranks. Plans are made on a scratch window
    // (FFTW_MEASURE overwrites its arrays) and used on any window of the same alignment.
    typename F::plan forward = nullptr, backward = nullptr;
#endif
    Impl(int h_, int w_, int t, bool m) : h(h_), w(w_), threads(t), measure(m), rows(w_), cols(h_) {
#ifdef EF_HAVE_FFTW
        // Windows start at multiples of one window; keep SIMD alignment only when that is 64 B.
        const size_t window_bytes = static_cast<size_t>(h) * static_cast<size_t>(w) * sizeof(Cx<T>);
        const unsigned flags = (measure ? FFTW_MEASURE : FFTW_ESTIMATE) | (window_bytes % 64 != 0 ? FFTW_UNALIGNED : 0u);
        AlignedBuffer<Cx<T>> scratch(static_cast<size_t>(h) * static_cast<size_t>(w));
        const int dims[2] = {h, w};
        std::lock_guard<std::mutex> lock(planner_mutex());
        auto* z = reinterpret_cast<typename F::complex*>(scratch.data());
        forward = F::many(2, dims, 1, z, h * w, FFTW_FORWARD, flags);
        backward = F::many(2, dims, 1, z, h * w, FFTW_BACKWARD, flags);
        if (!forward || !backward)
            throw std::runtime_error("FFTW could not plan a " + std::to_string(h) + "x" + std::to_string(w) + " transform");
#endif
    }
    ~Impl() {
#ifdef EF_HAVE_FFTW
        std::lock_guard<std::mutex> lock(planner_mutex());
        if (forward) F::destroy(forward);
        if (backward) F::destroy(backward);
#endif
    }

    void run(Cx<T>* data, std::int64_t count, bool inverse) {
        if (count <= 0) return;
        const std::int64_t n = static_cast<std::int64_t>(h) * w;
        // No parallel region for small work (see CpuBackend::kMinParallel).
        const int nt = count * n < (1 << 15) ? 1 : static_cast<int>(std::min<std::int64_t>(threads, count));
#ifdef EF_HAVE_FFTW
        const typename F::plan p = inverse ? backward : forward;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
        for (std::int64_t t = 0; t < count; ++t) F::execute(p, reinterpret_cast<typename F::complex*>(data + t * n));
#else
        auto* z = reinterpret_cast<std::complex<T>*>(data);
#pragma omp parallel num_threads(nt) if (nt > 1)
        {
            std::vector<std::complex<T>> tmp(static_cast<size_t>(std::max(h, w)));
#pragma omp for schedule(static)
            for (std::int64_t t = 0; t < count; ++t) {
                std::complex<T>* img = z + t * n;
                for (int r = 0; r < h; ++r) rows.run(img + static_cast<std::int64_t>(r) * w, 1, inverse, tmp.data());
                for (int c = 0; c < w; ++c) cols.run(img + c, w, inverse, tmp.data());
            }
        }
#endif
    }
};

template <class T>
CpuFft<T>::CpuFft(int h, int w, int threads, bool measure) : impl_(std::make_unique<Impl>(h, w, threads, measure)) {}
template <class T>
CpuFft<T>::~CpuFft() = default;
template <class T>
void CpuFft<T>::run(Cx<T>* data, std::int64_t count, bool inverse) {
    impl_->run(data, count, inverse);
}
template <class T>
const char* CpuFft<T>::describe(bool measure) {
#ifdef EF_HAVE_FFTW
    return measure ? "FFTW (measured plans)" : "FFTW (estimated plans)";
#else
    (void)measure;
    return "built-in FFT (built without FFTW: slow)";
#endif
}

template class CpuFft<float>;
template class CpuFft<double>;

}  // namespace ef::recon

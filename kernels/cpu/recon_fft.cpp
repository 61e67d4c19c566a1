// SPDX-License-Identifier: MIT
// Batched 2-D FFTs for the CPU reconstruction backend: FFTW plans (FFTW is required by the build).
#include <fftw3.h>
#include <omp.h>

#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <string>

#include "kernels/recon/cpu_backend.hpp"

namespace ef::recon {

namespace {

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

}  // namespace

template <class T>
struct CpuFft<T>::Impl {
    int h, w, threads;
    bool measure;
    using F = Fftw<T>;
    // One plan per direction for a single transform, executed on every window with the
    // new-array interface: each window then goes through exactly the same arithmetic whatever
    // the batch size or its split over threads and ranks. Plans are made on a scratch window
    // (FFTW_MEASURE overwrites its arrays) and used on any window of the same alignment.
    typename F::plan forward = nullptr, backward = nullptr;
    Impl(int h_, int w_, int t, bool m) : h(h_), w(w_), threads(t), measure(m) {
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
    }
    ~Impl() {
        std::lock_guard<std::mutex> lock(planner_mutex());
        if (forward) F::destroy(forward);
        if (backward) F::destroy(backward);
    }

    void run(Cx<T>* data, std::int64_t count, bool inverse) {
        if (count <= 0) return;
        const std::int64_t n = static_cast<std::int64_t>(h) * w;
        // No parallel region for small work (see CpuBackend::kMinParallel).
        const int nt = count * n < (1 << 15) ? 1 : static_cast<int>(std::min<std::int64_t>(threads, count));
        const typename F::plan p = inverse ? backward : forward;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
        for (std::int64_t t = 0; t < count; ++t) F::execute(p, reinterpret_cast<typename F::complex*>(data + t * n));
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
    return measure ? "FFTW (measured plans)" : "FFTW (estimated plans)";
}

template class CpuFft<float>;
template class CpuFft<double>;

}  // namespace ef::recon

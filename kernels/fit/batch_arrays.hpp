// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/fit/fit_plan.hpp"
#include "kernels/fit/lm.hpp"
#include "kernels/fit/lm_batched.hpp"
#include "kernels/fit/lm_gram.hpp"

namespace ef {

/// The plan-wide fields of a QR-table-path batch (sizes, resampling, bounds, settings, data,
/// start); BatchArrays::attach sets the per-slot arrays. Pointers may be host or device memory.
inline batched::BatchView batch_view(const FitPlan& plan, int n, const ParamBoundsView& bounds, const double* start,
                                     const double* y0, const double* sigma) {
    batched::BatchView b;
    b.n = n;
    b.P = plan.num_params();
    b.nfree = plan.params.nfree;
    b.stride = static_cast<long>(LmScratchLayout(b.n, b.P).total);
    b.bootstrap = plan.bootstrap ? 1 : 0;
    b.seed = plan.seed;
    b.bounds = bounds;
    b.settings = plan.settings;
    b.y0 = y0;
    b.sigma = sigma;
    b.start = start;
    return b;
}

/// The plan-wide fields of a Gram-path batch (kernels/fit/lm_gram.hpp); BatchArrays::attach sets
/// the per-slot arrays. Pointers may be host or device memory.
inline gram::GramView gram_view(const FitPlan& plan, const ParamBoundsView& bounds, const int* free_idx, long Kt,
                                const double* start, const double* u0) {
    gram::GramView v;
    v.P = plan.num_params();
    v.nfree = plan.params.nfree;
    v.Kt = Kt;
    v.bounds = bounds;
    v.settings = plan.settings;
    v.free_idx = free_idx;
    v.start = start;
    v.u0 = u0;
    return v;
}

/// Host memory for BatchArrays on the CPU: a vector that grows (new values zero) and never
/// shrinks.
template <class T>
class HostArray {
   public:
    void grow(std::size_t n) {
        if (n > v_.size()) v_.resize(n);
    }
    T* data() { return v_.data(); }
    const T* data() const { return v_.data(); }
    std::size_t size() const { return v_.size(); }

   private:
    std::vector<T> v_;
};

/**
 * The per-slot arrays of a batched fit, one set for both batched paths (Gpufit's GPUData): host
 * arrays on the CPU (Array = HostArray), device buffers on the GPU (Array = cuda::DeviceBuffer).
 * attach() sizes what a path needs for `slots` replicas and points the path's view at it; an
 * Array<T> grows to n values with grow(n) and gives data(). Which arrays a path uses, and how
 * large they are, is written here once for both backends.
 */
template <template <class> class Array>
struct BatchArrays {
    // Both paths: the request point (and the result), the request codes, the point as seeded
    // duals and its normalisations, replica 0's covariance.
    Array<double> params, cov;
    Array<int> request;
    Array<batched::JDual> pd;
    Array<batched::JNorm> jnorm;
    Array<batched::VNorm> vnorm;
    Array<std::int64_t> replica;  ///< replica numbers; filled by the caller after attach()
    // QR table path: LM scratch, the replica's data and bootstrap weights, the LM states.
    Array<double> work, y, w;
    Array<LmState> lm_state;
    // Gram path: G times the slot's columns, v and G v, b and c, the data columns E.
    Array<double> H, vh, b, c, E;
    Array<gram::State> gram_state;

    /// The QR table path: v's per-slot pointers for `slots` replicas (numbers in `replicas`,
    /// host memory; the slot of replica 0 gets the covariance).
    void attach(batched::BatchView& v, int slots, const std::int64_t* replicas) {
        const std::size_t s = static_cast<std::size_t>(slots);
        v.work = sized(work, s * static_cast<std::size_t>(v.stride));
        v.y = sized(y, s * v.n);
        v.w = sized(w, s * v.n);
        v.state = sized(lm_state, s);
        v.replica = sized(replica, s);
        attach_common(v, slots, replicas);
    }

    /// The Gram path: v's per-slot pointers for `slots` replicas of n points, and the data
    /// columns E (slots x n) that b and c are formed from.
    void attach(gram::GramView& v, int slots, int n, const std::int64_t* replicas) {
        const std::size_t s = static_cast<std::size_t>(slots);
        const std::size_t Kt = static_cast<std::size_t>(v.Kt);
        v.H = sized(H, s * Kt * static_cast<std::size_t>(1 + v.nfree));
        v.vh = sized(vh, s * 2 * Kt);
        v.b = sized(b, s * Kt);
        v.c = sized(c, s);
        sized(E, s * static_cast<std::size_t>(n));
        v.state = sized(gram_state, s);
        attach_common(v, slots, replicas);
    }

   private:
    template <class T>
    static T* sized(Array<T>& a, std::size_t n) {
        a.grow(n);
        return a.data();
    }

    template <class View>
    void attach_common(View& v, int slots, const std::int64_t* replicas) {
        const std::size_t s = static_cast<std::size_t>(slots);
        const std::size_t P = static_cast<std::size_t>(v.P);
        v.params = sized(params, s * P);
        v.request = sized(request, s);
        v.pd = sized(pd, s * P);
        v.jnorm = sized(jnorm, s);
        v.vnorm = sized(vnorm, s);
        v.cov = sized(cov, P * P);
        v.cov_slot = -1;
        for (int t = 0; t < slots; ++t)
            if (replicas[t] == 0) v.cov_slot = t;
    }
};

}  // namespace ef

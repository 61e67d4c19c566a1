// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/core/hd.hpp"

/**
 * Single-source math of one ptychographic mini-batch step: forward model, losses, Wirtinger
 * gradients and the Adam update, written once as EF_HD functors. The CPU backend calls them from
 * OpenMP loops, the CUDA backend from kernels (kernels/recon/ptycho_engine.hpp sequences them;
 * the backends only launch, reduce and transform). See docs/reconstruction.md and the PtyRAD paper
 * (arXiv:2505.07814) for the derivations.
 *
 * Conventions (all functors):
 *  - n = h * w pixels per window; pixel q = u * w + v (row u, column v).
 *  - psi, pshift: b x K x n complex, "row" r = j * K + k (position j, probe mode k).
 *  - Row functors take (row, q) and element functors (i): backends launch them on 2-D grids
 *    (rows x pixels), so no per-element 64-bit division is needed (it is slow on GPUs); index
 *    arithmetic inside a window is 32-bit.
 *  - FFTs are unnormalised (FFTW/cuFFT): F_u = sqrt(n) F_ortho; the 1/n factors that make the
 *    model unitary are folded into the element-wise functors, never into separate passes.
 *  - Patterns are stored in FFT order (the loader undoes the centring fftshift once).
 *  - crop: b x 2 ints (row, column of the window's top-left object pixel); the sub-pixel
 *    remainder enters through `ramp`: b x (h + w) factors exp(-2 pi i f dy) (rows) and
 *    exp(-2 pi i f dx) (columns), whose product is position j's Fourier shift (RampTable).
 *  - Gradients G_x = dL/dRe x + i dL/dIm x (PyTorch's .grad convention).
 *  - Sums over the batch are taken in batch order in double (deterministic and split-invariant).
 */
namespace ef::recon {

/// Complex number as two reals: layout-compatible with fftw_complex, cufftComplex, T[2].
/// Aligned to its size, as float2 and double2 are: the GPU then moves one in one 8- or 16-byte
/// access (with 4-byte alignment every global load and store of one was two instructions).
template <class T>
struct alignas(2 * sizeof(T)) Cx {
    T re;
    T im;
};

/// Loads and stores of data touched once per pass (far fields, shifted probes, spectra: a
/// tensor far larger than L2): on the GPU with the evict-first hint (ld/st.global.cs), so they
/// do not push out of L2 what is read again (object, probe spectrum, per-position sums).
template <class T>
EF_HD EF_INLINE Cx<T> load_once(const Cx<T>* p) {
#ifdef __CUDA_ARCH__
    if constexpr (sizeof(T) == sizeof(float)) {
        const float2 v = __ldcs(reinterpret_cast<const float2*>(p));
        return {v.x, v.y};
    } else {
        const double2 v = __ldcs(reinterpret_cast<const double2*>(p));
        return {v.x, v.y};
    }
#else
    return *p;
#endif
}
template <class T>
EF_HD EF_INLINE void store_once(Cx<T>* p, Cx<T> v) {
#ifdef __CUDA_ARCH__
    if constexpr (sizeof(T) == sizeof(float)) __stcs(reinterpret_cast<float2*>(p), make_float2(v.re, v.im));
    else __stcs(reinterpret_cast<double2*>(p), make_double2(v.re, v.im));
#else
    *p = v;
#endif
}

template <class T>
EF_HD EF_INLINE Cx<T> operator+(Cx<T> a, Cx<T> b) {
    return {a.re + b.re, a.im + b.im};
}
template <class T>
EF_HD EF_INLINE Cx<T> operator*(Cx<T> a, Cx<T> b) {
    return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}
template <class T>
EF_HD EF_INLINE Cx<T> operator*(Cx<T> a, T s) {
    return {a.re * s, a.im * s};
}
/// conj(a) * b: the adjoint of multiplication by a.
template <class T>
EF_HD EF_INLINE Cx<T> conj_mul(Cx<T> a, Cx<T> b) {
    return {a.re * b.re + a.im * b.im, a.re * b.im - a.im * b.re};
}
template <class T>
EF_HD EF_INLINE T abs2(Cx<T> a) {
    return a.re * a.re + a.im * a.im;
}
template <class T>
EF_HD EF_INLINE Cx<T> polar(T r, T phi) {
    using std::cos;
    using std::sin;
    return {r * cos(phi), r * sin(phi)};
}

/// numpy.fft.fftfreq: frequency of FFT bin u of n, in cycles per pixel.
template <class T>
EF_HD EF_INLINE T fft_freq(int u, int n) {
    return static_cast<T>(u <= (n - 1) / 2 ? u : u - n) / static_cast<T>(n);
}

/// Window and object sizes of a reconstruction.
struct PtychoDims {
    int h = 0;      ///< window (pattern, probe) rows
    int w = 0;      ///< window columns
    int modes = 1;  ///< probe modes K
    int obj_h = 0;  ///< object rows
    int obj_w = 0;  ///< object columns
    EF_HD std::int64_t n() const { return static_cast<std::int64_t>(h) * w; }
    EF_HD std::int64_t obj_n() const { return static_cast<std::int64_t>(obj_h) * obj_w; }
};

enum class LossKind : int {
    amplitude = 0,  ///< PtyRAD loss_single, dp_pow 0.5: sqrt(mean (sqrt I - sqrt D)^2) / mean sqrt D
    poisson = 1,    ///< PtyRAD loss_poissn, dp_pow 1: -mean(D log(I + 1e-6) - I) / mean D
};

/// Intensity floor added to the modelled pattern (PtyRAD: 1e-10) and the Poisson log floor.
inline constexpr double kIntensityFloor = 1e-10;
inline constexpr double kPoissonFloor = 1e-6;

/**
 * Two running sums, the reduction type of the loss terms and position gradients. Sums are kept
 * in double whatever T is: they are few (one per position) and set the global loss scale.
 */
struct Sum2 {
    double a = 0;
    double b = 0;
    EF_HD Sum2& operator+=(const Sum2& o) {
        a += o.a;
        b += o.b;
        return *this;
    }
};

/// Position j's Fourier shift factor at pixel (u, v) from its ramp table row.
template <class T>
EF_HD EF_INLINE Cx<T> ramp_at(const Cx<T>* ramp, const PtychoDims& d, std::int64_t j, int u, int v) {
    const Cx<T>* r = ramp + j * (d.h + d.w);
    return r[u] * r[d.h + v];
}

// ---- forward ------------------------------------------------------------------------------

/**
 * Ramp tables, element i of b x (h + w): exp(-2 pi i fy(u) dy_j) for the first h entries of row
 * j, exp(-2 pi i fx(v) dx_j) for the last w. Their product shifts a window by (+dy, +dx); a table
 * of b (h + w) values replaces b K n evaluations of sin and cos in the passes that use it.
 */
template <class T>
struct RampTable {
    PtychoDims d;
    const T* shift;  ///< b x 2 (dy, dx)
    Cx<T>* ramp;     ///< b x (h + w)
    EF_HD void operator()(std::int64_t i) const {
        const int hw = d.h + d.w;
        const std::int64_t j = i / hw;
        const int t = static_cast<int>(i - j * hw);
        const T f = t < d.h ? fft_freq<T>(t, d.h) : fft_freq<T>(t - d.h, d.w);
        const T s = t < d.h ? shift[2 * j] : shift[2 * j + 1];
        ramp[i] = polar(T(1), static_cast<T>(-6.283185307179586476925) * f * s);
    }
};

/**
 * Shifted-probe spectra, row r = (j, k), pixel q: out = F_u[P_k](q) ramp_j(q) / n, so that an
 * unnormalised inverse FFT of `out` gives the probe shifted by position j's sub-pixel remainder.
 * Bytes: 8 (T = float) written per element; the K x n spectrum and the ramps stay in cache.
 */
template <class T>
struct ShiftedProbeSpectrum {
    PtychoDims d;
    const Cx<T>* probe_spec;  ///< K x n, F_u of the probe modes
    const Cx<T>* ramp;        ///< b x (h + w)
    Cx<T>* out;               ///< b x K x n
    EF_HD void operator()(std::int64_t r, int q) const {
        const int n = d.h * d.w;
        const std::int64_t j = r / d.modes;
        const int k = static_cast<int>(r - j * d.modes);
        const Cx<T> w = ramp_at(ramp, d, j, q / d.w, q % d.w);
        out[r * n + q] = probe_spec[static_cast<std::int64_t>(k) * n + q] * w * (T(1) / static_cast<T>(n));
    }
};

/**
 * Exit waves, row r = (j, k), pixel q: psi = P_jk(q) O(crop_j + q). With `per_position`, the
 * probe is b x K x n (sub-pixel-shifted copies), else K x n (the modes themselves, broadcast).
 * Bytes: 16 per element (probe read, psi written; object patches come from cache).
 */
template <class T>
struct ExitWave {
    PtychoDims d;
    const Cx<T>* probe;
    bool per_position;
    const Cx<T>* object;  ///< obj_h x obj_w
    const int* crop;      ///< b x 2
    Cx<T>* psi;           ///< b x K x n
    EF_HD void operator()(std::int64_t r, int q) const {
        const int n = d.h * d.w;
        const std::int64_t j = r / d.modes;
        const int k = static_cast<int>(r - j * d.modes);
        const std::int64_t row = crop[2 * j] + q / d.w;
        const std::int64_t col = crop[2 * j + 1] + q % d.w;
        const Cx<T> p = per_position ? probe[r * n + q] : probe[static_cast<std::int64_t>(k) * n + q];
        psi[r * n + q] = p * object[row * d.obj_w + col];
    }
};

// ---- loss and the far-field gradient -------------------------------------------------------

/**
 * One pattern pixel: the loss terms (a: squared amplitude error or Poisson term, b: sqrt D or
 * D) of model intensity I against data D, and f = 2 g / n with g = dL/dI up to the global
 * factor c (see ModulusGradient).
 */
template <class T>
EF_HD EF_INLINE Sum2 modulus_pixel(LossKind loss, T intensity, T data, T inv_n, T& f) {
    using std::log;
    using std::sqrt;
    Sum2 terms;
    T g;
    if (loss == LossKind::amplitude) {
        const T sd = sqrt(data > T(0) ? data : T(0));
        const T si = sqrt(intensity);
        const T err = si - sd;
        g = T(1) - sd / si;
        terms.a = static_cast<double>(err) * static_cast<double>(err);
        terms.b = static_cast<double>(sd);
    } else {
        const T ip = intensity + static_cast<T>(kPoissonFloor);
        g = T(1) - data / ip;
        terms.a = static_cast<double>(intensity) - static_cast<double>(data) * log(static_cast<double>(ip));
        terms.b = static_cast<double>(data);
    }
    f = T(2) * g * inv_n;
    return terms;
}

/**
 * Loss terms and the gradient with respect to the far field, per (position j, pixel q), over
 * all K modes at once (a reduction over q per j). On entry psi holds F_u of the exit waves; on
 * exit it holds (2 g / n) F_u psi, where g is dL/dI up to the global positive factor c that only
 * the whole mini-batch knows (amplitude: g = 1 - sqrt(D / I), c = 1 / (2 M RMSE mean sqrt D);
 * Poisson: g = 1 - D / (I + 1e-6), c = 1 / sum D). Everything downstream is linear in g, so c
 * is applied once to the summed gradients (ptycho_loss_scale()) and this pass needs no global
 * reduction. An unnormalised inverse FFT of psi then gives the exit-wave gradient F_ortho^H G_Psi.
 * Returns the loss terms (a: squared amplitude error or Poisson term, b: sqrt D or D).
 * Bytes: K x 16 (psi read and written) + 4 (pattern) per (j, q). FLOPs: ~10 K + 10.
 */
template <class T>
struct ModulusGradient {
    PtychoDims d;
    LossKind loss;
    const float* patterns;           ///< the rank's share, count x n, FFT order
    const std::int64_t* pattern_of;  ///< b: row of `patterns` for batch position j
    Cx<T>* psi;                      ///< b x K x n
    EF_HD Sum2 operator()(std::int64_t j, std::int64_t e) const {
        const int n = d.h * d.w;
        const int q = static_cast<int>(e);
        const T inv_n = T(1) / static_cast<T>(n);
        Cx<T>* row = psi + j * d.modes * static_cast<std::int64_t>(n) + q;
        T intensity = static_cast<T>(kIntensityFloor);
        for (int k = 0; k < d.modes; ++k) intensity += abs2(row[static_cast<std::int64_t>(k) * n]) * inv_n;
        const T data = static_cast<T>(patterns[pattern_of[j] * n + q]);
        T f;
        const Sum2 terms = modulus_pixel(loss, intensity, data, inv_n, f);
        for (int k = 0; k < d.modes; ++k) row[static_cast<std::int64_t>(k) * n] = row[static_cast<std::int64_t>(k) * n] * f;
        return terms;
    }
};

/**
 * The mini-batch loss and the factor c of ModulusGradient from the globally summed terms
 * (`a`, `b` over all ranks) and the number of pattern pixels M in the global mini-batch.
 */
EF_HD inline void ptycho_loss_scale(LossKind loss, double a, double b, double pixels, double& loss_value,
                                    double& scale) {
    if (loss == LossKind::amplitude) {
        const double rmse = std::sqrt(a / pixels);
        const double mean_sd = b / pixels;
        loss_value = mean_sd > 0 ? rmse / mean_sd : rmse;
        scale = (rmse > 0 && mean_sd > 0) ? 1.0 / (2.0 * pixels * rmse * mean_sd) : 0.0;
    } else {
        loss_value = b > 0 ? a / b : a / pixels;
        scale = b > 0 ? 1.0 / b : 1.0 / pixels;
    }
}

/// out[j] = the sum of part[j * groups + g] over g, ascending (element j): the host's order.
struct SumInGroupOrder {
    int groups;
    const Sum2* part;
    Sum2* out;
    EF_HD void operator()(std::int64_t j) const {
        Sum2 s;
        for (int g = 0; g < groups; ++g) s += part[j * groups + g];
        out[j] = s;
    }
};

/**
 * The loss and its factor c of one batch on the device: the per-position terms of the whole
 * batch, in global batch order, summed in that order as the host does, so the factor has the
 * same bits as ptycho_loss_scale() of the host's sums. Runs as kLanes elements: on the GPU one
 * warp loads the terms together (a few round trips to memory, not one per term) and hands them
 * to lane 0 in order, which adds them; on the host element 0 does it all.
 */
struct LossScale {
    static constexpr int kLanes = 32;
    LossKind loss;
    const Sum2* terms;  ///< count positions
    std::int64_t count;
    double pixels;
    double* loss_out;
    double* scale_out;
    Sum2* clear = nullptr;  ///< when set (the terms), zeroed as read: ready for the next batch's terms
    EF_HD void operator()(std::int64_t lane) const {
        Sum2 s;
#ifdef __CUDA_ARCH__
        constexpr int kRound = 8;  // terms per lane and round
        for (std::int64_t base = 0; base < count; base += kRound * kLanes) {
            Sum2 mine[kRound];
            for (int k = 0; k < kRound; ++k) {
                const std::int64_t i = base + k * kLanes + lane;
                if (i < count) {
                    mine[k] = terms[i];
                    if (clear) clear[i] = Sum2{};
                }
            }
            for (int k = 0; k < kRound; ++k) {
                if (base + k * kLanes >= count) break;  // the same for every lane
#pragma unroll
                for (int l = 0; l < kLanes; ++l) {  // the shuffles need not wait for the adds
                    const Sum2 t{__shfl_sync(0xffffffffu, mine[k].a, l), __shfl_sync(0xffffffffu, mine[k].b, l)};
                    if (base + k * kLanes + l < count) s += t;
                }
            }
        }
#else
        for (std::int64_t i = 0; i < count && lane == 0; ++i) {
            s += terms[i];
            if (clear) clear[i] = Sum2{};
        }
#endif
        if (lane == 0) ptycho_loss_scale(loss, s.a, s.b, pixels, *loss_out, *scale_out);
    }
};

// ---- backward ----------------------------------------------------------------------------

/**
 * Object-patch and shifted-probe gradients, row j, pixel q: with psi = G_psi (the exit-wave
 * gradients) on entry, writes G_O_j(q) = sum_k conj(P_jk) G_psi_jk to `patch_grad` and replaces
 * psi by G_P_jk = conj(O_j) G_psi_jk.
 * Bytes: K x 24 (probe read, psi read and written) + 8 per (j, q). FLOPs: 16 K.
 */
template <class T>
struct PatchGradients {
    PtychoDims d;
    const Cx<T>* probe;
    bool per_position;
    const Cx<T>* object;
    const int* crop;
    Cx<T>* psi;
    Cx<T>* patch_grad;  ///< b x n
    EF_HD void operator()(std::int64_t j, int q) const {
        const int n = d.h * d.w;
        const std::int64_t row = crop[2 * j] + q / d.w;
        const std::int64_t col = crop[2 * j + 1] + q % d.w;
        const Cx<T> o = object[row * d.obj_w + col];
        Cx<T> acc{T(0), T(0)};
        for (int k = 0; k < d.modes; ++k) {
            const std::int64_t e = (j * d.modes + k) * n + q;
            const Cx<T> g = psi[e];
            const Cx<T> p = per_position ? probe[e] : probe[static_cast<std::int64_t>(k) * n + q];
            acc = acc + conj_mul(p, g);
            psi[e] = conj_mul(o, g);
        }
        patch_grad[j * n + q] = acc;
    }
};

/**
 * Probe gradient without sub-pixel shifts, element (k, q) of K x n: sum over the batch of
 * G_P_jk, in batch order and in double (deterministic, no atomics; a sum split over ranks
 * then differs from the one-rank sum only by double rounding). Bytes: 8 b read + 16 written.
 */
template <class T>
struct ProbeGradientDirect {
    PtychoDims d;
    std::int64_t batch;
    const Cx<T>* psi;
    Cx<double>* out;  ///< K x n
    EF_HD void operator()(std::int64_t i) const {
        const std::int64_t kn = d.modes * d.n();
        Cx<double> acc{0.0, 0.0};
        for (std::int64_t j = 0; j < batch; ++j) {
            const Cx<T> z = psi[j * kn + i];
            acc.re += static_cast<double>(z.re);
            acc.im += static_cast<double>(z.im);
        }
        out[i] = acc;
    }
};

/**
 * Probe-gradient spectrum through the sub-pixel shifts, element (k, q) of K x n: with psi =
 * F_u[G_P_jk], sum_j conj(ramp_j(q)) psi, summed in batch order in double (the / n after the sum
 * over ranks, in SpectrumToWorking). The sum over
 * ranks is taken on this spectrum, and the unnormalised inverse FFT that makes it
 * G_P_k = sum_j F^-1[conj(w_j) F[G_P_jk]] is applied once after it (linear, so equal; and the
 * same on 1 or N ranks). Bytes: 8 b read + 16 written.
 */
template <class T>
struct ProbeGradientSpectrum {
    PtychoDims d;
    std::int64_t batch;
    const Cx<T>* ramp;
    const Cx<T>* psi;
    Cx<double>* out;
    EF_HD void operator()(std::int64_t i) const {
        const int n = d.h * d.w;
        const int q = static_cast<int>(i % n);
        const int u = q / d.w, v = q % d.w;
        Cx<double> acc{0.0, 0.0};
        for (std::int64_t j = 0; j < batch; ++j) {
            const Cx<T> z = term(j, i, ramp_at(ramp, d, j, u, v));
            acc.re += static_cast<double>(z.re);
            acc.im += static_cast<double>(z.im);
        }
        finish(i, acc);
    }
    /// Position j's term at element i, with w = ramp_j at i's pixel.
    EF_HD Cx<T> term(std::int64_t j, std::int64_t i, Cx<T> w) const {
        const std::int64_t kn = static_cast<std::int64_t>(d.modes) * d.h * d.w;
        return conj_mul(w, psi[j * kn + i]);
    }
    /// The sum as it is, without the 1 / n: scaled per rank, a rank's share would be rounded
    /// before the sum over ranks and the bits would depend on the shares wherever 1 / n is not
    /// a power of two (48, 80, 96 pixels: issue 35). SpectrumToWorking applies it after the sum.
    EF_HD void finish(std::int64_t i, Cx<double> acc) const { out[i] = acc; }
};

/**
 * Real-space probe gradient from its summed spectrum: rounds the sum to T (where the peer sums
 * have rounded it already: the same value) and applies ProbeGradientSpectrum's 1 / n in T, for
 * the inverse FFT. `scale`: 1 / n with sub-pixel shifts; 1 for a direct sum.
 */
template <class T>
struct SpectrumToWorking {
    const Cx<double>* src;
    Cx<T>* dst;
    T scale = T(1);
    EF_HD void operator()(std::int64_t i) const {
        dst[i] = Cx<T>{static_cast<T>(src[i].re) * scale, static_cast<T>(src[i].im) * scale};
    }
};

/**
 * Position gradient terms, element e = (k, q) of position j (a reduction over K x n per j):
 * dL/d(dy_j) = sum Re(conj(F_o G_P_jk) (-2 pi i fy) w_j F_o P_k) = sum 2 pi fy Im(z) / n with
 * z = conj(F_u G_P_jk) w_j F_u P_k; likewise for x. Up to the loss factor c, like every gradient.
 * Bytes: 8 per element (psi read; the spectrum and ramps stay in cache). FLOPs: ~20.
 */
template <class T>
struct PositionGradientTerm {
    PtychoDims d;
    const Cx<T>* ramp;
    const Cx<T>* probe_spec;
    const Cx<T>* psi;  ///< F_u of G_P_jk
    EF_HD Sum2 operator()(std::int64_t j, std::int64_t e) const {
        const int n = d.h * d.w;
        const int ei = static_cast<int>(e);
        const int k = ei / n;
        const int q = ei - k * n;
        const int u = q / d.w, v = q % d.w;
        return term(j, ei, ramp_at(ramp, d, j, u, v), fft_freq<T>(u, d.h), fft_freq<T>(v, d.w));
    }
    /// The same with w = ramp_j at the element's pixel and its frequencies fy, fx given.
    EF_HD Sum2 term(std::int64_t j, int ei, Cx<T> w, T fy, T fx) const {
        const int n = d.h * d.w;
        return value(psi[j * d.modes * static_cast<std::int64_t>(n) + ei], probe_spec[ei], w, fy, fx, n);
    }
    /// The terms of one element from its F_u G_P value, probe spectrum value and ramp.
    EF_HD static EF_INLINE Sum2 value(Cx<T> fgp, Cx<T> spec, Cx<T> w, T fy, T fx, int n) {
        const Cx<T> pw = spec * w;
        const Cx<T> z = conj_mul(fgp, pw);
        const T s = static_cast<T>(6.283185307179586476925) * z.im / static_cast<T>(n);
        Sum2 out;
        out.a = static_cast<double>(s * fy);
        out.b = static_cast<double>(s * fx);
        return out;
    }
};

/**
 * Object gradient, element (y, x) of the object: the sum of the batch's patch gradients that
 * cover the pixel, gathered in a fixed order in double (by the window's left column, then batch
 * position: deterministic on every backend; the scatter-add with atomics that PyTorch does is
 * not). Candidate positions per object row come as CSR lists (`row_start`, `row_items`) built on
 * the host, sorted by column, so a pixel visits only the windows over it (a binary search for the
 * first; before, every window over the row: about 3x the visits). Written as the gradient of
 * the complex object, (Re G, Im G): with amplitude-phase parameters ObjectStep converts it after
 * the sum over ranks (ObjectChainRule), since converted per rank, each rank's share would be
 * rounded before the sum and the bits would depend on the shares (issue 35). `p0`, `p1` and
 * `amplitude_phase` are not read here.
 * Bytes: 8 per covering patch + 8 (parameters) + 16 written.
 */
template <class T>
struct ObjectGradient {
    PtychoDims d;
    bool amplitude_phase;
    const int* crop;
    const int* row_start;  ///< obj_h + 1
    const int* row_items;  ///< batch positions covering each row, by crop column (then position)
    const Cx<T>* patch_grad;
    const T* p0;  ///< amplitude or real part
    const T* p1;  ///< phase or imaginary part
    double* g0;
    double* g1;
    EF_HD void operator()(std::int64_t y, int x) const {
        using std::cos;
        using std::sin;
        const int n = d.h * d.w;
        double re = 0, im = 0;
        // the row's candidates are sorted by their window's left column: find the first whose
        // window reaches x (column > x - w), then add until one starts right of x
        int lo = row_start[y], hi = row_start[y + 1];
        while (lo < hi) {
            const int mid = (lo + hi) / 2;
            if (crop[2 * row_items[mid] + 1] <= x - d.w) lo = mid + 1;
            else hi = mid;
        }
        for (int c = lo; c < row_start[y + 1]; ++c) {
            const int j = row_items[c];
            const int dx = x - crop[2 * j + 1];
            if (dx < 0) break;
            const int dy = static_cast<int>(y) - crop[2 * j];
            const Cx<T> z = patch_grad[static_cast<std::int64_t>(j) * n + dy * d.w + dx];
            re += static_cast<double>(z.re);
            im += static_cast<double>(z.im);
        }
        const std::int64_t i = y * d.obj_w + x;
        g0[i] = re;
        g1[i] = im;
    }
};

/**
 * The gradients of the object's amplitude A and phase Phi (O = A e^{i Phi}) from the summed
 * gradient G of the complex object: dL/dA = Re(conj(G) e^{i Phi}), dL/dPhi = Im(G conj(O)).
 * G is rounded to T first, so that sums that arrive rounded to float (the GPUs' narrow peer
 * sums) and sums in double give the same values.
 */
template <class T>
struct ObjectChainRule {
    EF_HD static EF_INLINE void apply(T a, T phi, double g_re, double g_im, double& g0, double& g1) {
        using std::cos;
        using std::sin;
        const double re = static_cast<double>(static_cast<T>(g_re));
        const double im = static_cast<double>(static_cast<T>(g_im));
        const double c = static_cast<double>(cos(phi));
        const double s = static_cast<double>(sin(phi));
        g0 = re * c + im * s;
        g1 = static_cast<double>(a) * (im * c - re * s);
    }
};

// ---- FFT loads ----------------------------------------------------------------------------

/**
 * The shifted-probe spectrum (ShiftedProbeSpectrum's value, the same operations in the same
 * order) computed where an inverse FFT reads it instead of read from a b x K x n tensor: the
 * window-resident passes' first stage (window_passes.hpp) calls at() for each element it loads.
 */
template <class T>
struct LoadShiftedProbe {
    PtychoDims d;
    const Cx<T>* probe_spec;
    const Cx<T>* ramp;
    /// The value for position j, mode k at frequency pixel (u, v).
    EF_HD EF_INLINE Cx<T> at(std::int64_t j, int k, int u, int v) const {
        const int n = d.h * d.w;
        const Cx<T> w = ramp_at(ramp, d, j, u, v);
        return probe_spec[static_cast<std::int64_t>(k) * n + u * d.w + v] * w * (T(1) / static_cast<T>(n));
    }
};

// ---- updates -----------------------------------------------------------------------------

/**
 * Adam, PyTorch's form: m <- b1 m + (1 - b1) g; v <- b2 v + (1 - b2) g^2;
 * theta <- theta - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
 * `step_size` = lr / (1 - b1^t), `inv_sqrt_bc2` = 1 / sqrt(1 - b2^t), computed once per step.
 */
template <class T>
struct AdamCoefficients {
    T step_size;
    T beta1;
    T beta2;
    T eps;
    T inv_sqrt_bc2;
    T grad_scale;  ///< the loss factor c (and anything else that multiplies every gradient)
};

template <class T>
EF_HD EF_INLINE void adam_step(T& theta, T& m, T& v, T g, const AdamCoefficients<T>& a) {
    using std::sqrt;
    g *= a.grad_scale;
    m = a.beta1 * m + (T(1) - a.beta1) * g;
    v = a.beta2 * v + (T(1) - a.beta2) * g * g;
    theta -= a.step_size * m / (sqrt(v) * a.inv_sqrt_bc2 + a.eps);
}

/// Adam over one real tensor, element i; optional clamp to [lo, hi] (object amplitude range).
/// G is the gradient's type (double for the summed buffer, T for a working copy).
template <class T, class G>
struct AdamUpdate {
    T* theta;
    T* m;
    T* v;
    const G* g;
    AdamCoefficients<T> a;
    T lo;
    T hi;
    const double* scale = nullptr;  ///< when set, the loss factor c in device memory replaces a.grad_scale
    T* copy = nullptr;              ///< when set, gets the new theta too
    EF_HD void operator()(std::int64_t i) const { step(i, g[i]); }
    /// The step of element i with gradient `gi` (ObjectStep passes converted gradients).
    EF_HD void step(std::int64_t i, G gi) const {
        AdamCoefficients<T> c = a;
        if (scale) c.grad_scale = static_cast<T>(*scale);
        adam_step(theta[i], m[i], v[i], static_cast<T>(gi), c);
        if (theta[i] < lo) theta[i] = lo;
        if (theta[i] > hi) theta[i] = hi;
        if (copy) copy[i] = theta[i];
    }
};

/// The complex object from its real parameters, element i.
template <class T>
struct ObjectFromParams {
    bool amplitude_phase;
    const T* p0;
    const T* p1;
    Cx<T>* object;
    EF_HD void operator()(std::int64_t i) const {
        object[i] = amplitude_phase ? polar(p0[i], p1[i]) : Cx<T>{p0[i], p1[i]};
    }
};

/**
 * A term of the probe modes' Gram matrix, in double: pair g = (k, l), l >= k, numbered row by
 * row (0: (0, 0), 1: (0, 1), ..., K: (1, 1), ...), pixel q: conj(P_k(q)) P_l(q).
 */
template <class T>
struct ProbeGram {
    const Cx<T>* probe;  ///< K x n
    std::int64_t n;
    int modes;
    EF_HD Sum2 operator()(std::int64_t g, std::int64_t q) const {
        std::int64_t k = 0;
        while (g >= modes - k) g -= modes - k++;
        const Cx<T> a = probe[k * n + q], b = probe[(k + g) * n + q];
        const double ar = a.re, ai = a.im, br = b.re, bi = b.im;
        return Sum2{ar * br + ai * bi, ar * bi - ai * br};
    }
};

/// New probe modes from old ones, element i = (m, q): out_m(q) = sum over l (ascending) of
/// mix(l, m) src_l(q), in double (mix: K x K row-major).
template <class T>
struct MixModes {
    const Cx<double>* mix;
    int modes;
    std::int64_t n;
    const Cx<T>* src;
    Cx<T>* out;
    EF_HD void operator()(std::int64_t i) const {
        const std::int64_t m = i / n, q = i - m * n;
        double re = 0, im = 0;
        for (int l = 0; l < modes; ++l) {
            const Cx<double> c = mix[l * modes + m];
            const Cx<T> s = src[l * n + q];
            re += c.re * static_cast<double>(s.re) - c.im * static_cast<double>(s.im);
            im += c.re * static_cast<double>(s.im) + c.im * static_cast<double>(s.re);
        }
        out[i] = Cx<T>{static_cast<T>(re), static_cast<T>(im)};
    }
};

/// One Adam step of both object parameters and the complex object from them, element i: the
/// three passes in one (the same arithmetic per element).
template <class T>
struct ObjectStep {
    AdamUpdate<T, double> p0, p1;
    ObjectFromParams<T> object;
    bool chain_rule = false;  ///< amplitude-phase: the buffer holds the complex object's gradient
    EF_HD void operator()(std::int64_t i) const {
        if (chain_rule) {
            double g0 = 0, g1 = 0;
            ObjectChainRule<T>::apply(p0.theta[i], p1.theta[i], p0.g[i], p1.g[i], g0, g1);
            p0.step(i, g0);
            p1.step(i, g1);
        } else {
            p0(i);
            p1(i);
        }
        object(i);
    }
};

/// dst[i] = v.
template <class U>
struct FillValue {
    U* dst;
    U v;
    EF_HD void operator()(std::int64_t i) const { dst[i] = v; }
};

/// Two independent element-wise passes in one launch: a's elements [0, na), then b's. (Where a
/// is LossScale, its kLanes lanes are then the first warp of the launch.)
template <class A, class B>
struct BothPasses {
    A a;
    std::int64_t na;
    B b;
    EF_HD void operator()(std::int64_t i) const {
        if (i < na) a(i);
        else b(i - na);
    }
};

/// dst[i] = src[i].
template <class U>
struct CopyValue {
    const U* src;
    U* dst;
    EF_HD void operator()(std::int64_t i) const { dst[i] = src[i]; }
};

/// Model intensity of the batch, row j, pixel q: sum_k |F_u psi|^2 / n (the simulator's output).
template <class T>
struct ModelIntensity {
    PtychoDims d;
    const Cx<T>* psi;
    T* out;  ///< b x n
    EF_HD void operator()(std::int64_t j, int q) const {
        const int n = d.h * d.w;
        T s = T(0);
        for (int k = 0; k < d.modes; ++k) s += abs2(psi[(j * d.modes + k) * n + q]);
        out[j * n + q] = s / static_cast<T>(n);
    }
};

}  // namespace ef::recon

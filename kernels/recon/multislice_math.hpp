// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/core/hd.hpp"
#include "kernels/recon/ptycho_math.hpp"

/**
 * Multislice: the object as S slices O_0 .. O_{S-1} (each obj_h x obj_w), the wave carried from
 * one slice to the next by Fresnel propagation over the slice thickness dz (the angular
 * spectrum method: FFT, multiply by the propagator, inverse FFT). For position j, mode k:
 *
 *   chi_0 = P_jk (the shifted probe),  e_s = chi_s O_s(crop_j + r),
 *   chi_{s+1} = F^-1[H F[e_s]],        exit wave psi = e_{S-1},
 *   H(fy, fx) = exp(-i pi F (fy^2 + fx^2)) inside the band limit, 0 outside,
 *
 * with f in cycles per pixel and the Fresnel number of a slice F = lambda dz / dx^2 (pixels),
 * so only that one number enters the model. The band limit is the usual anti-aliasing aperture
 * of multislice codes: frequencies up to 2/3 of Nyquist, |f| <= 1/3 cycle per pixel (a product
 * of two transmissions doubles the band; the cut keeps wrap-around out of it).
 *
 * Gradients (Wirtinger, as ptycho_math.hpp): from G_e_{S-1} (the exit-wave gradient the
 * single-slice code computes), for s = S-1 .. 0: G_O_s += conj(chi_s) G_e_s (PatchGradients with
 * chi_s as a per-position probe), G_chi_s = conj(O_s) G_e_s, and G_e_{s-1} = F^-1[conj(H)
 * F[G_chi_s]] (the adjoint of a unitary-on-its-band map); G_chi_0 is the shifted-probe gradient
 * the probe and position gradients start from, as in the single-slice model. With S = 1 none
 * of this runs: the single-slice sequence, bit for bit.
 */
namespace ef::recon {

/// The anti-aliasing band limit, cycles per pixel.
inline constexpr double kMultisliceBand = 1.0 / 3.0;

/**
 * The propagator of one slice, h x w in FFT order, divided by n (the unnormalised FFT pair's
 * factor folded in, as everywhere in ptycho_math.hpp): made once on the host in double (the
 * same table, so the same bits, for every backend), then converted to T.
 */
template <class T>
std::vector<Cx<T>> fresnel_propagator(int h, int w, double fresnel) {
    std::vector<Cx<T>> out(static_cast<std::size_t>(h) * static_cast<std::size_t>(w));
    const double inv_n = 1.0 / (static_cast<double>(h) * static_cast<double>(w));
    const double pi = 3.141592653589793238462643;
    for (int u = 0; u < h; ++u)
        for (int v = 0; v < w; ++v) {
            const double fy = fft_freq<double>(u, h), fx = fft_freq<double>(v, w);
            const double f2 = fy * fy + fx * fx;
            Cx<T> z{T(0), T(0)};
            if (f2 <= kMultisliceBand * kMultisliceBand) {
                const double phase = -pi * fresnel * f2;
                z = {static_cast<T>(std::cos(phase) * inv_n), static_cast<T>(std::sin(phase) * inv_n)};
            }
            out[static_cast<std::size_t>(u) * static_cast<std::size_t>(w) + static_cast<std::size_t>(v)] = z;
        }
    return out;
}

/**
 * Row r of b x K windows, pixel q: psi *= H(q) (`adjoint`: conj(H(q))), between a forward and an
 * inverse unnormalised FFT: one propagation over a slice, or its adjoint in the backward pass.
 * Bytes: 16 per element (psi read and written; the n-element table stays in cache). FLOPs: 6.
 */
template <class T>
struct PropagateSlice {
    int n;
    bool adjoint;
    const Cx<T>* propagator;  ///< n, FFT order, divided by n
    Cx<T>* psi;               ///< b x K x n spectra
    EF_HD void operator()(std::int64_t r, int q) const {
        const Cx<T> hq = propagator[q];
        const std::int64_t e = r * n + q;
        psi[e] = adjoint ? conj_mul(hq, psi[e]) : psi[e] * hq;
    }
};

/**
 * The wave arriving at slice s (s >= 1), row r = (j, k), pixel q: keeps chi_s = psi for the
 * backward pass and replaces psi by chi_s O_s(crop_j + q), the wave leaving the slice.
 * Bytes: 24 per element (psi read and written, chi written; object patches from cache).
 */
template <class T>
struct SliceTransmit {
    PtychoDims d;
    const Cx<T>* object;  ///< slice s, obj_h x obj_w
    const int* crop;      ///< b x 2
    Cx<T>* psi;           ///< b x K x n
    Cx<T>* chi;           ///< b x K x n: the incident wave of slice s
    EF_HD void operator()(std::int64_t r, int q) const {
        const int n = d.h * d.w;
        const std::int64_t j = r / d.modes;
        const std::int64_t row = crop[2 * j] + q / d.w;
        const std::int64_t col = crop[2 * j + 1] + q % d.w;
        const std::int64_t e = r * n + q;
        const Cx<T> c = psi[e];
        chi[e] = c;
        psi[e] = c * object[row * d.obj_w + col];
    }
};

}  // namespace ef::recon

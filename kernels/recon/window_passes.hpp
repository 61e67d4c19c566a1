// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>

#include "kernels/core/hd.hpp"
#include "kernels/recon/ptycho_math.hpp"
#include "kernels/recon/window_fft.hpp"

/**
 * Window-resident passes: one block per batch position j keeps one N x N window in fast memory
 * (a CUDA block's shared memory; a CPU thread's buffer) and runs every mode's transforms and
 * element-wise steps there, so a mini-batch moves each b x K x n tensor through global memory
 * only where it must: the far fields once written and once read, the probe-gradient spectra
 * once written and once read. The math is ptycho_math.hpp's (LoadShiftedProbe, modulus_pixel,
 * PatchGradients' sums, PositionGradientTerm::value, ProbeGradientSpectrum), the FFTs are
 * window_fft.hpp's; PtychoEngine::window_gradients sequences them.
 *
 * Layouts: far fields, modulus factors, patterns and probe-gradient spectra are in slot order
 * (wfft::Layout<N>, index s), real-space buffers in natural order (index q = u N + v).
 * Every per-element loop is `for (e = rank; e < n; e += size)`, the same in every loop of a
 * pass, so a thread reads back only what it wrote itself (no barrier needed for that) and a
 * barrier separates each use of the window.
 */
namespace ef::recon {

/// The object under pixel (u, v) of position j's window.
template <class T>
EF_HD EF_INLINE Cx<T> object_at(const PtychoDims& d, const Cx<T>* object, const int* crop, std::int64_t j, int u, int v) {
    return object[static_cast<std::int64_t>(crop[2 * j] + u) * d.obj_w + crop[2 * j + 1] + v];
}

/**
 * Modes of a position can be split over `groups` blocks (G dividing K): block id = j G + g
 * takes modes [g K / G, (g + 1) K / G), so a small batch (a rank's share on several GPUs) still
 * fills the device. Per-group partial sums go to b x G x n buffers and are added in group order
 * afterwards (WindowModulus, SumModeGroups); with G = 1 each block finishes its position. When
 * the G blocks of a position run as a thread-block cluster (Block::kClusters), WindowForward adds
 * the intensities in the cluster instead (modulus_in_cluster).
 */
struct ModeGroup {
    std::int64_t j;  ///< batch position
    int g;           ///< group
    int k0, k1;      ///< its modes [k0, k1)
    EF_HD ModeGroup(std::int64_t id, int groups, int modes)
        : j(id / groups), g(static_cast<int>(id - id / groups * groups)), k0(g * (modes / groups)),
          k1((g + 1) * (modes / groups)) {}
};

/**
 * Forward pass and loss of position j: for each mode k, the shifted probe (inverse FFT of
 * LoadShiftedProbe's spectrum, or the mode itself without sub-pixel shifts) times the object
 * patch, forward FFT, far field Psi_jk stored (slot order) and its intensity accumulated in
 * `factor`; then modulus_pixel against the pattern turns the intensity into the factor 2 g / n.
 * Returns the position's loss terms (valid on the block's rank 0). With mode groups, block
 * (j, g) accumulates its modes' intensity in `inten_part` and returns nothing; WindowModulus
 * finishes.
 *
 * The intensity sum lives in the block's scratch (kScratch values: shared memory on the GPU,
 * where the device has room beside the window) and goes to global memory once, as the factor
 * or the group's part; without scratch it is summed in place in global memory, each mode
 * reading and writing it (same values either way).
 */
template <class T, int N>
struct WindowForward {
    using Real = T;
    static constexpr int kN = N;
    static constexpr int kScratch = N * N;
    PtychoDims d;
    LossKind loss;
    bool subpixel;
    const Cx<T>* twiddles;    ///< N: wfft::make_twiddles
    const Cx<T>* probe;       ///< K x n (without sub-pixel shifts)
    const Cx<T>* probe_spec;  ///< K x n, F_u of the probe modes, slot order (SpectrumToSlots)
    const Cx<T>* ramp;        ///< b x (h + w)
    const Cx<T>* object;
    const int* crop;
    const float* patterns;           ///< the rank's share, slot order
    const std::int64_t* pattern_of;  ///< b
    Cx<T>* psi;                      ///< b x K x n: far fields, slot order
    T* factor;                       ///< b x n: 2 g / n, slot order
    Cx<T>* pshift;                   ///< b x K x n: the shifted probes P_jk (sub-pixel), for the backward pass
    int groups = 1;                  ///< mode groups G
    T* inten_part = nullptr;         ///< b x G x n partial intensities (G > 1)

    template <class Block>
    EF_HD Sum2 operator()(const Block& blk, std::int64_t id, Cx<T>* win, const Cx<T>* tw, T* scratch) const {
        using L = wfft::Layout<N>;
        constexpr int n = N * N;
        const T inv_n = T(1) / static_cast<T>(n);
        const ModeGroup mg(id, groups, d.modes);
        const std::int64_t j = mg.j;
        T* const home = groups == 1 ? factor + j * n : inten_part + id * n;  // where the sum ends up
        T* const inten = scratch ? scratch : home;
        const T start = mg.g == 0 ? static_cast<T>(kIntensityFloor) : T(0);
        auto obj = [&](int q) { return object_at(d, object, crop, j, q / N, q % N); };
        using Rows = wfft::Lines<T, N, true>;
        using Cols = wfft::Lines<T, N, false>;
        for (int k = mg.k0; k < mg.k1; ++k) {
            const std::int64_t r = j * d.modes + k;
            Cx<T>* out = psi + r * n;
            if (subpixel) {
                // inverse FFT of the shifted spectrum (computed as the first stage reads it), then
                // P_jk O_j between the last inverse and the first forward stage, in registers
                // LoadShiftedProbe::at's value; the spectrum in slot order, so neighbouring lanes
                // (neighbouring columns) read neighbouring elements
                const Cx<T>* spec = probe_spec + static_cast<std::int64_t>(k) * n;
                Cols::inverse_b_load(blk, win, tw, [&](int su, int sv) {
                    const Cx<T> w = ramp_at(ramp, d, j, L::freq_of_slot(su), L::freq_of_slot(sv));
                    return spec[su * N + sv] * w * inv_n;
                });
                blk.sync();
                Cols::inverse_a(blk, win);
                blk.sync();
                Rows::inverse_b(blk, win, tw);
                blk.sync();
                Cx<T>* pj = pshift + r * n;
                Rows::inverse_a_mid_forward_a(
                    blk, win, tw, [&](int u, int v) { return object_at(d, object, crop, j, u, v); },
                    [&](int u, int v, Cx<T> o, Cx<T> p) {
                        store_once(pj + u * N + v, p);
                        return p * o;
                    });
            } else {
                const Cx<T>* p = probe + static_cast<std::int64_t>(k) * n;
                wfft::stream<n>(
                    blk, [&](int q) { return p[q] * obj(q); }, [&](int q, Cx<T> v) { win[L::at(q)] = v; });
                blk.sync();
                Rows::forward_a(blk, win, tw);
            }
            wfft::forward_middle<T, N>(blk, win, tw);
            // the far field leaves from the last stage; ModulusGradient's sum: the floor, then
            // each mode in order
            Cols::forward_b_put(
                blk, win, [&](int su, int sv) { return k == mg.k0 ? start : inten[su * N + sv]; },
                [&](int su, int sv, T acc, Cx<T> z) {
                    const int s = su * N + sv;
                    store_once(out + s, z);
                    inten[s] = acc + abs2(z) * inv_n;
                });
            blk.sync();
        }
        if (groups > 1) {
            if constexpr (Block::kClusters) {  // launched as clusters of the position's groups
                if (groups == 2) return modulus_in_cluster<2>(blk, mg, inten);
                return modulus_in_cluster<4>(blk, mg, inten);
            } else {
                if (scratch) wfft::stream<n>(blk, [&](int s) { return inten[s]; }, [&](int s, T v) { home[s] = v; });
                return Sum2{};
            }
        }
        const float* data = patterns + pattern_of[j] * n;
        Sum2 terms;
        wfft::stream<n>(
            blk, [&](int s) { return Cx<T>{inten[s], static_cast<T>(data[s])}; },
            [&](int s, Cx<T> in) {
                T f;
                terms += modulus_pixel(loss, in.re, in.im, inv_n, f);
                home[s] = f;
            });
        return blk.sum(terms);
    }

    /**
     * With mode groups launched as a cluster of G blocks (block g of the cluster is group g, its
     * intensity in its shared memory, `inten`): WindowModulus inside the pass. Block g takes
     * slots [g n / G, (g + 1) n / G), adds the groups' partial intensities in group order (read
     * from the others' shared memory, the same sum as WindowModulus's) and writes the factor;
     * returns its slots' loss terms (the caller adds the groups' terms in group order).
     */
    template <int G, class Block>
    EF_HD Sum2 modulus_in_cluster(const Block& blk, const ModeGroup& mg, const T* inten) const {
        constexpr int n = N * N;
        constexpr int slice = n / G;
        const T inv_n = T(1) / static_cast<T>(n);
        blk.cluster_sync();  // every group's partial intensity is complete
        const T* part[G];
        for (int h = 0; h < G; ++h) part[h] = blk.peer(inten, h);
        const int s0 = mg.g * slice;
        const float* data = patterns + pattern_of[mg.j] * n + s0;
        T* const out = factor + mg.j * n + s0;
        Sum2 terms;
        wfft::stream<slice>(
            blk,
            [&](int s) {
                T in = part[0][s0 + s];
                for (int h = 1; h < G; ++h) in += part[h][s0 + s];
                return Cx<T>{in, static_cast<T>(data[s])};
            },
            [&](int s, Cx<T> in) {
                T f;
                terms += modulus_pixel(loss, in.re, in.im, inv_n, f);
                out[s] = f;
            });
        const Sum2 t = blk.sum(terms);
        blk.cluster_sync();  // the others have read this block's intensity: it may be reused
        return t;
    }
};

/**
 * With mode groups: position j, slot s: the groups' partial intensities added in order, then
 * modulus_pixel as in WindowForward (factor out, loss terms back; a reduction over s per j).
 */
template <class T, int N>
struct WindowModulus {
    LossKind loss;
    int groups;
    const T* inten_part;             ///< b x G x n
    const float* patterns;           ///< slot order
    const std::int64_t* pattern_of;  ///< b
    T* factor;                       ///< b x n
    EF_HD Sum2 operator()(std::int64_t j, std::int64_t e) const {
        constexpr int n = N * N;
        const int s = static_cast<int>(e);
        T intensity = inten_part[j * groups * n + s];
        for (int g = 1; g < groups; ++g) intensity += inten_part[(j * groups + g) * n + s];
        T f;
        const Sum2 terms = modulus_pixel(loss, intensity, static_cast<T>(patterns[pattern_of[j] * n + s]),
                                         T(1) / static_cast<T>(n), f);
        factor[j * n + s] = f;
        return terms;
    }
};

/// With mode groups: patch gradient of position j, pixel q, from the groups' parts in order.
template <class T>
struct SumModeGroups {
    int n;
    int groups;
    const Cx<T>* part;  ///< b x G x n
    Cx<T>* out;         ///< b x n
    EF_HD void operator()(std::int64_t j, int q) const {
        Cx<T> acc = part[j * groups * n + q];
        for (int g = 1; g < groups; ++g) acc = acc + part[(j * groups + g) * n + q];
        out[j * n + q] = acc;
    }
};

/**
 * Backward pass of position j, per mode k: G_psi = inverse FFT of Psi_jk times the factor
 * (ModulusGradient's product, made as the first stage loads it); the object-patch gradient sum_k conj(P_jk) G_psi (PatchGradients' sum, kept in
 * `patch_grad`) and G_P_jk = conj(O_j) G_psi; with sub-pixel shifts its forward FFT, stored
 * (slot order) for ProbeSpectrumFromSlots and used at once for the position-gradient terms;
 * without them G_P_jk itself (natural order, for ProbeGradientDirect). The shifted probes come
 * from the forward pass (`pshift`). Returns the position-gradient terms (rank 0). With mode
 * groups, block (j, g) writes its modes' patch-gradient sum to row j G + g of `patch_grad`.
 */
template <class T, int N>
struct WindowBackward {
    using Real = T;
    static constexpr int kN = N;
    static constexpr int kScratch = N * N;  ///< the position's factor, read by every mode
    PtychoDims d;
    bool subpixel;
    bool probe_grad;
    bool position_grad;
    const Cx<T>* twiddles;
    const Cx<T>* probe;
    const Cx<T>* probe_spec;  ///< K x n, slot order (SpectrumToSlots)
    const Cx<T>* ramp;
    const Cx<T>* object;
    const int* crop;
    const T* factor;      ///< b x n, slot order
    Cx<T>* psi;           ///< in: far fields; out: F_u G_P_jk (slot order) or G_P_jk (natural)
    const Cx<T>* pshift;  ///< b x K x n shifted probes (sub-pixel)
    Cx<T>* patch_grad;    ///< b x G x n
    int groups = 1;

    template <class Block>
    EF_HD Sum2 operator()(const Block& blk, std::int64_t id, Cx<T>* win, const Cx<T>* tw, T* scratch) const {
        using L = wfft::Layout<N>;
        constexpr int n = N * N;
        const bool gp_fft = subpixel && (probe_grad || position_grad);
        const ModeGroup mg(id, groups, d.modes);
        const std::int64_t j = mg.j;
        const T* fac = factor + j * n;
        if (scratch) {  // read once into the block's scratch instead of once per mode
            wfft::stream<n>(blk, [&](int s) { return fac[s]; }, [&](int s, T v) { scratch[s] = v; });
            fac = scratch;
            blk.sync();
        }
        Cx<T>* patch = patch_grad + id * n;
        Sum2 pos;
        using Rows = wfft::Lines<T, N, true>;
        using Cols = wfft::Lines<T, N, false>;
        struct In {
            Cx<T> p, o, acc;
        };
        struct Pos {
            Cx<T> spec, w;
        };
        for (int k = mg.k0; k < mg.k1; ++k) {
            const std::int64_t r = j * d.modes + k;
            Cx<T>* row = psi + r * n;
            // G_psi: inverse FFT of the far field times the factor, read by the first stage
            Cols::inverse_b_load(blk, win, tw, [&](int su, int sv) {
                const int s = su * N + sv;
                return load_once(row + s) * fac[s];
            });
            blk.sync();
            Cols::inverse_a(blk, win);
            blk.sync();
            Rows::inverse_b(blk, win, tw);
            blk.sync();
            const Cx<T>* p = subpixel ? pshift + r * n : probe + static_cast<std::int64_t>(k) * n;
            auto fetch = [&](int u, int v) {
                const int q = u * N + v;
                return In{subpixel ? load_once(p + q) : p[q], object_at(d, object, crop, j, u, v),
                          k == mg.k0 ? Cx<T>{T(0), T(0)} : patch[q]};
            };
            if (gp_fft) {
                // PatchGradients' sum over modes in order (0 + x is x exactly); G_P = conj(O) G_psi
                Rows::inverse_a(blk, win);
                blk.sync();
                wfft::stream<n>(
                    blk, [&](int q) { return fetch(q / N, q % N); },
                    [&](int q, const In& in) {
                        const Cx<T> g = win[L::at(q)];
                        patch[q] = in.acc + conj_mul(in.p, g);
                        win[L::at(q)] = conj_mul(in.o, g);
                    });
                blk.sync();
                Rows::forward_a(blk, win, tw);
                wfft::forward_middle<T, N>(blk, win, tw);
                const Cx<T>* spec = probe_spec + static_cast<std::int64_t>(k) * n;
                Cols::forward_b_put(
                    blk, win,
                    [&](int su, int sv) {
                        if (!position_grad) return Pos{};
                        return Pos{spec[su * N + sv], ramp_at(ramp, d, j, L::freq_of_slot(su), L::freq_of_slot(sv))};
                    },
                    [&](int su, int sv, const Pos& in, Cx<T> z) {
                        if (probe_grad) store_once(row + su * N + sv, z);
                        if (position_grad) {
                            const int fu = L::freq_of_slot(su), fv = L::freq_of_slot(sv);
                            pos += PositionGradientTerm<T>::value(z, in.spec, in.w, fft_freq<T>(fu, N), fft_freq<T>(fv, N), n);
                        }
                    });
            } else {
                Rows::inverse_a_put(blk, win, fetch, [&](int u, int v, const In& in, Cx<T> g) {
                    const int q = u * N + v;
                    patch[q] = in.acc + conj_mul(in.p, g);
                    if (probe_grad) row[q] = conj_mul(in.o, g);
                });
            }
            blk.sync();
        }
        return blk.sum(pos);
    }
};

/// The probe modes' spectra (K x n, frequency order) copied into slot order (wfft::Layout), for
/// the window passes: their stages visit slots, and read the copy with neighbouring lanes on
/// neighbouring elements (the frequency-order gather touched a sector per lane).
template <class T, int N>
struct SpectrumToSlots {
    const Cx<T>* spec;
    Cx<T>* slots;
    EF_HD void operator()(std::int64_t i) const {
        constexpr int n = N * N;
        const std::int64_t k = i / n;
        const int s = static_cast<int>(i - k * n);
        slots[i] = spec[k * n + wfft::Layout<N>::freq_of_slot2(s)];
    }
};

/**
 * ProbeGradientSpectrum over spectra in slot order: for i = (k, s), position j's
 * conj(ramp_j) F_u G_P_jk summed in batch order in double, written at frequency f(s) of mode k.
 * Element t does the slot pair i = 2t, 2t + 1 (elements() = K n / 2 of them): one 16-byte load of
 * both per position and two independent sums, twice the bytes in flight of one slot per thread,
 * which waited on memory (207 -> 178 us per batch of 256 on an H200); each sum's terms and order
 * are unchanged. Four slots per thread were slower (383 us; perf/RESULTS.md, sixth session).
 */
template <class T, int N>
struct ProbeSpectrumFromSlots {
    ProbeGradientSpectrum<T> spec;
    struct alignas(2 * sizeof(Cx<T>)) Pair {
        Cx<T> v[2];
    };
    static std::int64_t elements(const PtychoDims& d) { return static_cast<std::int64_t>(d.modes) * N * N / 2; }
    EF_HD void operator()(std::int64_t t) const {
        using L = wfft::Layout<N>;
        constexpr int n = N * N;
        const std::int64_t i = 2 * t;  // n is even: both slots are mode k's
        const int k = static_cast<int>(i / n);
        const int s = static_cast<int>(i - static_cast<std::int64_t>(k) * n);
        const int f0 = L::freq_of_slot2(s), f1 = L::freq_of_slot2(s + 1);
        const int fu0 = f0 / N, fv0 = f0 % N, fu1 = f1 / N, fv1 = f1 % N;
        const std::int64_t kn_pairs = static_cast<std::int64_t>(spec.d.modes) * n / 2;
        Cx<double> acc0{0.0, 0.0}, acc1{0.0, 0.0};
        for (std::int64_t j = 0; j < spec.batch; ++j) {
#ifdef __CUDA_ARCH__
            const Pair p = reinterpret_cast<const Pair*>(spec.psi)[j * kn_pairs + t];  // device memory: 256-byte aligned
#else
            const Pair p{{spec.psi[2 * (j * kn_pairs + t)], spec.psi[2 * (j * kn_pairs + t) + 1]}};
#endif
            const Cx<T> z0 = conj_mul(ramp_at(spec.ramp, spec.d, j, fu0, fv0), p.v[0]);
            const Cx<T> z1 = conj_mul(ramp_at(spec.ramp, spec.d, j, fu1, fv1), p.v[1]);
            acc0.re += static_cast<double>(z0.re);
            acc0.im += static_cast<double>(z0.im);
            acc1.re += static_cast<double>(z1.re);
            acc1.im += static_cast<double>(z1.im);
        }
        spec.finish(static_cast<std::int64_t>(k) * n + f0, acc0);
        spec.finish(static_cast<std::int64_t>(k) * n + f1, acc1);
    }
};

}  // namespace ef::recon

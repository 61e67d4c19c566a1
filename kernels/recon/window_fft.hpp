// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/core/hd.hpp"
#include "kernels/recon/ptycho_math.hpp"

/**
 * A 2-D FFT of one N x N window held by one thread block (the window-resident passes of
 * kernels/recon/window_passes.hpp), written once as EF_HD code over a Block: the CUDA block
 * (threads, __syncthreads, shared memory) or SerialBlock (one host thread running every job in
 * turn, the same arithmetic in the same order per element: how the CPU tests check it).
 *
 * Each 1-D transform of N = R1 x R2 points (R1, R2 <= 16) is two in-place stages over a line:
 *  - forward (decimation in time), stage A, job t < R2: the R1-point DFT of x[t + R2 m] times
 *    W_N^{t k1}, back into slots t + R2 k1; stage B, job k1 < R1: the R2-point DFT of slots
 *    t + R2 k1 (contiguous), back into the same slots.
 *  - Slot s = k2 + R2 k1 then holds frequency f = k1 + R1 k2 (WindowLayout), a digit-reversed
 *    order that no consumer needs undone: element-wise steps map slots to frequencies, and the
 *    inverse transform (decimation in frequency: stage B then A with conjugate twiddles) reads
 *    that order and writes natural order. Every stage reads and writes the same slots, so a
 *    stage needs no barrier inside it, only between stages.
 * Unnormalised both ways (cuFFT's and FFTW's convention). Twiddles W_N^k = exp(-2 pi i k / N)
 * come from a table made once in double (make_twiddles); the small DFTs use exact constants.
 *
 * Storage: row u at u * (N + 1): the pad column makes row jobs (one lane per row) and column
 * jobs (one lane per column) free of shared-memory bank conflicts.
 */
namespace ef::recon::wfft {

/// Window sizes the passes are built for, and their two-stage split.
template <int N>
struct Radix {
    static_assert(N == 32 || N == 64 || N == 128, "window-resident FFT: N = 32, 64 or 128");
    static constexpr int R1 = N == 128 ? 16 : 8;
    static constexpr int R2 = N / R1;
    static constexpr int S = N + 1;  ///< row stride of the stored window
    static constexpr int kStored = N * S;
};

/// Where the forward transform leaves each frequency of an N-point line (and back).
template <int N>
struct Layout {
    static constexpr int R1 = Radix<N>::R1, R2 = Radix<N>::R2;
    EF_HD static EF_INLINE int freq_of_slot(int s) { return s / R2 + R1 * (s % R2); }
    EF_HD static EF_INLINE int slot_of_freq(int f) { return f / R1 + R2 * (f % R1); }
    /// 2-D: window pixel index q = u * N + v, either way.
    EF_HD static EF_INLINE int freq_of_slot2(int s) { return freq_of_slot(s / N) * N + freq_of_slot(s % N); }
    EF_HD static EF_INLINE int slot_of_freq2(int f) { return slot_of_freq(f / N) * N + slot_of_freq(f % N); }
    /// Stored position of window element q (row-major index over N x N).
    EF_HD static EF_INLINE int at(int q) { return (q / N) * Radix<N>::S + q % N; }
};

/// cos(2 pi j / 16), exact to double, for the in-register DFTs.
EF_HD constexpr double cos16(int j) {
    switch (j & 15) {
        case 0: return 1.0;
        case 1: case 15: return 0.92387953251128675613;
        case 2: case 14: return 0.70710678118654752440;
        case 3: case 13: return 0.38268343236508977173;
        case 4: case 12: return 0.0;
        case 5: case 11: return -0.38268343236508977173;
        case 6: case 10: return -0.70710678118654752440;
        case 7: case 9: return -0.92387953251128675613;
        default: return -1.0;
    }
}

/// x * y + z, fused on the device (one rounding, one instruction; the host build rounds twice).
template <class T>
EF_HD EF_INLINE T mul_add(T x, T y, T z) {
#ifdef __CUDA_ARCH__
    if constexpr (sizeof(T) == sizeof(float)) return fmaf(x, y, z);
    else return fma(x, y, z);
#else
    return x * y + z;
#endif
}

/// a * (c + i s).
template <class T>
EF_HD EF_INLINE Cx<T> rot(Cx<T> a, T c, T s) {
    return {mul_add(a.re, c, -(a.im * s)), mul_add(a.re, s, a.im * c)};
}

/// a * exp(sign 2 pi i k / R), k a constant after unrolling: multiplications by 1 and -i
/// (and friends) are exchanges, so they cost nothing and round nothing; odd multiples of pi/4
/// are a sum and a difference scaled by sqrt(1/2).
template <class T, int R, int Sign>
EF_HD EF_INLINE Cx<T> rotate(Cx<T> a, int k) {
    const int j = (k * (16 / R)) & 15;
    if (j == 0) return a;
    if (j == 8) return {-a.re, -a.im};
    if (j == 4) return Sign < 0 ? Cx<T>{a.im, -a.re} : Cx<T>{-a.im, a.re};   // times -i or +i
    if (j == 12) return Sign < 0 ? Cx<T>{-a.im, a.re} : Cx<T>{a.im, -a.re};  // times +i or -i
    const T c = static_cast<T>(cos16(j));
    if ((j & 3) == 2) {  // |sin| = |cos|: r = sin / cos = +-1
        const T r = static_cast<T>(Sign * cos16(j - 4) / cos16(j));
        return {c * (a.re - r * a.im), c * (r * a.re + a.im)};
    }
    return rot(a, c, static_cast<T>(Sign) * static_cast<T>(cos16(j - 4)));  // sign * sin(2 pi j / 16)
}

/// In-register R-point DFT (R = 1 ... 16), natural order in and out: out[k] = sum_m a[m]
/// exp(sign 2 pi i m k / R), by radix-2 decimation in time.
template <class T, int R, int Sign>
EF_HD EF_INLINE void small_dft(Cx<T>* a) {
    if constexpr (R == 2) {
        const Cx<T> x = a[0], y = a[1];
        a[0] = {x.re + y.re, x.im + y.im};
        a[1] = {x.re - y.re, x.im - y.im};
    } else if constexpr (R > 2) {
        Cx<T> e[R / 2], o[R / 2];
        EF_UNROLL
        for (int i = 0; i < R / 2; ++i) {
            e[i] = a[2 * i];
            o[i] = a[2 * i + 1];
        }
        small_dft<T, R / 2, Sign>(e);
        small_dft<T, R / 2, Sign>(o);
        EF_UNROLL
        for (int k = 0; k < R / 2; ++k) {
            const Cx<T> t = rotate<T, R, Sign>(o[k], k);
            a[k] = {e[k].re + t.re, e[k].im + t.im};
            a[k + R / 2] = {e[k].re - t.re, e[k].im - t.im};
        }
    }
}

/// W_N^k = exp(-2 pi i k / N), k < N, computed in double: the table the stages read.
template <class T>
void make_twiddles(int n, Cx<T>* out) {
    for (int k = 0; k < n; ++k) {
        const double a = 6.283185307179586476925 * static_cast<double>(k) / static_cast<double>(n);
        out[k] = {static_cast<T>(std::cos(a)), static_cast<T>(-std::sin(a))};
    }
}

/// One thread: runs every job of a stage itself (the CPU's block). A Block has a compile-time
/// size kSize, so per-thread loops have fixed trip counts and unroll.
struct SerialBlock {
    static constexpr int kSize = 1;
    static constexpr bool kClusters = false;  ///< blocks in clusters (cluster_sync, peer): GPU only
    static constexpr int kStreamBytes = 32;  ///< loaded bytes in flight per thread: stream()
    static constexpr int kFetchBytes = 48;   ///< and the hooked stages' fetches (Lines::fetched)
    EF_HD int rank() const { return 0; }
    EF_HD void sync() const {}
    EF_HD Sum2 sum(Sum2 s) const { return s; }
};

/// f(J) for this thread's jobs J = rank, rank + kSize, ... < count, unrolled.
template <int count, class Block, class F>
EF_HD EF_INLINE void jobs(const Block& blk, const F& f) {
    constexpr int per = (count + Block::kSize - 1) / Block::kSize;
    EF_NO_UNROLL
    for (int i = 0; i < per; ++i) {
        const int J = blk.rank() + i * Block::kSize;
        if (per * Block::kSize == count || J < count) f(J);
    }
}

/// The largest power of two <= x (x >= 1).
constexpr int floor_pow2(int x) {
    int p = 1;
    while (2 * p <= x) p *= 2;
    return p;
}

/**
 * For this thread's elements e (as jobs<n>): v = load(e) for a few elements at once, then
 * store(e, v) for each. Loads from global memory issue together instead of each waiting for the
 * store before it (the compiler cannot move a load past a store through another pointer).
 */
template <int n, class Block, class Load, class Store>
EF_HD EF_INLINE void stream(const Block& blk, const Load& load, const Store& store) {
    static_assert(n % Block::kSize == 0, "elements per block a multiple of its size");
    constexpr int per = n / Block::kSize;
    using V = decltype(load(0));
    constexpr int bytes = Block::kStreamBytes;  // loaded values in flight per thread
    constexpr int by_size = sizeof(V) >= bytes ? 1 : floor_pow2(static_cast<int>(bytes / sizeof(V)));
    constexpr int chunk = per < by_size ? per : by_size;
    static_assert(per % chunk == 0, "whole chunks");
    for (int i0 = 0; i0 < per; i0 += chunk) {
        V v[chunk];
        EF_UNROLL
        for (int c = 0; c < chunk; ++c) v[c] = load(blk.rank() + (i0 + c) * Block::kSize);
        EF_UNROLL
        for (int c = 0; c < chunk; ++c) store(blk.rank() + (i0 + c) * Block::kSize, v[c]);
    }
}

/// Values of V fetched at once ahead of their use (Bytes' worth, a power of two dividing
/// count): the loads issue together instead of each waiting behind a store.
template <class V, int Count, int Bytes>
constexpr int fetch_chunk() {
    constexpr int by_size = sizeof(V) >= Bytes ? 1 : floor_pow2(static_cast<int>(Bytes / sizeof(V)));
    return Count < by_size ? Count : by_size;
}

/// t * W_N^{e} (Sign < 0) or t * conj(W_N^{e}) (Sign > 0).
template <class T, int Sign>
EF_HD EF_INLINE Cx<T> twiddle(Cx<T> a, const Cx<T>* tw, int e) {
    const Cx<T> w = tw[e];
    return rot(a, w.re, Sign < 0 ? w.im : -w.im);
}

/**
 * The stages over all N lines of the window: rows (`Rows`, line stride S, element stride 1) or
 * columns (line stride 1, element stride S). Job J -> line J % N, so neighbouring lanes take
 * neighbouring lines.
 */
template <class T, int N, bool Rows>
struct Lines {
    static constexpr int R1 = Radix<N>::R1, R2 = Radix<N>::R2, S = Radix<N>::S;
    static constexpr int kLine = Rows ? S : 1;
    static constexpr int kElem = Rows ? 1 : S;
    /// Window row and column of element idx of a line.
    EF_HD static EF_INLINE int row(int line, int idx) { return Rows ? line : idx; }
    EF_HD static EF_INLINE int col(int line, int idx) { return Rows ? idx : line; }
    /**
     * For m in [0, R): use(m, row, col, fetch(row, col)) at the line's element idx(m), the
     * fetches issued Bytes' worth at a time ahead of their uses (loads in flight together).
     */
    template <int R, int Bytes, class Idx, class Fetch, class Use>
    EF_HD static EF_INLINE void fetched(int line, const Idx& idx, const Fetch& fetch, const Use& use) {
        using V = decltype(fetch(0, 0));
        constexpr int chunk = fetch_chunk<V, R, Bytes>();
        EF_UNROLL
        for (int m0 = 0; m0 < R; m0 += chunk) {
            V f[chunk];
            EF_UNROLL
            for (int c = 0; c < chunk; ++c) f[c] = fetch(row(line, idx(m0 + c)), col(line, idx(m0 + c)));
            EF_UNROLL
            for (int c = 0; c < chunk; ++c) use(m0 + c, row(line, idx(m0 + c)), col(line, idx(m0 + c)), f[c]);
        }
    }

    /**
     * The stages fused with the element-wise steps around them (hooks get the element's window
     * row and column: slot coordinates in the frequency domain, pixels in real space), so a
     * value computed from global memory enters, or a result leaves, without a pass of its own.
     */
    /// Inverse stage B with its input computed: load(row, col).
    template <class Block, class Load>
    EF_HD static void inverse_b_load(const Block& blk, Cx<T>* win, const Cx<T>* tw, const Load& load) {
        jobs<N * R1>(blk, [&](int J) {
            const int line = J % N, k1 = J / N;
            Cx<T>* x = win + line * kLine + k1 * R2 * kElem;
            Cx<T> a[R2];
            EF_UNROLL
            for (int t = 0; t < R2; ++t) a[t] = load(row(line, k1 * R2 + t), col(line, k1 * R2 + t));
            small_dft<T, R2, 1>(a);
            EF_UNROLL
            for (int t = 0; t < R2; ++t) x[t * kElem] = t == 0 ? a[0] : twiddle<T, 1>(a[t], tw, t * k1);
        });
    }
    /// Forward stage B with its outputs handed over: f = fetch(row, col), put(row, col, f, value).
    template <class Block, class Fetch, class Put>
    EF_HD static void forward_b_put(const Block& blk, Cx<T>* win, const Fetch& fetch, const Put& put) {
        jobs<N * R1>(blk, [&](int J) {
            const int line = J % N, k1 = J / N;
            const Cx<T>* x = win + line * kLine + k1 * R2 * kElem;
            Cx<T> a[R2];
            EF_UNROLL
            for (int t = 0; t < R2; ++t) a[t] = x[t * kElem];
            small_dft<T, R2, -1>(a);
            fetched<R2, Block::kFetchBytes>(
                line, [&](int t) { return k1 * R2 + t; }, fetch,
                [&](int t, int r, int c, const auto& f) { put(r, c, f, a[t]); });
        });
    }
    /**
     * Inverse stage A of one job's elements (a: R1 values from x), then for each element in
     * natural order a[m] = apply(row, col, fetch(row, col), a[m]), fetches a few at a time.
     */
    template <int Bytes, class Fetch, class Apply>
    EF_HD static EF_INLINE void inverse_a_hooked(const Cx<T>* x, int line, int t, Cx<T>* a, const Fetch& fetch,
                                                 const Apply& apply) {
        EF_UNROLL
        for (int m = 0; m < R1; ++m) a[m] = x[m * R2 * kElem];
        small_dft<T, R1, 1>(a);
        fetched<R1, Bytes>(
            line, [&](int m) { return t + R2 * m; }, fetch,
            [&](int m, int r, int c, const auto& f) { a[m] = apply(r, c, f, a[m]); });
    }
    /// The job mapping of the hooked row stages: t fastest over lanes (see inverse_a_mid_forward_a).
    EF_HD static EF_INLINE void hooked_job(int J, int& line, int& t) {
        line = Rows ? J / R2 : J % N;
        t = Rows ? J % R2 : J / N;
    }
    /**
     * Inverse stage A, value = mid(row, col, fetch(row, col), value) in natural order, then
     * forward stage A: the same elements per job, so they never leave the registers. Row jobs
     * go t-fastest over lanes here (8 lanes cover 8 neighbouring pixels of a row), so the hooks'
     * global accesses coalesce; the price is a 2-way bank conflict in this stage.
     */
    template <class Block, class Fetch, class Mid>
    EF_HD static void inverse_a_mid_forward_a(const Block& blk, Cx<T>* win, const Cx<T>* tw, const Fetch& fetch,
                                              const Mid& mid) {
        jobs<N * R2>(blk, [&](int J) {
            int line, t;
            hooked_job(J, line, t);
            Cx<T>* x = win + line * kLine + t * kElem;
            Cx<T> a[R1];
            inverse_a_hooked<Block::kFetchBytes>(x, line, t, a, fetch, mid);
            small_dft<T, R1, -1>(a);
            EF_UNROLL
            for (int k = 0; k < R1; ++k) x[k * R2 * kElem] = k == 0 ? a[0] : twiddle<T, -1>(a[k], tw, t * k);
        });
    }
    /// Inverse stage A with its outputs handed over (natural order): put(row, col, fetch(..), value).
    template <class Block, class Fetch, class Put>
    EF_HD static void inverse_a_put(const Block& blk, const Cx<T>* win, const Fetch& fetch, const Put& put) {
        jobs<N * R2>(blk, [&](int J) {
            int line, t;
            hooked_job(J, line, t);
            Cx<T> a[R1];
            inverse_a_hooked<Block::kFetchBytes>(win + line * kLine + t * kElem, line, t, a, fetch, [&](int r, int c, const auto& f, Cx<T> v) {
                put(r, c, f, v);
                return v;
            });
        });
    }

    /// Forward stage A (R1-point DFTs, then twiddles).
    template <class Block>
    EF_HD static void forward_a(const Block& blk, Cx<T>* win, const Cx<T>* tw) {
        stage_a<-1>(blk, win, tw);
    }
    /// Forward stage B (R2-point DFTs over contiguous slots).
    template <class Block>
    EF_HD static void forward_b(const Block& blk, Cx<T>* win) {
        stage_b<-1>(blk, win, nullptr);
    }
    /// Inverse stage B (from slot order: R2-point inverse DFTs, then conjugate twiddles).
    template <class Block>
    EF_HD static void inverse_b(const Block& blk, Cx<T>* win, const Cx<T>* tw) {
        stage_b<1>(blk, win, tw);
    }
    /// Inverse stage A (R1-point inverse DFTs into natural order).
    template <class Block>
    EF_HD static void inverse_a(const Block& blk, Cx<T>* win) {
        stage_a<1>(blk, win, nullptr);
    }

   private:
    /// R1-point DFTs in direction Dir over slots R2 apart; the forward stage twiddles its outputs.
    template <int Dir, class Block>
    EF_HD static void stage_a(const Block& blk, Cx<T>* win, const Cx<T>* tw) {
        jobs<N * R2>(blk, [&](int J) {
            const int line = J % N, t = J / N;
            Cx<T>* x = win + line * kLine + t * kElem;
            Cx<T> a[R1];
            EF_UNROLL
            for (int m = 0; m < R1; ++m) a[m] = x[m * R2 * kElem];
            small_dft<T, R1, Dir>(a);
            EF_UNROLL
            for (int k = 0; k < R1; ++k) {
                if constexpr (Dir < 0) x[k * R2 * kElem] = k == 0 ? a[0] : twiddle<T, -1>(a[k], tw, t * k);
                else x[k * R2 * kElem] = a[k];
            }
        });
    }
    /// R2-point DFTs in direction Dir over contiguous slots; the inverse stage twiddles its outputs.
    template <int Dir, class Block>
    EF_HD static void stage_b(const Block& blk, Cx<T>* win, const Cx<T>* tw) {
        jobs<N * R1>(blk, [&](int J) {
            const int line = J % N, k1 = J / N;
            Cx<T>* x = win + line * kLine + k1 * R2 * kElem;
            Cx<T> a[R2];
            EF_UNROLL
            for (int t = 0; t < R2; ++t) a[t] = x[t * kElem];
            small_dft<T, R2, Dir>(a);
            EF_UNROLL
            for (int t = 0; t < R2; ++t) {
                if constexpr (Dir > 0) x[t * kElem] = t == 0 ? a[0] : twiddle<T, 1>(a[t], tw, t * k1);
                else x[t * kElem] = a[t];
            }
        });
    }
};

/// The forward FFT after its first row stage, up to (not including) its last column stage:
/// the middle every hooked forward transform shares.
template <class T, int N, class Block>
EF_HD void forward_middle(const Block& blk, Cx<T>* win, const Cx<T>* tw) {
    blk.sync();
    Lines<T, N, true>::forward_b(blk, win);
    blk.sync();
    Lines<T, N, false>::forward_a(blk, win, tw);
    blk.sync();
}

/// Forward 2-D FFT of the stored window: natural order in, slot order (Layout) out.
template <class T, int N, class Block>
EF_HD void forward(const Block& blk, Cx<T>* win, const Cx<T>* tw) {
    Lines<T, N, true>::forward_a(blk, win, tw);
    forward_middle<T, N>(blk, win, tw);
    Lines<T, N, false>::forward_b(blk, win);
    blk.sync();
}

/// Inverse 2-D FFT (unnormalised): slot order in, natural order out.
template <class T, int N, class Block>
EF_HD void inverse(const Block& blk, Cx<T>* win, const Cx<T>* tw) {
    Lines<T, N, false>::inverse_b(blk, win, tw);
    blk.sync();
    Lines<T, N, false>::inverse_a(blk, win);
    blk.sync();
    Lines<T, N, true>::inverse_b(blk, win, tw);
    blk.sync();
    Lines<T, N, true>::inverse_a(blk, win);
    blk.sync();
}

}  // namespace ef::recon::wfft

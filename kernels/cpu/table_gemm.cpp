// SPDX-License-Identifier: MIT
#include "kernels/cpu/table_gemm.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ef::cpu {
namespace {

constexpr int kMr = 4;  // rows per panel
constexpr int kNr = 8;  // columns per panel

/// c[4][8] = sum_k a[k][4] (x) w[k][8], k ascending, one rounding per step (fma).
void micro_generic(const double* a, const double* w, int K, double* c) {
    double acc[kMr][kNr] = {};
    for (int k = 0; k < K; ++k)
        for (int i = 0; i < kMr; ++i)
            for (int j = 0; j < kNr; ++j) acc[i][j] = std::fma(a[k * kMr + i], w[k * kNr + j], acc[i][j]);
    for (int i = 0; i < kMr; ++i)
        for (int j = 0; j < kNr; ++j) c[i * kNr + j] = acc[i][j];
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) void micro_avx2(const double* a, const double* w, int K, double* c) {
    __m256d c00 = _mm256_setzero_pd(), c01 = _mm256_setzero_pd();
    __m256d c10 = _mm256_setzero_pd(), c11 = _mm256_setzero_pd();
    __m256d c20 = _mm256_setzero_pd(), c21 = _mm256_setzero_pd();
    __m256d c30 = _mm256_setzero_pd(), c31 = _mm256_setzero_pd();
    for (int k = 0; k < K; ++k) {
        const __m256d w0 = _mm256_loadu_pd(w + k * kNr);
        const __m256d w1 = _mm256_loadu_pd(w + k * kNr + 4);
        const double* ak = a + k * kMr;
        __m256d x = _mm256_broadcast_sd(ak + 0);
        c00 = _mm256_fmadd_pd(x, w0, c00);
        c01 = _mm256_fmadd_pd(x, w1, c01);
        x = _mm256_broadcast_sd(ak + 1);
        c10 = _mm256_fmadd_pd(x, w0, c10);
        c11 = _mm256_fmadd_pd(x, w1, c11);
        x = _mm256_broadcast_sd(ak + 2);
        c20 = _mm256_fmadd_pd(x, w0, c20);
        c21 = _mm256_fmadd_pd(x, w1, c21);
        x = _mm256_broadcast_sd(ak + 3);
        c30 = _mm256_fmadd_pd(x, w0, c30);
        c31 = _mm256_fmadd_pd(x, w1, c31);
    }
    _mm256_storeu_pd(c + 0, c00);
    _mm256_storeu_pd(c + 4, c01);
    _mm256_storeu_pd(c + 8, c10);
    _mm256_storeu_pd(c + 12, c11);
    _mm256_storeu_pd(c + 16, c20);
    _mm256_storeu_pd(c + 20, c21);
    _mm256_storeu_pd(c + 24, c30);
    _mm256_storeu_pd(c + 28, c31);
}
#endif

using Micro = void (*)(const double*, const double*, int, double*);

Micro pick_micro() {
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return micro_avx2;
#endif
    return micro_generic;
}

}  // namespace

void pack_into(const double* table, int rows, int width, double* dst) {
    const int panels = (rows + kMr - 1) / kMr;
    for (int p = 0; p < panels; ++p)
        for (int i = 0; i < kMr; ++i) {
            double* out = dst + static_cast<size_t>(p) * width * kMr;
            if (p * kMr + i >= rows) {
                for (int k = 0; k < width; ++k) out[k * kMr + i] = 0.0;
                continue;
            }
            const double* row = table + static_cast<size_t>(p * kMr + i) * width;
            for (int k = 0; k < width; ++k) out[k * kMr + i] = row[k];
        }
}

PackedTable pack_table(const double* table, int rows, int width) {
    const int panels = (rows + kMr - 1) / kMr;
    auto own = std::make_shared<std::vector<double>>(static_cast<size_t>(panels) * width * kMr);
    pack_into(table, rows, width, own->data());
    return PackedTable{rows, width, std::shared_ptr<const double>(own, own->data())};
}

PackedTable packed_view(const double* a, int rows, int width, std::shared_ptr<const void> keep) {
    return PackedTable{rows, width, std::shared_ptr<const double>(std::move(keep), a)};
}

void table_gemm(const PackedTable& t, const double* W, long cols, int threads,
                const std::function<void(int, long, const double*)>& out) {
    static const Micro micro = pick_micro();
    const int K = t.width;
    const int row_panels = (t.rows + kMr - 1) / kMr;
    const long col_panels = (cols + kNr - 1) / kNr;
    // Blocks of 16 row panels x 16 column panels: the A block (~560 KB for dis-mellin) stays in
    // L2 across the block's column panels, each packed W panel (~70 KB) in L1/L2.
    constexpr int kRowBlock = 16;
    constexpr long kColBlock = 16;
    const int row_blocks = (row_panels + kRowBlock - 1) / kRowBlock;
    const long col_blocks = (col_panels + kColBlock - 1) / kColBlock;
    const long tasks = static_cast<long>(row_blocks) * col_blocks;
#pragma omp parallel num_threads(threads)
    {
        std::vector<double> wp(static_cast<size_t>(K) * kNr);
        double tile[kMr * kNr];
#pragma omp for schedule(dynamic, 1)
        for (long task = 0; task < tasks; ++task) {
            const long cb = task / row_blocks;
            const int rb = static_cast<int>(task % row_blocks);
            for (long cp = cb * kColBlock; cp < std::min(col_panels, (cb + 1) * kColBlock); ++cp) {
                const long c0 = cp * kNr;
                for (int j = 0; j < kNr; ++j) {
                    const long c = c0 + j;
                    for (int k = 0; k < K; ++k) wp[static_cast<size_t>(k) * kNr + j] = c < cols ? W[c * K + k] : 0.0;
                }
                for (int rp = rb * kRowBlock; rp < std::min(row_panels, (rb + 1) * kRowBlock); ++rp) {
                    micro(t.a.get() + static_cast<size_t>(rp) * K * kMr, wp.data(), K, tile);
                    out(rp * kMr, c0, tile);
                }
            }
        }
    }
}

void table_gemm_into(const PackedTable& t, const double* W, long cols, int threads, double* F) {
    const int rows = t.rows;
    table_gemm(t, W, cols, threads, [&](int i0, long c0, const double* tile) {
        for (int jj = 0; jj < kNr && c0 + jj < cols; ++jj)
            for (int ii = 0; ii < kMr && i0 + ii < rows; ++ii) F[(c0 + jj) * rows + i0 + ii] = tile[ii * kNr + jj];
    });
}

}  // namespace ef::cpu

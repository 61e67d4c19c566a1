// SPDX-License-Identifier: MIT
#pragma once

#include <functional>
#include <vector>

namespace ef::cpu {

/**
 * The (points x width) table of a table-linear model packed for the CPU GEMM: panels of 4
 * rows, each stored k-major ([k][4]), rows beyond the last point zero. Packed once per worker.
 */
struct PackedTable {
    int rows = 0;
    int width = 0;
    std::vector<double> a;  ///< panels x width x 4
};
PackedTable pack_table(const double* table, int rows, int width);

/**
 * F = T W for W (width x cols, column-major, leading dimension width), calling
 * out(i, c, F_ic) once for every i < rows, c < cols (from several threads, each (i, c) once).
 * Every F_ic is accumulated in ascending k with fused multiply-adds starting from 0, exactly as
 * the CUDA worker's table GEMM does, so both give the same bits. AVX2+FMA when the CPU has it
 * (checked at run time), else scalar std::fma (same bits, slower).
 */
void table_gemm(const PackedTable& t, const double* W, long cols, int threads,
                const std::function<void(int i0, long c0, const double* tile /*4 x 8, row-major*/)>& out);

/// The same product into column-major F (rows x cols, leading dimension rows).
void table_gemm_into(const PackedTable& t, const double* W, long cols, int threads, double* F);

}  // namespace ef::cpu

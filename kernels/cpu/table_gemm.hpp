// SPDX-License-Identifier: MIT
#pragma once

#include <functional>
#include <memory>

namespace ef::cpu {

/**
 * The (points x width) table of a table-linear model packed for the CPU GEMM: panels of 4
 * rows, each stored k-major ([k][4]), rows beyond the last point zero. Packed once per worker,
 * or once per node into memory its ranks share (packed_view()).
 */
struct PackedTable {
    int rows = 0;
    int width = 0;
    std::shared_ptr<const double> a;  ///< panels x width x 4: its own, or a view kept alive by `a`
};
PackedTable pack_table(const double* table, int rows, int width);
/// Packs the `rows` x `width` row-major `table` into `dst` (ceil(rows / 4) panels, padding rows
/// zero): the panels [p, ...) of a larger table when `table` starts at its row 4 p and `dst` at
/// its panel p, the same bits as pack_table() of the whole.
void pack_into(const double* table, int rows, int width, double* dst);
/// A packed table already in memory (pack_into()), kept alive by `keep`.
PackedTable packed_view(const double* a, int rows, int width, std::shared_ptr<const void> keep);

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

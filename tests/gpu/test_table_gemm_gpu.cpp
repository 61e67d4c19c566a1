// SPDX-License-Identifier: MIT
// The table GEMM's two tilings (kernels/cuda/fit_batched.cuh, GemmTiling) keep the summation
// order the CPU uses (each output one accumulator, fma in ascending k from 0): both must give
// the bits of that chain computed on the host with std::fma, on shapes that are not multiples
// of the 128 x 128 block tile nor (Kt, the summed dimension) of its k tile of 8, with operands
// whose products round. Built in the gpu_tests binary (exits 77 where no GPU is visible);
// compiled only with CUDA.
#if EF_TEST_CUDA
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cuda/fit_batched.cuh"

namespace {

/// Reproducible values in [-1, 1) with full mantissas (a 64-bit LCG's top bits).
std::vector<double> pseudo_random(size_t n, std::uint64_t seed) {
    std::vector<double> v(n);
    std::uint64_t x = seed;
    for (auto& e : v) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        e = static_cast<double>(x >> 11) * 0x1.0p-52 - 1.0;
    }
    return v;
}

/// launch_table_gemm with either tiling against the host's chain, bit for bit, at one shape.
void check_shape(int n, int Kt, long cols) {
    INFO("n " << n << ", Kt " << Kt << ", cols " << cols);
    const std::vector<double> T = pseudo_random(static_cast<size_t>(n) * Kt, 1);
    const std::vector<double> W = pseudo_random(static_cast<size_t>(Kt) * cols, 2);
    std::vector<double> ref(static_cast<size_t>(n) * cols);
    for (long c = 0; c < cols; ++c)
        for (int i = 0; i < n; ++i) {
            double acc = 0.0;
            for (int k = 0; k < Kt; ++k) acc = std::fma(T[static_cast<size_t>(i) * Kt + k], W[c * Kt + k], acc);
            ref[c * n + i] = acc;
        }
    ef::cuda::DeviceBuffer<double> dT, dW, dF;
    dT.upload(T.data(), T.size());
    dW.upload(W.data(), W.size());
    dF.grow(ref.size());
    for (const auto tiling : {ef::cuda::GemmTiling::blocked, ef::cuda::GemmTiling::pairs}) {
        INFO("tiling " << (tiling == ef::cuda::GemmTiling::pairs ? "pairs" : "blocked"));
        std::vector<double> F(ref.size(), NAN);
        dF.upload(F.data(), F.size());
        ef::cuda::launch_table_gemm(dT.data(), dW.data(), dF.data(), n, Kt, cols, tiling);
        dF.download(F.data(), F.size());
        CHECK(std::memcmp(F.data(), ref.data(), F.size() * sizeof(double)) == 0);
    }
}

}  // namespace

TEST_CASE("table GEMM: both tilings give the bits of the CPU's ascending-k fma chain", "[gpu][gemm]") {
    check_shape(300, 136, 333);  // Kt a multiple of the k tile (8), as a table's width is
    // The Gram path's products sum over the data's points (G = T^T (W T), b = T^T E: Kt = n),
    // any count: 874 and 333 of the real-data example and its BCDMS proton set (issue 37).
    check_shape(136, 333, 136);
    check_shape(40, 874, 3);
    // The process's choice is one of the two (timed once).
    const auto chosen = ef::cuda::table_gemm_tiling();
    CHECK((chosen == ef::cuda::GemmTiling::blocked || chosen == ef::cuda::GemmTiling::pairs));
}
#endif

// SPDX-License-Identifier: MIT
#pragma once

/**
 * EF_HD marks a function as callable from host and device code.
 *
 * Every formula in ensemblefit (model values, dual-number arithmetic, LM step math) is written
 * once with EF_HD; the CPU worker calls it from OpenMP loops and the CUDA worker from kernels.
 * Under an ordinary C++ compiler the macro expands to nothing.
 */
#ifdef __CUDACC__
#define EF_HD __host__ __device__
#define EF_INLINE __forceinline__
#else
#define EF_HD
#define EF_INLINE inline
#endif

/// Unroll the next loop (its bounds are compile-time constants): on the device this keeps small
/// per-thread arrays in registers; g++ reads it as GCC unroll.
#if defined(__CUDACC__)
#define EF_UNROLL _Pragma("unroll")
#elif defined(__GNUC__) && !defined(__clang__)
#define EF_UNROLL _Pragma("GCC unroll 16")
#else
#define EF_UNROLL
#endif

/// Keep the next loop rolled (one iteration's registers live at a time).
#if defined(__CUDACC__)
#define EF_NO_UNROLL _Pragma("unroll 1")
#elif defined(__GNUC__) && !defined(__clang__)
#define EF_NO_UNROLL _Pragma("GCC unroll 1")
#else
#define EF_NO_UNROLL
#endif

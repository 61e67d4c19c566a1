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

// fp4kit: scale layouts (SPEC section 6).
#pragma once
#include "common/types.cuh"

namespace fp4kit {

// Flat byte offset of compact scale (i, j) in the swizzled (128x4) buffer with Cp = roundup(C, 4).
__device__ __forceinline__ i64 swizzled_offset(i64 i, i64 j, i64 Cp) {
    return ((i >> 7) * (Cp >> 2) + (j >> 2)) * 512 + (i & 31) * 16 + ((i & 127) >> 5) * 4 + (j & 3);
}

// Where scale (i, j) of a compact (R, C) matrix is stored for the given layout.
__device__ __forceinline__ i64 scale_offset(i64 i, i64 j, i64 C, bool swizzled) {
    return swizzled ? swizzled_offset(i, j, (C + 3) & ~(i64)3) : i * C + j;
}

}  // namespace fp4kit

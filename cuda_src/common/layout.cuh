// fp4kit: scale layouts (SPEC section 6).
#pragma once
#include "common/types.cuh"

namespace fp4kit {

// Flat byte offset of compact scale (i, j) in the swizzled (128x4) buffer with Cp = roundup(C, 4).
__device__ __forceinline__ i64 swizzled_offset(i64 i, i64 j, i64 Cp) {
    return ((i >> 7) * (Cp >> 2) + (j >> 2)) * 512 + (i & 31) * 16 + ((i & 127) >> 5) * 4 + (j & 3);
}

// Byte of (row r < 128, column c < 4) within one 512-byte swizzled block: swizzled_offset's in-block
// part in 32-bit arithmetic, for kernels that assemble whole blocks in shared memory.
__device__ __forceinline__ int swizzled_block_byte(int r, int c) { return (r & 31) * 16 + (r >> 5) * 4 + c; }

// Grouped staging of block-32 scales (one K, K % 128 == 0): a member whose 128-row bands start at
// square band sq has its swizzled rowwise (128 nsq, K / 32) and columnwise (K, 4 nsq) matrices, both
// 4 K bytes per band, at this offset of the rowwise / columnwise staging buffers (written by
// grouped.cu group_quantize4 / group_quantize1, read by swizzle.cu group_unswizzle_scales).
__host__ __device__ __forceinline__ i64 staged_scales_offset(i64 K, i64 sq) { return 4 * K * sq; }

// Where scale (i, j) of a compact (R, C) matrix is stored for the given layout.
__device__ __forceinline__ i64 scale_offset(i64 i, i64 j, i64 C, bool swizzled) {
    return swizzled ? swizzled_offset(i, j, (C + 3) & ~(i64)3) : i * C + j;
}

// Zeroes the padding bytes (rows >= R or columns >= C) of the 16-byte swizzled chunk p whose byte
// 4 g + c holds compact (i0 + 32 g, j0 + c), and writes nothing else.
__device__ __forceinline__ void zero_chunk_padding(u8* p, i64 i0, i64 j0, i64 R, i64 C) {
#pragma unroll
    for (int g = 0; g < 4; ++g)
#pragma unroll
        for (int c = 0; c < 4; ++c)
            if (i0 + 32 * g >= R || j0 + c >= C) p[4 * g + c] = 0;
}

}  // namespace fp4kit

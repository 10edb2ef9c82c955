// fp4kit: scale layout conversions (SPEC section 6), grid-stride, one thread per 16-byte row of a
// 512-byte swizzled block. The 16 bytes at swizzled offset 16 q hold, for the block (bi, bj) = q / 32
// and rr = q % 32, the compact rows i_g = 128 bi + 32 g + rr (g = 0..3) at columns 4 bj .. 4 bj + 3:
// byte 4 g + c of the chunk is compact (i_g, 4 bj + c). So each thread moves four 4-byte runs of
// compact rows and one 16-byte vector of the swizzled buffer.
#include "common/types.cuh"
#include "common/layout.cuh"

using namespace fp4kit;

namespace fp4kit {

// Chunk q -> compact row of g = 0 and first column (Cp = roundup(C, 4)).
__device__ __forceinline__ void chunk_position(i64 q, i64 Cp, i64& i0, i64& j0) {
    const i64 blk = q >> 5;
    const i64 bi = div_fast(blk, Cp >> 2), bj = blk - bi * (Cp >> 2);
    i0 = bi * 128 + (q & 31);
    j0 = bj * 4;
}

// Bytes compact (i, j0 .. j0 + 3) as a little-endian word; 0 outside the (R, C) matrix.
__device__ __forceinline__ u32 compact_run(const u8* compact, i64 R, i64 C, i64 i, i64 j0) {
    if (i >= R) return 0u;
    const u8* p = compact + i * C + j0;
    if (j0 + 4 <= C && (reinterpret_cast<u64>(p) & 3u) == 0) return *reinterpret_cast<const u32*>(p);
    u32 w = 0u;
#pragma unroll
    for (int c = 0; c < 4; ++c)
        if (j0 + c < C) w |= (u32)p[c] << (8 * c);
    return w;
}

// Store the 4 bytes of w at compact (i, j0 ..), only the columns < C.
__device__ __forceinline__ void store_run(u8* compact, i64 C, i64 i, i64 j0, u32 w) {
    u8* p = compact + i * C + j0;
    if (j0 + 4 <= C && (reinterpret_cast<u64>(p) & 3u) == 0) {
        *reinterpret_cast<u32*>(p) = w;
        return;
    }
#pragma unroll
    for (int c = 0; c < 4; ++c)
        if (j0 + c < C) p[c] = (u8)(w >> (8 * c));
}

}  // namespace fp4kit

// compact (R, C) -> swizzled (Rp, Cp) = (roundup(R, 128), roundup(C, 4)), padding 0.
extern "C" __global__ void swizzle_scales(const u8* compact, i64 R, i64 C, u8* out, i64 Rp, i64 Cp) {
    const i64 nq = Rp * Cp / 16;
    for (i64 q = (i64)blockIdx.x * blockDim.x + threadIdx.x; q < nq; q += (i64)gridDim.x * blockDim.x) {
        i64 i0, j0;
        chunk_position(q, Cp, i0, j0);
        u32 w[4];
#pragma unroll
        for (int g = 0; g < 4; ++g) w[g] = compact_run(compact, R, C, i0 + 32 * g, j0);
        if ((reinterpret_cast<u64>(out) & 15u) == 0) {
            reinterpret_cast<uint4*>(out)[q] = make_uint4(w[0], w[1], w[2], w[3]);
        } else {   // a view at an odd offset
#pragma unroll
            for (int b = 0; b < 16; ++b) out[q * 16 + b] = (u8)(w[b >> 2] >> (8 * (b & 3)));
        }
    }
}

// swizzled (roundup(R, 128), Cp) -> compact (R, C).
extern "C" __global__ void unswizzle_scales(const u8* swizzled, i64 R, i64 C, i64 Cp, u8* out) {
    const i64 nq = ((R + 127) / 128) * 128 * Cp / 16;
    for (i64 q = (i64)blockIdx.x * blockDim.x + threadIdx.x; q < nq; q += (i64)gridDim.x * blockDim.x) {
        i64 i0, j0;
        chunk_position(q, Cp, i0, j0);
        if (i0 >= R || j0 >= C) continue;
        u32 w[4] = {0u, 0u, 0u, 0u};
        if ((reinterpret_cast<u64>(swizzled) & 15u) == 0) {
            const uint4 v = reinterpret_cast<const uint4*>(swizzled)[q];
            w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
        } else {   // a view at an odd offset
#pragma unroll
            for (int b = 0; b < 16; ++b) w[b >> 2] |= (u32)swizzled[q * 16 + b] << (8 * (b & 3));
        }
#pragma unroll
        for (int g = 0; g < 4; ++g)
            if (i0 + 32 * g < R) store_run(out, C, i0 + 32 * g, j0, w[g]);
    }
}

// Writes 0 to every padding byte of a swizzled (Rp, Cp) buffer of a compact (R, C) matrix and
// nothing else (the quantize kernels write the real positions).
extern "C" __global__ void swizzle_zero_padding(u8* out, i64 R, i64 C, i64 Rp, i64 Cp) {
    const i64 nq = Rp * Cp / 16;
    for (i64 q = (i64)blockIdx.x * blockDim.x + threadIdx.x; q < nq; q += (i64)gridDim.x * blockDim.x) {
        i64 i0, j0;
        chunk_position(q, Cp, i0, j0);
        if (i0 + 96 < R && j0 + 4 <= C) continue;   // no padding in this chunk
        u8* p = out + q * 16;
#pragma unroll
        for (int g = 0; g < 4; ++g)
#pragma unroll
            for (int c = 0; c < 4; ++c)
                if (i0 + 32 * g >= R || j0 + c >= C) p[4 * g + c] = 0;
    }
}

// fp4kit: scale layout conversions (SPEC section 6). swizzle_scales / unswizzle_scales: tiles through
// shared memory (below). swizzle_zero_padding: grid-stride, one thread per 16-byte row of a
// 512-byte swizzled block. The 16 bytes at swizzled offset 16 q hold, for the block (bi, bj) = q / 32
// and rr = q % 32, the compact rows i_g = 128 bi + 32 g + rr (g = 0..3) at columns 4 bj .. 4 bj + 3:
// byte 4 g + c of the chunk is compact (i_g, 4 bj + c).
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

}  // namespace fp4kit

// compact (R, C) -> swizzled (Rp, Cp) = (roundup(R, 128), roundup(C, 4)), padding 0.
// One CTA per 128 x 64 tile of the compact matrix (grid-strided beyond the grid): the tile's rows
// come in with coalesced 16-byte loads (4 per row; byte loads at the edges and for rows off a
// 16-byte boundary) into shared memory, and its 16 swizzled blocks, which are contiguous in the
// output (8 KB), go out as 16-byte stores, a warp writing 512 consecutive bytes. (One thread per
// output chunk gathering four 4-byte runs straight from global memory reached 49-65 % of copy.)
#define SWZ_TC 64                  // compact columns per tile = 16 swizzled blocks
#define SWZ_PITCH (SWZ_TC / 4 + 1) // words per shared row (+1: conflict-free column reads)
extern "C" __global__ void __launch_bounds__(256) swizzle_scales(const u8* compact, i64 R, i64 C, u8* out, i64 Rp,
                                                                 i64 Cp) {
    FP4KIT_GRID_DEP();
    __shared__ u32 tile[128 * SWZ_PITCH];
    const int tid = threadIdx.x;
    const i64 tiles_j = (Cp + SWZ_TC - 1) / SWZ_TC;
    const i64 ntiles = (Rp / 128) * tiles_j;
    const bool out16 = (reinterpret_cast<u64>(out) & 15u) == 0;
    for (i64 t = blockIdx.x; t < ntiles; t += gridDim.x) {
        const i64 bi = div_fast(t, tiles_j);
        const i64 j0 = (t - bi * tiles_j) * SWZ_TC;
        __syncthreads();   // the previous tile's reads are done
#pragma unroll
        for (int k = 0; k < 2; ++k) {   // 128 rows x 4 vectors of 16 bytes
            const int v = tid + 256 * k, r = v >> 2, seg = v & 3;
            const i64 i = bi * 128 + r, j = j0 + 16 * seg;
            u32 w[4] = {0u, 0u, 0u, 0u};
            if (i < R && j < C) {
                const u8* p = compact + i * C + j;
                if (j + 16 <= C && (reinterpret_cast<u64>(p) & 15u) == 0) {
                    const uint4 q = *reinterpret_cast<const uint4*>(p);
                    w[0] = q.x; w[1] = q.y; w[2] = q.z; w[3] = q.w;
                } else {
#pragma unroll
                    for (int c = 0; c < 16; ++c)
                        if (j + c < C) w[c >> 2] |= (u32)p[c] << (8 * (c & 3));
                }
            }
#pragma unroll
            for (int q = 0; q < 4; ++q) tile[r * SWZ_PITCH + 4 * seg + q] = w[q];
        }
        __syncthreads();
        // blocks (bi, j0 / 4 ..): as many as Cp has columns left; chunk c of them: block c / 32,
        // row rr = c % 32, bytes 4 g + b = compact (128 bi + 32 g + rr, j0 + 4 (c / 32) + b)
        const i64 nblk = (Cp - j0) / 4 < SWZ_TC / 4 ? (Cp - j0) / 4 : SWZ_TC / 4;
        u8* const ob = out + (bi * (Cp / 4) + j0 / 4) * 512;
        for (int c = tid; c < nblk * 32; c += 256) {
            const int blk = c >> 5, rr = c & 31;
            const u32 w0 = tile[rr * SWZ_PITCH + blk], w1 = tile[(32 + rr) * SWZ_PITCH + blk];
            const u32 w2 = tile[(64 + rr) * SWZ_PITCH + blk], w3 = tile[(96 + rr) * SWZ_PITCH + blk];
            if (out16) {
                reinterpret_cast<uint4*>(ob)[c] = make_uint4(w0, w1, w2, w3);
            } else {   // a view at an odd offset
                const u32 w[4] = {w0, w1, w2, w3};
#pragma unroll
                for (int b = 0; b < 16; ++b) ob[c * 16 + b] = (u8)(w[b >> 2] >> (8 * (b & 3)));
            }
        }
    }
}

// swizzled (roundup(R, 128), Cp) -> compact (R, C): swizzle_scales run backwards. One CTA per
// 128 x 64 tile of the compact matrix (grid-strided beyond the grid): the tile's swizzled blocks
// (contiguous, up to 8 KB) come in as 16-byte loads, a warp reading 512 consecutive bytes, into
// shared memory; the compact rows go out as 16-byte stores (4 per row; byte stores at the edges), or,
// for rows off a 16-byte boundary, a byte per lane with 32 consecutive bytes per warp instruction, so
// every 32-byte sector of the output is written whole by one CTA. (One thread per 16-byte chunk
// scattering four 4-byte runs to 4 compact rows left each sector to 8 CTAs: 0.3 TB/s on an H100.)
namespace fp4kit {
__device__ __forceinline__ void unswizzle_tile(u32* tile, const u8* swizzled, i64 R, i64 C, i64 Cp, u8* out, i64 t) {
    const int tid = threadIdx.x;
    const i64 tiles_j = (Cp + SWZ_TC - 1) / SWZ_TC;
    const bool in16 = (reinterpret_cast<u64>(swizzled) & 15u) == 0;
    const i64 bi = div_fast(t, tiles_j);
    const i64 j0 = (t - bi * tiles_j) * SWZ_TC;
    const i64 nblk = (Cp - j0) / 4 < SWZ_TC / 4 ? (Cp - j0) / 4 : SWZ_TC / 4;
    const u8* const ib = swizzled + (bi * (Cp / 4) + j0 / 4) * 512;
    __syncthreads();   // the previous tile's reads are done
    for (int c = tid; c < nblk * 32; c += 256) {
        const int blk = c >> 5, rr = c & 31;
        u32 w[4] = {0u, 0u, 0u, 0u};
        if (in16) {
            const uint4 q = reinterpret_cast<const uint4*>(ib)[c];
            w[0] = q.x; w[1] = q.y; w[2] = q.z; w[3] = q.w;
        } else {   // a view at an odd offset
#pragma unroll
            for (int b = 0; b < 16; ++b) w[b >> 2] |= (u32)ib[c * 16 + b] << (8 * (b & 3));
        }
#pragma unroll
        for (int g = 0; g < 4; ++g) tile[(32 * g + rr) * SWZ_PITCH + blk] = w[g];
    }
    __syncthreads();
    if (((reinterpret_cast<u64>(out) | (u64)C) & 15u) != 0 && ((reinterpret_cast<u64>(out) | (u64)C) & 3u) == 0) {
        // compact rows on a 4-byte boundary (C % 4 == 0, e.g. grouped columnwise scales of M_g % 128 == 0):
        // 4-byte stores, a warp writing two rows of 64 consecutive bytes per instruction (H100, G = 8
        // MXFP6 "both" of 65536 x 7168, group_unswizzle_scales 38.4 -> 35.1 us; not unrolled: 32
        // registers, as unrolled 8 times took unswizzle_scales from 32 to 58)
#pragma unroll 1
        for (int k = 0; k < 8; ++k) {
            const int v = tid + 256 * k, r = v >> 4, w = v & 15;
            const i64 i = bi * 128 + r, j = j0 + 4 * w;
            if (i < R && j < C) *reinterpret_cast<u32*>(out + i * C + j) = tile[r * SWZ_PITCH + w];
        }
        return;
    }
    if (((reinterpret_cast<u64>(out) | (u64)C) & 15u) != 0) {
        // compact rows off a 16-byte boundary (C % 16 != 0, e.g. the columnwise scales of M % 512 != 0):
        // warp w writes rows w, w + 8, ..., each as two runs of 32 consecutive bytes, one byte per lane,
        // so every store instruction covers one or two sectors (16 byte stores per 16-byte vector, as
        // below, spread each instruction over 8 rows: 24.5 us for the 8192 x 257 columnwise scales of
        // an 8200 x 8192 MXFP8 quantize on the H100)
        const int lane = tid & 31;
        for (int r = tid >> 5; r < 128; r += 8) {
            const i64 i = bi * 128 + r;
            if (i >= R) break;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int cc = 32 * h + lane;
                if (j0 + cc < C) out[i * C + j0 + cc] = (u8)(tile[r * SWZ_PITCH + (cc >> 2)] >> (8 * (cc & 3)));
            }
        }
        return;
    }
#pragma unroll
    for (int k = 0; k < 2; ++k) {   // 128 rows x 4 vectors of 16 bytes
        const int v = tid + 256 * k, r = v >> 2, seg = v & 3;
        const i64 i = bi * 128 + r, j = j0 + 16 * seg;
        if (i >= R || j >= C) continue;
        u32 w[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) w[q] = tile[r * SWZ_PITCH + 4 * seg + q];
        u8* p = out + i * C + j;
        if (j + 16 <= C) {   // (rows on a 16-byte boundary here)
            *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
        } else {
#pragma unroll
            for (int c = 0; c < 16; ++c)
                if (j + c < C) p[c] = (u8)(w[c >> 2] >> (8 * (c & 3)));
        }
    }
}
}  // namespace fp4kit

// Two matrices in one launch (a quantize's staged rowwise and columnwise scales: one launch and one
// tail instead of two): tiles 0 .. T0 - 1 are matrix 0's, the rest matrix 1's. R1 = 0 for one matrix.
extern "C" __global__ void __launch_bounds__(256) unswizzle_scales(const u8* sw0, i64 R0, i64 C0, i64 Cp0, u8* out0,
                                                                   const u8* sw1, i64 R1, i64 C1, i64 Cp1, u8* out1) {
    FP4KIT_GRID_DEP();
    __shared__ u32 tile[128 * SWZ_PITCH];
    const i64 t0 = ((R0 + 127) / 128) * ((Cp0 + SWZ_TC - 1) / SWZ_TC);
    const i64 ntiles = t0 + ((R1 + 127) / 128) * ((Cp1 + SWZ_TC - 1) / SWZ_TC);
    for (i64 t = blockIdx.x; t < ntiles; t += gridDim.x) {
        if (t < t0) unswizzle_tile(tile, sw0, R0, C0, Cp0, out0, t);   // CTA-uniform
        else unswizzle_tile(tile, sw1, R1, C1, Cp1, out1, t - t0);
    }
}

// Grouped MXFP8 "both" with compact scales (one K, K % 128 == 0; fp4kit/_cuda_grouped.py): every
// member's two swizzled scale matrices, staged by grouped.cu group_quantize4 at 4 K sq[g] bytes of
// st_row / st_col (the swizzled sizes, both 4 K ceil(M_g / 128)), to its compact rowwise (M_g, K / 32)
// and columnwise (K, ceil(M_g / 32)) matrices at srow[g] / scol[g] of out_row / out_col. sq, srow,
// scol: group_meta's prefix arrays (G + 1 entries); sqd: its descriptors of the 128-row square bands
// {element offset, M, band within the member, member} (M = 0 past the last band and after a metadata
// error, so nothing is written then). Work: U + V slots per square band (U = ceil(K / 2048), V = 2 U),
// one CTA each (grid-strided past the grid), each finding its member with one
// descriptor load (no walk over the members): slot s < U is the rowwise tile (band, s) of the member
// (unswizzle_tile's 128 x 64 tiles; U per band), slot U + v the member's columnwise tiles
// q = bm + nsq (v + V r), r = 0, 1, .. (bm: the band within the member, nsq its bands; a member's
// (K / 128) ceil(ceil(M_g / 32) / 64) columnwise tiles dealt over its bands: about 2 U per band for
// members of 16 bands or more, K / 128 / nsq for narrow ones). (One slot per columnwise tile of
// K / 128 per band, idle past a member's first ceil(M_g / 2048) bands, cost a descriptor load per
// idle slot: 63.5 us for G = 8, 65536 x 7168, H100; walking the members in every CTA: 37.3 us for
// G = 8 but 150 us for G = 64. H100, 65536 x 7168, G = 8 / 64: V = U on one wave of persistent
// CTAs at 64 registers took 35.1 / 66.7 us; 32 registers 30.1 / 60.4; one CTA per slot 28.1 /
// 44.5; and V = 2 U 28.1 / 37.6 us, MXFP6 / MXFP4 with member sizes % 128.)
extern "C" __global__ void __launch_bounds__(256, 8) group_unswizzle_scales(i64 n_sq, i64 K, const i64* sqd, const i64* sq,
                                                                         const i64* srow, const i64* scol,
                                                                         const u8* st_row, const u8* st_col,
                                                                         u8* out_row, u8* out_col) {
    FP4KIT_GRID_DEP();
    __shared__ u32 tile[128 * SWZ_PITCH];
    const i64 cr = K / 32, U = (cr + SWZ_TC - 1) / SWZ_TC, V = 2 * U;
    for (i64 t = blockIdx.x; t < n_sq * (U + V); t += gridDim.x) {
        const i64 j = div_fast(t, U + V), slot = t - j * (U + V);
        const longlong2 d0 = __ldg(reinterpret_cast<const longlong2*>(sqd + 4 * j));
        const longlong2 d1 = __ldg(reinterpret_cast<const longlong2*>(sqd + 4 * j) + 1);
        const i64 M = d0.y, bm = d1.x, g = d1.y;
        if (M <= 0) continue;   // CTA-uniform: past the last band
        const i64 st = staged_scales_offset(K, sq[g]);
        if (slot < U) {
            unswizzle_tile(tile, st_row + st, M, cr, cr, out_row + srow[g], bm * U + slot);
        } else {
            const i64 nsq = (M + 127) / 128, cc = (M + 31) / 32, cpc = 4 * nsq;
            const i64 ncol = (K / 128) * ((cpc + SWZ_TC - 1) / SWZ_TC);
            for (i64 q = bm + nsq * (slot - U); q < ncol; q += nsq * V)
                unswizzle_tile(tile, st_col + st, K, cc, cpc, out_col + scol[g], q);
        }
    }
}

// Writes 0 to every padding byte of a swizzled (Rp, Cp) buffer of a compact (R, C) matrix and
// nothing else (the quantize kernels write the real positions).
extern "C" __global__ void swizzle_zero_padding(u8* out, i64 R, i64 C, i64 Rp, i64 Cp) {
    FP4KIT_GRID_DEP();
    const i64 nq = Rp * Cp / 16;
    for (i64 q = (i64)blockIdx.x * blockDim.x + threadIdx.x; q < nq; q += (i64)gridDim.x * blockDim.x) {
        i64 i0, j0;
        chunk_position(q, Cp, i0, j0);
        if (i0 + 96 < R && j0 + 4 <= C) continue;   // no padding in this chunk
        zero_chunk_padding(out + q * 16, i0, j0, R, C);
    }
}

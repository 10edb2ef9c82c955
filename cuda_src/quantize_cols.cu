// fp4kit: the columnwise operand alone (plain recipes, 16-bit input), without a shared-memory
// transpose: every thread reads 16 consecutive rows of 2 or 4 adjacent columns (one or two 4-byte
// words per row: the lanes of a warp read 32 to 128 contiguous bytes of a row per load), so a
// columnwise block (16 or 32 rows of one column of x) is a run of registers of one or two lanes.
//
// Why a kernel of its own: the 64 x 64 tile kernel (quantize.cu) writes 2 (MX) or 4 (NVFP4) scale
// bytes of each of its 64 columns; compact columnwise scales are rows of ceil(M / block) bytes, so
// those stores were 2-byte pieces of 32-byte sectors that 16 tiles far apart in launch order
// complete (docs/performance.md items 27-28: MXFP8 / MXFP6 went through a swizzled staging buffer
// and an unswizzle launch instead; MXFP4 / NVFP4 kept the partial sectors). Here a CTA covers 1024
// (MX) or 512 (NVFP4) rows of its columns for compact scales, i.e. 32 scale bytes per column, one
// whole sector, and for swizzled scales 128 columns x 4 blocks, one whole 512-byte block.
//
// Lanes: G = 2 (FP8 / FP6) or 4 (FP4) consecutive lanes take consecutive 16-row segments of the
// same columns, so that their codes (16 or 8 bytes per column each) fill one 32-byte sector of
// the output row per store instruction, and the two halves of an MX block are neighbouring lanes
// (one shuffle). A warp: 32 / G column pairs x G segments. A CTA: WX warps across columns times WY
// along rows, IT passes along rows.
// With NW = 2 a lane takes two adjacent column pairs (8-byte loads: 128 bytes of a row per 16 lanes).
// Compiled for NVFP4 and, compact with NW = 2 only, MXFP8 / MXFP6 (the kernels at the end say what
// measured faster than the tile kernel). Planner conditions (fp4kit/_plan.py cols_kernel): 16-bit
// input, M a multiple of 16 (whole segments, aligned code stores), no extended option, 4-byte aligned
// input and K even (NW = 1) or 16-byte aligned and K % 4 == 0 (NW = 2).
#define FP4KIT_E8M0_SELECT 1
#include "common/quantize_tile.cuh"

using namespace fp4kit;

namespace {

// max(acc, |w|) per 16-bit half (bfloat16 or float16 pairs); max returns the non-NaN operand, so
// NaN is ignored and the starting 0 stays when every element is NaN, as seg_amax's fmaxf.
template <int DT>
__device__ __forceinline__ u32 absmax2(u32 acc, u32 w) {
    if constexpr (DT == DTYPE_BFLOAT16) return bf2_max(acc, w & 0x7FFF7FFFu);
    u32 r;
    asm("max.f16x2 %0, %1, %2;" : "=r"(r) : "r"(acc), "r"(w & 0x7FFF7FFFu));
    return r;
}

// Element h (0: low, 1: high half) of a word of two 16-bit inputs, as fp32.
template <int DT>
__device__ __forceinline__ float half_f32(u32 w, int h) {
    return In<DT>::cvt((u16)(h ? (w >> 16) : w));
}

template <int FMT, int NW>
struct ColsShape {
    static constexpr int G = Fmt<FMT>::packed ? 4 : 2;   // lanes per output sector
    static constexpr int PW = 32 / G;                    // lane columns per warp
    static constexpr int WCOL = 2 * NW * PW;             // columns per warp (NW words of 2 per lane)
    static constexpr int WROW = SEG * G;                 // rows per warp and pass
};

}  // namespace

// The CTA's tile: CW = WX * WCOL columns from k0, CR = WY * IT * WROW rows from m0.
// SWZ: the scales in the swizzled layout (CW = 128, CR / block = 4: one 512-byte block), else compact
// (RB = CR / block = 32 bytes of each column's scale row: one sector).
template <int FMT, int DT, int WX, int WY, int IT, bool SWZ, int NW = 1>
__device__ __forceinline__ void quantize_cols(const void* x, i64 M, i64 K, u8* col_data, u8* col_scales,
                                              const float* amax_col, int flags) {
    typedef Fmt<FMT> F;
    typedef ColsShape<FMT, NW> S;
    constexpr int CW = WX * S::WCOL;
    constexpr int CR = WY * IT * S::WROW;
    constexpr int RB = CR / F::block;   // scale bytes per column of the tile
    static_assert(!SWZ || (CW == 128 && RB == 4), "swizzled: one 128 x 4 block per CTA");
    static_assert(SWZ || RB == 32, "compact: one 32-byte sector per column");
    __shared__ __align__(16) u8 sc[CW * RB];
    __shared__ float enc_tab[F::mx ? 1 : NV_TAB + 1];

    const i64 nkc = (K + CW - 1) / CW;
    const i64 bm = div_fast((i64)blockIdx.x, nkc);
    const i64 k0 = ((i64)blockIdx.x - bm * nkc) * CW, m0 = bm * CR;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int wx = warp % WX, wy = warp / WX;
    const int p = lane / S::G, j = lane % S::G;
    const int cl = wx * S::WCOL + 2 * NW * p;   // first column of the lane's, within the tile
    const i64 kp = k0 + cl;
    const bool floor_rule = flags & QFLAG_RULE_FLOOR;
    const u32* xw = reinterpret_cast<const u32*>(x);

    if constexpr (!F::mx) {
        nvfp4_fill_table(enc_tab, amax_col[0], 0);
        __syncthreads();
    }

#pragma unroll 1
    for (int it = 0; it < IT; ++it) {
        const int rl = (it * WY + wy) * S::WROW + j * SEG;   // first row of the segment, within the tile
        const i64 gm = m0 + rl;
        const bool ok = gm < M && kp < K;
        u32 w[NW][SEG];
        if (ok) {
            const u32* src = xw + ((gm * K + kp) >> 1);
            const i64 step = K >> 1;
#pragma unroll
            for (int i = 0; i < SEG; ++i) {
                if constexpr (NW == 1) {
                    w[0][i] = __ldcs(src + i * step);
                } else {
                    const uint2 q = __ldcs(reinterpret_cast<const uint2*>(src + i * step));
                    w[0][i] = q.x;
                    w[1][i] = q.y;
                }
            }
        } else {
#pragma unroll
            for (int i = 0; i < SEG; ++i)
#pragma unroll
                for (int n = 0; n < NW; ++n) w[n][i] = 0u;
        }
#pragma unroll
        for (int n = 0; n < NW; ++n) {
            u32 am = 0u;
#pragma unroll
            for (int i = 0; i < SEG; ++i) am = absmax2<DT>(am, w[n][i]);
            if constexpr (F::block == 32) am = absmax2<DT>(am, __shfl_xor_sync(0xFFFFFFFFu, am, 1));
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                float mul;
                u32 code;
                const float bamax = half_f32<DT>(am, h);
                if constexpr (F::mx) {
                    code = block_scale<FMT>(bamax, floor_rule, amax_col, 0, mul);
                } else {
                    code = nvfp4_scale_code(bamax, enc_tab[NV_TAB]);
                    mul = enc_tab[code];
                }
                float v[SEG];
#pragma unroll
                for (int i = 0; i < SEG; ++i) v[i] = half_f32<DT>(w[n][i], h);
                u32 c[4];
                encode_seg<FMT>(v, mul, false, 0ull, 1u, 0, c);
                const i64 k = kp + 2 * n + h;
                if (ok) {
                    if constexpr (F::packed) {
                        *reinterpret_cast<uint2*>(col_data + k * (M >> 1) + (gm >> 1)) = make_uint2(c[0], c[1]);
                    } else {
                        *reinterpret_cast<uint4*>(col_data + k * M + gm) = make_uint4(c[0], c[1], c[2], c[3]);
                    }
                }
                if (F::block == 16 || (j & 1) == 0) {
                    const int r = cl + 2 * n + h, b = rl / F::block;   // scale (row r, column b) of the tile
                    if constexpr (SWZ) sc[swizzled_block_byte(r, b)] = (u8)code;
                    else sc[r * RB + b] = (u8)code;
                }
            }
        }
    }
    __syncthreads();

    const i64 nb = (M + F::block - 1) / F::block, b0 = m0 / F::block;
    const int t = threadIdx.x;
    if constexpr (SWZ) {
        // the block (k0 / 128, b0 / 4) of the swizzled matrix; bytes of rows >= K or columns >= nb
        // are its zero padding
        if (t < 32) {
            uint4 v = reinterpret_cast<const uint4*>(sc)[t];
            u32* vw = reinterpret_cast<u32*>(&v);
            const i64 cols = nb - b0;   // valid scale columns of the block
            const u32 cmask = cols >= 4 ? 0xFFFFFFFFu : (0xFFFFFFFFu >> (8 * (4 - (int)cols)));
#pragma unroll
            for (int g = 0; g < 4; ++g) vw[g] &= (k0 + g * 32 + t < K) ? cmask : 0u;
            reinterpret_cast<uint4*>(col_scales + swizzled_offset(k0, b0, (nb + 3) & ~(i64)3))[t] = v;
        }
    } else {
        // column r's 32 bytes b0 .. b0 + 31 of its compact row, as two 16-byte halves
        if (t < 2 * CW) {
            const int r = t >> 1, half = t & 1;
            const i64 k = k0 + r, bb = b0 + half * 16;
            if (k < K && bb < nb) {
                const int n = (int)((nb - bb) < 16 ? (nb - bb) : 16);
                u8* dst = col_scales + k * nb + bb;
                const u8* s = sc + r * RB + half * 16;
                if (n == 16 && aligned16(dst)) {
                    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(s);
                } else {
                    for (int i = 0; i < n; ++i) dst[i] = s[i];
                }
            }
        }
    }
}

// Kernels, grid ceil(K / CW) * ceil(M / CR) CTAs, column tiles fastest (NW: 4-byte words per lane,
// i.e. 2 or 4 columns; NW = 2 needs 8-byte aligned rows: the planner asks for a 16-byte aligned input
// and K % 4 == 0):
//   quantize_cols_f5_d<D>_c   NVFP4, compact:  NW 1, 64 columns x 512 rows, 512 threads
//   quantize_cols_f5_d<D>_s   NVFP4, swizzled: NW 1, 128 x 64, 256 threads
//   quantize_cols_f5_d<D>_s2  NVFP4, swizzled: NW 2, 128 x 64, 128 threads
//   quantize_cols_f<F>_d<D>_c2  MXFP8 / MXFP6, compact: NW 2, 64 x 1024, 512 threads (80 registers)
// H100, kernel time, 8192^2 (16384^2) bfloat16, one run (docs/performance.md item 60), against the
// op with the tile kernel (compact MX: with its unswizzle launch): NVFP4 compact 84.1 (319.5) ->
// 71.0 (275.7) us, swizzled 83.7 (310.6) -> 69.8 (268.2) with NW 1 and 67.5 (257.0) with NW 2;
// MXFP8 compact 83.3 (318.8) -> 79.8 (312.8) with NW 2, but 84.9 - 95.7 with NW 1 (every CTA shape
// tried: 256 / 512 / 1024 threads, 8 / 16 / 32 scale bytes per column, with and without an L2
// prefetch of the next pass). Not adopted: MX swizzled (NW 2: 79.1 (312.8) against 78.9 (310.7)),
// MXFP4 (NW 2: 74.0 / 71.1 against 71.1 / 72.3), NVFP4 compact with NW 2 (71.5).
#define FP4KIT_COLS_KERNEL(F, D, SUFFIX, WX, WY, IT, SWZ, NW, T, MB)                                    \
    extern "C" __global__ void __launch_bounds__(T, MB)                                                 \
    quantize_cols_f##F##_d##D##SUFFIX(const void* x, i64 M, i64 K, u8* col_data, u8* col_scales,        \
                                      const float* amax_col, int flags) {                               \
        FP4KIT_GRID_DEP();                                                                              \
        quantize_cols<F, D, WX, WY, IT, SWZ, NW>(x, M, K, col_data, col_scales, amax_col, flags);       \
    }
#define FP4KIT_COLS_NVFP4(D)                                   \
    FP4KIT_COLS_KERNEL(5, D, _c, 4, 4, 2, false, 1, 512, 2)    \
    FP4KIT_COLS_KERNEL(5, D, _s, 8, 1, 1, true, 1, 256, 4)     \
    FP4KIT_COLS_KERNEL(5, D, _s2, 4, 1, 1, true, 2, 128, 6)
#define FP4KIT_COLS_MX(F, D) FP4KIT_COLS_KERNEL(F, D, _c2, 1, 16, 2, false, 2, 512, 1)
FP4KIT_COLS_NVFP4(1)
FP4KIT_COLS_NVFP4(2)
FP4KIT_COLS_MX(0, 1)
FP4KIT_COLS_MX(0, 2)
FP4KIT_COLS_MX(1, 1)
FP4KIT_COLS_MX(1, 2)
FP4KIT_COLS_MX(2, 1)
FP4KIT_COLS_MX(2, 2)
FP4KIT_COLS_MX(3, 1)
FP4KIT_COLS_MX(3, 2)

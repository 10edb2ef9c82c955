// fp4kit: the columnwise operand alone (plain recipes, 16-bit input), without a shared-memory
// transpose: every thread reads 16 consecutive rows of two adjacent columns (one 4-byte word per
// row: the lanes of a warp read 32 or 64 contiguous bytes of a row per load), so a columnwise block
// (16 or 32 rows of one column of x) is a run of registers of one or two lanes.
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
// same column pair, so that their codes (16 or 8 bytes per column each) fill one 32-byte sector of
// the output row per store instruction, and the two halves of an MX block are neighbouring lanes
// (one shuffle). A warp: 32 / G column pairs x G segments. A CTA: WX warps across columns times WY
// along rows, IT passes along rows.
// Compiled for NVFP4 only (see the kernels at the end: the MX formats measured no faster here).
// Planner conditions (fp4kit/_plan.py cols_kernel): 16-bit input, 4-byte aligned, K even, M a
// multiple of 16 (whole segments, 8-byte aligned code stores), no extended option.
#define FP4KIT_E8M0_SELECT 1
#include "common/quantize_tile.cuh"

using namespace fp4kit;

namespace {

// max(acc, |w|) per 16-bit half (bfloat16 or float16 pairs); max returns the non-NaN operand, so
// NaN is ignored and the starting 0 stays when every element is NaN, as seg_amax's fmaxf.
template <int DT>
__device__ __forceinline__ u32 absmax2(u32 acc, u32 w) {
    u32 r;
    if constexpr (DT == DTYPE_BFLOAT16) asm("max.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(acc), "r"(w & 0x7FFF7FFFu));
    else asm("max.f16x2 %0, %1, %2;" : "=r"(r) : "r"(acc), "r"(w & 0x7FFF7FFFu));
    return r;
}

template <int DT>
__device__ __forceinline__ float half_f32(u32 w, int h) {
    if constexpr (DT == DTYPE_BFLOAT16) return u2f(h ? (w & 0xFFFF0000u) : (w << 16));
    else return f16_bits_to_f32((u16)(h ? (w >> 16) : (w & 0xFFFFu)));
}

template <int FMT>
struct ColsShape {
    static constexpr int G = Fmt<FMT>::packed ? 4 : 2;   // lanes per output sector
    static constexpr int PW = 32 / G;                    // column pairs per warp
    static constexpr int WCOL = 2 * PW;                  // columns per warp
    static constexpr int WROW = SEG * G;                 // rows per warp and pass
};

}  // namespace

// The CTA's tile: CW = WX * WCOL columns from k0, CR = WY * IT * WROW rows from m0.
// SWZ: the scales in the swizzled layout (CW = 128, CR / block = 4: one 512-byte block), else compact
// (RB = CR / block bytes of each column's scale row: 32, one sector, in the kernels below).
template <int FMT, int DT, int WX, int WY, int IT, bool SWZ>
__device__ __forceinline__ void quantize_cols(const void* x, i64 M, i64 K, u8* col_data, u8* col_scales,
                                              const float* amax_col, int flags) {
    typedef Fmt<FMT> F;
    typedef ColsShape<FMT> S;
    constexpr int CW = WX * S::WCOL;
    constexpr int CR = WY * IT * S::WROW;
    constexpr int RB = CR / F::block;   // scale bytes per column of the tile
    static_assert(!SWZ || (CW == 128 && RB == 4), "swizzled: one 128 x 4 block per CTA");
    static_assert(SWZ || RB == 32 || RB == 16 || RB == 8, "compact: 8, 16 or 32 bytes per column");
    __shared__ __align__(16) u8 sc[CW * RB];
    __shared__ float enc_tab[F::mx ? 1 : NV_TAB + 1];

    const i64 nkc = (K + CW - 1) / CW;
    const i64 bm = div_fast((i64)blockIdx.x, nkc);
    const i64 k0 = ((i64)blockIdx.x - bm * nkc) * CW, m0 = bm * CR;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int wx = warp % WX, wy = warp / WX;
    const int p = lane / S::G, j = lane % S::G;
    const int cl = wx * S::WCOL + 2 * p;   // first column of the pair, within the tile
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
        u32 w[SEG];
        if (ok) {
            const u32* src = xw + ((gm * K + kp) >> 1);
            const i64 step = K >> 1;
#pragma unroll
            for (int i = 0; i < SEG; ++i) w[i] = __ldcs(src + i * step);
        } else {
#pragma unroll
            for (int i = 0; i < SEG; ++i) w[i] = 0u;
        }
        u32 am = 0u;
#pragma unroll
        for (int i = 0; i < SEG; ++i) am = absmax2<DT>(am, w[i]);
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
            for (int i = 0; i < SEG; ++i) v[i] = half_f32<DT>(w[i], h);
            u32 c[4];
            encode_seg<FMT>(v, mul, false, 0ull, 1u, 0, c);
            if (ok) {
                if constexpr (F::packed) {
                    *reinterpret_cast<uint2*>(col_data + (kp + h) * (M >> 1) + (gm >> 1)) = make_uint2(c[0], c[1]);
                } else {
                    *reinterpret_cast<uint4*>(col_data + (kp + h) * M + gm) = make_uint4(c[0], c[1], c[2], c[3]);
                }
            }
            if (F::block == 16 || (j & 1) == 0) {
                const int r = cl + h, b = rl / F::block;   // scale (row r, column b) of the tile
                if constexpr (SWZ) sc[(r & 31) * 16 + (r >> 5) * 4 + b] = (u8)code;
                else sc[r * RB + b] = (u8)code;
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
            const i64 Cq = (nb + 3) >> 2;
            reinterpret_cast<uint4*>(col_scales + ((k0 >> 7) * Cq + (b0 >> 2)) * 512)[t] = v;
        }
    } else {
        // column r's RB bytes b0 .. b0 + RB - 1 of its compact row, as 16-byte (8-byte) pieces
        constexpr int PB = RB >= 16 ? 16 : 8, NP = RB / PB;
        if (t < NP * CW) {
            const int r = t / NP, piece = t % NP;
            const i64 k = k0 + r, bb = b0 + piece * PB;
            if (k < K && bb < nb) {
                const int n = (int)((nb - bb) < PB ? (nb - bb) : PB);
                u8* dst = col_scales + k * nb + bb;
                const u8* s = sc + r * RB + piece * PB;
                if (n == PB && (reinterpret_cast<u64>(dst) & (PB - 1)) == 0) {
                    if constexpr (PB == 16) *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(s);
                    else *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(s);
                } else {
                    for (int i = 0; i < n; ++i) dst[i] = s[i];
                }
            }
        }
    }
}

// quantize_cols_f5_d<D>_{c,s}: NVFP4 with compact / swizzled scales. Grid: ceil(K / CW) *
// ceil(M / CR) CTAs, column tiles fastest. Compact: 512 threads (WX 4, WY 4, IT 2), 64 columns x 512
// rows; swizzled: 256 threads (WX 8, WY 1, IT 1), 128 columns x 64 rows.
// H100, kernel time, 8192^2 (16384^2) bfloat16, same run: NVFP4 columnwise 84.1 (319.5) us with the
// tile kernel -> 70.6 (272.0) compact, 83.7 (310.6) -> 69.4 (268.2) swizzled: the tile kernel is
// ALU-bound for FP4 and this one has no shared-memory transpose. Not for the MX formats, which
// measured slower or no faster than the tile kernel with every shape tried (CTAs of 256 / 512 / 1024
// threads, 8 / 16 / 32 scale bytes per column, an L2 prefetch of the next pass): MXFP8 84.9 - 95.7 us
// compact and 79.8 - 83.8 swizzled against 83.3 / 78.9 (tile kernel; compact with its unswizzle
// launch), MXFP4 73.5 - 105.0 / 72.5 - 83.9 against 71.1 / 72.3 (docs/performance.md item 60).
#define FP4KIT_COLS_KERNEL(D, SUFFIX, WX, WY, IT, SWZ, T, MB)                                           \
    extern "C" __global__ void __launch_bounds__(T, MB)                                                 \
    quantize_cols_f5_d##D##SUFFIX(const void* x, i64 M, i64 K, u8* col_data, u8* col_scales,            \
                                  const float* amax_col, int flags) {                                   \
        quantize_cols<5, D, WX, WY, IT, SWZ>(x, M, K, col_data, col_scales, amax_col, flags);           \
    }
FP4KIT_COLS_KERNEL(1, _c, 4, 4, 2, false, 512, 2)
FP4KIT_COLS_KERNEL(2, _c, 4, 4, 2, false, 512, 2)
FP4KIT_COLS_KERNEL(1, _s, 8, 1, 1, true, 256, 4)
FP4KIT_COLS_KERNEL(2, _s, 8, 1, 1, true, 256, 4)

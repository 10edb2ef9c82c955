// fp4kit: grouped (MoE) quantize / dequantize, SPEC section 7.
//
// group_dims_store  host dims passed by value -> a device buffer (the fast path's host dims past
//                   what group_meta_dims takes).
// group_meta_dims   group_meta with the host dims by value (stored for the later kernels).
// group_meta        one CTA: member dims (device int64) -> prefixes and offsets, checked; on any
//                   error it sets the error flags and zeroes every work list, so the kernels below
//                   do nothing and nothing is written out of bounds. With one K it also writes the
//                   member of every 64-row band (the quantize kernels' lookups, memoised) and, for
//                   plain NVFP4, a descriptor of every tile band (BandDesc).
// group_stats_d*    persistent: per-member NVFP4 amax (plain, per row / per column, post-RHT) and
//                   dbias column sums (float64 atomics), one pass over the input.
// group_amax_rows_cols_d* row-scaled NVFP4 with one K: per-row / per-column amaxes over the (sum M_i,
//                   K) matrix with 16-byte loads (common/amax.cuh amax_rows_cols_vec).
// group_amax_plain_rht_bf16 NVFP4 rht with one K: every member's plain and post-RHT amax, one pass.
// group_quantize_*  persistent, statically scheduled: CTA b takes tiles b, b + grid, ... of the
//                   concatenated 64x64 tile list and finds each tile's member by binary search.
// group_quantize1_* MX and plain NVFP4, one K: the tile kernel with one tile per CTA (no loop); the
//                   grid covers every tile (NVFP4: each CTA reads its band's descriptor).
// group_quantize_rowsk_* rowwise with one K (same / varying_first): blocks of the (sum M_i, K)
//                   matrix, one per CTA (grid-strided beyond the grid); members from the band table.
// group_dequantize_* grid-stride over 16-element segments of every member (persistent grid).
// Swizzled scale buffers are not cleared before the launch: every group_quantize* kernel ends by
// writing the zero padding of the members' swizzled matrices (group_zero_padding).
#include "common/parts.cuh"
#include "common/quantize_tile.cuh"
#include "common/dequantize_op.cuh"
#include "common/amax.cuh"

// The MX one-tile kernel's scale stash (quantize_tile_rc's STASH 1) where it reads no descriptors,
// bit F for format F: MXFP6 (bits 2, 3), from float32 input (and bfloat16 when FP4KIT_GQ1_DESC is
// redefined), on Hopper (group_quantize_one says why; for sm_100a ptxas then spills 8 bytes from
// bfloat16, and nothing was measured there; an A/B probe can redefine it)
#ifndef FP4KIT_GQ1_STASH
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
#define FP4KIT_GQ1_STASH 0
#else
#define FP4KIT_GQ1_STASH 12
#endif
#endif
// The MX one-tile kernel reads its bands' descriptors, bit F for format F: MXFP6 (bits 2, 3), from
// 16-bit input (group_quantize_one). fp4kit/_cuda_grouped.py MX_DESC_FORMATS mirrors it.
#define FP4KIT_GQ1_DESC 12
namespace fp4kit {

// meta: 10 arrays of G + 1 int64 each (fp4kit/_cuda_grouped.py mirrors this order)
enum MetaArray : int {
    META_OFF = 0,    // element offsets
    META_TILES = 1,  // 64x64 tile prefix
    META_SROW = 2,   // rowwise scale byte offsets
    META_SCOL = 3,   // columnwise scale byte offsets
    META_AROW = 4,   // rowwise amax offsets
    META_ACOL = 5,   // columnwise amax offsets
    META_SEGR = 6,   // rowwise 16-element segment prefix (dequantize)
    META_SEGC = 7,   // columnwise segment prefix
    META_ROWS = 8,   // row prefix (sum of first dims)
    META_SQ = 9,     // 128-row band prefix (sum of ceil(M_i / 128); group_quantize4's squares)
    META_COUNT = 10,
};

// error bits (fp4kit/_grouped_device.py ERRORS)
enum GroupError : int {
    GERR_NEGATIVE = 1,
    GERR_ELEMENTS = 2,
    GERR_SCALES = 4,
    GERR_PACKED = 8,
    GERR_RHT = 16,
    GERR_AMAX = 32,
    GERR_ROWS = 64,
};

__device__ __forceinline__ i64 roundup_i64(i64 a, i64 m) { return (a + m - 1) / m * m; }

__device__ __forceinline__ i64 scale_bytes(i64 rows, i64 cols, int block, int swizzled) {
    const i64 nb = (cols + block - 1) / block;
    return swizzled ? roundup_i64(rows, 128) * roundup_i64(nb, 4) : rows * nb;
}

__device__ __forceinline__ int input_itemsize(int dt) { return dt == DTYPE_FLOAT32 ? 4 : 2; }

// CTA-wide max of the non-negative float bits `b` (every thread calls it; red: 8 shared words);
// thread 0 folds a non-zero result into row[i] and, when col is given, col[i] with atomicMax.
__device__ __forceinline__ void cta_max_atomic(u32 b, u32* red, u32* row, u32* col, i64 i) {
    for (int o = 16; o; o >>= 1) { const u32 v = __shfl_xor_sync(0xFFFFFFFFu, b, o); b = v > b ? v : b; }
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = b;
    __syncthreads();
    if (threadIdx.x == 0) {
        u32 m = 0;
        for (int w = 0; w < QT_THREADS / 32; ++w) m = red[w] > m ? red[w] : m;
        if (m) {
            if (row) atomicMax(row + i, m);
            if (col) atomicMax(col + i, m);
        }
    }
    __syncthreads();   // red is reused by the next call
}

// Zero the padding bytes of one swizzled (R, C) scale matrix at `s` (C: blocks per row): rows
// R .. roundup(R, 128) and columns C .. roundup(C, 4) (SPEC: padding reads 0). Only the 16-byte
// chunks of the last 128-row tile and of the last 4-column group hold padding (swizzle.cu's chunk
// layout: chunk (bi, bj, rr) holds rows 128 bi + rr + 32 g, columns 4 bj + c at byte 4 g + c);
// the CTA's threads take them in turn and write only padding bytes, so the quantize work that
// writes the other bytes of those chunks may run at the same time.
__device__ __forceinline__ void zero_swizzled_padding(u8* s, i64 R, i64 C) {
    if (R <= 0 || C <= 0) return;
    const i64 nbi = (R + 127) >> 7, nbj = (C + 3) >> 2;
    const i64 n_row = (R & 127) ? nbj * 32 : 0;                 // the last row tile, every column group
    const i64 n_col = (C & 3) ? (nbi - (n_row ? 1 : 0)) * 32 : 0;   // the last column group, other tiles
    for (i64 e = threadIdx.x; e < n_row + n_col; e += blockDim.x) {
        i64 bi, bj;
        const int rr = (int)(e & 31);
        if (e < n_row) { bi = nbi - 1; bj = e >> 5; }
        else { bi = (e - n_row) >> 5; bj = nbj - 1; }
        const i64 i0 = bi * 128 + rr, j0 = bj * 4;
        u8* p = s + ((bi * nbj + bj) * 32 + rr) * 16;
        if (i0 >= R && (reinterpret_cast<u64>(p) & 15) == 0) {   // four padding rows
            *reinterpret_cast<uint4*>(p) = make_uint4(0u, 0u, 0u, 0u);
            continue;
        }
        zero_chunk_padding(p, i0, j0, R, C);
    }
}

// The padding of every member's swizzled scales (the grouped scale buffers are not cleared
// first): CTA b takes members b, b + grid, ... Dims come from meta (all zero after a metadata
// error, so nothing is written then); K1 > 0: every member's K, else last[g].
__device__ __forceinline__ void group_zero_padding(i64 G, const i64* meta, const i64* last, i64 K1, int block,
                                                   u8* row_scales, u8* col_scales) {
    const i64* rows = meta + (i64)META_ROWS * (G + 1);
    const i64* srow = meta + (i64)META_SROW * (G + 1);
    const i64* scol = meta + (i64)META_SCOL * (G + 1);
    for (i64 g = blockIdx.x; g < G; g += gridDim.x) {
        const i64 M = rows[g + 1] - rows[g];
        if (M <= 0) continue;
        const i64 K = K1 > 0 ? K1 : last[g];
        if (row_scales) zero_swizzled_padding(row_scales + srow[g], M, (K + block - 1) / block);
        if (col_scales) zero_swizzled_padding(col_scales + scol[g], K, (M + block - 1) / block);
    }
}

}  // namespace fp4kit

using namespace fp4kit;

// With one K and bit 64 of its `bits`, group_meta also writes a descriptor of every 64-row band of
// the tile list (band + band_desc_offset(..), BAND_DESC int64 each): everything the loop-free MXFP4 / NVFP4 (and MXFP6 from 16-bit input)
// tile kernel (group_quantize1) needs about the band's member, so that a CTA's input loads wait for one lookup
// (16-byte loads of one descriptor) instead of three dependent ones (tile count, band -> member,
// member -> offsets). Bands past the last one have M = 0. fp4kit/_cuda_grouped.py sizes the buffer.
enum BandDesc : int {
    BD_OFF = 0,    // member's element offset
    BD_M = 1,      // member's rows (0: no tile in this band)
    BD_SROW = 2,   // member's rowwise / columnwise scale offsets
    BD_SCOL = 3,
    BD_AROW = 4,   // member's rowwise / columnwise amax offsets
    BD_ACOL = 5,
    BD_BAND = 6,   // the band's index within its member
    BD_G = 7,      // the member (not read by the kernels; fills the descriptor to 4 x 16 bytes)
    BAND_DESC = 8,
};
enum { SQ_DESC = 4 };   // int64 per square band descriptor (group_meta bit 128)
// A tile band's member lookup (band[n_band_rows + j]): the member in the low 32 bits, the band's
// index within its member in the high ones (the one-tile kernel's tile row, without a division).
constexpr i64 BAND_MEMBER = 0xFFFFFFFFll;
__host__ __device__ __forceinline__ i64 band_desc_offset(i64 n_band_rows, i64 n_band_tiles) {
    return (n_band_rows + n_band_tiles + 1) & ~(i64)1;   // 16-byte aligned
}

// bits: 1 packed, 2 swizzled, 4 row_scaled, 8 rht, 16 want_row, 32 want_col, 64 band descriptors,
// 256 (with 64) the descriptors' amax offsets count NV_TAB + 1 floats per member (BD_AROW / BD_ACOL
// address group_stats' multiplier tables, QFLAG_ENC_TABS), 128 square bands: from band +
// band_desc_offset(n_band_rows, n_band_tiles), after the n_band_tiles tile band descriptors with 64
// (for group_quantize4 the launcher passes n_band_rows = n_band_tiles = 0: no member lookups are
// written), SQ_DESC int64 per
// 128-row band j < n_band_sq of group_quantize4's square list (members' bands start at META_SQ):
// {member's element offset, member's rows M, band within the member, member}; M = 0 past the last
// band and after an error (scalars only, so the launch can be captured in a CUDA graph without host-to-device copies).
// 512: the one-tile kernel's staged compact scales (meta holds 2 META_COUNT (G + 1) int64; see below).
// 1024 (kind varying_first with device dims, K1 > 0): every member's last dim is K1, and group_meta
// writes it into `last` (an uninitialised (G,) buffer the later kernels and the result read) instead
// of reading it: the launcher's fill launch of that buffer is folded in here.
// With one K (K1 > 0) and a `band` buffer, it also memoises the quantize kernels' member lookups:
// band[i] (i < n_band_rows) is the member of global row 64 i, band[n_band_rows + j] the member of
// the j-th 64-row band of the tile list (tiles j * tiles_k ..) | the band's index within that member
// << 32 (BAND_MEMBER), so a tile's loads wait for one lookup instead of a binary search.
// tabs (with bit 256): CTAs 1 .. ceil(G / 2) write the NVFP4 multiplier table of every member's
// supplied amax tab_amax[g] at tabs + g (NV_TAB + 1) (computed amaxes: group_stats writes them).
// One CTA of META_THREADS threads, META_THREADS members at a time: thread t computes member t's
// contributions (the 64-bit divisions) and checks into shared memory; warp 0 then adds them up 32
// members at a time (warp scans, saturating so that no sum wraps), stopping at the first member
// with negative dims or past max_elements as a serial loop would (one thread doing all of it took
// 40 us for G = 64 on the H200). On an error every thread zeroes the work lists.
#define META_THREADS 256
enum MetaCheck : int { MCHK_NEGATIVE = 1, MCHK_TOO_BIG = 2 };   // besides GERR_PACKED, GERR_RHT bits (<< 8)

__device__ __forceinline__ u64 sat_add(u64 a, u64 b) {   // a, b <= INT64_MAX
    const u64 c = a + b, cap = 0x7FFFFFFFFFFFFFFFull;
    return c > cap ? cap : c;
}

// group_dims_store: n <= DIMS_ARG_MAX int64 values passed by value, stored at dst (the host dims
// of a grouped quantize on the fast path, fp4kit._torch_exec: no host-to-device copy, so no pinned
// staging and no synchronisation, and a captured CUDA graph keeps the values it was captured with).
// The parameter block stays within 4 KB (16 + 8 DIMS_ARG_MAX bytes); fp4kit._plan.DIMS_ARG_MAX
// mirrors the bound.
#define DIMS_ARG_MAX 480
struct DimsArg {
    i64 v[DIMS_ARG_MAX];
};
#if FP4KIT_IN_PART(FP4KIT_PART_COMMON)
extern "C" __global__ void __launch_bounds__(256) group_dims_store(i64* dst, i64 n, DimsArg d) {
    FP4KIT_GRID_DEP();
    for (int i = threadIdx.x; i < n; i += blockDim.x) dst[i] = d.v[i];
}
#endif

// BYVAL (group_meta_dims): the dims come as the parameter struct *hv (first then last, 2 G <=
// DIMS_ARG_MAX values; with one K, bit 1024, the first dims only, G <= DIMS_ARG_MAX, and every last
// dim is K1); CTA 0 stores them at first / last (one int64 buffer of the plan) for the kernels after
// it, so host dims need neither a copy nor a store launch.
template <bool BYVAL>
__device__ __forceinline__ void group_meta_body(i64 G, const i64* first, const i64* last, int block, int bits,
                                                i64 max_elements, i64 rows_total, i64 cap_srow, i64 cap_scol,
                                                i64 cap_arow, i64 cap_acol, i64* meta, int* err, i64 K1, i64* band,
                                                i64 n_band_rows, i64 n_band_tiles, i64 n_band_sq,
                                                const float* tab_amax, float* tabs, const DimsArg* hv,
                                                const i64* src_first = nullptr, const i64* src_last = nullptr) {
    __shared__ i64 val[META_COUNT][META_THREADS];   // member's addition to array k
    __shared__ int chk[META_THREADS];
    __shared__ int e_sh;
    if (blockIdx.x != 0) {
        // CTAs 1, 2, ..: NVFP4 multiplier tables of supplied amaxes, two members per CTA (threads
        // 0-127 member 2 (b - 1), 128-255 the next), the tile kernel's nvfp4_fill_table. The amax
        // with its sign bit cleared, as its stored copy (nvfp4_amax_out's mask) and the single-tensor
        // tables: a device amax is never checked on the host, and a negative one made S_enc negative,
        // so scale codes >= 0x80 indexed past the 128-entry table (an illegal address)
        if (tabs != nullptr) {
            const i64 g = 2 * ((i64)blockIdx.x - 1) + (threadIdx.x >> 7);
            if (g < G)
                nvfp4_fill_table(tabs + g * (NV_TAB + 1), u2f(f2u(tab_amax[g]) & 0x7FFFFFFFu), (int)(threadIdx.x & ~127u));
        }
        return;
    }
    const int tid = threadIdx.x, lane = tid & 31;
    const int packed = bits & 1, swz = (bits >> 1) & 1, rs = (bits >> 2) & 1, rht = (bits >> 3) & 1;
    const int want_row = (bits >> 4) & 1, want_col = (bits >> 5) & 1;
    const i64 W = G + 1;   // meta[k * W + g]: array k, entry g
    u64 p[META_COUNT];     // warp 0: running prefixes (uniform across the warp)
    for (int k = 0; k < META_COUNT; ++k) p[k] = 0;
    int e = 0;
    bool stop = false;     // warp 0: negative dims or too many elements ended the scan
    if (tid == 0)
        for (int k = 0; k < META_COUNT; ++k) meta[k * W] = 0;
    for (i64 base = 0; base < G; base += META_THREADS) {
        const int n = (int)(G - base < META_THREADS ? G - base : META_THREADS);
        __syncthreads();   // warp 0 is done with the previous chunk
        if (tid < n) {
            // src_first / src_last (device dims): the caller's arrays, copied into first / last (the
            // plan's, which the later launches and the result read), so that a result stays whole
            // when the caller reuses its dims buffer (group_dequantize and the member views read the
            // dims again; new dims with the old offsets could write past a member)
            i64 M, K;
            if constexpr (BYVAL) M = hv->v[base + tid];
            else M = src_first != nullptr ? src_first[base + tid] : first[base + tid];
            if (bits & 1024) K = K1;                    // one K: every last dim is K1
            else if constexpr (BYVAL) K = hv->v[G + base + tid];
            else K = src_last != nullptr ? src_last[base + tid] : last[base + tid];
            if (BYVAL || src_first != nullptr) const_cast<i64*>(first)[base + tid] = M;
            if (BYVAL || (bits & 1024) || src_last != nullptr) const_cast<i64*>(last)[base + tid] = K;
            int c = 0;
            if (M < 0 || K < 0) c = MCHK_NEGATIVE;
            else if (M != 0 && K > max_elements / M) c = MCHK_TOO_BIG;   // alone past the bound
            i64 v[META_COUNT];
            for (int k = 0; k < META_COUNT; ++k) v[k] = 0;
            if (c == 0) {
                if (packed && ((want_row && (K & 1)) || (want_col && (M & 1)))) c |= GERR_PACKED << 8;
                if (rht && (M & 15)) c |= GERR_RHT << 8;
                v[META_OFF] = M * K;
                v[META_TILES] = ((M + QT_M - 1) / QT_M) * ((K + QT_K - 1) / QT_K);
                v[META_SROW] = want_row ? scale_bytes(M, K, block, swz) : 0;
                v[META_SCOL] = want_col ? scale_bytes(K, M, block, swz) : 0;
                v[META_AROW] = rs ? M : 1;
                v[META_ACOL] = rs ? K : 1;
                v[META_SEGR] = M * ((K + 15) / 16);
                v[META_SEGC] = K * ((M + 15) / 16);
                // rows: with varying K (no one-K bit 1024) only group_zero_padding reads them, and a
                // member with K = 0 holds no scale bytes; counting its M there let members of
                // huge M and K = 0 (within every element bound) saturate the prefix, so that a
                // later member's padding went unwritten
                v[META_ROWS] = (K == 0 && !(bits & 1024)) ? 0 : M;
                v[META_SQ] = (M + 127) / 128;
            }
#pragma unroll
            for (int k = 0; k < META_COUNT; ++k) val[k][tid] = v[k];
            chk[tid] = c;
        }
        __syncthreads();
        if (tid >= 32 || stop) continue;
        for (int q = 0; q < n; q += 32) {
            const int i = q + lane;
            const bool in = i < n;
            const int c = in ? chk[i] : 0;
            u64 s[META_COUNT];
#pragma unroll
            for (int k = 0; k < META_COUNT; ++k) s[k] = in ? (u64)val[k][i] : 0ull;
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
#pragma unroll
                for (int k = 0; k < META_COUNT; ++k) {
                    const u64 y = __shfl_up_sync(0xFFFFFFFFu, s[k], o);
                    if (lane >= o) s[k] = sat_add(s[k], y);
                }
            }
#pragma unroll
            for (int k = 0; k < META_COUNT; ++k) s[k] = sat_add(s[k], p[k]);   // inclusive prefix of member i
            const bool fail = in && ((c & (MCHK_NEGATIVE | MCHK_TOO_BIG)) || s[META_OFF] > (u64)max_elements);
            const unsigned fmask = __ballot_sync(0xFFFFFFFFu, fail);
            const int f1 = fmask ? __ffs(fmask) - 1 : 32;   // first failing member of these 32
            e |= (int)__reduce_or_sync(0xFFFFFFFFu, (unsigned)((in && lane < f1) ? (c >> 8) : 0));
            if (fmask) {
                const int cf = __shfl_sync(0xFFFFFFFFu, c, f1);
                e |= (cf & MCHK_NEGATIVE) ? GERR_NEGATIVE : GERR_ELEMENTS;
                stop = true;
                break;
            }
            if (in) {
#pragma unroll
                for (int k = 0; k < META_COUNT; ++k) meta[k * W + base + i + 1] = (i64)s[k];
            }
#pragma unroll
            for (int k = 0; k < META_COUNT; ++k) p[k] = __shfl_sync(0xFFFFFFFFu, s[k], 31);
        }
    }
    if (tid == 0) {
        if (!e) {
            if (rows_total >= 0 && p[META_ROWS] > (u64)rows_total) e |= GERR_ROWS;
            if (p[META_SROW] > (u64)cap_srow || p[META_SCOL] > (u64)cap_scol) e |= GERR_SCALES;
            if (p[META_AROW] > (u64)cap_arow || p[META_ACOL] > (u64)cap_acol) e |= GERR_AMAX;
        }
        e_sh = e;
        *err = e;
    }
    __syncthreads();
    // bit 64: with one K, also the tile bands' descriptors (group_quantize_one for MXFP4 / NVFP4)
    i64* desc = (band != nullptr && K1 > 0 && (bits & 64)) ? band + band_desc_offset(n_band_rows, n_band_tiles) : nullptr;
    // bit 128: the square bands' descriptors (group_quantize4, group_unswizzle_scales), after the tile
    // bands' descriptors when there are both
    i64* sqd = (band != nullptr && K1 > 0 && (bits & 128))
                   ? band + band_desc_offset(n_band_rows, n_band_tiles) + (desc != nullptr ? n_band_tiles * BAND_DESC : 0)
                   : nullptr;
    // bit 512 (one K, block 32, K1 % 128 == 0): staged compact scales of the one-tile kernel, which
    // writes every member's scales swizzled at staged_scales_offset(K1, sq[g]) of two staging buffers (the layout
    // group_unswizzle_scales reads): a second copy of the arrays at meta + META_COUNT (G + 1) with
    // META_SROW / META_SCOL replaced by those offsets, for the tile kernel (and in the descriptors)
    const bool staged = (bits & 512) && K1 > 0;
    if (e_sh) {   // no work at all: every prefix and offset back to zero, every tile band empty
        for (i64 i = tid; i < (i64)META_COUNT * W * (staged ? 2 : 1); i += META_THREADS) meta[i] = 0;
        if (desc != nullptr) {
            longlong2* dv = reinterpret_cast<longlong2*>(desc);
            for (i64 i = tid; i < n_band_tiles * (BAND_DESC / 2); i += META_THREADS) dv[i] = make_longlong2(0, 0);
        }
        if (sqd != nullptr) {
            longlong2* dv = reinterpret_cast<longlong2*>(sqd);
            for (i64 i = tid; i < n_band_sq * (SQ_DESC / 2); i += META_THREADS) dv[i] = make_longlong2(0, 0);
        }
        return;
    }
    if (staged) {   // the tile kernel's copy of the arrays (read-only meta above: written by warp 0 before the barrier)
        const i64* sq = meta + (i64)META_SQ * W;
        for (i64 i = tid; i < (i64)META_COUNT * W; i += META_THREADS) {
            const i64 k = i / W;
            meta[(i64)META_COUNT * W + i] =
                (k == META_SROW || k == META_SCOL) ? staged_scales_offset(K1, sq[i - k * W]) : meta[i];
        }
    }
    if (band != nullptr && K1 > 0) {   // one K: a warp per member writes that member's entries
        const i64* rows = meta + (i64)META_ROWS * W;
        const i64* tiles = meta + (i64)META_TILES * W;
        const i64 tiles_k = (K1 + QT_K - 1) / QT_K;
        for (i64 g = tid >> 5; g < G; g += META_THREADS / 32) {
            i64 r1 = (rows[g + 1] + QT_M - 1) / QT_M;          // rows 64 i in [rows[g], rows[g+1])
            r1 = r1 < n_band_rows ? r1 : n_band_rows;
            for (i64 i = (rows[g] + QT_M - 1) / QT_M + lane; i < r1; i += 32) band[i] = g;
            const i64 t0 = tiles[g] / tiles_k;                  // bands [tiles[g], tiles[g+1]) / tiles_k
            i64 t1 = tiles[g + 1] / tiles_k;
            t1 = t1 < n_band_tiles ? t1 : n_band_tiles;
            if (sqd != nullptr) {                               // square bands [sq[g], sq[g+1])
                const i64* sq = meta + (i64)META_SQ * W;
                const i64 s0 = sq[g], s1 = sq[g + 1] < n_band_sq ? sq[g + 1] : n_band_sq;
                const longlong2 f0 = make_longlong2(meta[(i64)META_OFF * W + g], rows[g + 1] - rows[g]);
                for (i64 i = s0 + lane; i < s1; i += 32) {
                    longlong2* dv = reinterpret_cast<longlong2*>(sqd + i * SQ_DESC);
                    dv[0] = f0;
                    dv[1] = make_longlong2(i - s0, g);
                }
            }
            if (desc == nullptr) {
                for (i64 j = t0 + lane; j < t1; j += 32) band[n_band_rows + j] = g | (j - t0) << 32;
                continue;
            }
            // the member's descriptor fields, read once (the stores below may alias meta for the compiler)
            const longlong2 f0 = make_longlong2(meta[(i64)META_OFF * W + g], rows[g + 1] - rows[g]);
            const i64 st = staged ? staged_scales_offset(K1, meta[(i64)META_SQ * W + g]) : 0;
            const longlong2 f1 = staged ? make_longlong2(st, st)
                                        : make_longlong2(meta[(i64)META_SROW * W + g], meta[(i64)META_SCOL * W + g]);
            const i64 as = (bits & 256) ? NV_TAB + 1 : 1;   // the amax pointers then address tables
            const longlong2 f2 = make_longlong2(meta[(i64)META_AROW * W + g] * as, meta[(i64)META_ACOL * W + g] * as);
            for (i64 j = t0 + lane; j < t1; j += 32) {
                band[n_band_rows + j] = g | (j - t0) << 32;
                longlong2* dv = reinterpret_cast<longlong2*>(desc + j * BAND_DESC);
                dv[0] = f0;
                dv[1] = f1;
                dv[2] = f2;
                dv[3] = make_longlong2(j - t0, g);
            }
        }
        if (sqd != nullptr) {    // square bands past the last one: empty
            const longlong2 z = make_longlong2(0, 0);
            for (i64 j = meta[(i64)META_SQ * W + G] + tid; j < n_band_sq; j += META_THREADS) {
                longlong2* dv = reinterpret_cast<longlong2*>(sqd + j * SQ_DESC);
                dv[0] = z; dv[1] = z;
            }
        }
        if (desc != nullptr) {   // bands past the last one: empty
            const longlong2 z = make_longlong2(0, 0);
            for (i64 j = tiles[G] / tiles_k + tid; j < n_band_tiles; j += META_THREADS) {
                longlong2* dv = reinterpret_cast<longlong2*>(desc + j * BAND_DESC);
                dv[0] = z; dv[1] = z; dv[2] = z; dv[3] = z;
            }
        }
    }
}

#if FP4KIT_IN_PART(FP4KIT_PART_COMMON)
extern "C" __global__ void __launch_bounds__(META_THREADS)
group_meta(i64 G, const i64* first, const i64* last, int block, int bits, i64 max_elements, i64 rows_total,
           i64 cap_srow, i64 cap_scol, i64 cap_arow, i64 cap_acol, i64* meta, int* err, i64 K1, i64* band,
           i64 n_band_rows, i64 n_band_tiles, i64 n_band_sq, const float* tab_amax, float* tabs,
           const i64* src_first, const i64* src_last) {
    FP4KIT_GRID_DEP();
    group_meta_body<false>(G, first, last, block, bits, max_elements, rows_total, cap_srow, cap_scol, cap_arow,
                           cap_acol, meta, err, K1, band, n_band_rows, n_band_tiles, n_band_sq, tab_amax, tabs,
                           nullptr, src_first, src_last);
}

// group_meta with the host dims by value (152 + 8 DIMS_ARG_MAX = 3992 bytes of parameters, within
// the 4 KB of every CUDA version; __grid_constant__: read in place, no per-thread copy)
extern "C" __global__ void __launch_bounds__(META_THREADS)
group_meta_dims(i64 G, i64* first, i64* last, int block, int bits, i64 max_elements, i64 rows_total,
                i64 cap_srow, i64 cap_scol, i64 cap_arow, i64 cap_acol, i64* meta, int* err, i64 K1, i64* band,
                i64 n_band_rows, i64 n_band_tiles, i64 n_band_sq, const float* tab_amax, float* tabs,
                const __grid_constant__ DimsArg d) {
    FP4KIT_GRID_DEP();
    group_meta_body<true>(G, first, last, block, bits, max_elements, rows_total, cap_srow, cap_scol, cap_arow,
                          cap_acol, meta, err, K1, band, n_band_rows, n_band_tiles, n_band_sq, tab_amax, tabs, &d);
}
#endif

namespace fp4kit {

// group_stats' multiplier tables: at most this many members (the per-CTA counts live in shared memory;
// fp4kit/_cuda_grouped.py mirrors it), else the tile kernel builds them in every CTA.
#define STATS_TABS_MAX_G 512

// The end of group_stats' streaming pass with tables: the CTA adds the elements it covered of each
// member (cnt_sh) to done[g], and the CTA whose addition completes a member's size builds that
// member's table, tabs + g (NV_TAB + 1) (nvfp4_fill_table of its amax, which every CTA's atomicMax
// has reached: each CTA's atomics come before its barrier, fence and counts, and the completing
// thread reads the amax after its own fence, with an atomic at L2). Counting once per CTA at its
// end keeps fences and returning atomics out of the streaming loop (one per member change there cost
// 50 us at G = 64 on the H100: a CTA changes member at almost every chunk).
__device__ __forceinline__ void stats_tables(i64 G, const i64* off, const i64* cnt_sh, u32* amax,
                                             unsigned long long* done, float* tabs) {
    __shared__ int n_done;
    __shared__ i64 done_g[QT_THREADS];
    __shared__ float done_a[QT_THREADS];
    const int tid = threadIdx.x;
    for (i64 base = 0; base < G; base += QT_THREADS) {
        if (tid == 0) n_done = 0;
        __syncthreads();   // every atomicMax of this CTA (thread 0) and every count is in; n_done reset
        const i64 g = base + tid;
        if (g < G && cnt_sh[g] > 0) {
            __threadfence();   // this CTA's atomicMax (ordered by the barrier) before the count
            const unsigned long long n = (unsigned long long)cnt_sh[g];
            if ((i64)(atomicAdd(done + g, n) + n) == off[g + 1] - off[g]) {
                __threadfence();
                const int k = atomicAdd(&n_done, 1);
                done_g[k] = g;
                done_a[k] = u2f(atomicOr(amax + g, 0u));   // final: read at L2 after the fence
            }
        }
        __syncthreads();
        for (int k = 0; k < n_done; k += 2) {   // two members per pass: threads 0-127, 128-255
            const int kk = k + (tid >> 7);
            if (kk < n_done) nvfp4_fill_table(tabs + done_g[kk] * (NV_TAB + 1), done_a[kk], (tid >> 7) << 7);
        }
        __syncthreads();   // n_done and the lists are reused by the next round
    }
}

// Per-member statistics over the input (null outputs are skipped): mode bits 1 = plain amax (-> amax_row[g]; with bit 16 also
// -> amax_col[g]),
// 2 = per-row amax (amax_row[AROW[g] + m]) and per-column amax (amax_col[ACOL[g] + k]),
// 4 = post-RHT columnwise amax (amax_col[g]), 8 = dbias column sums (dbias[g * K + k], float64).
// With the plain amax only (mode 1 or 17) and tabs given (G <= STATS_TABS_MAX_G), also every
// non-empty member's NVFP4 multiplier table (stats_tables; done: G zeroed counters), so that the
// tile kernel copies it (QFLAG_ENC_TABS) instead of building it in every CTA.
template <int DT>
__device__ __forceinline__ void group_stats(const void* x, i64 G, const i64* meta, const i64* first,
                                            const i64* last, int mode, u32 rht_mask, u32* amax_row,
                                            u32* amax_col, double* dbias, i64 dbias_K, float* tabs,
                                            unsigned long long* done) {
    __shared__ float tile[QT_M][QT_PITCH];
    __shared__ u32 red[QT_THREADS / 32];
    const i64* off = meta + (i64)META_OFF * (G + 1);
    const i64* tiles = meta + (i64)META_TILES * (G + 1);
    const i64* arow = meta + (i64)META_AROW * (G + 1);
    const i64* acol = meta + (i64)META_ACOL * (G + 1);
    const i64 total = tiles[G];
    const int tid = threadIdx.x;
    if ((mode & ~17) == 0) {
        // Plain amax only (NVFP4 computed amax): member g's elements are the contiguous range
        // [off[g], off[g+1]) of the flat input, so the pass streams the whole buffer like a copy.
        // A chunk is U x 256 16-byte vectors (thread tid takes vectors tid, tid + 256, ...; all U
        // loads issued first); its first and last elements' members are looked up once per chunk.
        // A chunk inside one member feeds a running max (fmaxf ignores NaN; one atomicMax per member
        // visited); the few chunks that straddle a boundary attribute element by element.
        constexpr int V = In<DT>::vec;
        constexpr int U = 4;
        constexpr int CH = U * QT_THREADS * V;   // elements per chunk
        typedef typename In<DT>::T T;
        const T* xt = reinterpret_cast<const T*>(x);
        const i64 n = off[G];
        const i64 nch = (n + CH - 1) / CH;
        const bool vec_ok = (reinterpret_cast<u64>(x) & 15) == 0;
        __shared__ i64 cnt_sh[STATS_TABS_MAX_G];   // tabs: elements of member g this CTA covered
        if (G > STATS_TABS_MAX_G) tabs = nullptr;    // the launcher passes none then
        if (tabs != nullptr) {   // CTA-uniform
            for (i64 i = tid; i < G; i += QT_THREADS) cnt_sh[i] = 0;
            __syncthreads();     // zeroed before thread 0 adds to any entry
        }
        i64 cur = -1, cnt = 0;   // cnt: elements of member cur since its last flush
        float acc = 0.0f;
        for (i64 c = blockIdx.x;; c += gridDim.x) {
            const i64 e0 = c * CH;
            uint4 raw[U];
            if (c < nch) {
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    const i64 e = e0 + ((i64)u * QT_THREADS + tid) * V;
                    if (vec_ok && e + V <= n) {
                        raw[u] = load_stream16(xt + e);
                    } else {
                        u32 w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
                        for (int i = 0; i < V; ++i) {
                            if (e + i < n) {
                                if constexpr (sizeof(T) == 4) w[i] = f2u(xt[e + i]);
                                else w[i >> 1] |= (u32)xt[e + i] << (16 * (i & 1));
                            }
                        }
                        raw[u] = make_uint4(w[0], w[1], w[2], w[3]);
                    }
                }
            }
            i64 g = -2, glo = 0, ghi = -1;   // g: -2 past the end; -3 straddles member boundaries
            if (c < nch) {
                glo = find_member(off, G, e0);
                ghi = find_member(off, G, (e0 + CH < n ? e0 + CH : n) - 1);
                g = glo == ghi ? glo : -3;
            }
            if (g != cur) {   // uniform across the CTA: flush the running max of `cur`
                if (cur >= 0) {
                    if (tabs != nullptr && tid == 0) cnt_sh[cur] += cnt;   // before cta_max_atomic's barriers
                    cta_max_atomic(f2u(acc), red, amax_row, (mode & 16) ? amax_col : nullptr, cur);
                }
                cur = g;
                acc = 0.0f;
                cnt = 0;
            }
            if (g == -2) break;
            if (g >= 0) {
                cnt += (e0 + CH < n ? e0 + CH : n) - e0;
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    float v[V];
                    In<DT>::unpack(raw[u], v);
#pragma unroll
                    for (int i = 0; i < V; ++i) acc = fmaxf(acc, fabsf(v[i]));   // NaN ignored, inf kept
                }
            } else {
                // members glo .. ghi share this chunk: one CTA reduction and atomic per member
                for (i64 m = glo; m <= ghi; ++m) {
                    const i64 lo = off[m], hi = off[m + 1];
                    float a = 0.0f;
                    if (lo < hi) {
#pragma unroll
                        for (int u = 0; u < U; ++u) {
                            float v[V];
                            In<DT>::unpack(raw[u], v);
                            const i64 e = e0 + ((i64)u * QT_THREADS + tid) * V;
#pragma unroll
                            for (int i = 0; i < V; ++i)
                                if (e + i >= lo && e + i < hi) a = fmaxf(a, fabsf(v[i]));
                        }
                    }
                    if (tabs != nullptr && tid == 0) {
                        const i64 c0 = lo > e0 ? lo : e0, e1 = e0 + CH < n ? e0 + CH : n, c1 = hi < e1 ? hi : e1;
                        if (c1 > c0) cnt_sh[m] += c1 - c0;
                    }
                    cta_max_atomic(f2u(a), red, amax_row, (mode & 16) ? amax_col : nullptr, m);
                }
            }
        }
        if (tabs != nullptr) stats_tables(G, off, cnt_sh, amax_row != nullptr ? amax_row : amax_col, done, tabs);
        return;
    }
    for (i64 t = blockIdx.x; t < total; t += gridDim.x) {
        const i64 g = find_member(tiles, G, t);
        const i64 M = first[g], K = last[g];
        const char* xg = reinterpret_cast<const char*>(x) + off[g] * input_itemsize(DT);
        const bool vec_ok = ((reinterpret_cast<u64>(xg) & 15) == 0) && ((K * input_itemsize(DT)) % 16 == 0);
        const i64 lt = t - tiles[g];
        const i64 tiles_k = (K + QT_K - 1) / QT_K;
        const i64 lq = div_fast(lt, tiles_k);
        const i64 m0 = lq * QT_M, k0 = (lt - lq * tiles_k) * QT_K;
        load_tile<DT>(xg, M, K, m0, k0, vec_ok, tile);
        __syncthreads();
        if (mode & 1) {
            u32 acc = 0;
            for (int i = tid; i < QT_M * QT_K; i += QT_THREADS) acc = absmax_bits(acc, tile[i / QT_K][i % QT_K]);
            cta_max_atomic(acc, red, amax_row, (mode & 16) ? amax_col : nullptr, g);
        }
        if (mode & 2) {
            if (amax_row && tid < QT_M && m0 + tid < M) {
                u32 acc = 0;
                for (int c = 0; c < QT_K; ++c) acc = absmax_bits(acc, tile[tid][c]);
                atomicMax(amax_row + arow[g] + m0 + tid, acc);
            } else if (amax_col && tid >= QT_M && tid < QT_M + QT_K && k0 + (tid - QT_M) < K) {
                const int c = tid - QT_M;
                u32 acc = 0;
                for (int r = 0; r < QT_M; ++r) acc = absmax_bits(acc, tile[r][c]);
                atomicMax(amax_col + acol[g] + k0 + c, acc);
            }
        }
        if (mode & 4) {   // columnwise operand after the transform: 16-row segments of each column
            u32 acc = 0;
            const int c = tid >> 2, s = tid & 3;   // 64 columns x 4 segments
            if (k0 + c < K && m0 + s * 16 < M) {
                float v[16];
#pragma unroll
                for (int i = 0; i < 16; ++i) v[i] = tile[s * 16 + i][c];
                rht16_inplace(v, rht_mask);
#pragma unroll
                for (int i = 0; i < 16; ++i) acc = absmax_bits(acc, v[i]);
            }
            for (int o = 16; o; o >>= 1) { const u32 v = __shfl_xor_sync(0xFFFFFFFFu, acc, o); acc = v > acc ? v : acc; }
            if ((tid & 31) == 0 && acc) atomicMax(amax_col + g, acc);
        }
        if (mode & 8) {
            if (tid < QT_K && k0 + tid < K) {
                double sum = 0.0;
                const int rows = (int)((M - m0) < QT_M ? (M - m0) : QT_M);
                for (int r = 0; r < rows; ++r) sum += (double)tile[r][tid];
                atomicAdd(dbias + g * dbias_K + k0 + tid, sum);
            }
        }
        __syncthreads();
    }
}

// NVFP4 rht with one K (members stacked along M, every M_i % 16 == 0, bfloat16, K even; x 4-byte
// aligned, else two 2-byte loads per word), at most GAMAX_MAX members: the plain amax (out_plain[g], may be null) and the post-RHT
// columnwise amax (out_rht[g]) of every member in ONE pass, thread per (16-row group, pair of
// columns) as amax.cu's amax_plain_rht (plain_rht_pair), grid-strided. A 16-row group lies in one
// member; a thread keeps the member of its last group and its row range, so a lookup happens only
// when its group leaves that range, and folds its running maxima into the CTA's shared per-member
// maxima then; the CTA folds those into the outputs at the end (one atomicMax per member and CTA).
// It replaced group_stats' 64 x 64 tiles through shared memory (mode 4 | 1) there (H200, G = 8,
// 65536 x 7168, "both": docs/performance.md item 157).
constexpr int GAMAX_MAX = 512;
__device__ __forceinline__ void group_amax_plain_rht(const void* x, i64 G, const i64* meta, i64 K, u32 sign_mask,
                                                     u32* out_plain, u32* out_rht) {
    const bool a4 = (reinterpret_cast<u64>(x) & 3) == 0;
    __shared__ u32 sh_plain[GAMAX_MAX], sh_rht[GAMAX_MAX];
    const i64* rows = meta + (i64)META_ROWS * (G + 1);
    for (int g = threadIdx.x; g < G; g += QT_THREADS) sh_plain[g] = sh_rht[g] = 0u;
    __syncthreads();
    const i64 KW = K / 2;   // words per row
    const i64 total = (rows[G] / 16) * KW;   // rows[G]: 0 after a metadata error
    const i64 stride = (i64)gridDim.x * QT_THREADS;
    i64 cur = -1, lo = 0, hi = 0;   // member of this thread's maxima and its rows [lo, hi)
    u32 acc = 0u, acc_plain = 0u;
    for (i64 t = (i64)blockIdx.x * QT_THREADS + threadIdx.x; t < total; t += stride) {
        const i64 q = div_fast(t, KW), w = t - q * KW;
        const i64 r = q * 16;
        if (r < lo || r >= hi) {
            if (cur >= 0) {
                if (acc_plain) atomicMax(&sh_plain[cur], acc_plain);
                if (acc) atomicMax(&sh_rht[cur], acc);
            }
            cur = find_member(rows, G, r);
            lo = rows[cur];
            hi = rows[cur + 1];
            acc = acc_plain = 0u;
        }
        u32 raw[16];
        if (a4) {
            const u32* src = reinterpret_cast<const u32*>(x) + r * KW + w;
#pragma unroll
            for (int i = 0; i < 16; ++i) raw[i] = __ldcs(src + i * KW);
        } else {
            const u16* src = reinterpret_cast<const u16*>(x) + (r * KW + w) * 2;
#pragma unroll
            for (int i = 0; i < 16; ++i) raw[i] = (u32)src[i * K] | (u32)src[i * K + 1] << 16;
        }
        plain_rht_pair(raw, sign_mask, acc_plain, acc);
    }
    if (cur >= 0) {
        if (acc_plain) atomicMax(&sh_plain[cur], acc_plain);
        if (acc) atomicMax(&sh_rht[cur], acc);
    }
    __syncthreads();
    for (int g = threadIdx.x; g < G; g += QT_THREADS) {
        if (out_plain != nullptr && sh_plain[g]) atomicMax(out_plain + g, sh_plain[g]);
        if (sh_rht[g]) atomicMax(out_rht + g, sh_rht[g]);
    }
}

// Rowwise only, no 2D tiles: U consecutive tiles of the list per CTA iteration. A run of them in
// one member and one 64-row band (the common case: neighbouring tiles along K) shares one member
// lookup and setup, and all its segments' loads are issued before any is quantized (as
// quantize.cu's _rows kernels do); thread mapping and arithmetic are quantize_tile's rowwise part
// (row_segment), so the bytes are the same.
template <int FMT, int DT, bool EXT, int U>
__device__ __forceinline__ void group_quantize_rows(const void* x, i64 G, const i64* meta, const i64* first,
                                                    const i64* last, u8* row_data, u8* row_scales,
                                                    const float* amax_row, int flags, u64 seed) {
    typedef Fmt<FMT> F;
    constexpr int NV = SEG / In<DT>::vec;
    __shared__ float rtab[F::mx ? 1 : NV_TAB + 1];   // NVFP4 multiplier table of member tab_g
    const i64* off = meta + (i64)META_OFF * (G + 1);
    const i64* tiles = meta + (i64)META_TILES * (G + 1);
    const i64* srow = meta + (i64)META_SROW * (G + 1);
    const i64* arow = meta + (i64)META_AROW * (G + 1);
    if constexpr (!EXT) flags &= ~QFLAG_EXT_ALL;
    const bool use_tab = !F::mx && !(flags & QFLAG_ROW_SCALED);
    const int tid = threadIdx.x, hi = tid >> 2, s = tid & 3;
    const i64 total = tiles[G];
    i64 tab_g = -1;
    for (i64 t = (i64)blockIdx.x * U; t < total;) {
        const i64 tend = ((t / U) * U + U < total ? (t / U) * U + U : total);   // this iteration's tiles
        const i64 g = find_member(tiles, G, t);
        const i64 M = first[g], K = last[g];
        const i64 tiles_k = (K + QT_K - 1) / QT_K;
        const i64 lt = t - tiles[g];
        const i64 lq = div_fast(lt, tiles_k);                                   // 64-row band of the run
        const i64 band_end = tiles[g] + (lq + 1) * tiles_k;
        i64 te = tend < tiles[g + 1] ? tend : tiles[g + 1];                     // the run: member g,
        te = te < band_end ? te : band_end;                                     // one band of 64 rows
        const i64 gm = lq * QT_M + hi;
        const i64 gk0 = (lt - lq * tiles_k) * QT_K + s * SEG;                   // tile u: gk0 + 64 u
        const char* xg = reinterpret_cast<const char*>(x) + off[g] * input_itemsize(DT);
        int fl = flags & ~QFLAG_VEC_IN;
        if (((reinterpret_cast<u64>(xg) & 15) == 0) && ((K * input_itemsize(DT)) % 16 == 0)) fl |= QFLAG_VEC_IN;
        const i64 doff = F::packed ? off[g] / 2 : off[g];
        const float* am = amax_row ? amax_row + arow[g] : amax_row;
        uint4 raw[U][NV];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (t + u < te) load_seg_raw<DT>(xg, M, K, gm, gk0 + (i64)u * QT_K, fl & QFLAG_VEC_IN, raw[u]);
        }
        if constexpr (!F::mx) {
            if (use_tab && g != tab_g) {   // uniform: refill once per member change
                __syncthreads();           // nobody still reads the previous member's table
                nvfp4_fill_table(rtab, am[0], 0);
                __syncthreads();
                tab_g = g;
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (t + u < te) {
                float v[SEG];
                constexpr int V = In<DT>::vec;
#pragma unroll
                for (int j = 0; j < NV; ++j) In<DT>::unpack(raw[u][j], v + j * V);
                row_segment<FMT>(v, M, K, gm, gk0 + (i64)u * QT_K, s, row_data + doff, row_scales + srow[g], am, fl,
                                 seed, -1.0f, 1.0f, 1.0f, use_tab ? rtab : nullptr);
            }
        }
        t = te < tend ? te : (t / U) * U + (i64)gridDim.x * U;   // rest of this iteration, or the next
    }
    if (flags & QFLAG_SWIZZLED) group_zero_padding(G, meta, last, 0, F::block, row_scales, nullptr);
}

// Rowwise only, no 2D tiles, one K for every member (kinds same / varying_first): the members are
// consecutive row ranges of one (sum M_i, K) matrix, so blocks are those of quantize.cu's _rows
// kernels over that matrix (R 64-row tiles stacked along M, 64 columns; every load issued before
// any segment is quantized), taken grid-strided. Codes and per-row amaxes (row_scaled: AROW is the
// row prefix) are indexed by the global row; a row's member only gives its scale base, its local
// row (scale position, stochastic-rounding counter) and, for NVFP4, its amax. A block inside one
// member (all but those that straddle a member boundary; `one`, CTA-uniform) keeps that member's
// first row and scale base in uniform registers and uses its NVFP4 multiplier table (ROWSK_FAST:
// where that path is compiled; the others take the shared state for every block). For a block
// that straddles, while the loads are in flight, thread t looks up the member of the block's row t
// and leaves those in shared memory; either way one barrier per block (shared buffers double-buffered
// by iteration parity). H200, 65536 x 7168 bfloat16, device dims, swizzled, G = 8 (the per-row
// shared state for every block before): NVFP4 with supplied amaxes 416.6 -> 395.1 us, MXFP4
// 403.6 -> 396.3, MXFP8 394.8 -> 389.2 (docs/performance.md item 143).
// lw: as in quantize_rows_direct (a block is R x 256 / 2^lw rows of 16 * 2^lw columns).
// The one-member path of group_quantize_rows_k where it was measured and ptxas adds no spills (NVRTC
// 13.5): the plain kernels from 16-bit input on sm_90. Elsewhere (float32 input, the extended
// kernels, sm_100a, which no session could run) it cost 4-120 bytes of spills, so there every block
// keeps the per-row shared state.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
#define FP4KIT_ROWSK_FAST_ARCH 0
#else
#define FP4KIT_ROWSK_FAST_ARCH 1
#endif
template <int FMT, int DT, bool EXT, int R>
__device__ __forceinline__ void group_quantize_rows_k(const void* x, i64 G, const i64* meta, const i64* band, i64 K,
                                                      u8* row_data, u8* row_scales, const float* amax_row, int flags,
                                                      u64 seed, int lw) {
    typedef Fmt<FMT> F;
    constexpr bool ROWSK_FAST = FP4KIT_ROWSK_FAST_ARCH && !EXT && DT != DTYPE_FLOAT32;
    constexpr bool ROWSK_PK = ROWSK_FAST && PackedE2M1<FMT, DT, EXT>::on;   // item 144
    constexpr int V = In<DT>::vec;
    constexpr int BR_MAX = QT_M * R;   // rows per block at lw = 2
    static_assert(BR_MAX <= QT_THREADS, "one thread per row of the block");
    const int rs = QT_THREADS >> lw, BR = rs * R, W = SEG << lw;   // rows per block, columns per block
    __shared__ float rtab[2][F::mx ? 1 : NV_TAB + 1];   // NVFP4 multiplier tables of members tab_g[p]
    __shared__ i64 r0s[2][BR_MAX], sos[2][BR_MAX];       // per row: member's first row, scale offset
    __shared__ float2 scs[2][F::mx ? 1 : BR_MAX];        // NVFP4 per row: s_enc, s_dec of its member
    const i64* rows = meta + (i64)META_ROWS * (G + 1);
    const i64* srow = meta + (i64)META_SROW * (G + 1);
    if constexpr (!EXT) flags &= ~QFLAG_EXT_ALL;
    flags &= ~QFLAG_VEC_IN;
    if (((reinterpret_cast<u64>(x) & 15) == 0) && ((K * input_itemsize(DT)) % 16 == 0)) flags |= QFLAG_VEC_IN;
    const bool use_tab = !F::mx && !(flags & QFLAG_ROW_SCALED);
    const i64 Mt = rows[G];   // 0 after a metadata error: nothing to do
    if (K <= 0 || Mt <= 0) return;
    const i64 tiles_k = (K + W - 1) / W;
    const i64 nblk = ((Mt + BR - 1) / BR) * tiles_k;
    const int tid = threadIdx.x, hi = tid >> lw, s = tid & ((1 << lw) - 1);
    i64 tab_g0 = -1, tab_g1 = -1;
    int p = 0;
    for (i64 b = blockIdx.x; b < nblk; b += gridDim.x, p ^= 1) {
        const i64 bq = div_fast(b, tiles_k);
        const i64 m0 = bq * BR;
        const i64 gk = (b - bq * tiles_k) * W + s * SEG;
        uint4 raw[R][SEG / V];
        bool full[R];
        load_rows_raw<DT, R>(x, Mt, K, m0 + hi, gk, flags & QFLAG_VEC_IN, raw, full, rs);
        // while the loads are in flight: the members of the block's rows (band[i]: the member of
        // row 64 i, which starts at or before m0; `one` also needs the block to end inside it)
        const i64 g0 = band[m0 / QT_M];
        const bool one = (m0 + BR < Mt ? m0 + BR : Mt) <= rows[g0 + 1];   // uniform across the CTA
        if (ROWSK_FAST && one) {   // every row of the block in member g0: its parameters in uniform registers
            const i64 r0 = rows[g0];
            u8* const sbase = row_scales + srow[g0];
            if constexpr (!F::mx) {
                if (use_tab && g0 != (p ? tab_g1 : tab_g0)) {
                    nvfp4_fill_table(rtab[p], amax_row[g0], 0);
                    if (p) tab_g1 = g0; else tab_g0 = g0;
                }
            }
            __syncthreads();   // as below: buffer p written, buffer p ^ 1 no longer read
#pragma unroll
            for (int j = 0; j < R; ++j) {
                const i64 gm = m0 + hi + j * rs;
                if constexpr (ROWSK_PK) {   // MXFP4 from 16-bit input: packed pairs, as quantize_rows_direct
                    typedef typename PackedE2M1<FMT, DT, EXT>::Seg PSeg;
                    const PSeg pk = seg_pairs<DT, PSeg>(raw[j], full[j], x, Mt, K, gm, gk, flags & QFLAG_VEC_IN);
                    row_segment<FMT>(pk, Mt, K, gm, gk, s, row_data, sbase, amax_row, flags, seed, -1.0f, 1.0f, 1.0f,
                                     nullptr, r0);
                } else {
                    float v[SEG];
                    seg_values<DT>(raw[j], full[j], x, Mt, K, gm, gk, flags & QFLAG_VEC_IN, v);
                    row_segment<FMT>(v, Mt, K, gm, gk, s, row_data, sbase, amax_row, flags, seed, -1.0f, 1.0f, 1.0f,
                                     use_tab ? rtab[p] : nullptr, r0);
                }
            }
            continue;
        }
        if (tid < BR) {
            const i64 gm = m0 + tid;
            const i64 g = (one || gm >= Mt) ? g0 : find_member(rows, G, gm);
            r0s[p][tid] = rows[g];
            sos[p][tid] = srow[g];
            if constexpr (!F::mx) {
                if (use_tab && !one) {
                    float e, d;
                    nvfp4_tensor_scales(amax_row[g], e, d);
                    scs[p][tid] = make_float2(e, d);
                }
            }
        }
        if constexpr (!F::mx) {
            if (use_tab && one && g0 != (p ? tab_g1 : tab_g0)) {
                nvfp4_fill_table(rtab[p], amax_row[g0], 0);
                if (p) tab_g1 = g0; else tab_g0 = g0;
            }
        }
        __syncthreads();   // row data of buffer p written; buffer p ^ 1 no longer read (last block's)
#pragma unroll
        for (int j = 0; j < R; ++j) {
            const int r = hi + j * rs;
            const i64 gm = m0 + r;
            float v[SEG];
            seg_values<DT>(raw[j], full[j], x, Mt, K, gm, gk, flags & QFLAG_VEC_IN, v);
            float s_enc = 1.0f, s_dec = 1.0f;
            if constexpr (!F::mx) {
                if (use_tab && !one) { const float2 sd = scs[p][r]; s_enc = sd.x; s_dec = sd.y; }
            }
            row_segment<FMT>(v, Mt, K, gm, gk, s, row_data, row_scales + sos[p][r], amax_row, flags, seed, -1.0f,
                             s_enc, s_dec, (use_tab && one) ? rtab[p] : nullptr, r0s[p][r]);
        }
    }
    if (flags & QFLAG_SWIZZLED) group_zero_padding(G, meta, nullptr, K, F::block, row_scales, nullptr);
}

// Rowwise only, plain recipes, one K, blocks of at most 64 rows (fp4kit._cuda_grouped.rows_direct: R x 256
// / 2^lw rows <= 64, i.e. K >= 256 from 16-bit input, K >= 128 from float32): every member is tiled
// exactly as the single-tensor rows kernel tiles it alone (quantize_rows_direct over the member's own
// (M_g, K) matrix, its own block numbering), so a grouped call does what one launch per member would,
// in one launch and with no block that straddles two members. CTA b is block row b / tiles_k of the
// tile list's 64-row bands (group_meta's band descriptors, bit 64: 64 / BR block rows per band), so
// its input loads wait for one lookup (the band's descriptor: the member's element, scale and amax
// offsets, its rows and the band's index within it); CTAs past a member's last row, or past the last
// band (M = 0: the grid is the host's bound), exit. Swizzled padding: group_zero_padding, CTA g for
// member g. STG: as quantize_rows_direct's (the single-tensor kernels' choices). H200, 65536 x 7168
// bfloat16, device dims, against group_quantize_rowsk: 2-10 % faster at G = 8 (sizes % 128) and
// G = 64 (sizes % 2); at G = 8 against one launch per member NVFP4 0.99x, MXFP4 0.96x, MXFP8 1.02x
// (docs/performance.md items 147-150: loads issued before the lookup and two blocks per CTA were
// tried and dropped).
// FP4KIT_RD_AT (default 1): from 16-bit input the block's row and column go to quantize_rows_at as
// they are (no division there; docs/performance.md item 152), 0 (A/B): through quantize_rows_direct's
// block index, as from float32 input (quantize_rows_at took the float32 kernels from 53-59 to 72-75
// registers).
#ifndef FP4KIT_RD_AT
#define FP4KIT_RD_AT 1
#endif
// EXT (NVFP4's full kernels, R = 2): the extended options as quantize.cu's _rowsx takes them (a
// row-scaled amax and stochastic rounding's Philox counter are the member's own rows', as
// group_quantize_rows_k's; docs/performance.md item 154).
template <int FMT, int DT, int R, int STG, bool EXT = false>
__device__ __forceinline__ void group_quantize_rows_direct(const void* x, i64 G, const i64* meta, const i64* desc,
                                                           i64 K, u8* row_data, u8* row_scales,
                                                           const float* amax_row, int flags, u64 seed, int lw,
                                                           u32 km, u32 kp) {
    typedef Fmt<FMT> F;
    static_assert(R == 2 || R == 4, "log2 BR below: 8 - lw + log2 R");
    static_assert(!EXT || (R == 2 && STG == 0), "the extended kernels: R = 2, scale codes one by one");
    flags &= ~QFLAG_VEC_IN;
    if constexpr (!EXT) flags &= ~QFLAG_EXT_ALL;
    if (flags & QFLAG_SWIZZLED) group_zero_padding(G, meta, nullptr, K, F::block, row_scales, nullptr);
    // BR = R x 256 / 2^lw divides QT_M (the launcher's rule): shifts, not divisions, and the block row
    // from the host's (km, kp) of tiles_k (div_magic): the FP4 kernels are bound by issue, and every
    // thread runs this prologue (H200, G = 8 sizes % 128: NVFP4 375.8 -> 368.9 us, MXFP4 334.6 ->
    // 329.5 with the shifts alone, docs/performance.md item 150)
    const int lbr = (R == 4 ? 10 : 9) - lw;                        // log2 BR
    const int lp = 6 - lbr;                                        // log2 of the block rows per band
    const i64 tiles_k = (K + (SEG << lw) - 1) >> (lw + 4);
    const i64 b = blockIdx.x;
    const i64 br = div_magic((u32)b, km, kp);                      // block row of the band list
    const longlong2* dv = reinterpret_cast<const longlong2*>(desc + (br >> lp) * BAND_DESC);
    const longlong2 om = dv[0];                                    // member's element offset, rows
    const i64 bq = (dv[3].x << lp) + (br & ((1 << lp) - 1));       // block row within the member
    if ((bq << lbr) >= om.y) return;                               // past the member (or past every band)
    const i64 srow = dv[1].x, arow = dv[2].x;
    const char* xg = reinterpret_cast<const char*>(x) + om.x * input_itemsize(DT);
    if (((reinterpret_cast<u64>(xg) & 15) == 0) && ((K * input_itemsize(DT)) % 16 == 0)) flags |= QFLAG_VEC_IN;
    if constexpr (DT != 0 && FP4KIT_RD_AT) {
        quantize_rows_at<FMT, DT, EXT, R, QFLAG_EXT_ALL, STG>(
            xg, om.y, K, row_data + (F::packed ? om.x / 2 : om.x), row_scales + srow,
            amax_row != nullptr ? amax_row + arow : amax_row, flags, seed, bq, b - br * tiles_k, lw);
    } else {
        quantize_rows_direct<FMT, DT, EXT, R, QFLAG_EXT_ALL, STG>(
            xg, om.y, K, row_data + (F::packed ? om.x / 2 : om.x), row_scales + srow,
            amax_row != nullptr ? amax_row + arow : amax_row, flags, seed, bq * tiles_k + (b - br * tiles_k), lw);
    }
}

// Persistent tile kernel (kinds without one K, the NVFP4 recipes, stochastic rounding when the one-tile
// grid would exceed the launch limit): CTA b takes tiles b, b + grid, ...
// of the tile list; a tile's member comes from band_tiles (one K) or a binary search.
// XM: as quantize_tile's (the _sr kernels: QFLAG_STOCHASTIC alone).
template <int FMT, int DT, bool EXT, int XM = QFLAG_EXT_ALL>
__device__ __forceinline__ void group_quantize(const void* x, i64 G, const i64* meta, const i64* first,
                                               const i64* last, u8* row_data, u8* row_scales, u8* col_data,
                                               u8* col_scales, const float* amax_row, const float* amax_col,
                                               int flags, u64 seed, u32 rht_mask, const i64* band_tiles, i64 K1) {
    typedef Fmt<FMT> F;
    const i64* off = meta + (i64)META_OFF * (G + 1);
    const i64* tiles = meta + (i64)META_TILES * (G + 1);
    const i64* srow = meta + (i64)META_SROW * (G + 1);
    const i64* scol = meta + (i64)META_SCOL * (G + 1);
    const i64* arow = meta + (i64)META_AROW * (G + 1);
    const i64* acol = meta + (i64)META_ACOL * (G + 1);
    const i64 total = tiles[G];
    i64 prev = -1;   // member of this CTA's previous tile: its NVFP4 multiplier tables are still valid
    const i64 tiles_k1 = (K1 + QT_K - 1) / QT_K;   // one K (band_tiles given): tiles per row band
    for (i64 t = blockIdx.x; t < total; t += gridDim.x) {
        const i64 g = band_tiles != nullptr ? (band_tiles[div_fast(t, tiles_k1)] & BAND_MEMBER)
                                            : find_member(tiles, G, t);
        const i64 M = first[g], K = last[g];
        const char* xg = reinterpret_cast<const char*>(x) + off[g] * input_itemsize(DT);
        const i64 doff = F::packed ? off[g] / 2 : off[g];
        int fl = flags & ~QFLAG_VEC_IN;
        if (((reinterpret_cast<u64>(xg) & 15) == 0) && ((K * input_itemsize(DT)) % 16 == 0)) fl |= QFLAG_VEC_IN;
        quantize_tile<FMT, DT, EXT, XM, 0, true>(xg, M, K, row_data ? row_data + doff : row_data, row_scales ? row_scales + srow[g] : row_scales,
                               col_data ? col_data + doff : col_data, col_scales ? col_scales + scol[g] : col_scales,
                               amax_row ? amax_row + arow[g] : amax_row, amax_col ? amax_col + acol[g] : amax_col,
                               fl, seed, rht_mask, t - tiles[g], g == prev);
        prev = g;
        __syncthreads();   // the tile buffer is reused by the next iteration
    }
    if (flags & QFLAG_SWIZZLED) group_zero_padding(G, meta, last, K1, F::block, row_scales, col_scales);
}

// One K, plain recipes: a CTA quantizes only tile blockIdx.x of the tile list (the grid covers every
// tile), so no loop state stays live across the tile (32 registers without spills for MXFP8).
// band: for MXFP8 / MXFP6 the member of every tile band (the member's offsets then come from meta);
// for the packed formats (MXFP4, NVFP4) the bands' descriptors (group_meta), so that the input loads
// wait for one lookup instead of three dependent ones, and the tile's row needs no second division
// (H100, G = 8, NVFP4 "both": 1186 -> 1145 us; MXFP4 "both", nineteenth session: 701.4 -> 627.3 us
// with sizes % 128, 952.8 -> 878.8 us with even sizes, and the MXFP4 kernel from bfloat16 no longer
// spills 24 bytes; the same change measured the MXFP8 kernel 2 % slower, 769 -> 784 us, in the
// fourth session, and unchanged with compact scales now, 927.3 -> 927.6 us, so the unpacked MX
// formats keep the lookups). Each branch has its own quantize_tile call: one shared call after the
// branches (offsets in variables set by either) made the MX kernels spill 52-68 bytes at their 32
// registers.
// SR (the packed formats' _sr kernels): stochastic rounding, the only extended option, with
// rows_total holding the seed (the packed formats' branch has no prefetch to bound). NVFP4's _sr
// kernels leave out RUN4 (FP4 code rows off 8-byte boundaries then go through the single-tensor
// kernels' writer; H100, G = 8, 65536 x 7168, "both", kernel time, sizes % 128 1778 -> 1724 us,
// even sizes 1915 -> 1879, G = 64 1785 -> 1731); MXFP4's keep it (1721 against 1719 us without).
// FULL (NVFP4's _ext kernels): every extended option (tile_2d, row_scaled, rht, stochastic rounding),
// rows_total holding the seed as for SR, rht_mask the sign mask.
template <int FMT, int DT, bool BOTH = false, bool SWZ = false, bool SR = false, bool FULL = false,
          int XM = QFLAG_EXT_ALL>
__device__ __forceinline__ void group_quantize_one(const void* x, i64 G, const i64* meta, const i64* first,
                                                   const i64* last, u8* row_data, u8* row_scales, u8* col_data,
                                                   u8* col_scales, const float* amax_row, const float* amax_col,
                                                   int flags, const i64* band, i64 K, u64 rows_total, u32 tk_m,
                                                   u32 tk_p, u32 rht_mask = 0u) {
    typedef Fmt<FMT> F;
    static_assert(!FULL || (!F::mx && !BOTH && !SR), "FULL: NVFP4's own kernels");
    const i64 tiles_k = (K + QT_K - 1) / QT_K;
    // the CTA's tile: band j (a multiply and shift, not a division), column kt
    const i64 j = div_magic(blockIdx.x, tk_m, tk_p), kt = (i64)blockIdx.x - j * tiles_k;
    if constexpr (F::mx && !F::packed) {   // MXFP8 / MXFP6: the tile's rows asked of L2 before the lookup
        if (threadIdx.x < QT_M) {
            const u64 r = (u64)j * QT_M + threadIdx.x;
            if (r < rows_total) {
                const char* p = reinterpret_cast<const char*>(x) + (r * (u64)K + (u64)kt * QT_K) * input_itemsize(DT);
                asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
                if (input_itemsize(DT) == 4 && kt * QT_K + 32 < K) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + 128));
            }
        }
    }
    // MXFP6 from 16-bit input reads its band's descriptor (group_meta bit 64, as the packed
    // formats do: one lookup of 48 bytes instead of the tile count, then the band's member, then
    // the member's offsets) and writes its scale bytes directly; H200, 65536 x 7168, device
    // dims, bench time, median of 3 rounds, bfloat16 (lookups with STASH 1 -> descriptors): G = 8
    // sizes % 128 690.5 -> 673.6 us swizzled, 714.8 -> 697.3 compact, even sizes 881.0 -> 867.9 /
    // 913.5 -> 900.5 (descriptors with STASH 1: 675.7, and ptxas spills 12 bytes); float32 805.9
    // -> 820.9 (810.6 with STASH 1), so float32 keeps the lookups (docs/performance.md item 138).
    // fp4kit/_cuda_grouped.py _band_descriptors says the same to the host (which lays out `band`).
    constexpr bool DESC = F::packed || (((FP4KIT_GQ1_DESC >> FMT) & 1) && DT != DTYPE_FLOAT32);
    if constexpr (!DESC) {   // MXFP8, MXFP6 from float32: the band's member, then the member's offsets
        const i64* tiles = meta + (i64)META_TILES * (G + 1);
        if ((i64)blockIdx.x < tiles[G]) {
            const i64 e = band[j];
            const i64 g = e & BAND_MEMBER;
            const i64 o = meta[(i64)META_OFF * (G + 1) + g];
            const char* xg = reinterpret_cast<const char*>(x) + o * input_itemsize(DT);
            int fl = flags & ~QFLAG_VEC_IN;
            if (((reinterpret_cast<u64>(xg) & 15) == 0) && ((K * input_itemsize(DT)) % 16 == 0)) fl |= QFLAG_VEC_IN;
            const i64* srow = meta + (i64)META_SROW * (G + 1);
            const i64* scol = meta + (i64)META_SCOL * (G + 1);
            // E8M0 in select form (no spills: H100, G = 8, sizes % 128, kernel time, MXFP6 746.5 ->
            // 744.6 us, from float16 746.9 -> 743.8, compact 776.0 -> 773.6; even sizes unchanged).
            // MXFP6 stages its scale bytes (STASH 1, as the single-tensor tile kernel): H200, 65536 x
            // 7168, device dims, bench time, median of 3 rounds, float32, G = 8 sizes % 128 813.8 ->
            // 805.6 us swizzled, 838.4 -> 830.6 compact (bfloat16, before the descriptors: 697.8 ->
            // 689.9 / 722.1 -> 714.4; docs/performance.md item 138). From float16 ptxas then spills
            // 20-28 bytes.
            constexpr int STASH = ((FP4KIT_GQ1_STASH >> FMT) & 1) && DT != DTYPE_FLOAT16 ? 1 : 0;
            quantize_tile_rc<FMT, DT, false, QFLAG_EXT_ALL, STASH, true>(xg, first[g], K, row_data ? row_data + o : row_data,
                                          row_scales ? row_scales + srow[g] : row_scales, col_data ? col_data + o : col_data,
                                          col_scales ? col_scales + scol[g] : col_scales, amax_row, amax_col, fl, 0ull,
                                          0u, e >> 32, kt);
        }
    } else {   // MXFP4, NVFP4, MXFP6 from 16-bit input: the band's descriptor (amax offsets: NVFP4)
        const longlong2* d = reinterpret_cast<const longlong2*>(band + j * BAND_DESC);
        const longlong2 d0 = __ldg(d), d1 = __ldg(d + 1), d3 = __ldg(d + 3);
        const longlong2 d2 = F::packed ? __ldg(d + 2) : make_longlong2(0, 0);
        const i64 o = d0.x, M = d0.y;   // M = 0: a band past the last one
        if (M > 0) {
            const char* xg = reinterpret_cast<const char*>(x) + o * input_itemsize(DT);
            const i64 doff = F::packed ? o / 2 : o;
            int fl = flags & ~QFLAG_VEC_IN;
            if (((reinterpret_cast<u64>(xg) & 15) == 0) && ((K * input_itemsize(DT)) % 16 == 0)) fl |= QFLAG_VEC_IN;
            // tile row d3.x of the member, column blockIdx.x - j tiles_k: no second division (kt
            // written out again here, where it is used: with the kt above, ptxas schedules the MXFP4 /
            // NVFP4 kernels differently from the code that was measured)
            // E8M0 in select form (MXFP4, no spills: H100, G = 8, sizes % 128, kernel time: bfloat16
            // 616.3 -> 605.4 us, float16 719.2 -> 699.6, compact 646.1 -> 633.9; NVFP4's code is unchanged)
            if constexpr (BOTH) {   // both operands: no null tests on the four buffers (MX: no amax); MXFP4:
                // the two operand flags known (the host sets them for "both"), so their tests fold away
                // (H100, G = 8, sizes % 128, kernel time 608.3 -> 601.2 us, compact 636.2 -> 629.3, G = 64
                // 610.8 -> 603.6, even sizes 727.2 -> 728.4; NVFP4 from bfloat16 then spilled 16 bytes).
                // NVFP4: QFLAG_ROWWISE alone known (spill 20 -> 4 bytes from float32; kernel time 695.2 ->
                // 689.3 us, even sizes 771.1 -> 766.5, G = 64 702.4 -> 696.7). SWZ (the _boths kernels):
                // swizzled scales and the rceil rule known too; MXFP4 593.5 us against 599.9, compact 620.6
                // against 627.5, G = 64 594.9 against 601.9, float16 605.1 against 609.3, even sizes 737.3
                // against 731.9; NVFP4 (its code 31744 -> 31488 bytes, same spill) 694.0 -> 688.9 us, even
                // sizes 770.4 -> 766.9, G = 64 701.3 -> 695.5, computed amaxes 1020.3 -> 1014.7
                quantize_tile_rc<FMT, DT, false, QFLAG_EXT_ALL, 0, true, F::packed>(
                    xg, M, K, row_data + doff, row_scales + d1.x, col_data + doff, col_scales + d1.y,
                    F::mx ? amax_row : amax_row + d2.x, F::mx ? amax_col : amax_col + d2.y,
                    (fl | (F::mx ? QFLAG_ROWWISE | QFLAG_COLUMNWISE : QFLAG_ROWWISE) | (SWZ ? QFLAG_SWIZZLED : 0)) &
                        ~(SWZ ? QFLAG_RULE_FLOOR : 0),
                    0ull, 0u, d3.x, (i64)blockIdx.x - j * tiles_k);
            } else {
                // NVFP4's extended kernels leave out RUN4 (see group_quantize1_..._sr)
                quantize_tile_rc<FMT, DT, SR || FULL, SR ? QFLAG_STOCHASTIC : XM, 0, true,
                                 F::packed && !((SR || FULL) && !F::mx)>(
                    xg, M, K, row_data ? row_data + doff : row_data, row_scales ? row_scales + d1.x : row_scales,
                    col_data ? col_data + doff : col_data, col_scales ? col_scales + d1.y : col_scales,
                    amax_row ? amax_row + d2.x : amax_row, amax_col ? amax_col + d2.y : amax_col, fl,
                    SR || FULL ? rows_total : 0ull, FULL ? rht_mask : 0u, d3.x, (i64)blockIdx.x - j * tiles_k);
            }
        }
    }
    if (flags & QFLAG_SWIZZLED) group_zero_padding(G, meta, last, K, F::block, row_scales, col_scales);
}

// group_quantize4 (plain MXFP8 "both" from 16-bit input, one K with K % 128 == 0, swizzled scales):
// one CTA of 4 x 256 threads per 128 x 128 square of a member (the members' squares in order, K / 128
// per 128-row band; sq_desc: every 128-row band's descriptor, from group_meta bit 128). Thread group
// q quantizes the 64 x 64 tile (2 bq + q / 2, 2 bk + q % 2) of the square as quantize.cu's _quad does
// (quantize_tile_rc with STASH 3: own tile, named barrier, scale bytes into the CTA's two shared
// swizzled blocks, misaligned columnwise code rows staged in the group's tile and written for the
// whole square by ColStage::write_square after the CTA barrier); the two blocks then
// leave as 16-byte chunks, their rows / columns past the member's M as zeros, so the square lists
// cover every byte of the swizzled scale matrices, padding included (no group_zero_padding). Tiles
// wholly past M (the second band of a member's last square) load and store nothing.
// L2 prefetch (prefetch_square_l2, as quantize.cu's _quad) of square blockIdx.x + 2 x (SM count),
// from that square's band descriptor.
template <int DT>
__device__ __forceinline__ void prefetch_group_square_l2(const void* x, const i64* sq_desc, i64 K, i64 qk, int q) {
    if (threadIdx.x % QT_THREADS >= QT_M) return;   // before the descriptor loads: prefetching threads only
    const i64 b = (i64)blockIdx.x + 2 * sm_count();
    if (b >= (i64)gridDim.x) return;
    const i64 j = div_fast(b, qk);
    const longlong2 d0 = __ldg(reinterpret_cast<const longlong2*>(sq_desc + j * SQ_DESC));
    const longlong2 d1 = __ldg(reinterpret_cast<const longlong2*>(sq_desc + j * SQ_DESC) + 1);
    prefetch_square_l2<DT>(x, d0.x + d1.x * 128 * K + (b - j * qk) * 128, d0.y - d1.x * 128, K, q);
}

template <int FMT, int DT>
__device__ __forceinline__ void group_quantize_quad(const void* x, i64 G, const i64* meta, u8* row_data,
                                                    u8* row_scales, u8* col_data, u8* col_scales, int flags,
                                                    const i64* sq_desc, i64 K) {
    static_assert(Fmt<FMT>::mx && !Fmt<FMT>::packed && Fmt<FMT>::block == 32, "MXFP8 / MXFP6 only");
    __shared__ __align__(16) u8 blk[1024];
    const i64 W = G + 1;
    const i64 qk = K >> 7;
    const i64 j = div_fast((i64)blockIdx.x, qk);
    const longlong2 d0 = __ldg(reinterpret_cast<const longlong2*>(sq_desc + j * SQ_DESC));
    const longlong2 d1 = __ldg(reinterpret_cast<const longlong2*>(sq_desc + j * SQ_DESC) + 1);
    const i64 o = d0.x, M = d0.y;
    // past the last square (CTA-uniform). The test of d1.x (never negative) makes the branch wait
    // for both halves, so that they are loaded together (else ptxas issues the second after it).
    if (M == 0 || d1.x < 0) return;
    const i64 bk = (i64)blockIdx.x - j * qk, bq = d1.x, g = d1.y;
    const char* xg = reinterpret_cast<const char*>(x) + o * input_itemsize(DT);
    int fl = flags & ~QFLAG_VEC_IN;
    if ((reinterpret_cast<u64>(xg) & 15) == 0) fl |= QFLAG_VEC_IN;   // K * 2 bytes: a multiple of 256
    const int q = threadIdx.x >> 8;
    const u32* tiles = quantize_tile_rc<FMT, DT, false, QFLAG_EXT_ALL, 3>(
        xg, M, K, row_data + o, row_scales, col_data + o, col_scales, nullptr, nullptr, fl, 0ull, 0u,
        2 * bq + (q >> 1), 2 * bk + (q & 1), false, blk);
    __syncthreads();
    // the member's swizzled scale matrices, 4 K ceil(M / 128) bytes each, at 4 K sq[g]: its offsets in
    // swizzled scale buffers (group_meta's META_SROW / META_SCOL then), and in the staging buffers of
    // compact scales (fp4kit/_cuda_grouped.py; swizzle.cu group_unswizzle_scales)
    quad_square_out<FMT, RawTileStride<DT, 3>::words>(
        tiles, blk, M, bq, bk, qk, col_data + o, [&] { return row_scales + staged_scales_offset(K, meta[(i64)META_SQ * W + g]); },
        [&] { return col_scales + staged_scales_offset(K, meta[(i64)META_SQ * W + g]); });
    prefetch_group_square_l2<DT>(x, sq_desc, K, qk, q);
}

// Every member's operand, as dequantize_op: each warp takes 32 consecutive segments (of all
// members' segments in order) per step k < DqGroupTune<OT>::segs, loads all of them, then stores them,
// staged into 512-byte runs where the 32 outputs follow each other (dq_store_warp). A thread's
// segment index only grows, so it keeps its current member's parameters in registers and looks
// the member up (find_member) only when it passes the member's last segment: a lookup per segment
// delayed every load by the search's dependent reads. Persistent grid (fp4kit/_cuda_grouped.py
// dequantize_kernel: the SMs x DqGroupTune<OT>::min_ctas resident CTAs; one CTA per 512 segments
// instead, as dequantize.cu, was up to 9 % slower).
template <int FMT, int OT>
__device__ __forceinline__ void group_dequantize(const u8* data, const u8* scales, const float* amax, i64 G,
                                                 const i64* meta, const i64* first, const i64* last, int columnwise,
                                                 int swizzled, int row_scaled, void* out) {
    typedef Fmt<FMT> F;
    constexpr int NC = DqOut<OT>::words / 4;
    constexpr int SEGS = DqGroupTune<OT>::segs;   // fp4kit/_cuda_grouped.py _GROUP_DQ_SEGS
    __shared__ uint4 stage[DQ_THREADS / 32][32 * NC];
    const i64* off = meta + (i64)META_OFF * (G + 1);
    const i64* sc = meta + (i64)(columnwise ? META_SCOL : META_SROW) * (G + 1);
    const i64* am = meta + (i64)(columnwise ? META_ACOL : META_AROW) * (G + 1);
    const i64* seg = meta + (i64)(columnwise ? META_SEGC : META_SEGR) * (G + 1);
    const i64 total = seg[G];
    const int lane = threadIdx.x & 31;
    uint4* st = stage[threadIdx.x >> 5];
    const i64 per_cta = (i64)DQ_THREADS * SEGS;
    const i64 step = (i64)gridDim.x * per_cta;
    // the current member: segments [m_lo, m_hi), its (rows, cols), operand, scales, amax, output offset
    i64 m_lo = 0, m_hi = 0, m_rows = 0, m_cols = 0, m_off = 0;
    const u8* m_data = data;
    const u8* m_scales = scales;
    const float* m_amax = amax;
    for (i64 wbase = (i64)blockIdx.x * per_cta + (threadIdx.x - lane); wbase < total; wbase += step) {
        DqSeg s[SEGS];
#pragma unroll
        for (int k = 0; k < SEGS; ++k) {
            const i64 t = wbase + lane + (i64)k * DQ_THREADS;
            if (t < total) {
                if (t >= m_hi) {
                    const i64 g = find_member(seg, G, t);
                    m_lo = seg[g];
                    m_hi = seg[g + 1];
                    m_rows = columnwise ? last[g] : first[g];
                    m_cols = columnwise ? first[g] : last[g];
                    m_off = off[g];
                    m_data = data + (F::packed ? m_off / 2 : m_off);
                    m_scales = scales + sc[g];
                    m_amax = amax ? amax + am[g] : amax;
                }
                dq_load<FMT>(m_data, m_scales, m_amax, m_rows, m_cols, swizzled, row_scaled, t - m_lo, s[k]);
                s[k].o += m_off;   // the element index in the whole output
            }
        }
#pragma unroll
        for (int k = 0; k < SEGS; ++k) {
            const i64 t0 = wbase + (i64)k * DQ_THREADS;   // the warp's first segment of this step
            if (t0 >= total) break;                       // warp-uniform
            dq_store_warp<FMT, OT>(s[k], t0 + lane < total, reinterpret_cast<char*>(out), st);
        }
    }
}

// The columns C >= 1 shared by every member that has segments, or -1 if they differ or there are
// none (every thread of the CTA calls it; the result is CTA-uniform). G loads per CTA.
__device__ __forceinline__ i64 group_shared_cols(const i64* seg, const i64* cols, i64 G) {
    __shared__ unsigned long long lo, hi;
    if (threadIdx.x == 0) {
        lo = ~0ull;
        hi = 0ull;
    }
    __syncthreads();
    for (i64 g = threadIdx.x; g < G; g += blockDim.x) {
        if (seg[g + 1] > seg[g]) {
            atomicMin(&lo, (unsigned long long)cols[g]);
            atomicMax(&hi, (unsigned long long)cols[g]);
        }
    }
    __syncthreads();
    const i64 c = lo == hi ? (i64)lo : -1;
    __syncthreads();   // read by every thread before a later call could reset them
    return c;
}

// Whether the MX scales of members that share their C columns (nseg segments per row) sit where
// those of one operand of all the members' rows would: compact scales always (SPEC section 7: the
// members' matrices back to back, no gaps), swizzled ones when every member with segments starts at
// a multiple of 128 rows (each member's matrix padded to 128 rows). Row R of all the members' rows
// then has its scales at row R of `scales`, as for one tensor (a member's sc[g] is checked against
// that, so a group edited by hand takes the member lookup instead). CTA-uniform; G loads.
template <int FMT>
__device__ __forceinline__ bool group_scales_global(const i64* seg, const i64* sc, i64 G, i64 nseg, i64 C,
                                                    int swizzled) {
    static_assert(Fmt<FMT>::mx, "NVFP4's amax is per member");
    const i64 nb = (C + Fmt<FMT>::block - 1) / Fmt<FMT>::block;
    const i64 per_row = swizzled ? (nb + 3) / 4 * 4 : nb;
    int ok = 1;
    for (i64 g = threadIdx.x; g < G; g += blockDim.x) {
        const i64 s0 = seg[g];
        if (seg[g + 1] > s0) {
            const i64 r0 = s0 / nseg;
            // scale_bytes(r0, C, ...) when r0 % 128 == 0: the bytes of the rows before the member
            if (sc[g] != r0 * per_row || (swizzled && (r0 & 127))) ok = 0;
        }
    }
    return __syncthreads_and(ok) != 0;
}

// group_dequantize when every member with segments has the same columns (the host launches it for
// the rowwise operand of kinds "same" / "varying_first" and the columnwise operand of "same" /
// "varying_last"; the CTAs check it, group_shared_cols, and write NaN if not: the general kernel
// as a fallback here, inlined or called, made ptxas spill in this loop). The members'
// rows then follow each other with the same C columns, so segment t is global row R = t / ceil(C /
// 16) of the codes and of the output, as in the single-tensor dequantize_op, and only the scales
// and the amax depend on the member: a thread keeps the end of its member's segments, the member's
// first row and its scale and amax pointers (8 registers where group_dequantize keeps 16; with
// C % 16 == 0 the 32 outputs of a step also follow each other: no destinations compared).
template <int FMT, int OT>
__device__ __forceinline__ void group_dequantize_cols(const u8* data, const u8* scales, const float* amax, i64 G,
                                                      const i64* meta, const i64* first, const i64* last,
                                                      int columnwise, int swizzled, int row_scaled, void* out) {
    constexpr int NC = DqOut<OT>::words / 4;
    __shared__ uint4 stage[DQ_THREADS / 32][32 * NC];
    const i64* sc = meta + (i64)(columnwise ? META_SCOL : META_SROW) * (G + 1);
    const i64* am = meta + (i64)(columnwise ? META_ACOL : META_AROW) * (G + 1);
    const i64* seg = meta + (i64)(columnwise ? META_SEGC : META_SEGR) * (G + 1);
    const i64 C = group_shared_cols(seg, columnwise ? first : last, G);
    if (C < 0) {   // columns differ: a group whose kind was changed by hand; NaN, never wrong numbers
        const i64 n = meta[(i64)META_OFF * (G + 1) + G];
        for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (i64)gridDim.x * blockDim.x) {
            if constexpr (OT == DTYPE_FLOAT32) reinterpret_cast<u32*>(out)[e] = 0x7FC00000u;
            else reinterpret_cast<unsigned short*>(out)[e] = OT == DTYPE_BFLOAT16 ? 0x7FC0 : 0x7E00;
        }
        return;
    }
    const i64 total = seg[G];
    const i64 nseg = (C + 15) / 16;
    uint4* st = stage[threadIdx.x >> 5];
    const bool runs = (C & 15) == 0 && (reinterpret_cast<u64>(out) & 15u) == 0;
    // DqGroupTune<OT>::segs segments per thread: 3 spilled (48-108 bytes) and was slower in both loops
    if constexpr (Fmt<FMT>::mx) {   // NVFP4 needs its member's amax (a global loop was no faster)
        if (group_scales_global<FMT>(seg, sc, G, nseg, C, swizzled)) {
            // as one tensor: no member lookup, no member registers
            dq_rows_loop<FMT, OT, DqGroupTune<OT>::segs>(total, runs, st, out, [&](i64 t, DqSeg& s) {
                dq_load<FMT>(data, scales, nullptr, 0, C, swizzled, 0, t, s);
            });
            return;
        }
    }
    // each thread keeps its member's segment end, first row and scale and amax pointers, and looks
    // the member up when it passes the end
    i64 m_hi = 0, m_row0 = 0;   // the member's segment end and first row (of all members' rows)
    const u8* m_scales = scales;
    const float* m_amax = amax;
    dq_rows_loop<FMT, OT, DqGroupTune<OT>::segs>(total, runs, st, out, [&](i64 t, DqSeg& s) {
        if (t >= m_hi) {
            const i64 g = find_member(seg, G, t);
            m_hi = seg[g + 1];
            m_row0 = div_fast(seg[g], nseg);
            m_scales = scales + sc[g];
            m_amax = amax ? amax + am[g] : amax;
        }
        const i64 R = div_fast(t, nseg);
        dq_load_rc<FMT>(data, m_scales, m_amax, C, swizzled, row_scaled, R, R - m_row0, (t - R * nseg) * 16, s);
    });
}

}  // namespace fp4kit

#define FP4KIT_GROUP_STATS(D)                                                                          \
    extern "C" __global__ void __launch_bounds__(QT_THREADS, 4)                                       \
    group_stats_d##D(const void* x, i64 G, const i64* meta, const i64* first, const i64* last, int mode, \
                     u32 rht_mask, u32* amax_row, u32* amax_col, double* dbias, i64 dbias_K, float* tabs, \
                     unsigned long long* done) {                                                        \
        FP4KIT_GRID_DEP();                                                                                       \
        group_stats<D>(x, G, meta, first, last, mode, rht_mask, amax_row, amax_col, dbias, dbias_K, tabs, done); \
    }                                                                                                   \
    extern "C" __global__ void __launch_bounds__(ARC_THREADS)                                          \
    group_amax_rows_cols_d##D(const void* x, i64 G, const i64* meta, i64 K, u32* amax_row, u32* amax_col) { \
        FP4KIT_GRID_DEP();                                                                              \
        amax_rows_cols_vec<D, true>(x, 0, K, amax_row, amax_col, meta + (i64)META_ROWS * (G + 1), G,    \
                                    meta + (i64)META_ACOL * (G + 1));                                   \
    }

// group_quantize_f<F>_d<D>: every option; ..._plain: no tile_2d / row_scaled / rht / stochastic
// rounding (their flags ignored), 32 registers, 8 CTAs per SM (the persistent grid's size). The full
// kernels (kinds without one K since group_quantize1_f5_d<D>_ext) run 3 CTAs per SM (80 registers,
// 24-32 bytes of spills on sm_90, NVRTC 13.5; the persistent grid is one wave of what is resident):
// their minimum of 1 had given them 130 registers and one CTA per SM, and none 124 and two (H200,
// G = 8, 65536 x 7168 bfloat16 with one K, "both", us: row_scaled 2914.0 / 1871.2 / 1679.9,
// tile_2d 2524.6 / 1658.8 / 1506.4; docs/performance.md item 156). FP4KIT_GQ_EXT_MINB: A/B
// probes (0: no minimum).
#ifndef FP4KIT_GQ_EXT_MINB
#define FP4KIT_GQ_EXT_MINB 3
#endif
#if FP4KIT_GQ_EXT_MINB > 0
#define FP4KIT_GQ_LB_true __launch_bounds__(QT_THREADS, FP4KIT_GQ_EXT_MINB)
#else
#define FP4KIT_GQ_LB_true __launch_bounds__(QT_THREADS)
#endif
#define FP4KIT_GQ_LB_false __launch_bounds__(QT_THREADS, 8)
#define FP4KIT_GROUP_QUANTIZE(F, D, EXT, SUFFIX)                                                        \
    extern "C" __global__ void FP4KIT_GQ_LB_##EXT                                                      \
    group_quantize_f##F##_d##D##SUFFIX(const void* x, i64 G, const i64* meta, const i64* first,        \
                               const i64* last, u8* row_data, u8* row_scales, u8* col_data,            \
                               u8* col_scales, const float* amax_row, const float* amax_col, int flags, \
                               u64 seed, u32 rht_mask, const i64* band_tiles, i64 K1) {                \
        FP4KIT_GRID_DEP();                                                                             \
        group_quantize<F, D, EXT>(x, G, meta, first, last, row_data, row_scales, col_data, col_scales, \
                                  amax_row, amax_col, flags, seed, rht_mask, band_tiles, K1);          \
    }
// group_quantize_f<F>_d<D>_sr (MXFP4, NVFP4): stochastic rounding and no other extended option, the
// other variants compiled out (quantize.cu's _sr): 4 CTAs per SM instead of the full kernel's one
// (130-186 registers). H100, G = 8, 65536 x 7168, bfloat16, "both", kernel time: MXFP4 3383 ->
// 2086 us, NVFP4 3336 -> 2288 us (docs/performance.md item 117); at 3 or 2 CTAs per SM (fewer
// spills) 2033 / 2134 us and 2161 / 2086 us against 1853 / 2039 us at 4 (with item 116's Philox).
#define FP4KIT_GROUP_QUANTIZE_SR(F, D)                                                                  \
    extern "C" __global__ void __launch_bounds__(QT_THREADS, 4)                                        \
    group_quantize_f##F##_d##D##_sr(const void* x, i64 G, const i64* meta, const i64* first,           \
                                    const i64* last, u8* row_data, u8* row_scales, u8* col_data,       \
                                    u8* col_scales, const float* amax_row, const float* amax_col,      \
                                    int flags, u64 seed, u32 rht_mask, const i64* band_tiles, i64 K1) { \
        FP4KIT_GRID_DEP();                                                                             \
        group_quantize<F, D, true, QFLAG_STOCHASTIC>(x, G, meta, first, last, row_data, row_scales,    \
                                                     col_data, col_scales, amax_row, amax_col, flags,  \
                                                     seed, rht_mask, band_tiles, K1);                  \
    }
// group_quantize1_f<F>_d<D>_plain (MX formats, plain NVFP4): one tile per CTA, one K
// (group_quantize_one; NVFP4 copies its member's multiplier table, built by group_stats or group_meta
// (QFLAG_ENC_TABS), or past STATS_TABS_MAX_G members builds it in every CTA). band: group_meta's
// band buffer from n_band_rows (MX) or from band_desc_offset(n_band_rows, n_band_tiles) (NVFP4).
// group_quantize's parameters, with the caller's row count (the bound of the L2 prefetch) where
// the seed was (the plain recipes have none) and rht_mask unused, then (tk_m, tk_p), the host's
// div_magic of the tiles per band, ceil(K / 64) (fp4kit._plan.div_magic): a CTA's band is one
// multiply and shift instead of div_fast (H100, G = 8, sizes % 128, kernel time: MXFP4 617.7 ->
// 615.5 us, MXFP6 755.5 -> 747.7, NVFP4 with supplied amaxes 705.7 -> 694.9; even sizes +0.1 %).
// group_quantize1_f<F>_d<D>_both (MXFP4, NVFP4; BOTH): the same for "both", the four buffers known
// non-null (no null tests and selects on them: H100, G = 8, 65536 x 7168, sizes % 128, kernel time: MXFP4 625.8 -> 616.0 us,
// compact 654.5 -> 643.8, NVFP4 with supplied amaxes 717.3 -> 701.3; even sizes MXFP4 877.1 -> 880.9)
#define FP4KIT_GROUP_QUANTIZE1(F, D, SUFFIX, BOTH, SWZ)                                                 \
    extern "C" __global__ void __launch_bounds__(QT_THREADS, 8)                                        \
    group_quantize1_f##F##_d##D##SUFFIX(const void* x, i64 G, const i64* meta, const i64* first,       \
                               const i64* last, u8* row_data, u8* row_scales, u8* col_data,            \
                               u8* col_scales, const float* amax_row, const float* amax_col, int flags, \
                               u64 rows_total, u32 rht_mask, const i64* band, i64 K1, u32 tk_m,       \
                               u32 tk_p) {                                                             \
        FP4KIT_GRID_DEP();                                                                              \
        group_quantize_one<F, D, BOTH, SWZ>(x, G, meta, first, last, row_data, row_scales, col_data,    \
                                       col_scales, amax_row, amax_col, flags, band, K1, rows_total, tk_m, tk_p); \
    }
// group_quantize1_f<4|5>_d<D>_sr: the packed formats with stochastic rounding alone, one K (the seed
// where the plain kernels take the row count), 4 CTAs per SM as the persistent _sr kernels; NVFP4's
// tables as the plain kernel's (H100, G = 8, 65536 x 7168, "both", sizes % 128: 1859 -> 1778 us)
#define FP4KIT_GROUP_QUANTIZE1_SR(F, D)                                                                 \
    extern "C" __global__ void __launch_bounds__(QT_THREADS, 4)                                        \
    group_quantize1_f##F##_d##D##_sr(const void* x, i64 G, const i64* meta, const i64* first,          \
                               const i64* last, u8* row_data, u8* row_scales, u8* col_data,            \
                               u8* col_scales, const float* amax_row, const float* amax_col, int flags, \
                               u64 seed, u32 rht_mask, const i64* band, i64 K1, u32 tk_m, u32 tk_p) {  \
        FP4KIT_GRID_DEP();                                                                              \
        group_quantize_one<F, D, false, false, true>(x, G, meta, first, last, row_data, row_scales,     \
                                                      col_data, col_scales, amax_row, amax_col, flags,  \
                                                      band, K1, seed, tk_m, tk_p);                      \
    }
// group_quantize1_f5_d<D>_ext: NVFP4 with tile_2d / row_scaled / rht (any with stochastic rounding),
// one K, one tile per CTA (FULL), the band descriptors' member offsets, as the _sr kernels: it
// replaced the persistent full kernel group_quantize_f5_d<D> there (H200, G = 8, 65536 x 7168
// bfloat16, "both": docs/performance.md item 156). FP4KIT_GQ1_EXT_MINB: its CTAs per SM (77-80
// registers at 3, sm_90). One extended option alone, the others compiled out (XM, as quantize.cu's
// _rht / _sr): _rht (bfloat16), _rs (row_scaled), _t2d (tile_2d), 56-64 registers, 4 CTAs per SM
// (FP4KIT_GQ1_ONE_MINB); fp4kit/_cuda_grouped.py ext_one_suffix picks them.
#ifndef FP4KIT_GQ1_EXT_MINB
#define FP4KIT_GQ1_EXT_MINB 3
#endif
#ifndef FP4KIT_GQ1_ONE_MINB
#define FP4KIT_GQ1_ONE_MINB 4
#endif
#define FP4KIT_GROUP_QUANTIZE1_EXT(F, D, SUFFIX, XM, MINB)                                              \
    extern "C" __global__ void __launch_bounds__(QT_THREADS, MINB)                                     \
    group_quantize1_f##F##_d##D##SUFFIX(const void* x, i64 G, const i64* meta, const i64* first,       \
                               const i64* last, u8* row_data, u8* row_scales, u8* col_data,            \
                               u8* col_scales, const float* amax_row, const float* amax_col, int flags, \
                               u64 seed, u32 rht_mask, const i64* band, i64 K1, u32 tk_m, u32 tk_p) {  \
        FP4KIT_GRID_DEP();                                                                              \
        group_quantize_one<F, D, false, false, false, true, XM>(x, G, meta, first, last, row_data,     \
                                                                 row_scales, col_data, col_scales,      \
                                                                 amax_row, amax_col, flags, band, K1,   \
                                                                 seed, tk_m, tk_p, rht_mask);           \
    }
#define FP4KIT_GROUP_QUANTIZE1_ALL(F)                                                   \
    FP4KIT_GROUP_QUANTIZE1(F, 0, _plain, false, false) FP4KIT_GROUP_QUANTIZE1(F, 1, _plain, false, false) \
    FP4KIT_GROUP_QUANTIZE1(F, 2, _plain, false, false)
// group_quantize1_f<4|5>_d<D>_boths (SWZ): MXFP4 / NVFP4 "both" with swizzled scales (the caller's, or
// the staged ones that group_unswizzle_scales turns compact) and the rceil rule as compile-time facts;
// the host picks it for those options (fp4kit/_cuda_grouped.py), group_quantize1_f<F>_d<D>_both
// otherwise. (For MXFP6's one-tile kernel with the member lookups the same facts, with its buffers
// known non-null, measured slower: ptxas spilled 8 bytes, G = 8 745.9 -> 766.0 us; the operand flags
// alone 755.0. With the band descriptors they pay: FP4KIT_GROUP_QUANTIZE1_BOTH16.)
#define FP4KIT_GROUP_QUANTIZE1_BOTH(F)                                                                  \
    FP4KIT_GROUP_QUANTIZE1(F, 0, _both, true, false) FP4KIT_GROUP_QUANTIZE1(F, 1, _both, true, false)   \
    FP4KIT_GROUP_QUANTIZE1(F, 2, _both, true, false) FP4KIT_GROUP_QUANTIZE1(F, 0, _boths, true, true)   \
    FP4KIT_GROUP_QUANTIZE1(F, 1, _boths, true, true) FP4KIT_GROUP_QUANTIZE1(F, 2, _boths, true, true)

// group_quantize1_f<2|3>_d<1|2>_both(s): the same for MXFP6 "both" from 16-bit input, which reads the
// bands' descriptors (FP4KIT_GQ1_DESC; from float32 its lookups take the _plain kernel). H200, 65536 x
// 7168 bfloat16, device dims, G = 8, bench time, median of 3 rounds, _plain -> _both(s): sizes % 128
// 672.7 -> 662.1 us swizzled, 697.5 -> 686.4 compact (staged), even sizes 867.8 -> 853.5 / 899.6 ->
// 886.7 (docs/performance.md item 138)
#define FP4KIT_GROUP_QUANTIZE1_BOTH16(F)                                                                \
    FP4KIT_GROUP_QUANTIZE1(F, 1, _both, true, false) FP4KIT_GROUP_QUANTIZE1(F, 2, _both, true, false)   \
    FP4KIT_GROUP_QUANTIZE1(F, 1, _boths, true, true) FP4KIT_GROUP_QUANTIZE1(F, 2, _boths, true, true)

// group_quantize4_f<F>_d<D>: 128 x 128 squares (group_quantize_quad), 2 CTAs of 1024 threads per SM
#define FP4KIT_GROUP_QUANTIZE4(F, D)                                                                    \
    extern "C" __global__ void __launch_bounds__(4 * QT_THREADS, 2)                                     \
    group_quantize4_f##F##_d##D(const void* x, i64 G, const i64* meta, u8* row_data,                    \
                                u8* row_scales, u8* col_data, u8* col_scales, int flags, const i64* sq_desc, \
                                i64 K) {                                                               \
        FP4KIT_GRID_DEP();                                                                        \
        group_quantize_quad<F, D>(x, G, meta, row_data, row_scales, col_data, col_scales, flags,  \
                                  sq_desc, K);                                                         \
    }

// group_quantize_rows_f<F>_d<D>[_plain]: rowwise only, no tile_2d (group_quantize_rows above).
// CTAs per SM: 4 for plain NVFP4 from float32 / bfloat16 (64 registers, no spills: bfloat16 598 ->
// 537 us at G = 8 on the H200), 3 elsewhere (at 64 registers MXFP8 spills, 445 -> 488 us, and so
// does NVFP4 from float16).
#define FP4KIT_ROWS_MINB(F, D, EXT) ((F) == 5 && (D) != 2 && !(EXT) ? 4 : 3)
#define FP4KIT_GROUP_QUANTIZE_ROWS(F, D, EXT, SUFFIX, U)                                                \
    extern "C" __global__ void __launch_bounds__(QT_THREADS, FP4KIT_ROWS_MINB(F, D, EXT))              \
    group_quantize_rows_f##F##_d##D##SUFFIX(const void* x, i64 G, const i64* meta, const i64* first,   \
                               const i64* last, u8* row_data, u8* row_scales, const float* amax_row,   \
                               int flags, u64 seed) {                                                  \
        FP4KIT_GRID_DEP();                                                                            \
        group_quantize_rows<F, D, EXT, U>(x, G, meta, first, last, row_data, row_scales, amax_row,    \
                                          flags, seed);                                                \
    }

// group_quantize_rowsk_f<F>_d<D>[_plain]: rowwise only, no tile_2d, one K (group_quantize_rows_k);
// R = 4 row groups for 16-bit input with the plain recipes, else 2 (quantize.cu's _rows / _rowsx);
// lw from the launcher (fp4kit._plan.rows_lw).
// 3 CTAs per SM (80 registers): on the H200 (G = 8, MXFP8) 387 us, against 402 us at 4 (64
// registers, spills) and 433 us with no minimum (92 registers, 2 per SM).
#define FP4KIT_GROUP_QUANTIZE_ROWSK(F, D, EXT, SUFFIX, R)                                               \
    extern "C" __global__ void __launch_bounds__(QT_THREADS, 3)                                         \
    group_quantize_rowsk_f##F##_d##D##SUFFIX(const void* x, i64 G, const i64* meta, const i64* band, i64 K, \
                                             u8* row_data, u8* row_scales, const float* amax_row, int flags, \
                                             u64 seed, int lw) {                                         \
        FP4KIT_GRID_DEP();                                                                                         \
        group_quantize_rows_k<F, D, EXT, R>(x, G, meta, band, K, row_data, row_scales, amax_row, flags, seed, lw); \
    }

// group_quantize_rowsd[z]_f<F>_d<D>_plain: rowwise, plain recipes, one K, blocks of at most 64 rows
// (group_quantize_rows_direct): the launch bounds, R and scale stores of quantize.cu's _rows kernels
// (z: NVFP4 with swizzled scales from 16-bit input, the stores of _rowsz).
#define FP4KIT_GROUP_QUANTIZE_ROWSD(F, D, Z, R, LB, STG)                                                \
    extern "C" __global__ void LB                                                                      \
    group_quantize_rowsd##Z##_f##F##_d##D##_plain(const void* x, i64 G, const i64* meta, const i64* desc, \
                                                  i64 K, u8* row_data, u8* row_scales,                 \
                                                  const float* amax_row, int flags, u64 seed, int lw,  \
                                                  u32 km, u32 kp) {                                    \
        FP4KIT_GRID_DEP();                                                                             \
        group_quantize_rows_direct<F, D, R, STG>(x, G, meta, desc, K, row_data, row_scales, amax_row,  \
                                                 flags, seed, lw, km, kp);                             \
    }
// group_quantize_rowsd_f5_d<D>: NVFP4's extended rowwise recipe, row_scaled (with stochastic rounding
// or not), with R = 2, as quantize.cu's _rowsx (fp4kit._cuda_grouped.rows_direct;
// stochastic rounding alone keeps group_quantize_rowsk, which measured faster: docs/performance.md
// item 154).
#define FP4KIT_GROUP_QUANTIZE_ROWSD_EXT(F, D)                                                            \
    extern "C" __global__ void FP4KIT_LB_ANY                                                            \
    group_quantize_rowsd_f##F##_d##D(const void* x, i64 G, const i64* meta, const i64* desc, i64 K,     \
                                     u8* row_data, u8* row_scales, const float* amax_row, int flags,    \
                                     u64 seed, int lw, u32 km, u32 kp) {                                \
        FP4KIT_GRID_DEP();                                                                             \
        group_quantize_rows_direct<F, D, 2, 0, true>(x, G, meta, desc, K, row_data, row_scales, amax_row, \
                                                     flags, seed, lw, km, kp);                         \
    }
#define FP4KIT_GROUP_QUANTIZE_ROWSD_ALL(F)                                                              \
    FP4KIT_GROUP_QUANTIZE_ROWSD(F, 0, , 2, FP4KIT_LB_ANY, 0)                                            \
    FP4KIT_GROUP_QUANTIZE_ROWSD(F, 1, , 4, FP4KIT_LB_4, FP4KIT_ROWS_STG_OF(F))                          \
    FP4KIT_GROUP_QUANTIZE_ROWSD(F, 2, , 4, FP4KIT_LB_4, FP4KIT_ROWS_STG_OF(F))

// U = 4 tiles per iteration for 16-bit input with the plain recipes (FP6: 2, chosen when its integer
// encode needed the registers; not re-measured since FP6 goes through the FP8 cvt), else 2;
// fp4kit/_cuda_grouped.py mirrors this (rows_unit).
#define FP4KIT_ROWS_U(F) ((F) == 2 || (F) == 3 ? 2 : 4)
// The plain kernels for every format; the full (EXT) ones only where an option needs them
// (fp4kit._plan.needs_ext): stochastic rounding, which only the FP4 formats take, and NVFP4's
// tile_2d / row_scaled / rht. The MXFP8 / MXFP6 full kernels could never be chosen.
#define FP4KIT_GROUP_QUANTIZE_PLAIN(F)                                                                  \
    FP4KIT_GROUP_QUANTIZE_ROWS(F, 0, false, _plain, 2)                                                  \
    FP4KIT_GROUP_QUANTIZE_ROWS(F, 1, false, _plain, FP4KIT_ROWS_U(F))                                   \
    FP4KIT_GROUP_QUANTIZE_ROWS(F, 2, false, _plain, FP4KIT_ROWS_U(F))                                   \
    FP4KIT_GROUP_QUANTIZE_ROWSK(F, 0, false, _plain, 2)                                                 \
    FP4KIT_GROUP_QUANTIZE_ROWSK(F, 1, false, _plain, 4) FP4KIT_GROUP_QUANTIZE_ROWSK(F, 2, false, _plain, 4) \
    FP4KIT_GROUP_QUANTIZE_ROWSD_ALL(F)                                                                  \
    FP4KIT_GROUP_QUANTIZE(F, 0, false, _plain) FP4KIT_GROUP_QUANTIZE(F, 1, false, _plain)               \
    FP4KIT_GROUP_QUANTIZE(F, 2, false, _plain)
#define FP4KIT_GROUP_QUANTIZE_EXT(F)                                                                    \
    FP4KIT_GROUP_QUANTIZE_ROWS(F, 0, true, , 2) FP4KIT_GROUP_QUANTIZE_ROWS(F, 1, true, , 2)            \
    FP4KIT_GROUP_QUANTIZE_ROWS(F, 2, true, , 2)                                                         \
    FP4KIT_GROUP_QUANTIZE_ROWSK(F, 0, true, , 2) FP4KIT_GROUP_QUANTIZE_ROWSK(F, 1, true, , 2)          \
    FP4KIT_GROUP_QUANTIZE_ROWSK(F, 2, true, , 2)                                                        \
    FP4KIT_GROUP_QUANTIZE_SR(F, 0) FP4KIT_GROUP_QUANTIZE_SR(F, 1) FP4KIT_GROUP_QUANTIZE_SR(F, 2)          \
    FP4KIT_GROUP_QUANTIZE1_SR(F, 0) FP4KIT_GROUP_QUANTIZE1_SR(F, 1) FP4KIT_GROUP_QUANTIZE1_SR(F, 2)
// the full tile kernels: NVFP4's tile_2d / row_scaled / rht (MXFP4's one option, stochastic
// rounding, takes the _sr kernels above)
#define FP4KIT_GROUP_QUANTIZE_FULL(F)                                                                   \
    FP4KIT_GROUP_QUANTIZE(F, 0, true, ) FP4KIT_GROUP_QUANTIZE(F, 1, true, ) FP4KIT_GROUP_QUANTIZE(F, 2, true, ) \
    FP4KIT_GROUP_QUANTIZE1_EXT(F, 0, _ext, QFLAG_EXT_ALL, FP4KIT_GQ1_EXT_MINB)                          \
    FP4KIT_GROUP_QUANTIZE1_EXT(F, 1, _ext, QFLAG_EXT_ALL, FP4KIT_GQ1_EXT_MINB)                          \
    FP4KIT_GROUP_QUANTIZE1_EXT(F, 2, _ext, QFLAG_EXT_ALL, FP4KIT_GQ1_EXT_MINB)                          \
    FP4KIT_GROUP_QUANTIZE1_EXT(F, 1, _rht, QFLAG_RHT, FP4KIT_GQ1_ONE_MINB)                              \
    FP4KIT_GROUP_QUANTIZE1_EXT(F, 0, _rs, QFLAG_ROW_SCALED, FP4KIT_GQ1_ONE_MINB)                        \
    FP4KIT_GROUP_QUANTIZE1_EXT(F, 1, _rs, QFLAG_ROW_SCALED, FP4KIT_GQ1_ONE_MINB)                        \
    FP4KIT_GROUP_QUANTIZE1_EXT(F, 2, _rs, QFLAG_ROW_SCALED, FP4KIT_GQ1_ONE_MINB)                        \
    FP4KIT_GROUP_QUANTIZE1_EXT(F, 0, _t2d, QFLAG_TILE_2D, FP4KIT_GQ1_ONE_MINB)                          \
    FP4KIT_GROUP_QUANTIZE1_EXT(F, 1, _t2d, QFLAG_TILE_2D, FP4KIT_GQ1_ONE_MINB)                          \
    FP4KIT_GROUP_QUANTIZE1_EXT(F, 2, _t2d, QFLAG_TILE_2D, FP4KIT_GQ1_ONE_MINB)                          \
    FP4KIT_GROUP_QUANTIZE_ROWSD_EXT(F, 0) FP4KIT_GROUP_QUANTIZE_ROWSD_EXT(F, 1) FP4KIT_GROUP_QUANTIZE_ROWSD_EXT(F, 2)

#define FP4KIT_GROUP_DEQUANTIZE(F, O)                                                                   \
    extern "C" __global__ void __launch_bounds__(DQ_THREADS, DqGroupTune<O>::min_ctas)                  \
    group_dequantize_f##F##_o##O(const u8* data, const u8* scales, const float* amax, i64 G,            \
                                 const i64* meta, const i64* first, const i64* last, int columnwise,   \
                                 int swizzled, int row_scaled, void* out) {                            \
        FP4KIT_GRID_DEP();                                                                            \
        group_dequantize<F, O>(data, scales, amax, G, meta, first, last, columnwise, swizzled,        \
                               row_scaled, out);                                                       \
    }
// group_dequantize_cols_f<F>_o<O>: members that share their columns, 16-bit output only (float32 out
// measured no faster than group_dequantize_f<F>_o0: fp4kit/_cuda_grouped.py dequantize_kernel)
#define FP4KIT_GROUP_DEQUANTIZE_COLS(F, O)                                                              \
    extern "C" __global__ void __launch_bounds__(DQ_THREADS, DqGroupTune<O>::min_ctas)                  \
    group_dequantize_cols_f##F##_o##O(const u8* data, const u8* scales, const float* amax, i64 G,       \
                                      const i64* meta, const i64* first, const i64* last, int columnwise, \
                                      int swizzled, int row_scaled, void* out) {                       \
        FP4KIT_GRID_DEP();                                                                            \
        group_dequantize_cols<F, O>(data, scales, amax, G, meta, first, last, columnwise, swizzled,   \
                                    row_scaled, out);                                                  \
    }
#define FP4KIT_GROUP_DEQUANTIZE_ALL(F) FP4KIT_GROUP_DEQUANTIZE(F, 0) FP4KIT_GROUP_DEQUANTIZE(F, 1)            \
    FP4KIT_GROUP_DEQUANTIZE(F, 2) FP4KIT_GROUP_DEQUANTIZE_COLS(F, 1) FP4KIT_GROUP_DEQUANTIZE_COLS(F, 2)

// The instantiations, one block per compile part (common/parts.cuh; fp4kit._loader.part_of).
#if FP4KIT_IN_PART(FP4KIT_PART_COMMON)
FP4KIT_GROUP_STATS(0)
FP4KIT_GROUP_STATS(1)
FP4KIT_GROUP_STATS(2)
extern "C" __global__ void __launch_bounds__(QT_THREADS, 4)   // grid: 4 CTAs per SM, one wave
group_amax_plain_rht_bf16(const void* x, i64 G, const i64* meta, i64 K, u32 sign_mask, u32* out_plain, u32* out_rht) {
    FP4KIT_GRID_DEP();
    group_amax_plain_rht(x, G, meta, K, sign_mask, out_plain, out_rht);
}
#endif
#if FP4KIT_IN_PART(0)
FP4KIT_GROUP_QUANTIZE1_ALL(0)
FP4KIT_GROUP_QUANTIZE4(0, 1)
FP4KIT_GROUP_QUANTIZE4(0, 2)
FP4KIT_GROUP_QUANTIZE_PLAIN(0)
FP4KIT_GROUP_DEQUANTIZE_ALL(0)
#endif
#if FP4KIT_IN_PART(1)
FP4KIT_GROUP_QUANTIZE1_ALL(1)
FP4KIT_GROUP_QUANTIZE4(1, 1)
FP4KIT_GROUP_QUANTIZE4(1, 2)
FP4KIT_GROUP_QUANTIZE_PLAIN(1)
FP4KIT_GROUP_DEQUANTIZE_ALL(1)
#endif
#if FP4KIT_IN_PART(2)
FP4KIT_GROUP_QUANTIZE1_ALL(2)
FP4KIT_GROUP_QUANTIZE1_BOTH16(2)
FP4KIT_GROUP_QUANTIZE_PLAIN(2)
FP4KIT_GROUP_DEQUANTIZE_ALL(2)
#endif
#if FP4KIT_IN_PART(3)
FP4KIT_GROUP_QUANTIZE1_ALL(3)
FP4KIT_GROUP_QUANTIZE1_BOTH16(3)
FP4KIT_GROUP_QUANTIZE_PLAIN(3)
FP4KIT_GROUP_DEQUANTIZE_ALL(3)
#endif
#if FP4KIT_IN_PART(4)
FP4KIT_GROUP_QUANTIZE1_ALL(4)
FP4KIT_GROUP_QUANTIZE1_BOTH(4)
FP4KIT_GROUP_QUANTIZE_PLAIN(4)
FP4KIT_GROUP_DEQUANTIZE_ALL(4)
#endif
#if FP4KIT_IN_PART(FP4KIT_PART_RECIPES(4))
FP4KIT_GROUP_QUANTIZE_EXT(4)
#endif
#if FP4KIT_IN_PART(5)
FP4KIT_GROUP_QUANTIZE1_ALL(5)
FP4KIT_GROUP_QUANTIZE1_BOTH(5)
FP4KIT_GROUP_QUANTIZE_PLAIN(5)
FP4KIT_GROUP_QUANTIZE_ROWSD(5, 1, z, 4, FP4KIT_LB_4, 2)
FP4KIT_GROUP_QUANTIZE_ROWSD(5, 2, z, 4, FP4KIT_LB_4, 2)
FP4KIT_GROUP_DEQUANTIZE_ALL(5)
#endif
#if FP4KIT_IN_PART(FP4KIT_PART_RECIPES(5))
FP4KIT_GROUP_QUANTIZE_EXT(5)
FP4KIT_GROUP_QUANTIZE_FULL(5)
#endif

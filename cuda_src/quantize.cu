// fp4kit: block-scaled quantization of a 2-D tensor (M, K), every format, in one pass.
//
// One CTA owns a 64x64 tile of x: it loads the tile (16-byte vector loads) into shared memory as
// fp32, then
//   - rowwise:    each thread quantizes 16 consecutive elements of one row (blocks along K);
//   - columnwise: each thread quantizes 16 consecutive rows of one column, i.e. the rowwise
//                 operand of x^T (codes (K, M), SPEC section 5).
// MX blocks of 32 are two neighbouring lanes (amax combined with one shuffle). Scales are written
// straight into the compact or swizzled buffer (padding of a swizzled buffer: swizzle.cu).
// NVFP4 reads its amax from device memory (amax.cu writes it; no host synchronisation).
// The select forms of the E8M0 rceil code and inverse scale (codecs.cuh e8m0_rceil_code): fewer
// instructions, no spills here.
#define FP4KIT_E8M0_SELECT 1
#include "common/parts.cuh"
#include "common/quantize_tile.cuh"
#include "common/amax.cuh"

using namespace fp4kit;

// Kernel names: quantize_f<format_id>_d<input dtype id> (enums.cuh). Grid: 1-D, one CTA per
// 64x64 tile, ceil(M/64) * ceil(K/64) CTAs of 256 threads. Unused pointers may be null.
// Tile kernels: 8 CTAs per SM for the plain recipes (32 registers); the full ones (EXT) leave the
// count to the compiler (an explicit minimum of 1 made MXFP4 take 72 registers instead of 64).

// L2 prefetch of a later CTA's tile (FP8 / FP6): after its own tile, CTA b asks L2 for the input
// rows of tile b + 8 * (SM count) (prefetch.global.L2, one 128-byte line per row and thread),
// roughly the tile of the CTA that takes this one's slot, so its DRAM reads are under way when it
// starts. H100, kernel time at 8192^2 (same-run A/B, two rounds): MXFP6 'both' 116.8 -> 112.0 us,
// MXFP6 columnwise 85.1 -> 80.2, MXFP8 columnwise 81.8 -> 79.8, MXFP8 'both' 108.3 -> 107.4
// (swizzled) / 111.9 -> 111.2 (compact). Not for the packed formats (MXFP4 columnwise gained, 69.6 ->
// 68.1 us, but 'both', where it did not even run, lost 100.4 -> 102.3 us to the code's presence) nor
// for staged columnwise runs (M = 8200: 162.1 -> 164.9 us). A distance of 16 * (SM count) was worse
// everywhere (more lines in L2 competing with the half-written columnwise sectors); at the start of
// the kernel, or with 32-bit index arithmetic, the prefetch made ptxas spill at 32 registers.
template <int FMT, int DT>
__device__ __forceinline__ void prefetch_tile_l2(const void* x, i64 M, i64 K, const u8* col_data) {
    if constexpr (Fmt<FMT>::packed) return;
    if (ColStage<FMT>::needed(col_data, M)) return;
    if (threadIdx.x >= QT_M) return;
    i64 tq0, kt0;
    grid_tile(M, tq0, kt0);   // this CTA's tile (the caller returned for CTAs past the last tile row)
    u32 nsm;
    asm("mov.u32 %0, %%nsmid;" : "=r"(nsm));
    const i64 tiles_k = (K + QT_K - 1) / QT_K;
    const i64 t = tq0 * tiles_k + kt0 + 8 * (i64)nsm;   // the tile 8 x SMs later in row-major order
    const i64 tq = div_fast(t, tiles_k);
    const i64 gm = tq * QT_M + threadIdx.x;
    if (gm >= M) return;
    constexpr int B = (int)sizeof(typename In<DT>::T);
    const i64 k0 = (t - tq * tiles_k) * QT_K;
    const char* p = reinterpret_cast<const char*>(x) + (gm * K + k0) * B;
#pragma unroll
    for (int i = 0; i < QT_K * B / 128; ++i)   // addresses inside the row only
        if (k0 + i * (128 / B) < K) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + 128 * i));
}

// Scale bytes staged in shared memory and written at the end of the tile, one 2-byte (MX) or 4-byte
// (NVFP4) store per row and per column of the tile (quantize_tile_rc's STASH) instead of one byte
// store per block from 128 or 256 threads: for the plain kernels except MXFP4. H100, kernel time at
// 8192^2 bfloat16, same run, two rounds: MXFP8 'both' 107.1 -> 105.4 us (swizzled) / 106.4 -> 105.0
// (compact), 16384^2 212.6 -> 209.0, MXFP6 'both' 107.3 -> 105.9, NVFP4 'both' 123.7 -> 120.7,
// columnwise unchanged (76.1); but MXFP4 'both' 100.6 -> 103.8 (issue-bound: the extra barrier and
// stores cost more than they save) and the grouped loop-free MXFP8 kernel 761 -> 788 us, which keep
// the direct stores. For scale: with no scale stores at all MXFP8 'both' took 100.6 us.
#define FP4KIT_TILE_STASH(F, EXT) ((!(EXT) && (F) != 4) ? 1 : 0)
#define FP4KIT_TILE_LB_true __launch_bounds__(QT_THREADS)
#define FP4KIT_TILE_LB_false __launch_bounds__(QT_THREADS, 8)
#define FP4KIT_QUANTIZE_KERNEL(F, D, EXT, SUFFIX)                                                      \
    extern "C" __global__ void FP4KIT_TILE_LB_##EXT                                                   \
    quantize_f##F##_d##D##SUFFIX(const void* x, i64 M, i64 K, u8* row_data, u8* row_scales,           \
                                 u8* col_data, u8* col_scales, const float* amax_row,                  \
                                 const float* amax_col, int flags, u64 seed, u32 rht_mask) {          \
        FP4KIT_GRID_DEP();                                                                            \
        i64 tq, kt;                                                                                   \
        if (!grid_tile(M, tq, kt)) return;                                                            \
        quantize_tile_rc<F, D, EXT, QFLAG_EXT_ALL, FP4KIT_TILE_STASH(F, EXT)>(                         \
            x, M, K, row_data, row_scales, col_data, col_scales, amax_row, amax_col, flags, seed, rht_mask, \
            tq, kt);                                                                                  \
        prefetch_tile_l2<F, D>(x, M, K, col_data);                                                    \
    }

// quantize_f<F>_d<D>_quad (plain MXFP8 / MXFP4 "both" from 16-bit input, M and K multiples of 128; every
// operand's scales are then in the swizzled layout: swizzled, or compact through the staging
// buffer): one CTA of 4 x 256 threads per 128 x 128 square, thread group g quantizing its 64 x 64
// tile (2 bq + g / 2, 2 bk + g % 2) with its own shared tile and named barrier (quantize_tile_rc with
// STASH 2). The four tiles' scale bytes fill one 512-byte swizzled block per operand in shared
// memory, which leaves as whole 16-byte chunks (32 lanes each) instead of 2-byte pieces from four
// CTAs (the stores that item 53 of docs/performance.md found to cost 6.5 of 107 us). H100, kernel
// time, same run, two rounds (64 x 64 kernel / this without the prefetch / with it, distance
// 2 x SMs / 4 x SMs): MXFP8 'both' 8192^2 105.5 / 102.2 / 99.0 / 104.4 us, 16384^2 208.7 / 201.2 /
// 194.6 / 204.2; but MXFP8 columnwise 75.7 / 79.2 / 75.5 / 81.6, MXFP6 'both' 106.0 / 111.7 / 108.0
// / 110.4 and MXFP6 columnwise 75.9 / 83.4 / 79.3 / 82.2, which keep the 64 x 64 kernel. MXFP4
// 'both' (its packed-pair column reads as in the 64 x 64 kernel; two rounds, 64 x 64 / this):
// 16384^2 compact 346.0 / 336.5 us, 65536 x 7168 swizzled 579.3 / 559.9, 8192^2 swizzled 84.7 /
// 83.5, compact 88.3 / 88.5 (docs/performance.md item 83).
// L2 prefetch (prefetch_square_l2) of square blockIdx.x + 2 x (SM count) (2 CTAs per SM).
template <int DT>
__device__ __forceinline__ void prefetch_quad_l2(const void* x, i64 M, i64 K, i64 qk, int g) {
    if (threadIdx.x % QT_THREADS >= QT_M) return;   // prefetching threads only, before the division
    const i64 b = (i64)blockIdx.x + 2 * sm_count();
    const i64 q = div_fast(b, qk);
    prefetch_square_l2<DT>(x, q * 128 * K + (b - q * qk) * 128, M - q * 128, K, g);
}

// quantize_f<F>_d<D>_quadm: as _quad for any M (K % 128 == 0, scales swizzled or staged swizzled; also
// MXFP6, 8200 x 8192 bfloat16 157.2 -> 139.7 us; large tensors only, _plan.QUADM_MIN_ELEMENTS, item 85):
// ceil(M / 128) * (K / 128) CTAs. The last square row may be partial (its scale blocks leave with
// the padding rows as zeros, so no padding launch), and columnwise code rows that start off a 16-byte
// boundary (M % 16 != 0) are staged and written for the whole square as grouped.cu group_quantize4
// does (quantize_tile_rc with STASH 3, quad_square_out), instead of the 64 x 64 kernel's 64-byte runs
// (ColStage::write); MXFP4's code rows keep their per-thread stores (FP4 is never staged). MXFP4
// (H100, kernel time, 8200 x 8192 bfloat16, 64 x 64 / this): swizzled 109.3 / 100.8 us, compact 116.7
// / 106.9 (docs/performance.md item 83). The body of both: quantize_square with STASH 2 (_quad) or 3
// (_quadm).
template <int F, int D, int STASH>
__device__ __forceinline__ void quantize_square(const void* x, i64 M, i64 K, u8* row_data, u8* row_scales,
                                                u8* col_data, u8* col_scales, int flags) {
    __shared__ __align__(16) u8 blk[1024];
    const i64 qk = K >> 7;
    const i64 bq = div_fast((i64)blockIdx.x, qk), bk = (i64)blockIdx.x - bq * qk;
    const int g = threadIdx.x >> 8;
    const u32* tiles = quantize_tile_rc<F, D, false, QFLAG_EXT_ALL, STASH>(
        x, M, K, row_data, row_scales, col_data, col_scales, nullptr, nullptr, flags, 0ull, 0u, 2 * bq + (g >> 1),
        2 * bk + (g & 1), false, blk);
    __syncthreads();
    if constexpr (STASH == 2) {
        const int t = threadIdx.x;
        if (t < 32) {
            if (flags & QFLAG_ROWWISE)
                reinterpret_cast<uint4*>(row_scales + (bq * qk + bk) * 512)[t] = reinterpret_cast<const uint4*>(blk)[t];
        } else if (t < 64) {
            if (flags & QFLAG_COLUMNWISE)
                reinterpret_cast<uint4*>(col_scales + (bk * (M >> 7) + bq) * 512)[t - 32] =
                    reinterpret_cast<const uint4*>(blk + 512)[t - 32];
        }
    } else {
        quad_square_out<F, RawTileStride<D, 3>::words>(tiles, blk, M, bq, bk, qk, col_data, [&] { return row_scales; },
                                                       [&] { return col_scales; });
    }
    prefetch_quad_l2<D>(x, M, K, qk, g);
}

#define FP4KIT_QUANTIZE_QUAD_KERNEL(F, D, SUFFIX, STASH)                                                \
    extern "C" __global__ void __launch_bounds__(4 * QT_THREADS, 2)                                     \
    quantize_f##F##_d##D##SUFFIX(const void* x, i64 M, i64 K, u8* row_data, u8* row_scales, u8* col_data, \
                                 u8* col_scales, const float* amax_row, const float* amax_col, int flags, \
                                 u64 seed, u32 rht_mask) {                                              \
        FP4KIT_GRID_DEP();                                                                              \
        quantize_square<F, D, STASH>(x, M, K, row_data, row_scales, col_data, col_scales, flags);       \
    }

// quantize_f<F>_d<D>_rows (plain; R = 2 for float32 input, 4 for 16-bit input) and _rowsx (every
// option but 2D tiles; R = 2): rowwise only; ceil(K / (16 * 2^lw)) x ceil(M / (R * 256 / 2^lw)) CTAs
// of 256 threads (quantize_rows_at; the launcher picks lw).
// LB: the launch bounds. The plain kernels from 16-bit input ask for 4 CTAs per SM (64 registers, no
// spills; the compiler's choice with a run-time lw is 69-80, i.e. 3 CTAs per SM). NVFP4's asked for
// 3 (79 registers) until its blocks took the below-7 encode (row_segment's B7), which brought it to
// 63 at 4: H200, 8192^2 bfloat16, supplied amax, compact scales 56.5 -> 51.9 us (docs/performance.md
// item 142). The extended ones keep the compiler's choice: an explicit minimum of 1 is not the same
// as none.
// FP4KIT_LB_ANY / FP4KIT_LB_4 and FP4KIT_ROWS_STG_OF: common/quantize_tile.cuh (grouped.cu's
// group_quantize_rowsd kernels take the same).
// G1: the kernel's grid. false: (column blocks, gy, gz) over the block rows (grid_rows,
// fp4kit._plan.rows_grid), which spares every thread a 64-bit division for the column blocks and a
// division of the block index; true (_rowsz, fp4kit._plan.ROWS_1D_KERNELS): one CTA per block in a
// 1-D grid, block b = blockIdx.x, which measured 1 % faster for it (H200, docs/performance.md item
// 151). FP4KIT_ROWS_GRID1 (common/quantize_tile.cuh; A/B only, with fp4kit._plan.ROWS_GRID_3D =
// False): every rows kernel on the 1-D grid; FP4KIT_ROWSZ_GRID3 (A/B only, with ROWS_1D_KERNELS =
// ()): _rowsz on the 3-D grid.
#ifndef FP4KIT_ROWSZ_GRID3
#define FP4KIT_ROWSZ_GRID3 0
#endif
#define FP4KIT_ROWS_BLOCK(F, D, EXT, R, XM, STG, G1)                                                  \
    if constexpr ((G1) || FP4KIT_ROWS_GRID1) {                                                        \
        quantize_rows_direct<F, D, EXT, R, XM, STG, true>(x, M, K, row_data, row_scales, amax_row, flags, \
                                                          seed, (i64)blockIdx.x, lw);                 \
    } else {                                                                                          \
        i64 bq, kt;                                                                                   \
        if (!grid_rows(M, R, lw, bq, kt)) return;                                                     \
        quantize_rows_at<F, D, EXT, R, XM, STG>(x, M, K, row_data, row_scales, amax_row, flags, seed, bq, kt, lw); \
    }
#define FP4KIT_QUANTIZE_ROWS_KERNEL(F, D, EXT, SUFFIX, R, LB, STG, G1)                                \
    extern "C" __global__ void LB                                                                     \
    quantize_f##F##_d##D##SUFFIX(const void* x, i64 M, i64 K, u8* row_data, u8* row_scales,           \
                                 const float* amax_row, int flags, u64 seed, int lw) {                \
        FP4KIT_GRID_DEP();                                                                            \
        FP4KIT_ROWS_BLOCK(F, D, EXT, R, QFLAG_EXT_ALL, STG, G1)                                       \
    }

// quantize_f5_d<D>_rowsam: plain rowwise NVFP4 with the computed global amax in one launch, for
// small inputs (the planner's SMALL_FUSED_MAX elements at most), where the separate memset, amax
// and quantize launches cost more host time than the work. The grid is clusters of RA_CTAS CTAs;
// every cluster computes the whole amax on its own (ordinary loads, 16 vectors in flight per
// thread: the first cluster brings x into L2, the others read it there), reducing its CTAs' shares
// through distributed shared memory, so no CTA waits for another cluster and nothing needs a
// zeroed buffer; CTA 0 writes the amax. Then every CTA quantizes the rows kernel's blocks
// b = blockIdx.x, + gridDim.x, ... < nblocks (the _rows blocks: R x 256 / 2^lw rows x 16 x 2^lw
// columns) with the amax from its own shared memory. One cluster alone was issue-bound on its 8
// SMs (H100, 128 x 4096 bf16: 15.6 us against 5.6 us for memset + amax + rows). The amax bits equal
// amax_global's (the max of the same values), the codes _rows' (the same block function and amax).
constexpr int RA_CTAS = 8;
#define FP4KIT_QUANTIZE_ROWSAM_KERNEL(D, R)                                                             \
    extern "C" __global__ void __cluster_dims__(RA_CTAS, 1, 1) __launch_bounds__(QT_THREADS, 1)       \
    quantize_f5_d##D##_rowsam(const void* x, i64 M, i64 K, u8* row_data, u8* row_scales, u32* amax_out, \
                              int flags, u64 seed, int lw, i64 nblocks) {                             \
        FP4KIT_GRID_DEP();                                                                            \
        __shared__ float s_amax;                                                                      \
        u32 rank;                                                                                     \
        asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));                                          \
        const u32 acc = cluster_max_u32<QT_THREADS>(amax_accumulate<D, true, 16>(                     \
            x, M * K, aligned16(x), (i64)rank * QT_THREADS + threadIdx.x, (i64)RA_CTAS * QT_THREADS));  \
        if (threadIdx.x == 0) {                                                                       \
            s_amax = u2f(acc);                                                                        \
            if (blockIdx.x == 0) *amax_out = acc;                                                     \
        }                                                                                             \
        __syncthreads();                                                                              \
        for (i64 b = blockIdx.x; b < nblocks; b += gridDim.x) {                                       \
            quantize_rows_direct<5, D, false, R>(x, M, K, row_data, row_scales, &s_amax, flags, seed, b, lw); \
            __syncthreads();   /* the next block refills the multiplier table */                      \
        }                                                                                             \
    }

// quantize_f<F>_d<D>_plain / _rows: no tile_2d / row_scaled / rht / stochastic rounding (their flags
// are ignored), fewer registers; every format.
// The plain rowwise kernels for 16-bit input ask for 4 CTAs per SM (FP4KIT_QUANTIZE_ROWS_KERNEL).
#define FP4KIT_QUANTIZE_PLAIN_DTYPES(F)          \
    FP4KIT_QUANTIZE_KERNEL(F, 0, false, _plain)  \
    FP4KIT_QUANTIZE_KERNEL(F, 1, false, _plain)  \
    FP4KIT_QUANTIZE_KERNEL(F, 2, false, _plain)  \
    FP4KIT_QUANTIZE_ROWS_KERNEL(F, 0, false, _rows, 2, FP4KIT_LB_ANY, 0, false) \
    FP4KIT_QUANTIZE_ROWS_KERNEL(F, 1, false, _rows, 4, FP4KIT_LB_4, FP4KIT_ROWS_STG_OF(F), false) \
    FP4KIT_QUANTIZE_ROWS_KERNEL(F, 2, false, _rows, 4, FP4KIT_LB_4, FP4KIT_ROWS_STG_OF(F), false)
// quantize_f<F>_d<D> / _rowsx: every option. Only NVFP4 has them: the planner picks them for
// options other than stochastic rounding alone (fp4kit._plan.needs_ext / sr_only), i.e. NVFP4's
// tile_2d / row_scaled / rht; MXFP4's only extended option is stochastic rounding (_sr / _rowssr).
#define FP4KIT_QUANTIZE_EXT_DTYPES(F)            \
    FP4KIT_QUANTIZE_KERNEL(F, 0, true, )         \
    FP4KIT_QUANTIZE_KERNEL(F, 1, true, )         \
    FP4KIT_QUANTIZE_KERNEL(F, 2, true, )         \
    FP4KIT_QUANTIZE_ROWS_KERNEL(F, 0, true, _rowsx, 2, FP4KIT_LB_ANY, 0, false) \
    FP4KIT_QUANTIZE_ROWS_KERNEL(F, 1, true, _rowsx, 2, FP4KIT_LB_ANY, 0, false) \
    FP4KIT_QUANTIZE_ROWS_KERNEL(F, 2, true, _rowsx, 2, FP4KIT_LB_ANY, 0, false)

// quantize_f5_d1_rht: NVFP4 from bfloat16 with the fused RHT cast and no other variant (tile_2d,
// row_scaled, stochastic rounding ignored): the RHT path of quantize_f5_d1 in fewer registers.
#if FP4KIT_IN_PART(FP4KIT_PART_RECIPES(5))
extern "C" __global__ void __launch_bounds__(QT_THREADS)
quantize_f5_d1_rht(const void* x, i64 M, i64 K, u8* row_data, u8* row_scales, u8* col_data, u8* col_scales,
                   const float* amax_row, const float* amax_col, int flags, u64 seed, u32 rht_mask) {
    FP4KIT_GRID_DEP();
    i64 tq, kt;
    if (!grid_tile(M, tq, kt)) return;
    quantize_tile_rc<5, 1, true, QFLAG_RHT>(x, M, K, row_data, row_scales, col_data, col_scales, amax_row, amax_col,
                                            flags, seed, rht_mask, tq, kt);
}
#endif

// quantize_f<F>_d<D>_sr / _rowssr: stochastic rounding (the FP4 formats) and no other extended
// option (NVFP4 tile_2d / row_scaled / rht): the Philox and rounding code without the registers of
// the other variants (tile kernel: 64 instead of 69 registers, 4 CTAs per SM instead of 3).
#define FP4KIT_QUANTIZE_SR_KERNELS(F, D)                                                                \
    extern "C" __global__ void __launch_bounds__(QT_THREADS, 4)                                       \
    quantize_f##F##_d##D##_sr(const void* x, i64 M, i64 K, u8* row_data, u8* row_scales, u8* col_data, \
                              u8* col_scales, const float* amax_row, const float* amax_col, int flags, \
                              u64 seed, u32 rht_mask) {                                               \
        FP4KIT_GRID_DEP();                                                                            \
        i64 tq, kt;                                                                                   \
        if (!grid_tile(M, tq, kt)) return;                                                            \
        quantize_tile_rc<F, D, true, QFLAG_STOCHASTIC>(x, M, K, row_data, row_scales, col_data, col_scales, \
                                                       amax_row, amax_col, flags, seed, rht_mask, tq, kt); \
    }                                                                                                 \
    extern "C" __global__ void FP4KIT_LB_ANY                                                          \
    quantize_f##F##_d##D##_rowssr(const void* x, i64 M, i64 K, u8* row_data, u8* row_scales,          \
                                  const float* amax_row, int flags, u64 seed, int lw) {               \
        FP4KIT_GRID_DEP();                                                                             \
        FP4KIT_ROWS_BLOCK(F, D, true, 2, QFLAG_STOCHASTIC, 0, false)                                   \
    }

// The small NVFP4 steps of one quantize call, in one launch ahead of its main kernel:
// - the stored amaxes: dst_row[i] and dst_col[i] (a null one is skipped) get src[i] AND mask for
//   i < n (grid-stride): a caller's amax with mask 0x7FFFFFFF (-0 stored as +0, SPEC: an amax is
//   max |x|; an integer AND, so a subnormal amax is kept as it is), or the columnwise copy of the
//   computed plain amax with mask 0xFFFFFFFF;
// - with `tabs` (QFLAG_ENC_TABS), CTA 0's threads fill the multiplier tables tabs[0 .. NV_TAB] for
//   tab_row[0] (threads 0-127) and tabs[NV_TAB + 1 ..] for tab_col[0] (threads 128-255); a null
//   source skips its table, and a source equal to src is read AND mask, as it is stored. The tile
//   kernels then copy the tables instead of each CTA computing them.
// It replaced one launch per stored amax plus one for the tables (fp4kit._plan).
#if FP4KIT_IN_PART(FP4KIT_PART_COMMON)
extern "C" __global__ void __launch_bounds__(QT_THREADS)
nvfp4_amax_out(const float* src, i64 n, u32 mask, float* dst_row, float* dst_col, const float* tab_row,
               const float* tab_col, float* tabs) {
    FP4KIT_GRID_DEP();
    const u32* s = reinterpret_cast<const u32*>(src);
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        const u32 v = s[i] & mask;
        if (dst_row != nullptr) reinterpret_cast<u32*>(dst_row)[i] = v;
        if (dst_col != nullptr) reinterpret_cast<u32*>(dst_col)[i] = v;
    }
    if (tabs == nullptr || blockIdx.x != 0) return;
    if (tab_row != nullptr)
        nvfp4_fill_table(tabs, u2f(f2u(tab_row[0]) & (tab_row == src ? mask : 0xFFFFFFFFu)), 0);
    if (tab_col != nullptr)
        nvfp4_fill_table(tabs + NV_TAB + 1, u2f(f2u(tab_col[0]) & (tab_col == src ? mask : 0xFFFFFFFFu)), NV_TAB);
}
#endif

// 128 x 128 squares from 16-bit input: _quad and _quadm (MXFP8, MXFP4), _quadm only (MXFP6,
// _plan.QUADM_MIN_ELEMENTS); stochastic rounding's kernels from every input dtype.
#define FP4KIT_QUANTIZE_SQUARES_M(F)                                                                    \
    FP4KIT_QUANTIZE_QUAD_KERNEL(F, 1, _quadm, 3) FP4KIT_QUANTIZE_QUAD_KERNEL(F, 2, _quadm, 3)
#define FP4KIT_QUANTIZE_SQUARES(F)                                                                      \
    FP4KIT_QUANTIZE_QUAD_KERNEL(F, 1, _quad, 2) FP4KIT_QUANTIZE_QUAD_KERNEL(F, 2, _quad, 2)           \
    FP4KIT_QUANTIZE_SQUARES_M(F)
#define FP4KIT_QUANTIZE_SR_ALL(F) \
    FP4KIT_QUANTIZE_SR_KERNELS(F, 0) FP4KIT_QUANTIZE_SR_KERNELS(F, 1) FP4KIT_QUANTIZE_SR_KERNELS(F, 2)

// The instantiations, one block per compile part (common/parts.cuh; fp4kit._loader.part_of).
#if FP4KIT_IN_PART(0)
FP4KIT_QUANTIZE_PLAIN_DTYPES(0)
FP4KIT_QUANTIZE_SQUARES(0)
#endif
#if FP4KIT_IN_PART(1)
FP4KIT_QUANTIZE_PLAIN_DTYPES(1)
FP4KIT_QUANTIZE_SQUARES(1)
#endif
#if FP4KIT_IN_PART(2)
FP4KIT_QUANTIZE_PLAIN_DTYPES(2)
FP4KIT_QUANTIZE_SQUARES_M(2)
#endif
#if FP4KIT_IN_PART(3)
FP4KIT_QUANTIZE_PLAIN_DTYPES(3)
FP4KIT_QUANTIZE_SQUARES_M(3)
#endif
#if FP4KIT_IN_PART(4)
FP4KIT_QUANTIZE_PLAIN_DTYPES(4)
FP4KIT_QUANTIZE_SQUARES(4)
#endif
#if FP4KIT_IN_PART(FP4KIT_PART_RECIPES(4))
FP4KIT_QUANTIZE_SR_ALL(4)
#endif
#if FP4KIT_IN_PART(5)
FP4KIT_QUANTIZE_PLAIN_DTYPES(5)
// quantize_f5_d<D>_rowsz: _rows for NVFP4 from 16-bit input with swizzled scales (STG 2)
FP4KIT_QUANTIZE_ROWS_KERNEL(5, 1, false, _rowsz, 4, FP4KIT_LB_4, 2, !FP4KIT_ROWSZ_GRID3)
FP4KIT_QUANTIZE_ROWS_KERNEL(5, 2, false, _rowsz, 4, FP4KIT_LB_4, 2, !FP4KIT_ROWSZ_GRID3)
FP4KIT_QUANTIZE_ROWSAM_KERNEL(0, 2)
FP4KIT_QUANTIZE_ROWSAM_KERNEL(1, 4)
FP4KIT_QUANTIZE_ROWSAM_KERNEL(2, 4)
#endif
// quantize_f5_d<D>_rs / _t2d: NVFP4's tile kernel with row_scaled / tile_2d alone, the other
// options compiled out (as _rht / _sr), FP4KIT_ONE_MINB CTAs per SM (the full kernel: 74 registers,
// three; these 41-48, four or more, sm_90, NVRTC 13.5); fp4kit._plan.ext_one_suffix picks them.
// docs/performance.md item 158.
#ifndef FP4KIT_ONE_MINB
#define FP4KIT_ONE_MINB 4
#endif
#define FP4KIT_QUANTIZE_ONE_KERNEL(D, SUFFIX, XM)                                                       \
    extern "C" __global__ void __launch_bounds__(QT_THREADS, FP4KIT_ONE_MINB)                          \
    quantize_f5_d##D##SUFFIX(const void* x, i64 M, i64 K, u8* row_data, u8* row_scales, u8* col_data,  \
                             u8* col_scales, const float* amax_row, const float* amax_col, int flags,  \
                             u64 seed, u32 rht_mask) {                                                 \
        FP4KIT_GRID_DEP();                                                                             \
        i64 tq, kt;                                                                                    \
        if (!grid_tile(M, tq, kt)) return;                                                             \
        quantize_tile_rc<5, D, true, XM>(x, M, K, row_data, row_scales, col_data, col_scales, amax_row, \
                                         amax_col, flags, seed, rht_mask, tq, kt);                      \
    }
#if FP4KIT_IN_PART(FP4KIT_PART_RECIPES(5))
FP4KIT_QUANTIZE_EXT_DTYPES(5)
FP4KIT_QUANTIZE_SR_ALL(5)
FP4KIT_QUANTIZE_ONE_KERNEL(0, _rs, QFLAG_ROW_SCALED)
FP4KIT_QUANTIZE_ONE_KERNEL(1, _rs, QFLAG_ROW_SCALED)
FP4KIT_QUANTIZE_ONE_KERNEL(2, _rs, QFLAG_ROW_SCALED)
FP4KIT_QUANTIZE_ONE_KERNEL(0, _t2d, QFLAG_TILE_2D)
FP4KIT_QUANTIZE_ONE_KERNEL(1, _t2d, QFLAG_TILE_2D)
FP4KIT_QUANTIZE_ONE_KERNEL(2, _t2d, QFLAG_TILE_2D)
#endif

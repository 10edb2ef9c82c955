// fp4kit: amax reductions for NVFP4 (SPEC section 4), NaN ignored, written as float bits with
// atomicMax into a zero-initialised device buffer (non-negative floats order like their bits).
#include "common/types.cuh"
#include "common/enums.cuh"
#include "common/io.cuh"
#include "common/rht.cuh"
#include "common/amax.cuh"

namespace fp4kit {

constexpr int AM_THREADS = 256;

__device__ __forceinline__ void block_atomic_max(u32 acc, u32* out) {
    acc = block_max_u32<AM_THREADS>(acc);
    if (threadIdx.x == 0 && acc != 0u) atomicMax(out, acc);
}

// max |x| over n elements (grid-stride; vec_ok: x is 16-byte aligned).
template <int DT>
__device__ __forceinline__ void amax_global(const void* xv, i64 n, int vec_ok, u32* out) {
    const u32 acc = amax_accumulate<DT>(xv, n, vec_ok, (i64)blockIdx.x * AM_THREADS + threadIdx.x,
                                        (i64)gridDim.x * AM_THREADS);
    block_atomic_max(acc, out);
}

// max |u| over the RHT-transformed columnwise operand (bfloat16 input, M % 16 == 0).
// Thread per (group of 16 rows, column); grid-stride.
__device__ __forceinline__ void amax_rht(const u16* x, i64 M, i64 K, u32 sign_mask, u32* out) {
    const i64 total = (M / 16) * K;
    const i64 stride = (i64)gridDim.x * AM_THREADS;
    u32 acc = 0;
    for (i64 t = (i64)blockIdx.x * AM_THREADS + threadIdx.x; t < total; t += stride) {
        const i64 g = div_fast(t, K), k = t - g * K;
        float v[16];
#pragma unroll
        for (int i = 0; i < 16; ++i) v[i] = bf16_bits_to_f32(x[(g * 16 + i) * K + k]);
        rht16_inplace(v, sign_mask);
#pragma unroll
        for (int i = 0; i < 16; ++i) acc = absmax_bits(acc, v[i]);
    }
    block_atomic_max(acc, out);
}

// Plain amax (max |x|, out_plain, may be null) and post-RHT columnwise amax (max |u|, out_rht) in
// ONE pass over x (bfloat16, M % 16 == 0, K even, x 4-byte aligned). Thread per (16-row group, pair
// of adjacent columns): 16 independent 4-byte loads (a warp reads 128 contiguous bytes of each of
// the 16 rows), two 16-point transforms; grid-stride.
__device__ __forceinline__ void amax_plain_rht(const u32* x, i64 M, i64 K, u32 sign_mask, u32* out_plain,
                                               u32* out_rht) {
    const i64 KW = K / 2;   // words per row
    const i64 total = (M / 16) * KW;
    const i64 stride = (i64)gridDim.x * AM_THREADS;
    u32 acc = 0, acc_plain = 0;
    for (i64 t = (i64)blockIdx.x * AM_THREADS + threadIdx.x; t < total; t += stride) {
        const i64 g = div_fast(t, KW), w = t - g * KW;
        const u32* src = x + g * 16 * KW + w;
        u32 raw[16];
#pragma unroll
        for (int i = 0; i < 16; ++i) raw[i] = __ldcs(src + i * KW);
        plain_rht_pair(raw, sign_mask, acc_plain, acc);
    }
    block_atomic_max(acc, out_rht);
    if (out_plain != nullptr) {
        __syncthreads();   // block_atomic_max's shared buffer is reused
        block_atomic_max(acc_plain, out_plain);
    }
}

}  // namespace fp4kit

using namespace fp4kit;

// amax_rows_cols_d<D>: no minimum of CTAs per SM (55-62 registers from 16-bit input: 4 per SM);
// FP4KIT_ARC_MINB > 0: that minimum (A/B probes).
#ifndef FP4KIT_ARC_MINB
#define FP4KIT_ARC_MINB 0
#endif
#if FP4KIT_ARC_MINB > 0
#define FP4KIT_ARC_LB __launch_bounds__(ARC_THREADS, FP4KIT_ARC_MINB)
#else
#define FP4KIT_ARC_LB __launch_bounds__(ARC_THREADS)
#endif

#define FP4KIT_AMAX_KERNELS(D)                                                                          \
    extern "C" __global__ void __launch_bounds__(AM_THREADS)                                           \
    amax_global_d##D(const void* x, i64 n, int vec_ok, u32* out) {                                   \
        FP4KIT_GRID_DEP();                                                                              \
        amax_global<D>(x, n, vec_ok, out);                                                              \
    }                                                                                                   \
    extern "C" __global__ void FP4KIT_ARC_LB                                                           \
    amax_rows_cols_d##D(const void* x, i64 M, i64 K, u32* out_rows, u32* out_cols) {                   \
        FP4KIT_GRID_DEP();                                                                              \
        amax_rows_cols_vec<D, false>(x, M, K, out_rows, out_cols, nullptr, 0, nullptr);                 \
    }

FP4KIT_AMAX_KERNELS(0)
FP4KIT_AMAX_KERNELS(1)
FP4KIT_AMAX_KERNELS(2)

extern "C" __global__ void __launch_bounds__(AM_THREADS)
amax_rht_bf16(const u16* x, i64 M, i64 K, u32 sign_mask, u32* out) {
    FP4KIT_GRID_DEP();
    amax_rht(x, M, K, sign_mask, out);
}

extern "C" __global__ void __launch_bounds__(AM_THREADS, 4)   // grid: 4 CTAs per SM, one wave
amax_plain_rht_bf16(const u32* x, i64 M, i64 K, u32 sign_mask, u32* out_plain, u32* out_rht) {
    FP4KIT_GRID_DEP();
    amax_plain_rht(x, M, K, sign_mask, out_plain, out_rht);
}

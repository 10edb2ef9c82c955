// fp4kit: operand dequantizer shared by dequantize.cu and grouped.cu (moved out of dequantize.cu so grouped.cu can reuse it).
#pragma once
#include "common/codecs.cuh"
#include "common/layout.cuh"
#include "common/io.cuh"

namespace fp4kit {

constexpr int DQ_THREADS = 256;

template <int OT>
__device__ __forceinline__ void store_out(void* outv, i64 idx, const float* y, int n) {
    if constexpr (OT == DTYPE_FLOAT32) {
        float* out = reinterpret_cast<float*>(outv) + idx;
        if (n == 16 && aligned16(out)) {
#pragma unroll
            for (int q = 0; q < 4; ++q)
                reinterpret_cast<uint4*>(out)[q] = make_uint4(f2u(y[4 * q]), f2u(y[4 * q + 1]), f2u(y[4 * q + 2]), f2u(y[4 * q + 3]));
        } else {
#pragma unroll
            for (int i = 0; i < 16; ++i)
                if (i < n) out[i] = y[i];
        }
    } else {
        u16* out = reinterpret_cast<u16*>(outv) + idx;
        u16 h[16];
#pragma unroll
        for (int i = 0; i < 16; ++i) h[i] = (OT == DTYPE_BFLOAT16) ? f32_to_bf16_bits(y[i]) : f32_to_f16_bits(y[i]);
        if (n == 16 && aligned16(out)) {
#pragma unroll
            for (int q = 0; q < 2; ++q) {
                u32 w[4];
#pragma unroll
                for (int j = 0; j < 4; ++j) w[j] = (u32)h[8 * q + 2 * j] | ((u32)h[8 * q + 2 * j + 1] << 16);
                reinterpret_cast<uint4*>(out)[q] = make_uint4(w[0], w[1], w[2], w[3]);
            }
        } else {
#pragma unroll
            for (int i = 0; i < 16; ++i)
                if (i < n) out[i] = h[i];
        }
    }
}

// Dequantize segment t (16 consecutive elements of one row) of a (rows, cols) operand.
template <int FMT, int OT>
__device__ __forceinline__ void dequantize_seg(const u8* data, const u8* scales, const float* amax, i64 rows,
                                               i64 cols, int swizzled, int row_scaled, void* out, i64 t) {
    typedef Fmt<FMT> F;
    typedef typename F::E E;
    const i64 nseg = (cols + 15) / 16;
    const i64 nb = (cols + F::block - 1) / F::block;
    const i64 r = div_fast(t, nseg);
    const i64 c0 = (t - r * nseg) * 16;
    const int n = (int)((cols - c0) < 16 ? (cols - c0) : 16);
    u32 w[4] = {0u, 0u, 0u, 0u};
    const u8* src = F::packed ? data + r * (cols / 2) + c0 / 2 : data + r * cols + c0;
    const int nbytes = F::packed ? n / 2 : n;
    if (F::packed && nbytes == 8 && aligned8(src)) {
        const uint2 q = *reinterpret_cast<const uint2*>(src);
        w[0] = q.x; w[1] = q.y;
    } else if (!F::packed && nbytes == 16 && aligned16(src)) {
        const uint4 q = *reinterpret_cast<const uint4*>(src);
        w[0] = q.x; w[1] = q.y; w[2] = q.z; w[3] = q.w;
    } else {
#pragma unroll
        for (int b = 0; b < 16; ++b)
            if (b < nbytes) w[b >> 2] |= (u32)src[b] << (8 * (b & 3));
    }
    const u32 sc = scales[scale_offset(r, c0 / F::block, nb, swizzled != 0)];
    float mult;
    if constexpr (F::mx) mult = e8m0_decode(sc);
    else mult = nvfp4_dequant_mult(sc, amax[row_scaled ? r : 0]);
    float y[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) {
        const u32 code = F::packed ? (w[i >> 3] >> (4 * (i & 7))) & 0xFu : (w[i >> 2] >> (8 * (i & 3))) & 0xFFu;
        const float d = decode<E>(code);
        const float v = mul_rn(mult, d);
        y[i] = is_nan(v) ? u2f(0x7FC00000u) : v;   // every NaN output is the canonical quiet NaN
    }
    store_out<OT>(out, r * cols + c0, y, n);
}

template <int FMT, int OT>
__device__ __forceinline__ void dequantize_op(const u8* data, const u8* scales, const float* amax, i64 rows,
                                              i64 cols, int swizzled, int row_scaled, void* out) {
    const i64 total = rows * ((cols + 15) / 16);
    const i64 stride = (i64)gridDim.x * DQ_THREADS;
    for (i64 t = (i64)blockIdx.x * DQ_THREADS + threadIdx.x; t < total; t += stride)
        dequantize_seg<FMT, OT>(data, scales, amax, rows, cols, swizzled, row_scaled, out, t);
}

}  // namespace fp4kit


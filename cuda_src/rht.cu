// fp4kit: the standalone random Hadamard transform (SPEC section 4, `rht`): x (M, K) bfloat16 ->
// u (K, M) bfloat16, the input of NVFP4's columnwise operand. The quantize kernels apply the same
// transform on the fly (fused); this file gives the unfused path: transform, then quantize u
// rowwise, which must give the same bytes (tests/gpu/test_recipes.py).
#include "common/rht.cuh"

using namespace fp4kit;

// One thread per (column k, 16-row segment s); consecutive threads take consecutive columns, so the
// reads of each row are coalesced; each thread writes its 16 outputs (32 bytes) contiguously.
extern "C" __global__ void __launch_bounds__(256)
rht_transform_bf16(const u16* x, i64 M, i64 K, u32 sign_mask, u16* out) {
    FP4KIT_GRID_DEP();
    const i64 nseg = M / 16;
    const i64 total = nseg * K;
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += stride) {
        const i64 s = div_fast(t, K), k = t - s * K;
        float v[16];
#pragma unroll
        for (int i = 0; i < 16; ++i) v[i] = bf16_bits_to_f32(x[(s * 16 + i) * K + k]);
        rht16_inplace(v, sign_mask);
        u32 w[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) w[i] = (u32)f32_to_bf16_bits(v[2 * i]) | ((u32)f32_to_bf16_bits(v[2 * i + 1]) << 16);
        u16* dst = out + k * M + s * 16;
        if ((((u64)dst) & 15) == 0) {
            reinterpret_cast<uint4*>(dst)[0] = make_uint4(w[0], w[1], w[2], w[3]);
            reinterpret_cast<uint4*>(dst)[1] = make_uint4(w[4], w[5], w[6], w[7]);
        } else {
#pragma unroll
            for (int i = 0; i < 8; ++i) { dst[2 * i] = (u16)w[i]; dst[2 * i + 1] = (u16)(w[i] >> 16); }
        }
    }
}

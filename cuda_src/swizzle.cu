// fp4kit: scale layout conversions (SPEC section 6). Thread per byte, grid-stride.
#include "common/types.cuh"
#include "common/layout.cuh"

namespace fp4kit {

// Compact position (i, j) of flat swizzled offset o (Cp = roundup(C, 4)).
__device__ __forceinline__ void swizzled_position(i64 o, i64 Cp, i64& i, i64& j) {
    const i64 blk = o >> 9;
    const int within = (int)(o & 511);
    const i64 bi = div_fast(blk, Cp >> 2), bj = blk - bi * (Cp >> 2);
    i = bi * 128 + ((within >> 2) & 3) * 32 + (within >> 4);
    j = bj * 4 + (within & 3);
}

}  // namespace fp4kit

using namespace fp4kit;

extern "C" __global__ void swizzle_scales(const u8* compact, i64 R, i64 C, u8* out, i64 Rp, i64 Cp) {
    const i64 n = Rp * Cp;
    for (i64 o = (i64)blockIdx.x * blockDim.x + threadIdx.x; o < n; o += (i64)gridDim.x * blockDim.x) {
        i64 i, j;
        swizzled_position(o, Cp, i, j);
        out[o] = (i < R && j < C) ? compact[i * C + j] : (u8)0;
    }
}

extern "C" __global__ void unswizzle_scales(const u8* swizzled, i64 R, i64 C, i64 Cp, u8* out) {
    const i64 n = R * C;
    for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < n; t += (i64)gridDim.x * blockDim.x) {
        const i64 i = div_fast(t, C), j = t - i * C;
        out[t] = swizzled[swizzled_offset(i, j, Cp)];
    }
}

// Writes 0 to every padding byte of a swizzled (Rp, Cp) buffer of a compact (R, C) matrix and
// nothing else (the quantize kernels write the real positions).
extern "C" __global__ void swizzle_zero_padding(u8* out, i64 R, i64 C, i64 Rp, i64 Cp) {
    const i64 n = Rp * Cp;
    for (i64 o = (i64)blockIdx.x * blockDim.x + threadIdx.x; o < n; o += (i64)gridDim.x * blockDim.x) {
        i64 i, j;
        swizzled_position(o, Cp, i, j);
        if (i >= R || j >= C) out[o] = 0;
    }
}

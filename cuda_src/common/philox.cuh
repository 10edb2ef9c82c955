// fp4kit: Philox4x32-10 (Salmon et al. 2011; the Random123 / cuRAND generator), SPEC section 4.
#pragma once
#include "common/types.cuh"

namespace fp4kit {

#define FP4KIT_PHILOX_M0 0xD2511F53u
#define FP4KIT_PHILOX_M1 0xCD9E8D57u
#define FP4KIT_PHILOX_W0 0x9E3779B9u
#define FP4KIT_PHILOX_W1 0xBB67AE85u

__device__ __forceinline__ uint4 philox4x32_10(uint4 c, u32 k0, u32 k1) {
#pragma unroll
    for (int i = 0; i < 10; ++i) {
        const u32 hi0 = __umulhi(FP4KIT_PHILOX_M0, c.x);
        const u32 lo0 = FP4KIT_PHILOX_M0 * c.x;
        const u32 hi1 = __umulhi(FP4KIT_PHILOX_M1, c.z);
        const u32 lo1 = FP4KIT_PHILOX_M1 * c.z;
        c = make_uint4(hi1 ^ c.y ^ k0, lo1, hi0 ^ c.w ^ k1, lo0);
        k0 += FP4KIT_PHILOX_W0;
        k1 += FP4KIT_PHILOX_W1;
    }
    return c;
}

// Draws for the elements of one operand: element e uses word e % 4 of the block counter e / 4.
struct PhiloxStream {
    u32 k0, k1, stream;
    u64 cached_ctr;
    uint4 cached;
    __device__ __forceinline__ PhiloxStream(u64 seed, u32 stream_id)
        : k0((u32)seed), k1((u32)(seed >> 32)), stream(stream_id), cached_ctr(~0ull) {}
    __device__ __forceinline__ u32 draw(u64 e) {
        const u64 ctr = e >> 2;
        if (ctr != cached_ctr) {
            cached = philox4x32_10(make_uint4((u32)ctr, (u32)(ctr >> 32), stream, 0u), k0, k1);
            cached_ctr = ctr;
        }
        const u32 w = (u32)(e & 3u);
        return w == 0 ? cached.x : (w == 1 ? cached.y : (w == 2 ? cached.z : cached.w));
    }
};

}  // namespace fp4kit

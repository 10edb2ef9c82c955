// fp4kit: Philox4x32-10 (Salmon et al. 2011; the Random123 / cuRAND generator), SPEC section 4.
#pragma once
#include "common/types.cuh"

namespace fp4kit {

#define FP4KIT_PHILOX_M0 0xD2511F53u
#define FP4KIT_PHILOX_M1 0xCD9E8D57u
#define FP4KIT_PHILOX_W0 0x9E3779B9u
#define FP4KIT_PHILOX_W1 0xBB67AE85u

// N independent counters through the 10 rounds in lockstep: the round keys (uniform over the
// launch) are formed once per round for all N, and the N chains give the multiplier pipe
// independent work. WIDE: each 32 x 32 -> 64-bit product as one mul.wide.u32 (IMAD.WIDE.U32, both
// halves from one instruction); otherwise __umulhi and a 32-bit multiply, which ptxas mostly emits as
// two instructions (IMAD.HI.U32 and IMAD). The same bits either way (docs/performance.md item 116).
// NEG: the last round's words x and z complemented (~x, ~z: the same three-input XOR with another
// truth table, no extra instruction); y and w as they are.
template <int N, bool WIDE = false, bool NEG = false>
__device__ __forceinline__ void philox4x32_10_n(uint4* c, u32 k0, u32 k1) {   // c[0 .. N)
#pragma unroll
    for (int i = 0; i < 10; ++i) {
#pragma unroll
        for (int j = 0; j < N; ++j) {
            u32 hi0, lo0, hi1, lo1;
            if constexpr (WIDE) {
                u64 p0, p1;
                asm("mul.wide.u32 %0, %1, %2;" : "=l"(p0) : "r"(c[j].x), "r"(FP4KIT_PHILOX_M0));
                asm("mul.wide.u32 %0, %1, %2;" : "=l"(p1) : "r"(c[j].z), "r"(FP4KIT_PHILOX_M1));
                hi0 = (u32)(p0 >> 32), lo0 = (u32)p0;
                hi1 = (u32)(p1 >> 32), lo1 = (u32)p1;
            } else {
                hi0 = __umulhi(FP4KIT_PHILOX_M0, c[j].x);
                lo0 = FP4KIT_PHILOX_M0 * c[j].x;
                hi1 = __umulhi(FP4KIT_PHILOX_M1, c[j].z);
                lo1 = FP4KIT_PHILOX_M1 * c[j].z;
            }
            if (NEG && i == 9)
                c[j] = make_uint4(~(hi1 ^ c[j].y ^ k0), lo1, ~(hi0 ^ c[j].w ^ k1), lo0);
            else
                c[j] = make_uint4(hi1 ^ c[j].y ^ k0, lo1, hi0 ^ c[j].w ^ k1, lo0);
        }
        k0 += FP4KIT_PHILOX_W0;
        k1 += FP4KIT_PHILOX_W1;
    }
}

template <bool WIDE = false, bool NEG = false>
__device__ __forceinline__ uint4 philox4x32_10(uint4 c, u32 k0, u32 k1) {
    uint4 cs[1] = {c};
    philox4x32_10_n<1, WIDE, NEG>(cs, k0, k1);
    return cs[0];
}

// The 16 draws r[i] of elements e0 .. e0+15 of one stream: counters e0/4 .. (e0+15)/4, i.e. four
// Philox calls when e0 % 4 == 0 and five otherwise (not one per element); word selection by a
// compile-time offset, so the draws stay in registers.
template <int OFF, bool FLIP = false>
__device__ __forceinline__ void philox_pick16(const uint4* P, u32* r) {
#pragma unroll
    for (int i = 0; i < 16; ++i) {
        const uint4 c = P[(OFF + i) >> 2];
        const int w = (OFF + i) & 3;
        r[i] = w == 0 ? c.x : (w == 1 ? c.y : (w == 2 ? c.z : c.w));
        if (FLIP) r[i] = ~r[i];
    }
}

// WIDE (the tile kernels and the grouped rows kernels): the products as mul.wide.u32, the four counters
// as two lockstep pairs (four in lockstep took more registers and spilled under NVRTC 13.5); the
// single-tensor rows kernels keep the other form, which measured 2-3 % faster there (item 116).
// WIDE: r[i] is the draw of element e0 + i for odd i and its complement ~draw for even i (the words
// x / z of a counter come complemented from its last round, NEG; an odd e0 % 4 complements all 16
// back into that pattern): codecs.cuh e2m1_sr_magnitude<true> adds (~draw) >> 8 = 2^24 - 1 -
// (draw >> 8) in one instruction where the plain draw takes a shift and a subtraction (item 121;
// the rows kernels' form, measured 3 % slower with it, keeps plain draws).
template <bool WIDE = false>
__device__ __forceinline__ void philox_draws16(u64 seed, u32 stream, u64 e0, u32* r) {
    const u32 k0 = (u32)seed, k1 = (u32)(seed >> 32);
    const u64 c0 = e0 >> 2;
    const int off = (int)(e0 & 3u);
    uint4 P[5];
    {
        uint4 C[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const u64 c = c0 + (u64)j;
            C[j] = make_uint4((u32)c, (u32)(c >> 32), stream, 0u);
        }
        if constexpr (WIDE) {
            philox4x32_10_n<2, true, true>(C, k0, k1);
            philox4x32_10_n<2, true, true>(C + 2, k0, k1);
        } else {
            philox4x32_10_n<4>(C, k0, k1);
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) P[j] = C[j];
    }
    P[4] = make_uint4(0u, 0u, 0u, 0u);
    if (off != 0) {
        const u64 c = c0 + 4u;
        P[4] = philox4x32_10<WIDE, WIDE>(make_uint4((u32)c, (u32)(c >> 32), stream, 0u), k0, k1);
    }
    switch (off) {   // odd offsets: element i's word has the parity of i + 1, so complement all 16
        case 0: philox_pick16<0>(P, r); break;
        case 1: philox_pick16<1, WIDE>(P, r); break;
        case 2: philox_pick16<2>(P, r); break;
        default: philox_pick16<3, WIDE>(P, r); break;
    }
}

}  // namespace fp4kit

// fp4kit: element codecs, E8M0 scale rules and NVFP4 scale math (SPEC sections 2-4).
// One helper per formula; every fp32 operation is an explicit RN operation and the module is
// compiled with -ftz=false -fmad=false -prec-div=true (fp4kit/_loader.py).
#pragma once
#include "common/types.cuh"
#include "common/enums.cuh"

namespace fp4kit {

// A sign-magnitude minifloat element type (mirrors fp4kit.formats.ElementType).
template <int EBITS, int MBITS, int BIAS, u32 MAX_CODE, u32 NAN_CODE, u32 MAX_BITS, bool FP8_E4M3, bool FP8_E5M2>
struct Elem {
    static constexpr int ebits = EBITS;
    static constexpr int mbits = MBITS;
    static constexpr int bias = BIAS;
    static constexpr int emin = 1 - BIAS;                       // exponent of subnormals / min normal
    static constexpr int emax = (int)(MAX_CODE >> MBITS) - BIAS; // exponent of the element max
    static constexpr u32 max_code = MAX_CODE;
    static constexpr u32 nan_code = NAN_CODE;
    static constexpr u32 max_bits = MAX_BITS;                   // fp32 bits of the element max
    static constexpr int sign_shift = EBITS + MBITS;
    static constexpr bool is_e4m3 = FP8_E4M3;
    static constexpr bool is_e5m2 = FP8_E5M2;
};

//                    E  M  bias max   nan   fp32(max)
typedef Elem<4, 3, 7, 0x7E, 0x7F, 0x43E00000u, true, false> E4M3;   // 448
typedef Elem<5, 2, 15, 0x7B, 0x7F, 0x47600000u, false, true> E5M2;  // 57344
typedef Elem<2, 3, 1, 0x1F, 0x1F, 0x40F00000u, false, false> E2M3;  // 7.5
typedef Elem<3, 2, 3, 0x1F, 0x1F, 0x41E00000u, false, false> E3M2;  // 28
typedef Elem<2, 1, 1, 0x7, 0x7, 0x40C00000u, false, false> E2M1;    // 6

// Format traits (mirrors fp4kit.formats.FORMATS). RECIP_BITS = fp32_RN(1 / element_max).
template <int FMT> struct Fmt;
template <> struct Fmt<FORMAT_MXFP8_E4M3> { typedef E4M3 E; static constexpr int block = 32; static constexpr bool mx = true; static constexpr bool packed = false; static constexpr u32 recip_bits = 0x3B124925u; };
template <> struct Fmt<FORMAT_MXFP8_E5M2> { typedef E5M2 E; static constexpr int block = 32; static constexpr bool mx = true; static constexpr bool packed = false; static constexpr u32 recip_bits = 0x37924925u; };
template <> struct Fmt<FORMAT_MXFP6_E2M3> { typedef E2M3 E; static constexpr int block = 32; static constexpr bool mx = true; static constexpr bool packed = false; static constexpr u32 recip_bits = 0x3E088889u; };
template <> struct Fmt<FORMAT_MXFP6_E3M2> { typedef E3M2 E; static constexpr int block = 32; static constexpr bool mx = true; static constexpr bool packed = false; static constexpr u32 recip_bits = 0x3D124925u; };
template <> struct Fmt<FORMAT_MXFP4_E2M1> { typedef E2M1 E; static constexpr int block = 32; static constexpr bool mx = true; static constexpr bool packed = true; static constexpr u32 recip_bits = 0x3E2AAAABu; };
template <> struct Fmt<FORMAT_NVFP4> { typedef E2M1 E; static constexpr int block = 16; static constexpr bool mx = false; static constexpr bool packed = true; static constexpr u32 recip_bits = 0x3E2AAAABu; };

// ---------------------------------------------------------------------------------------------
// Native conversions (docs/design.md, "Native conversions on Blackwell").
// FP4KIT_NATIVE_CVT is 1 on the Blackwell targets whose PTX has cvt.rn.satfinite.{e2m1x2,e2m3x2,
// e3m2x2}.f32 and cvt.rp.satfinite.ue8m0x2.f32 (the arch- and family-specific ones; the loader compiles
// sm_XYa for compute capability >= 10): NVRTC 12.9+/13 defines __CUDA_ARCH_FAMILY_SPECIFIC__ = 1000
// for sm_100a/f, 1030 sm_103a/f, 1100 sm_110a/f, 1200 sm_120a/f, 1210 sm_121a/f; NVRTC 12.8 defines
// none, only __CUDA_ARCH_FEAT_SM{100,101,120}_ALL for sm_{100,101,120}a. Everywhere else (sm_90 =
// Hopper, sm_90a = family 900, plain sm_100, families from 1300 on, unchecked) the software forms
// below are compiled; both give the same bytes (tests/gpu: encode_exhaustive_e*, e8m0_rceil_exhaustive
// over every fp32 input). What the instructions do and why each equals SPEC: docs/design.md.
// FP4KIT_NO_NATIVE_CVT (the loader defines it when FP4KIT_NATIVE_CVT=0 is in the environment)
// forces the software forms everywhere: the way back should a Blackwell part disagree.
#if defined(__CUDA_ARCH__) && !defined(FP4KIT_NO_NATIVE_CVT) && \
    ((defined(__CUDA_ARCH_FAMILY_SPECIFIC__) && __CUDA_ARCH_FAMILY_SPECIFIC__ >= 1000 && \
      __CUDA_ARCH_FAMILY_SPECIFIC__ < 1300) || \
     defined(__CUDA_ARCH_FEAT_SM100_ALL) || defined(__CUDA_ARCH_FEAT_SM101_ALL) || \
     defined(__CUDA_ARCH_FEAT_SM120_ALL))
#define FP4KIT_NATIVE_CVT 1
#else
#define FP4KIT_NATIVE_CVT 0
#endif

#if FP4KIT_NATIVE_CVT
// cvt.rn.satfinite.e2m1x2.f32 d, a, b puts code(a) in d[7:4] and code(b) in d[3:0]: (lo, hi) -> byte
// lo | hi << 4, SPEC section 1's nibble order. RNE with E2M1 subnormals, |y| > 6 and +-inf -> +-6
// (sign kept), NaN of either sign -> +6 (0x7), -0 and negative underflow -> 0x8: SPEC section 2.
__device__ __forceinline__ u32 native_e2m1x2(float lo, float hi) {
    u32 r;
    asm("{ .reg .b8 t; cvt.rn.satfinite.e2m1x2.f32 t, %2, %1; cvt.u32.u8 %0, t; }" : "=r"(r) : "f"(lo), "f"(hi));
    return r;
}

// cvt.rn.satfinite.{e2m3x2,e3m2x2}.f32 d, a, b: code(a) in d[13:8], code(b) in d[5:0], bits 15:14 and
// 7:6 zero -> (lo, hi) to the 16-bit pair lo | hi << 8 with one 6-bit code per byte (SPEC section 1).
// Same rules as E2M1: NaN -> +max (0x1F), saturation keeps the sign, -0 -> 0x20.
template <class E>
__device__ __forceinline__ u32 native_fp6x2(float lo, float hi) {
    static_assert(E::ebits + E::mbits == 5, "FP6 element types only");
    u32 r;
    if constexpr (E::ebits == 2)
        asm("{ .reg .b16 t; cvt.rn.satfinite.e2m3x2.f32 t, %2, %1; cvt.u32.u16 %0, t; }" : "=r"(r) : "f"(lo), "f"(hi));
    else
        asm("{ .reg .b16 t; cvt.rn.satfinite.e3m2x2.f32 t, %2, %1; cvt.u32.u16 %0, t; }" : "=r"(r) : "f"(lo), "f"(hi));
    return r;
}

// cvt.rp.satfinite.ue8m0x2.f32 of (v, +0) -> the E8M0 code of v in bits 7:0 (code(+0) = 0 in bits 15:8):
// round up to a power of two with code 0 = 2^-127 as the smallest value (0 and every v <= 2^-127,
// subnormals included, give 0), finite v > 2^127 and +inf saturate to 254, NaN gives 255. Equals
// SPEC's rceil for every v >= +0 and every NaN, i.e. every v = fp32_RN(amax * R) with amax >= 0.
// (v = -inf would give 254 where the SPEC formula reads 255; a product of amax >= 0 never is.)
__device__ __forceinline__ u32 native_ue8m0_rp(float v) {
    u32 r;
    asm("{ .reg .b16 t; cvt.rp.satfinite.ue8m0x2.f32 t, 0f00000000, %1; cvt.u32.u16 %0, t; }" : "=r"(r) : "f"(v));
    return r;
}
#endif

// ---------------------------------------------------------------------------------------------
// Element encode (SPEC section 2, algorithm of docs/design.md):
//   a = |y|; NaN -> nan_code; a = min(a, max); e = max(floor(log2 a), emin) from the exponent
//   field; n = rint_even(a * 2^(mbits - e)) (exact scaling, one rounding);
//   code = ((e - emin) << mbits) + n; sign bit from signbit(y).
// E2M1 (grid 0 .5 1 1.5 2 3 4 6) in a few instructions, same results as encode<E2M1>'s general form,
// with most of the work on the FMA pipe (the NVFP4 / MXFP4 tile kernels are instruction-bound: ncu on
// the H100, docs/performance.md). For a = |y| (NaN -> +inf via fminf) the magnitude code is
//   bits(min(fp32_RN(a + (M - 2)), fp32_RN(a / 2 + M), M + 3)) - (bits(M) - 4),     M = 2^23
// - g = a + (M - 2): below M the fp32 ulp is 1/2, from M on it is 1. So for a < 2 (g < M) g rounds
//   a to the E2M1 step 1/2 and bits(g) = bits(M) - 4 + rint(2a); for 2 <= a < 4 it rounds a to the
//   step 1 and bits(g) = bits(M) + rint(a) - 2 = bits(M) - 4 + (2 + rint(a)): the E2M1 code with the
//   same offset on both sides of the binade edge, ties to even (the offsets are even);
// - a / 2 + M rounds a to the step 2 of [4, 6]: bits = bits(M) - 4 + (4 + rint(a / 2));
// - M + 3 is code 7 (saturation; NaN and inf reach it because fminf drops NaN).
// Each candidate equals the code in its range and is not below it elsewhere (float order is integer
// order for these positive values), so their minimum is the code: one FADD, one FFMA, two FMNMX.
// Checked against the reference encoder for every fp32 bit pattern (NumPy emulation,
// tests/test_kernel_formulas.py) and by the exhaustive GPU self-test.
__device__ __forceinline__ u32 e2m1_idx_bits(float s) {
    constexpr float M = 8388608.0f;
    const float a = fabsf(s);
    return f2u(fminf(fminf(__fadd_rn(a, M - 2.0f), __fmaf_rn(a, 0.5f, M)), M + 3.0f));
}
constexpr u32 E2M1_IDX_OFFSET = 0x4AFFFFFCu;   // bits(M) - 4

// The same for |s| < 7, s not NaN, without the saturation candidate: there min(g0, g1) <= M + 3 (for
// 6 <= a < 7, g1 = fp32_RN(a / 2 + M) = M + 3 since a / 2 < 3.5, and g0 >= M + 4), so the third
// candidate never wins. One FMNMX less per element (the NVFP4 tile kernels take it for blocks whose
// block amax times the multiplier stays below 6.5 with no NaN element: quantize_tile.cuh).
__device__ __forceinline__ u32 e2m1_idx_bits_below7(float s) {
    constexpr float M = 8388608.0f;
    const float a = fabsf(s);
    return f2u(fminf(__fadd_rn(a, M - 2.0f), __fmaf_rn(a, 0.5f, M)));
}

// acc * 16 + code(y) + E2M1_IDX_OFFSET: y's code appended to a nibble accumulator filled from the
// last element down; after n appends the accumulated offsets are E2M1_IDX_OFFSET * (16^n - 1) / 15
// (mod 2^32), which the caller subtracts once. Multiply-adds only (IMAD, FMA pipe).
// For y whose NaNs have the sign bit clear, e.g. the result of an fp32 multiplication (encode_seg's
// y = fp32_RN(v * mul)): a NaN result of GPU arithmetic is the canonical NaN 0x7FFFFFFF (CUDA
// Programming Guide, floating-point standard), so the sign bit is y's and e2m1_idx_bits maps NaN to
// code 7 by itself. The GPU tests feed NaNs of both signs through the quantize kernels (tests/gpu:
// special inputs) and compare with the reference.
__device__ __forceinline__ u32 e2m1_append_product(u32 acc, float y) {
    const u32 sgn = __umulhi(f2u(y), 2u);   // the sign bit
    return acc * 16u + sgn * 8u + e2m1_idx_bits(y);
}

// prmt.b32 with selector s: result byte n is byte (s >> 4n) & 7 of {b:a}, or, when bit 3 of that
// nibble is set, that byte's bit 7 replicated over all 8 bits (PTX ISA, prmt default mode).
__device__ __forceinline__ u32 prmt(u32 a, u32 b, u32 s) {
    u32 r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(s));
    return r;
}

// The sign bits of y[0..7] in place for eight E2M1 codes (bit 4i + 3 <- sign of y[i]): byte permutes
// with sign replication gather them, 0xFF / 0x00 per byte: the even elements' into A (byte j =
// element 2j, whose sign is bit 3 of byte j of the result), the odd ones' into B (bit 7 of byte j):
// 6 permutes and 2 masks for 8 elements. NaN signs pass through: callers take products (NaN +).
__device__ __forceinline__ u32 e2m1_signs8(const float* y) {
    // selector 0xFB: byte 0 <- sign of byte 3 (a's top byte), byte 1 <- sign of byte 7 (b's top)
    const u32 a = prmt(prmt(f2u(y[0]), f2u(y[2]), 0xFBu), prmt(f2u(y[4]), f2u(y[6]), 0xFBu), 0x5410u);
    const u32 b = prmt(prmt(f2u(y[1]), f2u(y[3]), 0xFBu), prmt(f2u(y[5]), f2u(y[7]), 0xFBu), 0x5410u);
    return (a & 0x08080808u) | (b & 0x80808080u);
}

// The E2M1 codes of y[0..7], code i in bits 4i .. 4i+3, for y whose NaNs have the sign bit clear
// (as e2m1_append_product). Magnitudes: one multiply-add per element (acc * 16 + e2m1_idx_bits,
// offsets subtracted once). Signs: e2m1_signs8 (instead of two more multiply-adds per element).
// BELOW7: every y[i] is below 7 in magnitude and not NaN (e2m1_idx_bits_below7).
template <bool BELOW7 = false>
__device__ __forceinline__ u32 e2m1_pack8_product(const float* y) {
    u32 acc = 0u;
#pragma unroll
    for (int i = 7; i >= 0; --i) acc = acc * 16u + (BELOW7 ? e2m1_idx_bits_below7(y[i]) : e2m1_idx_bits(y[i]));
    acc -= E2M1_IDX_OFFSET * 0x11111111u;
    return acc | e2m1_signs8(y);
}

// ---------------------------------------------------------------------------------------------
// MXFP4 from bfloat16 on packed pairs (two elements per instruction, Hopper's bf16x2 arithmetic).
// With an E8M0 scale, x * s_inv is exact in bf16 wherever fp32_RN(x * s_inv) is a normal fp32 value
// (bf16 has fp32's exponent range, s_inv is a power of two); below 2^-126 both are below 1/4 and give
// code 0 with x's sign. So the fp32 form above runs on bf16x2 words with M = 2^7 (the bf16 ulp is 1/2
// below 128, 1 from 128 on):
//   y = bf16_RN(x * s_inv), a = |y|, code = bits(min(bf16_RN(a + 126), bf16_RN(a / 2 + 128), 131)) - 0x42FC
// (bits(128) - 4 = 0x42FC; 131 = 128 + 3 is code 7 and catches NaN, inf and anything >= 6 as min.bf16x2
// returns the non-NaN operand). Every bf16 x under every scale code is checked against the fp32 form:
// tests/test_kernel_formulas.py (NumPy model of the IEEE bf16 operations) and the selftest kernel
// e2m1_bf16x2_exhaustive on the GPU, which runs these instructions.
// The scale's bf16 bits: s_inv = 2^(127 - E) has no low mantissa bits, so its fp32 bits >> 16 (E = 254:
// 2^-127, the bf16 subnormal 0x0040; bf16 arithmetic keeps subnormals).
// One bf16x2 / f16x2 instruction on 32-bit words (min / max: a NaN half yields the other operand's,
// both NaN the canonical NaN); T is the PTX type (bf16x2 for bf2_*, f16x2 for h2_*).
#define FP4KIT_PAIR_OP2(FN, INSTR)                                                              \
    __device__ __forceinline__ u32 FN(u32 a, u32 b) {                                          \
        u32 d;                                                                                  \
        asm(INSTR " %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));                                  \
        return d;                                                                               \
    }
#define FP4KIT_PAIR_OPS(P, T)                                                                   \
    FP4KIT_PAIR_OP2(P##_mul, "mul.rn." T)                                                       \
    FP4KIT_PAIR_OP2(P##_add, "add.rn." T)                                                       \
    FP4KIT_PAIR_OP2(P##_min, "min." T)                                                          \
    FP4KIT_PAIR_OP2(P##_max, "max." T)                                                          \
    __device__ __forceinline__ u32 P##_fma(u32 a, u32 b, u32 c) {                              \
        u32 d;                                                                                  \
        asm("fma.rn." T " %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));                \
        return d;                                                                               \
    }                                                                                           \
    __device__ __forceinline__ u32 P##_abs(u32 a) {                                            \
        u32 d;                                                                                  \
        asm("abs." T " %0, %1;" : "=r"(d) : "r"(a));                                           \
        return d;                                                                               \
    }
FP4KIT_PAIR_OPS(bf2, "bf16x2")
FP4KIT_PAIR_OPS(h2, "f16x2")
#undef FP4KIT_PAIR_OPS
#undef FP4KIT_PAIR_OP2
__device__ __forceinline__ u32 bf2_scale(float s_inv) { return (f2u(s_inv) >> 16) * 0x00010001u; }

// max |x| over n bf16x2 words, NaN ignored (as seg_amax), as fp32 (exact).
template <int N>
__device__ __forceinline__ float bf2_absmax(const u32* p) {
    u32 acc = 0u;
#pragma unroll
    for (int i = 0; i < N; ++i) acc = bf2_max(acc, bf2_abs(p[i]));   // abs on the FMA pipe (HFMA2 |x|)
    return fmaxf(u2f(acc << 16), u2f(acc & 0xFFFF0000u));
}

// The E2M1 codes of 8 bf16 elements e0..e7 given as q[k] = (e_k low half, e_{k + 4} high half),
// k < 4, under the bf16x2 scale s2: code i in bits 4i .. 4i+3 (SPEC section 1's nibble order).
// Magnitudes: acc = sum over k of 16^k q'[k] with q'[k] = (V_k, V_{k + 4}), V = 0x42FC + code, i.e.
// sum over i of 16^i V_i: the offsets are subtracted once (mod 2^32). Signs: from y (NaN results of
// bf16 arithmetic are the canonical NaN 0x7FFF, sign clear, as SPEC's NaN -> +max asks), bit 15 of
// q'[k] is e_k's, bit 31 e_{k + 4}'s; byte permutes gather e0 e2 e4 e6 (-> bit 3 of bytes 0..3)
// and e1 e3 e5 e7 (bit 7).
__device__ __forceinline__ u32 e2m1_pack8_bf16(const u32* q, u32 s2) {
    u32 acc = 0u, y[4];
#pragma unroll
    for (int k = 3; k >= 0; --k) {
        y[k] = bf2_mul(q[k], s2);
        const u32 a = bf2_abs(y[k]);
        const u32 g = bf2_min(bf2_add(a, 0x42FC42FCu), bf2_fma(a, 0x3F003F00u, 0x43004300u));
        acc = acc * 16u + bf2_min(g, 0x43034303u);
    }
    const u32 ev = prmt(y[0], y[2], 0x7351u), od = prmt(y[1], y[3], 0x7351u);
    return (acc - 0x42FCu * 0x11111111u) + (((ev >> 4) & 0x08080808u) | (od & 0x80808080u));
}

// ---------------------------------------------------------------------------------------------
// MXFP4 from float16 on packed pairs: the same form with float16x2 arithmetic. float16 has 11
// significant bits (ulp 1/2 below 1024, 1 from 1024 on), so with a = |y|, y = f16_RN(x * s_inv):
//   code = bits(min(f16_RN(a + 1022), f16_RN(a / 2 + 1024), 1027)) - 0x63FC
// (bits(1022) = 0x63FC; 1027 is code 7 and catches NaN, inf and anything >= 6; NumPy check over
// every float16 a >= 0 in tests/test_kernel_formulas.py). y is exact wherever the code depends on it
// (below 2^-14 the code is 0 with x's sign, above 65504 it is inf, code 7). s_inv = 2^(127 - E) is a
// float16 from 2^-24 to 2^15 (h2_scales); above 2^15 (blocks of amax below about 2^-12, so every
// |x| < 2^-12) the product is (x * 2^15) * (s_inv * 2^-15), the first factor exact, s_inv * 2^-15
// clamped to 2^15 (an all-zero block's E = 0); below 2^-24 (a block with an inf: E = 254) s_inv is
// taken as 2^-24, which keeps every finite x below 1/4 and inf at inf. The selftest kernel
// e2m1_f16x2_exhaustive checks every float16 under every scale code against the fp32 form.
// max |x| over n float16x2 words, NaN ignored (as seg_amax), as fp32 (exact).
template <int N>
__device__ __forceinline__ float h2_absmax(const u32* p) {
    u32 acc = 0u;
#pragma unroll
    for (int i = 0; i < N; ++i) acc = h2_max(acc, h2_abs(p[i]));
    float lo, hi;
    asm("{ .reg .b16 a, b; mov.b32 {a, b}, %2; cvt.f32.f16 %0, a; cvt.f32.f16 %1, b; }" : "=f"(lo), "=f"(hi) : "r"(acc));
    return fmaxf(lo, hi);
}

// The float16x2 factors of the multiplier s_inv (a power of two or NaN): y = (x * p2) * s2.
__device__ __forceinline__ void h2_scales(float s_inv, u32& s2, u32& p2) {
    const bool big = s_inv > 32768.0f;   // NaN: false (a NaN multiplier, code 7 as the fp32 form)
    float s = big ? fminf(s_inv * (1.0f / 32768.0f), 32768.0f) : s_inv;
    s = s < 0x1p-24f ? 0x1p-24f : s;     // NaN: false
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(s));
    s2 = (u32)h * 0x00010001u;
    p2 = big ? 0x78007800u : 0x3C003C00u;   // 2^15 or 1 in both halves
}

// The E2M1 codes of 8 float16 elements as e2m1_pack8_bf16 (q[k] = (e_k, e_{k + 4})), y = (x * p2) * s2.
// Signs from y (NaN results of float16 arithmetic: the canonical NaN 0x7FFF, sign clear; the
// selftest feeds NaNs of both signs).
__device__ __forceinline__ u32 e2m1_pack8_f16(const u32* q, u32 s2, u32 p2) {
    u32 acc = 0u, y[4];
#pragma unroll
    for (int k = 3; k >= 0; --k) {
        y[k] = h2_mul(h2_mul(q[k], p2), s2);
        const u32 a = h2_abs(y[k]);
        const u32 g = h2_min(h2_add(a, 0x63FC63FCu), h2_fma(a, 0x38003800u, 0x64006400u));
        acc = acc * 16u + h2_min(g, 0x64036403u);
    }
    const u32 ev = prmt(y[0], y[2], 0x7351u), od = prmt(y[1], y[3], 0x7351u);
    return (acc - 0x63FCu * 0x11111111u) + (((ev >> 4) & 0x08080808u) | (od & 0x80808080u));
}

// Any y: NaN of either sign -> +inf first (fminf keeps the number), which encodes as +6 (code 7).
__device__ __forceinline__ u32 e2m1_append(u32 acc, float y) {
    return e2m1_append_product(acc, fminf(y, u2f(FP4KIT_INF_BITS)));
}

__device__ __forceinline__ u32 encode_e2m1_fast(float y) { return e2m1_append(0u, y) - E2M1_IDX_OFFSET; }

template <class E>
__device__ __forceinline__ u32 encode(float y) {
    // Same function as the algorithm above, in integer form (no float->int conversion):
    //  - a < 2^emin (element subnormals, zero, fp32 subnormals): n = rint(a / 2^(emin - mbits))
    //    is one RNE fp32 addition of C = 2^(emin - mbits + 23) (ulp(C) = 2^(emin - mbits)), and
    //    code = bits(a + C) - bits(C) (n = 2^mbits is the smallest normal's code);
    //  - otherwise the fp32 mantissa is rounded to mbits bits (RNE on the bit pattern; a carry
    //    moves into the exponent) and the exponent is rebiased.
    // E2M1 on Blackwell: the native cvt with +0 (code 0) in the high nibble.
#if FP4KIT_NATIVE_CVT
    if constexpr (E::ebits == 2 && E::mbits == 1) return native_e2m1x2(y, 0.0f);
#else
    if constexpr (E::ebits == 2 && E::mbits == 1) return encode_e2m1_fast(y);
#endif
    constexpr u32 min_normal_bits = (u32)(E::emin + 127) << 23;
    constexpr u32 magic_bits = (u32)(E::emin - E::mbits + 23 + 127) << 23;
    constexpr int drop = 23 - E::mbits;
    const u32 b = f2u(y);
    u32 ab = b & 0x7FFFFFFFu;
    if (ab > FP4KIT_INF_BITS) return E::nan_code;
    ab = ab < E::max_bits ? ab : E::max_bits;         // saturation, +inf included
    const u32 sub = f2u(__fadd_rn(u2f(ab), u2f(magic_bits))) - magic_bits;
    const u32 nrm = ((ab + ((1u << (drop - 1)) - 1u) + ((ab >> drop) & 1u)) >> drop) - ((u32)(127 - E::bias) << E::mbits);
    const u32 code = ab < min_normal_bits ? sub : nrm;
    return code | ((b >> 31) << E::sign_shift);
}

// Raw hardware conversion of four fp32 values to FP8 (sm_89+): cvt.rn.satfinite.{e4m3,e5m2}x2.f32,
// bytes little-endian (y0 lowest). NaN inputs give the format's NaN byte with either sign.
template <bool E4M3_>
__device__ __forceinline__ u32 fp8x4_cvt(float y0, float y1, float y2, float y3) {
    u32 lo, hi;
    if constexpr (E4M3_) {
        asm("{ .reg .b16 t; cvt.rn.satfinite.e4m3x2.f32 t, %2, %1; cvt.u32.u16 %0, t; }" : "=r"(lo) : "f"(y0), "f"(y1));
        asm("{ .reg .b16 t; cvt.rn.satfinite.e4m3x2.f32 t, %2, %1; cvt.u32.u16 %0, t; }" : "=r"(hi) : "f"(y2), "f"(y3));
    } else {
        asm("{ .reg .b16 t; cvt.rn.satfinite.e5m2x2.f32 t, %2, %1; cvt.u32.u16 %0, t; }" : "=r"(lo) : "f"(y0), "f"(y1));
        asm("{ .reg .b16 t; cvt.rn.satfinite.e5m2x2.f32 t, %2, %1; cvt.u32.u16 %0, t; }" : "=r"(hi) : "f"(y2), "f"(y3));
    }
    return lo | (hi << 16);
}

// FP6 through the FP8 conversion with the same mantissa width (sm_89+, software FP6 otherwise):
// E2M3 -> E4M3 with k = 6, E3M2 -> E5M2 with k = 12, k = FP8 bias - FP6 bias. For |y| <= the FP6 max
// the value y * 2^-k is exact (or below 2^-120, where both give a zero code) and lies where the FP8
// type's exponent field equals the FP6 one: the FP8 subnormal step is the FP6 step times 2^-k, and
// the FP8 normal exponents emin_fp6 - k .. emax_fp6 - k have biased codes 1 .. 2^ebits_fp6 - 1. So the
// FP8 code of fp32_RN(y * 2^-k) is sign << 7 | FP6 magnitude code, the same RNE rounding. Clamping y
// to [-max, max] first gives saturation with the sign kept and NaN -> +max (fminf(NaN, max) = max),
// SPEC section 2's rules; the sign then moves from bit 7 to bit 5. All on the FMA pipe but the
// clamp and the fix-up (tests/test_kernel_formulas.py emulates it; the GPU self-test checks it for
// every fp32 input).
template <class E>
__device__ __forceinline__ u32 fp6_via_fp8x4(float y0, float y1, float y2, float y3) {
    static_assert(E::ebits + E::mbits == 5, "FP6 element types only");
    static_assert(E::ebits == 2 ? (E4M3::mbits == E::mbits && E4M3::bias - E::bias == 6)
                                : (E5M2::mbits == E::mbits && E5M2::bias - E::bias == 12),
                  "same mantissa width, k = FP8 bias - FP6 bias");
    static_assert(E::max_bits == (E::ebits == 2 ? 0x40F00000u : 0x41E00000u), "mx below is the FP6 max");
    constexpr float mx = E::ebits == 2 ? 7.5f : 28.0f;
    constexpr float down = E::ebits == 2 ? 0.015625f : 0.000244140625f;   // 2^-6, 2^-12
    const float s0 = __fmul_rn(fmaxf(fminf(y0, mx), -mx), down), s1 = __fmul_rn(fmaxf(fminf(y1, mx), -mx), down);
    const float s2 = __fmul_rn(fmaxf(fminf(y2, mx), -mx), down), s3 = __fmul_rn(fmaxf(fminf(y3, mx), -mx), down);
    const u32 w = fp8x4_cvt<E::ebits == 2>(s0, s1, s2, s3);
    return (w & 0x1F1F1F1Fu) | ((w >> 2) & 0x20202020u);
}

// Four codes packed little-endian into one word (one code per byte: FP8 / FP6).
// FP8 on sm_89+: the hardware cvt.rn.satfinite.{e4m3,e5m2}x2.f32 (RNE, subnormals, saturation,
// sign of zero kept), then NaN results (either sign) rewritten to the positive NaN code 0x7F;
// FP6 on Blackwell (FP4KIT_NATIVE_CVT): two native cvt.rn.satfinite.{e2m3,e3m2}x2.f32, no fix-up;
// FP6 on other sm_89+ (Hopper): fp6_via_fp8x4 above.
// tests/gpu checks all of them against encode_reference for every fp32 input.
template <class E>
__device__ __forceinline__ u32 encode4(float y0, float y1, float y2, float y3) {
#if FP4KIT_NATIVE_CVT
    if constexpr (E::ebits + E::mbits == 5) return native_fp6x2<E>(y0, y1) | (native_fp6x2<E>(y2, y3) << 16);
#endif
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 890)
    if constexpr (E::ebits + E::mbits == 5) return fp6_via_fp8x4<E>(y0, y1, y2, y3);
    if constexpr (E::is_e4m3 || E::is_e5m2) {
        const u32 w = fp8x4_cvt<E::is_e4m3>(y0, y1, y2, y3);
        if constexpr (E::is_e4m3) {
            // magnitude 0x7F is the only NaN code (satfinite never gives it to a number): clear the
            // sign bit of those bytes, i.e. 0xFF -> 0x7F, 3 instructions ((b & 0x7F) + 1 <= 0x80: no
            // carry between bytes)
            return w & ~(((w & 0x7F7F7F7Fu) + 0x01010101u) & 0x80808080u);
        } else {
            // bytes with magnitude >= the first NaN/inf magnitude 0x7C -> 0x7F
            const u32 big = ((w & 0x7F7F7F7Fu) + 0x04040404u) & 0x80808080u;
            const u32 m = (big >> 7) * 0xFFu;
            return (w & ~m) | (0x7F7F7F7Fu & m);
        }
    }
#endif
    return encode<E>(y0) | (encode<E>(y1) << 8) | (encode<E>(y2) << 16) | (encode<E>(y3) << 24);
}

// Reference form of encode (docs/design.md), kept for tests of the fast form above.
template <class E>
__device__ __forceinline__ u32 encode_reference(float y) {
    const u32 b = f2u(y);
    u32 ab = b & 0x7FFFFFFFu;
    if (ab > FP4KIT_INF_BITS) return E::nan_code;
    if (ab > E::max_bits) ab = E::max_bits;
    int e = (int)(ab >> 23) - 127;
    if (e < E::emin) e = E::emin;
    const float scaled = mul_rn(u2f(ab), pow2_normal(E::mbits - e));
    const u32 n = __float2uint_rn(scaled);
    const u32 code = ((u32)(e - E::emin) << E::mbits) + n;
    return code | ((b >> 31) << E::sign_shift);
}

// Element decode: exact; FP8 NaN codes -> NaN carrying the code's sign; E5M2 0x7C -> inf.
template <class E>
__device__ __forceinline__ float decode(u32 code) {
    const u32 sign = (code >> E::sign_shift) & 1u;
    const u32 mag = code & ((1u << E::sign_shift) - 1u);
    const u32 ef = mag >> E::mbits;
    const u32 m = mag & ((1u << E::mbits) - 1u);
    u32 bits;
    if (E::is_e4m3 && mag == 0x7Fu) {
        bits = 0x7FC00000u;
    } else if (E::is_e5m2 && ef == 31u) {
        bits = m ? 0x7FC00000u : FP4KIT_INF_BITS;
    } else if (ef == 0u) {
        bits = f2u(mul_rn((float)m, pow2_normal(E::emin - E::mbits)));   // exact
    } else {
        bits = ((ef + (u32)(127 - E::bias)) << 23) | (m << (23 - E::mbits));
    }
    return u2f(bits | (sign << 31));
}

// ---------------------------------------------------------------------------------------------
// E8M0 (SPEC section 3). Code E means 2^(E-127); 255 is NaN; 0 is 2^-127 (0x00400000).
// rceil(v) of v = fp32_RN(amax * R); native cvt.rp.satfinite.ue8m0x2 on Blackwell (same codes for every
// v >= +0 and NaN, the values v takes; see native_ue8m0_rp).
// Two integer forms of the same function for targets without the native cvt: with branches, and
// with selects (fewer instructions). FP4KIT_E8M0_SELECT (0 unless a .cu file defines it before its
// includes) picks the one e8m0_rceil_code uses, and the form of e8m0_inv_scale below: quantize.cu's
// tile kernels take the select forms (H100, kernel time at 8192^2: MXFP4 'both' 103.2 -> 100.4 us,
// MXFP6 'both' 118.0 -> 116.4 us), but in grouped.cu's loop-free tile kernels at 32 registers the
// select rceil made ptxas spill 44 bytes (grouped MXFP8 'both' 770 -> 985 us) and the select
// inverse scale 40 bytes from float16 input, so grouped.cu keeps the branches (except in its
// one-tile kernels, quantize_tile_rc's E8M0_SEL, which no longer spill with them). The GPU self-test
// checks both rceil forms against e8m0_rceil_reference for every input.
#ifndef FP4KIT_E8M0_SELECT
#define FP4KIT_E8M0_SELECT 0
#endif
__device__ __forceinline__ u32 e8m0_rceil_code_branchy(float v) {
    const u32 b = f2u(v);
    if ((b & 0x7FFFFFFFu) > FP4KIT_INF_BITS) return 255u;
    if (b == FP4KIT_INF_BITS) return 254u;
    if ((b & 0x7FFFFFFFu) == 0u) return 0u;
    u32 e = (b >> 23) & 0xFFu;
    const u32 m = b & 0x7FFFFFu;
    if (m > 0u && e != 254u && !(e == 0u && m <= 0x400000u)) e += 1u;
    return e;
}

// The exponent field of |v| rounded up to a power of two is (a + 2^23 - 1) >> 23 (e, or e + 1 when
// the mantissa is not 0; +inf gives 255). Values up to 2^-127 (a <= 0x400000) give 0, the clamp
// makes 255 (+inf, and 2^127 < v < +inf) 254, NaN (a > +inf: 256 before the clamp) gives 255.
// a <= 0x7FFFFFFF, so the sum does not wrap.
__device__ __forceinline__ u32 e8m0_rceil_code_select(float v) {
    const u32 a = f2u(v) & 0x7FFFFFFFu;
    const u32 e = ((a <= 0x400000u ? 0u : a) + 0x7FFFFFu) >> 23;
    return a > FP4KIT_INF_BITS ? 255u : min(e, 254u);
}

// SEL: the select form (the file's FP4KIT_E8M0_SELECT unless a kernel asks otherwise: grouped.cu's
// 1024-thread square kernel takes selects without spilling, its 256-thread tile kernels do not).
template <bool SEL = FP4KIT_E8M0_SELECT>
__device__ __forceinline__ u32 e8m0_rceil_code(float v) {
#if FP4KIT_NATIVE_CVT
    return native_ue8m0_rp(v);
#else
    if constexpr (SEL) return e8m0_rceil_code_select(v);
    else return e8m0_rceil_code_branchy(v);
#endif
}

template <bool SEL = FP4KIT_E8M0_SELECT>
__device__ __forceinline__ u32 e8m0_rceil(float amax, u32 recip_bits) {
    return e8m0_rceil_code<SEL>(mul_rn(amax, u2f(recip_bits)));
}

// The floor rule stays integer code on every target: cvt.rz.satfinite.ue8m0x2 of amax would only give
// exponent_field(amax) (the shift below), still needing the subtraction, the clamp and the +inf -> 254
// case (rz gives 254 for inf, then 254 - emax_elem): no instruction saved, so not used.
__device__ __forceinline__ u32 e8m0_floor(float amax, int emax_elem) {
    const u32 b = f2u(amax) & 0x7FFFFFFFu;
    if (b > FP4KIT_INF_BITS) return 255u;
    if (b == FP4KIT_INF_BITS) return 254u;
    int e = (int)(b >> 23) - emax_elem;
    e = e < 0 ? 0 : (e > 254 ? 254 : e);
    return (u32)e;
}

// 2^(127 - E) built from bits (E = 254 -> 2^-127, subnormal). E = 255 -> NaN.
template <bool SEL = FP4KIT_E8M0_SELECT>
__device__ __forceinline__ float e8m0_inv_scale(u32 E) {
    if constexpr (SEL) {   // selects (see e8m0_rceil_code)
        const u32 hi = E == 255u ? 0x7FC00000u : 0x00400000u;
        return u2f(E >= 254u ? hi : (254u - E) << 23);
    } else {
        if (E == 255u) return u2f(0x7FC00000u);
        if (E == 254u) return u2f(0x00400000u);
        return u2f((254u - E) << 23);
    }
}

// 2^(E - 127) built from bits (E = 0 -> 2^-127, subnormal). E = 255 -> NaN.
__device__ __forceinline__ float e8m0_decode(u32 E) {
    if (E == 255u) return u2f(0x7FC00000u);
    if (E == 0u) return u2f(0x00400000u);
    return u2f(E << 23);
}

// Reference form of rceil (SPEC: clamp(ceil(log2 v) + 127, 0, 254), every v <= 2^-127 -> 0), kept for
// tests of e8m0_rceil_code: the smallest E in [0, 254] with v <= 2^(E-127), found by bisection on exact
// powers of two; 254 when v > 2^127 (+inf included); 255 for NaN.
__device__ __forceinline__ u32 e8m0_rceil_reference(float v) {
    if (is_nan(v)) return 255u;
    u32 lo = 0u, hi = 254u;
    while (lo < hi) {
        const u32 mid = (lo + hi) >> 1;
        if (v <= e8m0_decode(mid)) hi = mid; else lo = mid + 1u;
    }
    return lo;
}

template <int FMT, bool SEL = FP4KIT_E8M0_SELECT>
__device__ __forceinline__ u32 mx_scale_code(float amax, bool floor_rule) {
    typedef Fmt<FMT> F;
    return floor_rule ? e8m0_floor(amax, F::E::emax) : e8m0_rceil<SEL>(amax, F::recip_bits);
}

// ---------------------------------------------------------------------------------------------
// NVFP4 (SPEC section 4).
#define FP4KIT_RECIP6_BITS 0x3E2AAAABu      // fp32_RN(1/6)
#define FP4KIT_RECIP2688_BITS 0x39C30C31u   // fp32_RN(1/2688)

// S_enc = fp32_RN(2688 / A); min(S_enc, FLT_MAX) with NaN -> FLT_MAX; A == 0 or S_enc == 0 -> 1.
__device__ __forceinline__ float nvfp4_s_enc(float A) {
    float s = div_rn(2688.0f, A);
    if (is_nan(s)) s = flt_max();
    else if (s > flt_max()) s = flt_max();
    if (A == 0.0f || s == 0.0f) s = 1.0f;
    return s;
}

// S_enc and S_dec = fp32_RN(1 / S_enc) of amax A.
__device__ __forceinline__ void nvfp4_tensor_scales(float A, float& s_enc, float& s_dec) {
    s_enc = nvfp4_s_enc(A);
    s_dec = div_rn(1.0f, s_enc);
}

// Block scale byte and the element multiplier `enc` from the block amax b.
__device__ __forceinline__ u32 nvfp4_block_scale(float b, float s_enc, float s_dec, float& enc) {
    const float mult = mul_rn(s_enc, u2f(FP4KIT_RECIP6_BITS));
    float t = mul_rn(b, mult);
    if (t > flt_max()) t = flt_max();              // min(., FLT_MAX); NaN stays NaN
    const u32 sf = encode<E4M3>(t);
    if (sf == 0u) {
        enc = flt_max();
    } else {
        float r = div_rn(1.0f, mul_rn(decode<E4M3>(sf), s_dec));
        enc = (r > flt_max()) ? flt_max() : r;
    }
    return sf;
}

// Dequantize multiplier: fp32_RN(fp32_RN(decode(sf) * A) * fp32_RN(1/2688)).
__device__ __forceinline__ float nvfp4_dequant_mult(u32 sf, float A) {
    return mul_rn(mul_rn(decode<E4M3>(sf), A), u2f(FP4KIT_RECIP2688_BITS));
}

// ---------------------------------------------------------------------------------------------
// Stochastic rounding of E2M1 (SPEC section 4): r is the Philox draw of the element.
// Grid 0, .5, 1, 1.5, 2, 3, 4, 6; round up iff float(r >> 8) < F = fp32((a - lo) / (hi - lo) * 2^24),
// a = |y|. F is exact, so with R = r >> 8 (an integer) "R < F" is an integer question. The step is
// 2^j' / 2 with j' = 0 for a < 2, 1 for [2, 4), 2 for [4, 6]; with X = ceil(a * 2^(25 - j')) (an
// integer), code(lo) = floor(X / 2^24) + 2 j' and F = X mod 2^24 where a is on the fine grid of its
// range (a >= 1, exact), or its ceiling (a < 1: "R < F" <=> "R < ceil(F)" for integer R). So
//   code = (X + (2^24 - 1) - R) / 2^24 + 2 j'                         (integer division)
// X + 2^24 - 1 is the low word of fma_ru((double)a, 2^(25 - j'), C), C = 2^52 + 2^24 - 1: the
// product is exact (a power-of-two scaling), the sum stays below 2^53 (ulp 1), so the one rounding
// (upwards) takes the ceiling; the conversion to double is exact. j' comes from a's exponent field e
// (j' = max(e, 127) - 127, as a <= 6 has e <= 129). The scale (not the addend) carries j', so C is
// one constant and the scale's high word one multiply-add (an earlier form scaled by 2^25 and put
// 2^(52 + j') + (2^24 - 1) 2^j' in the addend: an ALU instruction more per element; docs/
// performance.md item 120). a = min(|y|, 6) first: NaN (fminf drops it), inf and everything >= 6
// become 6, code 7 for any draw. FP64 and the conversion run on pipes the
// tile kernels leave idle; the rest is integer arithmetic.
// The magnitude code; y's sign is applied by the caller. For y whose NaNs have the sign bit clear
// (products, see e2m1_append_product) NaN gives 7 with sign 0, as SPEC section 2 asks.
// NEG: r is the complement of the draw, ~draw, so (r >> 8) = 2^24 - 1 - (draw >> 8) and the sum is
// X + 2^25 + (r >> 8) + (127 + j') 2^25 = X + 2^24 - 1 - R + j' 2^25 (mod 2^32) with the addend
// C = 2^52 + 2^25 (one shift-add where the plain draw takes a shift and a subtraction).
template <bool NEG = false>
__device__ __forceinline__ u32 e2m1_sr_magnitude(float y, u32 r) {
    const float a = fminf(fabsf(y), 6.0f);
    const u32 j = max(f2u(a) >> 23, 127u);                                // 127 + j'
    const double sc = __hiloint2double((int)((1023u + 25u + 127u) * 1048576u - j * 1048576u), 0);   // 2^(25 - j')
    if constexpr (NEG) {
        const u32 x = (u32)__double2loint(__fma_ru((double)a, sc, 4503599660924928.0));   // X + 2^25
        return (x + (r >> 8) + (j << 25)) >> 24;
    } else {
        const u32 x = (u32)__double2loint(__fma_ru((double)a, sc, 4503599644147711.0));   // X + 2^24 - 1
        return (x - (r >> 8) + ((j - 127u) << 25)) >> 24;
    }
}

// The stochastically rounded E2M1 codes of y[0..7] (draws r[0..7]; NEG: the complements for even i,
// as philox_draws16<true> gives them), code i in bits 4i .. 4i+3, for y whose NaNs have the sign bit
// clear (encode_seg's products).
template <bool NEG>
__device__ __forceinline__ u32 e2m1_pack8_stochastic(const float* y, const u32* r) {
    u32 acc = 0u;
#pragma unroll
    for (int i = 7; i >= 1; i -= 2) {
        acc = acc * 16u + e2m1_sr_magnitude<false>(y[i], r[i]);
        acc = acc * 16u + e2m1_sr_magnitude<NEG>(y[i - 1], r[i - 1]);
    }
    return acc | e2m1_signs8(y);
}

}  // namespace fp4kit

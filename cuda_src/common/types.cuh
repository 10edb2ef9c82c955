// fp4kit: basic types and exact fp32 helpers (no standard headers: NVRTC).
#pragma once

namespace fp4kit {

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

// Programmatic dependent launch (PTX griddepcontrol, sm_90 and later). The fast paths
// (fp4kit/_torch_exec.py) may launch a plan's second and later kernels with the driver's
// programmatic stream serialization, so that kernel's CTAs can be scheduled before the kernel ahead
// of it has finished. Every kernel starts with FP4KIT_GRID_DEP(), before its first memory access:
// griddepcontrol.wait returns once every kernel this one depends on has completed and its writes
// are visible (at once when the kernel was launched without the attribute), and only after it does
// griddepcontrol.launch_dependents let the kernel that follows be scheduled (so a CTA never waits on
// a kernel two places ahead of it in the stream).
#define FP4KIT_GRID_DEP()                                                                               \
    do {                                                                                                \
        asm volatile("griddepcontrol.wait;" ::: "memory");                                              \
        asm volatile("griddepcontrol.launch_dependents;" ::: "memory");                                 \
    } while (0)

#define FP4KIT_FLT_MAX_BITS 0x7F7FFFFFu
#define FP4KIT_INF_BITS 0x7F800000u

__device__ __forceinline__ u32 f2u(float f) { return __float_as_uint(f); }
__device__ __forceinline__ float u2f(u32 u) { return __uint_as_float(u); }
__device__ __forceinline__ float flt_max() { return __uint_as_float(FP4KIT_FLT_MAX_BITS); }
// a / b for a >= 0, b > 0: one 32-bit division when both fit (a 64-bit division is a subroutine of
// about 70 instructions; tile and element indices almost always fit).
__device__ __forceinline__ i64 div_fast(i64 a, i64 b) {
    return (((unsigned long long)a | (unsigned long long)b) >> 32) == 0 ? (i64)((u32)a / (u32)b) : a / b;
}

// floor(n / d) for 0 <= n < 2^31 from the host's (m, p) of d (fp4kit._plan.div_magic: p = 31 +
// ceil(log2 d), m = ceil(2^p / d) < 2^32): one wide multiply and a shift instead of a division.
__device__ __forceinline__ u32 div_magic(u32 n, u32 m, u32 p) { return (u32)(((u64)n * m) >> p); }

// Largest g in [0, G) with prefix[g] <= t (prefix non-decreasing, prefix[0] = 0 <= t < prefix[G]).
__device__ __forceinline__ i64 find_member(const i64* prefix, i64 G, i64 t) {
    i64 lo = 0, hi = G;   // invariant: prefix[lo] <= t < prefix[hi]
    while (hi - lo > 1) {
        const i64 mid = (lo + hi) >> 1;
        if (prefix[mid] <= t) lo = mid; else hi = mid;
    }
    return lo;
}

__device__ __forceinline__ bool is_nan(float f) { return (f2u(f) & 0x7FFFFFFFu) > FP4KIT_INF_BITS; }

// One IEEE binary32 operation, round to nearest even (never contracted into an FMA).
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float div_rn(float a, float b) { return __fdiv_rn(a, b); }

// 2^k as an fp32 value, for -126 <= k <= 127 (normal range only).
__device__ __forceinline__ float pow2_normal(int k) { return u2f((u32)(k + 127) << 23); }

// max(|a|, |b|) ignoring NaN in `v` (acc is never NaN): integer compare of non-negative bits.
__device__ __forceinline__ u32 absmax_bits(u32 acc_bits, float v) {
    u32 b = f2u(v) & 0x7FFFFFFFu;
    return (b <= FP4KIT_INF_BITS && b > acc_bits) ? b : acc_bits;
}

// ---- input / output element conversions (all exact or RNE, subnormals kept) ----
__device__ __forceinline__ float bf16_bits_to_f32(u32 h) { return u2f(h << 16); }

__device__ __forceinline__ float f16_bits_to_f32(u16 h) {
    float f;
    asm("{ .reg .b16 t; mov.b16 t, %1; cvt.f32.f16 %0, t; }" : "=f"(f) : "h"(h));
    return f;
}

// fp32 -> bfloat16 bits, round to nearest even; every NaN becomes the canonical 0x7FC0 (SPEC: reference).
__device__ __forceinline__ u16 f32_to_bf16_bits(float f) {
    u32 b = f2u(f);
    if ((b & 0x7FFFFFFFu) > FP4KIT_INF_BITS) return (u16)0x7FC0u;
    b += 0x7FFFu + ((b >> 16) & 1u);
    return (u16)(b >> 16);
}

// fp32 -> float16 bits, round to nearest even (cvt.rn, no .ftz); NaN keeps its sign, quiet (0x7E00).
__device__ __forceinline__ u16 f32_to_f16_bits(float f) {
    u32 b = f2u(f);
    if ((b & 0x7FFFFFFFu) > FP4KIT_INF_BITS) return (u16)0x7E00u;
    u16 h;
    asm("{ .reg .b16 t; cvt.rn.f16.f32 t, %1; mov.b16 %0, t; }" : "=h"(h) : "f"(f));
    return h;
}

// fp32 value rounded to bfloat16 (RNE) and back to fp32.
__device__ __forceinline__ float round_to_bf16(float f) { return bf16_bits_to_f32(f32_to_bf16_bits(f)); }

}  // namespace fp4kit

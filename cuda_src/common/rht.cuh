// fp4kit: 16-point random Hadamard transform (SPEC section 4, `rht`): float64 exactly as written, or
// float32 where that provably gives the same bits (rht16_f32_exact).
#pragma once
#include "common/types.cuh"

namespace fp4kit {

__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ double sub_rn(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float sub_rn(float a, float b) { return __fsub_rn(a, b); }

// w <- H16 w, the butterfly exactly as SPEC writes it (RN additions and subtractions).
template <class T>
__device__ __forceinline__ void hadamard16(T* w) {
#pragma unroll
    for (int h = 1; h < 16; h <<= 1) {
#pragma unroll
        for (int k = 0; k < 16; ++k) {
            if ((k & h) == 0) {
                const T a = w[k], b = w[k + h];
                w[k] = add_rn(a, b);
                w[k + h] = sub_rn(a, b);
            }
        }
    }
}

// Whether the butterfly in float32 gives exactly SPEC's float64 results for these 16 values. It
// does when no step rounds in either precision: for bfloat16 values (fp32 bit patterns with 16 low
// zero bits), all finite, every value is an integer multiple of q = 2^(Fmin - 134) (Fmin: the
// smallest exponent field among the nonzero values, subnormals counted as 1) and every partial sum
// is at most 16 max|v| < 2^(Fmax - 122), i.e. n q with |n| < 2^(Fmax - Fmin + 12); with
// Fmax - Fmin <= 12 that is below 2^24, exact in float32 (and float64), and Fmax <= 248 keeps the
// sums below 2^126 (no float32 overflow). Both precisions then round 0.25 w once to fp32. Costs
// four integer operations per value, against the float64 path's two conversions (quarter rate on
// Hopper) and float64 additions (half rate).
struct F32Exact {
    u32 mx = 0u, mn = 0xFFFFFFFFu, lo = 0u;   // mn: min of |bits| - 1 (zero -> largest)
    __device__ __forceinline__ void add(u32 b) {
        const u32 a = b & 0x7FFFFFFFu;
        mx = a > mx ? a : mx;
        mn = a - 1u < mn ? a - 1u : mn;
        lo |= b;
    }
    __device__ __forceinline__ bool ok() const {
        if (mx == 0u) return true;                      // all zero
        u32 fmax = mx >> 23, fmin = (mn + 1u) >> 23;
        fmax = fmax > 1u ? fmax : 1u;
        fmin = fmin > 1u ? fmin : 1u;
        return (lo & 0xFFFFu) == 0u && fmax <= 248u && fmax - fmin <= 12u;
    }
};

__device__ __forceinline__ bool rht16_f32_exact(const float* v) {
    F32Exact e;
#pragma unroll
    for (int k = 0; k < 16; ++k) e.add(f2u(v[k]));
    return e.ok();
}

// v: 16 fp32 values (bfloat16 inputs); on return v holds u_j = bf16_RN(fp32_RN(0.25 * w_j)), +0 for
// zero, with w computed in T (float only where rht16_f32_exact).
template <class T>
__device__ __forceinline__ void rht16_apply(float* v, u32 sign_mask) {
    T w[16];
#pragma unroll
    for (int k = 0; k < 16; ++k) {
        const T d = (T)v[k];
        w[k] = ((sign_mask >> k) & 1u) ? -d : d;
    }
    hadamard16(w);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        float f;
        if constexpr (sizeof(T) == 8) f = __double2float_rn(__dmul_rn(0.25, w[j]));
        else f = __fmul_rn(0.25f, w[j]);
        float u = round_to_bf16(f);
        if (u == 0.0f) u = 0.0f;   // +0
        v[j] = u;
    }
}

__device__ __forceinline__ void rht16_inplace(float* v, u32 sign_mask) {
    if (rht16_f32_exact(v)) rht16_apply<float>(v, sign_mask);
    else rht16_apply<double>(v, sign_mask);
}

// max_j |u_j| of rht16_inplace's outputs (NaN u_j ignored) without forming the u_j: u =
// bf16_RN(fp32_RN(0.25 w)) is monotone in w and symmetric, so max |u_j| = bf16_RN(fp32_RN(0.25 *
// max |w_j|)) (fmax drops NaN). Returns the fp32 bits of that value (0 when every w_j is NaN).
// T = float only where the values pass F32Exact (the caller checks).
template <class T>
__device__ __forceinline__ u32 rht16_absmax_bits_in(const float* v, u32 sign_mask) {
    T w[16];
#pragma unroll
    for (int k = 0; k < 16; ++k) w[k] = (T)u2f(f2u(v[k]) ^ ((sign_mask << (31 - k)) & 0x80000000u));
    hadamard16(w);
    T m = (T)0;
#pragma unroll
    for (int j = 0; j < 16; ++j) m = fmax(m, fabs(w[j]));
    if constexpr (sizeof(T) == 8) return f2u(round_to_bf16(__double2float_rn(__dmul_rn(0.25, m))));
    else return f2u(round_to_bf16(__fmul_rn(0.25f, m)));
}

}  // namespace fp4kit

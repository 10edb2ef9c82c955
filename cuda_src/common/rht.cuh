// fp4kit: 16-point random Hadamard transform (SPEC section 4, `rht`), float64 exactly as written.
#pragma once
#include "common/types.cuh"

namespace fp4kit {

// w <- H16 w in float64, the butterfly exactly as SPEC writes it (RN additions and subtractions).
__device__ __forceinline__ void hadamard16_f64(double* w) {
#pragma unroll
    for (int h = 1; h < 16; h <<= 1) {
#pragma unroll
        for (int k = 0; k < 16; ++k) {
            if ((k & h) == 0) {
                const double a = w[k], b = w[k + h];
                w[k] = __dadd_rn(a, b);
                w[k + h] = __dsub_rn(a, b);
            }
        }
    }
}

// v: 16 fp32 values (bfloat16 inputs); on return v holds u_j = bf16_RN(fp32_RN(0.25 * w_j)), +0 for zero
// (NaN: some NaN, payload and sign unspecified; the quantizers ignore both, rht.cu canonicalises).
// The bfloat16 rounding of two values is one cvt.rn.bf16x2.f32 (RNE, subnormals kept: no .ftz), the
// -0 -> +0 rule is applied to both halves of the packed word at once: a half's sign bit survives
// only when its other 15 bits are not all zero (their sum with 0x7FFF carries into bit 15; no carry
// crosses into the other half).
__device__ __forceinline__ void rht16_inplace(float* v, u32 sign_mask) {
    double w[16];
#pragma unroll
    for (int k = 0; k < 16; ++k) {
        const double d = (double)v[k];
        w[k] = ((sign_mask >> k) & 1u) ? -d : d;
    }
    hadamard16_f64(w);
#pragma unroll
    for (int j = 0; j < 16; j += 2) {
        const float lo = __double2float_rn(__dmul_rn(0.25, w[j]));
        const float hi = __double2float_rn(__dmul_rn(0.25, w[j + 1]));
        u32 p;
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(p) : "f"(hi), "f"(lo));
        p &= (((p & 0x7FFF7FFFu) + 0x7FFF7FFFu) & 0x80008000u) | 0x7FFF7FFFu;
        v[j] = u2f(p << 16);
        v[j + 1] = u2f(p & 0xFFFF0000u);
    }
}

// max_j |u_j| of rht16_inplace's outputs (NaN u_j ignored) without forming the u_j: u = bf16_RN(fp32_RN(0.25 w))
// is monotone in w and symmetric, so max |u_j| = bf16_RN(fp32_RN(0.25 * max |w_j|)) (fmax drops NaN).
// Returns the fp32 bits of that value (0 when every w_j is NaN).
__device__ __forceinline__ u32 rht16_absmax_bits(const float* v, u32 sign_mask) {
    double w[16];
#pragma unroll
    for (int k = 0; k < 16; ++k) w[k] = (double)u2f(f2u(v[k]) ^ ((sign_mask << (31 - k)) & 0x80000000u));
    hadamard16_f64(w);
    double m = 0.0;
#pragma unroll
    for (int j = 0; j < 16; ++j) m = fmax(m, fabs(w[j]));
    return f2u(round_to_bf16(__double2float_rn(__dmul_rn(0.25, m))));
}

}  // namespace fp4kit

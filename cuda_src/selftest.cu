// fp4kit: device self-tests of the codecs (used by tests/gpu; not part of any op).
// encode_exhaustive_e<i>: for every fp32 bit pattern in [start, start + count), compares the fast
// encode<E> with encode_reference<E> (docs/design.md algorithm) and counts mismatches; the first
// mismatching input is kept in out[1] (out[0] counts). FP8/FP6 also check encode4<E> (packed,
// hardware cvt for FP8 on sm_89+, FP6 through the FP8 cvt on Hopper) with y and -y in every byte
// position. On Blackwell family targets (FP4KIT_NATIVE_CVT) encode<E2M1> and encode4<E2M3/E3M2>
// are the native cvt forms, so the same kernels check those.
// e8m0_rceil_exhaustive: e8m0_rceil_code(v) (native cvt.rp.satfinite.ue8m0x2 on Blackwell) and both
// integer forms (e8m0_rceil_code_branchy, e8m0_rceil_code_select) against
// e8m0_rceil_reference(v) for every fp32 bit pattern v in [start, start + count); the values the rceil
// rule sees are v = amax * R >= +0 or NaN, i.e. the patterns below 0x80000000 (pass count = 2^31).
#include "common/codecs.cuh"

using namespace fp4kit;

template <class E>
__device__ __forceinline__ void encode_exhaustive(u64 start, u64 count, unsigned long long* out) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    unsigned long long bad = 0;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
        const u32 bits = (u32)(start + i);
        const float y = u2f(bits);
        const float z = u2f(bits ^ 0x80000000u);
        const u32 r = encode_reference<E>(y), rz = encode_reference<E>(z);
        bool ok = encode<E>(y) == r;
        if constexpr (E::ebits + E::mbits >= 5)   // one code per byte: the packed 4-wide form too
            ok = ok && encode4<E>(y, z, z, y) == (r | (rz << 8) | (rz << 16) | (r << 24));
        if (!ok) {
            if (bad == 0) atomicCAS(out + 1, 0ull, (unsigned long long)bits + 1ull);
            ++bad;
        }
    }
    if (bad) atomicAdd(out, bad);
}

#define FP4KIT_SELFTEST(I, E) \
    extern "C" __global__ void encode_exhaustive_e##I(u64 start, u64 count, unsigned long long* out) { \
        encode_exhaustive<E>(start, count, out); \
    }

FP4KIT_SELFTEST(0, E4M3)
FP4KIT_SELFTEST(1, E5M2)
FP4KIT_SELFTEST(2, E2M3)
FP4KIT_SELFTEST(3, E3M2)
FP4KIT_SELFTEST(4, E2M1)

extern "C" __global__ void e8m0_rceil_exhaustive(u64 start, u64 count, unsigned long long* out) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    unsigned long long bad = 0;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
        const u32 bits = (u32)(start + i);
        const float v = u2f(bits);
        const u32 r = e8m0_rceil_reference(v);
        if (e8m0_rceil_code(v) != r || e8m0_rceil_code_branchy(v) != r || e8m0_rceil_code_select(v) != r) {
            if (bad == 0) atomicCAS(out + 1, 0ull, (unsigned long long)bits + 1ull);
            ++bad;
        }
    }
    if (bad) atomicAdd(out, bad);
}

// e2m1_bf16x2_exhaustive / e2m1_f16x2_exhaustive: MXFP4 from bfloat16 / float16 on packed pairs
// (codecs.cuh e2m1_pack8_bf16 with bf2_scale, e2m1_pack8_f16 with h2_scales: the tile kernels' forms
// on Hopper) against encode_reference<E2M1>(fp32_RN(x * s_inv)) for every 16-bit pattern x under
// every scale code E = 0 .. 254, each x in each of the 8 positions of a word; and bf2_absmax /
// h2_absmax against fmaxf(|x|) (NaN ignored). Thread t: E = t / 8192, x = 8 (t % 8192) + (i + rot) %
// 8 for position i. out[0] counts mismatching words, out[1] keeps the first as 1 + (E << 24 | t %
// 8192 << 3 | rot).
template <bool F16>
__device__ __forceinline__ void e2m1_pairs_exhaustive(unsigned long long* out) {
#if !FP4KIT_NATIVE_CVT
    const u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= 8192u * 255u) return;
    const u32 E = t / 8192u, base = (t % 8192u) * 8u;
    const float s_inv = e8m0_inv_scale(E);
    u32 s2, p2 = 0u;
    if constexpr (F16) h2_scales(s_inv, s2, p2);
    else s2 = bf2_scale(s_inv);
    unsigned long long bad = 0;
    for (u32 rot = 0; rot < 8; ++rot) {
        u32 x[8], q[4];
        for (u32 i = 0; i < 8; ++i) x[i] = base + ((i + rot) & 7u);
        for (u32 k = 0; k < 4; ++k) q[k] = x[k] | (x[k + 4] << 16);
        u32 exp = 0;
        float am = 0.0f;
        for (u32 i = 0; i < 8; ++i) {
            const float xf = F16 ? f16_bits_to_f32((u16)x[i]) : bf16_bits_to_f32(x[i]);
            exp |= encode_reference<E2M1>(mul_rn(xf, s_inv)) << (4 * i);
            am = fmaxf(am, fabsf(xf));
        }
        const u32 got = F16 ? e2m1_pack8_f16(q, s2, p2) : e2m1_pack8_bf16(q, s2);
        const float gam = F16 ? h2_absmax<4>(q) : bf2_absmax<4>(q);
        if (got != exp || f2u(gam) != f2u(am)) {
            if (bad == 0) atomicCAS(out + 1, 0ull, 1ull + ((unsigned long long)E << 24 | base | rot));
            ++bad;
        }
    }
    if (bad) atomicAdd(out, bad);
#endif
}
extern "C" __global__ void e2m1_bf16x2_exhaustive(unsigned long long* out) { e2m1_pairs_exhaustive<false>(out); }
extern "C" __global__ void e2m1_f16x2_exhaustive(unsigned long long* out) { e2m1_pairs_exhaustive<true>(out); }

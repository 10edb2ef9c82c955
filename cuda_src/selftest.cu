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

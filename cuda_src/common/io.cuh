// fp4kit: input element types and vectorised global-memory I/O.
#pragma once
#include "common/types.cuh"
#include "common/enums.cuh"

namespace fp4kit {

// Input element: storage type, elements per 16-byte vector and exact conversion to fp32.
template <int DT> struct In;
template <> struct In<DTYPE_FLOAT32> {
    typedef float T;
    static constexpr int vec = 4;
    static __device__ __forceinline__ float cvt(T v) { return v; }
    static __device__ __forceinline__ void unpack(uint4 r, float* o) {
        o[0] = u2f(r.x); o[1] = u2f(r.y); o[2] = u2f(r.z); o[3] = u2f(r.w);
    }
};
template <> struct In<DTYPE_BFLOAT16> {
    typedef u16 T;
    static constexpr int vec = 8;
    static __device__ __forceinline__ float cvt(T v) { return bf16_bits_to_f32(v); }
    static __device__ __forceinline__ void unpack(uint4 r, float* o) {
        const u32 w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            o[2 * i] = u2f(w[i] << 16);
            o[2 * i + 1] = u2f(w[i] & 0xFFFF0000u);
        }
    }
};
template <> struct In<DTYPE_FLOAT16> {
    typedef u16 T;
    static constexpr int vec = 8;
    static __device__ __forceinline__ float cvt(T v) { return f16_bits_to_f32(v); }
    static __device__ __forceinline__ void unpack(uint4 r, float* o) {
        const u32 w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            o[2 * i] = f16_bits_to_f32((u16)(w[i] & 0xFFFFu));
            o[2 * i + 1] = f16_bits_to_f32((u16)(w[i] >> 16));
        }
    }
};

__device__ __forceinline__ bool aligned16(const void* p) { return (((u64)p) & 15u) == 0; }
__device__ __forceinline__ bool aligned8(const void* p) { return (((u64)p) & 7u) == 0; }

// Streaming (read-once) 16-byte load.
__device__ __forceinline__ uint4 load_stream16(const void* p) {
    return __ldcs(reinterpret_cast<const uint4*>(p));
}

// Store `nbytes` (<= full) bytes of the little-endian words w0..w3 at dst; one vector store when
// the whole 16 (or 8) bytes are written and dst is aligned. Words by value: no local memory.
// A misaligned destination (columnwise rows of an odd length, grouped members at any offset) takes
// the widest stores its alignment allows (8, 4 or 2 bytes) rather than single bytes.
__device__ __forceinline__ void store_bytes(u8* dst, u32 w0, u32 w1, u32 w2, u32 w3, int nbytes, int full) {
    const u32 a = (u32)(reinterpret_cast<u64>(dst) & 15u);
    if (nbytes == full && full == 16 && a == 0) {
        *reinterpret_cast<uint4*>(dst) = make_uint4(w0, w1, w2, w3);
    } else if (nbytes == full && (a & 7u) == 0) {
        reinterpret_cast<uint2*>(dst)[0] = make_uint2(w0, w1);
        if (full == 16) reinterpret_cast<uint2*>(dst)[1] = make_uint2(w2, w3);
    } else if (nbytes == full && (a & 3u) == 0) {
        u32* d = reinterpret_cast<u32*>(dst);
        d[0] = w0; d[1] = w1;
        if (full == 16) { d[2] = w2; d[3] = w3; }
    } else if (nbytes == full && (a & 1u) == 0) {
        u16* d = reinterpret_cast<u16*>(dst);
        d[0] = (u16)w0; d[1] = (u16)(w0 >> 16); d[2] = (u16)w1; d[3] = (u16)(w1 >> 16);
        if (full == 16) { d[4] = (u16)w2; d[5] = (u16)(w2 >> 16); d[6] = (u16)w3; d[7] = (u16)(w3 >> 16); }
    } else {
#pragma unroll
        for (int b = 0; b < 16; ++b) {
            const u32 w = b < 4 ? w0 : (b < 8 ? w1 : (b < 12 ? w2 : w3));
            if (b < nbytes) dst[b] = (u8)(w >> (8 * (b & 3)));
        }
    }
}
__device__ __forceinline__ void store_bytes(u8* dst, const u32* w, int nbytes, int full) {
    store_bytes(dst, w[0], w[1], w[2], w[3], nbytes, full);
}

}  // namespace fp4kit

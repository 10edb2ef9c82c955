// fp4kit: operand dequantizer shared by dequantize.cu and grouped.cu.
//
// Work unit: one segment = 16 consecutive elements of one row (one scale). Each thread loads
// DqTune<OT>::segs segments (codes, scale byte, NVFP4 amax) before it converts any of them, so that
// every thread keeps several independent loads in flight (the kernel is otherwise latency-bound).
//
// Conversion: a segment whose outputs cannot be NaN (finite multiplier; no E4M3 NaN code, no E5M2
// inf/NaN code) takes the fast path: exact element decode through the sm_89+ cvt.rn.f16x2.e4m3x2
// (E2M1 and FP6 codes are first mapped to the E4M3 byte of the same value by byte permutes), one
// fp32 RN multiply per element, and the packed RNE conversions cvt.rn.{bf16x2,f16x2}.f32, which
// equal f32_to_bf16_bits / cvt.rn.f16.f32 on every non-NaN value (subnormals kept: the module is
// compiled with -ftz=false); FP6 to 16-bit output skips the fp32 stage (dq_fp6x2 below). Any
// other segment takes the element-by-element path, which writes the canonical quiet NaN (SPEC,
// reference) wherever the product is NaN.
#pragma once
#include "common/codecs.cuh"
#include "common/layout.cuh"
#include "common/io.cuh"

namespace fp4kit {

constexpr int DQ_THREADS = 256;

// Per output dtype: segments each thread loads per step (fp4kit/_cuda.py _DQ_SEGS, the grid size)
// and the resident CTAs per SM asked of ptxas (__launch_bounds__ of dequantize.cu). Measured on an
// H200 (8192^2, rotated inputs, per cent of a copy of the same bytes; 4 segments and 3 CTAs before):
// float32 out, 2 / 3: MXFP8 89.0 -> 96.4, MXFP6 93.4 -> 96.5, NVFP4 94.6 -> 96.8, MXFP4 92.5 -> 94.8
// (4 segments spilled at the 80 registers of 3 CTAs); 16-bit out, 3 / 4: MXFP8 91.5 -> 94.3,
// MXFP6 85.7 -> 89.7, NVFP4 91.8 -> 95.7, MXFP4 87.7 -> 92.2. Also tried: 2 / 4, 3 / 3, 4 / 4,
// 1 / 6, 2 / 2, 1 / 8 (each slower for one dtype or both), 8 segments (67-80 %), __ldg loads and
// plain stores instead of the streaming ones (no faster).
template <int OT> struct DqTune {
    static constexpr int segs = OT == DTYPE_FLOAT32 ? 2 : 3;
    static constexpr int min_ctas = OT == DTYPE_FLOAT32 ? 3 : 4;
};

// The same for grouped.cu's group_dequantize, which also keeps its member's parameters in
// registers: 2 segments for every output dtype (fp4kit/_cuda_grouped.py _GROUP_DQ_SEGS). H200,
// 65536 x 7168 rowwise, G = 8 / 64, bfloat16 out, MXFP8 / NVFP4 per cent of copy: 3 segments at
// 4 CTAs (spilling at 64 registers) 75 / 72 and 73 / 67; 2 at 4: 83 / 75 and 79 / 67; 3 at 3 and
// 2 at 3 in between; float32 out 88 % with each.
template <int OT> struct DqGroupTune {
    static constexpr int segs = 2;
    static constexpr int min_ctas = DqTune<OT>::min_ctas;
};

// Four E4M3 bytes of q (byte i = element i) -> exact fp32 (E4M3 NaN codes give a NaN).
__device__ __forceinline__ void e4m3x4_to_f32(u32 q, float* d) {
    asm("{ .reg .b16 p0, p1, a0, a1, b0, b1; .reg .b32 h0, h1;\n\t"
        "mov.b32 {p0, p1}, %4;\n\t"
        "cvt.rn.f16x2.e4m3x2 h0, p0;\n\t"
        "cvt.rn.f16x2.e4m3x2 h1, p1;\n\t"
        "mov.b32 {a0, a1}, h0;\n\t"
        "mov.b32 {b0, b1}, h1;\n\t"
        "cvt.f32.f16 %0, a0;\n\t"
        "cvt.f32.f16 %1, a1;\n\t"
        "cvt.f32.f16 %2, b0;\n\t"
        "cvt.f32.f16 %3, b1; }"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]) : "r"(q));
}

// Two E4M3 bytes (low 16 bits of q, low byte first) -> exact fp32.
__device__ __forceinline__ void e4m3x2_to_f32(u32 q, float& lo, float& hi) {
    asm("{ .reg .b16 p0, p1, a0, a1; .reg .b32 h0;\n\t"
        "mov.b32 {p0, p1}, %2;\n\t"
        "cvt.rn.f16x2.e4m3x2 h0, p0;\n\t"
        "mov.b32 {a0, a1}, h0;\n\t"
        "cvt.f32.f16 %0, a0;\n\t"
        "cvt.f32.f16 %1, a1; }"
        : "=f"(lo), "=f"(hi) : "r"(q));
}

// Two float16 bit patterns packed in h (low half first) -> exact fp32 (subnormals kept).
__device__ __forceinline__ void f16x2_to_f32(u32 h, float& lo, float& hi) {
    asm("{ .reg .b16 a0, a1; mov.b32 {a0, a1}, %2; cvt.f32.f16 %0, a0; cvt.f32.f16 %1, a1; }"
        : "=f"(lo), "=f"(hi) : "r"(h));
}

// E4M3 bytes of the E2M1 magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 (a byte-permute table).
#define FP4KIT_E2M1_AS_E4M3_LO 0x3C383000u
#define FP4KIT_E2M1_AS_E4M3_HI 0x4C484440u

// Eight E2M1 codes of w (nibble i = element i) -> two words of four E4M3 bytes of the same values.
__device__ __forceinline__ void e2m1x8_to_e4m3(u32 w, u32& q0, u32& q1) {
    const u32 mags = w & 0x77777777u;
    const u32 w4 = w << 4;   // byte msb of w4 = sign of nibbles 0, 2, 4, 6; of w = nibbles 1, 3, 5, 7
    // selector nibble 8|k: the byte is 0xFF when byte k of {w4, w} has its msb set, else 0x00
    const u32 s0 = prmt(w4, w, 0xD9C8u), s1 = prmt(w4, w, 0xFBEAu);
    q0 = prmt(FP4KIT_E2M1_AS_E4M3_LO, FP4KIT_E2M1_AS_E4M3_HI, mags) | (s0 & 0x80808080u);
    q1 = prmt(FP4KIT_E2M1_AS_E4M3_LO, FP4KIT_E2M1_AS_E4M3_HI, mags >> 16) | (s1 & 0x80808080u);
}

// Four FP6 codes (one per byte, bits 5..0; bits 7..6 ignored as decode does) -> four E4M3 bytes of
// the same values (every E2M3 and E3M2 value is an E4M3 value): normals rebias the exponent field
// (E2M3: +6; E3M2: +4 with the 2-bit mantissa moved up one bit), subnormals come from a byte-permute
// table indexed by the mantissa, the sign moves from bit 5 to bit 7.
template <class E>
__device__ __forceinline__ u32 fp6x4_to_e4m3(u32 q) {
    static_assert(E::ebits + E::mbits == 5, "FP6 element types only");
    const u32 sign = (q & 0x20202020u) << 2;
    const u32 mag = q & 0x1F1F1F1Fu;
    u32 normal, m, z, add, tlo, thi;
    if constexpr (E::mbits == 3) {   // E2M3: subnormals m/8 -> 0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875
        normal = mag + 0x30303030u;
        m = q & 0x07070707u; z = q & 0x18181818u; add = 0x78787878u;
        tlo = 0x2C282000u; thi = 0x36343230u;
    } else {                         // E3M2: subnormals m/16 -> 0, 0.0625, 0.125, 0.1875
        normal = (mag << 1) + 0x20202020u;
        m = q & 0x03030303u; z = q & 0x1C1C1C1Cu; add = 0x7C7C7C7Cu;
        tlo = 0x24201800u; thi = 0u;
    }
    const u32 t = m | (m >> 4);                                   // nibbles 0, 1 = m of bytes 0, 1; 4, 5 = bytes 2, 3
    const u32 sub = prmt(prmt(tlo, thi, t), prmt(tlo, thi, t >> 16), 0x5410u);
    const u32 nrm = prmt((z + add) & 0x80808080u, 0u, 0xBA98u);   // 0xFF per byte with a non-zero exponent
    return (normal & nrm) | (sub & ~nrm) | sign;
}

// Loaded state of one segment.
struct DqSeg {
    u32 w[4];   // codes, little-endian (FP4: w[0..1])
    u32 sc;     // scale byte
    float A;    // NVFP4 amax of the segment's row (global or per-row); unused for MX
    i64 o;      // output element index of the segment's first element
    int n;      // elements in the segment (16 except at the end of a row)
};

// Codes of a segment at the end of a row or off an 8/16-byte boundary (out of line: rare).
__device__ __noinline__ uint4 dq_load_bytes(const u8* src, int nbytes) {
    u32 w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
    for (int b = 0; b < 16; ++b)
        if (b < nbytes) w[b >> 2] |= (u32)src[b] << (8 * (b & 3));
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// The segment at column c0 (a multiple of 16) of row rd of `data` (an operand of `cols` columns;
// s.o: rd * cols + c0), its scale and amax those of row rs of `scales` and `amax` (grouped.cu's
// group_dequantize_cols: rd counts the rows of every member, rs those of the segment's member).
template <int FMT>
__device__ __forceinline__ void dq_load_rc(const u8* data, const u8* scales, const float* amax, i64 cols,
                                           int swizzled, int row_scaled, i64 rd, i64 rs, i64 c0, DqSeg& s) {
    typedef Fmt<FMT> F;
    const i64 nb = (cols + F::block - 1) / F::block;
    const int n = (int)((cols - c0) < 16 ? (cols - c0) : 16);
    s.w[0] = s.w[1] = s.w[2] = s.w[3] = 0u;
    const u8* src = F::packed ? data + rd * (cols / 2) + c0 / 2 : data + rd * cols + c0;
    const int nbytes = F::packed ? n / 2 : n;
    if (F::packed && nbytes == 8 && aligned8(src)) {
        const uint2 q = __ldcs(reinterpret_cast<const uint2*>(src));
        s.w[0] = q.x; s.w[1] = q.y;
    } else if (!F::packed && nbytes == 16 && aligned16(src)) {
        const uint4 q = __ldcs(reinterpret_cast<const uint4*>(src));
        s.w[0] = q.x; s.w[1] = q.y; s.w[2] = q.z; s.w[3] = q.w;
    } else {
        const uint4 q = dq_load_bytes(src, nbytes);
        s.w[0] = q.x; s.w[1] = q.y; s.w[2] = q.z; s.w[3] = q.w;
    }
    s.sc = scales[scale_offset(rs, c0 / F::block, nb, swizzled != 0)];
    s.A = F::mx ? 0.0f : u2f(f2u(amax[row_scaled ? rs : 0]) & 0x7FFFFFFFu);   // sign bit ignored, as quantize does
    s.o = rd * cols + c0;
    s.n = n;
}

// Segment t (row-major order, (cols + 15) / 16 per row) of a rows x cols operand.
template <int FMT>
__device__ __forceinline__ void dq_load(const u8* data, const u8* scales, const float* amax, i64 rows, i64 cols,
                                        int swizzled, int row_scaled, i64 t, DqSeg& s) {
    const i64 nseg = (cols + 15) / 16;
    const i64 r = div_fast(t, nseg);
    dq_load_rc<FMT>(data, scales, amax, cols, swizzled, row_scaled, r, r, (t - r * nseg) * 16, s);
}

// Element-by-element path (any input, NaN outputs canonical).
template <int OT>
__device__ __forceinline__ void store_out(void* outv, i64 idx, const float* y, int n) {
    if constexpr (OT == DTYPE_FLOAT32) {
        float* out = reinterpret_cast<float*>(outv) + idx;
        if (n == 16 && aligned16(out)) {
#pragma unroll
            for (int q = 0; q < 4; ++q)
                reinterpret_cast<uint4*>(out)[q] = make_uint4(f2u(y[4 * q]), f2u(y[4 * q + 1]), f2u(y[4 * q + 2]), f2u(y[4 * q + 3]));
        } else {
#pragma unroll
            for (int i = 0; i < 16; ++i)
                if (i < n) out[i] = y[i];
        }
    } else {
        u16* out = reinterpret_cast<u16*>(outv) + idx;
        u16 h[16];
#pragma unroll
        for (int i = 0; i < 16; ++i) h[i] = (OT == DTYPE_BFLOAT16) ? f32_to_bf16_bits(y[i]) : f32_to_f16_bits(y[i]);
        if (n == 16 && aligned16(out)) {
#pragma unroll
            for (int q = 0; q < 2; ++q) {
                u32 w[4];
#pragma unroll
                for (int j = 0; j < 4; ++j) w[j] = (u32)h[8 * q + 2 * j] | ((u32)h[8 * q + 2 * j + 1] << 16);
                reinterpret_cast<uint4*>(out)[q] = make_uint4(w[0], w[1], w[2], w[3]);
            }
        } else {
#pragma unroll
            for (int i = 0; i < 16; ++i)
                if (i < n) out[i] = h[i];
        }
    }
}

// Element-by-element conversion of any segment (NaN outputs canonical, any length and alignment);
// out of line: NaN or inf multipliers and codes, row ends and misaligned outputs are rare.
template <int FMT, int OT>
__device__ __noinline__ void dq_store_general(u32 w0, u32 w1, u32 w2, u32 w3, float mult, i64 o, int n, void* out) {
    typedef Fmt<FMT> F;
    typedef typename F::E E;
    const u32 w[4] = {w0, w1, w2, w3};
    float y[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) {
        const u32 code = F::packed ? (w[i >> 3] >> (4 * (i & 7))) & 0xFu : (w[i >> 2] >> (8 * (i & 3))) & 0xFFu;
        const float v = mul_rn(mult, decode<E>(code));
        y[i] = is_nan(v) ? u2f(0x7FC00000u) : v;   // every NaN output is the canonical quiet NaN
    }
    store_out<OT>(out, o, y, n);
}

// Multiplier of a loaded segment (MX: the E8M0 value; NVFP4: nvfp4_dequant_mult with the scale byte
// decoded by the cvt, a NaN code giving a NaN either way).
template <int FMT>
__device__ __forceinline__ float dq_mult(const DqSeg& s) {
    if constexpr (Fmt<FMT>::mx) {
        return e8m0_decode(s.sc);
    } else {
        float sf, unused;
        e4m3x2_to_f32(s.sc, sf, unused);
        return mul_rn(mul_rn(sf, s.A), u2f(FP4KIT_RECIP2688_BITS));
    }
}

// FP6 to 16-bit output without the fp32 stage (FP4KIT_DQ_FP6_DIRECT 1, the default; 0: the E4M3 /
// fp32 path of every format). A code's magnitude bits placed as the exponent and top mantissa bits of
// a bf16 / f16 pattern read as decode(code) * 2^-K, subnormal codes as subnormal patterns (K = the
// output's bias - the element's: E2M3 126 / 14, E3M2 124 / 12); one product by 2^K (exact) and one
// by the E8M0 multiplier give the same bits as the fp32 product (exact: at most 4 significant bits,
// no lower than 2^-131) rounded once to the output (RNE, subnormals kept: bf16 / f16 products have
// no flush-to-zero without .ftz). f16 only for multipliers 2^-24 .. 2^15 (a normal or subnormal f16).
#ifndef FP4KIT_DQ_FP6_DIRECT
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
#define FP4KIT_DQ_FP6_DIRECT 0   // sm_100a: more spills with it (scripts/kernel_resources.json), not measured
#else
#define FP4KIT_DQ_FP6_DIRECT 1
#endif
#endif
// The 16-bit multiplier pattern, twice, of the E8M0 multiplier `mult` (2^-127 .. 2^127), or 0 when the
// output cannot hold it (f16 outside 2^-24 .. 2^15).
template <int OT>
__device__ __forceinline__ u32 dq_fp6_mult_x2(float mult) {
    if constexpr (OT == DTYPE_BFLOAT16) return bf2_scale(mult);
    else return mult > 32768.0f || mult < 0x1p-24f ? 0u : (u32)f32_to_f16_bits(mult) * 0x00010001u;
}

// Two FP6 codes of `w` (bytes 0, 1 with sel 0x4140; bytes 2, 3 with 0x4342) times the multiplier m2:
// one word of two 16-bit outputs, the first code's in the low half.
template <class E, int OT>
__device__ __forceinline__ u32 dq_fp6x2(u32 w, u32 sel, u32 m2) {
    constexpr bool bf = OT == DTYPE_BFLOAT16;
    constexpr bool e2m3 = E::mbits == 3;
    // bits 4..0 of a code to the output's exponent / mantissa fields: E2M3 EE MMM, E3M2 EEE MM
    constexpr int sh = bf ? (e2m3 ? 4 : 5) : (e2m3 ? 7 : 8);
    constexpr u32 mag = 0x1Fu << sh;
    constexpr u32 k2 = bf ? (e2m3 ? 0x7E807E80u : 0x7D807D80u)    // 2^126, 2^124
                          : (e2m3 ? 0x74007400u : 0x6C006C00u);   // 2^14, 2^12
    const u32 x = prmt(w, 0u, sel);   // the two code bytes, each in the low byte of its half
    const u32 raw = ((x << sh) & (mag | (mag << 16))) | ((x << 10) & 0x80008000u);
    if constexpr (bf) return bf2_mul(bf2_mul(raw, k2), m2);
    else return h2_mul(h2_mul(raw, k2), m2);
}

// Output words per segment: 16 elements of 2 or 4 bytes.
template <int OT> struct DqOut { static constexpr int words = OT == DTYPE_FLOAT32 ? 16 : 8; };

// Fast path: false when the segment's outputs could be NaN (non-finite multiplier, an E4M3 NaN
// code, an E5M2 inf/NaN code) or it is shorter than 16 elements; otherwise the 16 outputs as
// little-endian words p[0 .. DqOut<OT>::words).
template <int FMT, int OT>
__device__ __forceinline__ bool dq_fast_words(const DqSeg& s, float mult, u32* p) {
    typedef Fmt<FMT> F;
    typedef typename F::E E;
    bool fast = (f2u(mult) & 0x7FFFFFFFu) < FP4KIT_INF_BITS && s.n == 16;
    if constexpr (E::is_e4m3) {
        u32 bad = 0u;
#pragma unroll
        for (int j = 0; j < 4; ++j) bad |= ((s.w[j] & 0x7F7F7F7Fu) + 0x01010101u) & 0x80808080u;
        fast = fast && bad == 0u;
    } else if constexpr (E::is_e5m2) {
        u32 bad = 0u;
#pragma unroll
        for (int j = 0; j < 4; ++j) bad |= ((s.w[j] & 0x7C7C7C7Cu) + 0x04040404u) & 0x80808080u;
        fast = fast && bad == 0u;
    }
    if (!fast) return false;
    if constexpr (FP4KIT_DQ_FP6_DIRECT && E::ebits + E::mbits == 5 && OT != DTYPE_FLOAT32) {
        const u32 m2 = dq_fp6_mult_x2<OT>(mult);
        if (OT == DTYPE_BFLOAT16 || m2 != 0u) {
#pragma unroll
            for (int j = 0; j < 8; ++j) p[j] = dq_fp6x2<E, OT>(s.w[j >> 1], (j & 1) ? 0x4342u : 0x4140u, m2);
            return true;
        }
    }
    float d[16];
    if constexpr (E::is_e4m3) {
#pragma unroll
        for (int j = 0; j < 4; ++j) e4m3x4_to_f32(s.w[j], d + 4 * j);
    } else if constexpr (E::is_e5m2) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            f16x2_to_f32(prmt(s.w[j], 0u, 0x1404u), d[4 * j], d[4 * j + 1]);
            f16x2_to_f32(prmt(s.w[j], 0u, 0x3424u), d[4 * j + 2], d[4 * j + 3]);
        }
    } else if constexpr (F::packed) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            u32 q0, q1;
            e2m1x8_to_e4m3(s.w[j], q0, q1);
            e4m3x4_to_f32(q0, d + 8 * j);
            e4m3x4_to_f32(q1, d + 8 * j + 4);
        }
    } else {   // FP6
#pragma unroll
        for (int j = 0; j < 4; ++j) e4m3x4_to_f32(fp6x4_to_e4m3<E>(s.w[j]), d + 4 * j);
    }
    float v[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) v[i] = mul_rn(mult, d[i]);   // never NaN here
    if constexpr (OT == DTYPE_FLOAT32) {
#pragma unroll
        for (int i = 0; i < 16; ++i) p[i] = f2u(v[i]);
    } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            if constexpr (OT == DTYPE_BFLOAT16)
                asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(p[j]) : "f"(v[2 * j + 1]), "f"(v[2 * j]));
            else
                asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(p[j]) : "f"(v[2 * j + 1]), "f"(v[2 * j]));
        }
    }
    return true;
}

// Store one segment from its own thread: the words when `fast` (16-byte stores when aligned),
// else the element path. The output is written once and not read back by the kernel: streaming
// stores (st.global.cs), as in dq_store_ustep.
template <int FMT, int OT>
__device__ __forceinline__ void dq_store_direct(const DqSeg& s, float mult, bool fast, const u32* p, void* out) {
    constexpr int osize = OT == DTYPE_FLOAT32 ? 4 : 2;
    char* dst = reinterpret_cast<char*>(out) + s.o * osize;
    if (fast && (reinterpret_cast<u64>(dst) & 15u) == 0) {
#pragma unroll
        for (int q = 0; q < DqOut<OT>::words / 4; ++q)
            __stcs(reinterpret_cast<uint4*>(dst) + q, make_uint4(p[4 * q], p[4 * q + 1], p[4 * q + 2], p[4 * q + 3]));
    } else {
        dq_store_general<FMT, OT>(s.w[0], s.w[1], s.w[2], s.w[3], mult, s.o, s.n, out);
    }
}

// The staged store of a warp run: every lane fast, lane i's words to dst + NC * i chunks (the 32
// segments one contiguous run of the output). Through shared memory, each 16-byte store
// instruction of the warp writes 512 consecutive bytes (a thread's own 32 or 64 bytes would be 2 or
// 4 stores spread over 1 or 2 KiB). Chunk c of the run sits at slot c ^ ((c >> 3) & (NC - 1)):
// conflict-free for the writes (chunk NC * lane + q) and the reads (chunk 32 q + lane). Streaming
// stores (st.global.cs) for the output: with a grid of one CTA per DQ_THREADS * segs segments (then
// 4 per thread; fp4kit/_cuda.py) they took the kernel from 83-90 % to 93-97 % of a device copy of
// the same bytes (H100, 8192^2 and 16384^2: MXFP8 -> float32 137.1 -> 123.0 us, -> bfloat16
// 77.7 -> 72.7, NVFP4 -> float32 118.5 -> 109.7, MXFP4 -> bfloat16 66.4 -> 61.7; streaming stores
// alone 129.8 / 76.6 / 116.0 / 65.9, the full grid alone 130.1 / 72.9 / 110.2 / 62.4; 2 segments
// per thread at 6 CTAs per SM instead was slower, 140.3 / 83.5 / 129.0 / 69.8).
template <int OT>
__device__ __forceinline__ void dq_store_run(const u32* p, uint4* dst, uint4* st) {
    constexpr int NC = DqOut<OT>::words / 4;   // 16-byte chunks per segment
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int q = 0; q < NC; ++q) {
        const int c = NC * lane + q;
        st[c ^ ((c >> 3) & (NC - 1))] = make_uint4(p[4 * q], p[4 * q + 1], p[4 * q + 2], p[4 * q + 3]);
    }
    __syncwarp();
#pragma unroll
    for (int q = 0; q < NC; ++q) {
        const int c = 32 * q + lane;
        __stcs(dst + c, st[c ^ ((c >> 3) & (NC - 1))]);
    }
    __syncwarp();
}

// One step's stores of a warp's 32 segments t0 .. t0 + 31 of one operand: staged (dq_store_run)
// when `runs` (cols % 16 == 0: the 32 outputs follow each other) and all 32 take the fast path,
// else each valid lane stores its own.
template <int FMT, int OT>
__device__ __forceinline__ void dq_store_ustep(const DqSeg& s, i64 t0, i64 total, bool runs, uint4* st, void* out) {
    constexpr int osize = OT == DTYPE_FLOAT32 ? 4 : 2;
    const int lane = threadIdx.x & 31;
    const bool valid = t0 + lane < total;
    float mult = 0.0f;
    u32 p[DqOut<OT>::words];
    bool fast = false;
    if (valid) {
        mult = dq_mult<FMT>(s);
        fast = dq_fast_words<FMT, OT>(s, mult, p);
    }
    if (runs && __all_sync(0xFFFFFFFFu, fast)) {
        dq_store_run<OT>(p, reinterpret_cast<uint4*>(reinterpret_cast<char*>(out) + t0 * 16 * osize), st);
    } else if (valid) {
        dq_store_direct<FMT, OT>(s, mult, fast, p, out);
    }
}

// dq_store_ustep for segments whose outputs need not follow each other (grouped operands: a warp's
// 32 segments may span members, or rows of a member whose cols % 16 != 0): lane i's segment goes to
// element s.o of `out` (s.o: the index in the whole output buffer, not in the segment's member).
// The run is staged when every lane is valid and fast and the 32 destinations are one contiguous,
// 16-byte aligned run; otherwise each lane stores its own.
template <int FMT, int OT>
__device__ __forceinline__ void dq_store_warp(const DqSeg& s, bool valid, char* out, uint4* st) {
    constexpr int osize = OT == DTYPE_FLOAT32 ? 4 : 2;
    const int lane = threadIdx.x & 31;
    float mult = 0.0f;
    u32 p[DqOut<OT>::words];
    bool fast = false;
    u64 dst = 0;
    if (valid) {
        mult = dq_mult<FMT>(s);
        fast = dq_fast_words<FMT, OT>(s, mult, p);
        dst = reinterpret_cast<u64>(out) + (u64)s.o * osize;
    }
    const u64 dst0 = __shfl_sync(0xFFFFFFFFu, dst, 0);
    const bool run = fast && (dst0 & 15u) == 0 && dst == dst0 + (u64)lane * (16 * osize);
    if (__all_sync(0xFFFFFFFFu, run)) {
        dq_store_run<OT>(p, reinterpret_cast<uint4*>(dst0), st);
    } else if (valid) {
        dq_store_direct<FMT, OT>(s, mult, fast, p, out);
    }
}

// Segments [0, total) in order. Each warp takes 32 consecutive segments per step k (k < SEGS,
// DQ_THREADS segments apart), loads all of them (load(t, s): segment t into s), then converts and
// stores them (dq_store_ustep; `runs`: the outputs of consecutive segments follow each other, cols %
// 16 == 0, and `out` is 16-byte aligned). dequantize_op, and grouped.cu's group_dequantize_cols
// (global rows, a member's scales and amax per segment).
template <int FMT, int OT, int SEGS, class Load>
__device__ __forceinline__ void dq_rows_loop(i64 total, bool runs, uint4* st, void* out, Load&& load) {
    const int lane = threadIdx.x & 31;
    const i64 per_cta = (i64)DQ_THREADS * SEGS;
    const i64 step = (i64)gridDim.x * per_cta;
    for (i64 wbase = (i64)blockIdx.x * per_cta + (threadIdx.x - lane); wbase < total; wbase += step) {
        DqSeg s[SEGS];
#pragma unroll
        for (int k = 0; k < SEGS; ++k) {
            const i64 t = wbase + lane + (i64)k * DQ_THREADS;
            if (t < total) load(t, s[k]);
        }
#pragma unroll
        for (int k = 0; k < SEGS; ++k) {
            const i64 t0 = wbase + (i64)k * DQ_THREADS;   // the warp's first segment of this step
            if (t0 >= total) break;                       // warp-uniform
            dq_store_ustep<FMT, OT>(s[k], t0, total, runs, st, out);
        }
    }
}

// Whole operand: dq_rows_loop with DqTune<OT>::segs segments per thread and step.
template <int FMT, int OT>
__device__ __forceinline__ void dequantize_op(const u8* data, const u8* scales, const float* amax, i64 rows,
                                              i64 cols, int swizzled, int row_scaled, void* out) {
    constexpr int NC = DqOut<OT>::words / 4;
    __shared__ uint4 stage[DQ_THREADS / 32][32 * NC];
    const i64 total = rows * ((cols + 15) / 16);
    const bool runs = (cols & 15) == 0 && (reinterpret_cast<u64>(out) & 15u) == 0;
    dq_rows_loop<FMT, OT, DqTune<OT>::segs>(total, runs, stage[threadIdx.x >> 5], out, [&](i64 t, DqSeg& s) {
        dq_load<FMT>(data, scales, amax, rows, cols, swizzled, row_scaled, t, s);
    });
}

}  // namespace fp4kit

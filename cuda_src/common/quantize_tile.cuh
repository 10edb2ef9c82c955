// fp4kit: 64x64 tile quantizer shared by quantize.cu and grouped.cu (moved out of quantize.cu so grouped.cu can reuse it).
#pragma once
#include "common/codecs.cuh"
#include "common/layout.cuh"
#include "common/philox.cuh"
#include "common/io.cuh"
#include "common/rht.cuh"

namespace fp4kit {

constexpr int QT_M = 64;
constexpr int QT_K = 64;
constexpr int QT_THREADS = 256;
constexpr int QT_PITCH = QT_K + 1;
constexpr int SEG = 16;

template <int DT>
__device__ __forceinline__ void load_tile(const void* xv, i64 M, i64 K, i64 m0, i64 k0, bool vec_ok,
                                          float (*tile)[QT_PITCH]) {
    typedef typename In<DT>::T T;
    constexpr int V = In<DT>::vec;
    constexpr int CPR = QT_K / V;   // vectors per tile row
    const T* x = reinterpret_cast<const T*>(xv);
#pragma unroll 2
    for (int c = threadIdx.x; c < QT_M * CPR; c += QT_THREADS) {
        const int r = c / CPR;
        const int cc = (c % CPR) * V;
        const i64 gm = m0 + r;
        const i64 gk = k0 + cc;
        float v[V];
        if (vec_ok && gm < M && gk + V <= K) {
            In<DT>::unpack(load_stream16(x + gm * K + gk), v);
        } else {
#pragma unroll
            for (int i = 0; i < V; ++i) v[i] = (gm < M && gk + i < K) ? In<DT>::cvt(x[gm * K + gk + i]) : 0.0f;
        }
#pragma unroll
        for (int i = 0; i < V; ++i) tile[r][cc + i] = v[i];
    }
}

// The 16 elements x[gm, gk .. gk+15] as fp32 (0 past the end of the row or of the tensor).
template <int DT>
__device__ __forceinline__ void load_seg(const void* xv, i64 M, i64 K, i64 gm, i64 gk, bool vec_ok, float* v) {
    typedef typename In<DT>::T T;
    constexpr int V = In<DT>::vec;
    const T* x = reinterpret_cast<const T*>(xv) + gm * K + gk;
    uint4 raw[SEG / V];
    const bool full = vec_ok && gm < M && gk + SEG <= K;
    if (full) {
#pragma unroll
        for (int j = 0; j < SEG / V; ++j) raw[j] = load_stream16(x + j * V);
#pragma unroll
        for (int j = 0; j < SEG / V; ++j) In<DT>::unpack(raw[j], v + j * V);
    } else {
#pragma unroll
        for (int i = 0; i < SEG; ++i) v[i] = (gm < M && gk + i < K) ? In<DT>::cvt(x[i]) : 0.0f;
    }
}

__device__ __forceinline__ float seg_amax(const float* v) {
    float acc = 0.0f;   // max.f32 returns the non-NaN operand: NaN is ignored
#pragma unroll
    for (int i = 0; i < SEG; ++i) acc = fmaxf(acc, fabsf(v[i]));
    return acc;
}

// The block amax for the NVFP4 plain tile kernels, with `below7` telling whether the segment may take
// the E2M1 encode without its saturation candidate (e2m1_idx_bits_below7): the max of |v| with NaN
// propagated (max.NaN.f32, same instruction count); a NaN segment (rare) recomputes the NaN-ignoring
// amax and takes the full encode. The caller still has to check amax * mul < 6.5 (below7_ok).
__device__ __forceinline__ float seg_amax_nan_aware(const float* v, bool& below7) {
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < SEG; ++i) asm("max.NaN.f32 %0, %0, %1;" : "+f"(acc) : "f"(fabsf(v[i])));
    below7 = !is_nan(acc);
    return below7 ? acc : seg_amax(v);
}

// Every element of a segment with block amax b (NaN ignored) encodes below 7 with multiplier mul:
// |x| <= b gives |fp32_RN(x * mul)| <= fp32_RN(b * mul) (rounding is monotone) < 6.5. An inf element
// makes b inf and the product inf or NaN, so false.
__device__ __forceinline__ bool below7_ok(float b, float mul) { return mul_rn(b, mul) < 6.5f; }

// MXFP4 from bfloat16 / float16 on packed pairs (codecs.cuh e2m1_pack8_bf16 / e2m1_pack8_f16): a
// 16-element segment e0..e15 as q[4 g + k] = (e_{8g+k}, e_{8g+k+4}), g < 2, k < 4, in place of its
// fp32 values. Where the tile kernels take it: PackedE2M1 below.
struct Bf16Seg {
    u32 q[8];
};
struct F16Seg {
    u32 q[8];
};
template <bool C, class A, class B> struct PickType { typedef A T; };
template <class A, class B> struct PickType<false, A, B> { typedef B T; };
template <int FMT, int DT, bool EXT>
struct PackedE2M1 {
    static constexpr bool on = FMT == FORMAT_MXFP4_E2M1 && (DT == DTYPE_BFLOAT16 || DT == DTYPE_FLOAT16) && !EXT &&
                               !FP4KIT_NATIVE_CVT;
    typedef typename PickType<DT == DTYPE_FLOAT16, F16Seg, Bf16Seg>::T Seg;
};

__device__ __forceinline__ float seg_amax(const Bf16Seg& v) { return bf2_absmax<8>(v.q); }
__device__ __forceinline__ float seg_amax(const F16Seg& v) { return h2_absmax<8>(v.q); }

// From the segment's raw input words (natural pairs (e_2j, e_2j+1)): two byte permutes per 4 elements.
template <class S>
__device__ __forceinline__ S pair_seg_rows(const uint4* raw) {
    S v;
#pragma unroll
    for (int g = 0; g < 2; ++g) {
        const u32 n0 = raw[g].x, n1 = raw[g].y, n2 = raw[g].z, n3 = raw[g].w;
        v.q[4 * g] = prmt(n0, n2, 0x5410u);       // (e0, e4)
        v.q[4 * g + 1] = prmt(n0, n2, 0x7632u);   // (e1, e5)
        v.q[4 * g + 2] = prmt(n1, n3, 0x5410u);   // (e2, e6)
        v.q[4 * g + 3] = prmt(n1, n3, 0x7632u);   // (e3, e7)
    }
    return v;
}

// From 16 raw 16-bit elements h[0..15] (a tile column): one pack per pair.
template <class S>
__device__ __forceinline__ S pair_seg_pack(const u32* h) {
    S v;
#pragma unroll
    for (int g = 0; g < 2; ++g)
#pragma unroll
        for (int k = 0; k < 4; ++k) v.q[4 * g + k] = prmt(h[8 * g + k], h[8 * g + k + 4], 0x5410u);
    return v;
}

// ---- NVFP4 block scale with a per-CTA table (same function as nvfp4_block_scale) ----------------
// With one amax for the whole operand, the element multiplier enc depends on the scale code only:
// enc(sf) = min(fp32_RN(1 / fp32_RN(decode(sf) * S_dec)), FLT_MAX), FLT_MAX for sf = 0. A table of
// the 128 codes (0x7F: NaN, as the division gives) replaces one IEEE division per block.
constexpr int NV_TAB = 128;

__device__ __forceinline__ float nvfp4_enc_of(u32 sf, float s_dec) {
    if (sf == 0u) return flt_max();
    const float r = div_rn(1.0f, mul_rn(decode<E4M3>(sf), s_dec));
    return (r > flt_max()) ? flt_max() : r;
}

// Threads [first, first + 128) of the CTA fill tab[0..127] for amax A, and tab[128] with the block
// scale multiplier fp32_RN(S_enc * fp32_RN(1/6)) (the caller adds the barrier).
__device__ __forceinline__ void nvfp4_fill_table(float* tab, float A, int first) {
    const int i = (int)threadIdx.x - first;
    if (i >= 0 && i < NV_TAB) {
        float s_enc, s_dec;
        nvfp4_tensor_scales(A, s_enc, s_dec);
        tab[i] = nvfp4_enc_of((u32)i, s_dec);
        if (i == 0) tab[NV_TAB] = mul_rn(s_enc, u2f(FP4KIT_RECIP6_BITS));
    }
}

// QFLAG_ENC_TABS: the table was computed once for the whole op (quantize.cu nvfp4_enc_tables, the
// same nvfp4_fill_table) and `src` holds its NV_TAB + 1 floats; threads [first, first + 128) copy it
// into tab (the caller adds the barrier). Otherwise they fill tab from the amax *src. The fill's three
// IEEE divisions per entry were 12 % of the NVFP4 'both' tile kernel's instructions (ncu source
// counters, H100, 8192^2: 806 of 6642 warp instructions per CTA).
__device__ __forceinline__ void nvfp4_table(float* tab, const float* src, int first, bool precomputed) {
    if (!precomputed) {
        nvfp4_fill_table(tab, src[0], first);
        return;
    }
    const int i = (int)threadIdx.x - first;
    if (i >= 0 && i < NV_TAB) {
        tab[i] = __ldg(src + i);
        if (i == 0) tab[NV_TAB] = __ldg(src + NV_TAB);
    }
}

// Scale code of block amax b (>= 0 or NaN): encode<E4M3>(min(fp32_RN(b * mult), FLT_MAX)), with
// the hardware cvt.rn.satfinite.e4m3x2 on sm_89+ (checked against encode<E4M3> for every fp32
// input by the selftest module; NaN of either sign -> 0x7F as in encode4).
__device__ __forceinline__ u32 nvfp4_scale_code(float b, float mult) {
    float t = mul_rn(b, mult);
    if (t > flt_max()) t = flt_max();
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 890)
    u32 r;
    asm("{ .reg .b16 h; cvt.rn.satfinite.e4m3x2.f32 h, %2, %1; cvt.u32.u16 %0, h; }" : "=r"(r) : "f"(t), "f"(0.0f));
    r &= 0xFFu;
    return ((r & 0x7Fu) == 0x7Fu) ? 0x7Fu : r;
#else
    return encode<E4M3>(t);
#endif
}

// Quantize one 16-element segment (values v, already in fp32) into packed code words w[0..3].
// e0: linear index of v[0] within its operand (stochastic rounding only).
// below7 (E2M1, nearest): every fp32_RN(v[i] * mul) is below 7 in magnitude and not NaN.
// WIDE: philox_draws16's form (stochastic rounding; false only in quantize_rows_direct).
template <int FMT, bool WIDE = true>
__device__ __forceinline__ void encode_seg(const float* v, float mul, bool stochastic, u64 seed, u32 stream,
                                           i64 e0, u32* w, bool below7 = false) {
    typedef Fmt<FMT> F;
    typedef typename F::E E;
    w[0] = w[1] = w[2] = w[3] = 0u;
#ifdef FP4KIT_MOVE_ONLY   // probe (scripts/move_probe.py): top bits of the inputs, no encode
    if constexpr (!F::packed) {
#pragma unroll
        for (int q = 0; q < 4; ++q)
            w[q] = __byte_perm(__byte_perm(f2u(v[4 * q]), f2u(v[4 * q + 1]), 0x0073u),
                               __byte_perm(f2u(v[4 * q + 2]), f2u(v[4 * q + 3]), 0x0073u), 0x5410u);
    } else {
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            const u32 a = __byte_perm(__byte_perm(f2u(v[8 * q]), f2u(v[8 * q + 1]), 0x0073u),
                                      __byte_perm(f2u(v[8 * q + 2]), f2u(v[8 * q + 3]), 0x0073u), 0x5410u);
            const u32 b = __byte_perm(__byte_perm(f2u(v[8 * q + 4]), f2u(v[8 * q + 5]), 0x0073u),
                                      __byte_perm(f2u(v[8 * q + 6]), f2u(v[8 * q + 7]), 0x0073u), 0x5410u);
            w[q] = (a & 0xF0F0F0F0u) | ((b >> 4) & 0x0F0F0F0Fu);
        }
    }
    w[0] ^= f2u(mul);
    return;
#endif
    u32 codes[SEG];
    bool sr = false;
    if constexpr (E::ebits == 2 && E::mbits == 1) sr = stochastic;
    if (sr) {   // E2M1 only: 8 codes per word
        u32 r[SEG];
        philox_draws16<WIDE>(seed, stream, (u64)e0, r);
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            float y[8];
#pragma unroll
            for (int i = 0; i < 8; ++i) y[i] = mul_rn(v[8 * q + i], mul);
            w[q] = e2m1_pack8_stochastic<WIDE>(y, r + 8 * q);   // WIDE: complemented even draws
        }
        return;
    } else if constexpr (!F::packed) {
#pragma unroll
        for (int q = 0; q < 4; ++q)
            w[q] = encode4<E>(mul_rn(v[4 * q], mul), mul_rn(v[4 * q + 1], mul), mul_rn(v[4 * q + 2], mul),
                              mul_rn(v[4 * q + 3], mul));
        return;
    } else {   // packed: E2M1
#if FP4KIT_NATIVE_CVT
#pragma unroll
        for (int i = 0; i < SEG; ++i) codes[i] = encode<E>(mul_rn(v[i], mul));
#else
        if (below7) {
#pragma unroll
            for (int q = 0; q < 2; ++q) {   // 8 codes per word
                float y[8];
#pragma unroll
                for (int i = 0; i < 8; ++i) y[i] = mul_rn(v[8 * q + i], mul);
                w[q] = e2m1_pack8_product<true>(y);
            }
        } else {
#pragma unroll
            for (int q = 0; q < 2; ++q) {
                float y[8];
#pragma unroll
                for (int i = 0; i < 8; ++i) y[i] = mul_rn(v[8 * q + i], mul);
                w[q] = e2m1_pack8_product(y);
            }
        }
        return;
#endif
    }
    if constexpr (F::packed) {
#pragma unroll
        for (int i = 0; i < SEG; ++i) w[i >> 3] |= codes[i] << (4 * (i & 7));
    } else {
#pragma unroll
        for (int i = 0; i < SEG; ++i) w[i >> 2] |= codes[i] << (8 * (i & 3));
    }
}

#ifdef FP4KIT_MOVE_ONLY
// The probe's stand-in for the packed-pair encodes below: top nibbles of the 16-bit inputs.
__device__ __forceinline__ void move_only_pairs(const u32* q, float mul, u32* w) {
    w[0] = (q[0] & 0xF0F0F0F0u) | ((q[1] >> 4) & 0x0F0F0F0Fu) ^ f2u(mul);
    w[1] = (q[2] & 0xF0F0F0F0u) | ((q[3] >> 4) & 0x0F0F0F0Fu);
    w[2] = w[3] = 0u;
}
#endif

// The packed segment (MXFP4, nearest rounding): codes of e0..e7 in w[0], e8..e15 in w[1].
template <int FMT, bool = true>
__device__ __forceinline__ void encode_seg(const Bf16Seg& v, float mul, bool, u64, u32, i64, u32* w, bool = false) {
    static_assert(FMT == FORMAT_MXFP4_E2M1, "MXFP4 only");
#ifdef FP4KIT_MOVE_ONLY
    return move_only_pairs(v.q, mul, w);
#endif
    const u32 s2 = bf2_scale(mul);
    w[0] = e2m1_pack8_bf16(v.q, s2);
    w[1] = e2m1_pack8_bf16(v.q + 4, s2);
    w[2] = w[3] = 0u;
}
template <int FMT, bool = true>
__device__ __forceinline__ void encode_seg(const F16Seg& v, float mul, bool, u64, u32, i64, u32* w, bool = false) {
    static_assert(FMT == FORMAT_MXFP4_E2M1, "MXFP4 only");
#ifdef FP4KIT_MOVE_ONLY
    return move_only_pairs(v.q, mul, w);
#endif
    u32 s2, p2;
    h2_scales(mul, s2, p2);
    w[0] = e2m1_pack8_f16(v.q, s2, p2);
    w[1] = e2m1_pack8_f16(v.q + 4, s2, p2);
    w[2] = w[3] = 0u;
}

// Scale code and element multiplier of one block with amax `bamax`.
// NVFP4: A is the (global or per-row) amax of the operand.
template <int FMT, bool SEL = FP4KIT_E8M0_SELECT>
__device__ __forceinline__ u32 block_scale(float bamax, bool floor_rule, const float* amax_ptr, i64 amax_idx,
                                           float& mul) {
    if constexpr (Fmt<FMT>::mx) {
        const u32 sc = mx_scale_code<FMT, SEL>(bamax, floor_rule);
        mul = e8m0_inv_scale<SEL>(sc);
        return sc;
    } else {
        float s_enc, s_dec;
        nvfp4_tensor_scales(amax_ptr[amax_idx], s_enc, s_dec);
        return nvfp4_block_scale(bamax, s_enc, s_dec, mul);
    }
}

// Quantize the rowwise segment x[gm, gk .. gk+15] (values v) and store codes and scale.
// Lanes s and s ^ 1 hold the two halves of an MX block (the whole warp must call this).
// tile_amax >= 0 replaces the block amax (NVFP4 2D tiles).
// enc_tab (NVFP4, one amax for the operand): the 128-entry multiplier table, or null.
// r0 (grouped rows of one K): row gm is row gm - r0 of the member whose scales start at row_scales,
// which also numbers its stochastic-rounding counter; codes and per-row amax stay indexed by gm.
// stash: when not null, stash[s / (block / 16)] takes the scale code instead of row_scales.
// KEEP: nothing takes the scale code; it is returned (when gm < M and gk < K; else 0) for the
// caller to store.
template <int FMT, bool TAB = false, bool SEL = FP4KIT_E8M0_SELECT, bool WIDE = true, bool KEEP = false, class SV>
__device__ __forceinline__ u32 row_segment(SV v, i64 M, i64 K, i64 gm, i64 gk, int s, u8* row_data,
                                            u8* row_scales, const float* amax_row, int flags, u64 seed,
                                            float tile_amax, float s_enc, float s_dec, const float* enc_tab = nullptr,
                                            i64 r0 = 0, u8* stash = nullptr) {
    typedef Fmt<FMT> F;
    constexpr bool B7 = !F::mx && TAB;   // NVFP4 plain tile and rows kernels: the below-7 encode where it applies
    bool below7 = false;
    float bamax;
    if constexpr (B7) bamax = seg_amax_nan_aware(v, below7);
    else bamax = seg_amax(v);
    if constexpr (F::block == 32) bamax = fmaxf(bamax, __shfl_xor_sync(0xFFFFFFFFu, bamax, 1));
    if (tile_amax >= 0.0f) bamax = tile_amax;
    u32 sc = 0u;
    if (gm < M && gk < K) {
        float mul;
        if constexpr (F::mx) {
            sc = block_scale<FMT, SEL>(bamax, flags & QFLAG_RULE_FLOOR, amax_row, 0, mul);
        } else {
            if (TAB || (enc_tab != nullptr && !(flags & QFLAG_ROW_SCALED))) {   // TAB: enc_tab is never null
                sc = nvfp4_scale_code(bamax, enc_tab[NV_TAB]);
                mul = enc_tab[sc];
            } else {
                if (flags & QFLAG_ROW_SCALED) nvfp4_tensor_scales(amax_row[gm], s_enc, s_dec);
                sc = nvfp4_block_scale(bamax, s_enc, s_dec, mul);
            }
        }
        u32 w[4];
        if constexpr (B7) below7 = below7 && below7_ok(bamax, mul);
        encode_seg<FMT, WIDE>(v, mul, flags & QFLAG_STOCHASTIC, seed, 0u, (gm - r0) * K + gk, w, below7);
        const int n = (int)((K - gk) < SEG ? (K - gk) : SEG);
        if constexpr (F::packed) store_bytes(row_data + gm * (K / 2) + gk / 2, w, n / 2, SEG / 2);
        else store_bytes(row_data + gm * K + gk, w, n, SEG);
        if (!KEEP && (F::block == 16 || (s & 1) == 0)) {
            if (stash != nullptr) {
                stash[s / (F::block / SEG)] = (u8)sc;
            } else {
                const i64 nb = (K + F::block - 1) / F::block;
                row_scales[scale_offset(gm - r0, gk / F::block, nb, flags & (QFLAG_SWIZZLED | QFLAG_ROW_SCALES_SWZ))] = (u8)sc;
            }
        }
    }
    return sc;
}

// Issue the 16-byte loads of segments x[gm0 + rs j, gk .. gk + 15] (j < R) that lie wholly inside the
// (M, K) matrix when vector loads are allowed (full[j]); the others are read later by seg_values.
template <int DT, int R>
__device__ __forceinline__ void load_rows_raw(const void* x, i64 M, i64 K, i64 gm0, i64 gk, bool vec_ok,
                                              uint4 (&raw)[R][SEG / In<DT>::vec], bool (&full)[R], int rs = QT_M) {
    typedef typename In<DT>::T T;
    constexpr int V = In<DT>::vec;
#pragma unroll
    for (int j = 0; j < R; ++j) {
        const i64 gm = gm0 + j * rs;
        full[j] = vec_ok && gm < M && gk + SEG <= K;
        if (full[j]) {
            const T* src = reinterpret_cast<const T*>(x) + gm * K + gk;
#pragma unroll
            for (int q = 0; q < SEG / V; ++q) raw[j][q] = load_stream16(src + q * V);
        }
    }
}

// Raw input words of the segment x[gm, gk .. gk+15] (SEG / V 16-byte vectors of the input type;
// 0 bits, i.e. +0, past the end of the row or of the tensor).
template <int DT>
__device__ __forceinline__ void load_seg_raw(const void* xv, i64 M, i64 K, i64 gm, i64 gk, bool vec_ok,
                                             uint4* raw) {
    typedef typename In<DT>::T T;
    constexpr int V = In<DT>::vec;
    const T* x = reinterpret_cast<const T*>(xv) + gm * K + gk;
    if (vec_ok && gm < M && gk + SEG <= K) {
#pragma unroll
        for (int j = 0; j < SEG / V; ++j) raw[j] = load_stream16(x + j * V);
    } else {
        u32 w[SEG * sizeof(T) / 4];
#pragma unroll
        for (int i = 0; i < SEG * (int)sizeof(T) / 4; ++i) w[i] = 0u;
#pragma unroll
        for (int i = 0; i < SEG; ++i) {
            if (gm < M && gk + i < K) {
                if constexpr (sizeof(T) == 4) w[i] = f2u(x[i]);
                else w[i >> 1] |= (u32)x[i] << (16 * (i & 1));
            }
        }
#pragma unroll
        for (int j = 0; j < SEG / V; ++j) raw[j] = make_uint4(w[4 * j], w[4 * j + 1], w[4 * j + 2], w[4 * j + 3]);
    }
}

// The segment x[gm, gk ..] as packed pairs (PackedE2M1's Seg): from raw when load_rows_raw loaded
// it, else from its raw words read again (zero past the matrix), as seg_values for fp32 values.
template <int DT, class S>
__device__ __forceinline__ S seg_pairs(const uint4* raw, bool full, const void* x, i64 M, i64 K, i64 gm, i64 gk,
                                       bool vec_ok) {
    if (full) return pair_seg_rows<S>(raw);
    uint4 r1[SEG / In<DT>::vec];
    load_seg_raw<DT>(x, M, K, gm, gk, vec_ok, r1);
    return pair_seg_rows<S>(r1);
}

// The 16 values of segment x[gm, gk ..]: unpacked from raw when load_rows_raw loaded it, else read
// element by element (load_seg).
template <int DT>
__device__ __forceinline__ void seg_values(const uint4* raw, bool full, const void* x, i64 M, i64 K, i64 gm, i64 gk,
                                           bool vec_ok, float* v) {
    constexpr int V = In<DT>::vec;
    if (full) {
#pragma unroll
        for (int q = 0; q < SEG / V; ++q) In<DT>::unpack(raw[q], v + q * V);
    } else {
        load_seg<DT>(x, M, K, gm, gk, vec_ok, v);
    }
}

// The lanes of a rows-kernel block (a CTA row of 2^lw segments, rs = 256 / 2^lw rows): thread t
// takes segment s of row hi. ROWS2 (lw >= 5): a warp takes 16 segments of 2 adjacent rows instead of
// 32 (or 64 over 2 warps) of one, so that its 4-lane groups' swizzled chunks pair up into 32-byte
// sectors (store_kept_scales); its loads are 2 runs of 512 bytes, its codes 2 runs of 128 (NVFP4).
__device__ __forceinline__ void rows_lane(int lw, bool rows2, int& hi, int& s) {
    hi = threadIdx.x >> lw;
    s = threadIdx.x & ((1 << lw) - 1);
    if (rows2 && lw >= 5) {   // warp w: 16 segments of rows 2 (w / 2^(lw-4)) and + 1
        const int w = threadIdx.x >> 5, L = threadIdx.x & 31;
        s = ((w & ((1 << (lw - 4)) - 1)) << 4) | (L & 15);
        hi = ((w >> (lw - 4)) << 1) | (L >> 4);
    }
}

// Stores the scale codes a rows-kernel thread kept (byte j: its row group j, row gm0 + j step, of
// segment s, column gk): the lanes of 4 consecutive scale columns (s / PER % 4 = l: a quad for
// NVFP4, the even lanes of 8 for MX) transpose them through shuffles and lane l stores row group
// l's 4 columns as one word, which are adjacent in both layouts (a quarter of a swizzled chunk, so
// with the row groups 32 rows apart a group of lanes stores a whole chunk). scales: a (rows, nb)
// matrix whose row gm - r0 is global row gm; rows >= M and columns >= nb are not stored. MX with
// lw = 2 (2 columns per block row): each code on its own. The whole warp must call this.
template <int FMT>
__device__ __forceinline__ void store_kept_scales(u32 kept, u8* scales, i64 gm0, int step, i64 r0, i64 M, i64 K,
                                                  i64 gk, bool swz, int s, int lw) {
    typedef Fmt<FMT> F;
    constexpr int PER = F::block / SEG;
    const i64 nb = (K + F::block - 1) / F::block;
    if (PER == 2 && lw == 2) {
        if ((s & 1) == 0 && gk < K) {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const i64 gm = gm0 + j * step;
                if (gm < M) scales[scale_offset(gm - r0, gk / F::block, nb, swz)] = (u8)(kept >> (8 * j));
            }
        }
        return;
    }
    const int l = (s / PER) & 3;
    u32 word = ((kept >> (8 * l)) & 0xFFu) << (8 * l);
#pragma unroll
    for (int k = 1; k < 4; ++k) {
        const u32 o = __shfl_xor_sync(0xFFFFFFFFu, kept, k * PER);   // lane l ^ k's codes
        word |= ((o >> (8 * l)) & 0xFFu) << (8 * (l ^ k));
    }
    const i64 gm = gm0 + l * step, cb = gk / F::block - l;
    if ((s & (PER - 1)) == 0 && gm < M && cb < nb) {
        u8* const p = scales + scale_offset(gm - r0, cb, nb, swz);
        if (cb + 4 <= nb && (reinterpret_cast<u64>(p) & 3u) == 0) {
            *reinterpret_cast<u32*>(p) = word;
        } else {   // the matrix's last columns
            for (int i = 0; i < nb - cb && i < 4; ++i) scales[scale_offset(gm - r0, cb + i, nb, swz)] = (u8)(word >> (8 * i));
        }
    }
}

// The launch bounds and scale stores (STG below) of the rows kernels: quantize.cu's _rows and
// grouped.cu's group_quantize_rowsd.
#define FP4KIT_LB_ANY __launch_bounds__(QT_THREADS)
#define FP4KIT_LB_4 __launch_bounds__(QT_THREADS, 4)
// STG: how the 16-bit plain kernels store their scale codes (quantize_rows_direct): MX through the
// shared-memory stage (1); NVFP4 one by one (0: the stage's barrier cost it 2.3 us at 8192^2 compact,
// docs/performance.md item 145). FP4KIT_ROWS_STG 0 (A/B): every format one by one.
#ifndef FP4KIT_ROWS_STG
#define FP4KIT_ROWS_STG 1
#endif
#define FP4KIT_ROWS_STG_OF(F) ((F) == 5 ? 0 : FP4KIT_ROWS_STG)

// Rowwise only, no 2D tiles. lw (2..6): a CTA row is 2^lw segments of 16 (W = 16 * 2^lw columns),
// rs = 256 / 2^lw rows of them, R such row groups (R * rs rows x W columns per CTA); each thread issues
// the loads of its R segments before computing (more bytes in flight). With lw = 6 a warp covers 512
// consecutive elements of one row, so its codes and scales (16 MX / 32 NVFP4 bytes of a scale row)
// go out as whole 32-byte sectors; with lw = 2 (64 columns) a CTA wrote 2 bytes of each of its rows'
// scale sectors, which 16 CTAs completed.
// Block row bq, column block kt: rows bq * R * rs .., columns kt * W .. (quantize_rows_direct's block
// index b: bq = b / tiles_k, kt = b % tiles_k).
// XM (with EXT): the extended options the kernel keeps (as quantize_tile_rc).
// STG (R = 4; the plain kernels from 16-bit input): how the scale codes leave. In the swizzled layout
// a 16-byte chunk holds rows i, i + 32, i + 64, i + 96 of 4 scale columns, so a warp's 32 scales of
// one row (NVFP4) went out as 8 pieces of 4 bytes, a quarter of a chunk each. With swizzled scales
// (STG 1 or 2), a block inside a complete 128-row band with lw >= 3 (rs <= 32) takes rows band +
// (its place among the band's 32 / rs blocks) * rs + hi + 32 j instead: the band's blocks cover
// the same rows and columns, and a block's row groups j are the 4 quarters of its chunks.
// - STG 1 (MX): the codes gather in shared memory and, after a barrier, leave as 4-byte words,
//   consecutive threads on consecutive words (swizzled: 4 rs whole chunks per 4 columns; compact:
//   a row's columns in order). H200, 8192^2 bfloat16: MXFP8 swizzled 59.2 -> 54.4 us, compact
//   55.8 -> 54.4 (docs/performance.md item 145).
// - STG 2 (NVFP4, swizzled scales only): a thread keeps its 4 codes in a register and the 4 lanes
//   of 4 consecutive columns transpose them through shuffles, each storing one word, so a quad
//   stores a whole chunk. With lw >= 5 a warp takes 16 segments of 2 adjacent rows (not 32 of one),
//   so that its quads' chunks pair up into whole 32-byte sectors. No barrier: a CTA barrier cost
//   NVFP4 2.3 us at 8192^2 (its warps' time varies with the data: the below-7 encode).
// FP4KIT_ROWS_GRID1 (A/B only): the rows kernels as before docs/performance.md item 151 (a 1-D grid,
// quantize.cu; the first column of a block as kt * W, not a shift)
#ifndef FP4KIT_ROWS_GRID1
#define FP4KIT_ROWS_GRID1 0
#endif
// quantize_rows_at: the block of block row bq (rows bq * R * rs ..) and column block kt (columns
// kt * W ..); quantize_rows_direct (below): block b of the row-major block numbering.
// KMUL: the first column as kt * W (as before item 151; quantize.cu's _rowsz, on its 1-D grid), else
// as a shift.
template <int FMT, int DT, bool EXT, int R, int XM = QFLAG_EXT_ALL, int STG = 0, bool KMUL = false>
__device__ __forceinline__ void quantize_rows_at(const void* x, i64 M, i64 K, u8* row_data, u8* row_scales,
                                                 const float* amax_row, int flags, u64 seed, i64 bq, i64 kt, int lw) {
    if constexpr (!EXT) flags &= ~QFLAG_EXT_ALL;
    else flags &= ~(QFLAG_EXT_ALL & ~XM);
    static_assert(STG == 0 || R == 4, "staged scales: 4 row groups, one per quarter of a swizzled chunk");
    static_assert(STG != 2 || !Fmt<FMT>::mx, "STG 2: blocks of 16");
    typedef Fmt<FMT> F;
    constexpr int PER = F::block / SEG;   // segments per scale
    const int rs = QT_THREADS >> lw;   // rows of a row group; a block is W = SEG << lw columns wide
    i64 m0 = bq * (rs * R);
    static_assert(SEG == 16, "W = 2^(lw + 4)");
    // kt * W; as a shift on the 3-D grid (kt * W spilled _rowsz from bfloat16 at 64 registers there)
    const i64 k0 = (KMUL || FP4KIT_ROWS_GRID1) ? kt * (SEG << lw) : kt << (lw + 4);
    int hi, s;
    rows_lane(lw, STG == 2, hi, s);
    const i64 gk = k0 + s * SEG;
    const bool swz = STG == 2 || (flags & (QFLAG_SWIZZLED | QFLAG_ROW_SCALES_SWZ));
    const i64 nb = (K + F::block - 1) / F::block;
    int step = rs;   // rows between a thread's row groups
    if constexpr (STG != 0) {
        if (swz && lw >= 3 && (m0 | 127) < M) {
            m0 = (m0 & ~(i64)127) + ((m0 & 127) >> 2);
            step = 32;
        }
    }
    // STG 1: byte c & 3 of word (c / 4) (4 rs + 1) + 4 hi + j holds scale column c of row group j (the
    // extra word per 4 columns puts consecutive groups on distinct banks): 256 / PER words in at
    // most 16 / PER groups (lw = 6), or 257 in one (lw = 2)
    __shared__ u32 st_w[STG == 1 ? QT_THREADS + 16 : 1];
    float s_enc = 1.0f, s_dec = 1.0f;   // NVFP4 with one amax: the multiplier table instead
    __shared__ float enc_tab[F::mx ? 1 : NV_TAB + 1];
    const bool use_tab = !F::mx && !(flags & QFLAG_ROW_SCALED);
    uint4 raw[R][SEG / In<DT>::vec];   // raw input words: R * 32 bytes (bf16/fp16) in registers
    bool full[R];
    load_rows_raw<DT, R>(x, M, K, m0 + hi, gk, flags & QFLAG_VEC_IN, raw, full, step);
    if constexpr (!F::mx) {   // while the loads are in flight
        if (use_tab) {
            nvfp4_fill_table(enc_tab, amax_row[0], 0);
            __syncthreads();
        }
    }
    constexpr bool TABR = !F::mx && !EXT;   // NVFP4 plain: the table and the below-7 encode
    // MXFP4 from 16-bit input: the tile kernels' packed-pair encode (H200, 8192^2 bfloat16: 52.2 -> 49.0 us,
    // docs/performance.md item 144; the fp32 values before)
    constexpr bool PK = PackedE2M1<FMT, DT, EXT>::on;
    typedef typename PackedE2M1<FMT, DT, EXT>::Seg PSeg;
    const int gw = 4 * rs + 1;
    // STG 1: row_segment stores stash[s / PER], so the pointer handed to it is the byte less s / PER
    u8* const st0 = STG == 1 ? reinterpret_cast<u8*>(st_w) + 4 * (((s / PER) >> 2) * gw + 4 * hi) + ((s / PER) & 3)
                                   - s / PER
                             : nullptr;
    u32 kept = 0u;   // STG 2, swizzled: byte j = the scale code of row group j
#pragma unroll
    for (int j = 0; j < R; ++j) {
        const i64 gm = m0 + hi + j * step;
        u8* const stash = STG == 1 ? st0 + 4 * j : nullptr;
        u32 sc;
        if constexpr (PK) {
            const PSeg pk = seg_pairs<DT, PSeg>(raw[j], full[j], x, M, K, gm, gk, flags & QFLAG_VEC_IN);
            sc = row_segment<FMT, false, FP4KIT_E8M0_SELECT, false, STG == 2>(
                pk, M, K, gm, gk, s, row_data, row_scales, amax_row, flags, seed, -1.0f, s_enc, s_dec, nullptr, 0, stash);
        } else {
            float v[SEG];
            seg_values<DT>(raw[j], full[j], x, M, K, gm, gk, flags & QFLAG_VEC_IN, v);
            sc = row_segment<FMT, TABR, FP4KIT_E8M0_SELECT, false, STG == 2>(
                v, M, K, gm, gk, s, row_data, row_scales, amax_row, flags, seed, -1.0f, s_enc, s_dec,
                use_tab ? enc_tab : nullptr, 0, stash);
        }
        if constexpr (STG == 2) kept |= sc << (8 * j);
    }
    if constexpr (STG == 1) {
        __syncthreads();
        // 4 rs rows x nc4 words; swizzled: word t is quarter t % 4 of row (t / 4) % rs, columns
        // 4 (t / 4 rs) ..; compact: row t / nc4, columns 4 (t % nc4) ..
        const int NC = (1 << lw) / PER, nc4 = (NC + 3) >> 2, t = threadIdx.x;
        if (t < 4 * rs * nc4) {
            int c4, w;
            if (swz) {
                c4 = t / (4 * rs);
                w = t - c4 * (4 * rs);
            } else {
                const int r = t / nc4;
                c4 = t - r * nc4;
                w = 4 * (r % rs) + r / rs;
            }
            const i64 gm = m0 + (w >> 2) + (w & 3) * step, cb = k0 / F::block + 4 * c4;
            const i64 nv = min(min((i64)(NC - 4 * c4), nb - cb), (i64)4);   // columns of this block here
            if (gm < M && nv > 0) {
                const u32 word = st_w[c4 * gw + w];
                u8* const p = row_scales + scale_offset(gm, cb, nb, swz);
                if (nv == 4 && (reinterpret_cast<u64>(p) & 3u) == 0) {
                    *reinterpret_cast<u32*>(p) = word;
                } else {
                    for (int i = 0; i < nv; ++i) row_scales[scale_offset(gm, cb + i, nb, swz)] = (u8)(word >> (8 * i));
                }
            }
        }
    }
    if constexpr (STG == 2) store_kept_scales<FMT>(kept, row_scales, m0 + hi, step, 0, M, K, gk, true, s, lw);
}

template <int FMT, int DT, bool EXT, int R, int XM = QFLAG_EXT_ALL, int STG = 0, bool KMUL = false>
__device__ __forceinline__ void quantize_rows_direct(const void* x, i64 M, i64 K, u8* row_data, u8* row_scales,
                                                     const float* amax_row, int flags, u64 seed, i64 b, int lw) {
    const int W = SEG << lw;
    const i64 tiles_k = (K + W - 1) / W;
    const i64 bq = div_fast(b, tiles_k);
    quantize_rows_at<FMT, DT, EXT, R, XM, STG, KMUL>(x, M, K, row_data, row_scales, amax_row, flags, seed, bq,
                                               b - bq * tiles_k, lw);
}

// The block of this CTA in a single-tensor rows launch: grid (column blocks, gy, gz) with gy * gz >=
// the block rows (fp4kit._plan.rows_grid, as grid_tile's), block row blockIdx.z * gy + blockIdx.y.
// False for a CTA past the last block row. The 1-D grid before cost every thread a 64-bit division
// for the column blocks and a division of the block index (docs/performance.md item 151).
__device__ __forceinline__ bool grid_rows(i64 M, int R, int lw, i64& bq, i64& kt) {
    bq = (i64)blockIdx.z * gridDim.y + blockIdx.y;
    kt = blockIdx.x;
    return bq * (R * (QT_THREADS >> lw)) < M;
}

// Shared-memory tile of raw input words: 64 rows of 64 elements (128 or 256 bytes) + 16 bytes of
// padding. 16-byte chunks are XOR-swizzled by the 16-row group g: chunk j of row r lives at
// j ^ (CH * g) (CH = chunks per 16 elements), so that the 16-byte stores of a quarter warp (2 rows
// x 4 segments) hit distinct banks and the column reads of a warp, which span 2 or 4 row groups
// (columnwise phase below), are conflict-free for 16-bit input.
template <int DT>
struct RawTile {
    typedef typename In<DT>::T T;
    static constexpr int epc = 16 / (int)sizeof(T);                   // elements per chunk
    static constexpr int ch = SEG / epc;                              // chunks per segment
    static constexpr int pitch_w = QT_K * (int)sizeof(T) / 4 + 4;     // words per row
    static constexpr int words = QT_M * pitch_w;
    static __device__ __forceinline__ int chunk_word(int r, int j) { return r * pitch_w + ((j ^ (ch * (r >> 4))) << 2); }
    static __device__ __forceinline__ float get(const u32* t, int r, int c) {
        const u32* row = t + chunk_word(r, c / epc);
        if constexpr (sizeof(T) == 4) return u2f(row[c % epc]);
        else return In<DT>::cvt(reinterpret_cast<const T*>(row)[c % epc]);
    }
    // Column c, rows r0 .. r0 + 15 with r0 a multiple of 16: one row group, so one chunk swizzle, and
    // element (r0 + i, c) is col_seg(t, r0, c)[i * pitch_e]. One address for the 16 reads (constant
    // offsets); ptxas did not find that the swizzle is the same for the 16 rows (ncu source counters
    // of quantize_f5_d1_plain: ~100 address instructions per column segment).
    static constexpr int pitch_e = pitch_w * 4 / (int)sizeof(T);
    static __device__ __forceinline__ const T* col_seg(const u32* t, int r0, int c) {
        return reinterpret_cast<const T*>(t + chunk_word(r0, c / epc)) + c % epc;
    }
};

// Words between the tile buffers of a CTA's groups: STASH 3 adds 32 bytes, so that groups q and
// q + 2 (the two row halves of a square's column half) sit half a bank period (64 bytes) apart and
// ColStage::write_square's reads of a row's two runs in a quarter warp hit distinct banks.
template <int DT, int STASH>
struct RawTileStride {
    static constexpr int words = RawTile<DT>::words + (STASH == 3 ? 8 : 0);
    static_assert(STASH != 3 || (2 * words * 4) % 128 == 64, "groups q and q + 2: 64 bytes apart modulo 128");
};

// The scale bytes of one 64-element run of a tile (W = 64 / block of them: 2 MX, 4 NVFP4), staged
// in shared memory st[0 .. W) by the tile's threads: scales (i, j0 .. j0 + n - 1) of a compact
// (R, C) matrix. j0 is a multiple of W, so the W bytes are adjacent in both layouts (the same
// 4-byte group of a swizzled 16-byte chunk); one 2- or 4-byte store when all W are valid and the
// address allows it, else byte stores.
template <int W>
__device__ __forceinline__ void store_scale_run(u8* scales, i64 i, i64 j0, i64 C, bool swz, const u8* st, int n) {
    u8* p = scales + scale_offset(i, j0, C, swz);
    if (n == W && (reinterpret_cast<u64>(p) & (W - 1)) == 0) {
        if constexpr (W == 2) *reinterpret_cast<u16*>(p) = *reinterpret_cast<const u16*>(st);
        else *reinterpret_cast<u32*>(p) = *reinterpret_cast<const u32*>(st);
    } else {
        for (int b = 0; b < n; ++b) scales[scale_offset(i, j0 + b, C, swz)] = st[b];
    }
}

// Columnwise codes of one tile staged in shared memory (FP8): run c (c < QT_K) holds the 64
// bytes of output row k0 + c, rows m0 .. m0 + 63. Used when those rows do not start on a 16-byte
// boundary (M % 16 != 0, or a grouped member at such an offset): the per-thread stores would then
// be 2- or 4-byte pieces strewn over 16 output rows per instruction. Instead 16 lanes write each
// run together, aligned 4-byte words in the middle and single bytes at the two ends, so that one
// store instruction covers two whole runs (measured on the H200: grouped MXFP8 'both' with even
// member sizes 1990 -> 1618 us). FP4 runs (32 bytes, 8-byte stores per thread) measured slower
// staged, so FP4 keeps its per-thread stores (grouped kernels: a run per store instruction through
// a per-warp buffer instead, quantize_tile_rc's RUN4). FP6 (one code per byte, as FP8) is staged since its
// encode went through the FP8 cvt (H100: grouped MXFP6 'both', G = 8, even sizes 1442.8 -> 1005.1
// us, M = 8200 single tensor 181.1 -> 162.3 us; with the old software encode staging had cost the
// aligned 'both' 168.8 -> 218.7 us for lack of registers).
// Chunk j of run c sits at j ^ (2 * ((c >> 1) & 1)) (conflict-free 16-byte stores from
// quantize_tile's lane layout).
template <int FMT>
struct ColStage {
    static constexpr bool enabled = !Fmt<FMT>::packed;   // FP8 and FP6
    static constexpr int RUNB = QT_M;                   // bytes per run
    static constexpr int LPR = RUNB / 4;                // lanes per run (one word each)
    static constexpr int WORDS = enabled ? QT_K * RUNB / 4 : 1;
    // byte b of run c: chunk b / 16 XORed with 2 on odd run pairs, i.e. bit 5 of b flipped
    static __device__ __forceinline__ int run_swz(int c) { return ((c >> 1) & 1) << 5; }
    static __device__ __forceinline__ int byte_at(int c, int b) { return c * RUNB + (b ^ run_swz(c)); }
    static __device__ __forceinline__ bool needed(const u8* col_data, i64 M) {
        return enabled && ((reinterpret_cast<u64>(col_data) | (u64)M) & 15u) != 0;
    }
    // the thread's 16 codes of column c, row segment sc_seg
    static __device__ __forceinline__ void put(u32* buf, int c, int sc_seg, const u32* w) {
        *reinterpret_cast<uint4*>(reinterpret_cast<u8*>(buf) + byte_at(c, sc_seg * 16)) = make_uint4(w[0], w[1], w[2], w[3]);
    }
    // All threads of the CTA, after a barrier that follows every put(). Not inlined: the tile
    // kernels keep their registers for the common, unstaged path (an inlined writer cost the
    // aligned grouped 'both' ~1 %), and the writer's own code stays out of the hot loop.
    static __device__ __noinline__ void write(const u32* buf, u8* col_data, i64 M, i64 K, i64 m0, i64 k0) {
        constexpr int RUNS_PER_PASS = (QT_THREADS / 32) * (32 / LPR);
        const u8* bb = reinterpret_cast<const u8*>(buf);
        const int lane = threadIdx.x & 31, h = lane % LPR;
        const int L = (int)((M - m0) < RUNB ? (M - m0) : RUNB);     // bytes of each run
        const int nc = (int)((K - k0) < QT_K ? (K - k0) : QT_K);    // runs of this tile
        const int cf = (threadIdx.x >> 5) * (32 / LPR) + lane / LPR;
#pragma unroll
        for (int i = 0; i < QT_K / RUNS_PER_PASS; ++i) {
            const int c = cf + i * RUNS_PER_PASS;
            if (c >= nc) continue;
            const int sw = run_swz(c);
            const u8* src = bb + c * RUNB;
            u8* dst = col_data + (k0 + c) * M + m0;
            const int lead = (int)((0u - (u32)reinterpret_cast<u64>(dst)) & 3u);
            const int head = lead < L ? lead : L;
            const int nw = (L - head) >> 2;               // whole aligned words
            const int tb = head + 4 * nw;                 // first tail byte
            if (h < nw) {
                const int off = head + 4 * h;              // byte offset of this word within the run
                const int ob = off & ~3;
                // ob + 4 wraps to the run's first word when off is aligned (the shift then ignores it)
                const u32 lo = *reinterpret_cast<const u32*>(src + (ob ^ sw));
                const u32 hi = *reinterpret_cast<const u32*>(src + (((ob + 4) & (RUNB - 1)) ^ sw));
                *reinterpret_cast<u32*>(dst + off) = __funnelshift_r(lo, hi, 8 * (off & 3));
            }
            if (h < head) dst[h] = src[h ^ sw];
            if (h < L - tb) dst[tb + h] = src[(tb + h) ^ sw];
        }
    }
    // One aligned piece of n (8, 4, 2, 1) bytes at byte pos (a multiple of n) of the 16 bytes v,
    // stored at p + pos.
    static __device__ __forceinline__ void store_piece(u8* p, int n, int pos, const u32* v) {
        p += pos;
        if (n == 8) {
            *reinterpret_cast<uint2*>(p) = (pos & 8) ? make_uint2(v[2], v[3]) : make_uint2(v[0], v[1]);
        } else {
            const u32 wd = ((pos & 8) ? ((pos & 4) ? v[3] : v[2]) : ((pos & 4) ? v[1] : v[0])) >> (8 * (pos & 3));
            if (n == 4) *reinterpret_cast<u32*>(p) = wd;
            else if (n == 2) *reinterpret_cast<unsigned short*>(p) = (unsigned short)wd;
            else *p = (u8)wd;
        }
    }
    // STASH 3: the runs of a whole 128 x 128 square, staged by its four groups (group q = 2 * (row
    // half) + column half, run c of group q in its tile buffer, buffers GW words apart), written by
    // all 1024 threads of the CTA after a CTA barrier: output row R (< 128) of the square is runs c =
    // R % 64 of groups R / 64 and 2 + R / 64 (128 bytes, L of them valid), and lane j (of 8 per row)
    // builds the 16 bytes of the j-th 16-byte aligned chunk the row touches from two 16-byte shared
    // reads. Whole chunks leave in one 16-byte store; the row's head (chunk 0) and tail (its last
    // chunk, the 9th when the row straddles 9) leave as aligned 8 / 4 / 2 / 1-byte pieces, one per
    // lane, so that no byte outside the row is written (the neighbouring squares of the member own
    // those).
    template <int GW>
    static __device__ __forceinline__ void write_square(const u32* tiles, u8* col_data, i64 M, i64 m0, i64 k0) {
        static_assert(RUNB == 64, "FP8 / FP6 runs of 64 bytes");
        const int R = (int)(threadIdx.x >> 3), j = (int)(threadIdx.x & 7);
        const int c = R & 63, kh = R >> 6;
        const int L = (int)((M - m0) < 2 * RUNB ? (M - m0) : 2 * RUNB);   // valid bytes of the row (> 0)
        u8* const dst = col_data + (k0 + R) * M + m0;
        const int s = (int)(reinterpret_cast<u64>(dst) & 15u);
        u8* const A = dst - s;                           // the row's first aligned chunk
        const int e = (s + L - 1) >> 4;                  // its last chunk (0 .. 8)
        const int t = (s + L) & 15;                      // bytes of the last chunk (0: all 16)
        // run bytes [16 j - s, + 16) of the row (modulo 128: chunk 0 of a row of 9 chunks then also
        // holds the 9th chunk's bytes, in its positions 0 .. s - 1)
        const int st = (16 * j - s) & 127, f = st >> 4, u = st & 15;
        const u8* bb = reinterpret_cast<const u8*>(tiles) + c * RUNB;
        const int sw = run_swz(c);
        const uint4 a = *reinterpret_cast<const uint4*>(bb + ((f >> 2) * 2 + kh) * (GW * 4) + (((f & 3) << 4) ^ sw));
        const int f1 = (f + 1) & 7;
        const uint4 b = *reinterpret_cast<const uint4*>(bb + ((f1 >> 2) * 2 + kh) * (GW * 4) + (((f1 & 3) << 4) ^ sw));
        u32 x[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
        // words u / 4 .. u / 4 + 4 to the front, then the byte shift
#pragma unroll
        for (int i = 0; i < 6; ++i) x[i] = (u & 8) ? x[i + 2] : x[i];
#pragma unroll
        for (int i = 0; i < 5; ++i) x[i] = (u & 4) ? x[i + 1] : x[i];
        u32 w[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) w[i] = __funnelshift_r(x[i], x[i + 1], 8 * (u & 3));
        // the head's bytes (chunk 0) from lane 0 of the row, the tail's (chunk e) from lane e, or
        // from lane 0 for a 9th chunk (wrapped); before any lane leaves
        const int r0 = (int)(threadIdx.x & 31) & ~7;
        const int te = r0 + (e == 8 ? 0 : e);
        u32 hw[4], tw[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            hw[i] = __shfl_sync(0xFFFFFFFFu, w[i], r0);
            tw[i] = __shfl_sync(0xFFFFFFFFu, w[i], te);
        }
        if (e == 0) {   // the row lies inside one chunk (L < 16): byte stores (rare)
            if (j == 0)
                for (int p = s; p < s + L; ++p) store_piece(A, 1, p, w);
            return;
        }
        const int lo = 16 * j - s;   // the chunk's first byte, in run bytes
        if (lo >= 0 && lo + 16 <= L) *reinterpret_cast<uint4*>(A + 16 * j) = make_uint4(w[0], w[1], w[2], w[3]);
        // The head (positions s .. 15 of chunk 0, all valid as e >= 1) and the tail (positions 0 ..
        // t - 1 of chunk e) as aligned pieces of 8 / 4 / 2 / 1 bytes, one per lane: lane j < 4 the
        // head's piece of 8 >> j bytes, lane j >= 4 the tail's of 8 >> (j - 4), when there is one.
        const bool hd = j < 4;
        const int n = 8 >> (j & 3);
        const int bits = hd ? (s != 0 ? 16 - s : 0) : t;
        if (bits & n) {
            u32 v[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) v[i] = hd ? hw[i] : tw[i];
            store_piece(hd ? A : A + 16 * e, n, hd ? 16 - (bits & ~(n - 1)) : bits & ~(2 * n - 1), v);
        }
    }
};

// quantize_tile_rc's RUN4 writer for MXFP4: the warp's 8 FP4 code runs of 32 bytes (run r: bytes
// 16 x 2r .. of the buffer sb, 16 bytes per row of PB bytes), one byte store per lane and run. Not
// inlined, as ColStage::write: the one-tile kernels keep their registers for the aligned path (H100,
// grouped MXFP4 "both" from bfloat16, G = 8: spill 12 -> 0 bytes, kernel time 610.9 -> 608.6 us with
// sizes % 128, 732.1 -> 729.9 with even sizes). NVFP4 keeps the writer inline (run4_store): not
// inlined it measured 700.3 -> 702.9 us and 775.0 -> 783.6.
template <int PB>
__device__ __forceinline__ void run4_store(const u8* sb, u8* col_data, i64 M, i64 K, i64 m0, i64 k0) {
    const int lane = (int)threadIdx.x & 31;
    sb += (lane >> 4) * PB + (lane & 15);
    const i64 half = M >> 1, kb = k0 + (i64)(threadIdx.x >> 5) * 8;   // the warp's first column
    const int nb = (M - m0) >= 64 ? 32 : (int)((M - m0) >> 1);     // valid bytes of a run
    u8* dst = col_data + kb * half + (m0 >> 1) + lane;
#pragma unroll
    for (int r = 0; r < 8; ++r) {
        if (lane < nb && kb + r < K) *dst = sb[2 * r * PB];
        dst += half;
    }
}
template <int PB>
__device__ __noinline__ void run4_write(const u8* sb, u8* col_data, i64 M, i64 K, i64 m0, i64 k0) {
    run4_store<PB>(sb, col_data, M, K, m0, k0);
}
// Barrier of the threads that share a tile: the CTA, or (GRP) its group of 256 threads
// (named barrier 1 + group; barrier 0 stays __syncthreads').
template <bool GRP>
__device__ __forceinline__ void tile_sync() {
    if constexpr (GRP) asm volatile("bar.sync %0, %1;" ::"r"(1 + (int)(threadIdx.x >> 8)), "r"(QT_THREADS) : "memory");
    else __syncthreads();
}

// EXT = false compiles out the NVFP4 variants and stochastic rounding (fewer registers, more
// CTAs per SM) for the plain recipes; the flags of those variants are then ignored. XM narrows EXT
// to some of them (e.g. QFLAG_RHT alone: the fused RHT cast without the other variants' registers).
//
// Thread tid owns row segment (hi = tid / 4, s = tid % 4) of the tile: it loads those 16 elements
// from global memory, quantizes them rowwise from registers and, when the columnwise operand is
// wanted, stores the raw words into shared memory (two 16-byte stores for 16-bit input); after one
// barrier it quantizes column c = tid % 64, rows 16 * (tid / 64) .. +15 of the tile.
// quantize_tile_rc: the tile in tile row tq, tile column kt (rows 64 tq.., columns 64 kt..);
// quantize_tile: the tile_idx-th tile in row-major order (one division to split it).
// STASH 1: the scale bytes go to shared memory and leave after a last barrier, one 2-byte (MX) or
// 4-byte (NVFP4) store per tile row and per tile column (store_scale_run), instead of one byte store
// per block (quantize.cu FP4KIT_TILE_STASH says where it pays). STASH 2 (MX, block 32): they go to
// the caller's shared 128 x 128 swizzled blocks blk[0 .. 512) (rowwise) and blk[512 .. 1024)
// (columnwise), the tile being one of the four of a 128 x 128 square (tq & 1, kt & 1), and the
// caller writes the blocks (quantize.cu _quad). The byte of (row r, scale column c) of a block is
// swizzled_block_byte(r, c), swizzled_offset's in-block part in 32-bit arithmetic (the i64 helper
// changed the measured kernel's code). STASH 3: as 2, and columnwise code rows off a 16-byte
// boundary are staged (ColStage) in the group's own tile buffer, after one more group barrier once
// every thread has read its column from it, and the caller writes them for the whole square after a
// CTA barrier (ColStage::write_square with the returned buffers; grouped.cu group_quantize4:
// members of any size).
template <int FMT, int DT, bool EXT = true, int XM = QFLAG_EXT_ALL, int STASH = 0, bool E8M0_SEL = false,
          bool RUN4 = false>
__device__ __forceinline__ const u32* quantize_tile_rc(const void* x, i64 M, i64 K, u8* row_data, u8* row_scales,
                                                 u8* col_data, u8* col_scales, const float* amax_row,
                                                 const float* amax_col, int flags, u64 seed, u32 rht_mask, i64 tq,
                                                 i64 kt, bool tab_ready = false, u8* blk = nullptr) {
    typedef Fmt<FMT> F;
    typedef RawTile<DT> RT;
    constexpr int V = In<DT>::vec;
    constexpr bool GRP = STASH >= 2;   // one of 4 groups of 256 threads of the CTA (own tile, barrier)
    constexpr int NG = GRP ? 4 : 1;
    const int grp = GRP ? (int)(threadIdx.x >> 8) : 0;
    __shared__ __align__(16) u32 tile_g[NG][RawTileStride<DT, STASH>::words];
    __shared__ float seg_am_g[NG][QT_M][QT_K / SEG];
    __shared__ float tile_am_g[NG][QT_M / 16][QT_K / 16];
    __shared__ float enc_tab_g[NG][2][F::mx ? 1 : NV_TAB + 1];   // NVFP4: rowwise / columnwise tables
    __shared__ __align__(16) u32 col_stage[GRP ? 1 : ColStage<FMT>::WORDS];   // groups: in their tile (STASH 3)
    static_assert(STASH != 3 || ColStage<FMT>::WORDS <= RT::words, "the stage must fit in the tile buffer");
    u32* tile = tile_g[grp];
    float (*seg_am)[QT_K / SEG] = seg_am_g[grp];
    float (*tile_am)[QT_K / 16] = tile_am_g[grp];
    float (*enc_tab)[F::mx ? 1 : NV_TAB + 1] = enc_tab_g[grp];
    // STASH: the tile's scale bytes, rowwise (row hi) and columnwise (column c), written out at the end
    __shared__ __align__(4) u8 sc_stash[STASH == 1 ? 2 : 1][STASH == 1 ? QT_M : 1][4];
    static_assert(STASH < 2 || (F::mx && F::block == 32), "128 x 128 swizzled blocks: MX only");
    constexpr int SW = QT_K / F::block;   // scale bytes per 64-element run

    const i64 m0 = tq * QT_M;
    const i64 k0 = kt * QT_K;
    const int tid = GRP ? (int)(threadIdx.x & (QT_THREADS - 1)) : (int)threadIdx.x;
    const bool col_swz = flags & (QFLAG_SWIZZLED | QFLAG_COL_SCALES_SWZ);
    const bool row_swz = flags & (QFLAG_SWIZZLED | QFLAG_ROW_SCALES_SWZ);
    const bool floor_rule = flags & QFLAG_RULE_FLOOR;
    if constexpr (!EXT) flags &= ~QFLAG_EXT_ALL;
    else flags &= ~(QFLAG_EXT_ALL & ~XM);
    const bool stochastic = EXT && (flags & QFLAG_STOCHASTIC);
    bool tile2d = false, row_scaled = false, rht = false;
    if constexpr (!F::mx && EXT) {
        tile2d = flags & QFLAG_TILE_2D;
        row_scaled = flags & QFLAG_ROW_SCALED;
        rht = flags & QFLAG_RHT;
    }
    const bool colwise = flags & QFLAG_COLUMNWISE;

    const int hi = tid >> 2;   // row within the tile
    const int s = tid & 3;     // 16-element segment of that row
    const i64 gm = m0 + hi, gk = k0 + s * SEG;
    constexpr bool PK = PackedE2M1<FMT, DT, EXT>::on;   // MXFP4 from 16-bit input: packed pairs
    typedef typename PackedE2M1<FMT, DT, EXT>::Seg PSeg;
    // E8M0 in select form: the file's choice, always in the 128 x 128 square kernels (STASH >= 2:
    // grouped.cu group_quantize4 takes selects without spilling; ncu source counters, grouped MXFP8
    // 'both', even sizes: the branchy rceil and inverse scale were ~60 of ~730 instructions per warp),
    // and where the caller asks (E8M0_SEL: grouped.cu's one-tile kernels)
    constexpr bool SEL = FP4KIT_E8M0_SELECT || STASH >= 2 || E8M0_SEL;
    float v[SEG];
    PSeg pk;   // PK: the rowwise segment
    {
        uint4 raw[SEG / V];
        load_seg_raw<DT>(x, M, K, gm, gk, flags & QFLAG_VEC_IN, raw);
        if (colwise) {
#pragma unroll
            for (int j = 0; j < SEG / V; ++j) *reinterpret_cast<uint4*>(tile + RT::chunk_word(hi, s * RT::ch + j)) = raw[j];
        }
        if constexpr (PK) {
            pk = pair_seg_rows<PSeg>(raw);
        } else {
#pragma unroll
            for (int j = 0; j < SEG / V; ++j) In<DT>::unpack(raw[j], v + j * V);
        }
    }

    // NVFP4 with one amax per operand: multiplier tables (threads 0-127 rowwise, 128-255 columnwise).
    bool use_tab = false;
    if constexpr (!F::mx) {
        use_tab = !row_scaled;
        if (use_tab && !tab_ready) {   // tab_ready: the previous tile of this CTA had the same amaxes
            const bool pre = flags & QFLAG_ENC_TABS;   // amax_row / amax_col: the tables themselves
            if (flags & QFLAG_ROWWISE) nvfp4_table(enc_tab[0], amax_row, 0, pre);
            if (colwise) nvfp4_table(enc_tab[1], amax_col, NV_TAB, pre);
            tile_sync<GRP>();
        }
    }

    if constexpr (!F::mx) {
        if (tile2d) {   // 16x16 tile amax, shared by both operands
            seg_am[hi][s] = seg_amax(v);
            tile_sync<GRP>();
            if (tid < (QT_M / 16) * (QT_K / 16)) {
                const int tr = tid / (QT_K / 16), tc = tid % (QT_K / 16);
                u32 acc = 0;
                for (int r = 0; r < 16; ++r) acc = absmax_bits(acc, seg_am[tr * 16 + r][tc]);
                tile_am[tr][tc] = u2f(acc);
            }
            tile_sync<GRP>();
        }
    }

    if (flags & QFLAG_ROWWISE) {
        float s_enc = 1.0f, s_dec = 1.0f;   // unused with the table (row_scaled: per row in row_segment)
        u8* const stash = STASH == 1 ? sc_stash[0][hi]
                          : STASH >= 2 ? blk + swizzled_block_byte((int)(tq & 1) * QT_M + hi, (int)(kt & 1) * 2)
                                       : nullptr;
        if constexpr (PK) {
            row_segment<FMT, false, SEL>(pk, M, K, gm, gk, s, row_data, row_scales, amax_row, flags, seed, -1.0f, s_enc, s_dec,
                             nullptr, 0, stash);
        } else {
            row_segment<FMT, !EXT, SEL>(v, M, K, gm, gk, s, row_data, row_scales, amax_row, flags, seed,
                                   tile2d ? tile_am[hi >> 4][s] : -1.0f, s_enc, s_dec, use_tab ? enc_tab[0] : nullptr,
                                   0, stash);
        }
    }

    if (colwise) {
        tile_sync<GRP>();
        // Column c, 16-row segment sc_seg. G consecutive lanes take the same column and consecutive
        // segments, so that their codes (G x 16 bytes FP8/FP6, G x 8 bytes FP4) fill whole 32-byte
        // sectors of the output row in one store instruction (no partial-sector L2 writes), and the
        // two halves of an MX block of 32 are neighbouring lanes (one shuffle, no barrier).
        constexpr int G = F::packed ? 4 : 2;
        // groups of STASH 2 (single-tensor _quad: M % 128 == 0) never stage
        const bool stage = STASH != 2 && ColStage<FMT>::needed(col_data, M);
        u32* const stage_buf = STASH == 3 ? tile : col_stage;
        const int c = (tid / G) & (QT_K - 1);
        const int sc_seg = (tid / (G * QT_K)) * G + (tid & (G - 1));
        const i64 gkc = k0 + c, gmc = m0 + sc_seg * SEG;
        if constexpr (STASH == 2 && !PK) {   // single-tensor squares: per-row addresses (one address measured
            // 3 % slower at 65536 x 7168, H100: 672.6 -> 692.7 us, same run); MXFP4 takes the packed
            // pairs below
#pragma unroll
            for (int i = 0; i < SEG; ++i) v[i] = RT::get(tile, sc_seg * SEG + i, c);
        } else {
            const typename RT::T* cs = RT::col_seg(tile, sc_seg * SEG, c);
            if constexpr (PK) {
                u32 h[SEG];
#pragma unroll
                for (int i = 0; i < SEG; ++i) h[i] = cs[i * RT::pitch_e];
                pk = pair_seg_pack<PSeg>(h);
            } else {
#pragma unroll
                for (int i = 0; i < SEG; ++i) v[i] = In<DT>::cvt(cs[i * RT::pitch_e]);
            }
        }
        if constexpr (STASH == 3) {
            if (ColStage<FMT>::enabled && stage) tile_sync<GRP>();   // the stage overwrites the tile
        }
        // RUN4 (grouped.cu's tile kernels): FP4 code rows off an 8-byte boundary (CTA-uniform) go
        // through the warp's run buffer. Single tensors keep store_bytes: a first version with its
        // own 2 KB of shared memory in every FP4 kernel cost them 5-6 % (H100, 8192^2 MXFP4 "both"
        // 83.5 -> 88.7 us), and this one in the ragged squares (_quadm, 8200 x 8192 MXFP4 "both",
        // the only single-tensor FP4 kernel that sees such rows without serving aligned shapes too)
        // 100.2 -> 105.0 us swizzled, 106.6 -> 110.8 compact.
        static_assert(!RUN4 || (STASH == 0 && QT_THREADS == 256 && QT_K == 64 && SEG == 16), "a warp: 8 columns x 64 rows");
        const bool realign4 = RUN4 && F::packed && ((reinterpret_cast<u64>(col_data) | (u64)(M >> 1)) & 7u) != 0;
        // the warp's run buffer (256 bytes): rows 0 .. 15 of the tile's chunk that holds the warp's 8
        // columns, which only this warp reads; byte b at row b / 16, byte b % 16 of the chunk
#define FP4KIT_RUN4 reinterpret_cast<u8*>(tile + RT::chunk_word(0, (tid >> 5) * 8 / RT::epc))
        if (realign4) __syncwarp();   // every lane of the warp has read its column before any write
        float bamax;
        constexpr bool B7 = !F::mx && !EXT;   // NVFP4 plain: the below-7 encode where it applies (row_segment)
        bool below7 = false;
        if constexpr (!F::mx) {
            if (rht) rht16_inplace(v, rht_mask);
            if constexpr (B7) bamax = seg_amax_nan_aware(v, below7);
            else bamax = seg_amax(v);
            if (rht && tile2d) {   // 16x16 tiles of the transformed operand
                tile_sync<GRP>();
                seg_am[c][sc_seg] = bamax;
                tile_sync<GRP>();
                u32 acc = 0;
                for (int j = 0; j < 16; ++j) acc = absmax_bits(acc, seg_am[(c & ~15) + j][sc_seg]);
                bamax = u2f(acc);
            } else if (tile2d) {
                bamax = tile_am[sc_seg][c >> 4];
            }
        } else {
            if constexpr (PK) bamax = seg_amax(pk);
            else bamax = seg_amax(v);
            if constexpr (F::block == 32) bamax = fmaxf(bamax, __shfl_xor_sync(0xFFFFFFFFu, bamax, 1));
        }
        if (gkc < K && gmc < M) {
            float mul;
            u32 sc;
            if constexpr (!F::mx) {
                if (use_tab) {
                    sc = nvfp4_scale_code(bamax, enc_tab[1][NV_TAB]);
                    mul = enc_tab[1][sc];
                    if constexpr (B7) below7 = below7 && below7_ok(bamax, mul);
                } else {
                    sc = block_scale<FMT, SEL>(bamax, floor_rule, amax_col, gkc, mul);
                }
            } else {
                sc = block_scale<FMT, SEL>(bamax, floor_rule, amax_col, 0, mul);
            }
            u32 w[4];
            if constexpr (PK) encode_seg<FMT>(pk, mul, false, seed, 1u, 0, w);
            else encode_seg<FMT>(v, mul, stochastic, seed, 1u, gkc * M + gmc, w, below7);
            const int n = (int)((M - gmc) < SEG ? (M - gmc) : SEG);
            if (ColStage<FMT>::enabled && stage) ColStage<FMT>::put(stage_buf, c, sc_seg, w);
            else if (F::packed && realign4)
                *reinterpret_cast<uint2*>(FP4KIT_RUN4 + (tid & 31) / 2 * (RT::pitch_w * 4) + 8 * (tid & 1)) = make_uint2(w[0], w[1]);
            else if constexpr (F::packed) store_bytes(col_data + gkc * (M / 2) + gmc / 2, w, n / 2, SEG / 2);
            else store_bytes(col_data + gkc * M + gmc, w, n, SEG);
            if (F::block == 16 || (sc_seg & 1) == 0) {
                if constexpr (STASH == 1) {
                    sc_stash[1][c][sc_seg / (F::block / SEG)] = (u8)sc;
                } else if constexpr (STASH >= 2) {
                    const int cl = (int)(kt & 1) * QT_K + c;
                    blk[512 + swizzled_block_byte(cl, (int)(tq & 1) * 2 + (sc_seg >> 1))] = (u8)sc;
                } else {
                    const i64 nb = (M + F::block - 1) / F::block;
                    col_scales[scale_offset(gkc, gmc / F::block, nb, col_swz)] = (u8)sc;
                }
            }
        }
        if constexpr (F::packed) {
            // FP4 code rows off an 8-byte boundary: per-thread 8-byte pieces would leave as 1-, 2- or
            // 4-byte stores, each instruction touching a sector of 8 runs (H100, grouped MXFP4 "both",
            // G = 8, even sizes: 2.4x the L2 write sectors of sizes % 128, 870 against 593 us). The
            // lanes of column c put its run (32 bytes, lane 4 c + j bytes 8 j ..) in the warp's
            // buffer; then one byte store per lane writes a whole run per instruction.
            if (realign4) {   // CTA-uniform
                __syncwarp();
                if constexpr (F::mx) {
                    run4_write<RT::pitch_w * 4>(FP4KIT_RUN4, col_data, M, K, m0, k0);
                } else {   // inline
                    run4_store<RT::pitch_w * 4>(FP4KIT_RUN4, col_data, M, K, m0, k0);
                }
            }
        }
#undef FP4KIT_RUN4
        if constexpr (STASH != 3) {   // STASH 3: the caller writes the square (ColStage::write_square)
            if (ColStage<FMT>::enabled && stage) {   // CTA-uniform
                tile_sync<GRP>();
                ColStage<FMT>::write(stage_buf, col_data, M, K, m0, k0);
            }
        }
    }
    if constexpr (STASH == 1) {   // the staged scale bytes out: 64 threads per operand, one store per run
        tile_sync<GRP>();
        const bool rowwise = flags & QFLAG_ROWWISE;
        if (rowwise && tid < QT_M) {
            const i64 gr = m0 + tid;
            if (gr < M) {
                const i64 nb = (K + F::block - 1) / F::block, left = nb - k0 / F::block;
                store_scale_run<SW>(row_scales, gr, k0 / F::block, nb, row_swz, sc_stash[0][tid],
                                    (int)(left < SW ? left : SW));
            }
        }
        if (colwise && tid >= QT_M && tid < QT_M + QT_K) {
            const i64 gc = k0 + (tid - QT_M);
            if (gc < K) {
                const i64 nb = (M + F::block - 1) / F::block, left = nb - m0 / F::block;
                store_scale_run<SW>(col_scales, gc, m0 / F::block, nb, col_swz, sc_stash[1][tid - QT_M],
                                    (int)(left < SW ? left : SW));
            }
        }
    }
    return tile_g[0];   // STASH 3: the groups' buffers, RawTileStride apart, holding the staged runs
}

// The end of a 128 x 128 square (bq, bk) of plain MXFP8 "both" (quantize.cu _quadm, grouped.cu
// group_quantize4), after quantize_tile_rc with STASH 3 on its four tiles and a CTA barrier: the
// staged columnwise code rows (when they start off a 16-byte boundary: ColStage::write_square), then
// the two 512-byte swizzled scale blocks from blk as 16-byte chunks, their rows / columns past the
// operand's M as zeros (so the squares cover every byte of the swizzled scale matrices, padding
// included). col_data: the operand's columnwise codes (K rows of M bytes); row_blk() / col_blk():
// the swizzled scale matrices (evaluated only by the threads that store a block, so that the callers'
// loads of per-member offsets stay off the other threads' path). K % 128 == 0; qk = K / 128.
template <int FMT, int GW, class RowBlk, class ColBlk>
__device__ __forceinline__ void quad_square_out(const u32* tiles, const u8* blk, i64 M, i64 bq, i64 bk, i64 qk,
                                                u8* col_data, RowBlk row_blk, ColBlk col_blk) {
    const int t = threadIdx.x;
    const i64 rem = M - bq * 128;   // rows of the operand in this square (> 0)
    if (ColStage<FMT>::needed(col_data, M))   // CTA-uniform: the staged columnwise rows
        ColStage<FMT>::template write_square<GW>(tiles, col_data, M, bq * 128, bk * 128);
    if (t < 32) {   // rowwise block: chunk t holds rows t + 32 w (word w)
        uint4 v = reinterpret_cast<const uint4*>(blk)[t];
        if (rem < 128) {
            v.x = t < rem ? v.x : 0u;
            v.y = t + 32 < rem ? v.y : 0u;
            v.z = t + 64 < rem ? v.z : 0u;
            v.w = t + 96 < rem ? v.w : 0u;
        }
        reinterpret_cast<uint4*>(row_blk() + (bq * qk + bk) * 512)[t] = v;
    } else if (t < 64) {   // columnwise block: byte c of every word is the scale of rows 32 c.. of the square
        uint4 v = reinterpret_cast<const uint4*>(blk + 512)[t - 32];
        if (rem < 128) {
            const u32 m = 0xFFFFFFFFu >> (8 * (4 - (int)((rem + 31) >> 5)));
            v.x &= m; v.y &= m; v.z &= m; v.w &= m;
        }
        const i64 nq = (M + 127) >> 7;
        reinterpret_cast<uint4*>(col_blk() + (bk * nq + bq) * 512)[t - 32] = v;
    }
}

// L2 prefetch for the 128 x 128 square kernels (quantize.cu _quad, grouped.cu group_quantize4),
// for the CTA that takes this one's slot: thread group g (of 4 x 256) asks for the input rows of
// tile g of that square, one 128-byte line per row (16-bit input, QT_K * 2 = 128 bytes). base:
// element offset of the square's first row and column; rows: the square's rows inside the tensor.
template <int DT>
__device__ __forceinline__ void prefetch_square_l2(const void* x, i64 base, i64 rows, i64 K, int g) {
    const int r = (int)(threadIdx.x & (QT_THREADS - 1));
    const i64 gm = (g >> 1) * QT_M + r;
    if (r >= QT_M || gm >= rows) return;
    constexpr int B = (int)sizeof(typename In<DT>::T);
    const char* p = reinterpret_cast<const char*>(x) + (base + gm * K + (g & 1) * QT_K) * B;
#pragma unroll
    for (int i = 0; i < QT_K * B / 128; ++i) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + 128 * i));
}

// The SM count (%nsmid), for the prefetch distances.
__device__ __forceinline__ i64 sm_count() {
    u32 nsm;
    asm("mov.u32 %0, %%nsmid;" : "=r"(nsm));
    return (i64)nsm;
}

// The tile of this CTA in a single-tensor launch: grid (tiles along K, gy, gz) with gy * gz >= the
// tiles along M (gy <= 65535, grid y's limit; fp4kit._plan.tile_grid), tile row blockIdx.z * gy +
// blockIdx.y. False for a CTA past the last tile row (gy * gz > tiles: the whole CTA returns). The
// 3-D grid spares the 64-bit division of a 1-D index (~35 uniform instructions of a ~640-instruction
// warp of the NVFP4 'both' tile kernel, ncu source counters).
__device__ __forceinline__ bool grid_tile(i64 M, i64& tq, i64& kt) {
    tq = (i64)blockIdx.z * gridDim.y + blockIdx.y;
    kt = blockIdx.x;
    return tq * QT_M < M;
}

template <int FMT, int DT, bool EXT = true, int XM = QFLAG_EXT_ALL, int STASH = 0, bool RUN4 = false>
__device__ __forceinline__ void quantize_tile(const void* x, i64 M, i64 K, u8* row_data, u8* row_scales,
                                              u8* col_data, u8* col_scales, const float* amax_row,
                                              const float* amax_col, int flags, u64 seed, u32 rht_mask, i64 tile_idx,
                                              bool tab_ready = false) {
    const i64 tiles_k = (K + QT_K - 1) / QT_K;
    const i64 tq = div_fast(tile_idx, tiles_k);
    quantize_tile_rc<FMT, DT, EXT, XM, STASH, false, RUN4>(x, M, K, row_data, row_scales, col_data, col_scales, amax_row, amax_col, flags,
                                       seed, rht_mask, tq, tile_idx - tq * tiles_k, tab_ready);
}

}  // namespace fp4kit


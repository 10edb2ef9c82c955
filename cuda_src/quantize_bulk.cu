// fp4kit: the columnwise operand alone (MXFP8 / MXFP6, 16-bit input, compact scales) with its input
// brought into shared memory by the Hopper bulk copy engine (cp.async.bulk, completing on an
// mbarrier), in a persistent CTA: one producer warp keeps NS stages of 128 rows x 64 columns in
// flight while 8 consumer warps quantize the stages already landed, so the next tile's bytes are in
// flight without holding registers (quantize_cols.cu's c2 kernel loads each pass into registers and
// has nothing in flight while it encodes).
//
// Work unit: 64 columns x 1024 rows (the c2 kernel's tile: 32 compact scale bytes per column, one
// sector), in 8 chunks of 128 rows. Consumer warps 0-3 take the even chunks, 4-7 the odd ones; in a
// chunk, warp w takes rows 32 w .. 32 w + 31, lane (j, p) = (lane / 16, lane % 16) rows 16 j .. 16 j
// + 15 of columns 4 p .. 4 p + 3 (a half-warp reads one 128-byte row of the stage: no bank conflict),
// so an MX block is lanes p and p + 16 and their 16-byte code stores fill one 32-byte sector.
// Conditions (the planner's): 16-bit input with 16-byte aligned rows (K % 8 == 0, 16-byte aligned
// base), M % 16 == 0.
#define FP4KIT_E8M0_SELECT 1
#include "quantize_cols.cu"   // the c2 kernel with other CTA orders and store policies (experiment)

using namespace fp4kit;

namespace {

__device__ __forceinline__ u32 smem_u32(const void* p) { return (u32)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void mbar_init(u64* bar, u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive_expect_tx(u64* bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void mbar_arrive(u64* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}

__device__ __forceinline__ void mbar_wait(u64* bar, u32 parity) {
    u32 done, tries = 0;
    do {
        if (++tries == (1u << 30)) __trap();   // a lost arrival: fail loudly instead of hanging
        asm volatile(
            "{\n\t.reg .pred P;\n\t"
            "mbarrier.try_wait.parity.shared::cta.b64 P, [%1], %2;\n\t"
            "selp.u32 %0, 1, 0, P;\n\t}"
            : "=r"(done)
            : "r"(smem_u32(bar)), "r"(parity)
            : "memory");
    } while (!done);
}

// bytes (a multiple of 16) from global src to shared dst (both 16-byte aligned), completing on bar
__device__ __forceinline__ void bulk_load(void* dst, const void* src, u32 bytes, u64* bar) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
            smem_u32(dst)),
        "l"(src), "r"(bytes), "r"(smem_u32(bar))
        : "memory");
}

// a 2-D box of the tensor map tm, whose element (c0, c1) (c0 the column) lands at shared dst
// LDH 1: with an L2 evict-first policy
template <int LDH = 0>
__device__ __forceinline__ void bulk_tensor_load(void* dst, const void* tm, int c0, int c1, u64* bar) {
    if constexpr (LDH == 1) {
        asm volatile(
            "{\n\t.reg .b64 pol;\n\tcreatepolicy.fractional.L2::evict_first.b64 pol, 1.0;\n\t"
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%2, %3}], [%4], pol;\n\t}" ::"r"(
                smem_u32(dst)),
            "l"(tm), "r"(c0), "r"(c1), "r"(smem_u32(bar))
            : "memory");
        return;
    }
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
            smem_u32(dst)),
        "l"(tm), "r"(c0), "r"(c1), "r"(smem_u32(bar))
        : "memory");
}

// 16-byte code store; STP 0: plain, 1: streaming (.cs), 2: L2 evict-last policy, 3: L2 evict-first policy
template <int STP>
__device__ __forceinline__ void st_codes(u8* p, uint4 v) {
    if constexpr (STP == 0) {
        *reinterpret_cast<uint4*>(p) = v;
    } else if constexpr (STP == 1) {
        __stcs(reinterpret_cast<uint4*>(p), v);
    } else if constexpr (STP == 2) {
        asm volatile(
            "{\n\t.reg .b64 pol;\n\tcreatepolicy.fractional.L2::evict_last.b64 pol, 1.0;\n\t"
            "st.global.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, pol;\n\t}" ::"l"(p),
            "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
            : "memory");
    } else {
        asm volatile(
            "{\n\t.reg .b64 pol;\n\tcreatepolicy.fractional.L2::evict_first.b64 pol, 1.0;\n\t"
            "st.global.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, pol;\n\t}" ::"l"(p),
            "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
            : "memory");
    }
}

__device__ __forceinline__ void consumer_sync() { asm volatile("bar.sync 1, 256;" ::: "memory"); }

template <int DT>
__device__ __forceinline__ u32 absmax2b(u32 acc, u32 w) {
    if constexpr (DT == DTYPE_BFLOAT16) return bf2_max(acc, w & 0x7FFF7FFFu);
    u32 r;
    asm("max.f16x2 %0, %1, %2;" : "=r"(r) : "r"(acc), "r"(w & 0x7FFF7FFFu));
    return r;
}

template <int DT>
__device__ __forceinline__ float half_f32b(u32 w, int h) {
    return In<DT>::cvt((u16)(h ? (w >> 16) : w));
}

constexpr int BK_CW = 64;                  // columns of a unit
constexpr int BK_CHR = 128;                // rows of a chunk (one stage)
constexpr int BK_UR = 1024;                // rows of a unit
constexpr int BK_NCH = BK_UR / BK_CHR;     // chunks of a unit
constexpr int BK_STAGE = BK_CHR * BK_CW * 2;
constexpr int BK_THREADS = 288;            // 8 consumer warps + 1 producer warp

}  // namespace

// The first column and row of unit u: ORD 0 column strips fastest, 1 row bands fastest.
template <int ORD>
__device__ __forceinline__ void unit_origin(i64 u, i64 nkc, i64 nmb, i64& k0, i64& m0) {
    if constexpr (ORD == 0) {
        const i64 bm = u / nkc;
        k0 = (u - bm * nkc) * BK_CW;
        m0 = bm * BK_UR;
    } else {
        const i64 bk = u / nmb;
        m0 = (u - bk * nmb) * BK_UR;
        k0 = bk * BK_CW;
    }
}

// A CUtensorMap (cuTensorMapEncodeTiled's 128 opaque bytes), passed by value.
struct __align__(64) TensorMap {
    u64 v[16];
};

// Dynamic shared memory: NS * 16 KB of stages, 2 x 2 KB of scale bytes, 2 * NS mbarriers.
template <int FMT, int DT, int NS, bool TM, int STP = 0, int LDH = 0, int ORD = 0>
__device__ __forceinline__ void quantize_cols_bulk(const void* x, const TensorMap* tm, i64 M, i64 K, u8* col_data, u8* col_scales,
                                                   const float* amax_col, int flags) {
    typedef Fmt<FMT> F;
    static_assert(F::mx && !F::packed && F::block == 32, "MXFP8 / MXFP6");
    static_assert(NS % 2 == 0, "a stage keeps the parity of its chunks");
    constexpr int RB = BK_UR / F::block;   // 32 scale bytes per column of a unit
    extern __shared__ __align__(128) u8 smem[];
    u8* stages = smem;
    u8* sc = smem + NS * BK_STAGE;
    u64* full = reinterpret_cast<u64*>(sc + 2 * BK_CW * RB);
    u64* empty = full + NS;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

    if (threadIdx.x == 0) {
#pragma unroll
        for (int s = 0; s < NS; ++s) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], 4);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();

    const i64 nkc = (K + BK_CW - 1) / BK_CW;
    const i64 nmb = (M + BK_UR - 1) / BK_UR;
    const i64 nunits = nkc * nmb;

    if (warp == 8) {   // producer
        u32 i = 0;
        for (i64 u = blockIdx.x; u < nunits; u += gridDim.x) {
            i64 k0, m0;
            unit_origin<ORD>(u, nkc, nmb, k0, m0);
            const u32 cb = (u32)((K - k0) < BK_CW ? (K - k0) : BK_CW) * 2;
            for (int c = 0; c < BK_NCH; ++c, ++i) {
                const int s = i % NS;
                mbar_wait(&empty[s], ((i / NS) & 1) ^ 1);
                const i64 r0 = m0 + c * BK_CHR;
                const i64 left = M - r0;
                const int nr = left <= 0 ? 0 : (left < BK_CHR ? (int)left : BK_CHR);
                if constexpr (TM) {   // one box of 64 columns x 128 rows; zeros outside the tensor
                    if (lane == 0) {
                        mbar_arrive_expect_tx(&full[s], nr ? BK_STAGE : 0u);
                        if (nr) bulk_tensor_load<LDH>(stages + s * BK_STAGE, tm, (int)k0, (int)r0, &full[s]);
                    }
                    continue;
                }
                if (lane == 0) mbar_arrive_expect_tx(&full[s], (u32)nr * cb);
                __syncwarp();
                const u8* src = static_cast<const u8*>(x) + ((r0 * K + k0) << 1);
                for (int r = lane; r < nr; r += 32)
                    bulk_load(stages + s * BK_STAGE + r * (BK_CW * 2), src + r * (K << 1), cb, &full[s]);
            }
        }
        return;
    }

    const int g = warp >> 2, wy = warp & 3;
    const int j = lane >> 4, p = lane & 15;
    const int cl = 4 * p;   // the lane's first column within the unit
    const bool floor_rule = flags & QFLAG_RULE_FLOOR;
    const i64 nb = (M + F::block - 1) / F::block;
    u32 i = 0;
    int ul = 0;
    for (i64 u = blockIdx.x; u < nunits; u += gridDim.x, ++ul, i += BK_NCH) {
        i64 k0, m0;
        unit_origin<ORD>(u, nkc, nmb, k0, m0);
        const i64 kp = k0 + cl;
        u8* scb = sc + (ul & 1) * (BK_CW * RB);
#pragma unroll 1
        for (int c = g; c < BK_NCH; c += 2) {
            const u32 ii = i + c;
            const int s = ii % NS;
            const int rl = wy * 32 + j * 16;   // the segment's first row within the chunk
            const i64 gm = m0 + c * BK_CHR + rl;
            const bool ok = gm < M && kp < K;
            mbar_wait(&full[s], (ii / NS) & 1);
            u32 w[2][SEG];
            const u8* src = stages + s * BK_STAGE + rl * (BK_CW * 2) + cl * 2;
#pragma unroll
            for (int e = 0; e < SEG; ++e) {
                const uint2 q = *reinterpret_cast<const uint2*>(src + e * (BK_CW * 2));
                w[0][e] = ok ? q.x : 0u;
                w[1][e] = ok ? q.y : 0u;
            }
            __syncwarp();
            if (lane == 0) mbar_arrive(&empty[s]);
#pragma unroll
            for (int n = 0; n < 2; ++n) {
                u32 am = 0u;
#pragma unroll
                for (int e = 0; e < SEG; ++e) am = absmax2b<DT>(am, w[n][e]);
                am = absmax2b<DT>(am, __shfl_xor_sync(0xFFFFFFFFu, am, 16));
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    float mul;
                    const u32 code = block_scale<FMT>(half_f32b<DT>(am, h), floor_rule, amax_col, 0, mul);
                    float v[SEG];
#pragma unroll
                    for (int e = 0; e < SEG; ++e) v[e] = half_f32b<DT>(w[n][e], h);
                    u32 cw[4];
                    encode_seg<FMT>(v, mul, false, 0ull, 1u, 0, cw);
                    const i64 k = kp + 2 * n + h;
                    if (ok) st_codes<STP>(col_data + k * M + gm, make_uint4(cw[0], cw[1], cw[2], cw[3]));
                    if (j == 0) scb[(cl + 2 * n + h) * RB + c * 4 + wy] = (u8)code;
                }
            }
        }
        consumer_sync();
        // column r's 32 scale bytes b0 .. b0 + 31 of its compact row, as two 16-byte halves
        const int t = threadIdx.x;
        if (t < 2 * BK_CW) {
            const int r = t >> 1, half = t & 1;
            const i64 k = k0 + r, bb = m0 / F::block + half * 16;
            if (k < K && bb < nb) {
                const int n = (int)((nb - bb) < 16 ? (nb - bb) : 16);
                u8* dst = col_scales + k * nb + bb;
                const u8* sp = scb + r * RB + half * 16;
                if (n == 16 && aligned16(dst)) {
                    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(sp);
                } else {
                    for (int q = 0; q < n; ++q) dst[q] = sp[q];
                }
            }
        }
    }
}

#define FP4KIT_BULK_KERNEL(F, D, NS, MB)                                                                  \
    extern "C" __global__ void __launch_bounds__(BK_THREADS, MB)                                         \
    quantize_colsb_f##F##_d##D##_n##NS(const void* x, i64 M, i64 K, u8* col_data, u8* col_scales,         \
                                       const float* amax_col, int flags) {                                \
        quantize_cols_bulk<F, D, NS, false>(x, nullptr, M, K, col_data, col_scales, amax_col, flags);     \
    }                                                                                                     \
    extern "C" __global__ void __launch_bounds__(BK_THREADS, MB)                                         \
    quantize_colst_f##F##_d##D##_n##NS(const __grid_constant__ TensorMap tm, i64 M, i64 K, u8* col_data,  \
                                       u8* col_scales, const float* amax_col, int flags) {                \
        quantize_cols_bulk<F, D, NS, true>(nullptr, &tm, M, K, col_data, col_scales, amax_col, flags);    \
    }
FP4KIT_BULK_KERNEL(0, 1, 4, 2)
FP4KIT_BULK_KERNEL(0, 1, 6, 2)
FP4KIT_BULK_KERNEL(0, 1, 2, 3)
FP4KIT_BULK_KERNEL(0, 1, 8, 1)
FP4KIT_BULK_KERNEL(0, 2, 4, 2)
FP4KIT_BULK_KERNEL(2, 1, 4, 2)

// store-policy / load-hint / unit-order variants of the tensor kernel (MXFP8 E4M3, bfloat16, NS 4)
#define FP4KIT_BULK_VARIANT(STP, LDH, ORD, MB)                                                            \
    extern "C" __global__ void __launch_bounds__(BK_THREADS, MB)                                         \
    quantize_colst_f0_d1_n4_v##STP##LDH##ORD##_m##MB(const __grid_constant__ TensorMap tm, i64 M, i64 K,  \
                                                  u8* col_data, u8* col_scales, const float* amax_col,   \
                                                  int flags) {                                            \
        quantize_cols_bulk<0, 1, 4, true, STP, LDH, ORD>(nullptr, &tm, M, K, col_data, col_scales, amax_col, \
                                                         flags);                                          \
    }
FP4KIT_BULK_VARIANT(0, 0, 0, 1)
FP4KIT_BULK_VARIANT(1, 0, 0, 1)
FP4KIT_BULK_VARIANT(2, 0, 0, 1)
FP4KIT_BULK_VARIANT(3, 0, 0, 1)
FP4KIT_BULK_VARIANT(0, 1, 0, 1)
FP4KIT_BULK_VARIANT(2, 1, 0, 1)
FP4KIT_BULK_VARIANT(0, 0, 1, 1)
FP4KIT_BULK_VARIANT(2, 1, 1, 1)
FP4KIT_BULK_VARIANT(0, 0, 1, 2)
FP4KIT_BULK_VARIANT(3, 0, 1, 1)
FP4KIT_BULK_VARIANT(3, 0, 1, 2)
FP4KIT_BULK_VARIANT(3, 0, 0, 2)

// quantize_cols' c2 kernel (MXFP8 E4M3, bfloat16) with row bands fastest (ORD 1) and / or L2
// evict-first code stores (STP 3)
#define FP4KIT_C2_VARIANT(ORD, STP)                                                                       \
    extern "C" __global__ void __launch_bounds__(512, 1)                                                 \
    quantize_cols_f0_d1_c2_o##ORD##_s##STP(const void* x, i64 M, i64 K, u8* col_data, u8* col_scales,     \
                                           const float* amax_col, int flags) {                            \
        quantize_cols<0, 1, 1, 16, 2, false, 2, ORD, STP>(x, M, K, col_data, col_scales, amax_col, flags); \
    }
FP4KIT_C2_VARIANT(0, 3)
FP4KIT_C2_VARIANT(1, 0)
FP4KIT_C2_VARIANT(1, 3)
FP4KIT_C2_VARIANT(0, 9)
FP4KIT_C2_VARIANT(1, 9)

// fp4kit: the max |x| accumulation shared by amax.cu's global amax and the one-launch small NVFP4
// quantize (quantize.cu _rowsam), and the reduction of a value over a thread-block cluster.
#pragma once
#include "common/types.cuh"
#include "common/io.cuh"
#include "common/rht.cuh"

namespace fp4kit {

// This thread's max |x| bits (absmax_bits: NaN ignored) over elements tid, tid + stride, ... of
// x[0 .. n): 16-byte vectors when vec_ok (x 16-byte aligned), U vectors in flight per thread, the
// tail past the last whole vector element by element. KEEP: ordinary loads (the caller reads x
// again and wants it in L2); else streaming loads (read once).
template <int DT, bool KEEP = false, int U = 4>
__device__ __forceinline__ u32 amax_accumulate(const void* xv, i64 n, bool vec_ok, i64 tid, i64 stride) {
    typedef typename In<DT>::T T;
    constexpr int V = In<DT>::vec;
    const T* x = reinterpret_cast<const T*>(xv);
    u32 acc = 0;
    const i64 nvec = vec_ok ? n / V : 0;
    i64 i = tid;
    for (; i + (U - 1) * stride < nvec; i += U * stride) {
        uint4 r[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const void* p = x + (i + u * stride) * V;
            r[u] = KEEP ? __ldg(reinterpret_cast<const uint4*>(p)) : load_stream16(p);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            float v[V];
            In<DT>::unpack(r[u], v);
#pragma unroll
            for (int j = 0; j < V; ++j) acc = absmax_bits(acc, v[j]);
        }
    }
    for (; i < nvec; i += stride) {
        float v[V];
        const void* p = x + i * V;
        In<DT>::unpack(KEEP ? __ldg(reinterpret_cast<const uint4*>(p)) : load_stream16(p), v);
#pragma unroll
        for (int j = 0; j < V; ++j) acc = absmax_bits(acc, v[j]);
    }
    for (i64 e = nvec * V + tid; e < n; e += stride) acc = absmax_bits(acc, In<DT>::cvt(x[e]));
    return acc;
}

// One step of the plain + post-RHT amax pass over bfloat16 (amax.cu amax_plain_rht, grouped.cu
// group_amax_plain_rht): raw[i], the 32-bit word of two adjacent columns in row i of 16, folds its
// plain max |x| into acc_plain and the max |u| of the two 16-point transforms into acc_rht (bits of
// non-negative floats; NaN ignored).
__device__ __forceinline__ void plain_rht_pair(const u32 (&raw)[16], u32 sign_mask, u32& acc_plain, u32& acc_rht) {
    u32 pm = 0u;   // plain amax of the 32 values as bf16x2 (max.bf16x2 drops NaN)
#pragma unroll
    for (int i = 0; i < 16; ++i) asm("max.bf16x2 %0, %0, %1;" : "+r"(pm) : "r"(raw[i] & 0x7FFF7FFFu));
    const u32 plo = pm << 16, phi = pm & 0xFFFF0000u;
    acc_plain = plo > acc_plain ? plo : acc_plain;
    acc_plain = phi > acc_plain ? phi : acc_plain;
    float v[16];   // low column, then high column
#pragma unroll
    for (int i = 0; i < 16; ++i) v[i] = u2f(raw[i] << 16);
    u32 m = rht16_absmax_bits(v, sign_mask);
    acc_rht = m > acc_rht ? m : acc_rht;
#pragma unroll
    for (int i = 0; i < 16; ++i) v[i] = u2f(raw[i] & 0xFFFF0000u);
    m = rht16_absmax_bits(v, sign_mask);
    acc_rht = m > acc_rht ? m : acc_rht;
}

// The unsigned max of `acc` over the CTA's THREADS threads, returned to the threads of warp 0 (the
// others get their warp's max). Called by all threads.
template <int THREADS>
__device__ __forceinline__ u32 block_max_u32(u32 acc) {
    __shared__ u32 warp_max[THREADS / 32];
    acc = __reduce_max_sync(0xFFFFFFFFu, acc);
    if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x < 32) {
        acc = threadIdx.x < THREADS / 32 ? warp_max[threadIdx.x] : 0u;
        acc = __reduce_max_sync(0xFFFFFFFFu, acc);
    }
    return acc;
}

// Both halves of a cluster-wide barrier: every thread of every CTA of the cluster arrives, and
// shared (and global) memory written before it by any of them is visible after it to all.
__device__ __forceinline__ void cluster_sync_all() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// The unsigned max of `acc` over every thread of the cluster (sm_90+), returned to every thread.
// Called by all THREADS threads of each CTA. Each CTA reduces into its own shared word; after a
// cluster barrier each warp reads the cluster's words through distributed shared memory (lane r:
// CTA rank r); a second barrier keeps every CTA's word alive until all have read it.
template <int THREADS>
__device__ __forceinline__ u32 cluster_max_u32(u32 acc) {
    __shared__ u32 cta_max;
    acc = block_max_u32<THREADS>(acc);
    if (threadIdx.x == 0) cta_max = acc;
    cluster_sync_all();
    u32 ncta;
    asm("mov.u32 %0, %%cluster_nctarank;" : "=r"(ncta));
    const u32 lane = threadIdx.x & 31;
    u32 v = 0u;
    for (u32 r = lane; r < ncta; r += 32) {
        u32 remote, w;
        asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                     : "=r"(remote) : "r"((u32)__cvta_generic_to_shared(&cta_max)), "r"(r));
        asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(w) : "r"(remote) : "memory");
        v = v > w ? v : w;
    }
    v = __reduce_max_sync(0xFFFFFFFFu, v);
    cluster_sync_all();
    return v;
}

// Per-row and per-column max |x| (absmax_bits: NaN ignored; either output may be null) of the
// (M, K) matrix x, thread by thread 16 bytes of a row (V elements: one 16-byte load when x is
// 16-byte aligned and K % V == 0, else V element loads). Grid: (ceil(K / SPAN) column
// spans of SPAN = 32 V columns, row chunks); CTA (i, j) takes span i of the j-th of gridDim.y equal
// chunks of ARC_STEP-row steps, warp w rows w ARC_U .. w ARC_U + ARC_U - 1 of each step (all ARC_U
// loads issued first, a warp's 32 loads one 512-byte run of a row). A row's max: a warp reduction
// and one atomicMax per row and span. A column's: a running max per thread over the chunk, reduced
// over the CTA's warps through shared memory and folded in with one atomicMax per column and CTA.
// GRP (grouped.cu, members with one K stacked along M; M = rows_prefix[G]): rows index the
// whole matrix (the row-scaled per-row amax offsets are the row prefix), columns go to member g's
// out_cols + acol[g]: the running max is folded in whenever the step's member changes, and a step
// that straddles a member boundary (at most G - 1 per span) sends every value to its row's member.
// Streaming loads in row order: ordinary loads, or the rows in reverse order (so that the quantize
// kernel after it would find the last-read rows, its first ones, in L2), were no faster (16384^2:
// 1-4 % slower). FP4KIT_ARC_U: loads per thread and step (A/B probes). It replaced amax_rows_cols'
// 16-row x 256-column CTAs of 2-byte loads (H200, 8192^2 bfloat16: 69.9 -> 48.5 us for the per-row
// amax, against 36.0 for the global one; docs/performance.md item 155).
#ifndef FP4KIT_ARC_U
#define FP4KIT_ARC_U 4
#endif
constexpr int ARC_THREADS = 256, ARC_U = FP4KIT_ARC_U, ARC_STEP = (ARC_THREADS / 32) * ARC_U;

template <int V>
__device__ __forceinline__ void arc_fold_cols(u32 (&cacc)[V], u32 (*cred)[32 * V], i64 k0, i64 K, u32* out) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
#pragma unroll
    for (int j = 0; j < V; ++j) {
        cred[w][lane * V + j] = cacc[j];
        cacc[j] = 0u;
    }
    __syncthreads();
    for (int t = threadIdx.x; t < 32 * V; t += ARC_THREADS) {
        u32 m = 0u;
#pragma unroll
        for (int i = 0; i < ARC_THREADS / 32; ++i) m = cred[i][t] > m ? cred[i][t] : m;
        if (m != 0u && k0 + t < K) atomicMax(out + k0 + t, m);
    }
    __syncthreads();   // cred is reused by the next fold
}

template <int DT, bool GRP>
__device__ __forceinline__ void amax_rows_cols_vec(const void* xv, i64 M, i64 K, u32* out_rows, u32* out_cols,
                                                   const i64* rows_prefix, i64 G, const i64* acol) {
    typedef typename In<DT>::T T;
    constexpr int V = In<DT>::vec, SPAN = 32 * V;
    __shared__ u32 cred[ARC_THREADS / 32][SPAN];
    const T* x = reinterpret_cast<const T*>(xv);
    if constexpr (GRP) M = rows_prefix[G];   // 0 after a metadata error: nothing to do
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const i64 k0 = (i64)blockIdx.x * SPAN, c = k0 + lane * V;
    const bool cin = c < K;
    const bool vec = ((reinterpret_cast<u64>(xv) & 15) == 0) && (K % V == 0);   // 16-byte rows
    if (M <= 0 || K <= 0) return;
    const i64 steps = (M + ARC_STEP - 1) / ARC_STEP;
    const i64 per = (steps + gridDim.y - 1) / gridDim.y;
    const i64 s_lo = (i64)blockIdx.y * per, s_hi = s_lo + per < steps ? s_lo + per : steps;
    u32 cacc[V];
#pragma unroll
    for (int j = 0; j < V; ++j) cacc[j] = 0u;
    i64 cur = GRP ? -1 : 0;   // the member whose columns cacc holds (-1: none)
    for (i64 st = s_lo; st < s_hi; ++st) {
        const i64 r0 = st * ARC_STEP + w * ARC_U;   // this warp's first row
        uint4 raw[ARC_U];
#pragma unroll
        for (int u = 0; u < ARC_U; ++u) {
            raw[u] = make_uint4(0u, 0u, 0u, 0u);   // +0: no effect on a max
            if (r0 + u < M && cin) {
                const T* p = x + (r0 + u) * K + c;
                if (vec) {
                    raw[u] = load_stream16(p);
                } else {   // element by element (in the same 16-byte layout), those before K
                    u32 wd[4] = {0u, 0u, 0u, 0u};
#pragma unroll
                    for (int i = 0; i < V; ++i) {
                        if (c + i < K) {
                            if constexpr (sizeof(T) == 4) wd[i] = f2u(p[i]);
                            else wd[i >> 1] |= (u32)p[i] << (16 * (i & 1));
                        }
                    }
                    raw[u] = make_uint4(wd[0], wd[1], wd[2], wd[3]);
                }
            }
        }
        bool split = false;   // CTA-uniform
        if constexpr (GRP) {
            if (out_cols != nullptr) {
                const i64 a = st * ARC_STEP, e = (a + ARC_STEP < M ? a + ARC_STEP : M) - 1;
                const i64 glo = find_member(rows_prefix, G, a), ghi = find_member(rows_prefix, G, e);
                split = glo != ghi;
                if (split || glo != cur) {
                    if (cur >= 0) arc_fold_cols<V>(cacc, cred, k0, K, out_cols + acol[cur]);
                    cur = split ? -1 : glo;
                }
            }
        }
#pragma unroll
        for (int u = 0; u < ARC_U; ++u) {
            float v[V];
            In<DT>::unpack(raw[u], v);
            u32 b[V], rm = 0u;
#pragma unroll
            for (int j = 0; j < V; ++j) {
                b[j] = absmax_bits(0u, v[j]);
                rm = b[j] > rm ? b[j] : rm;
            }
            if (split) {   // GRP only: straight to the row's member
                if (r0 + u < M && cin) {
                    const i64 g = find_member(rows_prefix, G, r0 + u);
#pragma unroll
                    for (int j = 0; j < V; ++j)
                        if (b[j] != 0u) atomicMax(out_cols + acol[g] + c + j, b[j]);   // b[j] != 0: c + j < K
                }
            } else {
#pragma unroll
                for (int j = 0; j < V; ++j) cacc[j] = b[j] > cacc[j] ? b[j] : cacc[j];
            }
            if (out_rows != nullptr) {
                rm = __reduce_max_sync(0xFFFFFFFFu, rm);
                if (lane == 0 && rm != 0u && r0 + u < M) atomicMax(out_rows + r0 + u, rm);
            }
        }
    }
    if (out_cols != nullptr && cur >= 0 && s_lo < s_hi)
        arc_fold_cols<V>(cacc, cred, k0, K, out_cols + (GRP ? acol[cur] : 0));
}

}  // namespace fp4kit

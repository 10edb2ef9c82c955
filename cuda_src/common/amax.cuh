// fp4kit: the max |x| accumulation shared by amax.cu's global amax and the one-launch small NVFP4
// quantize (quantize.cu _rowsam), and the reduction of a value over a thread-block cluster.
#pragma once
#include "common/types.cuh"
#include "common/io.cuh"

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

}  // namespace fp4kit

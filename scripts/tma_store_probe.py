"""Probe (docs/performance.md item 115; no fp4kit kernel uses it): can the Hopper tensor-memory
accelerator store the columnwise code rows of an FP8 "both" quantize when they start off a 16-byte
boundary (M % 16 != 0, grouped members of any size), and what do partial sectors cost?

A stand-in for the columnwise half of the MXFP8 tile kernels, with no encode: x (M, K) 16-bit words,
y (K, M) bytes, y[k, m] = x[m, k] >> 8. A CTA of 256 threads takes `--strip` vertically adjacent
64 x 64 tiles: each tile goes to shared memory, each thread reads 16 rows of one column and puts
their 16 bytes in a run buffer (run c = output row k0 + c, 64 bytes, `--run-pitch` bytes apart),
and the runs leave by one of:
  direct  - each thread stores its 16 bytes (one 16-byte store when aligned, else bytes);
  words   - 16 lanes per run, aligned 4-byte words in the middle and bytes at both ends
            (fp4kit's ColStage::write);
  tma     - one thread per run issues a 64-byte 1-D tensor store at the run's byte offset
            (cp.async.bulk.tensor.1d, a tensor map over all of y); runs shorter than 64 bytes (a
            partial last tile) take `words`. Found: the run's start must be 16-byte aligned (8-byte
            aligned starts stop the kernel with an illegal instruction), so it cannot take these rows;
  sectors - a diagnostic: `words`, but only the words inside whole 32-byte sectors are stored
            (wrong bytes wherever a run starts or ends inside a sector).
Bytes are checked against NumPy (y poisoned first; `sectors` is expected to differ); times are
CUDA-event medians over rotated inputs, with a device-to-device copy of the same bytes (2 M K read
+ M K written) in the same run.

    python scripts/tma_store_probe.py [--shapes 8192x8192,8200x8192] [--variants words,sectors,tma]
                                      [--strip 1] [--run-pitch 128] [--reps 50]
"""
from __future__ import annotations

import argparse
import ctypes

import numpy as np

SRC = r"""
typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned char u8;
struct __align__(64) TensorMap { u64 v[16]; };   // first kernel parameter: CuPy packs it at offset 0

__device__ __forceinline__ u32 smem_addr(const void* p) { return (u32)__cvta_generic_to_shared(p); }

#ifndef RP
#define RP 128
#endif
template <int MODE>
__device__ __forceinline__ void tile(const unsigned short* __restrict__ x, u8* __restrict__ y, long long M,
                                     long long K, const TensorMap* tm, long long tq, long long kt,
                                     unsigned short (*t)[64 + 8], u8* runs) {
    const long long m0 = tq * 64, k0 = kt * 64;
    const int tid = threadIdx.x;
    __syncthreads();   // the previous tile's reads of t / runs
    // load: row r = tid / 4 (and + 0 .. 3 passes), 16 elements at column segment tid % 4
#pragma unroll
    for (int p = 0; p < 1; ++p) {
        const int r = tid / 4, s = tid % 4;
        const long long gm = m0 + r, gk = k0 + s * 16;
        uint4 a = make_uint4(0, 0, 0, 0), b = a;
        if (gm < M && gk + 16 <= K) {
            const uint4* src = reinterpret_cast<const uint4*>(x + gm * K + gk);
            a = __ldcs(src);
            b = __ldcs(src + 1);
        }
        *reinterpret_cast<uint4*>(&t[r][s * 16]) = a;
        *reinterpret_cast<uint4*>(&t[r][s * 16 + 8]) = b;
    }
    __syncthreads();
    const int c = tid % 64, seg = tid / 64;
    u32 w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        u32 v = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) v |= (u32)(t[seg * 16 + 4 * i + j][c] >> 8) << (8 * j);
        w[i] = v;
    }
    const long long gk = k0 + c, gm = m0 + seg * 16;
    const int L = (int)((M - m0) < 64 ? (M - m0) : 64);
    if (MODE == 0) {   // direct
        if (gk < K && gm < M) {
            u8* dst = y + gk * M + gm;
            const int n = (int)((M - gm) < 16 ? (M - gm) : 16);
            if (n == 16 && (reinterpret_cast<u64>(dst) & 15) == 0) {
                *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
            } else {
                for (int b = 0; b < n; ++b) dst[b] = (u8)(w[b >> 2] >> (8 * (b & 3)));
            }
        }
        return;
    }
    *reinterpret_cast<uint4*>(runs + c * RP + seg * 16) = make_uint4(w[0], w[1], w[2], w[3]);
    if (MODE == 2) asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    const int nc = (int)((K - k0) < 64 ? (K - k0) : 64);
    if (MODE == 2 && L == 64) {
        if (tid < nc) {
            const long long off = (k0 + tid) * M + m0;
            asm volatile("cp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group [%0, {%1}], [%2];"
                         :: "l"(reinterpret_cast<u64>(tm)), "r"((int)off), "r"(smem_addr(runs + tid * RP))
                         : "memory");
            asm volatile("cp.async.bulk.commit_group;" ::: "memory");
            asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
        }
        return;
    }
    // words: 16 lanes per run, 2 runs per warp and pass, 8 warps: 16 runs per pass
    const int lane = tid & 31, h = lane & 15;
    for (int i = 0; i < 4; ++i) {
        const int cc = (tid >> 5) * 2 + (lane >> 4) + 16 * i;
        if (cc >= nc) continue;
        const u8* src = runs + cc * RP;
        u8* dst = y + (k0 + cc) * M + m0;
        const int lead = (int)((0u - (u32)reinterpret_cast<u64>(dst)) & 3u);
        const int head = lead < L ? lead : L;
        const int nw = (L - head) >> 2;
        const int tb = head + 4 * nw;
        if (MODE == 3) {   // diagnostic: words as `words` does, but only those in whole 32-byte sectors
            const int off = head + 4 * h, ob = off & ~3;
            const u64 a = reinterpret_cast<u64>(dst + off);
            const u32 lo = *reinterpret_cast<const u32*>(src + ob);
            const u32 hi = *reinterpret_cast<const u32*>(src + ((ob + 4) & 63));
            if (h < nw && (a & ~31ull) >= reinterpret_cast<u64>(dst) && (a | 31ull) < reinterpret_cast<u64>(dst + L))
                *reinterpret_cast<u32*>(dst + off) = __funnelshift_r(lo, hi, 8 * (off & 3));
            continue;
        }
        if (h < nw) {
            const int off = head + 4 * h, ob = off & ~3;
            const u32 lo = *reinterpret_cast<const u32*>(src + ob);
            const u32 hi = *reinterpret_cast<const u32*>(src + ((ob + 4) & 63));
            *reinterpret_cast<u32*>(dst + off) = __funnelshift_r(lo, hi, 8 * (off & 3));
        }
        if (h < head) dst[h] = src[h];
        if (h < L - tb) dst[tb + h] = src[tb + h];
    }
}

// CTA b: tile column kt = b % tiles_k, tile rows S (b / tiles_k) .. + S - 1 (a strip of S
// vertically adjacent tiles, so that one CTA writes S * 64 consecutive bytes of each code row)
#define PROBE(NAME, MODE)                                                                              \
    extern "C" __global__ void __launch_bounds__(256)                                                  \
    probe_##NAME(const __grid_constant__ TensorMap tm, const unsigned short* x, u8* y, long long M,    \
                 long long K, int S) {                                                                 \
        __shared__ __align__(128) unsigned short t[64][64 + 8];                                        \
        __shared__ __align__(128) u8 runs[64 * RP];                                                    \
        const long long tiles_k = (K + 63) / 64, tiles_m = (M + 63) / 64;                              \
        const long long kt = blockIdx.x % tiles_k, q0 = (blockIdx.x / tiles_k) * S;                     \
        for (long long tq = q0; tq < q0 + S && tq < tiles_m; ++tq) tile<MODE>(x, y, M, K, &tm, tq, kt, t, runs); \
    }
PROBE(direct, 0)
PROBE(words, 1)
PROBE(tma, 2)
PROBE(sectors, 3)
"""


def tensor_map_1d(ptr: int, nbytes: int, box: int) -> np.void:
    """cuTensorMapEncodeTiled: a 1-D uint8 tensor of nbytes at ptr, boxes of `box` bytes."""
    lib = ctypes.CDLL("libcuda.so.1")
    f = lib.cuTensorMapEncodeTiled
    f.restype = ctypes.c_int
    f.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
                  ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
                  ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32),
                  ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    buf = (ctypes.c_uint64 * 16)()
    dims = (ctypes.c_uint64 * 1)(nbytes)
    strides = (ctypes.c_uint64 * 1)(0)
    boxd = (ctypes.c_uint32 * 1)(box)
    es = (ctypes.c_uint32 * 1)(1)
    # CU_TENSOR_MAP_DATA_TYPE_UINT8 = 0; interleave none, swizzle none, L2 promotion none, no OOB fill
    rc = f(ctypes.addressof(buf), 0, 1, ctypes.c_void_p(ptr), dims, strides, boxd, es, 0, 0, 0, 0)
    if rc != 0:
        raise RuntimeError(f"cuTensorMapEncodeTiled: CUresult {rc}")
    dt = np.dtype([("v", "<u8", (16,))])
    return np.frombuffer(bytes(buf), dtype=dt)[0]


def main() -> int:
    import cupy as cp
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="8192x8192,8200x8192,8202x8192,65544x7168,65536x7168")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--variants", default="words,sectors")
    ap.add_argument("--strip", type=int, default=1, help="vertically adjacent tiles per CTA")
    ap.add_argument("--run-pitch", type=int, default=128, help="bytes between runs in shared memory")
    args = ap.parse_args()
    mod = cp.RawModule(code=SRC, options=("-std=c++17", f"-DRP={args.run_pitch}"))
    kern = {m: mod.get_function(f"probe_{m}") for m in args.variants.split(",")}
    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, run pitch {args.run_pitch}, "
          f"strip {args.strip}")
    print("| shape | variant | us | % of copy | bytes |")
    print("|---|---|---|---|---|")
    bad = 0
    for s in args.shapes.split(","):
        M, K = (int(v) for v in s.split("x"))
        nin = 3 if M * K * 3 * 3 < 6e9 else 2
        rng = cp.random.default_rng(M + K)
        xs = [rng.integers(0, 1 << 16, size=(M, K), dtype=cp.uint16) for _ in range(nin)]
        y = cp.empty((K, M), cp.uint8)
        tm = tensor_map_1d(y.data.ptr, y.nbytes, 64)
        grid = ((-(-M // (64 * args.strip))) * (-(-K // 64)),)
        want = (cp.asnumpy(xs[0]) >> 8).astype(np.uint8).T
        nbytes = 3 * M * K
        src = cp.empty(nbytes // 2, cp.uint8)
        dst = cp.empty_like(src)
        st, en = cp.cuda.Event(), cp.cuda.Event()

        def timeit(fn):
            fn(0)
            cp.cuda.Device().synchronize()
            ts = []
            for i in range(args.reps):
                st.record()
                fn(i)
                en.record()
                en.synchronize()
                ts.append(cp.cuda.get_elapsed_time(st, en) * 1e3)
            return float(np.median(ts))

        # a copy of the same bytes: nbytes / 2 read and written
        t_copy = timeit(lambda i: cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, src.nbytes, 3, 0))
        for m, fn in kern.items():
            if m == "tma" and M % 16:
                print(f"| {M}x{K} | tma | - | - | skipped: runs start off 16-byte boundaries |")
                continue
            y.fill(0xA5)
            print(f"{m} {M}x{K} ...", flush=True)
            fn(grid, (256,), (tm, xs[0], y, np.int64(M), np.int64(K), np.int32(args.strip)))
            ok = bool((cp.asnumpy(y) == want).all())
            bad += not ok and m != "sectors"
            t = timeit(lambda i: fn(grid, (256,), (tm, xs[i % nin], y, np.int64(M), np.int64(K), np.int32(args.strip))))
            print(f"| {M}x{K} | {m} | {t:.1f} | {100 * t_copy / t:.0f} % | {'equal' if ok else 'MISMATCH'} |")
        print(f"| {M}x{K} | copy of {nbytes / 1e6:.0f} MB | {t_copy:.1f} | 100 % | |")
    print(f"tma_store_probe: {bad} mismatching variant(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())

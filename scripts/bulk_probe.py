#!/usr/bin/env python3
"""Probe for cuda_src/quantize_bulk.cu (the columnwise operand alone through the bulk copy engine):
its bytes against fp4kit.quantize's (itself checked against the reference by the GPU tests) on
poisoned outputs, and its kernel time against quantize_cols' c2 kernel and a device-to-device copy
of the same bytes, in the same process. GPU only.

Usage: PYTHONPATH=. python3 scripts/bulk_probe.py [--shapes 8192x8192,...] [--reps 40]
"""
import argparse

import cupy as cp
import numpy as np

import fp4kit
from fp4kit import _loader

FMTS = {0: "mxfp8_e4m3", 1: "mxfp8_e5m2", 2: "mxfp6_e2m3", 3: "mxfp6_e3m2"}
DTS = {1: cp.dtype("uint16"), 2: cp.float16}
VARIANTS = [(0, 1, 4, 2), (0, 1, 6, 2), (0, 1, 2, 3), (0, 1, 8, 1), (0, 2, 4, 2), (2, 1, 4, 2)]
THREADS = 288


def tensor_map(x, M, K):
    """cuTensorMapEncodeTiled for x (M x K of 16-bit elements): boxes of 64 columns x 128 rows, zeros
    outside the tensor; returned as the numpy structured scalar CuPy passes by value."""
    import ctypes
    lib = ctypes.CDLL("libcuda.so.1")
    f = lib.cuTensorMapEncodeTiled
    f.restype = ctypes.c_int
    f.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
                  ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
                  ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32),
                  ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    buf = (ctypes.c_uint64 * 16)()
    dims = (ctypes.c_uint64 * 2)(K, M)
    strides = (ctypes.c_uint64 * 1)(K * 2)
    box = (ctypes.c_uint32 * 2)(64, 128)
    es = (ctypes.c_uint32 * 2)(1, 1)
    rc = f(ctypes.addressof(buf), 1, 2, ctypes.c_void_p(x.data.ptr), dims, strides, box, es, 0, 0, 2, 0)
    if rc != 0:
        raise RuntimeError(f"cuTensorMapEncodeTiled: CUresult {rc}")
    dt = np.dtype([("v", "<u8", (16,))])
    return np.frombuffer(bytes(buf), dtype=dt)[0]


def smem_bytes(ns):
    return ns * 128 * 64 * 2 + 2 * 64 * 32 + 2 * ns * 8


def make_input(M, K, d, seed):
    rng = cp.random.default_rng(seed)
    x = (rng.standard_normal((M, K), dtype=cp.float32) * (1 + seed)).astype(cp.float32)
    # specials in a few places: zeros, huge, tiny, NaN, inf
    flat = x.reshape(-1)
    n = flat.size
    idx = rng.integers(0, n, size=min(n, 4096))
    vals = cp.asarray(np.array([0.0, -0.0, 3e38, -3e38, 1e-40, np.nan, np.inf, -np.inf], np.float32))
    flat[idx] = vals[cp.arange(idx.size) % vals.size]
    if d == 1:   # bfloat16 by truncation of the float32 bits (any bf16 pattern is fine here)
        return (x.view(cp.uint32) >> 16).astype(cp.uint16), "bfloat16"
    return x.astype(cp.float16), "float16"


def as_fp4kit_input(xb, dname):
    if dname == "bfloat16":
        import torch
        return torch.from_dlpack(xb).view(torch.bfloat16)
    return xb


def run_bulk(fn, ns, mb, x, M, K, flags, sms, tm=False):
    nb = -(-M // 32)
    data = cp.full((K, M), 0xA5, cp.uint8)
    scales = cp.full((K, nb), 0x5A, cp.uint8)
    units = -(-K // 64) * -(-M // 1024)
    grid = min(units, sms * mb)
    fn((grid,), (THREADS,), (tensor_map(x, M, K) if tm else x, np.int64(M), np.int64(K), data, scales,
                             np.intp(0), np.int32(flags)),
       shared_mem=smem_bytes(ns))
    return data, scales


def check(args, sms):
    bad = 0
    shapes = [(8192, 8192), (1024, 64), (16, 8), (48, 72), (1040, 136), (3088, 4104), (2048, 7168)]
    for (f, d, ns, mb), tm in [(v, t) for v in VARIANTS for t in (False, True)]:
        fn = _loader.get_function("quantize_bulk", f"quantize_cols{'t' if tm else 'b'}_f{f}_d{d}_n{ns}")
        fn.max_dynamic_shared_size_bytes = smem_bytes(ns)
        for (M, K) in shapes:
            for rule, flags in (("rceil", 0), ("floor", 8)):
                x, dname = make_input(M, K, d, M + K)
                q = fp4kit.quantize(as_fp4kit_input(x, dname), FMTS[f], axis="columnwise", scale_rule=rule)
                want_d = cp.asarray(q.columnwise.data).view(cp.uint8)
                want_s = cp.asarray(q.columnwise.scales).view(cp.uint8)
                data, scales = run_bulk(fn, ns, mb, x, M, K, flags, sms, tm)
                cp.cuda.Device().synchronize()
                ok = bool((data == want_d).all()) and bool((scales == want_s).all())
                if not ok:
                    bad += 1
                    nd = int((data != want_d).sum())
                    ns_ = int((scales != want_s).sum())
                    print(f"MISMATCH {'t' if tm else 'b'} f{f} d{d} n{ns} {M}x{K} {rule}: data {nd}, scales {ns_}")
    print(f"bulk check: {bad} mismatching cases")
    return bad


def timed(launch, reps):
    launch(0)
    s, e = cp.cuda.Event(), cp.cuda.Event()
    cp.cuda.Device().synchronize()
    s.record()
    for i in range(reps):
        launch(i)
    e.record()
    e.synchronize()
    return cp.cuda.get_elapsed_time(s, e) * 1000.0 / reps


def bench(args, sms):
    for sh in args.shapes.split(","):
        M, K = (int(v) for v in sh.split("x"))
        nbuf = max(2, min(8, -(-(160 << 20) // (M * K * 2))))
        for d in (1, 2):
            xs = [make_input(M, K, d, i)[0] for i in range(nbuf)]
            nb = -(-M // 32)
            data = cp.empty((K, M), cp.uint8)
            scales = cp.empty((K, nb), cp.uint8)
            nbytes = M * K * 2 + M * K + K * nb
            src = cp.empty(nbytes // 2, cp.uint8)
            dst = cp.empty(nbytes // 2, cp.uint8)
            t_copy = timed(lambda i: dst.data.copy_from_device_async(src.data, src.nbytes), args.reps)
            rows = []
            c2 = _loader.get_function("quantize_cols", f"quantize_cols_f0_d{d}_c2")
            g2 = -(-K // 64) * -(-M // 1024)
            t = timed(lambda i: c2((g2,), (512,), (xs[i % nbuf], np.int64(M), np.int64(K), data, scales,
                                                   np.intp(0), np.int32(0))), args.reps)
            rows.append(("c2 (registers)", t))
            tms = [tensor_map(xb, M, K) for xb in xs]
            for (f, dd, ns, mb), tm in [(v, t) for v in VARIANTS for t in (True, False)]:
                if f != 0 or dd != d or (not tm and ns != 2):
                    continue
                fn = _loader.get_function("quantize_bulk", f"quantize_cols{'t' if tm else 'b'}_f{f}_d{d}_n{ns}")
                fn.max_dynamic_shared_size_bytes = smem_bytes(ns)
                units = -(-K // 64) * -(-M // 1024)
                srcs = tms if tm else xs
                for mult in sorted({mb, 1}):
                    grid = min(units, sms * mult)
                    t = timed(lambda i: fn((grid,), (THREADS,), (srcs[i % nbuf], np.int64(M), np.int64(K), data,
                                                                 scales, np.intp(0), np.int32(0)),
                                           shared_mem=smem_bytes(ns)), args.reps)
                    rows.append((f"{'tensor' if tm else 'rows'} NS={ns} {mult} CTA/SM", t))
            print(f"\n{M}x{K} {'bfloat16' if d == 1 else 'float16'} MXFP8 columnwise, compact; copy of "
                  f"{nbytes / 1e6:.1f} MB: {t_copy:.1f} us")
            for name, t in rows:
                print(f"  {name:24s} {t:8.1f} us  {100 * t_copy / t:5.1f} % of copy")


VNAMES = ["v000_m1", "v300_m1", "v001_m1", "v001_m2", "v301_m1", "v301_m2", "v300_m2"]
C2NAMES = ["c2_o0_s3", "c2_o1_s0", "c2_o1_s3"]
MOVE = ["c2_o0_s9", "c2_o1_s9"]   # data movement only (no encode; codes are not checked)


def variants(args, sms):
    """Store policy (STP: plain, .cs, L2 evict-last, L2 evict-first), input load hint (LDH: evict-first)
    and unit order (ORD: column strips or row bands fastest) of the tensor kernel, bf16 MXFP8 E4M3."""
    bad = 0
    for v in VNAMES:
        fn = _loader.get_function("quantize_bulk", f"quantize_colst_f0_d1_n4_{v}")
        fn.max_dynamic_shared_size_bytes = smem_bytes(4)
        for (M, K) in [(3088, 4104), (2048, 7168)]:
            x, dname = make_input(M, K, 1, 7)
            q = fp4kit.quantize(as_fp4kit_input(x, dname), "mxfp8_e4m3", axis="columnwise")
            data, scales = run_bulk(fn, 4, int(v[-1]), x, M, K, 0, sms, True)
            ok1 = (bool((data == cp.asarray(q.columnwise.data)).all())
                   and bool((scales == cp.asarray(q.columnwise.scales)).all()))
            for c in C2NAMES:
                f2 = _loader.get_function("quantize_bulk", f"quantize_cols_f0_d1_{c}")
                d2 = cp.full((K, M), 0xA5, cp.uint8)
                s2 = cp.full((K, -(-M // 32)), 0x5A, cp.uint8)
                f2((-(-K // 64) * -(-M // 1024),), (512,), (x, np.int64(M), np.int64(K), d2, s2, np.intp(0),
                                                           np.int32(0)))
                if not (bool((d2 == cp.asarray(q.columnwise.data)).all())
                        and bool((s2 == cp.asarray(q.columnwise.scales)).all())):
                    bad += 1
                    print(f"MISMATCH {c} {M}x{K}")
            if not ok1:
                bad += 1
                print(f"MISMATCH {v} {M}x{K}")
            continue
            if not (bool((data == cp.asarray(q.columnwise.data)).all())
                    and bool((scales == cp.asarray(q.columnwise.scales)).all())):
                bad += 1
                print(f"MISMATCH {v} {M}x{K}")
    for sh in args.shapes.split(","):
        M, K = (int(t) for t in sh.split("x"))
        nbuf = max(2, min(8, -(-(160 << 20) // (M * K * 2))))
        xs = [make_input(M, K, 1, i)[0] for i in range(nbuf)]
        tms = [tensor_map(xb, M, K) for xb in xs]
        nb = -(-M // 32)
        data = cp.empty((K, M), cp.uint8)
        scales = cp.empty((K, nb), cp.uint8)
        nbytes = M * K * 2 + M * K + K * nb
        src = cp.empty(nbytes // 2, cp.uint8)
        dst = cp.empty(nbytes // 2, cp.uint8)
        units = -(-K // 64) * -(-M // 1024)
        c2 = _loader.get_function("quantize_cols", "quantize_cols_f0_d1_c2")
        fns = [(v, _loader.get_function("quantize_bulk", f"quantize_colst_f0_d1_n4_{v}")) for v in VNAMES]
        for _, fn in fns:
            fn.max_dynamic_shared_size_bytes = smem_bytes(4)
        res = {}
        for rnd in range(2):   # two rounds, interleaved, to see the run-to-run spread
            res.setdefault("copy", []).append(
                timed(lambda i: dst.data.copy_from_device_async(src.data, src.nbytes), args.reps))
            res.setdefault("c2", []).append(timed(lambda i: c2((units,), (512,), (
                xs[i % nbuf], np.int64(M), np.int64(K), data, scales, np.intp(0), np.int32(0))), args.reps))
            for c in C2NAMES + MOVE:
                f2 = _loader.get_function("quantize_bulk", f"quantize_cols_f0_d1_{c}")
                res.setdefault(c, []).append(timed(lambda i: f2((units,), (512,), (
                    xs[i % nbuf], np.int64(M), np.int64(K), data, scales, np.intp(0), np.int32(0))), args.reps))
            for v, fn in fns:
                grid = min(units, sms * int(v[-1]))
                res.setdefault(v, []).append(timed(lambda i: fn((grid,), (THREADS,), (
                    tms[i % nbuf], np.int64(M), np.int64(K), data, scales, np.intp(0), np.int32(0)),
                    shared_mem=smem_bytes(4)), args.reps))
        t_copy = min(res["copy"])
        print(f"\n{M}x{K} bfloat16 MXFP8 columnwise compact, variants (STP LDH ORD _m CTAs/SM); copy "
              f"{t_copy:.1f} us")
        for k, ts in res.items():
            if k != "copy":
                print(f"  {k:10s} {ts[0]:8.1f} {ts[1]:8.1f} us  {100 * t_copy / min(ts):5.1f} % of copy")
    print(f"variant check: {bad} mismatching cases")
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="8192x8192,16384x16384,4096x4096,65536x7168")
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--variants", action="store_true")
    args = ap.parse_args()
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    print(cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), sms, "SMs")
    if args.variants:
        raise SystemExit(1 if variants(args, sms) else 0)
    bad = 0 if args.no_check else check(args, sms)
    bench(args, sms)
    print(f"\nbulk check: {bad} mismatching cases")
    raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()

"""Kernel timings beside a device-to-device copy of the same bytes (run by hand, not a test).

    PYTHONPATH=$PWD python3 tests/gpu/bench_kernels.py [M K]
"""
from __future__ import annotations

import sys

import numpy as np


def bench(fn, reps=20, rounds=5):
    """Median over `rounds` of the mean time of `reps` back-to-back calls (launches queue ahead)."""
    import cupy as cp

    for _ in range(3):
        fn()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(rounds):
        start.record()
        for _ in range(reps):
            fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) * 1e-3 / reps)
    return float(np.median(times))


def main(argv):
    import cupy as cp

    from fp4kit import _cuda
    from fp4kit._validate import quantize_options
    from fp4kit.formats import FORMATS

    M, K = (int(argv[1]), int(argv[2])) if len(argv) > 2 else (8192, 8192)
    x = (cp.random.standard_normal((M, K), dtype=cp.float32)).view(cp.uint32)
    x = ((x >> 16).astype(cp.uint16))    # bf16 bits
    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}  input {M}x{K} bfloat16")
    for fmt, axis, extra in [("mxfp8_e4m3", "rowwise", {}), ("mxfp8_e4m3", "both", {}),
                             ("mxfp4_e2m1", "rowwise", {}), ("nvfp4", "rowwise", {}), ("nvfp4", "both", {}),
                             ("nvfp4", "both", {"scale_layout": "swizzled"}),
                             ("nvfp4", "both", {"rht": True}), ("nvfp4", "rowwise", {"rounding": "stochastic"})]:
        f = FORMATS[fmt]
        opts = quantize_options((M, K), "bfloat16", fmt, axis=axis, **extra)
        t = bench(lambda: _cuda.quantize(x, opts, None, input_dtype="bfloat16"))
        nops = 2 if axis == "both" else 1
        out_bytes = nops * (M * f.packed_len(K) + M * f.num_blocks(K))
        nbytes = x.nbytes + out_bytes
        src = cp.empty(nbytes // 2, dtype=cp.uint8)
        dst = cp.empty_like(src)
        tc = bench(lambda: dst.__setitem__(Ellipsis, src))
        print(f"quantize {fmt:<11} {axis:<8} {str(extra):<30} {t * 1e6:8.1f} us  {nbytes / t / 1e9:7.0f} GB/s"
              f"  copy of the same bytes {nbytes / tc / 1e9:7.0f} GB/s  ratio {tc / t:5.2f}")
    t = bench(lambda: _cuda.compute_amax(x, "bfloat16", "global"))
    print(f"amax (global) alone       {t * 1e6:8.1f} us  {x.nbytes / t / 1e9:7.0f} GB/s")
    row, _ = _cuda.quantize(x, quantize_options((M, K), "bfloat16", "nvfp4"), None, input_dtype="bfloat16")
    t = bench(lambda: _cuda.dequantize(row["data"], row["scales"], row["amax"], "nvfp4", M, K, "compact", "bfloat16"))
    nbytes = row["data"].nbytes + row["scales"].nbytes + M * K * 2
    print(f"dequantize nvfp4 -> bf16 {t * 1e6:8.1f} us  {nbytes / t / 1e9:7.0f} GB/s")


if __name__ == "__main__":
    main(sys.argv)

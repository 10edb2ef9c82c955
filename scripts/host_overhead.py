#!/usr/bin/env python3
"""Where the host time of one small fp4kit call goes (M x 4096 bf16, warm): each layer timed alone
with perf_counter over many calls. Used for docs/performance.md."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np  # noqa: E402
import torch  # noqa: E402
import cupy as cp  # noqa: E402

import fp4kit  # noqa: E402
from fp4kit import _cuda, _interop, _validate  # noqa: E402


def t(fn, n=2000):
    for _ in range(100):
        fn()
    torch.cuda.synchronize()
    s = time.perf_counter()
    for _ in range(n):
        fn()
    e = time.perf_counter()
    torch.cuda.synchronize()
    return (e - s) / n * 1e6


x = torch.randn(16, 4096, device="cuda").to(torch.bfloat16)
xc = cp.asarray(np.random.default_rng(0).standard_normal((16, 4096)).astype(np.float32))
da = _interop.as_cupy(x)
out = cp.empty(1000, cp.uint8)
opts = _validate.quantize_options(da.shape, da.dtype, "mxfp8_e4m3")
optsn = _validate.quantize_options(da.shape, da.dtype, "nvfp4")
rows = [
    ("fp4kit.quantize torch bf16 mxfp8_e4m3", lambda: fp4kit.quantize(x, "mxfp8_e4m3")),
    ("fp4kit.quantize torch bf16 nvfp4", lambda: fp4kit.quantize(x, "nvfp4")),
    ("fp4kit.quantize cupy f32 mxfp8_e4m3", lambda: fp4kit.quantize(xc, "mxfp8_e4m3")),
    ("  _interop.as_cupy(torch)", lambda: _interop.as_cupy(x)),
    ("  _interop.current_stream(torch)", lambda: _interop.current_stream(x)),
    ("  _validate.quantize_options", lambda: _validate.quantize_options(da.shape, da.dtype, "mxfp8_e4m3")),
    ("  _cuda.quantize mxfp8 (allocs + launches)", lambda: _cuda.quantize(da.array, opts, input_dtype="bfloat16")),
    ("  _cuda.quantize nvfp4 (allocs + launches)", lambda: _cuda.quantize(da.array, optsn, input_dtype="bfloat16")),
    ("  _interop.to_library(cupy -> torch)", lambda: _interop.to_library(out, "torch")),
    ("  cupy.empty", lambda: cp.empty(4096, cp.uint8)),
    ("  torch.empty", lambda: torch.empty(4096, dtype=torch.uint8, device="cuda")),
]
print("| what | host us/call |\n|---|---|")
for name, fn in rows:
    print(f"| {name} | {t(fn):.1f} |")

import cProfile  # noqa: E402
import pstats  # noqa: E402
pr = cProfile.Profile()
pr.enable()
for _ in range(2000):
    fp4kit.quantize(xc, "mxfp8_e4m3")
pr.disable()
pstats.Stats(pr).sort_stats("cumtime").print_stats(30)

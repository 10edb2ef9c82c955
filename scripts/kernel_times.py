#!/usr/bin/env python3
"""Where an op's device time goes: every kernel and memset one call launches, with its device time
(torch.profiler / CUPTI, which sees CuPy's launches too), averaged over several calls on inputs
rotated beyond L2. For finding which launch of a multi-launch op (NVFP4 computed amax, grouped
ops, staged scales) to work on; scripts/bench.py remains the benchmark of record.

Usage: PYTHONPATH=. python3 scripts/kernel_times.py [--ops grp8-nvfp4-both,nvfp4-both,...] [--calls 20]

For an A/B of two source trees, run it once per tree in the same device call. A tree whose sources
the kernel cache has not seen compiles every module first (fp4kit.warmup; grouped.cu alone takes
tens of seconds in NVRTC), so leave a minute or two per tree before the first line appears.
"""
import argparse
import os
import sys
from collections import defaultdict

import numpy as np
import torch

import fp4kit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import _skewed_dims, rotating  # noqa: E402

N = 8192
GK, GM = 7168, 65536


def _single(fmt, M=N, dtype="bfloat16", K=N, amax=None, **kw):
    """amax: NVFP4's global amax supplied (one float32 on the device) instead of computed."""
    def make():
        dt = getattr(torch, dtype)
        if amax is not None:
            kw["amax"] = torch.full((1,), amax, device="cuda")
        nxt = rotating(lambda i: (torch.randn(M, K, device="cuda") * (1 + i)).to(dt), M * K * dt.itemsize)
        return lambda: fp4kit.quantize(nxt(), fmt, **kw)
    return make


def _grouped(fmt, G, multiple, loop, amax=False, dtype="bfloat16", **kw):
    """amax: supply one amax per member (4.0 each) instead of computing them."""
    def make():
        x = torch.randn(GM, GK, device="cuda").to(getattr(torch, dtype))
        dims = _skewed_dims(G, GM, seed=G, multiple=multiple)
        a = torch.full((G,), 4.0, device="cuda") if amax else None
        if loop:
            starts = np.cumsum([0] + dims[:-1])
            per = [(x[s:s + m], a[g:g + 1] if amax else None) for g, (s, m) in enumerate(zip(starts, dims)) if m]
            return lambda: [fp4kit.quantize(p, fmt, amax=pa, **kw) for p, pa in per]
        d = torch.tensor(dims, dtype=torch.int64, device="cuda")
        return lambda: fp4kit.group_quantize(x, fmt, first_dims=d, amax=a, **kw)
    return make


OPS = {
    "mxfp8-both": _single("mxfp8_e4m3", axis="both"),
    "mxfp8-both-swz": _single("mxfp8_e4m3", axis="both", scale_layout="swizzled"),
    "mxfp8-col": _single("mxfp8_e4m3", axis="columnwise"),
    "mxfp8-col-16k2": _single("mxfp8_e4m3", M=16384, K=16384, axis="columnwise"),
    "mxfp6-col-16k2": _single("mxfp6_e2m3", M=16384, K=16384, axis="columnwise"),
    "mxfp8-both-16k": _single("mxfp8_e4m3", M=16384, axis="both", scale_layout="swizzled"),
    # M % 16 != 0: columnwise code rows off a 16-byte boundary (staged run writer)
    "mxfp8-both-m8200": _single("mxfp8_e4m3", M=8200, axis="both"),
    "mxfp8-both-m8200-swz": _single("mxfp8_e4m3", M=8200, axis="both", scale_layout="swizzled"),
    # M % 128 != 0, M % 16 == 0: aligned code rows, a partial last square row
    "mxfp8-both-m8256": _single("mxfp8_e4m3", M=8256, axis="both"),
    "mxfp8-both-m8256-swz": _single("mxfp8_e4m3", M=8256, axis="both", scale_layout="swizzled"),
    # shapes off the multiples of 128: K % 16 != 0 (rowwise code rows off 16 bytes), FP4 with M % 32 != 0
    "mxfp8-both-k8200": _single("mxfp8_e4m3", K=8200, axis="both", scale_layout="swizzled"),
    "mxfp8-row-k8200": _single("mxfp8_e4m3", K=8200, axis="rowwise"),
    "nvfp4-both-m8200": _single("nvfp4", M=8200, axis="both", scale_layout="swizzled"),
    "nvfp4-both-m8200-c": _single("nvfp4", M=8200, axis="both"),
    "mxfp4-both-m8200-c": _single("mxfp4_e2m1", M=8200, axis="both"),
    "nvfp4-both-k8200": _single("nvfp4", K=8200, axis="both", scale_layout="swizzled"),
    "mxfp4-both-m8200": _single("mxfp4_e2m1", M=8200, axis="both", scale_layout="swizzled"),
    "mxfp4-both": _single("mxfp4_e2m1", axis="both"),
    "mxfp4-row": _single("mxfp4_e2m1", axis="rowwise"),
    "mxfp4-col": _single("mxfp4_e2m1", axis="columnwise"),
    "mxfp4-both-swz": _single("mxfp4_e2m1", axis="both", scale_layout="swizzled"),
    "mxfp4-both-m16k-swz": _single("mxfp4_e2m1", M=16384, axis="both", scale_layout="swizzled"),
    "mxfp4-col-16k": _single("mxfp4_e2m1", M=16384, axis="columnwise"),
    # columnwise alone by row length K (MXFP4 stages its compact scales from _plan.STAGED_MXFP4_COL_MIN_K)
    "mxfp4-col-16k2": _single("mxfp4_e2m1", M=16384, K=16384, axis="columnwise"),
    "mxfp4-col-16k2-f32": _single("mxfp4_e2m1", M=16384, K=16384, axis="columnwise", dtype="float32"),
    "mxfp4-col-k12k": _single("mxfp4_e2m1", K=12288, axis="columnwise"),
    "mxfp4-col-k16k": _single("mxfp4_e2m1", K=16384, axis="columnwise"),
    "mxfp4-col-k32k": _single("mxfp4_e2m1", M=4096, K=32768, axis="columnwise"),
    "mxfp4-col-m32k": _single("mxfp4_e2m1", M=32768, K=4096, axis="columnwise"),
    "mxfp4-col-m16k-k4k": _single("mxfp4_e2m1", M=16384, K=4096, axis="columnwise"),
    "mxfp4-col-m12k": _single("mxfp4_e2m1", M=12288, axis="columnwise"),
    "mxfp4-col-big": _single("mxfp4_e2m1", M=65536, K=7168, axis="columnwise"),
    "mxfp4-both-16k-f16": _single("mxfp4_e2m1", M=16384, K=16384, axis="both", dtype="float16"),
    "mxfp4-both-16k-f32": _single("mxfp4_e2m1", M=16384, K=16384, axis="both", dtype="float32"),
    "mxfp4-both-k16k-f32": _single("mxfp4_e2m1", K=16384, axis="both", dtype="float32"),
    "mxfp4-both-k16k-f16": _single("mxfp4_e2m1", K=16384, axis="both", dtype="float16"),
    "mxfp4-both-m16k-f32": _single("mxfp4_e2m1", M=16384, axis="both", dtype="float32"),
    "mxfp4-both-m16k-f16": _single("mxfp4_e2m1", M=16384, axis="both", dtype="float16"),
    "mxfp4-both-k32k-f32": _single("mxfp4_e2m1", M=4096, K=32768, axis="both", dtype="float32"),
    "mxfp4-both-m32k-f32": _single("mxfp4_e2m1", M=32768, K=4096, axis="both", dtype="float32"),
    "mxfp4-both-k12k-f16": _single("mxfp4_e2m1", K=12288, axis="both", dtype="float16"),
    "mxfp4-both-f32": _single("mxfp4_e2m1", axis="both", dtype="float32"),
    "mxfp8-row": _single("mxfp8_e4m3", axis="rowwise"),
    "mxfp6-both": _single("mxfp6_e2m3", axis="both"),
    "mxfp6-both-swz": _single("mxfp6_e2m3", axis="both", scale_layout="swizzled"),
    "mxfp6-both-16k2": _single("mxfp6_e2m3", M=16384, K=16384, axis="both"),
    "mxfp6-both-16k2-swz": _single("mxfp6_e2m3", M=16384, K=16384, axis="both", scale_layout="swizzled"),
    "mxfp6-row": _single("mxfp6_e2m3", axis="rowwise"),
    "mxfp6-col": _single("mxfp6_e2m3", axis="columnwise"),
    "mxfp6-e3m2-both": _single("mxfp6_e3m2", axis="both"),
    "mxfp6-both-m8200": _single("mxfp6_e2m3", M=8200, axis="both"),
    "mxfp6-both-m8200-swz": _single("mxfp6_e2m3", M=8200, axis="both", scale_layout="swizzled"),
    "mxfp6-both-m8200-f16": _single("mxfp6_e2m3", M=8200, axis="both", dtype="float16"),
    "mxfp6-e3m2-both-m8200": _single("mxfp6_e3m2", M=8200, axis="both"),
    "mxfp6-both-m8256": _single("mxfp6_e2m3", M=8256, axis="both"),
    "mxfp6-both-m8256-swz": _single("mxfp6_e2m3", M=8256, axis="both", scale_layout="swizzled"),
    "mxfp6-both-m1000": _single("mxfp6_e2m3", M=1000, axis="both"),
    "mxfp6-both-m1032-k4k": _single("mxfp6_e2m3", M=1032, K=4096, axis="both"),
    "mxfp6-both-m2056": _single("mxfp6_e2m3", M=2056, K=8192, axis="both"),
    "mxfp6-both-m4104": _single("mxfp6_e2m3", M=4104, K=8192, axis="both"),
    "mxfp6-both-m4160": _single("mxfp6_e2m3", M=4160, K=8192, axis="both"),
    "mxfp6-both-m4104-k4k": _single("mxfp6_e2m3", M=4104, K=4096, axis="both"),
    "mxfp6-both-m8200-k4k": _single("mxfp6_e2m3", M=8200, K=4096, axis="both"),
    "mxfp6-both-m16392-k4k": _single("mxfp6_e2m3", M=16392, K=4096, axis="both"),
    "mxfp6-both-m1032-k16k": _single("mxfp6_e2m3", M=1032, K=16384, axis="both"),
    "mxfp6-both-m2056-k16k": _single("mxfp6_e2m3", M=2056, K=16384, axis="both"),
    "mxfp8-both-m1024-k4k": _single("mxfp8_e4m3", M=1024, K=4096, axis="both"),
    "mxfp8-both-m4096-k4k": _single("mxfp8_e4m3", M=4096, K=4096, axis="both"),
    "mxfp8-both-m2048": _single("mxfp8_e4m3", M=2048, K=8192, axis="both"),
    "mxfp8-both-m4096": _single("mxfp8_e4m3", M=4096, K=8192, axis="both"),
    "mxfp4-both-m1024-k4k": _single("mxfp4_e2m1", M=1024, K=4096, axis="both"),
    "mxfp4-both-m4096-k4k": _single("mxfp4_e2m1", M=4096, K=4096, axis="both"),
    "mxfp4-both-m2048": _single("mxfp4_e2m1", M=2048, K=8192, axis="both"),
    "mxfp4-both-m4096": _single("mxfp4_e2m1", M=4096, K=8192, axis="both"),
    "mxfp8-both-m2056": _single("mxfp8_e4m3", M=2056, K=8192, axis="both"),
    "mxfp8-both-m4104": _single("mxfp8_e4m3", M=4104, K=8192, axis="both"),
    "mxfp8-both-m16392-k4k": _single("mxfp8_e4m3", M=16392, K=4096, axis="both"),
    "mxfp8-both-m1032-k16k": _single("mxfp8_e4m3", M=1032, K=16384, axis="both"),
    "mxfp8-both-m8200-k16k": _single("mxfp8_e4m3", M=8200, K=16384, axis="both"),
    "mxfp4-both-m2056": _single("mxfp4_e2m1", M=2056, K=8192, axis="both"),
    "mxfp4-both-m4104": _single("mxfp4_e2m1", M=4104, K=8192, axis="both"),
    "mxfp4-both-m16392-k4k": _single("mxfp4_e2m1", M=16392, K=4096, axis="both"),
    "mxfp4-both-m1032-k16k": _single("mxfp4_e2m1", M=1032, K=16384, axis="both"),
    "mxfp4-both-m8200-k16k": _single("mxfp4_e2m1", M=8200, K=16384, axis="both"),
    "mxfp8-both-m1032-k4k": _single("mxfp8_e4m3", M=1032, K=4096, axis="both"),
    "mxfp8-both-m4104-k4k": _single("mxfp8_e4m3", M=4104, K=4096, axis="both"),
    "mxfp4-both-m1032-k4k": _single("mxfp4_e2m1", M=1032, K=4096, axis="both"),
    "mxfp4-both-m4104-k4k": _single("mxfp4_e2m1", M=4104, K=4096, axis="both"),
    "nvfp4-row": _single("nvfp4", axis="rowwise"),
    "nvfp4-both": _single("nvfp4", axis="both"),
    "nvfp4-both-swz": _single("nvfp4", axis="both", scale_layout="swizzled"),
    "nvfp4-both-f16": _single("nvfp4", axis="both", dtype="float16"),
    "nvfp4-both-f32": _single("nvfp4", axis="both", dtype="float32"),
    "mxfp8-both-m8320": _single("mxfp8_e4m3", M=8320, axis="both"),
    "nvfp4-both-16k": _single("nvfp4", M=16384, K=16384, axis="both"),
    "nvfp4-both-16k-swz": _single("nvfp4", M=16384, K=16384, axis="both", scale_layout="swizzled"),
    "nvfp4-both-16k-amax": _single("nvfp4", M=16384, K=16384, axis="both", amax=4.0),
    "nvfp4-both-amax": _single("nvfp4", axis="both", amax=4.0),
    "nvfp4-both-4k-amax": _single("nvfp4", M=4096, K=4096, axis="both", amax=4.0),
    "nvfp4-both-4k-amax-swz": _single("nvfp4", M=4096, K=4096, axis="both", amax=4.0, scale_layout="swizzled"),
    "nvfp4-both-amax-swz": _single("nvfp4", axis="both", amax=4.0, scale_layout="swizzled"),
    "nvfp4-both-m2k-k7k-amax-swz": _single("nvfp4", M=2048, K=7168, axis="both", amax=4.0, scale_layout="swizzled"),
    "nvfp4-both-m64k-k7k-amax-swz": _single("nvfp4", M=65536, K=7168, axis="both", amax=4.0, scale_layout="swizzled"),
    "nvfp4-both-16k-amax-swz": _single("nvfp4", M=16384, K=16384, axis="both", amax=4.0, scale_layout="swizzled"),
    "nvfp4-both-m16k-amax": _single("nvfp4", M=16384, axis="both", amax=4.0),
    "nvfp4-both-k16k-amax": _single("nvfp4", K=16384, axis="both", amax=4.0),
    "nvfp4-both-k32k-amax": _single("nvfp4", M=4096, K=32768, axis="both", amax=4.0),
    "nvfp4-both-m32k-amax": _single("nvfp4", M=32768, K=4096, axis="both", amax=4.0),
    "mxfp4-both-16k": _single("mxfp4_e2m1", M=16384, K=16384, axis="both"),
    "mxfp4-both-m32k": _single("mxfp4_e2m1", M=32768, K=4096, axis="both"),
    "mxfp4-both-f16": _single("mxfp4_e2m1", axis="both", dtype="float16"),
    "mxfp4-both-swz-f16": _single("mxfp4_e2m1", axis="both", dtype="float16", scale_layout="swizzled"),
    "mxfp4-col-f16": _single("mxfp4_e2m1", axis="columnwise", dtype="float16"),
    "nvfp4-rht": _single("nvfp4", axis="both", rht=True, scale_layout="swizzled"),
    "nvfp4-sr": _single("nvfp4", axis="both", rounding="stochastic", seed=7),
    "nvfp4-sr-row": _single("nvfp4", axis="rowwise", rounding="stochastic", seed=7),
    "mxfp4-sr": _single("mxfp4_e2m1", axis="both", rounding="stochastic", seed=7),
    "mxfp4-sr-row": _single("mxfp4_e2m1", axis="rowwise", rounding="stochastic", seed=7),
    "nvfp4-2d": _single("nvfp4", axis="both", tile_2d=True),
    "nvfp4-rs": _single("nvfp4", axis="both", row_scaled=True),
    "nvfp4-rs-row": _single("nvfp4", axis="rowwise", row_scaled=True),
    "nvfp4-rs-16k": _single("nvfp4", M=16384, K=16384, axis="both", row_scaled=True),
    "nvfp4-rs-row-16k": _single("nvfp4", M=16384, K=16384, axis="rowwise", row_scaled=True),
}


# the columnwise operand alone by size (quantize_cols against the tile kernel): col-<fmt>-<M>x<K>[-swz]
for _M, _K in ((1024, 4096), (2048, 4096), (4096, 4096), (2048, 8192), (4096, 8192), (8192, 8192)):
    OPS[f"col-mxfp8-{_M}x{_K}"] = _single("mxfp8_e4m3", M=_M, K=_K, axis="columnwise")
    OPS[f"col-mxfp6-{_M}x{_K}"] = _single("mxfp6_e2m3", M=_M, K=_K, axis="columnwise")
    OPS[f"col-nvfp4-{_M}x{_K}"] = _single("nvfp4", M=_M, K=_K, axis="columnwise", amax=4.0)
    OPS[f"col-nvfp4-{_M}x{_K}-swz"] = _single("nvfp4", M=_M, K=_K, axis="columnwise", amax=4.0,
                                             scale_layout="swizzled")


def _big(fmt, dtype="bfloat16", **kw):   # one tensor of the grouped ops' shape (65536 x 7168)
    def make():
        x = torch.randn(GM, GK, device="cuda").to(getattr(torch, dtype))
        return lambda: fp4kit.quantize(x, fmt, **kw)
    return make


def _grouped1(fmt, dtype="bfloat16", **kw):   # the same tensor as a group of one member (device dims)
    def make():
        x = torch.randn(GM, GK, device="cuda").to(getattr(torch, dtype))
        d = torch.tensor([GM], dtype=torch.int64, device="cuda")
        return lambda: fp4kit.group_quantize(x, fmt, first_dims=d, **kw)
    return make


for _f, _fn in (("nvfp4", "nvfp4"), ("mxfp8", "mxfp8_e4m3"), ("mxfp6", "mxfp6_e2m3"), ("mxfp4", "mxfp4_e2m1")):
    OPS[f"big-{_f}-both"] = _big(_fn, axis="both", scale_layout="swizzled")
    OPS[f"grp1-{_f}-both"] = _grouped1(_fn, axis="both", scale_layout="swizzled")
    OPS[f"big-{_f}-both-f16"] = _big(_fn, "float16", axis="both", scale_layout="swizzled")
    OPS[f"grp1-{_f}-both-f16"] = _grouped1(_fn, "float16", axis="both", scale_layout="swizzled")
    if _f in ("nvfp4", "mxfp4"):   # stochastic rounding: one kernel's rate, single tensor against group of one
        OPS[f"big-{_f}-sr-both"] = _big(_fn, axis="both", scale_layout="swizzled", rounding="stochastic", seed=7)
        OPS[f"grp1-{_f}-sr-both"] = _grouped1(_fn, axis="both", scale_layout="swizzled", rounding="stochastic",
                                              seed=7)
for _G in (8, 64):
    for _m in (128, 2):
        for _f, _fn in (("mxfp8", "mxfp8_e4m3"), ("mxfp6", "mxfp6_e2m3"), ("mxfp4", "mxfp4_e2m1"), ("nvfp4", "nvfp4")):
            for _ax in ("rowwise", "both"):
                _name = f"grp{_G}-{_f}-{'row' if _ax == 'rowwise' else 'both'}{'' if _m == 128 else '-even'}"
                OPS[_name] = _grouped(_fn, _G, _m, False, axis=_ax, scale_layout="swizzled")
                OPS[_name + "-loop"] = _grouped(_fn, _G, _m, True, axis=_ax, scale_layout="swizzled")
                # compact scales (MXFP8 "both": the squares with staged scales and group_unswizzle_scales)
                OPS[_name + "-c"] = _grouped(_fn, _G, _m, False, axis=_ax, scale_layout="compact")
                OPS[_name + "-c-loop"] = _grouped(_fn, _G, _m, True, axis=_ax, scale_layout="compact")
    # other inputs, sizes % 128: grp<G>-<fmt>-<row|both>[-c]-<float16|float32>[-loop]
    for _dt in ("float16", "float32"):
        for _f, _fn in (("mxfp8", "mxfp8_e4m3"), ("mxfp6", "mxfp6_e2m3"), ("mxfp4", "mxfp4_e2m1"), ("nvfp4", "nvfp4")):
            for _ax in ("rowwise", "both"):
                for _lay in ("swizzled", "compact"):
                    _name = f"grp{_G}-{_f}-{'row' if _ax == 'rowwise' else 'both'}{'-c' if _lay == 'compact' else ''}-{_dt}"
                    OPS[_name] = _grouped(_fn, _G, 128, False, dtype=_dt, axis=_ax, scale_layout=_lay)
                    OPS[_name + "-loop"] = _grouped(_fn, _G, 128, True, dtype=_dt, axis=_ax, scale_layout=_lay)
    for _f, _fn in (("mxfp4", "mxfp4_e2m1"), ("nvfp4", "nvfp4")):   # stochastic rounding, sizes % 128
        for _ax in ("rowwise", "both"):
            _name = f"grp{_G}-{_f}-sr-{'row' if _ax == 'rowwise' else 'both'}"
            OPS[_name] = _grouped(_fn, _G, 128, False, axis=_ax, scale_layout="swizzled", rounding="stochastic",
                                  seed=7)
            OPS[_name + "-loop"] = _grouped(_fn, _G, 128, True, axis=_ax, scale_layout="swizzled",
                                            rounding="stochastic", seed=7)
            OPS[_name + "-even"] = _grouped(_fn, _G, 2, False, axis=_ax, scale_layout="swizzled",
                                            rounding="stochastic", seed=7)
            OPS[_name + "-even-loop"] = _grouped(_fn, _G, 2, True, axis=_ax, scale_layout="swizzled",
                                                 rounding="stochastic", seed=7)
    for _ax in ("rowwise", "both"):   # NVFP4 row-scaled (per-row / per-column amaxes), sizes % 128
        _name = f"grp{_G}-nvfp4-rs-{'row' if _ax == 'rowwise' else 'both'}"
        OPS[_name] = _grouped("nvfp4", _G, 128, False, axis=_ax, scale_layout="swizzled", row_scaled=True)
        OPS[_name + "-loop"] = _grouped("nvfp4", _G, 128, True, axis=_ax, scale_layout="swizzled", row_scaled=True)
    for _m in (128, 2):   # NVFP4 "both" with supplied amaxes
        _name = f"grp{_G}-nvfp4-both-amax{'' if _m == 128 else '-even'}"
        OPS[_name] = _grouped("nvfp4", _G, _m, False, amax=True, axis="both", scale_layout="swizzled")
        OPS[_name + "-loop"] = _grouped("nvfp4", _G, _m, True, amax=True, axis="both", scale_layout="swizzled")


def profile(fn, calls):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity
    with torch.profiler.profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    agg = defaultdict(lambda: [0, 0.0])
    for ev in prof.events():
        if ev.device_type == DeviceType.CUDA:
            a = agg[ev.name]
            a[0] += 1
            a[1] += ev.time_range.elapsed_us()
    return agg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default="grp8-nvfp4-both,grp8-nvfp4-both-loop")
    ap.add_argument("--calls", type=int, default=20)
    args = ap.parse_args()
    fp4kit.warmup()
    print(f"# kernel times on {torch.cuda.get_device_name()} ({args.calls} calls each; us per call)")
    for name in args.ops.split(","):
        agg = profile(OPS[name](), args.calls)
        total = sum(v[1] for v in agg.values()) / args.calls
        print(f"\n{name}: {total:.1f} us of kernels per call")
        for k, (n, us) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
            print(f"  {us / args.calls:9.1f} us  {n / args.calls:5.1f}x  {us / n:8.1f} us each  {k[:90]}")


if __name__ == "__main__":
    main()

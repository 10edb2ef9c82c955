"""fp4kit._plan (launch plans of quantize / compute_amax) and its two executors, on the CPU.

The plans are checked against hand-written expectations of what the launchers issued before the
planner existed (kernel names, grids, argument kinds and values, buffers and their order); the CuPy
executor against a recording fake CuPy; the torch executor against a fake torch and a fake
cuLaunchKernel that decodes the packed kernel-parameter array through ctypes.
"""
from __future__ import annotations

import ctypes
import os
import re
import sys
import threading
import types

import numpy as np
import pytest

from fp4kit import FORMATS, _cuda, _plan, _torch_exec
from fp4kit._plan import COPY, EMPTY, VIEW, ZEROS, Arg, Buffer, Launch, OperandSlots
from fp4kit._validate import quantize_options

SM = 132
X, NULL, SEED, AMAX = Arg("x"), Arg("null"), Arg("seed"), Arg("amax")


def buf(n):
    return Arg("buf", n)


def i64(v):
    return Arg("i64", v)


def i32(v):
    return Arg("i32", v)


def u32(v):
    return Arg("u32", v)


def plan_of(shape, dtype, fmt, align=16, amax_shape=None, **kw):
    opts = quantize_options(shape, dtype, fmt, amax_shape=amax_shape,
                            amax_dtype=None if amax_shape is None else "float32", **kw)
    return _plan.build_quantize_plan(shape[0], shape[1], dtype, opts, None if amax_shape is None else amax_shape[0],
                                     align, SM)


# ---------------------------------------------------------------------------------------------
# plans = what the launchers issued before (hand-written from the previous fp4kit/_cuda.py)

def test_mxfp8_rowwise_bf16_aligned():
    p = plan_of((16, 4096), "bfloat16", "mxfp8_e4m3")
    assert p.steps == (
        Buffer(0, (16, 4096), "uint8", EMPTY),
        Buffer(1, (16, 128), "uint8", EMPTY),
        # rowwise alone: _rows kernel, R = 4 for 16-bit input, lw = 4 (CTA rows of 16 segments of 16,
        # 16 rows per row group: M = 16 fits one): ceil(4096 / 256) x ceil(16 / (4 * 256 / 16)) CTAs
        Launch("quantize", "quantize_f0_d1_rows", 16, 256,
               (X, i64(16), i64(4096), buf(0), buf(1), NULL, i32(1 | 256), SEED, i32(4))),   # ROWWISE | VEC_IN
    )
    assert p.outputs == (OperandSlots(0, 1, None), None)


def test_mxfp8_both_swizzled_float32_zeroes_padding():
    p = plan_of((16, 4096), "float32", "mxfp8_e5m2", axis="both", scale_layout="swizzled", scale_rule="floor")
    assert [s for s in p.steps if type(s) is Buffer] == [
        Buffer(0, (16, 4096), "uint8", EMPTY), Buffer(1, (128, 128), "uint8", EMPTY),
        Buffer(2, (4096, 16), "uint8", EMPTY), Buffer(3, (4096, 4), "uint8", EMPTY)]
    flags = 1 | 2 | 4 | 8 | 256          # ROWWISE | COLUMNWISE | SWIZZLED | RULE_FLOOR | VEC_IN
    assert p.launches() == [
        Launch("quantize", "quantize_f1_d0_plain", 64, 256,
               (X, i64(16), i64(4096), buf(0), buf(1), buf(2), buf(3), NULL, NULL, i32(flags), SEED, u32(0xD7E8))),
        # rowwise scales (16, 128) swizzled to (128, 128): 1024 16-byte chunks, 16 per SM at most
        Launch("swizzle", "swizzle_zero_padding", 4, 256, (buf(1), i64(16), i64(128), i64(128), i64(128))),
        # columnwise scales (4096, 1) -> (4096, 4)
        Launch("swizzle", "swizzle_zero_padding", 4, 256, (buf(3), i64(4096), i64(1), i64(4096), i64(4))),
    ]


def test_mxfp8_compact_scales_staged_swizzled(size_rules_off):
    # (256, 512): both scale matrices, (256, 16) and (512, 8), have rows % 128 == 0 and blocks % 4 == 0:
    # the kernel writes them swizzled into staging buffers (no padding), unswizzle_scales copies them out
    p = plan_of((256, 512), "bfloat16", "mxfp8_e4m3", axis="both")
    assert [s for s in p.steps if type(s) is Buffer] == [
        Buffer(0, (256, 512), "uint8", EMPTY), Buffer(1, (256, 16), "uint8", EMPTY),
        Buffer(2, (512, 256), "uint8", EMPTY), Buffer(3, (512, 8), "uint8", EMPTY),
        Buffer(4, (256, 16), "uint8", EMPTY), Buffer(5, (512, 8), "uint8", EMPTY)]   # the staging buffers
    flags = 1 | 2 | 256 | 512 | 1024     # ROWWISE | COLUMNWISE | VEC_IN | COL_SCALES_SWZ | ROW_SCALES_SWZ
    assert p.launches() == [
        # MXFP8 "both" from bfloat16, M and K multiples of 128: one CTA of 4 x 256 threads per 128 x 128
        # square (8 of them), the scale blocks written whole into the staging buffers
        Launch("quantize", "quantize_f0_d1_quad", 8, 1024,
               (X, i64(256), i64(512), buf(0), buf(4), buf(2), buf(5), NULL, NULL, i32(flags), SEED, u32(0xD7E8))),
        # one launch for both matrices, one CTA per 128 x 64 tile of the compact scales: 2 + 4
        Launch("swizzle", "unswizzle_scales", 6, 256, (buf(4), i64(256), i64(16), i64(16), buf(1),
                                                       buf(5), i64(512), i64(8), i64(8), buf(3))),
    ]
    assert p.outputs == (OperandSlots(0, 1, None), OperandSlots(2, 3, None))
    # rowwise alone: the rows kernel writes whole sectors of compact scales itself (no staging)
    p = plan_of((256, 512), "bfloat16", "mxfp8_e5m2")
    assert p.launches() == [
        Launch("quantize", "quantize_f1_d1_rows", 1, 256,     # lw = 5: 32 x 512 per CTA, 1 x 8 of them
               (X, i64(256), i64(512), buf(0), buf(1), NULL, i32(1 | 256), SEED, i32(5)), 8)]
    # columnwise alone; E5M2 too
    assert [s.kernel for s in plan_of((256, 512), "float32", "mxfp8_e4m3", axis="columnwise").launches()] == [
        "quantize_f0_d0_plain", "unswizzle_scales"]
    # only the operand whose scales qualify (the 64 x 64 kernel, float32 input; from 16-bit input these
    # shapes take _quadm, which stages both): (96, 512) -> rowwise (96, 16) no, columnwise (512, 3) no;
    # (1000, 384) -> rowwise (1000, 12) no, columnwise (384, 32) yes (a partial last block is fine)
    assert "unswizzle_scales" not in [s.kernel for s in plan_of((96, 512), "float32", "mxfp8_e4m3",
                                                                 axis="both").launches()]
    p = plan_of((1000, 384), "float32", "mxfp8_e4m3", axis="both")
    # (one matrix: the second is empty)
    assert [s.args for s in p.launches() if s.kernel == "unswizzle_scales"] == [
        (buf(4), i64(384), i64(32), i64(32), buf(3), NULL, i64(0), i64(0), i64(0), NULL)]
    # FP6 stages too; not: swizzled output, the FP4 formats (measured slower that way)
    for fmt in ("mxfp6_e2m3", "mxfp6_e3m2"):
        kernels = [s.kernel for s in plan_of((256, 512), "bfloat16", fmt, axis="both").launches()]
        assert kernels.count("unswizzle_scales") == 1, fmt
    for fmt, kw in (("mxfp8_e4m3", {"scale_layout": "swizzled"}), ("mxfp6_e2m3", {"scale_layout": "swizzled"}),
                    ("nvfp4", {})):
        kernels = [s.kernel for s in plan_of((256, 512), "bfloat16", fmt, axis="both", **kw).launches()]
        assert "unswizzle_scales" not in kernels, (fmt, kw)
    # MXFP4: "both" with the plain recipe from any input (one launch for both operands)
    for dt in ("bfloat16", "float16", "float32"):
        kernels = [s.kernel for s in plan_of((256, 512), dt, "mxfp4_e2m1", axis="both").launches()]
        assert kernels.count("unswizzle_scales") == 1, dt
    for dt, kw in (("bfloat16", {"axis": "columnwise"}), ("float32", {"axis": "columnwise"}),
                   ("bfloat16", {"axis": "both", "rounding": "stochastic", "seed": 1}),
                   ("bfloat16", {"axis": "both", "scale_layout": "swizzled"})):
        kernels = [s.kernel for s in plan_of((256, 512), dt, "mxfp4_e2m1", **kw).launches()]
        assert "unswizzle_scales" not in kernels, (dt, kw)
    assert _plan.stage_scales("mxfp4_e2m1", 384, 32, both_plain_k=1024) and not _plan.stage_scales("mxfp4_e2m1", 384, 32)
    assert _plan.stage_scales("mxfp8_e4m3", 384, 32) and not _plan.stage_scales("mxfp8_e4m3", 384, 31)
    assert not _plan.stage_scales("mxfp8_e4m3", 320, 32) and not _plan.stage_scales("nvfp4", 384, 32)
    # NVFP4 "both" with the plain recipe stages from K >= STAGED_NVFP4_MIN_K on
    k = _plan.STAGED_NVFP4_MIN_K
    for shape, kw, want in (((128, k), {"axis": "both"}, True), ((128, k - 128), {"axis": "both"}, False),
                            ((128, k), {"axis": "both", "rounding": "stochastic", "seed": 1}, False),
                            ((128, k), {"axis": "both", "scale_layout": "swizzled"}, False),
                            ((128, k), {"axis": "columnwise"}, False)):
        for dt in ("bfloat16", "float32"):
            kernels = [s.kernel for s in plan_of(shape, dt, "nvfp4", **kw).launches()]
            assert ("unswizzle_scales" in kernels) == want, (shape, dt, kw, kernels)
    # MXFP4's columnwise operand alone stages in large tensors (M >= STAGED_MXFP4_COL_MIN_M, M K >
    # STAGED_MXFP4_COL_MIN_ELEMENTS), any input; checked on the plan's stage_scales arguments, since
    # building plans of such shapes is cheap (no buffers are allocated)
    m, n = _plan.STAGED_MXFP4_COL_MIN_M, _plan.STAGED_MXFP4_COL_MIN_ELEMENTS
    for shape, kw, want in (((m, n // m + 128), {"axis": "columnwise"}, True),
                            ((2 * m, n // m), {"axis": "columnwise"}, True),
                            ((m, n // m), {"axis": "columnwise"}, False),          # not more than n elements
                            ((m // 2, 4 * n // m), {"axis": "columnwise"}, False),  # M too small
                            ((m, n // m + 96), {"axis": "columnwise"}, False),     # K % 128 != 0: padding
                            ((m, n // m + 128), {"axis": "columnwise", "rounding": "stochastic", "seed": 1}, False),
                            ((m, n // m + 128), {"axis": "columnwise", "scale_layout": "swizzled"}, False),
                            ((m, n // m + 128), {"axis": "rowwise"}, False)):
        for dt in ("bfloat16", "float16", "float32"):
            kernels = [s.kernel for s in plan_of(shape, dt, "mxfp4_e2m1", **kw).launches()]
            assert ("unswizzle_scales" in kernels) == want, (shape, dt, kw, kernels)


def test_div_magic():
    """_plan.div_magic's (m, p): floor(n / d) == (n m) >> p with m < 2^32 for every n < 2^31 (the
    one-tile grouped kernel's band of a CTA); divisors and numerators at the edges and at random."""
    rng = np.random.default_rng(5)
    ds = list(range(1, 3000)) + [(1 << k) + e for k in range(12, 31) for e in (-1, 0, 1)] + \
        [int(v) for v in rng.integers(1, 1 << 31, 2000)]
    for d in ds:
        if d >= 1 << 31:
            continue
        m, p = _plan.div_magic(d)
        assert 0 < m < 1 << 32, d
        top = (1 << 31) - 1
        ns = [0, 1, d - 1, d, d + 1, top, top - 1, top // d * d, top // d * d - 1] + [int(v) for v in rng.integers(0, 1 << 31, 20)]
        for n in ns:
            if 0 <= n <= top:
                assert (n * m) >> p == n // d, (n, d)
    for bad in (0, -1, 1 << 31):
        with pytest.raises(ValueError):
            _plan.div_magic(bad)


def test_rows_kernel_width():
    # lw: CTA rows of 2^lw segments of 16 elements, the widest that K fills (2 .. 6)
    assert [_plan.rows_lw(k) for k in (1, 16, 64, 100, 127, 128, 256, 1000, 1023, 1024, 7168, 1 << 20)] == \
        [2, 2, 2, 2, 2, 3, 4, 5, 5, 6, 6, 6]
    # fewer than 256 rows: row groups of 256 / 2^lw rows that hold all M rows (one segment per thread)
    assert [_plan.rows_lw(4096, m) for m in (1, 2, 4, 15, 16, 17, 64, 128, 255, 256, 10**6)] == \
        [6, 6, 6, 4, 4, 3, 2, 2, 2, 6, 6]


def test_nvfp4_rowwise_computed_amax():
    # above SMALL_FUSED_MAX elements: a zeroed amax, the amax launch, then the rows kernel
    p = plan_of((1024, 2048), "bfloat16", "nvfp4")
    assert 1024 * 2048 > _plan.SMALL_FUSED_MAX
    assert p.steps == (
        Buffer(0, (1024, 1024), "uint8", EMPTY),
        Buffer(1, (1024, 128), "uint8", EMPTY),
        Buffer(2, (1,), "float32", ZEROS),
        # 2^21 elements in 16-byte vectors of 8: 2^18 items -> 1024 CTAs (8 per SM at most, 132 SMs)
        Launch("amax", "amax_global_d1", 1024, 256, (X, i64(1 << 21), i32(1), buf(2))),
        # 2048 / 1024 column blocks x 1024 / (4 x 4) block rows
        Launch("quantize", "quantize_f5_d1_rows", 2, 256,
               (X, i64(1024), i64(2048), buf(0), buf(1), buf(2), i32(1 | 256), SEED, i32(6)), 64),
    )
    assert p.outputs == (OperandSlots(0, 1, 2), None)


def test_rows_kernel_for_nvfp4_swizzled_scales():
    """NVFP4 rowwise from 16-bit input with swizzled scales takes the rows kernel that stores whole
    swizzled chunks (_rowsz); compact scales, float32 input, the MX formats and the extended options
    keep theirs."""
    def rows_launch(dtype, fmt, **kw):
        amax = ((1024,) if kw.get("row_scaled") else (1,)) if fmt == "nvfp4" else None
        p = plan_of((1024, 2048), dtype, fmt, amax_shape=amax, **kw)
        names = [s.kernel for s in p.steps if isinstance(s, Launch) and s.module == "quantize"]
        return names[-1]

    for dtype, d in (("bfloat16", 1), ("float16", 2)):
        assert rows_launch(dtype, "nvfp4", scale_layout="swizzled") == f"quantize_f5_d{d}_rowsz"
        assert rows_launch(dtype, "nvfp4") == f"quantize_f5_d{d}_rows"
        assert rows_launch(dtype, "mxfp4_e2m1", scale_layout="swizzled") == f"quantize_f4_d{d}_rows"
        assert rows_launch(dtype, "nvfp4", scale_layout="swizzled", rounding="stochastic") == f"quantize_f5_d{d}_rowssr"
        assert rows_launch(dtype, "nvfp4", scale_layout="swizzled", row_scaled=True).endswith("_rowsx")
    assert rows_launch("float32", "nvfp4", scale_layout="swizzled") == "quantize_f5_d0_rows"


def test_nvfp4_rowwise_computed_amax_small_one_launch():
    # at most SMALL_FUSED_MAX elements: clusters of 8 CTAs that each compute the amax (written into
    # an uninitialised buffer: no memset), then quantize the rows kernel's blocks, one per CTA
    p = plan_of((16, 4096), "bfloat16", "nvfp4")
    assert p.steps == (
        Buffer(0, (16, 2048), "uint8", EMPTY),
        Buffer(1, (16, 256), "uint8", EMPTY),
        Buffer(2, (1,), "float32", EMPTY),
        # lw 4: blocks of 4 x 16 rows x 256 columns -> 16 blocks, 2 clusters
        Launch("quantize", "quantize_f5_d1_rowsam", 16, 256,
               (X, i64(16), i64(4096), buf(0), buf(1), buf(2), i32(1 | 256), SEED, i32(4), i64(16))),
    )
    assert p.outputs == (OperandSlots(0, 1, 2), None)
    # float32 input: blocks of 2 x 8 rows x 512 columns -> 32 x 2 blocks, 8 clusters
    p = plan_of((500, 1000), "float32", "nvfp4", align=4)
    assert p.launches() == [Launch("quantize", "quantize_f5_d0_rowsam", 64, 256,
                                   (X, i64(500), i64(1000), buf(0), buf(1), buf(2), i32(1), SEED, i32(5),
                                    i64(32 * 2)))]
    assert [_plan.small_fused_grid(n) for n in (1, 8, 9, 64, 127, 128, 129, 10**6)] == \
        [8, 8, 16, 64, 128, 128, 128, 128]
    # the boundary, and what keeps the separate launches
    n = _plan.SMALL_FUSED_MAX
    assert [s.kernel for s in plan_of((n // 1024, 1024), "float16", "nvfp4").launches()] == ["quantize_f5_d2_rowsam"]
    for shape, kw in (((n // 1024 + 16, 1024), {}), ((16, 64), {"axis": "both"}), ((16, 64), {"axis": "columnwise"}),
                      ((16, 64), {"rounding": "stochastic"}), ((16, 64), {"row_scaled": True}),
                      ((16, 64), {"tile_2d": True}), ((16, 64), {"rht": True, "axis": "both"})):
        assert not any(s.kernel.endswith("_rowsam") for s in plan_of(shape, "bfloat16", "nvfp4", **kw).launches()), \
            (shape, kw)
    # a caller's amax: no amax pass, only its stored copy; empty input: a zeroed amax and no launch
    assert [s.kernel for s in plan_of((16, 64), "bfloat16", "nvfp4", amax_shape=(1,)).launches()] == \
        ["nvfp4_amax_out", "quantize_f5_d1_rows"]
    p = plan_of((0, 64), "bfloat16", "nvfp4")
    assert p.launches() == [] and p.steps[2] == Buffer(2, (1,), "float32", ZEROS)


def test_nvfp4_both_rht_one_amax_pass():
    p = plan_of((256, 512), "bfloat16", "nvfp4", axis="both", rht=True, scale_layout="swizzled", rht_sign_mask=0x1234)
    assert p.steps[4:7] == (Buffer(4, (5,), "float32", ZEROS), Buffer(5, (1,), "float32", VIEW, 4, 0),
                            Buffer(6, (1,), "float32", VIEW, 4, 4))         # 16 bytes apart (JAX)
    assert p.launches() == [
        # 16 row groups x 512 columns, 2 columns per thread: 4096 items -> 16 CTAs (4 per SM at most)
        Launch("amax", "amax_plain_rht_bf16", 16, 256, (X, i64(256), i64(512), u32(0x1234), buf(5), buf(6))),
        # (tiles along K, tiles along M): the 2-D grid of the single-tensor tile kernels
        Launch("quantize", "quantize_f5_d1_rht", 8, 256,
               (X, i64(256), i64(512), buf(0), buf(1), buf(2), buf(3), buf(5), buf(6), i32(1 | 2 | 4 | 128 | 256),
                SEED, u32(0x1234)), 4),
        # (256, 32) and (512, 16) scale matrices need no padding
    ]
    assert p.outputs == (OperandSlots(0, 1, 5), OperandSlots(2, 3, 6))


def test_nvfp4_both_rht_misaligned_input_two_amax_passes():
    p = plan_of((32, 64), "bfloat16", "nvfp4", axis="both", rht=True, align=1)
    assert p.launches() == [
        Launch("amax", "amax_rht_bf16", 1, 256, (X, i64(32), i64(64), u32(0xD7E8), buf(6))),
        Launch("amax", "amax_global_d1", 1, 256, (X, i64(2048), i32(0), buf(5))),
        Launch("quantize", "quantize_f5_d1_rht", 1, 256,
               (X, i64(32), i64(64), buf(0), buf(1), buf(2), buf(3), buf(5), buf(6), i32(1 | 2 | 128), SEED,
                u32(0xD7E8))),
    ]
    # 4-byte aligned: the one-pass kernel, but no 16-byte vector loads in quantize
    p4 = plan_of((32, 64), "bfloat16", "nvfp4", axis="both", rht=True, align=4)
    assert [s.kernel for s in p4.launches()] == ["amax_plain_rht_bf16", "quantize_f5_d1_rht"]
    # with another extended option as well: the full kernel
    p5 = plan_of((32, 64), "bfloat16", "nvfp4", axis="both", rht=True, rounding="stochastic")
    assert [s.kernel for s in p5.launches()][-1] == "quantize_f5_d1"
    assert p4.launches()[1].args[9] == i32(1 | 2 | 128)


def test_nvfp4_both_given_amax_and_plain_copy():
    p = plan_of((64, 128), "float16", "nvfp4", axis="both", amax_shape=(1,))
    # a given amax: both stored copies (sign bit cleared) from one launch ahead of the tile kernel,
    # which reads them
    assert [s for s in p.steps if type(s) is Buffer][4:] == [Buffer(4, (1,), "float32", EMPTY),
                                                              Buffer(5, (1,), "float32", EMPTY)]
    assert p.launches() == [
        Launch("quantize", "nvfp4_amax_out", 1, 256, (AMAX, i64(1), u32(0x7FFFFFFF), buf(4), buf(5), NULL, NULL, NULL)),
        Launch("quantize", "quantize_f5_d2_plain", 2, 256,
               (X, i64(64), i64(128), buf(0), buf(1), buf(2), buf(3), buf(4), buf(5),
                i32(1 | 2 | 256), SEED, u32(0xD7E8)))]
    assert p.outputs == (OperandSlots(0, 1, 4), OperandSlots(2, 3, 5))
    # computed: the columnwise operand gets a copy of the rowwise (plain) amax, from the same launch
    p = plan_of((64, 128), "float16", "nvfp4", axis="both")
    assert [s for s in p.steps if type(s) is Buffer][4:] == [Buffer(4, (1,), "float32", ZEROS),
                                                              Buffer(5, (1,), "float32", EMPTY)]
    assert [s.kernel for s in p.launches()] == ["amax_global_d2", "nvfp4_amax_out", "quantize_f5_d2_plain"]
    assert p.launches()[1].args == (buf(4), i64(1), u32(0xFFFFFFFF), NULL, buf(5), NULL, NULL, NULL)
    assert p.outputs == (OperandSlots(0, 1, 4), OperandSlots(2, 3, 5))
    # one operand, the rows and the cols kernels: the launch first; one amax per row: a grid of
    # several CTAs (grid-stride); an empty input: the launch alone
    for axis, main in (("rowwise", "quantize_f5_d1_rows"), ("columnwise", "quantize_cols_f5_d1_c")):
        p = plan_of((64, 128), "bfloat16", "nvfp4", axis=axis, amax_shape=(1,))
        k = [s.kernel for s in p.launches()]
        assert k[0] == "nvfp4_amax_out" and k[1].startswith(main) and len(k) == 2, k
        assert p.launches()[0].args[:3] == (AMAX, i64(1), u32(0x7FFFFFFF))
    p = plan_of((3000, 128), "bfloat16", "nvfp4", axis="both", row_scaled=True, amax_shape=(3000,))
    st = p.launches()[1]                  # after the columnwise operand's own (per-column) amax
    assert (st.kernel, st.grid) == ("nvfp4_amax_out", 12)
    assert st.args == (AMAX, i64(3000), u32(0x7FFFFFFF), buf(4), NULL, NULL, NULL, NULL)
    for shape in ((0, 128), (64, 0)):
        p = plan_of(shape, "bfloat16", "nvfp4", axis="both", amax_shape=(1,))
        assert [s.kernel for s in p.launches()] == ["nvfp4_amax_out"]
    p = plan_of((0, 128), "bfloat16", "nvfp4", axis="both", row_scaled=True, amax_shape=(0,))
    assert "nvfp4_amax_out" not in [s.kernel for s in p.launches()]


def test_rows_kernel_grid():
    # the rows kernels: (column blocks, block rows) with block rows past 65535 split over grid z (as
    # tile_grid); the CTAs past the last block row exit (quantize_tile.cuh grid_rows)
    assert _plan.rows_grid(8192, 8192, 4, 6) == (8, 512, 1)          # blocks of 16 x 1024
    assert _plan.rows_grid(1, 1, 2, 2) == (1, 1, 1)
    assert _plan.rows_grid(65535 * 16, 1024, 4, 6) == (1, 65535, 1)
    assert _plan.rows_grid(65535 * 16 + 1, 1024, 4, 6) == (1, 32768, 2)
    assert _plan.rows_grid(3 * 65535 * 8, 2048, 2, 6) == (2, 65535, 3)
    for M, K, R, lw in ((1, 1, 2, 2), (130, 200, 2, 2), (8192, 7168, 4, 6), (10**6 + 7, 96, 4, 3), (3 * 65535 * 8 + 5, 64, 2, 6)):
        gx, gy, gz = _plan.rows_grid(M, K, R, lw)
        block_rows = -(-M // (R * (256 >> lw)))
        assert gy <= 65535 and gx == -(-K // (16 << lw)), (M, K, R, lw)
        assert 0 <= gy * gz - block_rows < gz, (M, K, R, lw)          # every block row, fewer than gz spare
        assert gx * block_rows == _plan.rows_blocks(M, K, R, lw), (M, K, R, lw)
    p = plan_of((65535 * 16 + 1, 1024), "bfloat16", "mxfp8_e4m3")
    assert [(s.kernel, s.grid, s.grid_y, s.grid_z) for s in p.launches()] == [("quantize_f0_d1_rows", 1, 32768, 2)]
    # _rowsz (NVFP4, 16-bit input, swizzled scales) stays on one CTA per block in a 1-D grid
    assert _plan.rows_grid(8192, 8192, 4, 6, "_rowsz") == (512 * 8, 1, 1)
    p = plan_of((8192, 8192), "bfloat16", "nvfp4", amax_shape=(1,), scale_layout="swizzled")
    assert [(s.kernel, s.grid, s.grid_y, s.grid_z) for s in p.launches()][-1] == ("quantize_f5_d1_rowsz", 4096, 1, 1)
    p = plan_of((8192, 8192), "bfloat16", "nvfp4", amax_shape=(1,))
    assert [(s.kernel, s.grid, s.grid_y, s.grid_z) for s in p.launches()][-1] == ("quantize_f5_d1_rows", 8, 512, 1)


def test_tile_kernel_grid():
    # one CTA per 64 x 64 tile on a (tiles along K, tiles along M) grid; past 65535 tile rows, 1-D
    assert _plan.tile_grid(8192, 8192) == (128, 128, 1)
    assert _plan.tile_grid(1, 1) == (1, 1, 1)
    assert _plan.tile_grid(65535 * 64, 100) == (2, 65535, 1)
    assert _plan.tile_grid(65535 * 64 + 1, 100) == (2, 32768, 2)     # one CTA row past the last tile row
    assert _plan.tile_grid(3 * 65535 * 64, 64) == (1, 65535, 3)
    p = plan_of((65535 * 64 + 1, 64), "bfloat16", "mxfp8_e4m3", axis="both")
    assert [(s.kernel, s.grid, s.grid_y, s.grid_z) for s in p.launches()] == [("quantize_f0_d1_plain", 1, 32768, 2)]


def test_nvfp4_tile_kernel_precomputed_tables():
    # 8192^2 'both' (16384 tiles): the multiplier tables from one launch after the amax, written into a
    # fresh buffer whose two halves the tile kernel takes in place of the amaxes (QFLAG_ENC_TABS)
    p = plan_of((8192, 8192), "bfloat16", "nvfp4", axis="both")
    bufs = [s for s in p.steps if type(s) is Buffer]
    assert bufs[4:] == [Buffer(4, (1,), "float32", ZEROS), Buffer(5, (1,), "float32", EMPTY),
                        Buffer(6, (258,), "float32", EMPTY), Buffer(7, (129,), "float32", VIEW, 6, 0),
                        Buffer(8, (129,), "float32", VIEW, 6, 129)]
    assert p.launches()[1:] == [
        # the columnwise copy of the plain amax and both tables (from the copy's source)
        Launch("quantize", "nvfp4_amax_out", 1, 256,
               (buf(4), i64(1), u32(0xFFFFFFFF), NULL, buf(5), buf(4), buf(4), buf(6))),
        Launch("quantize", "quantize_f5_d1_plain", 128, 256,
               (X, i64(8192), i64(8192), buf(0), buf(1), buf(2), buf(3), buf(7), buf(8),
                i32(1 | 2 | 256 | 2048), SEED, u32(0xD7E8)), 128),
    ]
    assert p.outputs == (OperandSlots(0, 1, 4), OperandSlots(2, 3, 5))   # the amaxes stay the results
    # a given amax, one operand (tile_2d rowwise: the tile kernel), the RHT and SR kernels
    p = plan_of((8192, 4096), "float32", "nvfp4", tile_2d=True, amax_shape=(1,))
    assert [s.kernel for s in p.launches()] == ["nvfp4_amax_out", "quantize_f5_d0_t2d"]
    assert p.launches()[0].args == (AMAX, i64(1), u32(0x7FFFFFFF), buf(2), NULL, AMAX, NULL, buf(3))
    assert p.launches()[1].args[7:9] == (buf(4), NULL)
    for kw in ({"rht": True}, {"rounding": "stochastic"}):
        assert "nvfp4_amax_out" in [s.kernel for s in plan_of((8192, 4096), "bfloat16", "nvfp4", axis="both",
                                                                **kw).launches()]
    # below the threshold, row-scaled, the rows and the cols kernels: the tile kernel fills its own
    # (below the threshold, "both" still has the launch for the columnwise copy of the amax)
    for shape, kw in (((8192, 4032), {"axis": "both"}), ((8192, 8192), {"axis": "both", "row_scaled": True}),
                      ((8192, 8192), {}), ((8192, 8192), {"axis": "columnwise"}),
                      ((8192, 4032), {"axis": "both", "amax_shape": (1,)})):
        assert not any(s.kernel == "nvfp4_amax_out" and s.args[-1] != NULL
                       for s in plan_of(shape, "bfloat16", "nvfp4", **kw).launches()), (shape, kw)
    assert not any(_plan.enc_tables(quantize_options((8192, 8192), "bfloat16", f, axis="both"), 1 << 20)
                   for f in FORMATS if f != "nvfp4")


def test_quantize_flag_bits_match_the_cuda_header():
    from fp4kit._loader import cuda_src_dir

    text = (cuda_src_dir() / "common" / "enums.cuh").read_text()
    bits = {m.group(1): 1 << int(m.group(2)) for m in re.finditer(r"\b(QFLAG_[A-Z0-9_]+)\s*=\s*1 << (\d+)", text)}
    assert len(bits) >= 12
    assert bits == {k: v for k, v in vars(_plan).items() if k.startswith("QFLAG_")}
    # the enc-table buffer's per-operand length: the CUDA table (NV_TAB entries and the block multiplier)
    nv_tab = re.search(r"constexpr int NV_TAB = (\d+);", (cuda_src_dir() / "common" / "quantize_tile.cuh").read_text())
    assert _plan.ENC_TAB == int(nv_tab.group(1)) + 1


def test_nvfp4_row_scaled_stochastic():
    p = plan_of((48, 80), "float32", "nvfp4", axis="both", row_scaled=True, rounding="stochastic", seed=5)
    # both operands' amaxes in one zeroed buffer: the 48 rows', then the 80 columns' (16 bytes on)
    assert [s for s in p.steps if type(s) is Buffer][4:] == [Buffer(4, (128,), "float32", ZEROS),
                                                              Buffer(5, (48,), "float32", VIEW, src=4, start=0),
                                                              Buffer(6, (80,), "float32", VIEW, src=4, start=48)]
    # one pass for both (one span of 32 x 4 columns, ceil(48/32) = 2 row steps, one per CTA);
    # K*4 = 320 bytes: 16-byte rows, so VEC_IN
    assert p.launches() == [
        Launch("amax", "amax_rows_cols_d0", 1, 256, (X, i64(48), i64(80), buf(5), buf(6)), 2, 1),
        Launch("quantize", "quantize_f5_d0", 2, 256,
               (X, i64(48), i64(80), buf(0), buf(1), buf(2), buf(3), buf(5), buf(6), i32(1 | 2 | 16 | 64 | 256),
                SEED, u32(0xD7E8))),
    ]


def test_amax_rows_cols_grid():
    # (spans of 32 V columns, row chunks, 1): about 8 CTAs per SM, never more chunks than 32-row steps
    assert _plan.amax_rows_cols_grid(8192, 8192, 8, 132) == (32, 33, 1)
    assert _plan.amax_rows_cols_grid(8192, 8192, 4, 132) == (64, 17, 1)
    assert _plan.amax_rows_cols_grid(40, 7168, 8, 132) == (28, 2, 1)
    assert _plan.amax_rows_cols_grid(10 ** 9, 16, 8, 132) == (1, 1056, 1)
    assert _plan.amax_rows_cols_grid(0, 0, 8, 132) == (1, 1, 1)


def test_rowwise_ext_and_tile_2d_kernels():
    p = plan_of((130, 200), "bfloat16", "mxfp4_e2m1", rounding="stochastic")
    # _rowssr (stochastic rounding alone): R = 2, lw = 2 (K = 200 would take 3, but M = 130 < 256
    # rows: 64-row groups): ceil(200/64) x ceil(130/128); K*2 = 400 bytes is a multiple of 16
    assert p.launches() == [Launch("quantize", "quantize_f4_d1_rowssr", 4, 256,
                                   (X, i64(130), i64(200), buf(0), buf(1), NULL, i32(1 | 16 | 256), SEED, i32(2)), 2)]
    # with another extended option: _rowsx, the same grid
    p = plan_of((130, 200), "bfloat16", "nvfp4", rounding="stochastic", row_scaled=True)
    assert [(s.kernel, s.grid, s.grid_y, s.grid_z) for s in p.launches()][-1] == ("quantize_f5_d1_rowsx", 4, 2, 1)
    # the tile kernels: _sr for stochastic rounding alone, the full kernel with 2-D tiles too
    p = plan_of((130, 200), "float16", "mxfp4_e2m1", axis="both", rounding="stochastic")
    assert [s.kernel for s in p.launches()] == ["quantize_f4_d2_sr"]
    p = plan_of((130, 200), "float32", "nvfp4", axis="both", rounding="stochastic", tile_2d=True)
    assert [s.kernel for s in p.launches()][-1] == "quantize_f5_d0"
    p = plan_of((130, 200), "bfloat16", "nvfp4", tile_2d=True)      # rowwise, but 2-D tiles: tile kernel
    assert [s.kernel for s in p.launches()] == ["amax_global_d1", "quantize_f5_d1_t2d"]
    # one extended option alone: its own tile kernel (_rs, _t2d, _rht, _sr), two: the full one
    for kw, suffix in ((dict(row_scaled=True), "_rs"), (dict(tile_2d=True), "_t2d"), (dict(rht=True), "_rht"),
                       (dict(rounding="stochastic"), "_sr"), (dict(row_scaled=True, rounding="stochastic"), ""),
                       (dict(tile_2d=True, rht=True), ""), (dict(tile_2d=True, rounding="stochastic"), "")):
        for dt in ("bfloat16", "float16"):
            if kw.get("rht") and dt != "bfloat16":
                continue
            pk = plan_of((128, 256), dt, "nvfp4", axis="both", **kw)
            assert pk.launches()[-1].kernel == f"quantize_f5_d{_plan.DTYPE_IDS[dt]}{suffix}", (kw, dt)
            opts = quantize_options((128, 256), dt, "nvfp4", amax_shape=None, amax_dtype=None, axis="both", **kw)
            assert _plan.ext_one_suffix(opts, dt, "_ext") == (suffix or "_ext")
    assert (p.launches()[1].grid, p.launches()[1].grid_y) == (4, 3)   # (tiles along K, tiles along M)
    assert p.launches()[1].args[5:8] == (NULL, NULL, buf(2))
    p = plan_of((3, 34), "float32", "mxfp6_e2m3")                  # K*4 = 136: no vector loads
    assert p.launches()[0].args[6] == i32(1)


def test_empty_input_no_launches():
    for shape in ((0, 64), (64, 0)):
        p = plan_of(shape, "float32", "nvfp4", axis="both", scale_layout="swizzled")
        assert p.launches() == []
        assert all(type(s) is Buffer for s in p.steps)


def test_amax_plans():
    p = _plan.build_amax_plan(16, 3, "bfloat16", "global", 0, 1, SM)
    assert p.launches() == [Launch("amax", "amax_global_d1", 1, 256, (X, i64(48), i32(0), buf(0)))]
    p = _plan.build_amax_plan(32, 64, "bfloat16", "rht", 0xAB, 16, SM)
    assert p.launches() == [Launch("amax", "amax_plain_rht_bf16", 1, 256, (X, i64(32), i64(64), u32(0xAB), NULL,
                                                                          buf(0)))]
    assert p.outputs == (0,)
    with pytest.raises(ValueError, match="rht: expected bfloat16 input, got float32"):
        _plan.build_amax_plan(32, 64, "float32", "rht", 0, 16, SM)
    with pytest.raises(ValueError, match="mode: expected"):
        _plan.build_amax_plan(32, 64, "float32", "bogus", 0, 16, SM)


def test_plan_key_distinguishes_device_alignment_amax_but_not_seed():
    _plan.clear_plans()
    asked = []

    def sm_count(dev):
        asked.append(dev)
        return SM

    opts = quantize_options((64, 128), "bfloat16", "nvfp4", axis="both")
    base = 0x7F0000000000
    p = _plan.quantize_plan(0, sm_count, 64, 128, "bfloat16", opts, None, base)
    assert _plan.quantize_plan(0, sm_count, 64, 128, "bfloat16", opts, None, base + 32) is p
    assert asked == [0]
    # other seed: same plan (the seed is a call argument)
    opts7 = quantize_options((64, 128), "bfloat16", "nvfp4", axis="both", seed=7)
    assert _plan.quantize_plan(0, sm_count, 64, 128, "bfloat16", opts7, None, base) is p
    others = [
        _plan.quantize_plan(1, sm_count, 64, 128, "bfloat16", opts, None, base),        # device
        _plan.quantize_plan(0, sm_count, 64, 128, "bfloat16", opts, None, base + 4),    # 4-byte aligned
        _plan.quantize_plan(0, sm_count, 64, 128, "bfloat16", opts, None, base + 2),    # 2-byte aligned
        _plan.quantize_plan(0, sm_count, 64, 128, "bfloat16", opts, 1, base),           # amax given
        _plan.quantize_plan(0, sm_count, 64, 130, "bfloat16", opts, None, base),        # shape
        _plan.quantize_plan(0, sm_count, 64, 128, "float16", opts, None, base),         # dtype
        _plan.quantize_plan(0, sm_count, 64, 128, "bfloat16",
                            quantize_options((64, 128), "bfloat16", "nvfp4", axis="both", scale_layout="swizzled"),
                            None, base),                                                # options
    ]
    assert len({id(q) for q in [p, *others]}) == 8
    assert asked == [0, 1, 0, 0, 0, 0, 0, 0]
    assert others[1].launches()[-1].args[9] == i32(1 | 2)          # no VEC_IN below 16 bytes
    assert p.launches()[-1].args[9] == i32(1 | 2 | 256)
    q = _plan.amax_plan(0, sm_count, 64, 128, "bfloat16", "rht", 0xD7E8, base)
    assert _plan.amax_plan(0, sm_count, 64, 128, "bfloat16", "rht", 0xD7E8, base + 16) is q
    assert _plan.amax_plan(0, sm_count, 64, 128, "bfloat16", "rht", 0xD7E8, base + 2) is not q
    _plan.clear_plans()


# ---------------------------------------------------------------------------------------------
# the CuPy executor, with a recording fake CuPy

class _FakeCupyArray:
    def __init__(self, log, shape, dtype, name):
        self.log, self.shape, self.dtype, self.name = log, tuple(shape), np.dtype(dtype), name
        self.size = int(np.prod(self.shape))

    def view(self, dtype):
        return _FakeCupyArray(self.log, self.shape, dtype, self.name)

    def fill(self, v):
        self.log.append(("fill", self.name, v))

    def copy(self):
        self.log.append(("copy", self.name))
        return _FakeCupyArray(self.log, self.shape, self.dtype, self.name + "'")

    def reshape(self, *shape):
        return self

    def __getitem__(self, sl):
        return _FakeCupyArray(self.log, (sl.stop - sl.start,), self.dtype, f"{self.name}[{sl.start}:{sl.stop}]")


def _fake_cupy(monkeypatch):
    log = []
    n = [0]

    def new(kind, shape, dtype):
        n[0] += 1
        log.append((kind, tuple(shape), np.dtype(dtype).name))
        return _FakeCupyArray(log, shape, dtype, f"b{n[0]}")

    cp = types.SimpleNamespace(uint8=np.uint8, empty=lambda s, dtype: new("empty", s, dtype),
                               zeros=lambda s, dtype: new("zeros", s, dtype),
                               ascontiguousarray=lambda a, dtype: a,
                               bitwise_and=lambda a, m: new(f"bitwise_and({a.name},{a.dtype.name},{int(m):#x})",
                                                            a.shape, a.dtype))

    def fn(module, kernel):
        def launch(grid, block, args):
            log.append(("launch", kernel, grid, block,
                        tuple(a.name if isinstance(a, _FakeCupyArray) else (type(a).__name__, int(a)) for a in args)))
        return launch

    monkeypatch.setattr(_cuda, "_cp", lambda: cp)
    monkeypatch.setattr(_cuda, "_fn", fn)
    return log


@pytest.mark.parametrize("poison", [False, True])
def test_cupy_executor_issues_the_plan(monkeypatch, poison):
    log = _fake_cupy(monkeypatch)
    monkeypatch.setattr(_cuda, "_poison", poison)
    x = _FakeCupyArray(log, (64, 128), np.float16, "x")
    p = plan_of((64, 128), "float16", "nvfp4", axis="both", seed=3)
    bufs = _cuda.run_plan(p, x, seed=3)
    fill = [("fill", b, 0xA5) for b in ("b1", "b2", "b3", "b4")] if poison else []
    assert log == [
        ("empty", (64, 64), "uint8"), *fill[0:1], ("empty", (64, 8), "uint8"), *fill[1:2],
        ("empty", (128, 32), "uint8"), *fill[2:3], ("empty", (128, 4), "uint8"), *fill[3:4],
        ("zeros", (1,), "float32"),
        # 8192 half-precision elements in vectors of 8: 1024 items -> 4 CTAs
        ("launch", "amax_global_d2", (4,), (256,), ("x", ("int64", 8192), ("int32", 1), "b5")),
        ("empty", (1,), "float32"), *([("fill", "b6", 0xA5)] if poison else []),
        ("launch", "nvfp4_amax_out", (1,), (256,),
         ("b5", ("int64", 1), ("uint32", 0xFFFFFFFF), ("uint64", 0), "b6", ("uint64", 0), ("uint64", 0),
          ("uint64", 0))),
        ("launch", "quantize_f5_d2_plain", (2,), (256,),
         ("x", ("int64", 64), ("int64", 128), "b1", "b2", "b3", "b4", "b5", "b6", ("int32", 1 | 2 | 256),
          ("uint64", 3), ("uint32", 0xD7E8))),
    ]
    assert [b.name for b in bufs] == ["b1", "b2", "b3", "b4", "b5", "b6"]

    log = _fake_cupy(monkeypatch)                 # numbering starts again at b1
    amax = _FakeCupyArray(log, (1,), np.float32, "a")
    p = plan_of((256, 512), "bfloat16", "nvfp4", axis="both", rht=True, amax_shape=(1,))
    bufs = _cuda.run_plan(p, x, amax, seed=0)
    assert [e for e in log if e[0] != "fill"][4:] == [
        ("empty", (1,), "float32"),                              # rowwise: the caller's amax, -0 as +0
        ("zeros", (1,), "float32"),                              # columnwise: its own RHT amax
        ("launch", "amax_plain_rht_bf16", (16,), (256,),
         ("x", ("int64", 256), ("int64", 512), ("uint32", 0xD7E8), ("uint64", 0), "b6")),
        ("launch", "nvfp4_amax_out", (1,), (256,),
         ("a", ("int64", 1), ("uint32", 0x7FFFFFFF), "b5", ("uint64", 0), ("uint64", 0), ("uint64", 0), ("uint64", 0))),
        ("launch", "quantize_f5_d1_rht", (8, 4, 1), (256,),
         ("x", ("int64", 256), ("int64", 512), "b1", "b2", "b3", "b4", "b5", "b6", ("int32", 1 | 2 | 128 | 256),
          ("uint64", 0), ("uint32", 0xD7E8))),
    ]


# ---------------------------------------------------------------------------------------------
# the torch executor, with a fake torch and a decoding fake cuLaunchKernel

class _FakeTensor:
    """numpy-backed stand-in for a CUDA tensor: data_ptr() is the host address of its bytes."""

    device = "fake:0"

    def __init__(self, arr):
        self.arr = arr

    @property
    def shape(self):
        return self.arr.shape

    def data_ptr(self):
        return self.arr.ctypes.data if self.arr.size else 0

    def numel(self):
        return self.arr.size

    def is_contiguous(self):
        return self.arr.flags.c_contiguous

    def contiguous(self):
        return self if self.is_contiguous() else type(self)(np.ascontiguousarray(self.arr))

    def element_size(self):
        return self.arr.itemsize

    def view(self, dtype):
        return _FakeTensor(self.arr.view(dtype))

    def fill_(self, v):
        self.arr.fill(v)
        return self

    def zero_(self):
        self.arr.fill(0)
        return self

    def copy_(self, other):
        self.arr[...] = other.arr
        return self

    def clone(self):
        return _FakeTensor(self.arr.copy())

    def detach(self):
        return self

    def reshape(self, *shape):
        return type(self)(self.arr.reshape(*shape))

    def __getitem__(self, sl):
        return _FakeTensor(self.arr[sl])

    def split_with_sizes(self, sizes):
        edges = np.cumsum([0] + list(sizes))
        assert edges[-1] == self.arr.size
        return [type(self)(self.arr[a:b]) for a, b in zip(edges[:-1], edges[1:])]


_CTYPES = {"i64": ctypes.c_int64, "i32": ctypes.c_int32, "u32": ctypes.c_uint32}


def _launch_ex_via(launch, pdl_launches=None):
    """A fake cuLaunchKernelEx (the fast paths' programmatic launches of a plan's later kernels)
    that checks its one attribute (programmatic stream serialization, on) and hands the launch to
    the fake cuLaunchKernel `launch`; appends the CUfunction to `pdl_launches`. Installed even
    where the machine has a driver, so that no fake handle reaches it."""
    def ex(config, f, params, extra):
        c = _torch_exec._LaunchConfig.from_address(config)
        assert (c.numAttrs, c.attrs[0].id, c.attrs[0].value, extra) == (1, 6, 1, None)
        if pdl_launches is not None:
            pdl_launches.append(f)
        launch(f, c.gridDimX, c.gridDimY, c.gridDimZ, c.blockDimX, c.blockDimY, c.blockDimZ, c.sharedMemBytes,
               c.hStream or 0, params, 0)
        return 0
    return ex


def _fake_torch(monkeypatch, plan):
    """Fake torch + launch; returns the list the launch appends (kernel, grid, block, stream, values) to."""
    torch = types.SimpleNamespace(uint8=np.uint8, float32=np.float32, int32=np.int32, int64=np.int64,
                                  float64=np.float64,
                                  empty=lambda *shape, dtype, device: _FakeTensor(np.empty(shape, dtype)),
                                  full=lambda shape, v, dtype, device: _FakeTensor(np.full(shape, v, dtype)),
                                  tensor=lambda vals, dtype, device: _FakeTensor(np.array(vals, dtype)),
                                  zeros=lambda shape, dtype, device: _FakeTensor(np.zeros(shape, dtype)),
                                  bitwise_and=lambda a, m, out: np.bitwise_and(a.arr, m, out=out.arr))
    launches = {}
    calls = []

    def handle(module, kernel):
        h = 0x1000 + len(launches)
        launches[h] = next(s for s in plan.launches() if (s.module, s.kernel) == (module, kernel))
        return h

    def launch(f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        step = launches[f]
        assert (gy, gz, by, bz, smem, extra) == (step.grid_y, step.grid_z, 1, 1, 0, 0)
        ptrs = (ctypes.c_void_p * len(step.args)).from_address(params)
        values = tuple(tuple((ctypes.c_int64 * _plan.DIMS_ARG_MAX).from_address(p)) if a.kind == "dims" else
                       _CTYPES.get(a.kind, ctypes.c_uint64).from_address(p).value for p, a in zip(ptrs, step.args))
        calls.append((step.kernel, gx, bx, stream, values))

    monkeypatch.setattr(_torch_exec, "_torch", lambda: torch)
    monkeypatch.setattr(_torch_exec, "_function_handle", handle)
    monkeypatch.setattr(_torch_exec, "_driver_launch", lambda: launch)
    monkeypatch.setattr(_torch_exec, "_launch_ex", lambda: _launch_ex_via(launch))

    def memset(ptr, value, nbytes, stream):              # the fake tensors live in host memory
        assert stream == 0xABC0 + 1 or stream == 0xABC0
        ctypes.memset(ptr, value, nbytes)
        calls.append(("memset", ptr, value, nbytes, stream))

    monkeypatch.setattr(_torch_exec, "_memset_async", lambda: memset)
    monkeypatch.setattr(_torch_exec, "_ensure_context", lambda: None)
    monkeypatch.setattr(_torch_exec, "_stream_ptr", lambda dev: 0xABC0 + dev)
    monkeypatch.setattr(_torch_exec, "_TORCH_DTYPES", {})
    return calls


class _FakeCupyArray2(_FakeTensor):
    """numpy-backed stand-in for a cupy.ndarray as run_cupy uses it (data.ptr, flags, fill, copy)."""

    @property
    def data(self):
        return types.SimpleNamespace(ptr=self.data_ptr())

    @property
    def flags(self):
        return self.arr.flags

    def fill(self, v):
        self.arr.fill(v)

    def copy(self):
        return type(self)(self.arr.copy())

    def view(self, dtype):
        return type(self)(self.arr.view(dtype))

    def __getitem__(self, sl):
        return type(self)(self.arr[sl])


def _expected_values(step, x, bufs, seed, amax=None):
    out = []
    for a in step.args:
        out.append({"x": lambda: x.data_ptr(), "buf": lambda: bufs[a.value].data_ptr(), "null": lambda: 0,
                    "seed": lambda: seed, "amax": lambda: amax.data_ptr()}.get(a.kind, lambda: a.value)())
    return tuple(out)


@pytest.mark.parametrize("poison", [False, True])
@pytest.mark.parametrize("case", [
    dict(shape=(256, 512), dtype="bfloat16", fmt="nvfp4", axis="both", rht=True, scale_layout="swizzled",
         rht_sign_mask=0xFFFF),
    dict(shape=(64, 128), dtype="float16", fmt="nvfp4", axis="both", amax_shape=(1,)),
    dict(shape=(48, 80), dtype="float32", fmt="nvfp4", axis="both", row_scaled=True, rounding="stochastic",
         seed=2**64 - 1),
    dict(shape=(16, 4096), dtype="float32", fmt="mxfp8_e5m2", axis="both", scale_layout="swizzled"),
    dict(shape=(64, 128), dtype="float16", fmt="nvfp4", axis="both"),
], ids=["rht", "amax", "row_scaled_sr", "mxfp8_swizzled", "amax_copy"])
@pytest.mark.parametrize("lib", ["torch", "cupy"])
def test_executors_pack_every_argument(monkeypatch, case, poison, lib):
    """_torch_exec.run (PyTorch tensors) and run_cupy (CuPy arrays), with fakes of both libraries and
    of the driver: every launch's arguments, the memsets of ZEROS buffers, the poisoned EMPTY ones,
    in plan order, on the current stream, twice (the second call reuses the packed slots)."""
    case = dict(case)
    shape, dtype, fmt = case.pop("shape"), case.pop("dtype"), case.pop("fmt")
    seed = case.get("seed", 0)
    p = plan_of(shape, dtype, fmt, **case)
    calls = _fake_torch(monkeypatch, p)
    monkeypatch.setattr(_cuda, "_poison", poison)
    T = _FakeTensor
    if lib == "cupy":
        T = _FakeCupyArray2
        monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(
            empty=lambda shape, dtype: _FakeCupyArray2(np.empty(shape, dtype)),
            full=lambda shape, v, dtype: _FakeCupyArray2(np.full(shape, v, dtype)),
            asarray=lambda a: _FakeCupyArray2(np.array(a)), ndarray=_FakeCupyArray2,
            cuda=types.SimpleNamespace(get_current_stream=lambda: types.SimpleNamespace(ptr=0xABC1))))
    x = T(np.zeros(shape, np.float32 if dtype == "float32" else np.uint16))
    amax = T(np.array([3.5], np.float32)) if case.get("amax_shape") else None
    for trial in range(2):                        # the second call reuses the packed arrays
        calls.clear()
        s_ = seed + trial if seed < 2**64 - 1 else seed
        bufs = _torch_exec.run(p, x, amax, s_, 1) if lib == "torch" else _torch_exec.run_cupy(p, x, amax, s_,
                                                                                             x.data_ptr())
        want = []
        for s in p.steps:
            if type(s) is Launch:
                want.append((s.kernel, s.grid, s.block, 0xABC1,
                             _expected_values(s, x, bufs, seed + trial if seed < 2**64 - 1 else seed, amax)))
            elif type(s) is Buffer and s.init == ZEROS:
                want.append(("memset", bufs[s.slot].data_ptr(), 0, 4 * int(np.prod(s.shape)), 0xABC1))
        assert calls == want
    for s in p.steps:
        if type(s) is Buffer:
            a = bufs[s.slot].arr
            assert a.shape == s.shape and a.dtype == np.dtype(s.dtype)
            if s.init == EMPTY and poison:
                assert (a.view(np.uint8) == 0xA5).all()
            elif s.init == ZEROS:
                assert (a.view(np.uint32) == 0).all()
            elif s.init == COPY:
                assert a.ctypes.data != bufs[s.src].data_ptr()
            elif s.init == VIEW:
                assert bufs[s.slot].data_ptr() == bufs[s.src].data_ptr() + 4 * s.start


def test_torch_executor_threads_do_not_share_argument_slots(monkeypatch):
    """Two threads running one plan at once: every launch sees its own thread's pointers (the fake
    launch runs Python, so the GIL can switch threads between packing and launching)."""
    p = plan_of((64, 128), "float16", "nvfp4", axis="both")
    calls = _fake_torch(monkeypatch, p)
    inputs = [_FakeTensor(np.zeros((64, 128), np.uint16)) for _ in range(4)]

    def worker(k):
        for _ in range(300):
            _torch_exec.run(p, inputs[k], None, k, 0)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 4 * 300 * 4     # memset of the amax, amax kernel, its columnwise copy, quantize kernel
    # every quantize launch's seed (this thread's k) comes with this thread's input pointer
    by_seed = {}
    for kernel, *_, values in calls:
        if kernel == "quantize_f5_d2_plain":
            by_seed.setdefault(values[10], set()).add(values[0])
    assert by_seed == {k: {inputs[k].data_ptr()} for k in range(4)}


# ---------------------------------------------------------------------------------------------
# every planned launch matches its kernel's C signature in cuda_src/

# C type of a kernel parameter -> the Arg kinds that may fill it (pointers: 8 bytes)
_KINDS = {"i64": {"i64"}, "int": {"i32"}, "u32": {"u32"}, "u64": {"u64", "seed"}}


def test_planned_arguments_match_the_kernel_signatures():
    """Every launch of the single-tensor plans names a kernel that its cuda_src module defines
    (_defined_kernels, below: the exact name), with one argument per parameter, each of a kind that
    fits the parameter's C type."""
    defined = {}
    seen = set()
    fmts = ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4_e2m1", "nvfp4"]
    variants = [{}, {"axis": "both"}, {"axis": "columnwise"}, {"axis": "both", "scale_layout": "swizzled"},
                {"rounding": "stochastic"}, {"axis": "both", "rht": True}, {"axis": "both", "row_scaled": True},
                {"tile_2d": True}, {"axis": "both", "amax_shape": (1,)}, {"axis": "both", "rounding": "stochastic"},
                {"axis": "both", "tile_2d": True, "rounding": "stochastic"},
                {"row_scaled": True}, {"axis": "columnwise", "scale_layout": "swizzled"},
                {"axis": "columnwise", "amax_shape": (1,)}, {"axis": "columnwise", "scale_layout": "swizzled", "amax_shape": (1,)},
                {"scale_layout": "swizzled", "amax_shape": (1,)}]
    for fmt in fmts:
        for kw in variants:
            for dtype in ("float32", "bfloat16", "float16"):
                for align, shape in ((16, (32, 96)), (4, (32, 96)), (1, (32, 96)), (16, (128, 256)),
                                     (16, (8192, 4096)),    # NVFP4 enc tables (ENC_TABS_MIN_TILES), squares
                                     (16, (8200, 8192)),    # squares for any M (_quadm)
                                     (16, (16384, 16384))):   # MXFP4 squares
                    try:
                        p = plan_of(shape, dtype, fmt, align=align, **kw)
                    except (TypeError, ValueError):
                        continue
                    for s in p.launches():
                        if s.module not in defined:
                            defined[s.module] = _defined_kernels(s.module)
                        params = defined[s.module].get(s.kernel)
                        assert params is not None, (s.module, s.kernel, fmt, kw, dtype, shape)
                        kinds = [a.kind for a in s.args]
                        assert len(params) == len(kinds), (s.kernel, params, kinds)
                        assert all(_fits_c(c, k) for c, k in zip(params, kinds)), (s.kernel, list(zip(params, kinds)))
                        seen.add(s.kernel.split("_f")[0] if s.module.startswith("quantize") else s.kernel)
                        seen.add(s.kernel)
    assert {"quantize", "quantize_cols", "amax_global_d0", "amax_global_d1", "amax_rows_cols_d1", "amax_rht_bf16",
            "amax_plain_rht_bf16", "swizzle_zero_padding", "unswizzle_scales", "nvfp4_amax_out"} <= seen
    assert {"quantize_f4_d1_quad", "quantize_f0_d1_quadm", "quantize_f5_d1_plain"} <= seen
    # and the other way round: every kernel of the quantize modules is some plan's (no dead kernel
    # compiled into every cold start; scripts/kernel_coverage.py then checks the GPU tests launch it)
    for module in ("quantize", "quantize_cols"):
        unplanned = sorted(set(_defined_kernels(module)) - seen)
        assert not unplanned, (module, unplanned)


def _defined_kernels(module: str) -> dict:
    """The extern "C" kernels that cuda_src/<module>.cu defines, name -> parameter C types, read from
    the source with its function-like macros expanded (a small preprocessor, enough for cuda_src's
    kernel-defining macros: parameters substituted as whole words, then `##` pasted, the result
    rescanned; object-like macros, strings and #if are left alone, so the kernels of every compile
    part (#if FP4KIT_IN_PART(p) blocks, cuda_src/common/parts.cuh) are read together)."""
    from fp4kit._loader import cuda_src_dir

    text = (cuda_src_dir() / f"{module}.cu").read_text()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*?(\\?)\n", r"\1\n", text).replace("\\\n", " ")   # comments, continuations
    macros, lines = {}, []
    for line in text.split("\n"):
        m = re.match(r"\s*#\s*define\s+(\w+)\(([^)]*)\)(.*)$", line)
        if m:
            macros[m.group(1)] = ([q.strip() for q in m.group(2).split(",") if q.strip()], m.group(3))
        elif not line.lstrip().startswith("#"):
            lines.append(line)
    text = "\n".join(lines)
    call = re.compile(r"\b(" + "|".join(map(re.escape, macros)) + r")\s*\(") if macros else None
    pos, expansions = 0, 0
    while call is not None:
        m = call.search(text, pos)
        if m is None:
            break
        i, depth, start, args = m.end(), 1, m.end(), []
        while depth:
            c = text[i]
            depth += (c == "(") - (c == ")")
            if (c == "," and depth == 1) or depth == 0:
                args.append(text[start:i].strip())
                start = i + 1
            i += 1
        params, body = macros[m.group(1)]
        args = [] if args == [""] and not params else args
        assert len(args) == len(params), (module, m.group(1), args)
        sub = dict(zip(params, args))
        body = re.sub(r"\s*##\s*", "##", body)
        body = re.sub(r"\b\w+\b", lambda t: sub.get(t.group(0), t.group(0)), body).replace("##", "")
        text = text[:m.start()] + body + text[i:]
        pos = m.start()   # rescan the expansion
        expansions += 1
        assert expansions < 20000, module
    kernels = {}
    for m in re.finditer(r'extern\s+"C"\s+__global__\s+void\b', text):
        head = text[m.end():text.index("{", m.end())].rstrip()
        assert head.endswith(")"), head
        depth, i = 0, len(head) - 1
        while True:   # the parameter list: the last balanced group of the declaration
            depth += (head[i] == ")") - (head[i] == "(")
            if depth == 0:
                break
            i -= 1
        name = re.search(r"(\w+)\s*$", head[:i]).group(1)
        params = [q.strip() for q in head[i + 1:-1].split(",") if q.strip()]
        assert name not in kernels, (module, name)
        kernels[name] = [" ".join(q.split()[:-1]) for q in params]
    return kernels


def _fits_c(ctype: str, kind: str) -> bool:
    if ctype.endswith("*"):
        return kind in ("x", "buf", "null", "amax", "fd", "ld")
    if ctype.endswith("DimsArg"):
        return kind == "dims"
    return kind in _KINDS[ctype]


def test_defined_kernels_reads_the_macro_instantiations():
    """The small preprocessor of _defined_kernels against known instantiations: nested macros
    (grouped.cu FP4KIT_GROUP_QUANTIZE1_ALL), pasted suffixes, an empty macro argument (quantize.cu
    FP4KIT_QUANTIZE_KERNEL(F, D, true, )), plain kernels, and nothing that is not defined."""
    g = _defined_kernels("grouped")
    for name in ("group_quantize1_f0_d1_plain", "group_quantize1_f4_d1_both", "group_quantize1_f4_d1_boths",
                 "group_quantize1_f5_d2_boths", "group_meta", "group_meta_dims", "group_quantize4_f0_d1"):
        assert name in g, name
    assert "group_quantize1_f2_d1_boths" in g and "group_quantize1_f3_d2_both" in g   # MXFP6 from 16-bit input
    for name in ("group_quantize1_f2_d0_boths", "group_quantize1_f0_d1_both", "group_quantize1_f6_d0_plain"):
        assert name not in g, name
    assert g["group_meta_dims"][-1].endswith("DimsArg") and len(g["group_meta_dims"]) == 21
    q = _defined_kernels("quantize")
    assert {"quantize_f5_d1", "quantize_f0_d1_plain", "quantize_f5_d2_rowsx", "quantize_f4_d1_quad"} <= set(q)
    assert "quantize_f2_d1_quad" not in q and "quantize_f2_d1_quadm" in q
    # the full kernels exist for NVFP4 only (no MX option but stochastic rounding needs them: _sr)
    assert "quantize_f0_d1" not in q and "quantize_f4_d1_rowsx" not in q and "group_quantize_f3_d1" not in g
    assert "group_quantize_f4_d1" not in g and "group_quantize_f5_d1" in g and "group_quantize_rows_f5_d0" in g
    assert {"group_quantize_f4_d1_sr", "group_quantize_f5_d0_sr"} <= set(g)
    assert q["quantize_f5_d1"] == q["quantize_f0_d1_plain"] and q["quantize_f5_d1"][0] == "const void*"


def test_grouped_planned_launches_name_defined_kernels():
    """Every launch of the grouped plans (formats, operands, scale layouts, rules, input dtypes,
    recipes, dims kinds, member-size bounds that reach the one-tile, square, staged and persistent
    kernels) names a kernel that its cuda_src module defines, with as many arguments as the kernel
    has parameters, each of a kind that fits the parameter's C type. The GPU tests load each kernel
    by name; this catches a name the host picks but no source defines (a kernel variant added on one
    side only) without a GPU."""
    from fp4kit import _cuda_grouped as cg
    from fp4kit._grouped_device import _bounds
    from fp4kit._validate import group_options

    defined = {}
    seen = set()
    G = 3
    variants = [dict(axis="rowwise"), dict(axis="rowwise", scale_layout="swizzled"), dict(axis="columnwise"),
                dict(axis="both"),
                dict(axis="both", scale_layout="swizzled"), dict(axis="both", scale_rule="floor"),
                dict(axis="both", scale_layout="swizzled", scale_rule="floor"),
                dict(axis="both", rounding="stochastic"), dict(axis="both", rht=True),
                dict(axis="both", row_scaled=True), dict(axis="both", tile_2d=True),
                dict(axis="both", tile_2d=True, rounding="stochastic"),
                dict(axis="rowwise", rounding="stochastic"), dict(axis="rowwise", row_scaled=True)]
    for fmt in ("mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4_e2m1", "nvfp4"):
        for kw in variants:
            for dtype in ("float32", "bfloat16", "float16"):
                for kind, K, rows in (("varying_first", 7168, 65536), ("varying_first", 7168, 256),
                                      ("varying_first", 128, 8192), ("varying_first", 96, 512),
                                      ("same", 256, 3 * 512), ("varying_last", None, 512),
                                      ("varying_both", None, None)):
                    try:
                        opts, _ = group_options(dtype, fmt, kw, False)
                    except (TypeError, ValueError):
                        continue
                    n_el = (rows or 4096) * (K or 256)
                    for amax_size, dbias, dims in ((None, False, ("dev", None, True)), (G, False, ("param", G)),
                                                   (None, True, ("dev", None, True))):
                        if (amax_size is not None and fmt != "nvfp4") or (dbias and kind == "varying_both"):
                            continue
                        try:
                            caps = _bounds(kind, FORMATS[fmt], opts, G, n_el, None, K)
                            p = cg.build_group_quantize_plan(dtype, opts, G, n_el, caps, amax_size, dbias, K, rows,
                                                             dims, SM, lambda module, kernel, cap: cap)
                        except (TypeError, ValueError):
                            continue
                        for s in p.launches():
                            if s.module not in defined:
                                defined[s.module] = _defined_kernels(s.module)
                            params = defined[s.module].get(s.kernel)
                            assert params is not None, (s.module, s.kernel, fmt, kw, dtype, kind)
                            kinds = [a.kind for a in s.args]
                            assert len(params) == len(kinds), (s.kernel, params, kinds)
                            assert all(_fits_c(c, k) for c, k in zip(params, kinds)), (s.kernel, list(zip(params, kinds)))
                            if s.kernel.startswith("group_quantize1_"):
                                # the u64 after the flags: the seed for the _sr / _ext kernels, the caller's
                                # row count (the L2 prefetch's bound) for the plain ones (grouped.cu)
                                recipe = s.kernel.endswith(("_sr", "_ext", "_rht", "_rs", "_t2d"))
                                want = Arg("seed") if recipe else Arg("u64", rows)
                                assert s.args[12] == want, (s.kernel, s.args[12])
                            seen.add(s.kernel)
    # the variants this test is for were reached
    for name in ("group_quantize1_f4_d1_boths", "group_quantize1_f4_d1_both", "group_quantize1_f5_d1_boths",
                 "group_quantize1_f5_d0_both", "group_quantize1_f2_d1_plain", "group_quantize4_f0_d1",
                 "group_quantize1_f2_d1_boths", "group_quantize1_f3_d2_both", "group_quantize1_f2_d0_plain",
                 "group_quantize1_f4_d2_sr", "group_quantize1_f5_d0_sr", "group_quantize_f5_d1_sr",
                 "group_quantize1_f5_d1_ext", "group_quantize1_f5_d1_rht", "group_quantize1_f5_d1_rs",
                 "group_quantize1_f5_d1_t2d", "group_amax_rows_cols_d1", "group_amax_plain_rht_bf16",
                 "group_meta", "group_meta_dims", "group_unswizzle_scales", "group_stats_d1"):
        assert name in seen, (name, sorted(seen))
    assert any(k.startswith("group_quantize_rowsk_") for k in seen) and any(k.startswith("group_quantize_f") for k in seen)
    assert any(k.startswith("group_quantize_rowsd_") for k in seen)
    # host dims past the kernel parameter's DIMS_ARG_MAX values: group_dims_store launches
    g_big = _plan.DIMS_ARG_MAX + 1
    opts, _ = group_options("bfloat16", "mxfp8_e4m3", dict(axis="rowwise"), False)
    caps = _bounds("varying_first", FORMATS["mxfp8_e4m3"], opts, g_big, 4096 * 256, None, 256)
    p = cg.build_group_quantize_plan("bfloat16", opts, g_big, 4096 * 256, caps, None, False, 256, 4096,
                                     ("param", g_big), SM, lambda module, kernel, cap: cap)
    assert [s.kernel for s in p.launches()].count("group_dims_store") == 2
    seen.update(s.kernel for s in p.launches())
    for fmt in FORMATS:   # group_dequantize: two kernels per format and output dtype
        for out_dtype in ("float32", "bfloat16", "float16"):
            for cols in (False, True):   # with cols: group_dequantize_cols_* for 16-bit out
                name = cg.dequantize_kernel(fmt, out_dtype, 4096, SM, cols)[0]
                assert name in defined["grouped"], name
                seen.add(name)
    unplanned = sorted(set(_defined_kernels("grouped")) - seen)
    assert not unplanned, unplanned



# ---------------------------------------------------------------------------------------------
# the whole fast path (eligibility, validation, plan, executor, result objects) with a fake torch

class _FakeDtype:
    def __init__(self, name, np_dtype):
        self.name, self.np = name, np.dtype(np_dtype)

    def __str__(self):
        return f"torch.{self.name}"


def _fake_torch_module(device=0):
    mod = types.ModuleType("torch")
    strided = object()
    dtypes = {n: _FakeDtype(n, d) for n, d in (("float32", np.float32), ("float16", np.float16),
                                                ("bfloat16", np.uint16), ("uint8", np.uint8), ("float64", np.float64))}

    class Tensor(_FakeTensor):
        """A fake CUDA tensor of module "torch" (numpy bytes; dtype a _FakeDtype)."""

        is_cuda = True
        layout = strided

        def __init__(self, arr, dtype, dev=device):
            super().__init__(arr)
            self.dtype, self.dev = dtype, dev

        def is_contiguous(self):
            return self.arr.flags.c_contiguous

        def get_device(self):
            return self.dev

        def view(self, dtype):
            return Tensor(self.arr.view(dtype.np), dtype, self.dev)

        def clone(self):
            return Tensor(self.arr.copy(), self.dtype, self.dev)

        def reshape(self, *shape):
            return Tensor(self.arr.reshape(*shape), self.dtype, self.dev)

        def __getitem__(self, sl):
            return Tensor(self.arr[sl], self.dtype, self.dev)

        def split_with_sizes(self, sizes):
            edges = np.cumsum([0] + list(sizes))
            assert edges[-1] == self.arr.size
            return [Tensor(self.arr[a:b], self.dtype, self.dev) for a, b in zip(edges[:-1], edges[1:])]

    Tensor.__module__ = "torch"

    class Parameter(Tensor):
        pass

    class Other(Tensor):
        pass

    Parameter.__module__, Other.__module__ = "torch.nn.parameter", "torch.other"

    mod.Tensor, mod.strided, mod.Other = Tensor, strided, Other
    mod.nn = types.SimpleNamespace(Parameter=Parameter)
    for n, d in dtypes.items():
        setattr(mod, n, d)
    mod.int32 = _FakeDtype("int32", np.int32)
    mod.int64 = _FakeDtype("int64", np.int64)
    mod.bitwise_and = lambda a, m, out: np.bitwise_and(a.arr, m, out=out.arr)
    mod.empty = lambda *shape, dtype, device: Tensor(np.empty(shape, dtype.np), dtype)
    mod.zeros = lambda shape, dtype, device: Tensor(np.zeros(shape, dtype.np), dtype)
    mod.full = lambda shape, v, dtype, device: Tensor(np.full(shape, v, dtype.np), dtype)
    mod.tensor = lambda vals, dtype, device: Tensor(np.array(vals, dtype.np), dtype)
    mod.cuda = types.SimpleNamespace(current_device=lambda: device)
    return mod


def _install_fake_torch(monkeypatch, poison):
    """A fake torch module in sys.modules, seen by the fast path on device 0 with SM SMs; plans cleared."""
    import sys

    from fp4kit import _device_api

    from fp4kit import api

    torch = _fake_torch_module()
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(api, "_device_api", _device_api)       # the backend loads only with CuPy: faked too
    monkeypatch.setattr(_device_api, "_torch_mod", None)
    monkeypatch.setattr(_device_api, "_cupy_runtime", types.SimpleNamespace(getDevice=lambda: 0))
    monkeypatch.setattr(_device_api, "_sm_count_of", lambda dev: SM)
    monkeypatch.setattr(_cuda, "_poison", poison)
    _plan.clear_plans()
    return torch


def test_fast_path_end_to_end_with_fake_torch(monkeypatch):
    import fp4kit
    from fp4kit import _device_api

    torch = _install_fake_torch(monkeypatch, True)
    x = torch.Tensor(np.arange(256 * 512, dtype=np.uint16).reshape(256, 512), torch.bfloat16)
    plan = _plan.build_quantize_plan(256, 512, "bfloat16",
                                     quantize_options((256, 512), "bfloat16", "nvfp4", axis="both", rht=True,
                                                      scale_layout="swizzled", seed=9), None, 16, SM)
    calls = _fake_torch(monkeypatch, plan)
    monkeypatch.setattr(_torch_exec, "_torch", lambda: torch)

    q = fp4kit.quantize(x, "nvfp4", axis="both", rht=True, scale_layout="swizzled", seed=9)
    assert q.shape == (256, 512) and q.input_dtype == "bfloat16" and q.options.seed == 9
    assert (q.rowwise.data.shape, q.rowwise.scales.shape, q.rowwise.amax.shape) == ((256, 256), (256, 32), (1,))
    assert (q.columnwise.data.shape, q.columnwise.scales.shape, q.columnwise.amax.shape) == ((512, 128), (512, 16), (1,))
    assert all(isinstance(t, torch.Tensor) for op in (q.rowwise, q.columnwise) for t in (op.data, op.scales, op.amax))
    assert (q.rowwise.data.arr == 0xA5).all() and q.rowwise.data.dtype is torch.uint8       # poisoned, no kernel ran
    assert q.rowwise.amax.dtype is torch.float32 and q.rowwise.amax.arr.tolist() == [0.0]
    assert q.columnwise.amax.data_ptr() == q.rowwise.amax.data_ptr() + 16                    # views of one buffer
    assert [c[0] for c in calls] == ["memset", "amax_plain_rht_bf16", "quantize_f5_d1_rht"]
    assert calls[0][1:] == (q.rowwise.amax.data_ptr(), 0, 20, 0xABC0)                      # the (5,) amax buffer
    qv = calls[2][4]
    assert qv[:3] == (x.data_ptr(), 256, 512)
    assert qv[3:9] == (q.rowwise.data.data_ptr(), q.rowwise.scales.data_ptr(), q.columnwise.data.data_ptr(),
                       q.columnwise.scales.data_ptr(), q.rowwise.amax.data_ptr(), q.columnwise.amax.data_ptr())
    assert qv[9:] == (1 | 2 | 4 | 128 | 256, 9, 0xD7E8)

    # validation still comes first and says the same
    with pytest.raises(ValueError, match=r"axis: expected one of"):
        fp4kit.quantize(x, "nvfp4", axis="diagonal")
    with pytest.raises(ValueError, match=r"amax: expected shape \(1,\), got \(2,\)"):
        fp4kit.quantize(x, "nvfp4", amax=torch.Tensor(np.ones(2, np.float32), torch.float32))
    assert len(calls) == 3

    # eligibility
    elig = _device_api._torch_fast_device
    amax = torch.Tensor(np.ones(1, np.float32), torch.float32)
    assert elig(x, None) == 0 and elig(x, amax) == 0
    assert elig(torch.nn.Parameter(x.arr, torch.bfloat16), None) == 0
    assert elig(torch.Other(x.arr, torch.bfloat16), None) is None                           # other subclass
    assert elig(torch.Tensor(x.arr.T, torch.bfloat16), None) is None                         # not contiguous
    assert elig(torch.Tensor(x.arr.T, torch.bfloat16), None, any_strides=True) == 0          # ... unless allowed
    assert elig(torch.Tensor(x.arr.T.astype(np.float64), torch.float64), None, any_strides=True) is None
    assert elig(torch.Tensor(x.arr.astype(np.float64), torch.float64), None) is None         # dtype
    assert elig(torch.Tensor(x.arr, torch.bfloat16, dev=1), None) is None                    # not the current device
    assert elig(x, torch.Tensor(np.ones(1, np.float16), torch.float16)) is None             # amax dtype
    assert elig(x, torch.Tensor(np.ones(1, np.float32), torch.float32, dev=1)) is None       # amax device
    assert elig(x, np.ones(1, np.float32)) is None                                           # NumPy amax
    assert elig(np.ones((2, 2), np.float32), None) is None
    _plan.clear_plans()


# ---------------------------------------------------------------------------------------------
# the fast path's per-call-signature memo (_plan.FAST_CALLS) and its unchecked result constructors

def _fake_fast_path(monkeypatch, poison=False):
    """fp4kit.quantize on fake torch tensors through the fast path, every plan allowed; returns
    (torch, calls, validations): calls gets (kernel, decoded argument values) per launch and
    ("memset", nbytes) per memset, validations one entry per quantize_options call."""
    from fp4kit import _device_api, _validate

    torch = _install_fake_torch(monkeypatch, poison)
    names, calls, validations = {}, [], []

    def handle(module, kernel):
        names[0x1000 + len(names)] = kernel
        return 0x1000 + len(names) - 1

    def launch(f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        kernel = names[f]
        step = next(s for p in _plan._QUANTIZE_PLANS.values() for s in p.launches() if s.kernel == kernel)
        ptrs = (ctypes.c_void_p * len(step.args)).from_address(params)
        calls.append((kernel, tuple(_CTYPES.get(a.kind, ctypes.c_uint64).from_address(p).value
                                    for p, a in zip(ptrs, step.args))))

    def memset(ptr, value, nbytes, stream):
        ctypes.memset(ptr, value, nbytes)
        calls.append(("memset", nbytes))

    def counting(*a, **k):
        validations.append(1)
        return _validate.quantize_options(*a, **k)

    monkeypatch.setattr(_torch_exec, "_torch", lambda: torch)
    monkeypatch.setattr(_torch_exec, "_function_handle", handle)
    monkeypatch.setattr(_torch_exec, "_driver_launch", lambda: launch)
    monkeypatch.setattr(_torch_exec, "_launch_ex", lambda: _launch_ex_via(launch))
    monkeypatch.setattr(_torch_exec, "_memset_async", lambda: memset)
    monkeypatch.setattr(_torch_exec, "_ensure_context", lambda: None)
    monkeypatch.setattr(_torch_exec, "_stream_ptr", lambda dev: 0xABC0 + dev)
    monkeypatch.setattr(_torch_exec, "_TORCH_DTYPES", {})
    monkeypatch.setattr(_device_api, "quantize_options", counting)
    return torch, calls, validations


def _symbolic(calls, q, x):
    """calls with the pointers of x and of q's buffers replaced by their names."""
    names = {x.data_ptr(): "x"}
    for n in ("rowwise", "columnwise"):
        op = getattr(q, n)
        if op is not None:
            for f in ("data", "scales", "amax"):
                if getattr(op, f) is not None:
                    names[getattr(op, f).data_ptr()] = f"{n}.{f}"
    return [(c[0], tuple(names.get(v, v) for v in c[1]) if c[0] != "memset" else c[1]) for c in calls]


def _layout(q):
    """Everything of a result but the buffers' contents: types, fields, shapes, dtypes."""
    def op(o):
        if o is None:
            return None
        return (type(o), list(vars(o)), o.scale_layout, o.rows, o.cols, o.format,
                [(type(t), t.shape, t.arr.dtype) for t in (o.data, o.scales)],
                None if o.amax is None else (type(o.amax), o.amax.shape, o.amax.arr.dtype))
    return (type(q), list(vars(q)), q.format, q.shape, type(q.shape), q.options, q.input_dtype, op(q.rowwise),
            op(q.columnwise))


def test_fast_path_memo_hits_repeat_calls_with_the_checked_results(monkeypatch):
    import fp4kit

    torch, calls, validations = _fake_fast_path(monkeypatch)
    x = torch.Tensor(np.zeros((64, 128), np.uint16), torch.bfloat16)
    kw = dict(axis="both", scale_layout="swizzled")
    q1 = fp4kit.quantize(x, "nvfp4", **kw)
    first = list(calls)
    assert len(validations) == 1 and len(_plan.FAST_CALLS) == 1
    calls.clear()
    q2 = fp4kit.quantize(x, "nvfp4", **kw)
    assert len(validations) == 1 and len(_plan.FAST_CALLS) == 1             # memo hit: no validation
    assert _symbolic(calls, q2, x) == _symbolic(first, q1, x)               # the same launches and arguments
    quant = [c for c in _symbolic(first, q1, x) if c[0].startswith("quantize")]
    assert len(quant) == 1 and quant[0][1][3:9] == ("rowwise.data", "rowwise.scales", "columnwise.data",
                                                    "columnwise.scales", "rowwise.amax", "columnwise.amax")
    assert _layout(q2) == _layout(q1)
    assert q2.options is q1.options
    assert q2.options == quantize_options((64, 128), "bfloat16", "nvfp4", **kw)
    assert q2.rowwise.data.data_ptr() != q1.rowwise.data.data_ptr()         # new buffers
    # the seed is a launch argument: a new int seed reuses the entry, with its own options
    calls.clear()
    q3 = fp4kit.quantize(x, "nvfp4", seed=12345, **kw)
    assert len(validations) == 1 and len(_plan.FAST_CALLS) == 1
    assert q3.options == quantize_options((64, 128), "bfloat16", "nvfp4", seed=12345, **kw)
    assert type(q3.options.seed) is int and q1.options.seed == 0
    seeds = [c[1][10] for c in calls + first if c[0].startswith("quantize")]
    assert seeds == [12345, 0]
    assert _layout(q3)[2:5] == _layout(q1)[2:5] and _layout(q3)[6:] == _layout(q1)[6:]
    # output poisoning is read per call, hits included
    monkeypatch.setattr(_cuda, "_poison", True)
    q5 = fp4kit.quantize(x, "nvfp4", **kw)
    assert len(validations) == 1 and (q5.rowwise.data.arr == 0xA5).all() and (q5.columnwise.scales.arr == 0xA5).all()
    monkeypatch.setattr(_cuda, "_poison", False)
    # a NumPy seed takes the checked path (and stays correct)
    q4 = fp4kit.quantize(x, "nvfp4", seed=np.uint64(7), **kw)
    assert len(validations) == 2 and type(q4.options.seed) is int and q4.options.seed == 7
    _plan.clear_plans()
    assert not _plan.FAST_CALLS


def test_fast_path_launches_later_kernels_with_pdl(monkeypatch):
    """With PDL every kernel of a plan goes through cuLaunchKernelEx with programmatic stream
    serialization (fp4kit._torch_exec.PDL), but the first one when the call clears a buffer before
    it (the computed amax's memset: PDL_AFTER_MEMSET, off); PDL_ALL False: the first through
    cuLaunchKernel, each later one through cuLaunchKernelEx; the same grids and arguments either
    way; PDL False: every kernel through cuLaunchKernel."""
    import fp4kit

    torch, calls, _ = _fake_fast_path(monkeypatch)
    plain = _torch_exec._driver_launch()
    pdl = []
    monkeypatch.setattr(_torch_exec, "_launch_ex", lambda: _launch_ex_via(plain, pdl))
    monkeypatch.setattr(_torch_exec, "PDL", True)
    x = torch.Tensor(np.zeros((64, 128), np.uint16), torch.bfloat16)
    q = fp4kit.quantize(x, "nvfp4", axis="both")                 # amax, amax copies, tile: 3 kernels
    with_pdl = _symbolic([c for c in calls if c[0] != "memset"], q, x)
    assert [c[0] for c in with_pdl] == ["amax_global_d1", "nvfp4_amax_out", "quantize_f5_d1_plain"]
    assert calls[0][0] == "memset"      # the computed amax cleared first: the first kernel plain
    assert len(pdl) == 2
    calls.clear()
    monkeypatch.setattr(_torch_exec, "PDL_AFTER_MEMSET", True)  # (the A/B switch) all three
    _plan.clear_plans()
    q0 = fp4kit.quantize(x, "nvfp4", axis="both")
    assert _symbolic([c for c in calls if c[0] != "memset"], q0, x) == with_pdl and len(pdl) == 5
    monkeypatch.setattr(_torch_exec, "PDL_AFTER_MEMSET", False)
    amax = torch.Tensor(np.ones(1, np.float32), torch.float32)

    def launches_and_pdl(**kw):
        calls.clear()
        before = len(pdl)
        fp4kit.quantize(x, "nvfp4", axis="both", **kw)
        return [c[0] for c in calls], len(pdl) - before
    _plan.clear_plans()
    names, n_pdl = launches_and_pdl(amax=amax)        # supplied amax: nothing ahead of the first kernel
    assert "memset" not in names and len(names) >= 2 and n_pdl == len(names)
    monkeypatch.setattr(_torch_exec, "PDL_ALL", False)         # item 134: the later kernels only
    _plan.clear_plans()
    assert launches_and_pdl(amax=amax) == (names, len(names) - 1)
    assert launches_and_pdl()[1] == 2
    before = len(pdl)
    calls.clear()
    monkeypatch.setattr(_torch_exec, "PDL", False)
    _plan.clear_plans()
    q2 = fp4kit.quantize(x, "nvfp4", axis="both")
    assert len(pdl) == before                                     # none more
    assert _symbolic([c for c in calls if c[0] != "memset"], q2, x) == with_pdl


def test_fast_path_memo_never_shares_an_entry(monkeypatch):
    import fp4kit

    torch, calls, validations = _fake_fast_path(monkeypatch)
    arr = np.zeros((64, 128), np.uint16)
    x = torch.Tensor(arr, torch.bfloat16)
    variants = [
        (x, "nvfp4", {}),
        (x, "nvfp4", dict(axis="both")),
        (x, "nvfp4", dict(axis="both", scale_layout="swizzled")),
        (x, "nvfp4", dict(axis="both", rht=True)),
        (x, "nvfp4", dict(axis="both", rht=True, rht_sign_mask=0x1234)),
        (x, "nvfp4", dict(tile_2d=True)),
        (x, "nvfp4", dict(row_scaled=True)),
        (x, "nvfp4", dict(rounding="stochastic")),
        (x, "nvfp4", dict(axis="both", rht=True, rht_sign_mask=np.uint16(0x1234))),  # equal, another type
        (x, "mxfp8_e4m3", {}),
        (x, "mxfp8_e4m3", dict(scale_rule="floor")),
        (x, "mxfp4_e2m1", {}),
        (torch.Tensor(arr.view(np.float16), torch.float16), "nvfp4", {}),                   # dtype
        (torch.Tensor(np.zeros((64, 64), np.float32), torch.float32), "nvfp4", {}),          # dtype and shape
        (torch.Tensor(np.zeros((32, 128), np.uint16), torch.bfloat16), "nvfp4", {}),        # shape
        (torch.Tensor(np.zeros((2, 32, 128), np.uint16), torch.bfloat16), "nvfp4", {}),     # 3-D, same (M, K)
        (torch.Tensor(np.zeros(64 * 128 + 1, np.uint16)[1:].reshape(64, 128), torch.bfloat16), "nvfp4", {}),
        (x, "nvfp4", dict(amax=torch.Tensor(np.ones(1, np.float32), torch.float32))),       # amax given
        (x, "nvfp4", dict(row_scaled=True, amax=torch.Tensor(np.ones(64, np.float32), torch.float32))),
    ]
    results = []
    for k, (xi, fmt, kw) in enumerate(variants):
        for trial in range(2):                                             # miss, then hit
            q = fp4kit.quantize(xi, fmt, **kw)
            assert len(_plan.FAST_CALLS) == k + 1, (k, trial)
            assert len(validations) == k + 1, (k, trial)
            opts_kw = {n: v for n, v in kw.items() if n != "amax"}
            amax = kw.get("amax")
            want = quantize_options(tuple(xi.shape), _interop_name(xi), fmt, **opts_kw,
                                    amax_shape=None if amax is None else amax.shape,
                                    amax_dtype=None if amax is None else "float32")
            assert q.options == want and q.shape == tuple(xi.shape)
            results.append(_layout(q))
        assert results[-1] == results[-2]
    plans = [e[1] for e in _plan.FAST_CALLS.values()]
    # entries share a plan only where the plan key says so: 0x1234 / np.uint16(0x1234), and (2, 32, 128) / (64, 128)
    assert len({id(p) for p in plans}) == len(plans) - 2
    _plan.clear_plans()


def _interop_name(x):
    from fp4kit import _interop
    return _interop.dtype_name(x)


def test_fast_path_memo_invalid_calls_raise_every_time(monkeypatch):
    import fp4kit

    torch, calls, validations = _fake_fast_path(monkeypatch)
    x = torch.Tensor(np.zeros((16, 64), np.uint16), torch.bfloat16)
    fp4kit.quantize(x, "nvfp4", tile_2d=True)                          # valid: memoised
    fp4kit.quantize(x, "nvfp4")
    fp4kit.quantize(x, "mxfp8_e4m3")
    n_calls, n_memo = len(calls), len(_plan.FAST_CALLS)
    errors = [
        (dict(tile_2d=1), TypeError, "tile_2d: expected True or False, got int 1"),
        (dict(tile_2d=1.0), TypeError, "tile_2d: expected True or False, got float 1.0"),
        (dict(axis="diagonal"), ValueError, r"axis: expected one of \['rowwise', 'columnwise', 'both'\]"),
        (dict(seed=-1), ValueError, r"seed: expected an integer in \[0, 18446744073709551615\], got -1"),
        (dict(seed=2**64), ValueError, r"seed: expected an integer in \[0, 18446744073709551615\]"),
        (dict(seed=True), TypeError, "seed: expected an integer in"),
        (dict(seed=1.0), TypeError, "seed: expected an integer in"),
        (dict(rht_sign_mask=0x10000), ValueError, r"rht_sign_mask: expected an integer in \[0, 65535\]"),
        (dict(rht=True, axis="rowwise"), ValueError, "rht: the Hadamard transform applies to the columnwise"),
        (dict(amax=torch.Tensor(np.ones(2, np.float32), torch.float32)), ValueError,
         r"amax: expected shape \(1,\), got \(2,\)"),
        (dict(axis=["both"]), TypeError, r"axis: expected one of .*got list \['both'\]"),      # unhashable
    ]
    for kw, exc, msg in errors:
        for trial in range(2):
            with pytest.raises(exc, match=msg):
                fp4kit.quantize(x, "nvfp4", **kw)
    for trial in range(2):
        with pytest.raises(ValueError, match="only NVFP4 takes a global amax"):
            fp4kit.quantize(x, "mxfp8_e4m3", amax=torch.Tensor(np.ones(1, np.float32), torch.float32))
        with pytest.raises(ValueError, match="is an NVFP4 option"):
            fp4kit.quantize(x, "mxfp8_e4m3", tile_2d=True)
        with pytest.raises(ValueError, match="K must be even"):
            fp4kit.quantize(torch.Tensor(np.zeros((4, 33), np.float32), torch.float32), "nvfp4")
        with pytest.raises(ValueError, match="ndim >= 1"):
            fp4kit.quantize(torch.Tensor(np.zeros((), np.float32), torch.float32), "nvfp4")
        with pytest.raises(ValueError, match=r"fmt: expected one of .*got 'nvfp5'"):
            fp4kit.quantize(x, "nvfp5")
    assert len(calls) == n_calls and len(_plan.FAST_CALLS) == n_memo      # nothing launched, nothing memoised
    _plan.clear_plans()


def test_unchecked_constructors_match_the_public_ones():
    import dataclasses

    from fp4kit import tensor

    class A:
        def __init__(self, shape):
            self.shape = shape

    opts = quantize_options((16, 64), "bfloat16", "nvfp4", axis="rowwise")
    args = dict(data=A((16, 32)), scales=A((16, 4)), scale_layout="compact", amax=A((1,)), rows=16, cols=64,
                format="nvfp4")
    op = tensor.Operand(**args)
    fast = tensor._operand_unchecked(*args.values())
    assert type(fast) is tensor.Operand and vars(fast) == vars(op) and list(vars(fast)) == list(vars(op))
    assert list(args) == [f.name for f in dataclasses.fields(tensor.Operand)]
    qargs = dict(format="nvfp4", shape=(16, 64), rowwise=op, columnwise=None, options=opts, input_dtype="bfloat16")
    q = tensor.QuantizedTensor(**qargs)
    fast_q = tensor._quantized_unchecked(*qargs.values())
    assert type(fast_q) is tensor.QuantizedTensor and vars(fast_q) == vars(q) and list(vars(fast_q)) == list(vars(q))
    assert list(qargs) == [f.name for f in dataclasses.fields(tensor.QuantizedTensor)]
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast_q.shape = (1,)
    o7 = tensor._options_with_seed(opts, 7)
    assert o7 == dataclasses.replace(opts, seed=7) and list(vars(o7)) == list(vars(opts)) and opts.seed == 0
    # the public constructors still check
    with pytest.raises(ValueError, match="data: expected shape"):
        tensor.Operand(**{**args, "data": A((16, 64))})
    with pytest.raises(ValueError, match="at least one operand"):
        tensor.QuantizedTensor(**{**qargs, "rowwise": None})


def test_fast_path_memo_from_threads(monkeypatch):
    """Threads quantizing through the memo at once (one entry, one plan): every launch carries its
    own thread's input pointer and seed, and every result its own seed."""
    import fp4kit

    torch, calls, validations = _fake_fast_path(monkeypatch)
    xs = [torch.Tensor(np.zeros((64, 128), np.uint16), torch.bfloat16) for _ in range(4)]
    from concurrent.futures import ThreadPoolExecutor

    def worker(k):
        return {fp4kit.quantize(xs[k], "nvfp4", axis="both", seed=1000 * k + n).options.seed for n in range(200)}

    with ThreadPoolExecutor(max_workers=4) as pool:
        seeds_seen = list(pool.map(worker, range(4)))      # re-raises a worker's exception here
    assert len(_plan.FAST_CALLS) == 1 and len(validations) <= 4
    assert seeds_seen == [{1000 * k + n for n in range(200)} for k in range(4)]
    ptr_of = {x.data_ptr(): k for k, x in enumerate(xs)}
    quant = [values for kernel, values in calls if kernel.startswith("quantize")]
    assert len(quant) == 800
    assert all(v[10] // 1000 == ptr_of[v[0]] for v in quant)
    _plan.clear_plans()


def test_resident_grids_from_one_occupancy_query(monkeypatch):
    """_cuda._resident_per_sm serves the grouped persistent grid (at most 8 per SM; the fallback
    when the query fails): one query per kernel, cached."""
    from fp4kit import _cuda_grouped

    queries = []

    def occupancy(ptr, threads, smem):
        queries.append(ptr)
        if ptr == 0xBAD:
            raise RuntimeError("no occupancy query")
        return {0xA: 3, 0xB: 12}[ptr]

    fake_cp = types.SimpleNamespace(cuda=types.SimpleNamespace(
        driver=types.SimpleNamespace(occupancyMaxActiveBlocksPerMultiprocessor=occupancy),
        runtime=types.SimpleNamespace(getDevice=lambda: 0)))
    monkeypatch.setattr(_cuda, "_cp", lambda: fake_cp)
    monkeypatch.setattr(_cuda, "_RESIDENT", {})

    def kernel(ptr):
        return types.SimpleNamespace(kernel=types.SimpleNamespace(ptr=ptr))

    kernels = {"a": kernel(0xA), "b": kernel(0xB), "bad": kernel(0xBAD)}
    monkeypatch.setattr(_cuda_grouped, "_fn", lambda module, name: kernels[name])

    def res(name):
        return lambda cap: _cuda_grouped._resident("grouped", name, cap)

    pg = _cuda_grouped._persistent_grid
    assert pg(10**6, res("a"), 100) == 300 and pg(7, res("a"), 100) == 7
    assert pg(10**6, res("bad"), 100) == 800             # fallback: 8 per SM
    assert pg(10**6, res("a"), 100) == 300               # cached, no second query
    assert pg(10**6, res("b"), 100) == 800               # capped at 8 per SM
    assert pg(10**6, None, 100) == 800 and pg(5, None, 100) == 5
    assert queries == [0xA, 0xBAD, 0xB]                                   # one query per kernel


def test_grouped_quantize_grid_sizes(monkeypatch):
    """_cuda_grouped._quantize_grid: with one K (kinds same / varying_first), one CTA per block of
    the rows kernel (R x 256 / 2^lw rows x 16 x 2^lw columns) or per 64 x 64 tile for MX tile kernels, from the
    caller's row count; extended-recipe tile kernels and other kinds stay persistent."""
    from fp4kit import _cuda_grouped
    from fp4kit.formats import FORMATS

    three = lambda cap: 3  # noqa: E731  (the kernel's resident CTAs per SM)
    mx, nv = FORMATS["mxfp8_e4m3"], FORMATS["nvfp4"]
    n_el = 65536 * 7168
    grid = _cuda_grouped._quantize_grid
    # rows kernel: R = 4 for 16-bit input with the plain recipes, 2 for float32 or extended recipes;
    # K = 7168: lw = 6, blocks of R x 4 rows x 1024 columns (65536 / 16 * 7 = 256 * 112)
    assert grid(mx, False, "bfloat16", True, True, 8, n_el, 7168, 65536, None, 100) == 4096 * 7
    assert grid(mx, False, "bfloat16", True, True, 8, 65536 * 1000, 1000, 65536, None, 100) == 65536 // 32 * 2  # lw 5
    assert grid(mx, False, "float32", True, True, 8, n_el, 7168, 65536, None, 100) == 512 * 112
    assert grid(nv, True, "bfloat16", True, True, 8, n_el, 7168, 65536, None, 100) == 512 * 112
    assert grid(mx, False, "bfloat16", True, True, 3, 0, 7168, 0, None, 100) == 1        # empty input
    assert grid(mx, False, "bfloat16", True, True, 3, 130 * 100, 100, 130, None, 100) == 1 * 2
    # MX tile kernel: one CTA per tile of (rows // 64 + G) row bands
    assert grid(mx, False, "bfloat16", False, True, 8, n_el, 7168, 65536, three, 100) == (1024 + 8) * 112
    # plain NVFP4 too (the loop-free kernel); NVFP4 with extended recipes and kinds without one K:
    # one wave of resident CTAs (3 per SM here)
    assert grid(nv, False, "bfloat16", False, True, 8, n_el, 7168, 65536, three, 100) == (1024 + 8) * 112
    assert grid(nv, True, "bfloat16", False, True, 8, n_el, 7168, 65536, three, 100) == 300
    assert grid(mx, False, "bfloat16", False, False, 8, n_el, None, None, three, 100) == 300
    # rows kernel without one K: runs of U tiles, SMs x 8 CTAs
    assert grid(mx, False, "bfloat16", True, False, 8, n_el, None, None, three, 100) == 800
    assert grid(mx, False, "bfloat16", True, False, 1, 64 * 64, None, None, three, 100) == -(-(1 + 4 + 64 + 1) // 4)
    # the loop-free MX tile kernel only where that grid covers every tile
    one = _cuda_grouped.one_tile_per_cta
    assert one(mx, False, False, True, 8, 7168, 65536)
    assert one(nv, False, False, True, 8, 7168, 65536)              # plain NVFP4 too
    # NVFP4's extended recipes: group_quantize1_f5_d<D>_ext (persistent without one K, or switched off)
    assert one(nv, True, False, True, 8, 7168, 65536)
    assert not one(nv, True, False, False, 8, 7168, 65536)
    try:
        _cuda_grouped.ONE_TILE_EXT = False
        assert not one(nv, True, False, True, 8, 7168, 65536)
    finally:
        _cuda_grouped.ONE_TILE_EXT = True
    mx4 = FORMATS["mxfp4_e2m1"]
    assert not one(mx4, True, False, True, 8, 7168, 65536)          # extended, not stochastic rounding alone
    # stochastic rounding alone (sr): the packed formats' group_quantize1_f<F>_d<D>_sr
    assert one(mx4, True, False, True, 8, 7168, 65536, True) and one(nv, True, False, True, 8, 7168, 65536, True)
    assert not one(FORMATS["mxfp8_e4m3"], True, False, True, 8, 7168, 65536, True)   # not packed
    assert not one(mx4, True, True, True, 8, 7168, 65536, True)     # rowwise: rows kernel
    assert not one(mx4, True, False, False, 8, 7168, None, True)    # no single K: persistent _sr
    assert not one(mx, False, True, True, 8, 7168, 65536)           # rowwise: rows kernel
    assert not one(mx, False, False, False, 8, 7168, None)          # no single K
    assert not one(mx, False, False, True, 8, 0, 65536)             # K = 0: no band table
    assert not one(mx, False, False, True, 8, 7168, 2**40)          # more tiles than CTAs
    # where group_meta's band descriptors start: 16-byte aligned (grouped.cu band_desc_offset)
    assert [_cuda_grouped._band_desc_offset(r, t) for r, t in ((1024, 1033), (1, 1), (2, 3))] == [2058, 2, 6]


def test_grouped_staged_compact_scales_from_a_size_up():
    """Grouped MX "both" with compact scales stages them (MXFP8's squares, or the one-tile kernel's
    staging, then group_unswizzle_scales) only from rows_total * K = _cuda_grouped.
    GROUP_STAGE_MIN_ELEMENTS up (MXFP8 / MXFP6 5 x 2^23, MXFP4 2^26); below, the one-tile kernel's
    direct compact stores. Swizzled scales keep the squares at every size."""
    import types as _types

    from fp4kit import _cuda_grouped
    from fp4kit.formats import FORMATS

    def o(layout):
        return _types.SimpleNamespace(want_rowwise=True, want_columnwise=True, scale_layout=layout,
                                      format=None)

    assert _cuda_grouped.GROUP_STAGE_MIN_ELEMENTS == {
        "mxfp8_e4m3": 5 << 23, "mxfp8_e5m2": 5 << 23, "mxfp6_e2m3": 5 << 23, "mxfp6_e3m2": 5 << 23,
        "mxfp4_e2m1": 1 << 26}
    q = _cuda_grouped.quad_squares
    e4 = FORMATS["mxfp8_e4m3"]
    assert q(e4, False, o("compact"), "bfloat16", False, True, 8, 7168, 8192)         # 58.7 M elements
    assert not q(e4, False, o("compact"), "bfloat16", False, True, 8, 7168, 4096)     # 29.4 M
    assert q(e4, False, o("swizzled"), "bfloat16", False, True, 8, 7168, 1024)
    for fmt, big, small in (("mxfp8_e4m3", 8192, 4096), ("mxfp6_e2m3", 8192, 4096), ("mxfp6_e3m2", 8192, 4096),
                            ("mxfp4_e2m1", 9363, 9362)):   # MXFP4: 2^26 / 7168 = 9362.3 rows
        opts = o("compact")
        opts.format = fmt
        f = FORMATS[fmt]
        assert _cuda_grouped.stage_one_tile(f, opts, "bfloat16", 7168, big), fmt
        assert not _cuda_grouped.stage_one_tile(f, opts, "bfloat16", 7168, small), fmt
        assert _cuda_grouped.stage_one_tile(f, opts, "bfloat16", 7168), fmt      # no bound known: no rule
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr(_plan, "SIZE_RULES", False)      # the tests' switch: squares at every size
    try:
        assert q(e4, False, o("compact"), "bfloat16", False, True, 8, 7168, 4096)
    finally:
        monkeypatch.undo()


def test_grouped_quad_squares_where_it_applies():
    """group_quantize4 (128 x 128 squares) takes plain MXFP8 "both" from 16-bit input with one K that
    is a multiple of 128, in both scale layouts (compact ones through staging); everything else keeps
    the 64 x 64 tile kernels."""
    import types as _types

    from fp4kit import _cuda_grouped
    from fp4kit.formats import FORMATS

    q = _cuda_grouped.quad_squares

    def o(row=True, col=True, layout="swizzled"):
        return _types.SimpleNamespace(want_rowwise=row, want_columnwise=col, scale_layout=layout)

    e4, e5 = FORMATS["mxfp8_e4m3"], FORMATS["mxfp8_e5m2"]
    assert q(e4, False, o(), "bfloat16", False, True, 8, 7168, 65536)
    assert q(e5, False, o(), "float16", False, True, 64, 128, 100)
    for fmt in ("mxfp6_e2m3", "mxfp6_e3m2", "mxfp4_e2m1", "nvfp4"):
        assert not q(FORMATS[fmt], False, o(), "bfloat16", False, True, 8, 7168, 65536), fmt
    assert not q(e4, False, o(), "float32", False, True, 8, 7168, 65536)          # float32 input
    assert not q(e4, True, o(), "bfloat16", False, True, 8, 7168, 65536)          # extended recipe
    assert q(e4, False, o(layout="compact"), "bfloat16", False, True, 8, 7168, 65536)   # staged scales
    assert not q(e4, False, o(row=False), "bfloat16", False, True, 8, 7168, 65536)
    assert not q(e4, False, o(col=False), "bfloat16", True, True, 8, 7168, 65536)
    assert not q(e4, False, o(), "bfloat16", False, False, 8, None, None)         # no single K
    assert not q(e4, False, o(), "bfloat16", False, True, 8, 7104, 65536)         # K % 128 != 0
    assert not q(e4, False, o(), "bfloat16", False, True, 8, 0, 65536)
    assert not q(e4, False, o(), "bfloat16", False, True, 8, 7168, 2**40)         # more squares than CTAs
    # the grid: one CTA per square of (rows // 128 + G) bands
    assert _cuda_grouped._square_bands_bound(65536, 8) == 520 and _cuda_grouped._square_bands_bound(127, 3) == 3


def test_dequantize_grid_one_cta_per_cta_segments(monkeypatch):
    """_cuda.dequantize launches one CTA per _THREADS * _DQ_SEGS[dtype] segments of 16 (not one wave
    of resident CTAs; 2 segments per thread for float32 output, 3 for 16-bit output, as DqTune in
    cuda_src/common/dequantize_op.cuh), capped at _MAX_GRID for the kernel's grid-stride loop."""
    from fp4kit._loader import cuda_src_dir
    launches = []

    def fn(grid, block, args):
        launches.append((grid, block, args))

    fake_cp = types.SimpleNamespace(ascontiguousarray=lambda a, dtype=None: a)
    monkeypatch.setattr(_cuda, "_cp", lambda: fake_cp)
    monkeypatch.setattr(_cuda, "_empty", lambda shape, dtype: ("out", shape))
    monkeypatch.setattr(_cuda, "_fn", lambda module, kernel: fn)
    assert _cuda._DQ_SEGS == {"float32": 2, "bfloat16": 3, "float16": 3}
    src = (cuda_src_dir() / "common" / "dequantize_op.cuh").read_text()
    assert "segs = OT == DTYPE_FLOAT32 ? 2 : 3;" in src
    assert "dq_rows_loop<FMT, OT, DqTune<OT>::segs>(" in src and "per_cta = (i64)DQ_THREADS * SEGS;" in src
    kernels = (cuda_src_dir() / "dequantize.cu").read_text()
    assert "__launch_bounds__(DQ_THREADS, DqTune<O>::min_ctas)" in kernels
    for dtype, segs in _cuda._DQ_SEGS.items():
        per_cta = _cuda._THREADS * segs
        cases = [(1, 1, 1), (3, 17, 1), (8192, 8192, -(-8192 * 512 // per_cta)),
                 (1024, 33, -(-1024 * 3 // per_cta)), (1 << 20, 1 << 20, _cuda._MAX_GRID)]
        for rows, cols, grid in cases:
            launches.clear()
            out = _cuda.dequantize("data", "scales", None, "mxfp8_e4m3", rows, cols, "compact", dtype)
            assert out == ("out", (rows, cols))
            assert [(g, b) for g, b, _ in launches] == [((grid,), (_cuda._THREADS,))], (dtype, rows, cols)
            assert int(launches[0][2][3]) == rows and int(launches[0][2][4]) == cols
    assert _cuda.dequantize_kernel(_cuda.FORMATS["nvfp4"], "bfloat16", 8192, 8192) == ("dequantize_f5_o1", 5462)


def test_group_dequantize_grid_is_the_resident_ctas():
    """group_dequantize's persistent grid: the SMs x the resident CTAs per SM the kernel is compiled
    for (__launch_bounds__ min blocks: DqGroupTune::min_ctas, 3 for float32 output, 4 for 16-bit),
    fewer when the segments need fewer CTAs of _THREADS * _GROUP_DQ_SEGS; the Python constants
    are the CUDA source's."""
    from fp4kit._loader import cuda_src_dir
    from fp4kit import _cuda_grouped as cg
    src = (cuda_src_dir() / "common" / "dequantize_op.cuh").read_text()
    assert "min_ctas = OT == DTYPE_FLOAT32 ? 3 : 4;" in src
    assert ("struct DqGroupTune {\n    static constexpr int segs = 2;\n"
            "    static constexpr int min_ctas = DqTune<OT>::min_ctas;") in src
    grouped_src = (cuda_src_dir() / "grouped.cu").read_text()
    assert "__launch_bounds__(DQ_THREADS, DqGroupTune<O>::min_ctas)" in grouped_src
    assert "constexpr int SEGS = DqGroupTune<OT>::segs;" in grouped_src   # the member loops
    assert "dq_rows_loop<FMT, OT, DqGroupTune<OT>::segs>(" in grouped_src   # _cols without member state
    assert _cuda._DQ_MIN_CTAS == {"float32": 3, "bfloat16": 4, "float16": 4}
    assert cg._GROUP_DQ_SEGS == {"float32": 2, "bfloat16": 2, "float16": 2}
    for dtype, per_sm in _cuda._DQ_MIN_CTAS.items():
        assert cg.dequantize_kernel("mxfp8_e4m3", dtype, 65536 * 7168, 132) == (
            f"group_dequantize_f0_o{_cuda._DTYPE_IDS[dtype]}", 132 * per_sm)
        # with device dims the segments are bounded by the elements alone (members of K = 1 have a
        # segment per element): 512 elements -> 1 CTA, 513 -> 2, 16 x 512 (512 segments when
        # K % 16 == 0, up to 8192 when not) -> 16
        assert [cg.dequantize_kernel("nvfp4", dtype, n, 132)[1] for n in (0, 1, 512, 513, 16 * 512)] == \
            [1, 1, 1, 2, 16]
        assert cg.dequantize_kernel("nvfp4", dtype, 1 << 40, 132)[1] == 132 * per_sm


def test_group_dequantize_shared_columns_choice():
    """group_dequantize_cols_* exactly for the operands whose members share their columns: rowwise
    of kinds "same" / "varying_first" (one K), columnwise of "same" / "varying_last" (one M)."""
    from fp4kit import _cuda_grouped as cg
    from fp4kit._loader import cuda_src_dir
    want = {("same", "rowwise"): True, ("varying_first", "rowwise"): True, ("varying_last", "rowwise"): False,
            ("varying_both", "rowwise"): False, ("same", "columnwise"): True, ("varying_first", "columnwise"): False,
            ("varying_last", "columnwise"): True, ("varying_both", "columnwise"): False}
    for (kind, operand), cols in want.items():
        assert cg.shared_cols(kind, operand) is cols, (kind, operand)
    for cols, prefix in ((False, "group_dequantize_f5_o1"), (True, "group_dequantize_cols_f5_o1")):
        assert cg.dequantize_kernel("nvfp4", "bfloat16", 65536 * 7168, 132, cols) == (prefix, 132 * 4)
    assert cg.dequantize_kernel("nvfp4", "float16", 512, 132, True)[0] == "group_dequantize_cols_f5_o2"
    # float32 out: the general kernel either way (the _cols kernels measured no faster)
    assert cg.dequantize_kernel("nvfp4", "float32", 512, 132, True)[0] == "group_dequantize_f5_o0"
    src = (cuda_src_dir() / "grouped.cu").read_text()
    assert "FP4KIT_GROUP_DEQUANTIZE_COLS(F, 1) FP4KIT_GROUP_DEQUANTIZE_COLS(F, 2)" in src


def test_cols_kernel_for_the_columnwise_operand_alone():
    """quantize_cols_f<F>_d<D>_* for the plain columnwise operand alone from 16-bit input with
    M % 16 == 0: NVFP4 compact (_c: 64 x 512 tiles, 512 threads) and swizzled (_s2 with 8-byte loads
    where the input is 16-byte aligned and K % 4 == 0, 128 threads; _s where it is 4-byte aligned and
    K even, 256 threads; 128 x 64 tiles), compact MXFP8 / MXFP6 with 8-byte loads only (_c2: 64 x 1024
    tiles, 512 threads). One launch after the amax (no staging, unswizzle or padding launch); the tile
    kernel everywhere else (MXFP4, MX swizzled, float32, other alignments and shapes, both / rowwise,
    the extended options)."""
    def launches(shape, dtype, fmt, align=16, **kw):
        return [(s.module, s.kernel, s.grid, s.block) for s in plan_of(shape, dtype, fmt, align=align, **kw).launches()]

    for dtype, d in (("bfloat16", 1), ("float16", 2)):
        for kw in ({}, {"amax_shape": (1,)}):
            for shape, align, layout, want in (
                    ((3088, 132), 16, "compact", ("_c", 3 * 7, 512)), ((3088, 132), 4, "compact", ("_c", 3 * 7, 512)),
                    ((3088, 130), 16, "compact", ("_c", 3 * 7, 512)),
                    ((3088, 132), 16, "swizzled", ("_s2", 2 * 49, 128)), ((3088, 130), 16, "swizzled", ("_s", 2 * 49, 256)),
                    ((3088, 132), 4, "swizzled", ("_s", 2 * 49, 256))):
                got = launches(shape, dtype, "nvfp4", align=align, axis="columnwise", scale_layout=layout, **kw)
                assert got[-1] == ("quantize_cols", f"quantize_cols_f5_d{d}{want[0]}", want[1], want[2]), got
                assert len(got) == 2 and got[0][1] == ("nvfp4_amax_out" if kw else "amax_global_d" + str(d)), got
        for fmt, f in (("mxfp8_e4m3", 0), ("mxfp8_e5m2", 1), ("mxfp6_e2m3", 2), ("mxfp6_e3m2", 3)):
            got = launches((3088, 132), dtype, fmt, axis="columnwise")
            assert got == [("quantize_cols", f"quantize_cols_f{f}_d{d}_c2", 3 * 4, 512)], got
    for fmt in FORMATS:
        nv = fmt == "nvfp4"
        for shape, dtype, align, kw, want in (
                ((3088, 132), "float32", 16, {}, False), ((3088, 132), "bfloat16", 2, {}, False),
                ((3088, 132), "bfloat16", 4, {}, nv), ((3088, 130), "bfloat16", 16, {}, nv),
                ((3080, 132), "bfloat16", 16, {}, False), ((3088, 132), "bfloat16", 16, {"axis": "both"}, False),
                ((3088, 132), "bfloat16", 16, {"axis": "rowwise"}, False),
                ((3088, 132), "bfloat16", 16, {"scale_layout": "swizzled"}, nv),
                ((3088, 132), "bfloat16", 16, {}, nv or fmt in _plan.COLS_MX_FORMATS),
                ((3088, 132), "bfloat16", 16, {"rounding": "stochastic"}, False),
                ((3088, 128), "bfloat16", 16, {"rht": True}, False), ((3088, 128), "bfloat16", 16, {"row_scaled": True}, False),
                ((3088, 128), "bfloat16", 16, {"tile_2d": True}, False)):
            kw = dict(kw)
            kw.setdefault("axis", "columnwise")
            try:
                got = launches(shape, dtype, fmt, align=align, **kw)
            except (TypeError, ValueError):
                continue
            assert any(m == "quantize_cols" for m, *_ in got) == want, (fmt, shape, dtype, align, kw, got)
    assert _plan.COLS_MX_FORMATS == {"mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2"}


def test_quad_tile_kernel_only_where_measured_faster(size_rules_off):
    """quantize_f<F>_d<D>_quad (128 x 128 squares, 1024 threads) for plain MXFP8 / MXFP4 "both" from
    16-bit input with M and K multiples of 128, either scale layout; the 64 x 64 kernel everywhere
    else (columnwise alone, MXFP6, float32 input, other shapes, the extended options)."""
    def kernels(shape, dtype, fmt, **kw):
        return [(s.kernel, s.grid * s.grid_y * s.grid_z, s.block) for s in plan_of(shape, dtype, fmt, **kw).launches()
                if s.module == "quantize"]

    for fmt, f in (("mxfp8_e4m3", 0), ("mxfp8_e5m2", 1), ("mxfp4_e2m1", 4)):
        for dtype, d in (("bfloat16", 1), ("float16", 2)):
            for layout in ("compact", "swizzled"):
                assert kernels((384, 1280), dtype, fmt, axis="both", scale_layout=layout) == [
                    (f"quantize_f{f}_d{d}_quad", 3 * 10, 1024)]
    assert kernels((384, 1280), "float32", "mxfp8_e4m3", axis="both") == [("quantize_f0_d0_plain", 6 * 20, 256)]
    assert kernels((384, 1280), "bfloat16", "mxfp8_e4m3", axis="columnwise", scale_layout="swizzled") == [
        ("quantize_f0_d1_plain", 120, 256)]
    assert kernels((384, 1280), "bfloat16", "mxfp6_e2m3", axis="both") == [("quantize_f2_d1_plain", 120, 256)]
    assert kernels((384, 1216), "bfloat16", "mxfp8_e4m3", axis="both") == [("quantize_f0_d1_plain", 6 * 19, 256)]
    # M % 128 != 0: the squares of _quadm (test_quadm_tile_kernel_for_any_m)
    assert kernels((320, 1280), "bfloat16", "mxfp8_e4m3", axis="both") == [("quantize_f0_d1_quadm", 3 * 10, 1024)]
    assert kernels((320, 1280), "bfloat16", "mxfp4_e2m1", axis="both") == [("quantize_f4_d1_quadm", 3 * 10, 1024)]
    assert kernels((384, 1280), "float32", "mxfp4_e2m1", axis="both") == [("quantize_f4_d0_plain", 120, 256)]
    assert kernels((384, 1216), "float16", "mxfp4_e2m1", axis="both") == [("quantize_f4_d2_plain", 6 * 19, 256)]
    assert kernels((384, 1280), "bfloat16", "mxfp4_e2m1", axis="both", rounding="stochastic") == [
        ("quantize_f4_d1_sr", 120, 256)]
    assert kernels((384, 1280), "bfloat16", "mxfp8_e4m3", axis="both", scale_rule="floor") == [
        ("quantize_f0_d1_quad", 30, 1024)]   # the floor rule is a plain-kernel flag


def test_quadm_tile_kernel_for_any_m(size_rules_off):
    """quantize_f<F>_d<D>_quadm: plain MXFP8 "both" from 16-bit input with K % 128 == 0 and M not a
    multiple of 128, ceil(M / 128) * K / 128 CTAs of 1024 threads. It writes the swizzled padding
    itself (no swizzle_zero_padding launch) and, with compact scales, writes both operands' blocks into
    staging buffers of the padded swizzled shape that one unswizzle_scales launch copies out (the
    width argument is the padded one). MXFP6 and MXFP4 too; not for float32 input, one operand alone,
    K % 128 != 0 or M % 128 == 0 (MXFP6 has no _quad)."""
    p = plan_of((8200, 256), "bfloat16", "mxfp8_e4m3", axis="both", scale_layout="swizzled")
    flags = 1 | 2 | 4 | 256              # ROWWISE | COLUMNWISE | SWIZZLED | VEC_IN
    assert p.launches() == [
        Launch("quantize", "quantize_f0_d1_quadm", 65 * 2, 1024,
               (X, i64(8200), i64(256), buf(0), buf(1), buf(2), buf(3), NULL, NULL, i32(flags), SEED, u32(0xD7E8)))]
    p = plan_of((8200, 256), "float16", "mxfp8_e5m2", axis="both")
    assert [s for s in p.steps if type(s) is Buffer][4:] == [
        Buffer(4, (8320, 8), "uint8", EMPTY), Buffer(5, (256, 260), "uint8", EMPTY)]   # padded staging
    flags = 1 | 2 | 256 | 512 | 1024     # ROWWISE | COLUMNWISE | VEC_IN | COL_SCALES_SWZ | ROW_SCALES_SWZ
    assert p.launches() == [
        Launch("quantize", "quantize_f1_d2_quadm", 65 * 2, 1024,
               (X, i64(8200), i64(256), buf(0), buf(4), buf(2), buf(5), NULL, NULL, i32(flags), SEED, u32(0xD7E8))),
        # rowwise (8200, 8): 65 tiles; columnwise (256, 257) in its (256, 260) staging: 2 x 5 tiles
        Launch("swizzle", "unswizzle_scales", 65 + 10, 256, (buf(4), i64(8200), i64(8), i64(8), buf(1),
                                                             buf(5), i64(256), i64(257), i64(260), buf(3)))]
    for M in (1, 16, 100, 129, 1000, 8256):
        got = [s.kernel for s in plan_of((M, 384), "bfloat16", "mxfp8_e4m3", axis="both").launches()]
        assert got[0] == "quantize_f0_d1_quadm", (M, got)
    for fmt, f in (("mxfp6_e2m3", 2), ("mxfp6_e3m2", 3), ("mxfp4_e2m1", 4)):   # MXFP6: _quadm only, not _quad
        assert plan_of((8200, 256), "float16", fmt, axis="both").launches()[0].kernel == f"quantize_f{f}_d2_quadm"
    assert plan_of((8192, 256), "bfloat16", "mxfp6_e2m3", axis="both").launches()[0].kernel == "quantize_f2_d1_plain"
    for shape, dtype, fmt, kw in (((8200, 256), "float32", "mxfp8_e4m3", {"axis": "both"}),
                                  ((8200, 256), "bfloat16", "mxfp8_e4m3", {"axis": "columnwise"}),
                                  ((8200, 192), "bfloat16", "mxfp8_e4m3", {"axis": "both"}),
                                  ((8192, 256), "bfloat16", "mxfp8_e4m3", {"axis": "both"})):
        got = [s.kernel for s in plan_of(shape, dtype, fmt, **kw).launches()]
        assert not any(k.endswith("_quadm") for k in got), (shape, dtype, fmt, kw, got)


def test_square_kernels_from_a_size_up():
    """The planner takes _quad / _quadm from M * K = _plan.QUAD_MIN_ELEMENTS / QUADM_MIN_ELEMENTS up
    (H100 measurements in _plan: below them the 64 x 64 kernel is as fast or faster): MXFP8 from 2^25
    elements, MXFP4 from 2^26 (M % 128 == 0) or 2^25 (M % 128 != 0), MXFP6 (_quadm only) from 2^26."""
    def first(shape, fmt, dtype="bfloat16", **kw):
        return plan_of(shape, dtype, fmt, axis="both", **kw).launches()[0].kernel

    assert _plan.QUAD_MIN_ELEMENTS == {"mxfp8_e4m3": 1 << 25, "mxfp8_e5m2": 1 << 25, "mxfp4_e2m1": 1 << 26}
    assert _plan.QUADM_MIN_ELEMENTS == {"mxfp8_e4m3": 1 << 25, "mxfp8_e5m2": 1 << 25, "mxfp4_e2m1": 1 << 25,
                                        "mxfp6_e2m3": 1 << 26, "mxfp6_e3m2": 1 << 26}
    for layout in ("compact", "swizzled"):
        # M % 128 == 0
        assert first((4096, 8192), "mxfp8_e4m3", scale_layout=layout) == "quantize_f0_d1_quad"
        assert first((4096, 8064), "mxfp8_e4m3", scale_layout=layout) == "quantize_f0_d1_plain"   # < 2^25
        assert first((2048, 8192), "mxfp8_e5m2", "float16", scale_layout=layout) == "quantize_f1_d2_plain"
        assert first((8192, 8192), "mxfp4_e2m1", scale_layout=layout) == "quantize_f4_d1_quad"
        assert first((4096, 8192), "mxfp4_e2m1", scale_layout=layout) == "quantize_f4_d1_plain"
        assert first((1024, 4096), "mxfp4_e2m1", scale_layout=layout) == "quantize_f4_d1_plain"
        # M % 128 != 0
        assert first((4104, 8192), "mxfp8_e4m3", scale_layout=layout) == "quantize_f0_d1_quadm"
        assert first((2056, 8192), "mxfp8_e4m3", scale_layout=layout) == "quantize_f0_d1_plain"
        assert first((4104, 8192), "mxfp4_e2m1", scale_layout=layout) == "quantize_f4_d1_quadm"
        assert first((2056, 8192), "mxfp4_e2m1", scale_layout=layout) == "quantize_f4_d1_plain"
        assert first((8200, 8192), "mxfp6_e2m3", scale_layout=layout) == "quantize_f2_d1_quadm"
        assert first((16392, 4096), "mxfp6_e3m2", "float16", scale_layout=layout) == "quantize_f3_d2_quadm"
        assert first((8200, 4096), "mxfp6_e2m3", scale_layout=layout) == "quantize_f2_d1_plain"
        assert first((8192, 8192), "mxfp6_e2m3", scale_layout=layout) == "quantize_f2_d1_plain"   # never _quad


def test_staged_both_scales_from_a_size_up():
    """MX "both" from 16-bit input with compact scales: through the staging buffer and one
    unswizzle_scales launch from M * K = _plan.STAGE_BOTH_MIN_ELEMENTS up (MXFP8 / MXFP6 3 x 2^23,
    MXFP4 2^25), the kernel's direct compact stores below; float32 input and one operand alone keep
    their rules."""
    def unswizzles(shape, fmt, dtype="bfloat16", axis="both"):
        return "unswizzle_scales" in [s.kernel for s in plan_of(shape, dtype, fmt, axis=axis).launches()]

    assert _plan.STAGE_BOTH_MIN_ELEMENTS == {"mxfp8_e4m3": 3 << 23, "mxfp8_e5m2": 3 << 23, "mxfp6_e2m3": 3 << 23,
                                             "mxfp6_e3m2": 3 << 23, "mxfp4_e2m1": 1 << 25}
    for fmt in ("mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2"):
        for dtype in ("bfloat16", "float16"):
            assert not unswizzles((4096, 4096), fmt, dtype), (fmt, dtype)
            assert not unswizzles((256, 512), fmt, dtype), (fmt, dtype)
            assert unswizzles((4096, 7168), fmt, dtype), (fmt, dtype)
            assert unswizzles((8192, 8192), fmt, dtype), (fmt, dtype)
        assert unswizzles((256, 512), fmt, "float32")                      # float32 "both": staged
        assert unswizzles((256, 512), fmt, "float32", axis="columnwise")   # the tile kernel's columnwise
    assert not unswizzles((4096, 7168), "mxfp4_e2m1")
    assert not unswizzles((2048, 8192), "mxfp4_e2m1", "float16")
    assert unswizzles((4096, 8192), "mxfp4_e2m1")
    assert unswizzles((8192, 8192), "mxfp4_e2m1")
    assert unswizzles((256, 512), "mxfp4_e2m1", "float32")


def test_ragged_compact_scales_staged_zero_filled(size_rules_off):
    """Plain NVFP4 / MXFP4 "both" from 16-bit input: an operand whose compact scale rows are not a
    multiple of the kernel's store width (4 / 2 bytes) is staged in a zero-filled buffer of the padded
    swizzled shape (its padding is what unswizzle_scales reads besides the kernel's bytes); not for
    float32 input, one operand alone, the extended options, or rows of the store width."""
    def staged(shape, dtype, fmt, **kw):
        p = plan_of(shape, dtype, fmt, **kw)
        zs = [s.shape for s in p.steps if type(s) is Buffer and s.init == ZEROS and s.dtype == "uint8"]
        return zs, "unswizzle_scales" in [s.kernel for s in p.launches()]

    # NVFP4 (8200, 256): columnwise (256, 513) -> (256, 516); rowwise (8200, 16) stays
    assert staged((8200, 256), "bfloat16", "nvfp4", axis="both") == ([(256, 516)], True)
    assert staged((8200, 200), "float16", "nvfp4", axis="both") == ([(8320, 16), (256, 516)], True)
    assert staged((8192, 256), "bfloat16", "nvfp4", axis="both") == ([], False)
    # MXFP4: odd rows only (2-byte stores): (8200, 192) columnwise 257 blocks; (8256, 192) 258: no
    assert staged((8200, 192), "bfloat16", "mxfp4_e2m1", axis="both") == ([(256, 260)], True)
    assert staged((8256, 192), "bfloat16", "mxfp4_e2m1", axis="both") == ([], False)
    # K % 128 == 0: the squares of _quadm write whole blocks, padding included (an empty staging buffer)
    assert staged((8200, 256), "bfloat16", "mxfp4_e2m1", axis="both") == ([], True)
    for shape, dtype, fmt, kw in (((8200, 256), "float32", "nvfp4", {"axis": "both"}),
                                  ((8200, 256), "bfloat16", "nvfp4", {"axis": "both", "tile_2d": True}),
                                  ((8200, 256), "bfloat16", "nvfp4", {"axis": "both", "scale_layout": "swizzled"}),
                                  ((8200, 256), "bfloat16", "nvfp4", {"axis": "columnwise"})):
        assert staged(shape, dtype, fmt, **kw)[0] == [], (shape, dtype, fmt, kw)


def test_grouped_stats_tables_bound_matches_cuda():
    """fp4kit._cuda_grouped.STATS_TABS_MAX_G (the launcher's bound on members for which group_stats
    builds NVFP4 multiplier tables) equals grouped.cu's STATS_TABS_MAX_G (its shared-memory count
    array), and group_meta's bit 256 (amax offsets in tables) is the one the launcher sets."""
    from pathlib import Path

    from fp4kit import _cuda_grouped
    from fp4kit._loader import cuda_src_dir
    text = (cuda_src_dir() / "grouped.cu").read_text()
    m = re.search(r"#define STATS_TABS_MAX_G (\d+)", text)
    assert m and int(m.group(1)) == _cuda_grouped.STATS_TABS_MAX_G
    assert "(bits & 256) ? NV_TAB + 1 : 1" in text
    src = (Path(_cuda_grouped.__file__)).read_text()
    assert "int(tables and descriptors) << 8" in src
    # group_amax_plain_rht_bf16's shared per-member maxima: the launcher's bound on members
    m = re.search(r"constexpr int GAMAX_MAX = (\d+);", text)
    assert m and int(m.group(1)) == _cuda_grouped.GAMAX_MAX


def test_grouped_mx_band_descriptors_match_cuda():
    """The MX one-tile kernel reads the bands' descriptors for exactly the formats and input dtypes
    where the host has group_meta write them (bit 64) and hands the kernel the descriptors' part of
    the band buffer: fp4kit._cuda_grouped.MX_DESC_FORMATS mirrors grouped.cu's FP4KIT_GQ1_DESC bits
    and its 16-bit-input condition. A mismatch would make the kernel read member lookups as
    descriptors (or the reverse): wrong bytes on the GPU."""
    from fp4kit import _cuda_grouped as cg
    from fp4kit._grouped_device import _bounds
    from fp4kit._loader import cuda_src_dir
    from fp4kit._validate import group_options
    text = (cuda_src_dir() / "grouped.cu").read_text()
    m = re.search(r"#define FP4KIT_GQ1_DESC (\d+)", text)
    assert m, "grouped.cu FP4KIT_GQ1_DESC"
    bits = int(m.group(1))
    assert {f for f in FORMATS if bits >> FORMATS[f].format_id & 1} == set(cg.MX_DESC_FORMATS)
    assert "constexpr bool DESC = F::packed || (((FP4KIT_GQ1_DESC >> FMT) & 1) && DT != DTYPE_FLOAT32);" in text
    G, K, rows = 3, 7168, 65536
    for fmt in FORMATS:
        for dtype in ("float32", "bfloat16", "float16"):
            opts, _ = group_options(dtype, fmt, dict(axis="both", scale_layout="swizzled"), False)
            caps = _bounds("varying_first", FORMATS[fmt], opts, G, rows * K, None, K)
            p = cg.build_group_quantize_plan(dtype, opts, G, rows * K, caps, None, False, K, rows,
                                             ("dev", None, True), SM, lambda module, kernel, cap: cap)
            launches = list(p.launches())
            meta = next(s for s in launches if s.kernel == "group_meta")
            tile = [s for s in launches if s.kernel.startswith("group_quantize1_")]
            if fmt == "mxfp8_e4m3" or fmt == "mxfp8_e5m2":
                if not tile:      # 16-bit input: the 128 x 128 squares, no one-tile kernel
                    continue
            assert len(tile) == 1, (fmt, dtype, [s.kernel for s in launches])
            want = FORMATS[fmt].packed or (fmt in cg.MX_DESC_FORMATS and dtype != "float32")
            assert cg._band_descriptors(FORMATS[fmt], dtype) == want
            assert bool(meta.args[4].value & 64) == want, (fmt, dtype)
            # the tile kernel's band argument (its 15th) starts at the descriptors with them
            n_rows, n_tiles = meta.args[15].value, meta.args[16].value
            band_off = tile[0].args[14].offset
            assert band_off == 8 * (cg._band_desc_offset(n_rows, n_tiles) if want else n_rows), (fmt, dtype)
    assert {"mxfp6_e2m3", "mxfp6_e3m2"} == set(cg.MX_DESC_FORMATS)


def test_grouped_meta_indices_match_cuda():
    """fp4kit._cuda_grouped's mirrors of grouped.cu's MetaArray (the arrays count and the rows of
    META_SROW / META_SCOL / META_SQ that the compact-scale unswizzle launch slices) equal the enum."""
    from fp4kit import _cuda_grouped
    from fp4kit._loader import cuda_src_dir
    text = (cuda_src_dir() / "grouped.cu").read_text()
    enum = dict((k, int(v)) for k, v in re.findall(r"^\s+(META_[A-Z]+) = (\d+),", text, re.M))
    assert enum["META_COUNT"] == _cuda_grouped._NMETA
    assert (enum["META_SROW"], enum["META_SCOL"], enum["META_SQ"]) == (
        _cuda_grouped._META_SROW, _cuda_grouped._META_SCOL, _cuda_grouped._META_SQ)


def test_one_tile_staging_policy():
    """Which one-tile ops stage their compact scales (_cuda_grouped.stage_one_tile)."""
    from fp4kit import _cuda_grouped
    from fp4kit.tensor import QuantizeOptions

    def staged(fmt, dtype, K, axis="both", layout="compact"):
        o = QuantizeOptions(fmt, axis, layout)
        return _cuda_grouped.stage_one_tile(FORMATS[fmt], o, dtype, K)
    assert staged("mxfp6_e2m3", "float32", 7168) and staged("mxfp4_e2m1", "bfloat16", 128)
    assert staged("mxfp4_e2m1", "float32", 7168) and staged("mxfp4_e2m1", "float16", 7168)
    assert not staged("nvfp4", "bfloat16", 7168)
    assert not staged("mxfp6_e2m3", "bfloat16", 7168 + 64) and not staged("mxfp6_e2m3", "bfloat16", 7168, "columnwise")
    assert not staged("mxfp6_e2m3", "bfloat16", 7168, layout="swizzled")


@pytest.mark.parametrize("poison", [False, True])
def test_dequantize_fast_path_with_fake_torch(monkeypatch, poison):
    """fp4kit.dequantize of torch results (fake torch, no kernels run): one dequantize_launch with
    the operand's pointers, sizes, layout and row_scaled flag into a torch.empty output of the
    requested dtype (poisoned when poisoning is on), on PyTorch's current stream, reshaped like
    the general path; operands the fast path does not take are left to the general path."""
    import fp4kit
    from fp4kit import _device_api

    torch = _install_fake_torch(monkeypatch, poison)
    x = torch.Tensor(np.zeros((6, 4, 64), np.uint16), torch.bfloat16)
    _fake_torch(monkeypatch, plan_of((24, 64), "bfloat16", "nvfp4", axis="both", row_scaled=True))
    monkeypatch.setattr(_torch_exec, "_torch", lambda: torch)
    launches = []
    monkeypatch.setattr(_torch_exec, "dequantize_launch", lambda *a: launches.append(a))
    q = fp4kit.quantize(x, "nvfp4", axis="both", row_scaled=True)
    for operand, (rows, cols), shape in (("rowwise", (24, 64), (6, 4, 64)), ("columnwise", (64, 24), (64, 24))):
        op = q.operand(operand)
        for dtype, kid in (("float32", 0), ("bfloat16", 1), ("float16", 2)):
            launches.clear()
            y = fp4kit.dequantize(q, dtype, operand)
            assert isinstance(y, torch.Tensor) and y.dtype is getattr(torch, dtype) and y.arr.shape == shape
            assert (y.arr.view(np.uint8) == 0xA5).all() == poison
            total = rows * -(-cols // 16)
            assert launches == [(0, f"dequantize_f5_o{kid}", -(-total // 1024), op.data.data_ptr(),
                                 op.scales.data_ptr(), op.amax.data_ptr(), rows, cols, 0, 1, y.data_ptr(), 0xABC0)]
    # not taken: strided data, data and scales of different kinds, wrong dtypes, NVFP4 without amax
    op = q.rowwise
    strided = torch.Tensor(np.zeros((24, 64), np.uint8), torch.uint8)[:, :32]
    for kw in (dict(data=strided), dict(scales=op.scales.arr), dict(amax=op.amax.arr),
               dict(data=torch.Tensor(np.zeros((24, 32), np.float16), torch.float16)), dict(amax=None)):
        bad = types.SimpleNamespace(**{**dict(data=op.data, scales=op.scales, amax=op.amax, rows=24, cols=64,
                                              format="nvfp4", scale_layout="compact"), **kw})
        assert _device_api._dequantize_fast(bad, "float32", None) is None, kw


class _FakeCupyNd(_FakeCupyArray2):
    """numpy-backed stand-in for cupy.ndarray as the CuPy fast path sees it (module "cupy")."""

    device = types.SimpleNamespace(id=0)

    @property
    def dtype(self):
        return self.arr.dtype

    @property
    def size(self):
        return self.arr.size

    def __dlpack__(self, stream=None):          # makes it a device array for fp4kit.api
        raise NotImplementedError


_FakeCupyNd.__module__ = "cupy"


def _install_fake_cupy(monkeypatch, poison):
    """A fake cupy (ndarray, empty, the current stream 0xABC0, device 0) in sys.modules, seen by the
    CuPy fast path; plans cleared."""
    from fp4kit import _device_api, api

    runtime = types.SimpleNamespace(getDevice=lambda: 0)
    cuda = types.ModuleType("cupy.cuda")
    cuda.runtime = runtime
    cuda.get_current_stream = lambda: types.SimpleNamespace(ptr=0xABC0)
    cupy = types.ModuleType("cupy")
    cupy.ndarray, cupy.cuda = _FakeCupyNd, cuda
    cupy.empty = lambda shape, dtype: _FakeCupyNd(np.empty(shape, dtype))
    cupy.full = lambda shape, v, dtype: _FakeCupyNd(np.full(shape, v, dtype))
    cupy.asarray = lambda a: _FakeCupyNd(np.array(a))
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setitem(sys.modules, "cupy.cuda", cuda)
    monkeypatch.setattr(api, "_device_api", _device_api)
    monkeypatch.setattr(_device_api, "_cupy_ndarray", None)
    monkeypatch.setattr(_device_api, "_cupy_runtime", None)
    monkeypatch.setattr(_device_api, "_sm_count_of", lambda dev: SM)
    monkeypatch.setattr(_cuda, "_poison", poison)
    _plan.clear_plans()
    return cupy


def test_cupy_fast_path_end_to_end_with_fake_cupy(monkeypatch):
    """fp4kit.quantize of a (fake) CuPy array: the memoised plan run by run_cupy, cupy.empty
    buffers (poisoned), the launches' pointers, CuPy's current stream, results of the general path's
    shapes; a repeated call hits the memo; ineligible inputs are left to the general path."""
    import fp4kit
    from fp4kit import _device_api

    cupy = _install_fake_cupy(monkeypatch, True)
    x = _FakeCupyNd(np.zeros((64, 128), np.float16))
    amax = _FakeCupyNd(np.array([2.0], np.float32))
    plan = _plan.build_quantize_plan(64, 128, "float16", quantize_options((64, 128), "float16", "nvfp4", axis="both",
                                                                          amax_shape=(1,), amax_dtype="float32"),
                                     1, 16, SM)
    calls = _fake_torch(monkeypatch, plan)
    for trial in range(2):
        calls.clear()
        q = fp4kit.quantize(x, "nvfp4", axis="both", amax=amax)
        assert all(type(a) is _FakeCupyNd for op in (q.rowwise, q.columnwise) for a in (op.data, op.scales, op.amax))
        assert (q.rowwise.data.shape, q.columnwise.data.shape) == ((64, 64), (128, 32))
        assert (q.rowwise.data.arr == 0xA5).all()                        # poisoned, no kernel ran
        assert [c[0] for c in calls] == ["nvfp4_amax_out", "quantize_f5_d2_plain"]
        assert calls[0][4][:5] == (amax.data_ptr(), 1, 0x7FFFFFFF, q.rowwise.amax.data_ptr(), q.columnwise.amax.data_ptr())
        assert calls[1][3] == 0xABC0 and calls[1][4][0] == x.data_ptr()
        assert calls[1][4][3:9] == (q.rowwise.data.data_ptr(), q.rowwise.scales.data_ptr(), q.columnwise.data.data_ptr(),
                                    q.columnwise.scales.data_ptr(), q.rowwise.amax.data_ptr(), q.columnwise.amax.data_ptr())
    assert len(_plan.FAST_CALLS) == 1 and next(iter(_plan.FAST_CALLS))[0] == "cupy"
    # the eligibility check
    assert _device_api._cupy_fast_device(x, None) == 0 and _device_api._cupy_fast_device(x, amax) == 0
    assert _device_api._cupy_fast_device(x[:, :64], None) is None                      # not C-contiguous
    assert _device_api._cupy_fast_device(_FakeCupyNd(np.zeros((4, 4), np.float64)), None) is None
    assert _device_api._cupy_fast_device(x, np.array([2.0], np.float32)) is None       # a NumPy amax
    assert _device_api._cupy_fast_device(x, _FakeCupyNd(np.array([2.0]))) is None      # a float64 amax
    assert _device_api._cupy_fast_device(np.zeros((4, 4), np.float32), None) is None
    monkeypatch.setattr(cupy.cuda.runtime, "getDevice", lambda: 1)
    assert _device_api._cupy_fast_device(x, None) is None                              # not the current device
    _plan.clear_plans()


def test_grouped_plan_stores_a_supplied_amax_in_one_launch():
    """Grouped NVFP4 with supplied amaxes: the stored copies for the result come from one
    nvfp4_amax_out launch of the plan (the caller's amax, sign bit cleared: -0 as +0), into the
    buffers the result returns as row_amax / col_amax; the columnwise copy only where the
    columnwise amax is not computed (rht: the post-transform amax is)."""
    from fp4kit import _cuda_grouped as cg
    from fp4kit._grouped_device import _bounds
    from fp4kit._validate import group_options

    G, K, rows = 5, 128, 640
    for kw, cols in ((dict(axis="both"), True), (dict(axis="rowwise"), False), (dict(axis="columnwise"), True),
                     (dict(axis="both", rht=True), False)):
        opts, _ = group_options("bfloat16", "nvfp4", kw, False)
        caps = _bounds("varying_first", FORMATS["nvfp4"], opts, G, rows * K, None, K)
        p = cg.build_group_quantize_plan("bfloat16", opts, G, rows * K, caps, 7, False, K, rows, ("dev", None, True),
                                         SM, lambda module, kernel, cap: cap)
        out = [s for s in p.launches() if s.kernel == "nvfp4_amax_out"]
        assert len(out) == 1, kw
        a = out[0].args
        rs = p.outputs["row_amax"] if opts.want_rowwise else None
        cs = p.outputs["col_amax"] if cols else None
        assert a == (AMAX, i64(7), u32(0x7FFFFFFF), NULL if rs is None else buf(rs), NULL if cs is None else buf(cs),
                     NULL, NULL, NULL), kw
        for slot in (rs, cs):
            if slot is not None:
                assert Buffer(slot, (7,), "float32", EMPTY) in p.steps
        # launched before any kernel that reads the stored copies
        kernels = [s.kernel for s in p.launches()]
        assert kernels.index("nvfp4_amax_out") < min(i for i, k in enumerate(kernels) if k.startswith("group_quantize"))


def test_grouped_plans_issue_what_the_imperative_launcher_issued():
    """scripts/group_plan_equivalence.py: the planned grouped launcher against the imperative one of
    9eebd4f, through a recording fake CuPy, over every format / axis / layout / dtype / recipe / dims
    kind / amax / dbias and sizes reaching every kernel choice: identical launches, allocations and
    results (it exits non-zero on any difference; a deliberate break of one offset or one buffer's
    initial contents made 2595 / 96 of its 5190 cases differ)."""
    import subprocess

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    have = subprocess.run(["git", "cat-file", "-e", "9eebd4f^{commit}"], cwd=repo, capture_output=True)
    if have.returncode != 0:
        pytest.skip("git history without 9eebd4f (a shallow clone)")
    r = subprocess.run([sys.executable, os.path.join(repo, "scripts", "group_plan_equivalence.py")], cwd=repo,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert " 0 with different traces" in r.stdout and "group_quantize4" in r.stdout, r.stdout


def _fake_cupy_ndarray(shape, dtype, memptr):
    """cupy.ndarray(shape, dtype, memptr=...) over a fake allocation (memptr: its array and offset)."""
    base, off = memptr
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    return _FakeCupyArray2(base.arr[off:off + n].view(dtype).reshape(shape))


class _FakeMem:
    def __init__(self, owner, off=0):
        self.owner, self.off = owner, off
        self.ptr = owner.arr.ctypes.data + off if owner.arr.size else 0

    def __add__(self, k):
        return (self.owner, self.off + k)


class _FakeCupyArena(_FakeCupyArray2):
    @property
    def data(self):
        return _FakeMem(self)


@pytest.mark.parametrize("lib", ["torch", "cupy"])
@pytest.mark.parametrize("poison", [False, True])
@pytest.mark.parametrize("case", ["mxfp8_both_dev", "nvfp4_tables", "nvfp4_amax_host", "mxfp6_staged", "dbias"])
def test_grouped_plan_arena_executors(monkeypatch, lib, poison, case):
    """A grouped plan (arena set) run by both fast-path executors: its 1-D EMPTY / ZEROS buffers come
    from ONE allocation (buffers over 1 MiB and 2-D ones keep their own), each at a multiple
    of 256 bytes, none overlapping; every launch gets those pointers (plus its argument offsets);
    the outputs are views of the right dtype and length there; ZEROS regions are cleared on the
    stream, EMPTY ones poisoned when poisoning is on."""
    from fp4kit import _cuda_grouped as cg
    from fp4kit._validate import group_options

    G, K = 4, 2048 if case == "mxfp6_staged" else 256
    first = [64, 0, 128, 64]
    fmt, kw, dims, amax_size, dbias = {
        "mxfp8_both_dev": ("mxfp8_e4m3", dict(axis="both", scale_layout="swizzled"), ("dev", None, True), None, False),
        "nvfp4_tables": ("nvfp4", dict(axis="both"), ("dev", None, True), None, False),
        "nvfp4_amax_host": ("nvfp4", dict(axis="both"), ("param", G), G, False),
        "mxfp6_staged": ("mxfp6_e2m3", dict(axis="both"), ("dev", None, True), None, False),
        "dbias": ("mxfp8_e4m3", dict(axis="rowwise"), ("dev", None, True), None, True),
    }[case]
    rows = 8192 if case == "mxfp6_staged" else sum(first)
    opts, dbias = group_options("bfloat16", fmt, kw, dbias)
    f = FORMATS[fmt]
    from fp4kit._grouped_device import _bounds
    caps = _bounds("varying_first", f, opts, G, rows * K, None, K)
    monkeypatch.setattr(_plan, "SIZE_RULES", False)            # small sizes stage compact scales too
    p = cg.build_group_quantize_plan("bfloat16", opts, G, rows * K, caps, amax_size, dbias, K, rows, dims, SM,
                                     lambda module, kernel, cap: cap)
    assert p.arena
    calls = _fake_torch(monkeypatch, p)
    monkeypatch.setattr(_cuda, "_poison", poison)
    allocs = []
    if lib == "torch":
        T = _FakeTensor
        real = _torch_exec._torch().empty

        def empty(*shape, dtype, device):
            allocs.append(shape)
            return real(*shape, dtype=dtype, device=device)
        _torch_exec._torch().empty = empty
    else:
        T = _FakeCupyArray2

        def empty(shape, dtype):
            allocs.append(shape)
            return _FakeCupyArena(np.empty(shape, dtype))
        monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(
            empty=empty, full=lambda shape, v, dtype: _FakeCupyArray2(np.full(shape, v, dtype)),
            asarray=lambda a: _FakeCupyArray2(np.array(a)), ndarray=_fake_cupy_ndarray,
            cuda=types.SimpleNamespace(get_current_stream=lambda: types.SimpleNamespace(ptr=0xABC1))))
    x = T(np.zeros((rows, K), np.uint16))
    fdims = T(np.array(first, np.int64))
    amax = T(np.array([1.0, 2.0, 0.5, 4.0], np.float32)) if amax_size else None
    host_vals = tuple(first) + (K,) * G if dims[0] == "param" else ()
    if lib == "torch":
        bufs = _torch_exec.run(p, x, amax, 7, 1, None, fdims.data_ptr(), 0, host_vals)
    else:
        bufs = _torch_exec.run_cupy(p, x, amax, 7, x.data_ptr(), fdims.data_ptr(), 0, host_vals)
    steps = {s.slot: s for s in p.steps if type(s) is Buffer}
    nbytes = {k: int(np.prod(s.shape)) * np.dtype(s.dtype).itemsize for k, s in steps.items()}
    in_arena = {k for k, s in steps.items() if s.init in (EMPTY, ZEROS) and len(s.shape) == 1
                and nbytes[k] <= 1 << 20}
    own = [k for k, s in steps.items() if s.init in (EMPTY, ZEROS) and k not in in_arena]
    assert len(allocs) == 1 + len(own), (allocs, own)
    total = allocs[0][0] if lib == "torch" else allocs[0]
    total = total if isinstance(total, int) else total[0]
    # the pointer of every buffer, as the launches saw it: arguments with no offset
    seen = {}
    for s in p.launches():
        kernel_calls = [c for c in calls if c[0] == s.kernel]
        values = kernel_calls[0][4]
        for a, v in zip(s.args, values):
            if a.kind == "buf":
                seen.setdefault(a.value, v - a.offset)
                assert seen[a.value] == v - a.offset, (s.kernel, a)
    arena_ptrs = {k: seen[k] for k in in_arena if k in seen}
    base = min(arena_ptrs.values()) if arena_ptrs else 0
    spans = sorted((v - base, v - base + nbytes[k], k) for k, v in arena_ptrs.items())
    for (a0, a1, k), (b0, _, _) in zip(spans, spans[1:]):
        assert a1 <= b0, "overlap"
    assert all(a % 256 == 0 and b <= total for a, b, _ in spans)
    for k in in_arena & p.output_slots():
        t = bufs[k]
        assert t.arr.dtype == np.dtype(steps[k].dtype) and t.arr.shape == steps[k].shape, k
        if k in arena_ptrs:
            assert t.data_ptr() == arena_ptrs[k], k
        if steps[k].init == ZEROS:
            assert (t.arr.view(np.uint8) == 0).all(), k
        elif poison and t.arr.size:
            assert (t.arr.view(np.uint8) == 0xA5).all(), k
    zeros = sorted((c[1], c[3]) for c in calls if c[0] == "memset")
    assert zeros == sorted((arena_ptrs[k] if k in in_arena else bufs[k].data_ptr(), nbytes[k])
                           for k, s in steps.items() if s.init == ZEROS and nbytes[k])
    if case == "mxfp6_staged":       # the staging buffer and the operands' codes (over 1 MiB): their own
        assert {p.outputs["row_data"], p.outputs["col_data"]} < set(own) and len(own) >= 3
    if case == "dbias":
        assert any(len(steps[k].shape) == 2 for k in own)


def test_grouped_fast_path_dispatch_of_host_and_device_dims(monkeypatch):
    """fp4kit._grouped_device.group_quantize's memo dispatch: device dims run the checks once with
    the fast path, then hit; host dims too, their entry (keyed by the lists' lengths) then hit by
    any values, each call's values checked on the hit (the general path's errors, before any
    launch) and remembered with their layout among the last GROUP_HOST_LAYOUTS_MAX; dims new every
    call add no memo entry; sizes past the entry's buffer bounds and a bad seed go through the checks."""
    from fp4kit import _grouped_device as gd
    from fp4kit._validate import group_options

    _plan.clear_plans()
    log = []
    x = types.SimpleNamespace(shape=(192, 64))
    opts, _ = group_options("bfloat16", "mxfp8_e4m3", dict(axis="both", scale_layout="swizzled"), False)
    big = {"srow": 10**9, "scol": 10**9, "arow": 10**9, "acol": 10**9}
    caps = {}

    def signature(x, fmt, num_groups, first_dims, last_dims, amax, dbias, max_elements, options):
        if isinstance(first_dims, str):
            return ("torch", 0, ("key", first_dims), 0, None)
        return ("torch", 0, ("key", len(first_dims)), 0, (("l", tuple(first_dims)), None))

    def checked(x, fmt, num_groups, first_dims, last_dims, amax, dbias, max_elements, options, fast):
        log.append("general" if fast is None else "checked")
        if fast is not None:
            dev = isinstance(first_dims, str)
            _plan.GROUP_FAST_CALLS[fast[2]] = (opts, "plan", "mxfp8_e4m3", "varying_first", 3, dev, "bfloat16",
                                               None if dev else ("bound", caps.get("caps", big)))
        return log[-1]

    def run_fast(entry, x, lib, dev, x_ptr, first_dims, last_dims, amax, seed, info=None):
        log.append(("hit", None if info is None else info[1][0]))
        if info is not None:
            assert info == gd._host_layout(FORMATS["mxfp8_e4m3"], opts, "varying_first", tuple(first_dims), (64,) * 3)
        return "hit"

    monkeypatch.setattr(gd, "_fast_signature", signature)
    monkeypatch.setattr(gd, "_group_quantize_checked", checked)
    monkeypatch.setattr(gd, "_run_fast", run_fast)

    def calls(dims, n, **kw):
        del log[:]
        for _ in range(n):
            gd.group_quantize(x, "mxfp8_e4m3", first_dims=dims, **kw)
        return list(log)

    assert calls("device-dims", 3) == ["checked", ("hit", None), ("hit", None)]
    assert calls([64, 0, 128], 3) == ["checked", ("hit", (64, 0, 128)), ("hit", (64, 0, 128))]
    assert calls((100, 92, 0), 1) == [("hit", (100, 92, 0))]                  # other values: the same entry
    assert calls([64, 0, 128], 1, seed=-1) == ["checked"]                      # a bad seed: the checks
    for bad, match in (([64, 0, 127], r"sum\(first_dims\)=191"), ([64, -1, 129], r"first_dims\[1\].*non-negative")):
        with pytest.raises(ValueError, match=match):                          # checked on the hit
            calls(bad, 1)
        assert log == []                                                       # nothing ran
    n_memo = len(_plan.GROUP_FAST_CALLS)
    for k in range(300):                                                       # dims new every call
        d = [k % 97, k // 97, 192 - k % 97 - k // 97]
        assert calls(d, 1) == [("hit", tuple(d))]
    assert len(_plan.GROUP_FAST_CALLS) == n_memo
    assert len(_plan.GROUP_HOST_LAYOUTS) == _plan.GROUP_HOST_LAYOUTS_MAX
    assert list(_plan.GROUP_HOST_LAYOUTS)[-1] == (("key", 3), (("l", tuple(d)), None))   # the latest
    assert calls([64, 64, 64], 1) == [("hit", (64, 64, 64))]
    # an entry whose buffers cannot hold these dims' scales: the checks (they take the general path)
    _plan.clear_plans()
    caps["caps"] = dict(big, srow=1)
    assert calls([64, 0, 128], 2) == ["checked", "checked"]
    _plan.clear_plans()
    assert not _plan.GROUP_HOST_LAYOUTS and not _plan.GROUP_FAST_CALLS


def test_grouped_host_layouts_from_threads():
    """_grouped_device._host_info from several threads over more distinct dims than the layout
    memo holds (lookups, moves to the end and evictions interleaved): every call returns the
    layout of its own dims, and the memo stays bounded; a key evicted between its lookup and its
    move to the end (forced) is no error."""
    from fp4kit import _grouped_device as gd
    from fp4kit._validate import group_options

    _plan.clear_plans()
    opts, _ = group_options("bfloat16", "mxfp4_e2m1", dict(axis="both"), False)
    big = {"srow": 10**9, "scol": 10**9, "arow": 10**9, "acol": 10**9}
    entry = (opts, "plan", "mxfp4_e2m1", "varying_first", 3, False, "bfloat16", ("bound", big))
    x = types.SimpleNamespace(shape=(256, 64))
    errors = []

    def work(t):
        try:
            for k in range(1500):
                a = 2 * ((k * 7 + t) % 100)
                d = [a, 256 - a, 0]
                info = gd._host_info(entry, ("key",), (("l", tuple(d)), None), x, None, d, None, None)
                assert info[1][0] == tuple(d) and info[2] == tuple(d) + (64,) * 3
        except Exception as e:          # noqa: BLE001 (reported below)
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        sys.setswitchinterval(old)
    assert not errors, errors[:3]
    assert len(_plan.GROUP_HOST_LAYOUTS) <= _plan.GROUP_HOST_LAYOUTS_MAX
    # the race itself, made certain: another thread evicts the key between lookup and move
    from collections import OrderedDict

    class Racing(OrderedDict):
        def get(self, key, default=None):
            v = super().get(key, default)
            self.pop(key, None)
            return v

    _plan.clear_plans()
    d = [64, 192, 0]
    hkey = (("l", tuple(d)), None)
    info = gd._host_info(entry, ("key",), hkey, x, None, d, None, None)
    racing = Racing(_plan.GROUP_HOST_LAYOUTS)
    orig, keep = _plan.GROUP_HOST_LAYOUTS, _plan.GROUP_HOST_LAYOUTS_MAX
    _plan.GROUP_HOST_LAYOUTS = racing
    try:
        assert gd._host_info(entry, ("key",), hkey, x, None, d, None, None) is info
        racing.clear()
        _plan.GROUP_HOST_LAYOUTS_MAX = 0
        gd._remember_layout(("k",), info)               # evicts down to 0, then stops
        assert not racing
    finally:
        _plan.GROUP_HOST_LAYOUTS = orig
        _plan.GROUP_HOST_LAYOUTS_MAX = keep
    _plan.clear_plans()


def test_grouped_fast_signature_with_fake_torch(monkeypatch):
    """fp4kit._grouped_device._fast_signature: which grouped calls may take the fast path, and the
    memo key: device dims by shape and dtype (not values), host dims lists by value, the seed left
    out, options in any order, every argument with its type; ineligible dims (other arrays,
    non-contiguous, another device, NumPy integers, bools) -> None; unhashable options -> no key."""
    from fp4kit import _grouped_device as gd

    torch = _install_fake_torch(monkeypatch, False)
    x = torch.Tensor(np.zeros((192, 64), np.uint16), torch.bfloat16)

    def dev_dims(vals, dev=0):
        return torch.Tensor(np.array(vals, np.int64), torch.int64, dev)

    def sig(first=None, last=None, num_groups=None, amax=None, dbias=False, max_elements=None, **options):
        return gd._fast_signature(x, "nvfp4", num_groups, first, last, amax, dbias, max_elements, options)

    s = sig(dev_dims([64, 0, 128]), axis="both")
    assert s[:2] == ("torch", 0) and s[3] == x.data_ptr() and s[2] is not None
    assert sig(dev_dims([1, 2, 3]), axis="both")[2] == s[2]                      # device values not in the key
    assert sig(dev_dims([1, 2, 3, 4]), axis="both")[2] != s[2]                   # the shape is
    assert sig(dev_dims([64, 0, 128]), axis="both", seed=5)[2] == s[2]           # nor the seed
    assert s[4] is None                                                          # no host dims
    h = sig([64, 0, 128], axis="both", scale_layout="swizzled")
    assert h[2] == sig((64, 0, 128), scale_layout="swizzled", axis="both")[2]   # any order; list or tuple
    assert h[4] == (("l", (64, 0, 128)), None)                                   # host values: the fifth
    h2 = sig([64, 0, 127], axis="both", scale_layout="swizzled")
    assert h2[2] == h[2] and h2[4] != h[4]                                       # not in the key
    assert sig([64, 0, 127, 1], axis="both", scale_layout="swizzled")[2] != h[2]  # the length is
    assert sig(num_groups=3)[4] == (None, None)
    assert sig([64, 0, 128], dbias=True)[2] != sig([64, 0, 128], dbias=1)[2]     # types are
    v16 = sig(16, dev_dims([64, 0, 32]))                                         # varying_last: M in the key
    assert v16[2] is not None and v16[2] != sig(17, dev_dims([64, 0, 32]))[2]
    assert sig(16.0, dev_dims([64, 0, 32])) is None                              # only a plain int
    amax = torch.Tensor(np.ones(3, np.float32), torch.float32)
    assert sig(dev_dims([64, 0, 128]), amax=amax, axis="both")[2] != s[2]
    assert sig(num_groups=3)[2] is not None
    for bad in ([np.int64(64), 0, 128], [True, False], dev_dims([64, 0, 128], dev=1),
                torch.Tensor(np.array([64, 9, 0, 9, 128, 9], np.int64)[::2], torch.int64), np.array([64, 0, 128]),
                torch.Other(np.array([64, 0, 128], np.int64), torch.int64)):
        assert sig(bad) is None, bad
    assert sig(dev_dims([64, 0, 128]), axis=["both"])[2] is None                 # unhashable: the checks name it
    assert sig(dev_dims([64, 0, 128]), axis=["both"])[0] == "torch"
    _plan.clear_plans()


def test_grouped_fast_path_hit_end_to_end_with_fake_torch(monkeypatch):
    """A memo hit of the grouped fast path with a (fake) PyTorch tensor and device dims: the
    entry's plan run by _torch_exec.run (one arena allocation, poisoned), every launch's pointers
    those of the result's arrays and the caller's dims (the source of the metadata launch's copy),
    the result built without the checks (the plan's copy of the dims, the plan's last dims, metadata
    of the caller's library); another seed
    reuses the entry; group_dequantize of the result takes its fast path (one raw launch)."""
    import fp4kit
    from fp4kit import _cuda_grouped as cg, _grouped_device as gd
    from fp4kit._grouped_device import _bounds
    from fp4kit._validate import group_options

    torch = _install_fake_torch(monkeypatch, True)
    G, K, first = 3, 128, [64, 0, 128]
    rows = sum(first)
    x = torch.Tensor(np.zeros((rows, K), np.uint16), torch.bfloat16)
    dims = torch.Tensor(np.array(first, np.int64), torch.int64)
    kw = dict(axis="both", scale_layout="swizzled")
    opts, _ = group_options("bfloat16", "mxfp8_e4m3", kw, False)
    caps = _bounds("varying_first", FORMATS["mxfp8_e4m3"], opts, G, rows * K, None, K)
    plan = cg.build_group_quantize_plan("bfloat16", opts, G, rows * K, caps, None, False, K, rows, ("dev", None, True),
                                        SM, lambda module, kernel, cap: cap)
    calls = _fake_torch(monkeypatch, plan)
    monkeypatch.setattr(_torch_exec, "_torch", lambda: torch)
    key = gd._fast_signature(x, "mxfp8_e4m3", None, dims, None, None, False, None, kw)[2]
    _plan.GROUP_FAST_CALLS[key] = (opts, plan, "mxfp8_e4m3", "varying_first", G, True, "bfloat16", None)
    checked = []
    monkeypatch.setattr(gd, "_group_quantize_checked", lambda *a: checked.append(a))

    g = fp4kit.group_quantize(x, "mxfp8_e4m3", first_dims=dims, **kw)
    assert not checked and isinstance(g, fp4kit.GroupedQuantizedTensor)
    # the first dims: the plan's copy (made by the metadata launch), not the caller's array
    assert g.first_dims is not dims and g.kind == "varying_first" and len(g) == G and g.offsets is None
    assert g.options is opts and g.input_dtype == "bfloat16" and g.extra["library"] == "torch"
    for name, want in (("rowwise_data", rows * K), ("rowwise_scales", caps["srow"]), ("columnwise_data", rows * K),
                       ("columnwise_scales", caps["scol"])):
        t = getattr(g, name)
        assert isinstance(t, torch.Tensor) and t.dtype is torch.uint8 and t.arr.shape == (want,), name
        assert (t.arr == 0xA5).all(), name                        # poisoned; no kernel ran here
    assert g.last_dims.dtype is torch.int64 and g.last_dims.arr.shape == (G,)
    assert g.extra["meta"].dtype is torch.int64 and g.extra["error_flag"].dtype is torch.int32
    assert g.extra["fd"] is g.first_dims and g.extra["ld"] is g.last_dims
    assert g.first_dims.dtype is torch.int64 and g.first_dims.arr.shape == (G,)
    kernels = [c[0] for c in calls]
    assert kernels == [s.kernel for s in plan.launches()] == ["group_meta", "group_quantize4_f0_d1"]
    meta = calls[0][4]
    # the plan's dims (what every later launch and the result read), then the caller's first dims
    # as the source of the copy (its last dims: K, written by the launch)
    assert meta[:3] == (G, g.first_dims.data_ptr(), g.last_dims.data_ptr())
    assert meta[20:] == (dims.data_ptr(), 0)
    assert meta[11:13] == (g.extra["meta"].data_ptr(), g.extra["error_flag"].data_ptr())
    q = calls[1][4]
    assert q[0] == x.data_ptr() and q[3] == g.rowwise_data.data_ptr() and q[5] == g.columnwise_data.data_ptr()
    assert q[4] == g.rowwise_scales.data_ptr() and q[6] == g.columnwise_scales.data_ptr()
    ptrs = sorted(t.data_ptr() for t in (g.rowwise_data, g.rowwise_scales, g.columnwise_data, g.columnwise_scales,
                                         g.first_dims, g.last_dims, g.extra["meta"], g.extra["error_flag"]))
    assert all(p % 256 == ptrs[0] % 256 for p in ptrs)          # one allocation, 256-byte offsets
    g2 = fp4kit.group_quantize(x, "mxfp8_e4m3", first_dims=dims, seed=77, **kw)
    assert not checked and g2.options.seed == 77 and g2.rowwise_data.data_ptr() != g.rowwise_data.data_ptr()

    for operand, col in (("rowwise", 0), ("columnwise", 1)):
        launched = []
        monkeypatch.setattr(_torch_exec, "raw_launch", lambda *a: launched.append(a))
        back = fp4kit.group_dequantize(g, "float32", operand=operand)
        assert back.data.dtype is torch.float32 and back.data.arr.shape == (rows * K,) and back.offsets is None
        assert back.group is g and back.first_dims is g.first_dims and back.operand == operand
        (dev, module, kernel, grid, values, stream), = launched
        # float32 out: the general kernel for both operands (group_dequantize_cols_* is 16-bit only)
        assert (dev, module, kernel, stream) == (0, "grouped", "group_dequantize_f0_o0", 0xABC0)
        assert grid == cg.dequantize_kernel("mxfp8_e4m3", "float32", rows * K, SM)[1]
        pre = operand + "_"
        assert values == (getattr(g, pre + "data").data_ptr(), getattr(g, pre + "scales").data_ptr(), 0, G,
                          g.extra["meta"].data_ptr(), g.first_dims.data_ptr(), g.last_dims.data_ptr(), col, 1, 0,
                          back.data.data_ptr()), operand
        # 16-bit out: one K, so the rowwise members share their columns (group_dequantize_cols_*)
        launched.clear()
        fp4kit.group_dequantize(g, "bfloat16", operand=operand)
        (_, _, kernel, grid, _, _), = launched
        assert kernel == ("group_dequantize_cols_f0_o1" if operand == "rowwise" else "group_dequantize_f0_o1"), kernel
        assert grid == cg.dequantize_kernel("mxfp8_e4m3", "bfloat16", rows * K, SM)[1]
    _plan.clear_plans()


def test_grouped_param_dims_plan_stores_the_host_values():
    """A ("param", G) plan (the fast path's host dims) is the host-dims plan without its host copy:
    up to DIMS_ARG_MAX values the metadata launch is group_meta_dims, which takes them as its last
    parameter (a "dims" struct) and stores them in the buffer the later launches read; beyond that
    group_dims_store launches of at most DIMS_ARG_MAX values each fill it first. With one K
    (varying_first) the values are the G first dims and the metadata launch writes K as every last
    dim (bit 1024), so up to DIMS_ARG_MAX members take one launch; 1-D inputs send first then last
    dims (2 G values). The struct bound matches grouped.cu and keeps group_meta_dims' parameters
    within 4 KB."""
    from fp4kit import _cuda_grouped as cg
    from fp4kit._grouped_device import _bounds
    from fp4kit._loader import cuda_src_dir
    from fp4kit._validate import group_options

    src = (cuda_src_dir() / "grouped.cu").read_text()
    assert re.search(r"#define DIMS_ARG_MAX (\d+)", src).group(1) == str(_plan.DIMS_ARG_MAX)
    assert re.search(r"group_dims_store\(i64\* dst, i64 n, DimsArg d\)", src)
    body = re.sub(r"\s+", " ", src)
    assert "if (bits & 1024) K = K1; // one K: every last dim is K1 else if constexpr (BYVAL) " \
           "K = hv->v[G + base + tid];" in body
    assert "if (BYVAL || (bits & 1024) || src_last != nullptr) const_cast<i64*>(last)[base + tid] = K;" in body
    sig = re.search(r"group_meta_dims\(([^)]*)\)", src).group(1)
    params = [" ".join(p.split()[:-1]) for p in sig.split(",")]
    assert params[-1] == "const __grid_constant__ DimsArg"
    size = 0
    for p in params[:-1]:                                  # C alignment of each parameter
        n = 4 if p == "int" else 8
        size = -(-size // n) * n + n
    assert -(-size // 8) * 8 + 8 * _plan.DIMS_ARG_MAX <= 4096
    f = FORMATS["mxfp4_e2m1"]
    opts, _ = group_options("bfloat16", "mxfp4_e2m1", dict(axis="both"), False)
    cases = [("varying_first", G) for G in (3, 240, 241, 300, 480, 481, 961)]
    cases += [("varying_both", G) for G in (3, 240, 241, 300)]
    for kind, G in cases:
        one_k = kind == "varying_first"
        K = 256
        first, last = [128] * G, [K] * G if one_k else [128 + 2 * (i % 3) for i in range(G)]
        n_el = sum(m * k for m, k in zip(first, last))
        caps = _bounds(kind, f, opts, G, n_el, None, K if one_k else None)
        args = ("bfloat16", opts, G, n_el, caps, None, False, K if one_k else None, sum(first) if one_k else None)
        host = cg.build_group_quantize_plan(*args, ("host", tuple(first), tuple(last)), SM, lambda m, k, cap: cap)
        par = cg.build_group_quantize_plan(*args, ("param", G), SM, lambda m, k, cap: cap)
        gl = G + G % 2                  # the last dims start 16 bytes on (JAX): after a gap when G is odd
        views = {st.slot: st for st in par.steps if type(st) is _plan.Buffer and st.init == _plan.VIEW}
        fdv, ldv = views[par.outputs["fd"]], views[par.outputs["ld"]]
        hd = fdv.src
        assert (fdv.shape, fdv.start, ldv.src, ldv.shape, ldv.start) == ((G,), 0, hd, (G,), gl)
        stores = [st for st in par.steps if type(st) is _plan.Launch and st.kernel == "group_dims_store"]
        metas = [st for st in par.steps if type(st) is _plan.Launch and st.kernel.startswith("group_meta")]
        host_meta = next(st for st in host.steps if type(st) is _plan.Launch and st.kernel == "group_meta")
        bits = host_meta.args[4]
        assert bits.kind == "i32" and not bits.value & 1024
        if one_k:       # the last dims are the metadata launch's to write
            host_meta = host_meta._replace(args=host_meta.args[:4] + (_plan.Arg("i32", bits.value | 1024),)
                                           + host_meta.args[5:])
            assert host_meta.args[13] == _plan.Arg("i64", K)
        n_vals = G if one_k else 2 * G
        if n_vals <= _plan.DIMS_ARG_MAX:
            assert not stores and metas[0].kernel == "group_meta_dims", (kind, G)
            # group_meta's two trailing sources of device dims (null here) are group_meta_dims' host values
            assert metas[0].args == host_meta.args[:20] + (_plan.Arg("dims", 0),)
            assert host_meta.args[20:] == (_plan._NULL, _plan._NULL)
        else:
            # first dims, then last dims (from value G, stored at gl): no store spans the two
            chunks = [(c, min(_plan.DIMS_ARG_MAX, hi - c)) for lo, hi in ((0, G), (G, n_vals))
                      for c in range(lo, hi, _plan.DIMS_ARG_MAX)]
            assert [(st.grid, st.args) for st in stores] == [
                (1, (_plan.Arg("buf", hd, 8 * (c if c < G else c + gl - G)), _plan.Arg("i64", n), _plan.Arg("dims", c)))
                for c, n in chunks]
            assert sum(n for _, n in chunks) == n_vals
            assert metas == [host_meta] and par.steps.index(stores[-1]) < par.steps.index(metas[0])
        assert host_meta.args[1:3] == (_plan.Arg("buf", hd), _plan.Arg("buf", hd, 8 * gl))
        rest = [host_meta if st in metas else st for st in par.steps if st not in stores]
        swapped = [st._replace(init=_plan.HOST, value=tuple(first) + (0,) * (gl - G) + tuple(last)) if type(st) is _plan.Buffer
                   and st.slot == hd else st for st in rest]
        host_steps = [host_meta if type(st) is _plan.Launch and st.kernel == "group_meta" else st for st in host.steps]
        assert swapped == host_steps and par.outputs == host.outputs and par.arena, (kind, G)


def test_grouped_host_dims_lists_of_1d_inputs_round_their_sizes(monkeypatch):
    """Host dims lists for a 1-D input (kinds varying_last / varying_both): the device-dims bounds
    would be several bytes per input element, so each call's exact sizes are rounded up
    (_grouped_device._bucket: at most 25 % above, four values per octave) and planned per rounded
    combination (memoised: other dims of the same rounded sizes share the plan)."""
    from fp4kit import _cuda_grouped as cg, _grouped_device as gd
    from fp4kit._validate import group_options

    monkeypatch.setattr(cg, "_sm_count_of", lambda dev: SM)
    monkeypatch.setattr(cg, "_resident", lambda module, kernel, cap: cap)
    _plan.clear_plans()
    prev = 0
    for v in range(5000):
        b = gd._bucket(v)
        assert b >= v and b >= prev and (b == v if v < 8 else b <= 1.25 * v)
        prev = b
    assert len({gd._bucket(v) for v in range(1025, 2049)}) == 4
    assert gd._bucket(10**12 + 1) <= 1.25 * 10**12 + 1
    f = FORMATS["mxfp8_e4m3"]
    opts, _ = group_options("bfloat16", "mxfp8_e4m3", dict(axis="both", scale_layout="swizzled"), False)
    N = 6144
    x = types.SimpleNamespace(shape=(N,))
    build = (0, "bfloat16", opts, 3, N, None, False, None, None)
    entry = (opts, "plan", "mxfp8_e4m3", "varying_both", 3, False, "bfloat16", ("bucket", build))

    def info_of(first, last):
        return gd._host_info(entry, ("k",), (("l", tuple(first)), ("l", tuple(last))), x, None, first, last, None)

    def size(plan, name):
        slot = plan.outputs[name]
        return next(st.shape[0] for st in plan.steps if type(st) is _plan.Buffer and st.slot == slot)

    a = info_of([16, 16, 16], [128, 0, 256])
    b = info_of([16, 16, 32], [128, 0, 128])
    assert a[0] == "varying_last" and b[0] == "varying_both"
    for info in (a, b):
        ex = info[3]
        assert size(info[4], "row_scales") == gd._bucket(ex["row_scales"]) >= ex["row_scales"]
        assert size(info[4], "col_scales") == gd._bucket(ex["col_scales"]) >= ex["col_scales"]
        assert [st.kernel for st in info[4].launches()][0] == "group_meta_dims"
    if gd._bucket(a[3]["row_scales"]) == gd._bucket(b[3]["row_scales"]) and \
            gd._bucket(a[3]["col_scales"]) == gd._bucket(b[3]["col_scales"]):
        assert a[4] is b[4]                                          # one plan for both
    bound = gd._bounds("varying_both", f, opts, 3, N, None, None)
    assert bound["srow"] > 4 * N and bound["srow"] > 16 * size(a[4], "row_scales")   # what rounding saves
    _plan.clear_plans()


def test_grouped_fast_path_host_dims_hit_end_to_end_with_fake_torch(monkeypatch):
    """A memo hit of the grouped fast path with host dims lists that change between calls (fake
    PyTorch): one entry; each call's values reach the device as group_meta_dims' last parameter
    (no host-to-device copy), stored in the buffer the result holds, the results carry the call's
    host metadata and scale arrays of the call's exact sizes (views of bound-sized buffers); bad
    values raise before any launch."""
    import fp4kit
    from fp4kit import _cuda_grouped as cg, _grouped_device as gd
    from fp4kit._grouped_device import _bounds
    from fp4kit._grouped_views import grouped_layout
    from fp4kit._validate import group_options

    torch = _install_fake_torch(monkeypatch, True)
    G, K, rows = 3, 128, 192
    x = torch.Tensor(np.zeros((rows, K), np.uint16), torch.bfloat16)
    kw = dict(axis="both", scale_layout="swizzled")
    f = FORMATS["nvfp4"]
    opts, _ = group_options("bfloat16", "nvfp4", kw, False)
    caps = _bounds("varying_first", f, opts, G, rows * K, None, K)
    plan = cg.build_group_quantize_plan("bfloat16", opts, G, rows * K, caps, None, False, K, rows, ("param", G),
                                        SM, lambda module, kernel, cap: cap)
    calls = _fake_torch(monkeypatch, plan)
    monkeypatch.setattr(_torch_exec, "_torch", lambda: torch)
    key = gd._fast_signature(x, "nvfp4", None, [64, 0, 128], None, None, False, None, kw)[2]
    _plan.GROUP_FAST_CALLS[key] = (opts, plan, "nvfp4", "varying_first", G, False, "bfloat16", ("bound", caps))
    checked = []
    monkeypatch.setattr(gd, "_group_quantize_checked", lambda *a: checked.append(a))
    for first in ([64, 0, 128], [2, 190, 0], [64, 0, 128]):
        del calls[:]
        g = fp4kit.group_quantize(x, "nvfp4", first_dims=first, **kw)
        assert not checked and g.kind == "varying_first" and g.first_dims == tuple(first)
        assert g.last_dims == (K,) * G
        lay = grouped_layout(f, opts, first, [K] * G)
        assert g.offsets == lay.offsets and g.scale_offsets_rowwise == lay.scale_offsets_rowwise
        assert g.scale_offsets_columnwise == lay.scale_offsets_columnwise
        for name, n in (("rowwise_scales", lay.scale_offsets_rowwise[-1]),
                        ("columnwise_scales", lay.scale_offsets_columnwise[-1]),
                        ("rowwise_amax", G), ("columnwise_amax", G), ("rowwise_data", rows * K // 2)):
            assert getattr(g, name).arr.shape == (n,), (first, name)
        assert caps["srow"] > lay.scale_offsets_rowwise[-1]         # trimmed views, not the buffers
        kernels = [c[0] for c in calls if c[0] != "memset"]
        assert kernels == [st.kernel for st in plan.launches()] and kernels[0] == "group_meta_dims"
        meta = next(c for c in calls if c[0] == "group_meta_dims")[4]
        hd, ld = g.extra["fd"], g.extra["ld"]        # G = 3: the last dims after a padding int64
        assert meta[:3] == (G, hd.data_ptr(), hd.data_ptr() + 8 * (G + 1)) and hd.arr.shape == (G,)
        assert ld.data_ptr() == hd.data_ptr() + 32 and ld.arr.shape == (G,)
        assert meta[-1][:2 * G] == tuple(first) + (K,) * G              # the struct: first, then last dims
    assert len(_plan.GROUP_FAST_CALLS) == 1
    del calls[:]
    with pytest.raises(ValueError, match=r"first_dims\[1\]: nvfp4 columnwise packs two codes"):
        fp4kit.group_quantize(x, "nvfp4", first_dims=[64, 1, 127], **kw)
    assert calls == [] and not checked
    _plan.clear_plans()


def test_grouped_result_without_the_constructor_matches_it():
    """_grouped_device._result (both paths' result objects) sets every field the public
    GroupedQuantizedTensor constructor sets, host dims from the entry, device dims as given."""
    import dataclasses

    from fp4kit import _grouped_device as gd
    from fp4kit.tensor import GroupedQuantizedTensor
    from fp4kit._validate import group_options

    class Stub:                                     # a named stand-in of the host layout's length
        def __init__(self, name, n):
            self.name, self.shape = name, (n,)

        def __repr__(self):
            return f"<{self.name}>"

    opts, _ = group_options("float32", "nvfp4", dict(axis="both"), False)
    lengths = dict(row_data=1024, row_scales=128, row_amax=2, col_data=1024, col_scales=128, col_amax=2)
    arrays = {n: Stub(n, v) for n, v in lengths.items()}
    for host in (None, ((64, 0), (32, 32), (0, 2048, 2048), (0, 128, 128), (0, 128, 128))):
        entry = (opts, None, "nvfp4", "varying_first", 2, host is None, "float32", host)
        g = gd._result(entry, opts, arrays.get, ("<fd>", "<ld>"), ("<meta>", "<err>", "<fd>", "<ld>"), "cupy", None)
        first, last, offsets, so_row, so_col = host or ("<fd>", "<ld>", None, (), ())
        want = GroupedQuantizedTensor(
            format="nvfp4", kind="varying_first", first_dims=first, last_dims=last, offsets=offsets, options=opts,
            rowwise_data=arrays["row_data"], rowwise_scales=arrays["row_scales"], rowwise_amax=arrays["row_amax"],
            columnwise_data=arrays["col_data"], columnwise_scales=arrays["col_scales"],
            columnwise_amax=arrays["col_amax"],
            scale_offsets_rowwise=so_row, scale_offsets_columnwise=so_col, dbias=None, input_dtype="float32",
            extra={"meta": "<meta>", "error_flag": "<err>", "fd": "<fd>", "ld": "<ld>", "G": 2,
                   "device_dims": host is None, "library": "cupy"})
        assert type(g) is GroupedQuantizedTensor
        assert {f.name for f in dataclasses.fields(GroupedQuantizedTensor)} == set(g.__dict__)
        assert g.__dict__ == want.__dict__


def test_row_scaled_amax_bounds_count_rows_without_columns():
    """Device dims, row-scaled NVFP4: the kinds with one K bound the members' rows (one amax each)
    by x.shape[0], also for K = 0 where the element bound (0) bounds nothing (it flagged valid dims:
    tests/gpu/test_grouped.py test_row_scaled_device_dims_members_without_columns); a smaller
    max_elements tightens the bound where K > 0. The 1-D kinds keep the element bound (rows without
    columns beyond it are flagged, as fp4kit._grouped_device.ERRORS[32] says)."""
    from fp4kit._grouped_device import ERRORS, _bounds
    from fp4kit._validate import group_options

    opts, _ = group_options("float32", "nvfp4", dict(axis="both", row_scaled=True), False)
    f = FORMATS["nvfp4"]
    assert _bounds("varying_first", f, opts, 2, 0, None, 0, rows=6)["arow"] == 6
    assert _bounds("varying_first", f, opts, 2, 0, None, 0, rows=6)["acol"] == 0
    assert _bounds("varying_first", f, opts, 2, 6 * 64, None, 64, rows=6)["arow"] == 6
    assert _bounds("varying_first", f, opts, 2, 2 * 64, None, 64, rows=6)["arow"] == 2
    assert _bounds("varying_both", f, opts, 2, 100, None, None)["arow"] == 100
    assert _bounds("varying_last", f, opts, 2, 100, 5, None)["arow"] == 10
    plain, _ = group_options("float32", "nvfp4", dict(axis="both"), False)
    assert _bounds("varying_first", f, plain, 2, 0, None, 0, rows=6)["arow"] == 2     # one amax per member
    assert "need host dims" in ERRORS[32]


def _misaligned_output_views(p) -> set:
    """The outputs of plan `p` (by name: an OperandSlots field or a result key) that are views at a
    byte offset off 16 within their buffer (JAX gets those as copies: fp4kit._interop.jax_aligned)."""
    bufs = {st.slot: st for st in p.steps if type(st) is Buffer}

    def offset(slot):
        st = bufs[slot]
        if st.init != VIEW:
            return 0
        return offset(st.src) + st.start * _torch_exec._ITEMSIZE[st.dtype]

    named = (p.outputs.items() if isinstance(p.outputs, dict)
             else ((f"{i}.{f}", getattr(o, f)) for i, o in enumerate(p.outputs) if o is not None
                   for f in o._fields))
    return {name for name, slot in named if isinstance(slot, int) and offset(slot) % 16}


def test_output_views_sit_at_16_byte_offsets():
    """Results would reach JAX as copies if they sat off 16 bytes (XLA refuses such buffers), so
    plans lay every result view out at a 16-byte offset: across single-tensor and grouped plans of
    every format and recipe none is off. The views that share a buffer: RHT's amax 16 bytes after
    the plain one, a group's columnwise amaxes 16 bytes after its rowwise ones, and a group's last
    dims after its first dims and, for an odd number of members, one padding int64."""
    from fp4kit import _cuda_grouped as cg
    from fp4kit._grouped_device import _bounds
    from fp4kit._validate import group_options

    fmts = ("mxfp8_e4m3", "mxfp6_e3m2", "mxfp4_e2m1", "nvfp4")
    variants = [dict(axis="rowwise"), dict(axis="both"), dict(axis="both", scale_layout="swizzled"),
                dict(axis="both", rounding="stochastic"), dict(axis="both", rht=True),
                dict(axis="both", row_scaled=True), dict(axis="both", tile_2d=True), dict(axis="columnwise")]
    single, n_single = set(), 0
    for fmt in fmts:
        for kw in variants:
            for shape in ((16, 64), (256, 512), (8192, 8192)):
                for amax_shape in (None, (1,)):
                    try:
                        p = plan_of(shape, "bfloat16", fmt, amax_shape=amax_shape, **kw)
                    except (TypeError, ValueError):
                        continue
                    n_single += 1
                    single |= {(fmt, kw.get("rht", False), amax_shape, name) for name in _misaligned_output_views(p)}
    assert n_single >= 80 and single == set(), (n_single, single)
    grouped, n_grouped = {}, 0
    for G in (1, 2, 3, 5, 8):
        for fmt in fmts:
            for kw in variants:
                for kind, K, rows in (("varying_first", 7168, 4096), ("same", 256, G * 64),
                                      ("varying_last", None, 512), ("varying_both", None, None)):
                    try:
                        opts, _ = group_options("bfloat16", fmt, kw, False)
                    except (TypeError, ValueError):
                        continue
                    n_el = (rows or 4096) * (K or 256)
                    for amax_size, dims in ((None, ("dev", None, True)), (None, ("param", G)), (G, ("param", G))):
                        if amax_size is not None and fmt != "nvfp4":
                            continue
                        try:
                            caps = _bounds(kind, FORMATS[fmt], opts, G, n_el, None, K)
                            p = cg.build_group_quantize_plan("bfloat16", opts, G, n_el, caps, amax_size, False, K,
                                                             rows, dims, SM, lambda module, kernel, cap: cap)
                        except (TypeError, ValueError):
                            continue
                        n_grouped += 1
                        grouped.setdefault(G, set()).update(_misaligned_output_views(p))
    assert n_grouped > 500 and sorted(grouped) == [1, 2, 3, 5, 8], (n_grouped, sorted(grouped))
    assert all(v == set() for v in grouped.values()), grouped


def test_grouped_rowwise_one_k_direct_kernel():
    """Plain one-K rowwise calls whose rows-kernel blocks hold at most 64 rows take
    group_quantize_rowsd (each member tiled as the single-tensor rows kernel tiles it; _rowsdz for
    NVFP4 with swizzled scales from 16-bit input, as quantize.cu's _rowsz): one CTA per block row of
    every possible 64-row band times the blocks across K, the band descriptors from group_meta
    (bit 64) as its fourth argument; NVFP4's extended recipes its full kernel (R = 2). Larger blocks
    (K < 256 from 16-bit input with the plain recipes, K < 128 else), stochastic rounding alone and
    ROWS_DIRECT off keep group_quantize_rowsk."""
    from fp4kit import _cuda_grouped as cg
    from fp4kit._grouped_device import _bounds
    from fp4kit._validate import group_options

    def launches(dtype, fmt, K, rows, G=8, **kw):
        opts, _ = group_options(dtype, fmt, dict(axis="rowwise", **kw), False)
        caps = _bounds("varying_first", FORMATS[fmt], opts, G, rows * K, None, K)
        return cg.build_group_quantize_plan(dtype, opts, G, rows * K, caps, None, False, K, rows, ("dev", None, True),
                                            SM, lambda module, kernel, cap: cap).launches()

    for dtype, d, R in (("float32", 0, 2), ("bfloat16", 1, 4), ("float16", 2, 4)):
        for fmt in ("mxfp8_e4m3", "mxfp6_e3m2", "mxfp4_e2m1", "nvfp4"):
            fid = FORMATS[fmt].format_id
            for layout in ("compact", "swizzled"):
                ls = launches(dtype, fmt, 7168, 65536, scale_layout=layout)
                meta, q = ls[0], ls[-1]   # NVFP4: the statistics pass (computed amaxes) between
                z = "z" if fmt == "nvfp4" and layout == "swizzled" and d else ""
                assert q.kernel == f"group_quantize_rowsd{z}_f{fid}_d{d}_plain", (dtype, fmt, layout, q.kernel)
                assert meta.kernel == "group_meta" and meta.args[4].value & 64   # band descriptors
                # lw = 6: blocks of R x 4 rows x 1024 columns; 65536 // 64 + 8 bands
                assert q.grid == (65536 // 64 + 8) * (64 // (4 * R)) * 7, (dtype, fmt, q.grid)
                assert q.args[-3:] == (Arg("i32", 6), Arg("u32", 2**34 // 7 + 1), Arg("u32", 34))   # lw; b // 7
                n_rows, n_tiles = 65536 // 64, 65536 // 64 + 8 + 1
                assert q.args[3] == _plan._at(meta.args[14].value, 8 * cg._band_desc_offset(n_rows, n_tiles))
    # K = 200: lw = 3, blocks of 128 rows from 16-bit input (too tall), 64 from float32
    assert launches("bfloat16", "mxfp8_e4m3", 200, 4096)[-1].kernel == "group_quantize_rowsk_f0_d1_plain"
    assert launches("float32", "mxfp8_e4m3", 200, 4096)[-1].kernel == "group_quantize_rowsd_f0_d0_plain"
    assert launches("bfloat16", "mxfp8_e4m3", 256, 4096)[-1].kernel == "group_quantize_rowsd_f0_d1_plain"
    # NVFP4's extended recipes (R = 2: blocks of 2 x 4 rows at lw = 6, of at most 64 rows from K = 128
    # up): its full kernel; stochastic rounding alone, and below K = 128, the grid-strided kernel
    for dtype, d in (("float32", 0), ("bfloat16", 1), ("float16", 2)):
        for fmt, kw, name in (("nvfp4", dict(row_scaled=True), f"group_quantize_rowsd_f5_d{d}"),
                              ("nvfp4", dict(rounding="stochastic", row_scaled=True), f"group_quantize_rowsd_f5_d{d}"),
                              ("nvfp4", dict(rounding="stochastic"), f"group_quantize_rowsk_f5_d{d}"),
                              ("mxfp4_e2m1", dict(rounding="stochastic"), f"group_quantize_rowsk_f4_d{d}")):
            q = launches(dtype, fmt, 7168, 65536, **kw)[-1]
            assert q.kernel == name, (dtype, fmt, kw, q.kernel)
            if "rowsd" in name:
                assert q.grid == (65536 // 64 + 8) * (64 // 8) * 7 and q.args[-3] == Arg("i32", 6), (dtype, fmt, kw)
                assert launches(dtype, fmt, 128, 4096, **kw)[-1].kernel == name              # lw = 3: 64 rows
                assert launches(dtype, fmt, 127, 4096, **kw)[-1].kernel == f"group_quantize_rowsk_f5_d{d}"
    old_ext = cg.ROWS_DIRECT_EXT
    try:
        cg.ROWS_DIRECT_EXT = False
        assert launches("bfloat16", "nvfp4", 7168, 4096, row_scaled=True)[-1].kernel == "group_quantize_rowsk_f5_d1"
        assert launches("bfloat16", "mxfp4_e2m1", 7168, 4096)[-1].kernel == "group_quantize_rowsd_f4_d1_plain"
    finally:
        cg.ROWS_DIRECT_EXT = old_ext
    old = cg.ROWS_DIRECT
    try:
        cg.ROWS_DIRECT = False
        assert launches("bfloat16", "mxfp4_e2m1", 7168, 4096)[-1].kernel == "group_quantize_rowsk_f4_d1_plain"
    finally:
        cg.ROWS_DIRECT = old

#!/usr/bin/env python3
"""Exercise every kernel family once over a small shape matrix (partial blocks, rows not a multiple
of 128, empty inputs, grouped empty members), for scripts/sanitize.sh to run under compute-sanitizer.
Checks nothing itself beyond finishing; the sanitizer reports the errors."""
import itertools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402

import fp4kit  # noqa: E402

cp.cuda.set_allocator(None)          # plain cudaMalloc per array: exact bounds for memcheck/initcheck
rng = np.random.default_rng(0)
SHAPES = [(1, 16), (3, 48), (34, 96), (130, 66), (0, 32), (32, 0), (256, 384), (128, 100)]   # last two: staged MXFP8 scales


def bf16(x):
    import torch
    return torch.from_numpy(x.astype(np.float32)).cuda().to(torch.bfloat16)


n = 0
for fmt, f in fp4kit.FORMATS.items():
    for (M, K) in SHAPES:
        x = rng.standard_normal((M, K)).astype(np.float32)
        axis = "both"
        if f.packed and (M % 2 or K % 2):
            axis = "rowwise" if K % 2 == 0 else "columnwise"
            if M % 2 and K % 2:
                continue
        variants = [dict(scale_layout="compact"), dict(scale_layout="swizzled")]
        if f.packed:
            variants.append(dict(rounding="stochastic", seed=3))
        if (fmt.startswith("mxfp8") or fmt == "mxfp4_e2m1") and M and K and M % 128 == 0 and K % 128 == 0:   # _quad
            variants += [dict(torch_bf16=True), dict(torch_bf16=True, scale_layout="swizzled")]
        if not f.packed and K % 4 == 0 and M % 16 == 0:   # columnwise alone: quantize_cols_f<F>_d1_c2
            variants.append(dict(axis="columnwise", torch_bf16=True))
        if f.is_nvfp4:
            variants += [dict(tile_2d=True), dict(row_scaled=True), dict(amax=cp.asarray(np.float32([2.0])))]
            if M % 16 == 0 and axis != "rowwise":
                variants.append(dict(rht=True))
            if K % 2 == 0:   # rowwise with a computed amax: the one-launch kernel (_rowsam) when small
                variants += [dict(axis="rowwise"), dict(axis="rowwise", torch_bf16=True)]
            if K % 2 == 0 and M % 16 == 0:   # columnwise alone from bfloat16: quantize_cols_f5_d1_{c,s2}
                variants += [dict(axis="columnwise", torch_bf16=True),
                             dict(axis="columnwise", torch_bf16=True, scale_layout="swizzled")]
        for kw in variants:
            kw = dict(kw)
            xin = bf16(x) if kw.get("rht") or kw.pop("torch_bf16", False) else cp.asarray(x)
            q = fp4kit.quantize(xin, fmt, **{"axis": axis, **kw})
            for op in ("rowwise", "columnwise"):
                if getattr(q, op) is not None:
                    for dt in ("float32", "bfloat16", "float16"):
                        fp4kit.dequantize(q, dtype=dt, operand=op)
            n += 1
    # the 128 x 128 squares for any M (_quadm): a partial last square row, columnwise code rows off
    # 16 bytes (odd and even offsets) written by the whole-square writer, rows shorter than 16 bytes
    if fmt.startswith("mxfp8") or fmt == "mxfp4_e2m1":
        for (M, K) in ((130, 256), (7, 128), (200, 384), (1, 128)):
            if fmt == "mxfp4_e2m1" and M % 2:   # MXFP4 "both": even M (its columnwise codes pack row pairs)
                M += 1
            x = rng.standard_normal((M, K)).astype(np.float32)
            for layout in ("compact", "swizzled"):
                q = fp4kit.quantize(bf16(x), fmt, axis="both", scale_layout=layout)
                fp4kit.dequantize(q, dtype="float32", operand="columnwise")
                n += 1
    # NVFP4 / MXFP4 "both" from bfloat16, compact scale rows of an odd length: zero-filled staging
    if fmt in ("nvfp4", "mxfp4_e2m1"):
        for (M, K) in ((130, 256), (34, 96)):
            q = fp4kit.quantize(bf16(rng.standard_normal((M, K))), fmt, axis="both")
            fp4kit.dequantize(q, dtype="float32", operand="columnwise")
            n += 1
    # grouped, with empty members at the front, middle and end
    first = [0, 34, 0, 130, 2, 0]
    K = 64
    xg = cp.asarray(rng.standard_normal((sum(first), K)).astype(np.float32))
    for kw in (dict(scale_layout="compact"), dict(scale_layout="swizzled")):
        g = fp4kit.group_quantize(xg, fmt, first_dims=first, axis="both", **kw)
        fp4kit.group_dequantize(g)
        fp4kit.group_dequantize(g, operand="columnwise")
        gd = fp4kit.group_quantize(xg, fmt, first_dims=cp.asarray(np.array(first, np.int64)), axis="both", **kw)
        gd.check()
        if fmt in ("nvfp4", "mxfp4_e2m1"):   # FP4 code rows off 8 bytes through the warps' run buffers
            xb = bf16(rng.standard_normal((sum(first), 96)))
            fp4kit.group_quantize(xb, fmt, first_dims=cp.asarray(np.array(first, np.int64)), axis="both", **kw).check()
        # rowwise only (group_quantize_rows), host and device dims
        gr = fp4kit.group_quantize(xg, fmt, first_dims=first, axis="rowwise", **kw)
        fp4kit.group_dequantize(gr)
        fp4kit.group_quantize(xg, fmt, first_dims=cp.asarray(np.array(first, np.int64)), axis="rowwise", **kw).check()
        # host dims on the fast path (CuPy float32): the memo entry of this length with other values
        # (group_meta_dims' parameters, buffers of device-dims bounds)
        g2 = fp4kit.group_quantize(xg, fmt, first_dims=first[::-1], axis="both", **kw)
        fp4kit.group_dequantize(g2, operand="columnwise")
        n += 5
# many host-dims members on the fast path: 257 first dims (one K: group_meta_dims alone), 481 (two
# group_dims_store launches of at most 480 values, then group_meta writing K as every last dim) and a
# 1-D input of 241 members (482 first and last dims: two store launches)
for G_many in (257, 481):
    dims_many = [int(v) for v in rng.integers(0, 5, G_many) * 2]
    x_many = cp.asarray(rng.standard_normal((sum(dims_many), 64)).astype(np.float32))
    for fmt_many in ("mxfp8_e4m3", "nvfp4"):
        fp4kit.group_dequantize(fp4kit.group_quantize(x_many, fmt_many, first_dims=dims_many, axis="both",
                                                      scale_layout="swizzled"))
        n += 1
first241 = [int(v) for v in rng.integers(1, 3, 241) * 2]
last241 = [int(v) for v in rng.integers(1, 5, 241) * 8]
flat241 = cp.asarray(rng.standard_normal(sum(m * k for m, k in zip(first241, last241))).astype(np.float32))
fp4kit.group_dequantize(fp4kit.group_quantize(flat241, "nvfp4", first_dims=first241, last_dims=last241, axis="both"))
n += 1
# the 16-bit rows kernels (quantize_rows_direct): MX scale codes gathered in shared memory behind a
# barrier, NVFP4 with swizzled scales in _rowsz (quad shuffles, warps of 2 rows); blocks of complete
# 128-row bands take rows 32 apart. Whole and partial bands, a partial last column block, lw 2 to 6.
for fmt, f in fp4kit.FORMATS.items():
    for (M, K) in ((300, 2048), (256, 96), (129, 1040), (128, 128)):
        xr = rng.standard_normal((M, K)).astype(np.float32)
        for xin in (bf16(xr), cp.asarray(xr.astype(np.float16))):
            for layout in ("compact", "swizzled"):
                kw = {"amax": cp.asarray(np.float32([3.0]))} if f.is_nvfp4 else {}
                fp4kit.quantize(xin, fmt, axis="rowwise", scale_layout=layout, **kw)
                n += 1
# the grouped one-K rows kernel that tiles each member on its own (group_quantize_rowsd[z]: blocks of
# at most 64 rows, K >= 256 from 16-bit input, K >= 128 from float32): members of 1 row, partial and
# whole 128-row bands, empty ones, slack rows past the members (CTAs of the bands past the last one
# exit), a partial last column block; device dims, both layouts
first_d = [0, 1, 130, 0, 64, 257, 0]
for fmt, f in fp4kit.FORMATS.items():
    fd = [m + (m & 1) if f.packed else m for m in first_d]
    xr = rng.standard_normal((sum(fd) + 9, 1040)).astype(np.float32)
    for xin in (cp.asarray(xr), bf16(xr)):
        for layout in ("compact", "swizzled"):
            fp4kit.group_quantize(xin, fmt, first_dims=cp.asarray(np.array(fd, np.int64)), axis="rowwise",
                                  scale_layout=layout).check()
            n += 1
# its NVFP4 full kernels (row_scaled, with stochastic rounding too): the same members (even sizes),
# K = 1040 and 160 (blocks of 8 and 64 rows), float32 and bfloat16, both layouts
fd = [m + (m & 1) for m in first_d]
for K in (1040, 160):
    xr = rng.standard_normal((sum(fd) + 9, K)).astype(np.float32)
    for xin in (cp.asarray(xr), bf16(xr)):
        for kw in (dict(row_scaled=True), dict(row_scaled=True, rounding="stochastic", scale_layout="swizzled")):
            fp4kit.group_quantize(xin, "nvfp4", first_dims=cp.asarray(np.array(fd, np.int64)), axis="rowwise",
                                  **kw).check()
            n += 1

# NVFP4 tile kernels with the multiplier tables of the nvfp4_amax_out launch (QFLAG_ENC_TABS; by
# default from fp4kit._plan.ENC_TABS_MIN_TILES tiles on, here for every shape); that launch also
# stores the amaxes (a caller's, the columnwise copy of a computed one)
from fp4kit import _plan  # noqa: E402

_plan.ENC_TABS_MIN_TILES, _keep = 1, _plan.ENC_TABS_MIN_TILES
_plan.clear_plans()
for (M, K) in [(34, 96), (130, 66), (256, 384)]:
    x = rng.standard_normal((M, K)).astype(np.float32)
    for kw in (dict(axis="both"), dict(axis="both", scale_layout="swizzled"), dict(axis="columnwise"),
               dict(axis="both", amax=cp.asarray(np.float32([2.0]))), dict(axis="rowwise", tile_2d=True),
               dict(axis="both", rounding="stochastic", seed=5), dict(axis="both", rht=True)):
        if kw.get("rht") and M % 16:
            continue
        fp4kit.quantize(bf16(x) if kw.get("rht") else cp.asarray(x), "nvfp4", **kw)
        n += 1
_plan.ENC_TABS_MIN_TILES = _keep
_plan.clear_plans()
# one caller's amax per row over several CTAs of nvfp4_amax_out (grid-stride), from a strided view
x = rng.standard_normal((600, 64)).astype(np.float32)
rows = cp.asarray(np.stack([np.abs(x).max(axis=1), np.ones(600)], axis=1).astype(np.float32))[:, 0]
fp4kit.quantize(cp.asarray(x), "nvfp4", axis="both", row_scaled=True, amax=rows)
n += 1
# NVFP4 computed amax over many small members (amax chunks straddling member boundaries), bfloat16
many = [int(v) * 2 for v in rng.integers(0, 20, 70)]     # even: FP4 columnwise packs M
many[0] = many[-1] = 0
xm = bf16(rng.standard_normal((sum(many), 64)).astype(np.float32))
for axis in ("rowwise", "both"):
    fp4kit.group_quantize(xm, "nvfp4", first_dims=cp.asarray(np.array(many, np.int64)), axis=axis,
                          scale_layout="swizzled").check()
# ... and members spread over many statistics CTAs (the CTA completing a member's count builds its
# multiplier table, grouped.cu stats_tables), columnwise only too
big = [3000, 0, 2000, 6]
xb = bf16(rng.standard_normal((sum(big), 64)).astype(np.float32))
for axis in ("both", "columnwise"):
    fp4kit.group_quantize(xb, "nvfp4", first_dims=cp.asarray(np.array(big, np.int64)), axis=axis).check()
# grouped MXFP8 "both" in 128 x 128 squares (group_quantize4: one K % 128, 16-bit input; compact
# scales staged and unswizzled by group_unswizzle_scales): partial squares, members off a 16-byte
# boundary (staged in the group's tile), host / device dims
sq = [0, 1, 130, 0, 64, 256, 17, 0]
xs = bf16(rng.standard_normal((sum(sq), 256)).astype(np.float32))
for fmt, layout in itertools.product(("mxfp8_e4m3", "mxfp8_e5m2"), ("swizzled", "compact")):
    g = fp4kit.group_quantize(xs, fmt, first_dims=sq, axis="both", scale_layout=layout)
    fp4kit.group_dequantize(g, operand="columnwise")
    fp4kit.group_quantize(xs, fmt, first_dims=cp.asarray(np.array(sq, np.int64)), axis="both",
                          scale_layout=layout).check()
    try:   # more rows than the buffer: flagged, nothing written
        fp4kit.group_quantize(xs, fmt, first_dims=cp.asarray(np.array([300, 10**4], np.int64)), axis="both",
                              scale_layout=layout).check()
    except ValueError as e:
        print(f"sanitize driver: bad device dims flagged (squares, {layout}): {str(e)[:80]}")
# grouped MX "both" with compact scales in the one-tile kernel (one K % 128): staged swizzled at
# group_meta's second copy of the offsets, padding zeroed, then group_unswizzle_scales; host / device dims
so = [0, 2, 130, 0, 64, 256, 18, 0]
xo = rng.standard_normal((sum(so), 256)).astype(np.float32)
for fmt, xin in (("mxfp6_e2m3", bf16(xo)), ("mxfp4_e2m1", bf16(xo)), ("mxfp8_e4m3", cp.asarray(xo))):
    g = fp4kit.group_quantize(xin, fmt, first_dims=so, axis="both")
    fp4kit.group_dequantize(g, operand="columnwise")
    fp4kit.group_quantize(xin, fmt, first_dims=cp.asarray(np.array(so, np.int64)), axis="both").check()
    try:   # more rows than the buffer: flagged, nothing written
        fp4kit.group_quantize(xin, fmt, first_dims=cp.asarray(np.array([300, 10**4], np.int64)), axis="both").check()
    except ValueError as e:
        print(f"sanitize driver: bad device dims flagged (staged one-tile, {fmt}): {str(e)[:80]}")
# NVFP4 "both" with rows of K >= STAGED_NVFP4_MIN_K: compact scales staged, then unswizzle_scales
q = fp4kit.quantize(bf16(rng.standard_normal((128, 16384)).astype(np.float32)), "nvfp4", axis="both")
fp4kit.dequantize(q, dtype="float32", operand="columnwise")
# MXFP4 "both" from float32 and the columnwise operand alone of a large tensor (thresholds lowered to
# a small one here): compact scales staged, then unswizzle_scales
q = fp4kit.quantize(cp.asarray(rng.standard_normal((256, 384)).astype(np.float32)), "mxfp4_e2m1", axis="both")
fp4kit.dequantize(q, dtype="float32", operand="columnwise")
_m, _n = _plan.STAGED_MXFP4_COL_MIN_M, _plan.STAGED_MXFP4_COL_MIN_ELEMENTS
_plan.STAGED_MXFP4_COL_MIN_M, _plan.STAGED_MXFP4_COL_MIN_ELEMENTS = 128, 128 * 256
_plan.clear_plans()
q = fp4kit.quantize(bf16(rng.standard_normal((256, 384)).astype(np.float32)), "mxfp4_e2m1", axis="columnwise")
fp4kit.dequantize(q, dtype="float32", operand="columnwise")
_plan.STAGED_MXFP4_COL_MIN_M, _plan.STAGED_MXFP4_COL_MIN_ELEMENTS = _m, _n
_plan.clear_plans()
# device dims that exceed the buffer: flagged, nothing written out of bounds
for layout in ("compact", "swizzled"):
    try:
        fp4kit.group_quantize(xg, "mxfp8_e4m3", first_dims=cp.asarray(np.array([100, 10**6], np.int64)),
                              axis="both", scale_layout=layout).check()
    except ValueError as e:
        print(f"sanitize driver: bad device dims flagged ({layout}): {str(e)[:80]}")
# values the host never reads (thirty-fifth session): negative / NaN device amaxes per member (the
# multiplier tables take |amax|), a row-scaled device amax shorter than the members' rows (flagged),
# members of huge M and no columns (the padding pass's rows prefix)
xa = cp.asarray(rng.standard_normal((66, 96)).astype(np.float32))
fa = [10, 0, 8, 12, 6, 14, 2, 14]
for axis in ("both", "columnwise"):
    fp4kit.group_quantize(xa, "nvfp4", first_dims=fa, axis=axis,
                          amax=cp.asarray(np.float32([-1.0, -np.nan, np.inf, -1e-42, -0.0, 0.5, np.nan, -3.0]))).check()
for n_short in (0, 1):
    try:
        fp4kit.group_quantize(xa, "nvfp4", first_dims=cp.asarray(np.array([32, 34], np.int64)), row_scaled=True,
                              axis="both", amax=cp.ones(n_short, cp.float32)).check()
    except ValueError as e:
        print(f"sanitize driver: short row-scaled amax flagged: {str(e)[:80]}")
fp4kit.group_quantize(cp.asarray(rng.standard_normal(32).astype(np.float32)), "mxfp8_e4m3", scale_layout="swizzled",
                      first_dims=cp.asarray(np.array([2**62, 2**62, 1], np.int64)),
                      last_dims=cp.asarray(np.array([0, 0, 32], np.int64)), max_elements=32).check()
for (r, c) in [(1, 1), (3, 5), (129, 7), (0, 4), (257, 100)]:
    s = fp4kit.swizzle_scales(cp.asarray(rng.integers(0, 255, (r, c)).astype(np.uint8)))
    fp4kit.unswizzle_scales(s, (r, c))
cp.cuda.Device().synchronize()
print(f"sanitize driver: {n} quantize configurations ran")

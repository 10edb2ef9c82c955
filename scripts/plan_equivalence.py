#!/usr/bin/env python3
"""Do the planned launchers issue what the launchers before fp4kit/_plan.py issued? (CPU only.)

Loads fp4kit/_cuda.py as it was at git revision REV (default 6d64a83, the last one before the
planner) beside the current one, runs both quantize and compute_amax through a fake CuPy that
records every allocation, poison fill, copy and kernel launch (arrays named by allocation, NumPy
scalars by type and value), over every format / axis / layout / rule / NVFP4 variant / rounding /
input dtype, a set of shapes (empty ones included), five input alignments and a given or computed
amax, and reports the cases whose traces differ. The intended changes since then: the fused RHT cast
alone runs quantize_f5_d1_rht instead of quantize_f5_d1, and stochastic rounding alone the _sr /
_rowssr kernels instead of the full ones / _rowsx (mapped back and counted); compact
MXFP8 scales go through a swizzled staging buffer (fp4kit._plan.stage_scales; the comparison runs
with that turned off, and counts the cases it would take); the rows kernel takes its CTA width lw
as a last argument (the comparison runs with fp4kit._plan.ROWS_MAX_LW = 2, the old 64-column
blocks, drops that argument and counts the launches); small plain rowwise NVFP4 with a computed
amax runs one launch, quantize_f5_d<D>_rowsam, instead of the memset, the amax launch and the rows
launch (fp4kit._plan.small_fused; the comparison runs with fp4kit._plan.SMALL_FUSED_MAX = 0 and
counts the cases that would take it; the GPU tests compare its bytes); plain MXFP8 "both" from 16-bit
input with M and K multiples of 128 runs quantize_f<F>_d<D>_quad (1024-thread CTAs over 128 x 128
squares; the comparison runs with fp4kit._plan.QUAD_TILES = False and counts the cases); the plain
columnwise operand alone from 16-bit input with M % 16 == 0 (NVFP4; compact MXFP8 / MXFP6 from a
16-byte aligned input with K % 4 == 0) runs quantize_cols_f<F>_d<D>_* (fp4kit._plan.cols_kernel; the comparison runs with
fp4kit._plan.COLS_KERNEL = False and counts the cases; the GPU tests compare its bytes).

    python scripts/plan_equivalence.py [REV]

The record of the planner's introduction: the single-tensor planner has changed since (docs/
performance.md items 64 onwards, e.g. the 128 x 128 kernels and the NVFP4 tables), so today it
reports those cases as different (7872 of 21504 on 2026-11-25; compute_amax: none). The grouped
launcher's plan has its own, current check: scripts/group_plan_equivalence.py (a CPU test).
"""
import itertools
import os
import sys
import types

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
from _git_module import module_at  # noqa: E402  (scripts/)
import fp4kit  # noqa: E402
from fp4kit import _cuda as new  # noqa: E402
from fp4kit import _plan  # noqa: E402
from fp4kit._validate import quantize_options  # noqa: E402

REV = sys.argv[1] if len(sys.argv) > 1 else "6d64a83"
# the forty-third session's layout of the plain + RHT amaxes: the RHT one 16 bytes after the plain one
# (results at addresses JAX accepts), given to the old side by an edit of its source
OLD_EDITS = (("out = cp.zeros((2,) if both else (1,), dtype=np.float32)",
              "out = cp.zeros((5,) if both else (1,), dtype=np.float32)"),
             ("out[1:2]", "out[4:5]", 3))
old = module_at(REPO, REV, "fp4kit/_cuda.py", "fp4kit._cuda_before", edits=OLD_EDITS)

EVENTS = []


class FakeArray:
    """Records what is done to it; `id` names the allocation, `off` the byte offset of a view."""

    count = 0

    def __init__(self, shape, dtype, base=None, off=0, ptr=None):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.size = int(np.prod(self.shape))
        if base is None:
            FakeArray.count += 1
            self.id, self.ptr = FakeArray.count, (ptr if ptr is not None else 0x10000 * FakeArray.count)
        else:
            self.id, self.ptr = base.id, base.ptr
        self.off = off
        self.data = types.SimpleNamespace(ptr=self.ptr + off)

    def view(self, dtype):
        EVENTS.append(("view", self.id, str(np.dtype(dtype))))
        return FakeArray(self.shape, dtype, self, self.off)

    def fill(self, v):
        EVENTS.append(("fill", self.id, self.off, v))

    def copy(self):
        a = FakeArray(self.shape, self.dtype)
        EVENTS.append(("copy", self.id, self.off, "->", a.id))
        return a

    def reshape(self, *shape):
        return FakeArray((self.size,), self.dtype, self, self.off)

    def __getitem__(self, sl):
        return FakeArray((sl.stop - sl.start,), self.dtype, self, self.off + sl.start * self.dtype.itemsize)


def _norm(a):
    return ("arr", a.id, a.off) if isinstance(a, FakeArray) else (type(a).__name__, int(a))


def _alloc(kind):
    def make(shape, dtype):
        a = FakeArray(shape, dtype)
        EVENTS.append((kind, a.id, a.shape, str(a.dtype)))
        return a
    return make


def _array(src, dtype, copy, order):
    a = FakeArray(src.shape, dtype)
    EVENTS.append(("array", src.id, "->", a.id, a.shape, str(np.dtype(dtype)), copy, order))
    return a


def _fn(module, kernel):
    def launch(grid, block, args):
        EVENTS.append(("launch", module, kernel, grid, block, tuple(_norm(a) for a in args)))
    return launch


cp = types.SimpleNamespace(uint8=np.uint8, empty=_alloc("empty"), zeros=_alloc("zeros"), array=_array,
                           ascontiguousarray=lambda a, dtype=None: a)
cp.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(
    getDevice=lambda: 0, cudaDevAttrMultiProcessorCount=16, deviceGetAttribute=lambda attr, dev: 132))
for m in (old, new):
    m._cp, m._fn, m._poison = (lambda: cp), _fn, True
    m._SM_COUNTS.clear()


def trace(mod, op, shape, dtype, ptr, *args, amax_shape=None):
    EVENTS.clear()
    FakeArray.count = 0
    x = FakeArray(shape, np.uint16 if dtype == "bfloat16" else dtype, ptr=ptr)
    if op == "quantize":
        amax = FakeArray(amax_shape, np.float32) if amax_shape is not None else None
        out = mod.quantize(x, args[0], amax, input_dtype=dtype)
        res = tuple(None if o is None else {k: None if v is None else _norm(v) for k, v in o.items()} for o in out)
    else:
        out = mod.compute_amax(x, dtype, args[0], 0x1234)
        res = tuple(_norm(o) for o in out) if isinstance(out, tuple) else _norm(out)
    return list(EVENTS), res


SHAPES = [(0, 64), (64, 0), (1, 64), (16, 4096), (2, 34), (48, 80), (130, 200), (64, 256), (256, 512), (33, 1000),
          (32, 48)]
PTRS = [0x7F0000000000, 0x7F0000000002, 0x7F0000000004, 0x7F0000000008, 0x7F000000000C]
n = bad = renamed = staged = 0
STAGED_FORMATS = set(_plan.STAGED_SCALE_FORMATS)
_plan.STAGED_SCALE_FORMATS.clear()     # compare the rest of the plan with the old launchers
_plan.ROWS_MAX_LW = 2                   # the old rows-kernel blocks (64 columns)
SMALL_FUSED_MAX = _plan.SMALL_FUSED_MAX
_plan.SMALL_FUSED_MAX = 0               # the separate amax launches
fused = 0
_plan.QUAD_TILES = False                # the 64 x 64 tile kernel
quad = 0
_plan.COLS_KERNEL = False               # the tile kernel for the columnwise operand alone
cols = 0
_plan.clear_plans()
with_lw = 0
for fmt in fp4kit.FORMATS:
    for axis, layout, rule, t2, rs, rht, rnd, dtype in itertools.product(
            ("rowwise", "columnwise", "both"), ("compact", "swizzled"), ("rceil", "floor"), (False, True),
            (False, True), (False, True), ("nearest", "stochastic"), ("float32", "bfloat16", "float16")):
        for shape, given, ptr in itertools.product(SHAPES, (False, True), PTRS):
            if ptr % (4 if dtype == "float32" else 2):
                continue
            amax_shape = ((shape[0],) if rs else (1,)) if given else None
            try:
                opts = quantize_options(shape, dtype, fmt, axis=axis, scale_layout=layout, scale_rule=rule, tile_2d=t2,
                                        row_scaled=rs, rht=rht, rounding=rnd, seed=77, amax_shape=amax_shape,
                                        amax_dtype="float32" if given else None)
            except (TypeError, ValueError):
                continue
            n += 1
            nb = fp4kit.FORMATS[fmt].num_blocks
            M, K = shape
            if fmt in STAGED_FORMATS and layout == "compact" and M and K and (
                    (axis != "columnwise" and M % 128 == 0 and nb(K) % 4 == 0)
                    or (axis != "rowwise" and K % 128 == 0 and nb(M) % 4 == 0)):
                staged += 1
            M_, K_ = shape
            _plan.SMALL_FUSED_MAX = SMALL_FUSED_MAX
            fused += _plan.small_fused(opts, M_, K_, given)
            _plan.SMALL_FUSED_MAX = 0
            _plan.QUAD_TILES = True
            quad += bool(M and K and not _plan.needs_ext(opts)
                         and _plan.quad_tiles(fmt, dtype, M, K, axis == "both"))
            _plan.QUAD_TILES = False
            _plan.COLS_KERNEL = True
            cols += bool(M and K and not _plan.needs_ext(opts)
                         and _plan.cols_kernel(fmt, dtype, M, K, _plan.align_class(ptr), axis == "columnwise",
                                               layout) is not None)
            _plan.COLS_KERNEL = False
            a = trace(old, "quantize", shape, dtype, ptr, opts, amax_shape=amax_shape)
            b = trace(new, "quantize", shape, dtype, ptr, opts, amax_shape=amax_shape)
            # the one intended change since REV: the fused RHT cast alone runs quantize_f5_d1_rht,
            # the same kernel body with the other variants compiled out
            # (and stochastic rounding alone runs _sr / _rowssr, likewise, instead of the full kernel / _rowsx)
            def base_name(k):
                if k == "quantize_f5_d1_rht" or k.endswith("_sr"):
                    return k.rsplit("_", 1)[0]
                return k[:-len("_rowssr")] + "_rowsx" if k.endswith("_rowssr") else k
            if any(e[0] == "launch" and base_name(e[2]) != e[2] for e in b[0]):
                renamed += 1
                b = ([e[:2] + (base_name(e[2]),) + e[3:] if e[0] == "launch" else e for e in b[0]], b[1])
            # the rows kernels' last argument, lw (always 2 here), did not exist before
            if any(e[0] == "launch" and e[2].endswith(("_rows", "_rowsx")) for e in b[0]):
                with_lw += 1
                b = ([e[:5] + (e[5][:-1],) if e[0] == "launch" and e[2].endswith(("_rows", "_rowsx"))
                      and e[5][-1] == ("int32", 2) else e for e in b[0]], b[1])
            if a != b:
                bad += 1
                if bad <= 3:
                    print("differs:", fmt, dtype, shape, hex(ptr), amax_shape, opts)
                    for e1, e2 in itertools.zip_longest(a[0], b[0]):
                        print("   ", "==" if e1 == e2 else "!=", e1, "|", e2)
print(f"quantize: {n} cases, {bad} with different traces ({renamed} run quantize_f5_d1_rht or an _sr / _rowssr kernel for the full one; "
      f"{staged} would stage compact scales; {with_lw} rows-kernel launches with lw = 2; {fused} would run the "
      f"one-launch small NVFP4 kernel; {quad} the 128 x 128 MXFP8 kernel; {cols} the columnwise-only kernel)")
m = bad_amax = 0
for shape, dtype, mode, ptr in itertools.product(SHAPES + [(16, 3), (32, 5)], ("float32", "bfloat16", "float16"),
                                                 ("global", "rows", "cols", "rht", "global+rht"), PTRS):
    if ptr % (4 if dtype == "float32" else 2):
        continue
    if mode in ("rht", "global+rht") and (dtype != "bfloat16" or shape[0] % 16):
        continue       # rejected by validation, or (0 < M < 16, global+rht) the one intended difference
    m += 1
    if trace(old, "amax", shape, dtype, ptr, mode) != trace(new, "amax", shape, dtype, ptr, mode):
        bad_amax += 1
        print("compute_amax differs:", shape, dtype, mode, hex(ptr))
print(f"compute_amax: {m} cases, {bad_amax} with different traces")
sys.exit(1 if bad or bad_amax else 0)

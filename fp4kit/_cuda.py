"""CUDA launchers: output buffers, grids and kernel arguments for each op (docs/design.md).

Inputs are already validated by ``_validate``; every launch goes to the current CuPy stream (the
API enters the caller's stream with ``with stream:``). Kernels live in ``cuda_src/`` and are
compiled by ``_loader``. Scalars are passed as explicit NumPy types; pointers that a kernel does
not use are passed as ``np.uint64(0)``.

quantize and compute_amax are planned by ``fp4kit._plan`` (buffers, kernels, grids, arguments;
memoised) and run here by ``run_plan`` with CuPy arrays (the general path; for a PyTorch caller
their memory comes from PyTorch's caching allocator, fp4kit._interop.torch_allocator);
``fp4kit._torch_exec`` runs the same plans with PyTorch tensors or CuPy arrays (the fast paths).

Debug hook: with ``FP4KIT_POISON=1`` in the environment (or ``set_poison(True)``) every output
buffer is filled with 0xA5 before the kernels run, so a byte no kernel writes cannot pass a test.
"""
from __future__ import annotations

import os

import numpy as np

from . import _plan
from .formats import FORMATS
from .tensor import swizzled_shape

__all__ = ["quantize", "dequantize", "swizzle_scales", "unswizzle_scales", "compute_amax", "set_poison",
           "poison_enabled", "run_plan"]

_poison = os.environ.get("FP4KIT_POISON", "").strip() not in ("", "0", "false", "False")

_DTYPE_IDS = _plan.DTYPE_IDS
_THREADS = _plan.THREADS
_NULL = np.uint64(0)


def set_poison(flag: bool) -> None:
    """Fill every freshly allocated output with 0xA5 before the kernels run (tests)."""
    global _poison
    _poison = bool(flag)


def poison_enabled() -> bool:
    return _poison


def _cp():
    import cupy
    return cupy


def _fn(module: str, kernel: str):
    from ._loader import get_function
    return get_function(module, kernel)


def _empty(shape, dtype):
    cp = _cp()
    a = cp.empty(shape, dtype=dtype)
    if _poison and a.size:
        a.view(cp.uint8).fill(0xA5)
    return a


_SM_COUNTS: dict[int, int] = {}


def _sm_count_of(dev: int) -> int:
    """SMs of device `dev` (cached: Device.attributes queries every attribute)."""
    n = _SM_COUNTS.get(dev)
    if n is None:
        rt = _cp().cuda.runtime
        n = _SM_COUNTS[dev] = int(rt.deviceGetAttribute(rt.cudaDevAttrMultiProcessorCount, dev))
    return n


def _sm_count() -> int:
    """SMs of the current device."""
    return _sm_count_of(_cp().cuda.runtime.getDevice())


def _grid_stride_blocks(n_items: int, per_sm: int = 16) -> int:
    return _plan.grid_stride_blocks(n_items, per_sm, _sm_count())


def _kernel_ptr(fn) -> int:
    """CUfunction handle of a cupy.RawKernel (its .kernel is the loaded cupy.cuda.Function)."""
    return int(getattr(fn, "kernel", fn).ptr)


# segments of 16 per thread per step of dequantize.cu, per output dtype (cuda_src/common/dequantize_op.cuh DqTune)
_DQ_SEGS = {"float32": 2, "bfloat16": 3, "float16": 3}
# resident CTAs per SM the dequantize kernels are compiled for (DqTune::min_ctas; the grouped grid)
_DQ_MIN_CTAS = {"float32": 3, "bfloat16": 4, "float16": 4}
_MAX_GRID = 1 << 24   # CTAs of a grid-stride kernel; the kernel loops over any work beyond it
_RESIDENT: dict = {}


def _resident_per_sm(fn, fallback: int) -> int:
    """CTAs of 256 threads of kernel `fn` (a cupy.RawKernel of one device) that fit on one SM at
    once, from the CUDA occupancy API (cached per kernel; `fallback` if the query fails)."""
    n = _RESIDENT.get(id(fn))
    if n is None:
        try:
            n = int(_cp().cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(_kernel_ptr(fn), _THREADS, 0))
        except Exception:
            n = fallback
        n = _RESIDENT[id(fn)] = max(1, n)
    return n


_NP_DTYPES: dict[str, type[np.generic]] = {"uint8": np.uint8, "float32": np.float32, "int32": np.int32, "int64": np.int64, "float64": np.float64}
_NP_SCALARS = {"i64": np.int64, "i32": np.int32, "u32": np.uint32, "u64": np.uint64}


def run_plan(plan, x, amax=None, seed: int = 0, fd=None, ld=None) -> list:
    """Run a launch plan (fp4kit._plan) with CuPy on the current device and stream.

    x: the C-contiguous CuPy input ("x" arguments); amax: the caller's CuPy amax ("amax" arguments);
    seed: the "seed" argument; fd / ld: a grouped op's C-contiguous int64 dims ("fd" / "ld").
    Returns the plan's buffers (CuPy arrays), indexed by buffer number.
    """
    cp = _cp()
    bufs: list = [None] * plan.n_buffers
    amax_arg = None
    for step in plan.steps:
        kind = type(step)
        if kind is _plan.Buffer:
            init = step.init
            if init == _plan.EMPTY:
                a = _empty(step.shape, _NP_DTYPES[step.dtype])
            elif init == _plan.ZEROS:
                a = cp.zeros(step.shape, dtype=_NP_DTYPES[step.dtype])
            elif init == _plan.COPY:
                a = bufs[step.src].copy()
            elif init == _plan.FILL:
                a = cp.full(step.shape, step.value, dtype=_NP_DTYPES[step.dtype])
            elif init == _plan.HOST:
                a = cp.asarray(np.array(step.value, dtype=_NP_DTYPES[step.dtype]).reshape(step.shape))
            else:                                   # VIEW
                a = bufs[step.src][step.start:step.start + step.shape[0]]
            bufs[step.slot] = a
        elif kind is _plan.Launch:
            args = []
            for arg in step.args:
                k = arg.kind
                if k == "x":
                    args.append(x)
                elif k == "buf":
                    b = bufs[arg.value]
                    args.append(b if not arg.offset else np.uint64(b.data.ptr + arg.offset))
                elif k == "null":
                    args.append(_NULL)
                elif k == "seed":
                    args.append(np.uint64(seed))
                elif k == "amax":
                    if amax_arg is None:
                        amax_arg = _cp().ascontiguousarray(amax, dtype=np.float32)
                    args.append(amax_arg)
                elif k == "fd":
                    args.append(fd)
                elif k == "ld":
                    args.append(ld)
                elif k == "dims":
                    raise ValueError("fp4kit internal: plans with host values as kernel parameters ('dims' "
                                     "arguments) run on fp4kit._torch_exec's executors, not run_plan")
                else:
                    args.append(_NP_SCALARS[k](arg.value))
            grid = (step.grid,) if step.grid_y == step.grid_z == 1 else (step.grid, step.grid_y, step.grid_z)
            _fn(step.module, step.kernel)(grid, (step.block,), tuple(args))
        else:                                       # ZeroFill
            bufs[step.slot].fill(0)
    return bufs


def compute_amax(x, input_dtype: str, mode: str = "global", rht_sign_mask: int = 0xD7E8):
    """NVFP4 amax on the device, no host synchronisation (x: C-contiguous (M, K) CuPy array).

    mode "global" -> float32 (1,); "rows" -> (M,); "cols" -> (K,) (per column of x);
    "rht" -> (1,) max |u| over the 16-point Hadamard transform of the columns (bfloat16 only);
    "global+rht" -> (global, rht), both from ONE pass over x (two (1,) views of one buffer).
    """
    M, K = (int(s) for s in x.shape)
    plan = _plan.amax_plan(_cp().cuda.runtime.getDevice(), _sm_count_of, M, K, input_dtype, mode,
                           int(rht_sign_mask), x.data.ptr)
    bufs = run_plan(plan, x)
    outs = tuple(bufs[s] for s in plan.outputs)
    return outs if mode == "global+rht" else outs[0]


def quantize(x, opts, amax=None, *, input_dtype: str):
    """Quantize a C-contiguous (M, K) CuPy array (float32, float16, or uint16 bfloat16 bits).

    Returns (rowwise, columnwise); each None or {"data", "scales", "amax"} (CuPy arrays; amax is
    float32 (1,) / (rows,) for NVFP4, else None). rows x cols is (M, K) rowwise, (K, M) columnwise.
    """
    M, K = (int(s) for s in x.shape)
    plan = _plan.quantize_plan(_cp().cuda.runtime.getDevice(), _sm_count_of, M, K, input_dtype, opts,
                               None if amax is None else int(amax.size), x.data.ptr)
    bufs = run_plan(plan, x, amax, opts.seed)
    return tuple(None if o is None else
                 {"data": bufs[o.data], "scales": bufs[o.scales], "amax": None if o.amax is None else bufs[o.amax]}
                 for o in plan.outputs)


# dequantize's output dtype -> the CuPy array's NumPy dtype (bfloat16 as its uint16 bits)
DEQUANT_NP_DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": np.uint16}


def dequantize_kernel(fmt, out_dtype: str, rows: int, cols: int) -> tuple[str, int]:
    """(dequantize.cu kernel name, CTAs of _THREADS) for a (rows, cols) operand of format `fmt`.
    Each thread takes _DQ_SEGS[out_dtype] 16-element segments per iteration (dequantize_op.cuh); one
    CTA per _THREADS * _DQ_SEGS[out_dtype] segments (measured faster than one wave of resident CTAs looping: the block
    scheduler keeps every SM's slots busy to the end), the kernel's grid-stride loop covers the rest
    past the grid limit."""
    total = rows * -(-cols // 16)
    return (f"dequantize_f{fmt.format_id}_o{_DTYPE_IDS[out_dtype]}",
            min(-(-total // (_THREADS * _DQ_SEGS[out_dtype])), _MAX_GRID))


def dequantize(data, scales, amax, fmt_name: str, rows: int, cols: int, scale_layout: str, out_dtype: str):
    """One operand -> CuPy (rows, cols) of float32 / float16 / uint16 (bfloat16 bits)."""
    fmt = FORMATS[fmt_name]
    rows, cols = int(rows), int(cols)
    out = _empty((rows, cols), DEQUANT_NP_DTYPES[out_dtype])
    if rows == 0 or cols == 0:
        return out
    cp = _cp()
    data = cp.ascontiguousarray(data)
    scales = cp.ascontiguousarray(scales)
    row_scaled = 0
    if fmt.is_nvfp4:
        amax = cp.ascontiguousarray(amax, dtype=np.float32).reshape(-1)
        row_scaled = int(amax.size > 1)   # (rows,) per-row amax; (1,) global
    kernel, grid = dequantize_kernel(fmt, out_dtype, rows, cols)
    _fn("dequantize", kernel)((grid,), (_THREADS,),
        (data, scales, amax if fmt.is_nvfp4 else _NULL, np.int64(rows), np.int64(cols),
         np.int32(scale_layout == "swizzled"), np.int32(row_scaled), out))
    return out


def swizzle_scales(compact):
    """(R, C) uint8 CuPy -> (roundup(R,128), roundup(C,4)) swizzled, padding 0."""
    cp = _cp()
    R, C = (int(s) for s in compact.shape)
    rp, cpd = swizzled_shape(R, C)
    out = _empty((rp, cpd), np.uint8)
    if rp * cpd:
        compact = cp.ascontiguousarray(compact)
        # one CTA per 128 x 64 tile (swizzle.cu)
        _fn("swizzle", "swizzle_scales")((_plan.swizzle_tiles(rp, cpd),), (_THREADS,),
                                         (compact, np.int64(R), np.int64(C), out, np.int64(rp), np.int64(cpd)))
    return out


def unswizzle_scales(swizzled, shape):
    """Swizzled uint8 CuPy (roundup(R,128), roundup(C,4)) -> compact (R, C)."""
    cp = _cp()
    R, C = (int(s) for s in shape)
    out = _empty((R, C), np.uint8)
    if R * C:
        swizzled = cp.ascontiguousarray(swizzled)
        cpd = int(swizzled.shape[1])
        # one CTA per 128 x 64 compact tile (swizzle.cu); the kernel's second matrix: none
        _fn("swizzle", "unswizzle_scales")((_plan.swizzle_tiles(R, cpd),), (_THREADS,),
                                           (swizzled, np.int64(R), np.int64(C), np.int64(cpd), out,
                                            _NULL, np.int64(0), np.int64(0), np.int64(0), _NULL))
    return out

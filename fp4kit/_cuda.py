"""CUDA launchers: output buffers, grids and kernel arguments for each op (docs/design.md).

Inputs are already validated by ``_validate``; every launch goes to the current CuPy stream (the
API enters the caller's stream with ``with stream:``). Kernels live in ``cuda_src/`` and are
compiled by ``_loader``. Scalars are passed as explicit NumPy types; pointers that a kernel does
not use are passed as ``np.uint64(0)``.

Debug hook: with ``FP4KIT_POISON=1`` in the environment (or ``set_poison(True)``) every output
buffer is filled with 0xA5 before the kernels run, so a byte no kernel writes cannot pass a test.
"""
from __future__ import annotations

import os

import numpy as np

from .formats import FORMATS
from .tensor import swizzled_shape

__all__ = ["quantize", "dequantize", "swizzle_scales", "unswizzle_scales", "compute_amax", "set_poison",
           "poison_enabled"]

_poison = os.environ.get("FP4KIT_POISON", "").strip() not in ("", "0", "false", "False")

_DTYPE_IDS = {"float32": 0, "bfloat16": 1, "float16": 2}
_ITEMSIZE = {"float32": 4, "bfloat16": 2, "float16": 2}

# Mirrors cuda_src/common/enums.cuh (QuantizeFlag).
QFLAG_ROWWISE = 1 << 0
QFLAG_COLUMNWISE = 1 << 1
QFLAG_SWIZZLED = 1 << 2
QFLAG_RULE_FLOOR = 1 << 3
QFLAG_STOCHASTIC = 1 << 4
QFLAG_TILE_2D = 1 << 5
QFLAG_ROW_SCALED = 1 << 6
QFLAG_RHT = 1 << 7
QFLAG_VEC_IN = 1 << 8

_QT_M = 64          # quantize tile (cuda_src/quantize.cu)
_QT_K = 64
_THREADS = 256
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


def _sm_count() -> int:
    """SMs of the current device (cached: Device.attributes queries every attribute)."""
    cp = _cp()
    dev = cp.cuda.runtime.getDevice()
    n = _SM_COUNTS.get(dev)
    if n is None:
        n = _SM_COUNTS[dev] = int(cp.cuda.runtime.deviceGetAttribute(cp.cuda.runtime.cudaDevAttrMultiProcessorCount, dev))
    return n


def _grid_stride_blocks(n_items: int, per_sm: int = 16) -> int:
    return max(1, min(-(-n_items // _THREADS), _sm_count() * per_sm))


def _kernel_ptr(fn) -> int:
    """CUfunction handle of a cupy.RawKernel (its .kernel is the loaded cupy.cuda.Function)."""
    return int(getattr(fn, "kernel", fn).ptr)


_DQ_SEGS = 4   # cuda_src/common/dequantize_op.cuh DQ_SEGS
_RESIDENT: dict = {}


def _resident_grid(fn, ctas_needed: int) -> int:
    """min(ctas_needed, CTAs of 256 threads of `fn` resident on the device at once): a grid-stride
    kernel then runs in one wave (occupancy API; 4 per SM if it is unavailable)."""
    key = (id(fn), _cp().cuda.runtime.getDevice())
    per_sm = _RESIDENT.get(key)
    if per_sm is None:
        try:
            per_sm = int(_cp().cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(_kernel_ptr(fn), _THREADS, 0))
        except Exception:
            per_sm = 4
        per_sm = _RESIDENT[key] = max(1, per_sm)
    return max(1, min(int(ctas_needed), _sm_count() * per_sm))


def _scales_buffer(rows: int, cols: int, fmt, layout: str):
    nb = fmt.num_blocks(cols)
    shape = swizzled_shape(rows, nb) if layout == "swizzled" else (rows, nb)
    return _empty(shape, np.uint8), nb


def _zero_swizzle_padding(buf, rows: int, nb: int) -> None:
    rp, cpd = buf.shape
    if rp * cpd == 0 or (rp == rows and cpd == nb):
        return
    _fn("swizzle", "swizzle_zero_padding")(   # one thread per 16-byte chunk (swizzle.cu)
        (_grid_stride_blocks(rp * cpd // 16),), (_THREADS,),
        (buf, np.int64(rows), np.int64(nb), np.int64(rp), np.int64(cpd)))


def _vec_ok(x, itemsize: int, K: int) -> bool:
    return x.data.ptr % 16 == 0 and (K * itemsize) % 16 == 0


def compute_amax(x, input_dtype: str, mode: str = "global", rht_sign_mask: int = 0xD7E8):
    """NVFP4 amax on the device, no host synchronisation (x: C-contiguous (M, K) CuPy array).

    mode "global" -> float32 (1,); "rows" -> (M,); "cols" -> (K,) (per column of x);
    "rht" -> (1,) max |u| over the 16-point Hadamard transform of the columns (bfloat16 only);
    "global+rht" -> (global, rht), both from ONE pass over x (two (1,) views of one buffer).
    """
    cp = _cp()
    M, K = x.shape
    dt = _DTYPE_IDS[input_dtype]
    if mode == "global":
        out = cp.zeros((1,), dtype=np.float32)
        n = M * K
        if n:
            V = 16 // _ITEMSIZE[input_dtype]
            vec = x.data.ptr % 16 == 0
            _fn("amax", f"amax_global_d{dt}")((_grid_stride_blocks(-(-n // V), 8),), (_THREADS,),
                                              (x, np.int64(n), np.int32(vec), out))
        return out
    if mode in ("rows", "cols"):
        out = cp.zeros((M,) if mode == "rows" else (K,), dtype=np.float32)
        if M * K:
            tiles = -(-M // 16) * -(-K // _THREADS)
            _fn("amax", f"amax_rows_cols_d{dt}")(
                (tiles,), (_THREADS,),
                (x, np.int64(M), np.int64(K), out if mode == "rows" else _NULL, out if mode == "cols" else _NULL))
        return out
    if mode in ("rht", "global+rht"):
        if input_dtype != "bfloat16":
            raise ValueError(f"rht: expected bfloat16 input, got {input_dtype}")
        both = mode == "global+rht"
        out = cp.zeros((2,) if both else (1,), dtype=np.float32)
        n = (M // 16) * K
        if n and K % 2 == 0 and x.data.ptr % 4 == 0:
            # one pass: thread per 16 rows x 2 columns (4-byte loads); plain amax on the way
            _fn("amax", "amax_plain_rht_bf16")(
                (_grid_stride_blocks(n // 2, 4),), (_THREADS,),
                (x, np.int64(M), np.int64(K), np.uint32(rht_sign_mask), out[0:1] if both else _NULL,
                 out[1:2] if both else out))
        elif n:
            _fn("amax", "amax_rht_bf16")((_grid_stride_blocks(n, 8),), (_THREADS,),
                                         (x, np.int64(M), np.int64(K), np.uint32(rht_sign_mask),
                                          out[1:2] if both else out))
            if both:
                V = 8
                _fn("amax", "amax_global_d1")((_grid_stride_blocks(-(-(M * K) // V), 8),), (_THREADS,),
                                              (x, np.int64(M * K), np.int32(x.data.ptr % 16 == 0), out[0:1]))
        elif both and M * K:
            out[0:1] = compute_amax(x, input_dtype, "global")
        return (out[0:1], out[1:2]) if both else out
    raise ValueError(f"mode: expected 'global', 'rows', 'cols', 'rht' or 'global+rht', got {mode!r}")


def quantize_flags(opts) -> int:
    """The QuantizeFlag bits (cuda_src/common/enums.cuh) of one call's options, QFLAG_VEC_IN aside
    (that one depends on the input's alignment). Shared by the single-tensor and grouped launchers."""
    flags = (QFLAG_ROWWISE if opts.want_rowwise else 0) | (QFLAG_COLUMNWISE if opts.want_columnwise else 0)
    if opts.scale_layout == "swizzled":
        flags |= QFLAG_SWIZZLED
    if opts.scale_rule == "floor":
        flags |= QFLAG_RULE_FLOOR
    if opts.rounding == "stochastic":
        flags |= QFLAG_STOCHASTIC
    if FORMATS[opts.format].is_nvfp4:
        flags |= (QFLAG_TILE_2D if opts.tile_2d else 0) | (QFLAG_ROW_SCALED if opts.row_scaled else 0)
        flags |= QFLAG_RHT if opts.rht else 0
    return flags


def needs_ext(opts) -> bool:
    """True when the options need the full kernels (stochastic rounding, NVFP4 tile_2d / row_scaled /
    rht); the plain ones (_plain, _rows) compile those paths out and use fewer registers."""
    return opts.rounding == "stochastic" or (FORMATS[opts.format].is_nvfp4 and
                                             (opts.tile_2d or opts.row_scaled or opts.rht))


def quantize(x, opts, amax=None, *, input_dtype: str):
    """Quantize a C-contiguous (M, K) CuPy array (float32, float16, or uint16 bfloat16 bits).

    Returns (rowwise, columnwise); each None or {"data", "scales", "amax"} (CuPy arrays; amax is
    float32 (1,) / (rows,) for NVFP4, else None). rows x cols is (M, K) rowwise, (K, M) columnwise.
    """
    cp = _cp()
    fmt = FORMATS[opts.format]
    M, K = (int(s) for s in x.shape)
    want_row, want_col = opts.want_rowwise, opts.want_columnwise
    layout = opts.scale_layout

    ops = {}
    for name, want, rows, cols in (("rowwise", want_row, M, K), ("columnwise", want_col, K, M)):
        if want:
            data = _empty((rows, fmt.packed_len(cols)), np.uint8)
            scales, nb = _scales_buffer(rows, cols, fmt, layout)
            ops[name] = {"data": data, "scales": scales, "amax": None, "_rows": rows, "_nb": nb}

    # NVFP4 amax: rowwise uses the caller's or the computed plain amax; columnwise the same except
    # that rht / row_scaled give it its own, always computed.
    if fmt.is_nvfp4:
        plain = None
        rht_amax = None
        if "rowwise" in ops and "columnwise" in ops and opts.rht and amax is None and not opts.row_scaled:
            plain, rht_amax = compute_amax(x, input_dtype, "global+rht", opts.rht_sign_mask)   # one pass
            ops["rowwise"]["amax"] = plain
        elif "rowwise" in ops:
            if amax is not None:
                ops["rowwise"]["amax"] = cp.array(amax, dtype=np.float32, copy=True, order="C").reshape(-1)
            elif opts.row_scaled:
                ops["rowwise"]["amax"] = compute_amax(x, input_dtype, "rows")
            else:
                plain = compute_amax(x, input_dtype, "global")
                ops["rowwise"]["amax"] = plain
        if "columnwise" in ops:
            if opts.row_scaled:
                a = compute_amax(x, input_dtype, "cols")
            elif rht_amax is not None:
                a = rht_amax
            elif opts.rht:
                a = compute_amax(x, input_dtype, "rht", opts.rht_sign_mask)
            elif amax is not None:
                a = cp.array(amax, dtype=np.float32, copy=True, order="C").reshape(-1)
            elif plain is not None:
                a = plain.copy()
            else:
                a = compute_amax(x, input_dtype, "global")
            ops["columnwise"]["amax"] = a

    if M and K:
        flags = quantize_flags(opts)          # "rowwise"/"columnwise" in ops <=> opts.want_*
        if _vec_ok(x, _ITEMSIZE[input_dtype], K):
            flags |= QFLAG_VEC_IN
        r, c = ops.get("rowwise"), ops.get("columnwise")
        ext = needs_ext(opts)
        name = f"quantize_f{fmt.format_id}_d{_DTYPE_IDS[input_dtype]}"
        if c is None and not (fmt.is_nvfp4 and opts.tile_2d):
            # rowwise alone: R tiles of 64 rows per CTA, loads issued up front (quantize.cu)
            R = 2 if (ext or input_dtype == "float32") else 4
            tiles = -(-M // (_QT_M * R)) * -(-K // _QT_K)
            _fn("quantize", name + ("_rowsx" if ext else "_rows"))((tiles,), (_THREADS,), (
                x, np.int64(M), np.int64(K), r["data"], r["scales"],
                r["amax"] if r["amax"] is not None else _NULL, np.int32(flags), np.uint64(opts.seed)))
            if layout == "swizzled":
                _zero_swizzle_padding(r["scales"], r["_rows"], r["_nb"])
            return ({"data": r["data"], "scales": r["scales"], "amax": r["amax"]}, None)
        tiles = -(-M // _QT_M) * -(-K // _QT_K)
        kern = _fn("quantize", name + ("" if ext else "_plain"))
        kern((tiles,), (_THREADS,), (
            x, np.int64(M), np.int64(K),
            r["data"] if r else _NULL, r["scales"] if r else _NULL,
            c["data"] if c else _NULL, c["scales"] if c else _NULL,
            r["amax"] if r is not None and r["amax"] is not None else _NULL,
            c["amax"] if c is not None and c["amax"] is not None else _NULL,
            np.int32(flags), np.uint64(opts.seed), np.uint32(opts.rht_sign_mask)))
        if layout == "swizzled":
            for op in ops.values():
                _zero_swizzle_padding(op["scales"], op["_rows"], op["_nb"])
    elif layout == "swizzled":
        for op in ops.values():
            if op["scales"].size:
                op["scales"].fill(0)

    out = []
    for name in ("rowwise", "columnwise"):
        op = ops.get(name)
        out.append(None if op is None else {"data": op["data"], "scales": op["scales"], "amax": op["amax"]})
    return tuple(out)


def dequantize(data, scales, amax, fmt_name: str, rows: int, cols: int, scale_layout: str, out_dtype: str):
    """One operand -> CuPy (rows, cols) of float32 / float16 / uint16 (bfloat16 bits)."""
    fmt = FORMATS[fmt_name]
    rows, cols = int(rows), int(cols)
    np_dt = {"float32": np.float32, "float16": np.float16, "bfloat16": np.uint16}[out_dtype]
    out = _empty((rows, cols), np_dt)
    if rows == 0 or cols == 0:
        return out
    cp = _cp()
    data = cp.ascontiguousarray(data)
    scales = cp.ascontiguousarray(scales)
    row_scaled = 0
    if fmt.is_nvfp4:
        amax = cp.ascontiguousarray(amax, dtype=np.float32).reshape(-1)
        row_scaled = int(amax.size > 1)   # (rows,) per-row amax; (1,) global
    total = rows * -(-cols // 16)
    fn = _fn("dequantize", f"dequantize_f{fmt.format_id}_o{_DTYPE_IDS[out_dtype]}")
    # each thread takes _DQ_SEGS segments per iteration (dequantize_op.cuh); one wave of resident CTAs
    fn((_resident_grid(fn, -(-total // (_THREADS * _DQ_SEGS))),), (_THREADS,),
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
        _fn("swizzle", "swizzle_scales")((_grid_stride_blocks(rp * cpd // 16),), (_THREADS,),
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
        _fn("swizzle", "unswizzle_scales")((_grid_stride_blocks(int(swizzled.size) // 16),), (_THREADS,),
                                           (swizzled, np.int64(R), np.int64(C), np.int64(cpd), out))
    return out

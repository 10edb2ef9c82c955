"""The public reference functions: NumPy in, NumPy out, the same signatures as ``fp4kit.*``.

Orchestration only; the numerics live in numerics.py, mx.py, nvfp4.py, rht.py, layouts.py.
Orientation (SPEC section 5): the input is flattened to (M, K); the rowwise operand is (M, K) with
blocks along K; the columnwise operand is the rowwise operand of x^T, (K, M).
"""
from __future__ import annotations

import operator

import ml_dtypes
import numpy as np

from .._validate import check_amax_values, check_choice, check_dtype, native_order, quantize_options
from .._types import Axis, FormatLike, OperandName, OutDType, Rounding, ScaleLayout, ScaleRule
from ..formats import FORMATS
from ..tensor import Operand, QuantizedTensor
from . import mx, nvfp4
from .layouts import swizzle, unswizzle
from .numerics import from_f32, to_f32
from .rht import rht16

__all__ = ["quantize", "dequantize", "swizzle_scales", "unswizzle_scales", "dtype_name"]


def dtype_name(dt) -> str | None:
    dt = np.dtype(dt)
    if not dt.isnative:                 # '>f4' is float32 too (inputs are converted to native order)
        dt = dt.newbyteorder("=")
    if dt == np.float32:
        return "float32"
    if dt == np.float16:
        return "float16"
    if dt == np.dtype(ml_dtypes.bfloat16):
        return "bfloat16"
    return None


def scalar_hint(x) -> str:
    """For a NumPy scalar given where an array belongs, the words that say so (else "")."""
    if isinstance(x, np.generic):
        return " (a NumPy scalar, not an array: np.asarray keeps it 0-d, np.atleast_1d makes it one)"
    return ""


def _np_input(x, name="x") -> tuple[np.ndarray, str]:
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name}: expected a NumPy array (or a device array through fp4kit.quantize), got "
                        f"{type(x).__name__}{scalar_hint(x)}")
    dn = dtype_name(x.dtype)
    if dn is None:
        raise TypeError(f"{name}: expected dtype float32, bfloat16 or float16, got {x.dtype}")
    return native_order(plain_ndarray(x, name)), dn


def plain_ndarray(x: np.ndarray, name: str) -> np.ndarray:
    """A NumPy subclass as the plain ndarray of its values (np.matrix stays 2-D under reshape(-1),
    which sliced rows, not elements, in the grouped code); a masked array with masked values is a
    TypeError: its mask would be ignored, the values under it quantized (and counted in the amax)."""
    if type(x) is np.ndarray:
        return x
    if isinstance(x, np.ma.MaskedArray) and np.ma.is_masked(x):
        n = int(np.ma.count_masked(x))
        raise TypeError(f"{name}: a masked array with {n} masked value{'' if n == 1 else 's'}: fp4kit "
                        f"quantizes every value, the masked ones too; pass {name}.filled(value) or {name}.data")
    return np.asarray(x)


def _np_amax(amax):
    if amax is None:
        return None
    if not isinstance(amax, np.ndarray):
        raise TypeError(f"amax: expected a float32 NumPy array of shape (1,) or (M,), got {type(amax).__name__}")
    return plain_ndarray(amax, "amax")


def _operand(x2: np.ndarray, opts, A, stream: int, layout: str) -> Operand:
    f = opts.fmt
    r, c = x2.shape
    if f.is_nvfp4:
        codes, sc = nvfp4.quantize_operand(x2, A, tile_2d=opts.tile_2d, rounding=opts.rounding,
                                           seed=opts.seed, stream=stream)
        amax = np.asarray(A, dtype=np.float32).copy()
    else:
        codes, sc = mx.quantize_operand(x2, f, scale_rule=opts.scale_rule, rounding=opts.rounding,
                                        seed=opts.seed, stream=stream)
        amax = None
    if layout == "swizzled":
        sc = swizzle(sc)
    return Operand(data=codes, scales=sc, scale_layout=layout, amax=amax, rows=r, cols=c, format=f.name)


def quantize(x: np.ndarray, fmt: FormatLike, axis: Axis = "rowwise", scale_layout: ScaleLayout = "compact",
             scale_rule: ScaleRule = "rceil", amax: np.ndarray | None = None, tile_2d: bool = False,
             row_scaled: bool = False, rht: bool = False, rht_sign_mask: int = 0xD7E8,
             rounding: Rounding = "nearest", seed: int = 0) -> QuantizedTensor:
    """Reference quantize (SPEC sections 2-6). See ``fp4kit.quantize`` for the arguments."""
    x, dn = _np_input(x)
    amax = _np_amax(amax)
    opts = quantize_options(x.shape, dn, fmt, axis=axis, scale_layout=scale_layout, scale_rule=scale_rule,
                            tile_2d=tile_2d, row_scaled=row_scaled, rht=rht, rht_sign_mask=rht_sign_mask,
                            rounding=rounding, seed=seed,
                            amax_shape=None if amax is None else amax.shape,
                            amax_dtype=None if amax is None else dtype_name(amax.dtype) or str(amax.dtype))
    if amax is not None:
        amax = check_amax_values(amax)
    M = 1
    for s in x.shape[:-1]:
        M *= int(s)
    K = int(x.shape[-1]) if x.ndim else 1
    xf = to_f32(x).reshape(M, K)
    f = opts.fmt
    row = col = None
    if opts.want_rowwise:
        A = None
        if f.is_nvfp4:
            A = amax if amax is not None else nvfp4.global_amax(xf, per_row=opts.row_scaled)
        row = _operand(xf, opts, A, 0, opts.scale_layout)
    if opts.want_columnwise:
        xt = np.ascontiguousarray(xf.T)
        if opts.rht:
            xt = rht16(xt, opts.rht_sign_mask)
        A = None
        if f.is_nvfp4:
            if opts.rht or opts.row_scaled or amax is None:
                A = nvfp4.global_amax(xt, per_row=opts.row_scaled)
            else:
                A = amax
        col = _operand(xt, opts, A, 1, opts.scale_layout)
    return QuantizedTensor(format=f.name, shape=tuple(int(s) for s in x.shape), rowwise=row, columnwise=col,
                           options=opts, input_dtype=dn)


def check_operand_dtypes(op: Operand) -> None:
    """TypeError unless op's arrays have the dtypes quantize gives (uint8 codes and scales, float32
    amax): a hand-built operand of other dtypes would be decoded as if it were codes
    (dequantize_operand, qmatmul's operand_f64)."""
    for field, want in (("data", "uint8"), ("scales", "uint8"), ("amax", "float32")):
        a = getattr(op, field)
        if a is None:
            continue
        got = (dtype_name(a.dtype) or a.dtype.name) if isinstance(a, np.ndarray) else None   # '>f4' is float32
        if got != want:
            raise TypeError(f"{field}: expected a {want} NumPy array (as quantize gives), got "
                            f"{type(a).__name__ if got is None else 'dtype ' + got}")


def check_operand_amax(op: Operand) -> None:
    """ValueError if a (hand-built) NVFP4 operand's amax has a negative entry: quantize never
    gives one (an amax is max |x|, and a caller's negative amax is refused), and decoding with it
    would flip the signs of the operand's values. NaN passes (an input with NaN gives one)."""
    if op.amax is None:
        return
    neg = np.flatnonzero(np.asarray(op.amax).reshape(-1) < 0)
    if neg.size:
        i = int(neg[0])
        raise ValueError(f"amax: expected non-negative values (an amax is max |x|), got "
                         f"{np.asarray(op.amax).reshape(-1)[i]} at [{i}]")


def dequantize_operand(op: Operand, dtype: str = "float32") -> np.ndarray:
    """One operand -> (rows, cols) array of `dtype`."""
    f = FORMATS[op.format]
    check_operand_dtypes(op)
    check_operand_amax(op)
    sc = unswizzle(op.scales, op.scale_shape) if op.scale_layout == "swizzled" else op.scales
    if f.is_nvfp4:
        y = nvfp4.dequantize_operand(op.data, sc, op.amax, op.cols)
    else:
        y = mx.dequantize_operand(op.data, sc, f, op.cols)
    return from_f32(y, dtype)


def dequantize(q: QuantizedTensor, dtype: OutDType = "float32", operand: OperandName = "rowwise") -> np.ndarray:
    """Reference dequantize: rowwise -> the input's shape; columnwise -> (K, M)."""
    if not isinstance(q, QuantizedTensor):
        raise TypeError(f"q: expected a QuantizedTensor, got {type(q).__name__}")
    dtype = check_dtype("dtype", dtype)
    check_choice("operand", operand, ("rowwise", "columnwise"))
    op = q.operand(operand)
    y = dequantize_operand(op, dtype)
    return y.reshape(q.shape) if operand == "rowwise" else y


def _scale_matrix(a, name):
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name}: expected a uint8 NumPy array, got {type(a).__name__}")
    if a.dtype != np.uint8:
        raise TypeError(f"{name}: expected dtype uint8, got {a.dtype}")
    if a.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D (rows, cols) array, got shape {a.shape}")
    return a


def swizzle_scales(compact: np.ndarray) -> np.ndarray:
    """(R, C) compact scales -> (roundup(R,128), roundup(C,4)) swizzled, zero padded."""
    return swizzle(_scale_matrix(compact, "compact"))


def check_unswizzle_shape(s_shape, shape):
    if not (isinstance(shape, (tuple, list)) and len(shape) == 2):
        raise TypeError(f"shape: expected a (rows, cols) tuple, got {shape!r}")
    if any(isinstance(v, (bool, np.bool_)) or not hasattr(type(v), "__index__") for v in shape):
        raise TypeError(f"shape: expected a (rows, cols) tuple of integers, got {tuple(shape)!r}")
    r, c = (operator.index(v) for v in shape)
    if r < 0 or c < 0:
        raise ValueError(f"shape: expected non-negative (rows, cols), got {tuple(shape)}")
    want = (-(-r // 128) * 128, -(-c // 4) * 4)
    if tuple(s_shape) != want:
        raise ValueError(f"swizzled: a compact shape {(r, c)} swizzles to {want}, got an array of shape {tuple(s_shape)}")
    return r, c


def unswizzle_scales(swizzled: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Swizzled scales -> the (R, C) compact matrix (padding ignored)."""
    s = _scale_matrix(swizzled, "swizzled")
    r, c = check_unswizzle_shape(s.shape, shape)
    return unswizzle(s, (r, c))

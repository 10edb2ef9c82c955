"""Error figures of a quantized tensor against its input: ``fp4kit.error_report(x, q)``.

Each operand is dequantized through ``fp4kit.dequantize`` (so a device result is measured as the
kernels produced it) and compared, in float64, with what it represents:

* rowwise:     x, flattened to (M, K);
* columnwise:  x^T, (K, M); with ``rht=True`` the columnwise operand holds the Hadamard-transformed
  x^T, so it is compared with ``fp4kit.reference.rht.rht16(x^T, mask)`` (the reference transform),
  which the report says in its ``reference`` column.

NaN and +-inf inputs are left out of every error figure and counted separately.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

import numpy as np

from .comparator import to_numpy
from .formats import FORMATS
from .tensor import Operand, QuantizedTensor

if TYPE_CHECKING:
    from ._types import OperandName

__all__ = ["error_report", "ErrorReport", "OperandError", "operand_reference", "operand_codes",
           "compact_scales", "scale_values"]


@dataclass(frozen=True)
class OperandError:
    """Error figures of one operand (all over the finite input elements).

    ``scale_histogram`` is a tuple of ``(scale code, count)`` pairs over the compact scale matrix
    (padding of swizzled scales excluded), ascending by code.
    """

    operand: str            # "rowwise" | "columnwise"
    reference: str          # what the operand was compared with: "x", "x^T", "rht16(x^T, 0xD7E8)"
    shape: tuple            # (rows, cols) of the operand
    finite: int             # finite input elements (the population of every figure below)
    nan: int                # NaN input elements (excluded)
    inf: int                # +-inf input elements (excluded)
    snr_db: float           # 10 log10(sum ref^2 / sum err^2); inf when exact, nan with no finite element
    mse: float
    max_abs_error: float
    max_rel_error: float    # over non-zero finite inputs (nan when there are none)
    saturated: float        # fraction of elements whose code magnitude is the type's max code (nan
                            # with no finite element)
    zeroed: float           # fraction of non-zero inputs that became a zero code (nan with none)
    scale_histogram: tuple  # ((code, count), ...)
    scale_type: str         # "e8m0" | "e4m3"
    lost: int = 0           # finite inputs whose dequantized value is not finite (then the error
                            # figures are infinite: SNR -inf, MSE and max errors inf)

    def scale_label(self, code: int) -> str:
        """Human value of one scale code: 2^(E-127) for E8M0, the E4M3 value for NVFP4."""
        if self.scale_type == "e8m0":
            return "NaN" if code == 255 else f"2^{code - 127}"
        from .reference.numerics import decode
        return f"{float(decode(np.uint8(code), 'e4m3')):g}"


@dataclass(frozen=True)
class ErrorReport:
    """Per-operand error figures of one quantized tensor; prints as a table.

    Index it by operand name (``rep["rowwise"]``); iterating over it (or ``rep.operands``) gives
    the OperandErrors, rowwise first; ``len(rep)`` counts them and ``"rowwise" in rep`` asks for an
    operand by name.
    """

    format: str
    shape: tuple
    input_dtype: str
    recipe: str
    operands: tuple         # OperandError, rowwise first

    def __getitem__(self, name: str) -> OperandError:
        for o in self.operands:
            if o.operand == name:
                return o
        raise KeyError(f"operand: this report has {[o.operand for o in self.operands]}, got {name!r}")

    def __iter__(self) -> Iterator[OperandError]:
        return iter(self.operands)

    def __len__(self) -> int:
        return len(self.operands)

    def __contains__(self, name: object) -> bool:
        return any(o.operand == name for o in self.operands)

    _COLS = ("operand", "vs", "SNR dB", "MSE", "max abs err", "max rel err", "saturated", "zeroed",
             "non-finite", "scale codes")

    def _cells(self, o: OperandError) -> tuple:
        hist = _hist_text(o)
        return (o.operand, o.reference, _fmt(o.snr_db, ".2f"), _fmt(o.mse, ".3e"), _fmt(o.max_abs_error, ".3e"),
                _fmt(o.max_rel_error, ".3e"), f"{100 * o.saturated:.3f}%", f"{100 * o.zeroed:.3f}%",
                f"{o.nan + o.inf}" + (f" in, {o.lost} out" if o.lost else ""), hist)

    def __str__(self) -> str:
        head = f"ErrorReport: {self.format} {tuple(self.shape)} from {self.input_dtype}" + \
            (f", {self.recipe}" if self.recipe else "")
        rows = [self._COLS] + [self._cells(o) for o in self.operands]
        w = [max(len(str(r[i])) for r in rows) for i in range(len(self._COLS))]
        lines = [head]
        for k, r in enumerate(rows):
            lines.append("  " + "  ".join(str(c).ljust(w[i]) if i < 2 or i == len(w) - 1 else str(c).rjust(w[i])
                                          for i, c in enumerate(r)).rstrip())
            if k == 0:
                lines.append("  " + "  ".join("-" * x for x in w))
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        from ._display import _CSS, _table
        head = f"{self.format} {tuple(self.shape)} from {self.input_dtype}" + (f", {self.recipe}" if self.recipe else "")
        return (f"<div>{_CSS}<b>ErrorReport</b> {html.escape(head)}"
                f"{_table(self._COLS, [self._cells(o) for o in self.operands])}</div>")


def _fmt(v: float, spec: str) -> str:
    if v is None:
        return "-"
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    return format(v, spec)


def _hist_text(o: OperandError, top: int = 3) -> str:
    total = sum(c for _, c in o.scale_histogram)
    if not total:
        return "-"
    best = sorted(o.scale_histogram, key=lambda t: -t[1])[:top]
    more = f" +{len(o.scale_histogram) - top} more" if len(o.scale_histogram) > top else ""
    return ", ".join(f"{o.scale_label(c)}:{100 * n / total:.0f}%" for c, n in best) + more


def _recipe(q: QuantizedTensor) -> str:
    from ._display import _extras
    o = q.options
    parts = [f"axis={o.axis}"]
    parts += _extras(o, FORMATS[q.format])
    if o.scale_layout != "compact":
        parts.append(f"{o.scale_layout} scales")
    return ", ".join(parts)


def operand_reference(x, q: QuantizedTensor, operand: str) -> tuple[np.ndarray, str]:
    """The float32 (rows, cols) array that `operand` of `q` represents, and its description.

    rowwise: x as (M, K); columnwise: x^T (K, M), or the reference RHT of x^T when ``q`` used rht.

    Example:
        >>> import numpy as np, fp4kit
        >>> from fp4kit.analysis import operand_reference
        >>> x = np.arange(64, dtype=np.float32).reshape(2, 32)
        >>> ref, what = operand_reference(x, fp4kit.quantize(x, "mxfp8_e4m3", axis="columnwise"), "columnwise")
        >>> ref.shape, what
        ((32, 2), 'x^T')
    """
    xn = np.asarray(to_numpy(x)).astype(np.float32).reshape(q.M, q.K)
    if operand == "rowwise":
        return xn, "x"
    xt = np.ascontiguousarray(xn.T)
    if q.options.rht:
        from .reference.rht import rht16
        return rht16(xt, q.options.rht_sign_mask), f"rht16(x^T, 0x{q.options.rht_sign_mask:04X})"
    return xt, "x^T"


def operand_codes(op) -> np.ndarray:
    """uint8 (rows, cols) element codes of an Operand (FP4 unpacked: element 2k is the low nibble)."""
    d = np.asarray(to_numpy(op.data))
    if FORMATS[op.format].packed:
        out = np.empty((d.shape[0], 2 * d.shape[1]), np.uint8)
        out[:, 0::2] = d & 0xF
        out[:, 1::2] = d >> 4
        return out[:, :op.cols]
    return d


def compact_scales(op) -> np.ndarray:
    """uint8 compact (rows, ceil(cols / block)) scale codes of an Operand (unswizzled on the host)."""
    s = np.asarray(to_numpy(op.scales))
    if op.scale_layout == "swizzled":
        from .reference.layouts import unswizzle
        s = unswizzle(s, op.scale_shape)
    return s


def scale_values(op) -> np.ndarray:
    """float64 (rows, cols): the factor that turns each element's decoded code back into its value.

    MX: 2^(E-127); NVFP4: SPEC section 4's fp32_RN(fp32_RN(decode_e4m3(sf) * amax) * fp32_RN(1/2688))
    (per row when row-scaled), the factor dequantize applies, so fp32_RN(decode(code) * factor) is
    the dequantized value.
    """
    f = FORMATS[op.format]
    from .reference.numerics import decode, e8m0_decode
    s = compact_scales(op)
    if f.is_mx:
        v = e8m0_decode(s).astype(np.float64)
    else:
        a = np.asarray(to_numpy(op.amax), dtype=np.float32).reshape(-1, 1)
        with np.errstate(over="ignore", invalid="ignore"):
            v = ((decode(s, "e4m3").astype(np.float32) * a) * np.float32(1.0 / 2688.0)).astype(np.float64)
    return np.repeat(v, f.block, axis=1)[:, :op.cols]


def _operand_error(x, q: QuantizedTensor, name: OperandName) -> OperandError:
    from . import api
    op = q.operand(name)
    f = FORMATS[q.format]
    ref, what = operand_reference(x, q, name)
    y = np.asarray(to_numpy(api.dequantize(q, "float32", operand=name)), dtype=np.float64).reshape(op.rows, op.cols)
    r = ref.astype(np.float64)
    finite = np.isfinite(r)
    n_nan = int(np.isnan(r).sum())
    n_inf = int(np.isinf(r).sum())
    rf, yf = r[finite], y[finite]
    err = yf - rf
    nf = int(rf.size)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        sig, noise = float(np.sum(rf * rf)), float(np.sum(err * err))
        if nf == 0:                 # no finite element to measure (an empty or all-NaN/Inf operand)
            snr = float("nan")
        elif noise == 0:
            snr = float("inf")
        elif sig == 0:
            snr = float("-inf")
        else:
            snr = 10.0 * np.log10(sig / noise)
        mse = noise / nf if nf else float("nan")
        max_abs = float(np.max(np.abs(err))) if nf else float("nan")
        nz = rf != 0
        max_rel = float(np.max(np.abs(err[nz]) / np.abs(rf[nz]))) if nz.any() else float("nan")
    lost = int(np.count_nonzero(~np.isfinite(yf)))
    if lost:                        # e.g. NVFP4 of an input holding inf: a global amax of inf
        inf = float("inf")
        snr, mse, max_abs = -inf, inf, inf
        max_rel = inf if nz.any() else max_rel
    elem = f.elem
    mag = operand_codes(op) & np.uint8((1 << (elem.bits - 1)) - 1)
    magf = mag[finite]
    saturated = float(np.mean(magf == elem.max_code)) if nf else float("nan")
    nzi = rf != 0
    zeroed = float(np.mean(magf[nzi] == 0)) if nzi.any() else float("nan")
    codes, counts = np.unique(compact_scales(op), return_counts=True)
    hist = tuple((int(c), int(n)) for c, n in zip(codes, counts))
    return OperandError(operand=name, reference=what, shape=(op.rows, op.cols), finite=nf, nan=n_nan, inf=n_inf,
                        snr_db=float(snr), mse=float(mse), max_abs_error=max_abs, max_rel_error=max_rel,
                        saturated=saturated, zeroed=zeroed, scale_histogram=hist, scale_type=f.scale, lost=lost)


def error_report(x, q) -> ErrorReport:
    """Error figures of every operand of `q` against the input `x` it was quantized from.

    Args:
        x: the input of ``fp4kit.quantize`` (NumPy or device array, any shape with ndim >= 1;
            copied to the host for the comparison).
        q: the QuantizedTensor that ``fp4kit.quantize(x, ...)`` returned (any format, variant,
            scale layout; NumPy or device arrays).

    Returns:
        ErrorReport: per operand (rowwise compared with x as (M, K); columnwise with x^T (K, M), or
        with the reference RHT of x^T when ``rht=True``): SNR in dB, MSE, max abs error, max
        relative error (non-zero finite inputs), fraction of saturated codes (|code| == max code),
        fraction of zeroed non-zero inputs, scale histogram (count per scale code) and the number of
        NaN / inf inputs, which are excluded from every figure. Prints as a table; ``_repr_html_``
        renders it in notebooks; ``rep["rowwise"].snr_db`` reads one figure.

    Example:
        >>> import numpy as np, fp4kit
        >>> x = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
        >>> rep = fp4kit.error_report(x, fp4kit.quantize(x, "mxfp8_e4m3", axis="both"))
        >>> [o.operand for o in rep.operands], round(rep["rowwise"].snr_db)
        (['rowwise', 'columnwise'], 31)
    """
    if not isinstance(q, QuantizedTensor):
        raise TypeError(f"q: expected a QuantizedTensor (the result of fp4kit.quantize), got {type(q).__name__}")
    if not hasattr(x, "shape") or not hasattr(x, "dtype"):
        hint = (" (error_report takes the input first: error_report(x, q))"
                if isinstance(x, (QuantizedTensor, Operand)) else "")
        raise TypeError(f"x: expected the array that q was quantized from (NumPy or device array), "
                        f"got {type(x).__name__}{hint}")
    shape = tuple(int(s) for s in x.shape)
    if shape != tuple(q.shape):
        raise ValueError(f"x: expected the shape {tuple(q.shape)} that q was quantized from, got {shape}")
    ops = tuple(_operand_error(x, q, n) for n in ("rowwise", "columnwise") if getattr(q, n) is not None)
    return ErrorReport(format=q.format, shape=tuple(q.shape), input_dtype=q.input_dtype, recipe=_recipe(q),
                       operands=ops)

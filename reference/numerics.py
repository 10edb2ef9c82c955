"""Element codecs and scale rules: the arithmetic core of the contract (SPEC.md sections 2-4).

Contract
--------
* All arithmetic is IEEE binary32 with round-to-nearest-even and subnormals kept; NumPy float32
  operations are exactly that (NumPy never flushes subnormals). Power-of-two scalings are built
  from bit patterns, so no step depends on libm.
* ``encode(y, elem)`` (section 2): ``a = |y|``; NaN -> the type's NaN code (E4M3/E5M2 0x7F) or its
  positive max code (E2M3/E3M2 0x1F, E2M1 0x7); ``a = min(a, max)`` saturates (inf included);
  ``e = max(floor(log2 a), emin)`` read off the fp32 exponent field (fp32 subnormals land on
  ``emin``); ``n = rint_even(a * 2^(mbits - e))`` -- the scaling is exact, so this is the one
  rounding; ``code = ((e - emin) << mbits) + n`` (n = 2^(mbits+1) carries into the next binade).
  The sign bit is ``signbit(y)``, so -0.0 and negatives that round to zero give negative zero.
* ``decode`` uses ml_dtypes only to *decode* codes (exact); ml_dtypes casts are never used to
  encode: they turn E4M3 overflow into NaN, FP4/FP6 NaN into -0, and round E8M0 to nearest.
* E8M0 ``rceil``: ``v = fp32(amax * fp32(1/max))``; NaN -> 255, +inf -> 254, 0 -> 0, else the
  exponent field plus one when the mantissa is non-zero, except at exponent 254 and for
  ``v <= 2^-127``. ``floor`` (OCP): ``clamp(exponent_field(amax) - emax, 0, 254)``, +inf -> 254.
* Block amax ignores NaN (an all-NaN block has amax 0); missing elements count as 0.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ..formats import ELEMENTS, ElementType

__all__ = [
    "f32", "f32_bits", "bits_f32", "encode", "decode", "encode_sr", "grid_neighbours",
    "e8m0_rceil", "e8m0_floor", "e8m0_scale", "e8m0_decode", "e8m0_codes",
    "nanmax_abs", "to_f32", "from_f32", "FLT_MAX", "RECIP",
]

FLT_MAX = np.float32(np.finfo(np.float32).max)

_ML_DECODE = {
    "e4m3": ml_dtypes.float8_e4m3fn,
    "e5m2": ml_dtypes.float8_e5m2,
    "e2m3": ml_dtypes.float6_e2m3fn,
    "e3m2": ml_dtypes.float6_e3m2fn,
    "e2m1": ml_dtypes.float4_e2m1fn,
}


def f32(v) -> np.float32:
    return np.float32(v)


def f32_bits(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float32).view(np.uint32)


def bits_f32(b) -> np.ndarray:
    return np.asarray(b, dtype=np.uint32).view(np.float32)


# fp32_RN(1 / element_max) for every element type (e.g. E4M3 -> 0x3B124925).
RECIP = {name: np.float32(1) / np.float32(e.max) for name, e in ELEMENTS.items()}


def _elem(elem) -> ElementType:
    return elem if isinstance(elem, ElementType) else ELEMENTS[elem]


def _pow2(e) -> np.ndarray:
    """Exact fp32 2^e for integer arrays with -126 <= e <= 127 (normal range)."""
    return bits_f32(((np.asarray(e, dtype=np.int64) + 127) << 23).astype(np.uint32))


def _exponent_field(a: np.ndarray) -> np.ndarray:
    return ((f32_bits(a) >> 23) & 0xFF).astype(np.int32)


_CHUNK = 1 << 18   # elements per pass: keeps each step's temporaries in cache


def encode(y, elem) -> np.ndarray:
    """SPEC section 2: fp32 values -> uint8 codes (satfinite, RNE, sign of zero kept)."""
    t = _elem(elem)
    y = np.ascontiguousarray(y, dtype=np.float32)
    flat = y.reshape(-1)
    out = np.empty(flat.shape, dtype=np.uint8)
    for s in range(0, flat.size, _CHUNK):
        out[s:s + _CHUNK] = _encode_chunk(flat[s:s + _CHUNK], t)
    return out.reshape(y.shape)


def _encode_chunk(y: np.ndarray, t: ElementType) -> np.ndarray:
    b = y.view(np.uint32)
    mag = b & np.uint32(0x7FFFFFFF)
    nan = mag > np.uint32(0x7F800000)
    mag[nan] = 0
    a = np.minimum(mag.view(np.float32), np.float32(t.max))
    e = (a.view(np.uint32) >> np.uint32(23)).view(np.int32)
    e -= 127
    np.maximum(e, t.emin, out=e)
    scale = ((t.mbits + 127) - e) << 23                       # 2^(mbits - e), exact
    n = np.rint(a * scale.view(np.float32)).astype(np.int32)
    e -= t.emin
    e <<= t.mbits
    e += n
    e |= ((b >> np.uint32(31)).view(np.int32) << (t.bits - 1))
    e[nan] = t.nan_code
    return e.astype(np.uint8)


def grid_neighbours(a: np.ndarray, elem):
    """For |y| values 0 <= a < max (finite): the grid points lo <= a < hi of the element type.

    Returns (lo, hi, lo_code) with lo/hi fp32 and lo_code the unsigned code of lo.
    """
    t = _elem(elem)
    a = np.asarray(a, dtype=np.float32)
    e = np.maximum(_exponent_field(a) - 127, t.emin)
    ulp = _pow2(e - t.mbits)
    n = np.floor(a / ulp)                       # exact: ulp is a power of two
    lo = (n * ulp).astype(np.float32)
    hi = (lo + ulp).astype(np.float32)
    lo_code = ((e - t.emin) << t.mbits) + n.astype(np.int32)
    return lo, hi, lo_code


def encode_sr(y, elem, r) -> np.ndarray:
    """SPEC section 4 stochastic rounding: like ``encode`` but E2M1-style grid rounding is
    replaced by "round up iff float(r >> 8) < fp32((a - lo) / (hi - lo) * 2^24)" with r the uint32
    Philox draw of each element. NaN and |y| >= max follow section 2."""
    t = _elem(elem)
    y = np.asarray(y, dtype=np.float32)
    r = np.asarray(r, dtype=np.uint32)
    a = np.abs(y)
    nan = np.isnan(a)
    sat = ~nan & (a >= np.float32(t.max))
    a_in = np.where(nan | sat, np.float32(0), a)
    lo, hi, lo_code = grid_neighbours(a_in, t)
    frac = ((a_in - lo) / (hi - lo)) * np.float32(2.0 ** 24)
    up = (r >> 8).astype(np.float32) < frac
    code = lo_code + up.astype(np.int32)
    code = np.where(sat, t.max_code, code)
    sign = np.signbit(y) & ~nan
    code = np.where(sign, code | (1 << (t.bits - 1)), code)
    code = np.where(nan, t.nan_code, code)
    return code.astype(np.uint8)


def decode(codes, elem) -> np.ndarray:
    """uint8 codes (FP4/FP6 unpacked, one code per byte) -> exact float32 values."""
    t = _elem(elem)
    c = np.asarray(codes, dtype=np.uint8) & np.uint8((1 << t.bits) - 1)
    return c.view(_ML_DECODE[t.name]).astype(np.float32)


def e8m0_rceil(v) -> np.ndarray:
    """The E8M0 code of ceil(log2 v) from fp32 bits (SPEC section 3, rule rceil applied to v)."""
    v = np.asarray(v, dtype=np.float32)
    b = f32_bits(v)
    e = ((b >> 23) & 0xFF).astype(np.int32)
    m = (b & 0x7FFFFF).astype(np.int32)
    bump = (m > 0) & (e != 254) & ~((e == 0) & (m <= 0x400000))
    out = e + bump
    out = np.where(np.isnan(v), 255, out)
    out = np.where(np.isposinf(v), 254, out)
    return out.astype(np.uint8)


def e8m0_floor(amax, elem) -> np.ndarray:
    """OCP MX v1.0 scale: clamp(exponent_field(amax) - emax_elem, 0, 254); +inf -> 254."""
    t = _elem(elem)
    amax = np.asarray(amax, dtype=np.float32)
    e = np.clip(_exponent_field(amax) - t.emax, 0, 254)
    e = np.where(np.isposinf(amax), 254, e)
    return e.astype(np.uint8)


def e8m0_codes(amax, elem, rule: str) -> np.ndarray:
    """Block amax (fp32, NaN already ignored) -> E8M0 scale codes under ``rule``."""
    t = _elem(elem)
    amax = np.asarray(amax, dtype=np.float32)
    if rule == "rceil":
        return e8m0_rceil(amax * RECIP[t.name])
    if rule == "floor":
        return e8m0_floor(amax, t)
    raise ValueError(f"scale_rule: expected 'rceil' or 'floor', got {rule!r}")


def e8m0_scale(E) -> np.ndarray:
    """s_inv = 2^(127 - E) built from bits: E in 1..253 normal, E = 254 -> 2^-127 (subnormal),
    E = 0 -> 2^127. (E = 255 never comes out of a finite amax; it maps to NaN.)"""
    E = np.asarray(E, dtype=np.int32)
    k = 127 - E                                    # -127 .. 127
    normal = bits_f32(((np.clip(k, -126, 127) + 127) << 23).astype(np.uint32))
    out = np.where(k == -127, bits_f32(np.uint32(0x00400000)), normal)
    return np.where(E == 255, np.float32(np.nan), out).astype(np.float32)


def e8m0_decode(E) -> np.ndarray:
    """2^(E - 127) as fp32; E = 0 -> 2^-127 (bits 0x00400000); E = 255 -> NaN."""
    E = np.asarray(E, dtype=np.int32)
    normal = bits_f32((np.clip(E, 1, 254).astype(np.uint32) << 23))
    out = np.where(E == 0, bits_f32(np.uint32(0x00400000)), normal)
    return np.where(E == 255, np.float32(np.nan), out).astype(np.float32)


def nanmax_abs(x: np.ndarray, axis) -> np.ndarray:
    """max |x| along ``axis`` ignoring NaN, quiet or signalling (all-NaN or empty -> 0); x fp32.

    NaNs are zeroed before the maximum: ``np.fmax`` follows IEEE 754-2008 maxNum, which returns NaN
    for a signalling NaN operand, and its reductions do so only where the scalar loop meets one (the
    last element of a column or of a whole tensor, say), so ``np.fmax.reduce`` ignored some
    signalling NaNs and not others."""
    a = np.abs(x)
    np.copyto(a, np.float32(0), where=np.isnan(a))
    return np.maximum.reduce(a, axis=axis, initial=np.float32(0)).astype(np.float32)


_DTYPES = {"float32": np.dtype(np.float32), "bfloat16": np.dtype(ml_dtypes.bfloat16), "float16": np.dtype(np.float16)}


def to_f32(x) -> np.ndarray:
    """Exact conversion of float32 / bfloat16 / float16 input to fp32."""
    return np.asarray(x).astype(np.float32)


# Canonical quiet NaN of each output type. Dequantized NaNs (FP8 NaN codes, 0 * inf, NaN scales)
# are always this pattern, so outputs do not depend on the platform's NaN propagation rules
# (x86 produces the negative "default NaN" 0xFFC00000 for 0 * inf, NVIDIA GPUs 0x7FFFFFFF).
CANONICAL_NAN = {"float32": (np.uint32, 0x7FC00000), "bfloat16": (np.uint16, 0x7FC0), "float16": (np.uint16, 0x7E00)}


def from_f32(y: np.ndarray, dtype: str) -> np.ndarray:
    """fp32 -> float32 / bfloat16 / float16, rounded to nearest even; every NaN -> CANONICAL_NAN."""
    y = np.asarray(y, dtype=np.float32)
    with np.errstate(over="ignore"):
        out = y.astype(_DTYPES[dtype])
    nan = np.isnan(y)
    if nan.any():
        ut, bits = CANONICAL_NAN[dtype]
        out = np.ascontiguousarray(out)
        out.view(ut)[nan] = bits
    return out

"""Named golden cases: tiny inputs whose exact output bytes were derived by hand from SPEC.md.

Contract
--------
Every case is a frozen ``GoldenCase(name, fmt, op, inputs, options, expected, idea)``:

* ``op == "quantize"``: ``inputs`` holds ``x`` (and ``amax`` when supplied); ``options`` are the
  keyword arguments of ``quantize``; ``expected`` maps ``"rowwise.data"``, ``"rowwise.scales"``,
  ``"rowwise.amax"``, ``"columnwise.*"`` to arrays.
* ``op == "dequantize"``: ``inputs`` holds the operand's ``data``, ``scales`` (compact) and, for
  NVFP4, ``amax``; ``options`` hold ``dtype`` and the operand's logical ``shape``; ``expected``
  holds ``"y"``.

Expected arrays are given as raw bits (uint8 codes, fp32 / bf16 / fp16 bit patterns), and were
*not* produced by running the reference: the derivation of each is the comment above the case,
written from SPEC.md with the constants below. Outputs are compared through unsigned-integer views
with exact equality; a mismatch names the key, how many items differ and the first few (hex).

Constants used in the derivations (exact fp32 values, written as integer * 2^k):
    fp32(1/6)    = 0x3E2AAAAB = 11184811 * 2^-26      (6 * 11184811 = 2^26 + 2)
    fp32(1/448)  = 0x3B124925 =  9586981 * 2^-32      (448 * 9586981 = 2^32 + 192)
    fp32(1/57344)= 0x37924925 =  9586981 * 2^-39      (57344 = 448 * 2^7)
    fp32(1/7.5)  = 0x3E088889 =  8947849 * 2^-26;  fp32(1/28) = 0x3D124925 = 9586981 * 2^-28
    fp32(1/2688) = 0x39C30C31 = 12782641 * 2^-35      (2688 * 12782641 = 2^35 + 640)
    NVFP4 with global amax A = 6: S_enc = 448, S_dec = fp32(1/448),
        mult = fp32(448 * fp32(1/6)) = RN(5010795328 * 2^-26) = 9786710 * 2^-17 (74.6666718),
        a block with amax 6 gives fp32(6 * mult) = 14680065 * 2^-15 = 448 + 2^-15 -> sf 0x7E (satfinite),
        448 * S_dec = RN(2^32 + 192) * 2^-32 = 1.0, so enc = 1 and y = x.
    E4M3 448 * fp32(1/448) = 1 + 192 * 2^-32 -> RN 1.0, so amax 448 * 2^k gives rceil E = 127 + k.

Running: ``run_all()`` checks the reference; a GPU backend passes its own callables::

    run_all(quantize=gpu_quantize, dequantize=gpu_dequantize, to_numpy=cupy.asnumpy)

``quantize(x, fmt, **options)`` receives NumPy inputs (``x``, and ``amax`` inside ``options``);
``dequantize(q, dtype=..., operand="rowwise")`` receives a ``QuantizedTensor`` of NumPy arrays;
every array they return is passed through ``to_numpy`` before the comparison.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np

__all__ = ["Arr", "GoldenCase", "CASES", "CASES_BY_NAME", "run_all", "check_case", "byte_diff", "as_bits"]

_NP: dict[str, np.dtype] = {"uint8": np.dtype(np.uint8), "float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
                           "bfloat16": np.dtype(ml_dtypes.bfloat16)}
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


# ---------------------------------------------------------------------------------------------
# comparison helpers (shared with vectors.py and the tests)

def as_bits(a: np.ndarray) -> np.ndarray:
    """The unsigned-integer view of an array (uint8 / uint16 / uint32 by item size)."""
    a = np.ascontiguousarray(np.asarray(a))
    return a.view(_UINT[a.dtype.itemsize])


def byte_diff(got, expected, what: str = "", limit: int = 6, context=None) -> str | None:
    """None when `got` equals `expected` bit for bit (same shape and dtype), else a report:
    how many items differ and the first `limit` of them with index, got and expected in hex.
    `context(index) -> str` may add a description (e.g. the input block) to each shown item."""
    got = np.asarray(got)
    expected = np.asarray(expected)
    head = f"{what}: " if what else ""
    if got.dtype != expected.dtype:
        return f"{head}dtype {got.dtype}, expected {expected.dtype}"
    if got.shape != expected.shape:
        return f"{head}shape {got.shape}, expected {expected.shape}"
    g, e = as_bits(got), as_bits(expected)
    bad = np.argwhere(g != e)
    if bad.size == 0:
        return None
    width = 2 * g.dtype.itemsize
    shown = []
    for idx in bad[:limit]:
        idx = tuple(int(i) for i in idx)
        item = f"[{','.join(map(str, idx))}] got 0x{int(g[idx]):0{width}X} expected 0x{int(e[idx]):0{width}X}"
        if context is not None:
            item += f" ({context(idx)})"
        shown.append(item)
    more = "" if len(bad) <= limit else f"; ... {len(bad) - limit} more"
    return f"{head}{len(bad)} of {g.size} items differ: " + "; ".join(shown) + more


# ---------------------------------------------------------------------------------------------
# case definitions

@dataclass(frozen=True)
class Arr:
    """A small array literal: dtype name, shape and row-major items.

    With ``bits=False`` the items are numbers (floats exactly representable in ``dtype``, checked;
    ints for uint8). With ``bits=True`` they are raw bit patterns of ``dtype``.
    """

    dtype: str
    shape: tuple
    items: tuple
    bits: bool = False

    def __post_init__(self):
        if math.prod(self.shape) != len(self.items):
            raise ValueError(f"Arr: shape {self.shape} needs {math.prod(self.shape)} items, got {len(self.items)}")

    def array(self) -> np.ndarray:
        dt = _NP[self.dtype]
        if self.bits or dt == np.uint8:
            raw = np.array(self.items, dtype=np.uint64).astype(_UINT[dt.itemsize])
            return raw.view(dt).reshape(self.shape)
        want = np.array(self.items, dtype=np.float64)
        a = want.astype(dt)
        back = a.astype(np.float64)
        same = (back == want) | (np.isnan(back) & np.isnan(want))
        if not (same.all() and (np.signbit(back) == np.signbit(want)).all()):
            raise ValueError(f"Arr: some items are not exactly representable in {self.dtype}")
        return a.reshape(self.shape)


def vals(dtype, shape, items) -> Arr:
    return Arr(dtype, tuple(shape), tuple(items))


def bits(dtype, shape, items) -> Arr:
    return Arr(dtype, tuple(shape), tuple(int(i) for i in items), bits=True)


def u8(shape, items) -> Arr:
    return Arr("uint8", tuple(shape), tuple(int(i) for i in items))


def f32bits(*items) -> Arr:
    return bits("float32", (len(items),), items)


def sparse(shape, entries: dict, fill=0) -> tuple:
    """Row-major items of `shape`: `fill` everywhere except {index tuple or flat int: value}."""
    n = math.prod(shape)
    out = [fill] * n
    for idx, v in entries.items():
        flat = idx if isinstance(idx, int) else int(np.ravel_multi_index(idx, shape))
        out[flat] = v
    return tuple(out)


def padded(items, n, fill=0) -> tuple:
    """`items` followed by `fill` up to length n."""
    items = tuple(items)
    return items + (fill,) * (n - len(items))


@dataclass(frozen=True)
class GoldenCase:
    name: str
    fmt: str
    op: str                 # "quantize" | "dequantize"
    inputs: tuple           # ((name, Arr), ...)
    options: tuple          # ((key, value), ...)
    expected: tuple         # ((key, Arr), ...)
    idea: str = ""          # what the case pins down, in one line

    @property
    def kwargs(self) -> dict:
        return dict(self.options)

    def input(self, name: str) -> np.ndarray:
        return dict(self.inputs)[name].array()

    @property
    def expected_arrays(self) -> dict:
        return {k: a.array() for k, a in self.expected}


def _q(name, fmt, x: Arr, expected: dict, idea: str, amax: Arr | None = None, **options) -> GoldenCase:
    inputs = (("x", x),) + ((("amax", amax),) if amax is not None else ())
    return GoldenCase(name, fmt, "quantize", inputs, tuple(options.items()), tuple(expected.items()), idea)


def _dq(name, fmt, data: Arr, scales: Arr, dtype: str, shape, y: Arr, idea: str, amax: Arr | None = None) -> GoldenCase:
    inputs = (("data", data), ("scales", scales)) + ((("amax", amax),) if amax is not None else ())
    return GoldenCase(name, fmt, "dequantize", inputs, (("dtype", dtype), ("shape", tuple(shape))),
                      (("y", y),), idea)


NAN, INF = math.nan, math.inf
F01 = float(np.float32(0.1))  # 0x3DCCCCCD = 13421773 * 2^-27, the fp32 nearest 0.1
CASES_LIST: list[GoldenCase] = []
add = CASES_LIST.append

# =============================================================================================
# all-zero blocks, one per format. x = zeros (2, 32), axis "both"; the columnwise operand is
# x^T (32, 2): every row of it is one (partial) block of 2 elements.
#
# MX (section 3): amax = 0. rceil: v = fp32(0 * R) = 0 -> E = 0. floor: exponent_field(0) = 0,
# 0 - emax clamps to E = 0. s_inv = 2^127; y = 0 * 2^127 = +0 -> code 0x00 (FP4: byte 0x00).
# Rowwise: codes (2, 32) [FP4 (2, 16)], scales (2, 1). Columnwise: codes (32, 2) [FP4 (32, 1)],
# scales (32, 1). Swizzled (e3m2 case): (2, 1) -> (128, 4) and (32, 1) -> (128, 4), all zero.
# NVFP4 (section 4): A = 0 -> S_enc = 1, S_dec = 1; b = 0 -> sf = encode_e4m3(0) = 0x00;
# enc = min(fp32(1 / (0 * 1)), FLT_MAX) = FLT_MAX; y = 0 * FLT_MAX = 0 -> code 0. Blocks of 16:
# rowwise scales (2, 2), columnwise scales (32, 1); amax 0 -> 0x00000000 on both operands.
_z = lambda dt: vals(dt, (2, 32), (0.0,) * 64)  # noqa: E731
add(_q("all_zero_block_mxfp8_e4m3", "mxfp8_e4m3", _z("float32"), {
    "rowwise.data": u8((2, 32), (0,) * 64), "rowwise.scales": u8((2, 1), (0, 0)),
    "columnwise.data": u8((32, 2), (0,) * 64), "columnwise.scales": u8((32, 1), (0,) * 32)},
    "amax 0 gives E = 0 (not 2^-127 problems, no NaN) and zero codes", axis="both"))
add(_q("all_zero_block_mxfp8_e5m2", "mxfp8_e5m2", _z("bfloat16"), {
    "rowwise.data": u8((2, 32), (0,) * 64), "rowwise.scales": u8((2, 1), (0, 0)),
    "columnwise.data": u8((32, 2), (0,) * 64), "columnwise.scales": u8((32, 1), (0,) * 32)},
    "amax 0, bfloat16 input", axis="both"))
add(_q("all_zero_block_mxfp6_e2m3", "mxfp6_e2m3", _z("float16"), {
    "rowwise.data": u8((2, 32), (0,) * 64), "rowwise.scales": u8((2, 1), (0, 0)),
    "columnwise.data": u8((32, 2), (0,) * 64), "columnwise.scales": u8((32, 1), (0,) * 32)},
    "amax 0, float16 input", axis="both"))
add(_q("all_zero_block_mxfp6_e3m2", "mxfp6_e3m2", _z("float32"), {
    "rowwise.data": u8((2, 32), (0,) * 64), "rowwise.scales": u8((128, 4), (0,) * 512),
    "columnwise.data": u8((32, 2), (0,) * 64), "columnwise.scales": u8((128, 4), (0,) * 512)},
    "amax 0 under the floor rule, swizzled scales are all padding zeros", axis="both",
    scale_rule="floor", scale_layout="swizzled"))
add(_q("all_zero_block_mxfp4_e2m1", "mxfp4_e2m1", _z("bfloat16"), {
    "rowwise.data": u8((2, 16), (0,) * 32), "rowwise.scales": u8((2, 1), (0, 0)),
    "columnwise.data": u8((32, 1), (0,) * 32), "columnwise.scales": u8((32, 1), (0,) * 32)},
    "amax 0, packed FP4", axis="both"))
add(_q("all_zero_block_nvfp4", "nvfp4", _z("float32"), {
    "rowwise.data": u8((2, 16), (0,) * 32), "rowwise.scales": u8((2, 2), (0,) * 4),
    "rowwise.amax": f32bits(0x00000000),
    "columnwise.data": u8((32, 1), (0,) * 32), "columnwise.scales": u8((32, 1), (0,) * 32),
    "columnwise.amax": f32bits(0x00000000)},
    "A = 0 gives S_enc = 1, sf = 0, enc = FLT_MAX and zero codes", axis="both"))

# =============================================================================================
# bf16_subnormal_mxfp8_e4m3: bfloat16 (1, 32), x[0] = 2^-133 (bits 0x0001), x[1] = -3 * 2^-133
# (0x8003), x[2] = 127 * 2^-133 (0x007F, the largest bf16 subnormal), x[3] = 2^-130 (0x0008), rest 0.
# amax = 127 * 2^-133; v = RN(127 * 2^-133 * 9586981 * 2^-32) = RN(18578.3 * 2^-149) = 18578 * 2^-149:
# exponent field 0, mantissa 18578 <= 0x400000 -> E = 0 (every v <= 2^-127 gives 0). s_inv = 2^127.
# y = x * 2^127: 2^-6 -> 0x08 (smallest normal); -1.5 * 2^-5 -> 0x80 | (2 << 3) | 4 = 0x94;
# 127 * 2^-6 = 1.984375 lies above the midpoint 1.9375 of 1.875 (0x3F) and 2.0 -> 0x40;
# 2^-3 -> biased exponent 4 -> 0x20. Scale 0x00.
add(_q("bf16_subnormal_mxfp8_e4m3", "mxfp8_e4m3", bits("bfloat16", (1, 32), padded((0x0001, 0x8003, 0x007F, 0x0008), 32)), {
    "rowwise.data": u8((1, 32), padded((0x08, 0x94, 0x40, 0x20), 32)), "rowwise.scales": u8((1, 1), (0x00,))},
    "bf16 subnormals convert exactly and a subnormal amax gives E = 0"))

# fp32_subnormal_mxfp4_e2m1: float32 (1, 32): 0x00400000 (2^-127), 0x00600000 (1.5 * 2^-127),
# 0x80200000 (-2^-128), 0x00000001 (2^-149), 0x00500000 (1.25 * 2^-127), 0x80700000 (-1.75 * 2^-127).
# amax = 1.75 * 2^-127; v = RN(7 * 2^-129 * 11184811 * 2^-26) = RN(1223338.7 * 2^-149) = 1223339 * 2^-149
# (mantissa 0x12AAAB <= 0x400000, exponent 0) -> E = 0 (floor: exponent field 0 -> 0 too). s_inv = 2^127.
# y: 1.0 -> 2; 1.5 -> 3; -0.5 -> 0x9; 2^-22 -> 0 (below 0.25); 1.25 = midpoint of 1.0 (code 2) and
# 1.5 (code 3) -> even code 2; -1.75 = midpoint of 1.5 (3) and 2.0 (4) -> 4 | 8 = 0xC.
# Bytes (element 2k low nibble): 0x32, 0x09, 0xC2, then 0x00. Scale 0x00.
add(_q("fp32_subnormal_mxfp4_e2m1", "mxfp4_e2m1",
       bits("float32", (1, 32), padded((0x00400000, 0x00600000, 0x80200000, 0x00000001, 0x00500000, 0x80700000), 32)), {
    "rowwise.data": u8((1, 16), padded((0x32, 0x09, 0xC2), 16)), "rowwise.scales": u8((1, 1), (0x00,))},
    "fp32 subnormal inputs are kept (no flush to zero) and scaled by 2^127 exactly"))

# e8m0_rceil_subnormal_bump_mxfp4_e2m1: float32 (1, 32): 9 * 2^-127 (0x01900000), -2^-126
# (0x80800000), 5 * 2^-127 (0x01200000), 3 * 2^-127 (0x00C00000), rest 0.
# amax = 9 * 2^-127; v = RN(9 * 11184811 * 2^-153) = RN(6291456.19 * 2^-149) = 0x600000 * 2^-149:
# exponent 0 and mantissa 0x600000 > 0x400000 -> E = 0 + 1 = 1 (ceil(log2(1.5 * 2^-127)) = -126).
# s_inv = 2^126. y: 4.5 -> 4 (code 6, below the midpoint 5); -1 -> 0xA; 2.5 = midpoint of 2 (4) and
# 3 (5) -> 4; 1.5 -> 3. Bytes 0xA6, 0x34, then 0. Scale 0x01.
add(_q("e8m0_rceil_subnormal_bump_mxfp4_e2m1", "mxfp4_e2m1",
       bits("float32", (1, 32), padded((0x01900000, 0x80800000, 0x01200000, 0x00C00000), 32)), {
    "rowwise.data": u8((1, 16), padded((0xA6, 0x34), 16)), "rowwise.scales": u8((1, 1), (0x01,))},
    "rceil bumps a subnormal v with mantissa > 0x400000 to E = 1"))

# =============================================================================================
# inf_in_block_mxfp8_e4m3 (E = 254, s_inv subnormal): float32 (1, 32): +inf, 1.0, -3.0, FLT_MAX,
# -inf, 1.5 * 2^127, rest 0. amax = inf -> v = inf -> E = 254; s_inv = 2^-127 (bits 0x00400000).
# y: inf -> satfinite 0x7E; 2^-127 -> +0 0x00; -3 * 2^-127 -> -0 0x80; FLT_MAX * 2^-127 = 2 - 2^-23
# (exact) -> above the midpoint 1.9375 -> 2.0 = 0x40; -inf -> 0xFE; 1.5 -> 0x3C. Scale 0xFE.
add(_q("inf_in_block_mxfp8_e4m3", "mxfp8_e4m3",
       vals("float32", (1, 32), padded((INF, 1.0, -3.0, float(np.finfo(np.float32).max), -INF, 1.5 * 2.0 ** 127), 32, 0.0)), {
    "rowwise.data": u8((1, 32), padded((0x7E, 0x00, 0x80, 0x40, 0xFE, 0x3C), 32)), "rowwise.scales": u8((1, 1), (0xFE,))},
    "an infinite amax gives E = 254, s_inv = 2^-127 (subnormal), inf saturates, small values give signed zeros"))

# e254_floor_inf_mxfp6_e3m2: bfloat16 (1, 32) bits: 0xFF80 (-inf), 0x7F40 (1.5 * 2^127), 0x7F60
# (1.75 * 2^127), 0x7F10 (1.125 * 2^127), 0x0080 (2^-126), 0xF180 (-2^100), rest 0. Rule floor:
# +inf amax gives E = 254; s_inv = 2^-127. y: -inf -> -max = 0x20 | 0x1F = 0x3F; 1.5 -> E3M2
# (bias 3) 0b011_10 = 0x0E; 1.75 -> 0x0F; 1.125 = midpoint of 1.0 (0x0C) and 1.25 (0x0D) -> 0x0C;
# 2^-253 -> 0x00; -2^-27 -> -0 = 0x20. Scale 0xFE.
add(_q("e254_floor_inf_mxfp6_e3m2", "mxfp6_e3m2",
       bits("bfloat16", (1, 32), padded((0xFF80, 0x7F40, 0x7F60, 0x7F10, 0x0080, 0xF180), 32)), {
    "rowwise.data": u8((1, 32), padded((0x3F, 0x0E, 0x0F, 0x0C, 0x00, 0x20), 32)), "rowwise.scales": u8((1, 1), (0xFE,))},
    "floor rule: an infinite amax gives E = 254 and huge finite values scale down exactly", scale_rule="floor"))

# inf_in_block_nvfp4: float32 (1, 16): inf, 1.0, -448, 1344, -inf, rest 0.
# A = inf -> S_enc = fp32(2688 / inf) = 0 -> S_enc = 1; S_dec = 1; mult = fp32(1/6).
# b = inf -> fp32(inf * mult) = inf -> min(inf, FLT_MAX) = FLT_MAX -> sf = 0x7E (satfinite);
# enc = fp32(1 / fp32(448 * 1)) = fp32(1/448) = 9586981 * 2^-32.
# y: inf -> 7; 1.0 -> 0.0022 -> 0; -448 * fp32(1/448) = -(2^32 + 192) * 2^-32 -> RN -1.0 -> 0xA;
# 1344 * 9586981 * 2^-32 = 3 * (1 + 192 * 2^-32) = 3 + 1.34e-7 -> RN 3 + 2^-22 -> E2M1 3 (code 5);
# -inf -> 0xF. Bytes (7,0) 0x07, (A,5) 0x5A, (F,0) 0x0F, then 0. amax = inf 0x7F800000.
add(_q("inf_in_block_nvfp4", "nvfp4", vals("float32", (1, 16), padded((INF, 1.0, -448.0, 1344.0, -INF), 16, 0.0)), {
    "rowwise.data": u8((1, 8), padded((0x07, 0x5A, 0x0F), 8)), "rowwise.scales": u8((1, 1), (0x7E,)),
    "rowwise.amax": f32bits(0x7F800000)},
    "A = inf gives S_enc = 1 and a FLT_MAX-clamped, saturated block scale"))

# nan_in_block_mxfp8_e5m2: float16 (1, 32): NaN, 3.0, -1.0, 0.125, rest 0. amax = 3 (NaN ignored).
# v = RN(3 * 9586981 * 2^-39) = RN(28760943 * 2^-39): 25 significant bits, 28760943 / 2 = 14380471.5,
# a tie -> even 14380472 * 2^-38 (= 1.714 * 2^-15): mantissa > 0 -> E = 112 + 1 = 113 (0x71). s_inv = 2^14.
# y: NaN -> 0x7F; 49152 = 1.5 * 2^15 -> E5M2 (bias 15) 0b0_11110_10 = 0x7A; -16384 -> 0b1_11101_00 = 0xF4;
# 2^11 -> 0b0_11010_00 = 0x68. Scale 0x71.
add(_q("nan_in_block_mxfp8_e5m2", "mxfp8_e5m2", vals("float16", (1, 32), padded((NAN, 3.0, -1.0, 0.125), 32, 0.0)), {
    "rowwise.data": u8((1, 32), padded((0x7F, 0x7A, 0xF4, 0x68), 32)), "rowwise.scales": u8((1, 1), (0x71,))},
    "NaN is ignored by the amax and encodes to 0x7F"))

# all_nan_block_*: every element NaN (both signs). amax = 0 (NaN ignored) -> E = 0 / A = 0.
# E4M3: y = NaN * 2^127 = NaN -> 0x7F. E2M1 has no NaN -> positive max code 0x7, bytes 0x77.
# NVFP4: A = 0 -> S_enc = 1; b = 0 -> sf 0x00 -> enc = FLT_MAX; y = NaN -> 0x7 -> bytes 0x77; amax 0.
add(_q("all_nan_block_mxfp8_e4m3", "mxfp8_e4m3", bits("float32", (1, 32), (0x7FC00000, 0xFFC00001) * 16), {
    "rowwise.data": u8((1, 32), (0x7F,) * 32), "rowwise.scales": u8((1, 1), (0x00,))},
    "an all-NaN block has amax 0 and positive NaN codes whatever the NaN's sign"))
add(_q("all_nan_block_mxfp4_e2m1", "mxfp4_e2m1", bits("bfloat16", (1, 32), (0x7FC0, 0xFFC1) * 16), {
    "rowwise.data": u8((1, 16), (0x77,) * 16), "rowwise.scales": u8((1, 1), (0x00,))},
    "E2M1 has no NaN: NaN encodes to the positive max code 0x7 (not -0 as ml_dtypes casts)"))
add(_q("all_nan_block_nvfp4", "nvfp4", bits("float16", (1, 16), (0x7E00, 0xFE00) * 8), {
    "rowwise.data": u8((1, 8), (0x77,) * 8), "rowwise.scales": u8((1, 1), (0x00,)),
    "rowwise.amax": f32bits(0x00000000)},
    "an all-NaN tensor has A = 0; NaN codes are 0x7"))

# signalling_nan_last_nvfp4: float32 (1, 18): 3.0, 16 zeros, then a signalling NaN (0x7F800001) last,
# where np.fmax.reduce's scalar tail met it and kept it (IEEE maxNum gives NaN for a signalling
# operand; at 18 elements the tail holds the last one). A = 3 (NaN ignored) -> S_enc = 2688 / 3 = 896
# exactly. Block 0: b = 3 -> b * fp32(896 * fp32(1/6)) = 448.00003 -> E4M3 448 = 0x7E;
# enc = 1 / (448 * fp32(1/896)) ~ 2, y: 3 -> ~6 -> 0x7, zeros -> 0x0. Block 1 (0, NaN): b = 0 (NaN
# ignored) -> sf 0x00, enc = FLT_MAX; 0 -> 0x0, NaN -> 0x7. Bytes (low nibble first): 0x07,
# 0x00 x 7, 0x70.
add(_q("signalling_nan_last_nvfp4", "nvfp4", bits("float32", (1, 18), (0x40400000,) + (0,) * 16 + (0x7F800001,)), {
    "rowwise.data": u8((1, 9), (0x07,) + (0x00,) * 7 + (0x70,)), "rowwise.scales": u8((1, 2), (0x7E, 0x00)),
    "rowwise.amax": f32bits(0x40400000)},
    "a signalling NaN is ignored by the amax like a quiet one, wherever it sits"))

# =============================================================================================
# satfinite_480_mxfp8_e4m3 (rule floor): float32 (1, 32): 480, 464, 432, 424, -500, 448, 1.0, rest 0.
# amax = 500 = 1.953 * 2^8: exponent field 135 -> E = 135 - 8 = 127, s_inv = 1, so values above 448
# reach the encoder. 480 -> 0x7E; 464 -> 0x7E (above max: saturate, never NaN);
# 432 = midpoint of 416 (0x7D) and 448 (0x7E) -> even 0x7E; 424 -> 416 = 0x7D; -500 -> 0xFE;
# 448 -> 0x7E; 1.0 -> 0x38. Scale 0x7F.
add(_q("satfinite_480_mxfp8_e4m3", "mxfp8_e4m3", vals("float32", (1, 32), padded((480.0, 464.0, 432.0, 424.0, -500.0, 448.0, 1.0), 32, 0.0)), {
    "rowwise.data": u8((1, 32), padded((0x7E, 0x7E, 0x7E, 0x7D, 0xFE, 0x7E, 0x38), 32)), "rowwise.scales": u8((1, 1), (0x7F,))},
    "scaled values above 448 saturate to 0x7E (ml_dtypes would give NaN)", scale_rule="floor"))

# negative_zero_mxfp6_e2m3: float32 (1, 32): -0.0, -2^-149, +0.0, 2^-149, rest +0.
# amax = 2^-149; v = RN(2^-149 * fp32(1/7.5)) = RN(0.133 * 2^-149) = 0 -> E = 0; s_inv = 2^127.
# y: -0 -> 0x20 (sign bit of a 6-bit code); -2^-22 rounds to zero -> 0x20; +0 -> 0; 2^-22 -> 0.
add(_q("negative_zero_mxfp6_e2m3", "mxfp6_e2m3", vals("float32", (1, 32), padded((-0.0, -(2.0 ** -149), 0.0, 2.0 ** -149), 32, 0.0)), {
    "rowwise.data": u8((1, 32), padded((0x20, 0x20, 0x00, 0x00), 32)), "rowwise.scales": u8((1, 1), (0x00,))},
    "-0.0 and negatives that round to zero give the negative-zero code"))

# ties_to_even_mxfp8_e4m3: float32 (1, 32). amax = 448 -> v = RN(1 + 192 * 2^-32) = 1.0 -> E = 127, s_inv = 1.
#   448                   -> 0x7E
#   1.0625  (mid 1.0 0x38 | 1.125 0x39)    -> even 0x38
#   1.1875  (mid 1.125 0x39 | 1.25 0x3A)   -> even 0x3A
#   -17     (mid 16 0x58 | 18 0x59)        -> 0xD8
#   2^-10   (mid 0 | 2^-9 0x01)            -> 0x00
#   3*2^-10 (mid 2^-9 0x01 | 2^-8 0x02)    -> 0x02
#   0x3F880001 = 1.0625 + 2^-23 (midpoint + 1 ulp) -> 0x39
#   0x3F87FFFF = 1.0625 - 2^-23 (midpoint - 1 ulp) -> 0x38
#   15*2^-10 (mid 7*2^-9 0x07 | 2^-6 0x08: subnormal/normal boundary) -> 0x08
#   232     (mid 224 0x76 | 240 0x77)      -> 0x76
#   248     (mid 240 0x77 | 256 0x78)      -> 0x78
add(_q("ties_to_even_mxfp8_e4m3", "mxfp8_e4m3",
       bits("float32", (1, 32), padded((0x43E00000, 0x3F880000, 0x3F980000, 0xC1880000, 0x3A800000, 0x3B400000,
                                       0x3F880001, 0x3F87FFFF, 0x3C700000, 0x43680000, 0x43780000), 32)), {
    "rowwise.data": u8((1, 32), padded((0x7E, 0x38, 0x3A, 0xD8, 0x00, 0x02, 0x39, 0x38, 0x08, 0x76, 0x78), 32)),
    "rowwise.scales": u8((1, 1), (0x7F,))},
    "midpoints round to the even code, midpoint +- 1 fp32 ulp round away from it"))

# ties_to_even_nvfp4: float32 (1, 16) = [0, .5, 1, 1.5, 2, 3, 4, 6, -.25, .75, 2.5, 5, -6, 1.25, 1.75, 3.5].
# A = 6: S_enc = 448, mult = 9786710 * 2^-17, fp32(6 * mult) = 448 + 2^-15 -> sf 0x7E; enc = 1; y = x.
# Codes: 0,1,2,3,4,5,6,7; -0.25 (mid 0|0.5) -> -0 = 0x8; 0.75 (mid 0.5 c1|1 c2) -> 2; 2.5 (mid 2 c4|3 c5) -> 4;
# 5 (mid 4 c6|6 c7) -> 6; -6 -> 0xF; 1.25 (mid c2|c3) -> 2; 1.75 (mid c3|c4) -> 4; 3.5 (mid c5|c6) -> 6.
# Bytes: 0x10 0x32 0x54 0x76 0x28 0x64 0x2F 0x64. amax 6.0 = 0x40C00000.
add(_q("ties_to_even_nvfp4", "nvfp4",
       vals("float32", (1, 16), (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.25, 0.75, 2.5, 5.0, -6.0, 1.25, 1.75, 3.5)), {
    "rowwise.data": u8((1, 8), (0x10, 0x32, 0x54, 0x76, 0x28, 0x64, 0x2F, 0x64)), "rowwise.scales": u8((1, 1), (0x7E,)),
    "rowwise.amax": f32bits(0x40C00000)},
    "every E2M1 value and every E2M1 midpoint (ties to even, -0.25 -> -0)"))

# =============================================================================================
# E8M0 rceil vs floor on amax = 7, mxfp4_e2m1, float32 (1, 32): 7, 5, -1, 0.25, rest 0.
# rceil: v = RN(7 * 11184811 * 2^-26) = RN(78293677 * 2^-26) = 9786710 * 2^-23 = 1.1667 -> mantissa > 0
#   -> E = 127 + 1 = 128, s_inv = 0.5: 3.5 (mid 3|4) -> 6; 2.5 (mid 2|3) -> 4; -0.5 -> 0x9; 0.125 -> 0.
#   Bytes 0x46 0x09. Scale 0x80.
# floor: exponent_field(7) = 129 -> E = 129 - 2 = 127, s_inv = 1: 7 -> saturates 7; 5 (mid 4|6) -> 6;
#   -1 -> 0xA; 0.25 (mid 0|0.5) -> 0. Bytes 0x67 0x0A. Scale 0x7F.
_x7 = vals("float32", (1, 32), padded((7.0, 5.0, -1.0, 0.25), 32, 0.0))
add(_q("e8m0_rceil_amax7_mxfp4_e2m1", "mxfp4_e2m1", _x7, {
    "rowwise.data": u8((1, 16), padded((0x46, 0x09), 16)), "rowwise.scales": u8((1, 1), (0x80,))},
    "rceil: E = ceil(log2(amax / 6)) + 127", scale_rule="rceil"))
add(_q("e8m0_floor_amax7_mxfp4_e2m1", "mxfp4_e2m1", _x7, {
    "rowwise.data": u8((1, 16), padded((0x67, 0x0A), 16)), "rowwise.scales": u8((1, 1), (0x7F,))},
    "floor (OCP): E = floor(log2 amax) - 2 + 127, so 7 saturates", scale_rule="floor"))

# partial_trailing_block_mxfp8_e4m3: float32 (1, 40): 32 x 1.0, then 2.0, -0.5, 6 x 0; axis both.
# Rowwise block 0: amax 1 -> v = fp32(1/448) = 0x3B124925 (exponent 118, mantissa > 0) -> E = 119,
#   s_inv = 2^8, y = 256 -> 0x78. Block 1 (8 elements): amax 2 -> v = 0x3B924925 -> E = 120, s_inv = 2^7:
#   2 -> 256 -> 0x78; -0.5 -> -64 -> 0xE8; 0 -> 0. Scales (1, 2) = 0x77 0x78.
# Columnwise (40, 1): each row is a 1-element block: x = 1 -> E 119, 0x78; x = 2 -> E 120, 0x78;
#   x = -0.5 -> v = 0x3A924925 -> E = 118, s_inv = 2^9 -> -256 -> 0xF8; x = 0 -> E 0, code 0.
add(_q("partial_trailing_block_mxfp8_e4m3", "mxfp8_e4m3", vals("float32", (1, 40), (1.0,) * 32 + padded((2.0, -0.5), 8, 0.0)), {
    "rowwise.data": u8((1, 40), (0x78,) * 32 + padded((0x78, 0xE8), 8)), "rowwise.scales": u8((1, 2), (0x77, 0x78)),
    "columnwise.data": u8((40, 1), (0x78,) * 32 + padded((0x78, 0xF8), 8)),
    "columnwise.scales": u8((40, 1), (0x77,) * 32 + padded((0x78, 0x76), 8))},
    "a partial last block takes its amax over its real elements only; 1-element columnwise blocks", axis="both"))

# partial_trailing_block_nvfp4: float32 (1, 20): x[0] = 6, x[16] = 3, x[17] = -1.5, rest 0.
# A = 6 (S_enc 448, mult 9786710 * 2^-17). Block 0: b = 6 -> sf 0x7E, enc 1 -> 6 -> 7.
# Block 1 (4 elements): b = 3 -> RN(3 * 9786710 * 2^-17) = 14680065 * 2^-16 = 224.0000153 -> E4M3 224 = 0x76;
#   224 * S_dec = RN(224 * 9586981 * 2^-32) = RN(0.5 + 96 * 2^-32) = 0.5 -> enc = 2: 3 -> 6 -> 7; -1.5 -> -3 -> 0xD.
# Bytes (1, 10): 0x07, 0 x 7, 0xD7, 0x00. Scales 0x7E 0x76. amax 6.
add(_q("partial_trailing_block_nvfp4", "nvfp4", vals("float32", (1, 20), sparse((20,), {0: 6.0, 16: 3.0, 17: -1.5}, 0.0)), {
    "rowwise.data": u8((1, 10), (0x07, 0, 0, 0, 0, 0, 0, 0, 0xD7, 0x00)), "rowwise.scales": u8((1, 2), (0x7E, 0x76)),
    "rowwise.amax": f32bits(0x40C00000)},
    "NVFP4 partial block of 4 elements with its own E4M3 scale"))

# =============================================================================================
# NVFP4 amax handling
# nvfp4_amax_zero: float32 (1, 16) = 6, 3, -1, 0.5, rest 0; amax=[0.0] supplied.
# A = 0 -> S_enc = 1, S_dec = 1, mult = fp32(1/6) = 11184811 * 2^-26; b = 6 -> RN(67108866 * 2^-26)
# = RN(1 + 2^-25) = 1.0 -> sf = 0x38; enc = 1; codes 7, 5, 0xA, 1 -> bytes 0x57 0x1A. amax out 0.
add(_q("nvfp4_amax_zero", "nvfp4", vals("float32", (1, 16), padded((6.0, 3.0, -1.0, 0.5), 16, 0.0)), {
    "rowwise.data": u8((1, 8), padded((0x57, 0x1A), 8)), "rowwise.scales": u8((1, 1), (0x38,)),
    "rowwise.amax": f32bits(0x00000000)},
    "a supplied A = 0 gives S_enc = 1 (no division by zero)", amax=vals("float32", (1,), (0.0,))))

# nvfp4_zero_block_scale: float32 (1, 32): block 0 = [2^-20, -2^-20, 0, -0.0, 0...], block 1 = [6, 1, 0...].
# A = 6. Block 0: b * mult = 9786710 * 2^-37 = 7.1e-5 < 2^-10 (half the smallest E4M3 subnormal) -> sf = 0x00;
#   enc = min(fp32(1 / (0 * S_dec)), FLT_MAX) = FLT_MAX; 2^-20 * FLT_MAX is finite and >= 6 -> 7;
#   -2^-20 -> 0xF; 0 -> 0; -0.0 -> 0x8. Block 1: sf 0x7E, enc 1: 6 -> 7, 1 -> 2.
# Bytes: 0xF7 0x80 0 0 0 0 0 0 0x27 0 ... Scales 0x00 0x7E.
add(_q("nvfp4_zero_block_scale", "nvfp4", vals("float32", (1, 32), sparse((32,), {0: 2.0 ** -20, 1: -(2.0 ** -20), 3: -0.0, 16: 6.0, 17: 1.0}, 0.0)), {
    "rowwise.data": u8((1, 16), sparse((16,), {0: 0xF7, 1: 0x80, 8: 0x27})), "rowwise.scales": u8((1, 2), (0x00, 0x7E)),
    "rowwise.amax": f32bits(0x40C00000)},
    "sf == 0 gives enc = FLT_MAX: non-zero elements saturate, zeros keep their sign"))

# nvfp4_supplied_amax: float32 (1, 16) = 100, 0.5, 0.25, -0.125, rest 0; amax=[1.0] supplied.
# S_enc = 2688; S_dec = fp32(1/2688) = 12782641 * 2^-35; mult = RN(2688 * 11184811 * 2^-26) =
# RN(14680064.44 * 2^-15) = 448. b = 100 -> 44800 -> sf = 0x7E (satfinite). 448 * S_dec =
# RN(5726623168 * 2^-35) = 11184811 * 2^-26 = fp32(1/6); enc = RN(2^26 / 11184811) = RN(6 / (1 + 2^-25)) = 6.
# y = 600 -> 7; 3 -> 5; 1.5 -> 3; -0.75 (mid 0.5|1) -> 0xA. Bytes 0x57 0xA3. amax out 1.0 = 0x3F800000.
add(_q("nvfp4_supplied_amax", "nvfp4", vals("float32", (1, 16), padded((100.0, 0.5, 0.25, -0.125), 16, 0.0)), {
    "rowwise.data": u8((1, 8), padded((0x57, 0xA3), 8)), "rowwise.scales": u8((1, 1), (0x7E,)),
    "rowwise.amax": f32bits(0x3F800000)},
    "the caller's amax replaces the computed one, even when smaller than max |x|",
    amax=vals("float32", (1,), (1.0,))))

# row_scaled_zero_row_nvfp4: float32 (2, 16): row 0 = [0, -0.0, 0...], row 1 = [6, -3, 0.5, 0...].
# A = [0, 6]. Row 0: S_enc 1, b = 0 -> sf 0x00, enc FLT_MAX, codes 0 and 0x8 -> byte 0x80.
# Row 1: S_enc 448 -> sf 0x7E, enc 1: 7, 0xD, 1 -> bytes 0xD7 0x01. amax out [0x00000000, 0x40C00000].
add(_q("row_scaled_zero_row_nvfp4", "nvfp4", vals("float32", (2, 16), padded((0.0, -0.0), 16, 0.0) + padded((6.0, -3.0, 0.5), 16, 0.0)), {
    "rowwise.data": u8((2, 8), padded((0x80,), 8) + padded((0xD7, 0x01), 8)), "rowwise.scales": u8((2, 1), (0x00, 0x7E)),
    "rowwise.amax": f32bits(0x00000000, 0x40C00000)},
    "row-scaled: each row has its own S_enc; a zero row gives S_enc = 1", row_scaled=True))

# tile_2d_nvfp4: float32 (16, 32), zero except x[0,0] = 6, x[15,15] = 3, x[5,3] = -0.5, x[3,20] = -1.5,
# x[0,16] = 0.25, x[15,31] = 1.0; axis both. A = 6.
# Tile 0 (cols 0-15): amax 6 -> sf 0x7E, enc 1: 6 -> 7, 3 -> 5, -0.5 -> 0x9.
# Tile 1 (cols 16-31): amax 1.5 -> RN(1.5 * 9786710 * 2^-17) = 14680065 * 2^-17 = 112.0000076 -> E4M3 112 = 0x6E;
#   112 * S_dec = RN(1073741872 * 2^-32) = RN(0.25 * (1 + 192 * 2^-32)) = 0.25 -> enc 4:
#   -1.5 -> -6 -> 0xF; 0.25 -> 1 -> 2; 1.0 -> 4 -> 6.
# Every row of the tile carries the tile's scale (rows whose own amax is 0 included).
# Rowwise bytes (16, 16): [0,0] 0x07, [15,7] 0x50, [5,1] 0x90, [3,10] 0x0F, [0,8] 0x02, [15,15] 0x60;
#   scales (16, 2) = rows of (0x7E, 0x6E).
# Columnwise = rowwise of x^T (32, 16): codes are the transpose: xT[0,0] 7 -> [0,0] 0x07; xT[15,15] 5 -> [15,7] 0x50;
#   xT[3,5] 9 -> [3,2] 0x90; xT[20,3] F -> [20,1] 0xF0; xT[16,0] 2 -> [16,0] 0x02; xT[31,15] 6 -> [31,7] 0x60;
#   scales (32, 1): rows 0-15 0x7E, rows 16-31 0x6E. amax 6 on both.
_t2 = {(0, 0): 6.0, (15, 15): 3.0, (5, 3): -0.5, (3, 20): -1.5, (0, 16): 0.25, (15, 31): 1.0}
add(_q("tile_2d_nvfp4", "nvfp4", vals("float32", (16, 32), sparse((16, 32), _t2, 0.0)), {
    "rowwise.data": u8((16, 16), sparse((16, 16), {(0, 0): 0x07, (15, 7): 0x50, (5, 1): 0x90, (3, 10): 0x0F, (0, 8): 0x02, (15, 15): 0x60})),
    "rowwise.scales": u8((16, 2), (0x7E, 0x6E) * 16), "rowwise.amax": f32bits(0x40C00000),
    "columnwise.data": u8((32, 8), sparse((32, 8), {(0, 0): 0x07, (15, 7): 0x50, (3, 2): 0x90, (20, 1): 0xF0, (16, 0): 0x02, (31, 7): 0x60})),
    "columnwise.scales": u8((32, 1), (0x7E,) * 16 + (0x6E,) * 16), "columnwise.amax": f32bits(0x40C00000)},
    "16x16 tiles share one scale; columnwise codes are the transpose of rowwise codes", axis="both", tile_2d=True))

# =============================================================================================
# RHT (columnwise only). bfloat16 x (16, 2): column 0 = e_0 + e_3 (x[0,0] = x[3,0] = 1), column 1 =
# 2 e_15 (x[15,1] = 2). The columnwise operand's rows are the columns of x.
# Mask 0: u_j = 0.25 * sum_k v_k (-1)^popcount(k & j):
#   row 0: 0.25 (1 + (-1)^popcount(j & 3)) = 0.5 where j & 3 in {0, 3}, else 0;
#   row 1: 0.5 (-1)^popcount(j) (signs + - - + - + + - - + + - + - - +).
# Default mask 0xD7E8 sets bits 3, 5-10, 12, 14, 15: s_3 = s_15 = -1, s_0 = +1, so
#   row 0: 0.25 (1 - (-1)^popcount(j & 3)) = 0.5 where j & 3 in {1, 2}; row 1: the mask-0 row negated.
# Both: A = 0.5 -> S_enc = 5376; mult = RN(5376 * 11184811 * 2^-26) = RN(14680064.44 * 2^-14) = 896;
#   b = 0.5 -> 448 -> sf 0x7E; S_dec = fp32(1/5376) = 12782641 * 2^-36; 448 * S_dec = RN(11184810.9 * 2^-27)
#   = 11184811 * 2^-27 = fp32(1/12); enc = RN(12 / (1 + 2^-25)) = 12; y = 12 u: 0.5 -> 7, -0.5 -> 0xF, 0 -> 0.
# Mask 0 bytes: row 0 (7,0,0,7,...) -> 07 70 07 70 07 70 07 70; row 1 (7,F,F,7,F,7,7,F,F,7,7,F,7,F,F,7)
#   -> F7 7F 7F F7 7F F7 F7 7F. Default: row 0 (0,7,7,0,...) -> 70 07 70 07 ...; row 1 -> 7F F7 F7 7F F7 7F 7F F7.
# Columnwise amax = max |u| = 0.5 = 0x3F000000; scales (2, 1) = 0x7E 0x7E.
_rx = bits("bfloat16", (16, 2), sparse((16, 2), {(0, 0): 0x3F80, (3, 0): 0x3F80, (15, 1): 0x4000}))
add(_q("rht_mask0_nvfp4", "nvfp4", _rx, {
    "columnwise.data": u8((2, 8), (0x07, 0x70) * 4 + (0xF7, 0x7F, 0x7F, 0xF7, 0x7F, 0xF7, 0xF7, 0x7F)),
    "columnwise.scales": u8((2, 1), (0x7E, 0x7E)), "columnwise.amax": f32bits(0x3F000000)},
    "RHT with mask 0 is the plain 16-point Walsh-Hadamard transform times 0.25",
    axis="columnwise", rht=True, rht_sign_mask=0))
add(_q("rht_default_mask_nvfp4", "nvfp4", _rx, {
    "columnwise.data": u8((2, 8), (0x70, 0x07) * 4 + (0x7F, 0xF7, 0xF7, 0x7F, 0xF7, 0x7F, 0x7F, 0xF7)),
    "columnwise.scales": u8((2, 1), (0x7E, 0x7E)), "columnwise.amax": f32bits(0x3F000000)},
    "RHT default mask 0xD7E8 flips the signs of v_3 and v_15", axis="columnwise", rht=True))

# rht_bf16_rounding_nvfp4: bfloat16 x (16, 1), column v = [1 + 2^-7, 2^-8, 0.5, 0 ...] (0x3F81, 0x3B80, 0x3F00),
# mask 0, axis columnwise. w_j = v_0 + (-1)^(j&1) v_1 + (-1)^((j>>1)&1) v_2 (exact in float64):
#   j&3 = 0: 1.5 + 2^-7 + 2^-8 = 1.1000001|1b: bf16 tie -> even 1.5 + 2^-6, u = 0.37890625 (0x3EC2)
#   j&3 = 1: 1.5 + 2^-8 = 1.1000000|1b: tie -> even 1.5, u = 0.375
#   j&3 = 2: 0.5 + 2^-7 + 2^-8 (exact in bf16), u = 0.1279296875
#   j&3 = 3: 0.5 + 2^-8 (exact), u = 0.1259765625
# A = 0.37890625 = 97/256 (the bf16-rounded value: unrounded it would be 0.3779296875).
# S_enc = RN(688128 / 97) = 14528723 * 2^-11 (0x45DDB0D3); S_dec = RN(2^11 / 14528723) = 19373690 * 2^-37;
# mult = RN(S_enc * 11184811 * 2^-26) = 9685816 * 2^-13; b * mult = RN(97 * 9685816 * 2^-21) = 14680065 * 2^-15
# = 448 + 2^-15 -> sf 0x7E; 448 * S_dec = RN(16951978.75 * 2^-28) = 16951979 * 2^-28; enc = RN(2^28 / 16951979)
# = 16604256 * 2^-20 = 15.8350525; y = u * enc: 6.0000005 -> 7; 5.938 -> 7; 2.026 -> 4; 1.995 -> 4.
# Bytes (1, 8) = 77 44 77 44 77 44 77 44; scale 0x7E; columnwise amax 0x3EC20000.
add(_q("rht_bf16_rounding_nvfp4", "nvfp4", bits("bfloat16", (16, 1), padded((0x3F81, 0x3B80, 0x3F00), 16)), {
    "columnwise.data": u8((1, 8), (0x77, 0x44) * 4), "columnwise.scales": u8((1, 1), (0x7E,)),
    "columnwise.amax": f32bits(0x3EC20000)},
    "RHT outputs are rounded fp32 -> bf16 (ties to even) before the amax", axis="columnwise", rht=True, rht_sign_mask=0))

# =============================================================================================
# Stochastic rounding. Draws from an independent scalar Philox4x32-10 (KAT: counter 0, key 0 ->
# 0x6627e8d5 0xe169c58d 0xbc57ac4c 0x9b00dbd8). Rule: up iff (r >> 8) < fp32((a - lo)/(hi - lo) * 2^24);
# for a midpoint that is r < 2^31, for a quarter r < 2^30; 0.1 (0x3DCCCCCD = 13421773 * 2^-27) between 0 and
# 0.5 gives 3355443.25, i.e. up iff (r >> 8) <= 3355443; |y| >= 6 saturates to 7 whatever r.
#
# sr_seed_mxfp4_e2m1: float32 (1, 32) = [0.25, 1.25, 2.5, 5, 0.1, -0.75, 4.5, 6] x 4, seed 0x0123456789ABCDEF,
# stream 0 (rowwise). amax 6 -> v = RN(1 + 2^-25) = 1.0 -> E = 127, y = x. Draws r_e (e = 0..31) and codes:
#   e0-7:   b850222e c58cb04b 14a7a020 7a84fff9 adca1466 523e0d85 65401425 b299da3f -> 0 2 5 7 0 A 6 7
#   e8-15:  f7ce299f 823ccb40 4fefe3cc 1a8fe6b6 ac3078f0 7fbe88a2 0848e918 fe13862d -> 0 2 5 7 0 A 7 7
#   e16-23: a02a30b9 d219bbb3 b1cc43ec ad0cb5ea 5765db8a d104608f c658b7d8 e9aa137f -> 0 2 4 6 0 9 6 7
#   e24-31: 5fca19f9 fa9dd2ec 3fd240cb 9d3ab5e9 8e94991c b890a831 def850de 552b7a90 -> 1 2 5 6 0 9 6 7
# (e.g. e2: 0x14a7a020 < 2^31 -> 2.5 rounds up to 3 = code 5; e14: 0x0848e918 < 2^30 -> 4.5 up to 6 = code 7.)
# Bytes: 20 75 A0 76 20 75 A0 77 20 64 90 76 21 65 90 76. Scale 0x7F.
add(_q("sr_seed_mxfp4_e2m1", "mxfp4_e2m1", vals("float32", (1, 32), (0.25, 1.25, 2.5, 5.0, F01, -0.75, 4.5, 6.0) * 4), {
    "rowwise.data": u8((1, 16), (0x20, 0x75, 0xA0, 0x76, 0x20, 0x75, 0xA0, 0x77, 0x20, 0x64, 0x90, 0x76, 0x21, 0x65, 0x90, 0x76)),
    "rowwise.scales": u8((1, 1), (0x7F,))},
    "stochastic rounding draws Philox(counter=(e/4, 0, 0, 0), key=seed)[e%4]", rounding="stochastic", seed=0x0123456789ABCDEF))

# sr_seed_columnwise_nvfp4: float32 x (16, 2), column 0 = [6, .25, 1.25, 2.5, 5, .1, -.75, 4.5, .25, 1.25, 2.5, 5, .1,
# -.75, 4.5, -6], column 1 = [-6, 4.5, -.75, .1, 5, 2.5, 1.25, .25] x 2; axis columnwise, seed 42, stream 1.
# The operand is x^T (2, 16), e = 16 * row + col. A = 6 and both blocks have amax 6 -> sf 0x7E, enc 1, y = x^T.
#   e0-7:   02933769 2051e913 3b68b038 b62c409c 20ff9139 fdd21d94 1b0af4ec 39c6bd08 -> 7 1 3 4 7 0 A 7
#   e8-15:  36794079 1f70ab07 709af7c6 56eae9bc 1e8dc7c5 ae3a5abf 36d8462c 080b604b -> 1 3 5 7 1 9 7 F
#   e16-23: ff29638d 9410eb92 38d5f02c 96637012 4e9b5cdf f7595067 a61b8f94 c72bf837 -> F 6 A 0 7 4 2 0
#   e24-31: 95632acf 75123a0c 8fbcb183 f30dd8bf 4c78c45f 5281c34e 1a41a83b aed20ef5 -> F 6 9 0 7 5 3 0
# (e12: 0x1e8dc7c5 >> 8 = 2002375 <= 3355443, so 0.1 rounds up to 0.5 = code 1.)
# Bytes row 0: 17 43 07 7A 31 75 91 F7; row 1: 6F 0A 47 02 6F 09 57 03. Scales 0x7E 0x7E. amax 6.
_c0 = (6.0, 0.25, 1.25, 2.5, 5.0, F01, -0.75, 4.5, 0.25, 1.25, 2.5, 5.0, F01, -0.75, 4.5, -6.0)
_c1 = (-6.0, 4.5, -0.75, F01, 5.0, 2.5, 1.25, 0.25) * 2
add(_q("sr_seed_columnwise_nvfp4", "nvfp4", vals("float32", (16, 2), tuple(v for pair in zip(_c0, _c1) for v in pair)), {
    "columnwise.data": u8((2, 8), (0x17, 0x43, 0x07, 0x7A, 0x31, 0x75, 0x91, 0xF7, 0x6F, 0x0A, 0x47, 0x02, 0x6F, 0x09, 0x57, 0x03)),
    "columnwise.scales": u8((2, 1), (0x7E, 0x7E)), "columnwise.amax": f32bits(0x40C00000)},
    "columnwise stochastic rounding uses stream 1 and the operand's own linear index",
    axis="columnwise", rounding="stochastic", seed=42))

# =============================================================================================
# swizzled_layout_mxfp8_e4m3: float32 (130, 160); block (i, j) (32 elements) is filled with 448 * 2^(E - 127),
# E = 60 + i + j. v = 2^(E-127) * RN(1 + 192 * 2^-32) = 2^(E-127) -> scale E, y = 448 -> every code 0x7E.
# Compact scales (130, 5) -> swizzled (256, 8) (2048 bytes); entry (i, j) at
# ((i // 128) * 2 + j // 4) * 512 + (i % 32) * 16 + ((i % 128) // 32) * 4 + j % 4, e.g.
# (0,0) -> 0 (E 60), (0,4) -> 512 (E 64), (1,0) -> 16, (32,0) -> 4 (E 92), (33,1) -> 21 (E 94),
# (127,3) -> 511 (E 190), (128,0) -> 1024 (E 188), (129,4) -> 1552 (E 193); every other byte is 0.
def _swz_expected(rows, cols, value):
    rp, cp = -(-rows // 128) * 128, -(-cols // 4) * 4
    out = [0] * (rp * cp)
    for i in range(rows):
        for j in range(cols):
            out[((i // 128) * (cp // 4) + j // 4) * 512 + (i % 32) * 16 + ((i % 128) // 32) * 4 + j % 4] = value(i, j)
    return (rp, cp), tuple(out)


_sw_shape, _sw_bytes = _swz_expected(130, 5, lambda i, j: 60 + i + j)
assert (_sw_bytes[0], _sw_bytes[512], _sw_bytes[16], _sw_bytes[4], _sw_bytes[21], _sw_bytes[511],
        _sw_bytes[1024], _sw_bytes[1552]) == (60, 64, 61, 92, 94, 190, 188, 193)
add(_q("swizzled_layout_mxfp8_e4m3", "mxfp8_e4m3",
       vals("float32", (130, 160), tuple(448.0 * 2.0 ** (60 + i + c // 32 - 127) for i in range(130) for c in range(160))), {
    "rowwise.data": u8((130, 160), (0x7E,) * (130 * 160)), "rowwise.scales": u8(_sw_shape, _sw_bytes)},
    "the 128x4 swizzle: offsets across 32-row, 128-row and 4-column groups, zero padding",
    scale_layout="swizzled"))

# fp4_nibble_order_mxfp4_e2m1: float32 (1, 32): x[0] = 1, x[1] = -3, x[2] = 1.5, x[31] = 0.5, rest 0.
# amax 3 -> v = RN(3 * 11184811 * 2^-26) = RN(0.5 + 2^-26) = 0.5 -> mantissa 0 -> E = 126, s_inv = 2.
# y: 2 -> 4; -6 -> 0xF; 3 -> 5; 1 -> 2. Element 2k is the low nibble: byte 0 = 0x4 | 0xF << 4 = 0xF4,
# byte 1 = 0x05, byte 15 = 0x2 << 4 = 0x20. Scale 0x7E.
add(_q("fp4_nibble_order_mxfp4_e2m1", "mxfp4_e2m1", vals("float32", (1, 32), sparse((32,), {0: 1.0, 1: -3.0, 2: 1.5, 31: 0.5}, 0.0)), {
    "rowwise.data": u8((1, 16), sparse((16,), {0: 0xF4, 1: 0x05, 15: 0x20})), "rowwise.scales": u8((1, 1), (0x7E,))},
    "element 2k in the low nibble, 2k+1 in the high nibble"))

# =============================================================================================
# Dequantize, NVFP4: data (2, 8) = codes 0..15 in each row (bytes 10 32 54 76 98 BA DC FE), scales (2, 1) =
# 0x38 (1.0), 0x3F (1.875), amax [1.0].
# Row 0: final = RN(RN(1.0 * 1.0) * fp32(1/2688)) = 0x39C30C31. y = RN(v * final):
#   0.5, 1, 2, 4 -> exponent shifts: 0x39430C31 0x39C30C31 0x3A430C31 0x3AC30C31;
#   1.5 -> RN(3 * 12782641 * 2^-36) = RN(9586980.75 * 2^-34) = 9586981 * 2^-34 = 0x3A124925; 3 -> 0x3A924925; 6 -> 0x3B124925.
# Row 1: final = RN(1.875 * 12782641 * 2^-35) = RN(11983725.94 * 2^-34) = 11983726 * 2^-34 = 0x3A36DB6E.
#   0.5, 1, 2, 4 -> 0x39B6DB6E 0x3A36DB6E 0x3AB6DB6E 0x3B36DB6E;
#   1.5 -> RN(17975589 * 2^-34) = RN(8987794.5 * 2^-33): tie -> even 8987794 = 0x892492 -> 0x3A892492;
#   3 -> 0x3B092492; 6 -> 0x3B892492. Codes 8..15 are the negatives (code 8 is -0 -> 0x80000000).
# bfloat16 (RNE on the low 16 bits): row 0 low halves 0x0C31 / 0x4925 < 0x8000 -> truncate:
#   3943 39C3 3A12 3A43 3A92 3AC3 3B12; row 1: 0xDB6E > 0x8000 rounds up -> 39B7 3A37 3AB7 3B37, 0x2592 -> 3A89 3B09 3B89.
# float16 (10 mantissa bits, bias 15): mantissa 0x430C31 -> 0x218 (rest 0xC31 < 0x1000), 0x124925 -> 0x092
#   (rest 0x925), 0x36DB6E -> 0x1B7 (0x1B6 + rest 0x1B6E > 0x1000), 0x092492 -> 0x049 (rest 0x492);
#   fp32 exponent fields 114..119 -> f16 fields 2..7:
#   row 0: 0A18 0E18 1092 1218 1492 1618 1892; row 1: 0DB7 11B7 1449 15B7 1849 19B7 1C49.
_nv_data = u8((2, 8), (0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE) * 2)
_nv_scales = u8((2, 1), (0x38, 0x3F))
_nv_amax = vals("float32", (1,), (1.0,))


def _signed(pos, neg_bit):
    """Row of 16 outputs for codes 0..15 from the 8 non-negative ones (code 8 + k = -(code k))."""
    return tuple(pos) + tuple(neg_bit | p for p in pos)


_nv_f32 = (_signed((0, 0x39430C31, 0x39C30C31, 0x3A124925, 0x3A430C31, 0x3A924925, 0x3AC30C31, 0x3B124925), 0x80000000)
           + _signed((0, 0x39B6DB6E, 0x3A36DB6E, 0x3A892492, 0x3AB6DB6E, 0x3B092492, 0x3B36DB6E, 0x3B892492), 0x80000000))
_nv_bf16 = (_signed((0, 0x3943, 0x39C3, 0x3A12, 0x3A43, 0x3A92, 0x3AC3, 0x3B12), 0x8000)
            + _signed((0, 0x39B7, 0x3A37, 0x3A89, 0x3AB7, 0x3B09, 0x3B37, 0x3B89), 0x8000))
_nv_f16 = (_signed((0, 0x0A18, 0x0E18, 0x1092, 0x1218, 0x1492, 0x1618, 0x1892), 0x8000)
           + _signed((0, 0x0DB7, 0x11B7, 0x1449, 0x15B7, 0x1849, 0x19B7, 0x1C49), 0x8000))
add(_dq("dequantize_float32_nvfp4", "nvfp4", _nv_data, _nv_scales, "float32", (2, 16), bits("float32", (2, 16), _nv_f32),
        "final = (decode(sf) * A) * fp32(1/2688), then decode(q) * final, each rounded to fp32", amax=_nv_amax))
add(_dq("dequantize_bfloat16_nvfp4", "nvfp4", _nv_data, _nv_scales, "bfloat16", (2, 16), bits("bfloat16", (2, 16), _nv_bf16),
        "the fp32 result is rounded once to bfloat16, ties to even", amax=_nv_amax))
add(_dq("dequantize_float16_nvfp4", "nvfp4", _nv_data, _nv_scales, "float16", (2, 16), bits("float16", (2, 16), _nv_f16),
        "the fp32 result is rounded once to float16", amax=_nv_amax))

# Dequantize, MXFP8 E4M3: data (3, 32), scales (3, 1) = 135 (2^8), 105 (2^-22), 0 (2^-127).
# Row 0 codes 7E 3F F8 77 79 (448, 1.875, -256, 240, 288) x 2^8 = 114688, 480, -65536, 61440, 73728:
#   fp32 47E00000 43F00000 C7800000 47700000 47900000; bf16 exact 47E0 43F0 C780 4770 4790;
#   fp16: 114688 and 73728 >= 65520 -> inf 7C00, -65536 -> FC00, 480 -> 5F80, 61440 -> 7B80.
# Row 1 codes 3C 3E 3F 3D 31 29 28 20 21 A0 38 (1.5, 1.75, 1.875, 1.625, 0.5625, 0.28125, 0.25, 0.125, 0.140625,
#   -0.125, 1) x 2^-22 = (6, 7, 7.5, 6.5, 2.25, 1.125, 1, 0.5, 0.5625, -0.5, 4) x 2^-24:
#   fp32 34C00000 34E00000 34F00000 34D00000 34100000 33900000 33800000 33000000 33100000 B3000000 34800000;
#   bf16 exact (high halves); fp16 subnormals (unit 2^-24): 6, 7, 7.5 -> 8 (tie, even), 6.5 -> 6 (tie), 2.25 -> 2,
#   1.125 -> 1, 1, 0.5 -> 0 (tie), 0.5625 -> 1, -0.5 -> -0 (8000), 4 -> 0004.
# Row 2 codes 01 0F 0C 14 0A 04 05 38 7E 86 x 2^-127 = 2^-136, 1.875, 1.5, 3, 1.25 (x 2^-133), 2^-134,
#   0.625 * 2^-133, 2^-127, 1.75 * 2^-119, -0.75 * 2^-133: fp32 (subnormals, unit 2^-149) 00002000 0001E000
#   00018000 00030000 00014000 00008000 0000A000 00400000 04600000 8000C000;
#   bf16 (unit 2^-133, RNE on the low half): 0000, 0002 (1.875), 0002 (1.5 tie -> even), 0003, 0001 (1.25),
#   0000 (0.5 tie -> even 0), 0001 (0.625), 0040, 0460, 8001 (-0.75); fp16: all +0 except -0.75 * 2^-133 -> 8000.
_mx_data = u8((3, 32), padded((0x7E, 0x3F, 0xF8, 0x77, 0x79), 32)
              + padded((0x3C, 0x3E, 0x3F, 0x3D, 0x31, 0x29, 0x28, 0x20, 0x21, 0xA0, 0x38), 32)
              + padded((0x01, 0x0F, 0x0C, 0x14, 0x0A, 0x04, 0x05, 0x38, 0x7E, 0x86), 32))
_mx_scales = u8((3, 1), (135, 105, 0))
_mx_f32 = (padded((0x47E00000, 0x43F00000, 0xC7800000, 0x47700000, 0x47900000), 32)
           + padded((0x34C00000, 0x34E00000, 0x34F00000, 0x34D00000, 0x34100000, 0x33900000, 0x33800000, 0x33000000,
                     0x33100000, 0xB3000000, 0x34800000), 32)
           + padded((0x00002000, 0x0001E000, 0x00018000, 0x00030000, 0x00014000, 0x00008000, 0x0000A000, 0x00400000,
                     0x04600000, 0x8000C000), 32))
_mx_bf16 = (padded((0x47E0, 0x43F0, 0xC780, 0x4770, 0x4790), 32)
            + padded((0x34C0, 0x34E0, 0x34F0, 0x34D0, 0x3410, 0x3390, 0x3380, 0x3300, 0x3310, 0xB300, 0x3480), 32)
            + padded((0x0000, 0x0002, 0x0002, 0x0003, 0x0001, 0x0000, 0x0001, 0x0040, 0x0460, 0x8001), 32))
_mx_f16 = (padded((0x7C00, 0x5F80, 0xFC00, 0x7B80, 0x7C00), 32)
           + padded((0x0006, 0x0007, 0x0008, 0x0006, 0x0002, 0x0001, 0x0001, 0x0000, 0x0001, 0x8000, 0x0004), 32)
           + padded((0,) * 9 + (0x8000,), 32))
add(_dq("dequantize_float32_mxfp8_e4m3", "mxfp8_e4m3", _mx_data, _mx_scales, "float32", (3, 32), bits("float32", (3, 32), _mx_f32),
        "2^(E-127) * decode(q) in fp32, fp32 subnormal results kept (E = 0 is 2^-127)"))
add(_dq("dequantize_bfloat16_mxfp8_e4m3", "mxfp8_e4m3", _mx_data, _mx_scales, "bfloat16", (3, 32), bits("bfloat16", (3, 32), _mx_bf16),
        "bf16 subnormal rounding of the fp32 result (ties to even)"))
add(_dq("dequantize_float16_mxfp8_e4m3", "mxfp8_e4m3", _mx_data, _mx_scales, "float16", (3, 32), bits("float16", (3, 32), _mx_f16),
        "fp16 overflow to inf and fp16 subnormal ties to even"))

CASES: tuple[GoldenCase, ...] = tuple(CASES_LIST)
CASES_BY_NAME: dict[str, GoldenCase] = {c.name: c for c in CASES}
assert len(CASES_BY_NAME) == len(CASES), "golden case names must be unique"
del CASES_LIST, add


# ---------------------------------------------------------------------------------------------
# running the cases

def _identity(a):
    return a


def _reference_callables():
    from .api import dequantize, quantize
    return quantize, dequantize


def _lookup(q, key: str):
    operand, _, field = key.partition(".")
    op = getattr(q, operand)
    if op is None:
        raise ValueError(f"the result has no {operand} operand")
    return getattr(op, field)


def _dequant_input(case: GoldenCase):
    from ..formats import FORMATS
    from ..tensor import Operand, QuantizedTensor, QuantizeOptions
    f = FORMATS[case.fmt]
    ins = {k: a.array() for k, a in case.inputs}
    shape = case.kwargs["shape"]
    rows, cols = int(np.prod(shape[:-1])), int(shape[-1])
    op = Operand(data=ins["data"], scales=ins["scales"], scale_layout="compact", amax=ins.get("amax"),
                 rows=rows, cols=cols, format=f.name)
    return QuantizedTensor(format=f.name, shape=tuple(shape), rowwise=op, columnwise=None,
                           options=QuantizeOptions(format=f.name))


def check_case(case: GoldenCase, quantize=None, dequantize=None, to_numpy=None) -> tuple[bool, str]:
    """Run one case with the given callables (default: the reference). Returns (passed, detail)."""
    rq, rdq = _reference_callables()
    quantize = quantize or rq
    dequantize = dequantize or rdq
    to_numpy = to_numpy or _identity
    try:
        if case.op == "quantize":
            kw = case.kwargs
            ins = {k: a.array() for k, a in case.inputs}
            if "amax" in ins:
                kw["amax"] = ins["amax"]
            q = quantize(ins["x"], case.fmt, **kw)
            got = {k: _lookup(q, k) for k, _ in case.expected}
        else:
            q = _dequant_input(case)
            got = {"y": dequantize(q, dtype=case.kwargs["dtype"], operand="rowwise")}
    except Exception as e:  # a failing backend is a failed case, with the reason
        return False, f"raised {type(e).__name__}: {e}"
    problems = []
    for key, want in case.expected:
        g = got[key]
        if g is None:
            problems.append(f"{key}: missing (None)")
            continue
        d = byte_diff(np.asarray(to_numpy(g)), want.array(), key)
        if d:
            problems.append(d)
    return (not problems), ("; ".join(problems) if problems else f"{len(case.expected)} arrays equal")


def run_all(quantize=None, dequantize=None, to_numpy=None, formats=None, names=None) -> list:
    """Check every golden case. Returns a list of (format, op, case_name, passed, detail).

    quantize(x, fmt, **options) / dequantize(q, dtype=..., operand=...) default to the reference's;
    to_numpy converts what they return to NumPy (default: identity). `formats` / `names` filter.
    """
    out = []
    for case in CASES:
        if formats is not None and case.fmt not in formats:
            continue
        if names is not None and case.name not in names:
            continue
        passed, detail = check_case(case, quantize, dequantize, to_numpy)
        out.append((case.fmt, case.op, case.name, passed, detail))
    return out

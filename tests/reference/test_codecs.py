"""Exhaustive element codecs and E8M0 scale rules (SPEC.md sections 2-4).

Expected values come from the bit fields of every code (tests/reference/spec_oracle.py) and from
exact rational arithmetic, never from ml_dtypes casts or from the reference itself.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import fp4kit
import spec_oracle as O
from fp4kit.reference import numerics as N

ELEMS = ("e4m3", "e5m2", "e2m3", "e3m2", "e2m1")
# SPEC section 1 / 3: element max, emax, NaN code, code width
TABLE = {"e4m3": (448.0, 8, 0x7F, 8), "e5m2": (57344.0, 15, 0x7F, 8), "e2m3": (7.5, 2, 0x1F, 6),
         "e3m2": (28.0, 4, 0x1F, 6), "e2m1": (6.0, 2, 0x7, 4)}
MX_OF = {"e4m3": "mxfp8_e4m3", "e5m2": "mxfp8_e5m2", "e2m3": "mxfp6_e2m3", "e3m2": "mxfp6_e3m2", "e2m1": "mxfp4_e2m1"}


def f32(v) -> np.ndarray:
    return np.asarray(v, dtype=np.float32)


def bits(a) -> np.ndarray:
    return f32(a).view(np.uint32)


def next_up(v):
    return np.nextafter(f32(v), np.float32(np.inf))


def next_down(v):
    return np.nextafter(f32(v), np.float32(-np.inf))


# ---------------------------------------------------------------------------------------------
# decode


@pytest.mark.parametrize("elem", ELEMS)
def test_every_code_decodes_from_its_bit_fields(elem, check_bytes):
    t = O.ELEMS[elem]
    codes = np.arange(1 << t.bits, dtype=np.uint8)
    want = f32([t.decode(int(c)) for c in codes])
    got = N.decode(codes, elem)
    # NaN codes must decode to NaN (any payload); everything else bit for bit (signed zeros included)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), f"NaN codes: {codes[np.isnan(got) != nan]}"
    check_bytes(np.where(nan, 0, got).astype(np.float32), np.where(nan, 0, want).astype(np.float32), f"decode {elem}")


def test_decode_spot_values():
    """A few values written out from SPEC section 1, independent of any bit-field code."""
    assert N.decode(np.uint8(0x7E), "e4m3") == 448 and np.isnan(N.decode(np.uint8(0x7F), "e4m3"))
    assert N.decode(np.uint8(0x01), "e4m3") == 2.0 ** -9 and N.decode(np.uint8(0x08), "e4m3") == 2.0 ** -6
    assert N.decode(np.uint8(0x7B), "e5m2") == 57344 and N.decode(np.uint8(0x7C), "e5m2") == np.inf
    assert N.decode(np.uint8(0x01), "e5m2") == 2.0 ** -16
    assert N.decode(np.uint8(0x1F), "e2m3") == 7.5 and N.decode(np.uint8(0x01), "e2m3") == 0.125
    assert N.decode(np.uint8(0x1F), "e3m2") == 28 and N.decode(np.uint8(0x01), "e3m2") == 0.0625
    assert [float(v) for v in N.decode(np.arange(8, dtype=np.uint8), "e2m1")] == [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    assert np.signbit(N.decode(np.uint8(0x8), "e2m1")) and np.signbit(N.decode(np.uint8(0x20), "e2m3"))


@pytest.mark.parametrize("elem", ELEMS)
def test_decode_agrees_with_ml_dtypes(elem):
    """A second opinion only (SPEC allows ml_dtypes for decoding)."""
    import ml_dtypes
    t = O.ELEMS[elem]
    ml = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2, "e2m3": ml_dtypes.float6_e2m3fn,
          "e3m2": ml_dtypes.float6_e3m2fn, "e2m1": ml_dtypes.float4_e2m1fn}[elem]
    codes = np.arange(1 << t.bits, dtype=np.uint8)
    a = codes.view(ml).astype(np.float32)
    b = N.decode(codes, elem)
    assert np.array_equal(a, b, equal_nan=True)


# ---------------------------------------------------------------------------------------------
# encode: every grid point, every midpoint and midpoint +- 1 fp32 ulp, specials


def _grid(elem):
    t = O.ELEMS[elem]
    return [(float(v), c) for v, c in t.grid]


def encode_cases(elem):
    """(fp32 inputs, expected codes) covering the whole positive and negative axis of `elem`."""
    t = O.ELEMS[elem]
    sign = t.sign
    xs, want = [], []

    def add(v, code):
        xs.append(v)
        want.append(code)

    grid = _grid(elem)
    for v, c in grid:                                   # every representable value, both signs
        add(v, c)
        add(-v, c | sign)
    for (v0, c0), (v1, c1) in zip(grid, grid[1:]):
        mid = (v0 + v1) / 2                             # exact in fp32 (few mantissa bits)
        even = c0 if c0 % 2 == 0 else c1
        for s, sb in ((1.0, 0), (-1.0, sign)):
            add(s * mid, even | sb)
            add(float(next_up(s * mid)) if s > 0 else float(next_down(s * mid)), c1 | sb)
            add(float(next_down(s * mid)) if s > 0 else float(next_up(s * mid)), c0 | sb)
    vmax, cmax = grid[-1]
    top_mid = vmax + (vmax - grid[-2][0]) / 2           # where the next (absent) value would round
    for v in (float(next_up(vmax)), top_mid, float(next_up(top_mid)), 2 * vmax, 1e30,
              float(np.finfo(np.float32).max), math.inf):
        add(v, cmax)                                    # saturation, never NaN or inf
        add(-v, cmax | sign)
    add(0.0, 0)
    add(-0.0, sign)                                     # the sign of zero is kept
    for v in (2.0 ** -149, 2.0 ** -126, 1e-30):         # fp32 subnormal / tiny inputs round to zero
        add(v, 0)
        add(-v, sign)                                   # ... with their sign
    add(math.nan, TABLE[elem][2])
    return f32(xs), np.array(want, dtype=np.uint8)


@pytest.mark.parametrize("elem", ELEMS)
def test_encode_exhaustive(elem, check_bytes):
    xs, want = encode_cases(elem)
    got = N.encode(xs, elem)
    check_bytes(got, want, f"encode {elem}",
                context=lambda i: f"y=0x{int(bits(xs[i])):08X} ({float(xs[i])!r})")


@pytest.mark.parametrize("elem", ELEMS)
def test_encode_negative_nan_gives_positive_code(elem):
    neg_nan = np.array([0xFFC00000, 0xFF800001, 0x7F800001], dtype=np.uint32).view(np.float32)
    assert (N.encode(neg_nan, elem) == TABLE[elem][2]).all()


@pytest.mark.parametrize("elem", ELEMS)
def test_encode_through_quantize(elem, check_bytes):
    """The same inputs through the public MX quantize: a block whose amax is the element max gets
    E = 127 under rceil (v = fp32(max * fp32(1/max)) rounds to 1.0 for every format), so y = x."""
    xs, want = encode_cases(elem)
    finite = np.isfinite(xs) & (np.abs(xs) <= TABLE[elem][0])   # keep the block amax at max
    xs, want = xs[finite], want[finite]
    n = len(xs)
    rows = -(-n // 31)
    x = np.zeros((rows, 32), np.float32)
    exp = np.zeros((rows, 32), np.uint8)
    x[:, 31] = TABLE[elem][0]
    exp[:, 31] = O.ELEMS[elem].max_code
    x[:, :31].reshape(-1)[:n] = xs
    exp[:, :31].reshape(-1)[:n] = want
    q = fp4kit.quantize(x, MX_OF[elem])
    assert (q.rowwise.scales == 127).all()
    codes = q.rowwise.data
    if elem == "e2m1":
        from fp4kit.reference.layouts import unpack_fp4
        codes = unpack_fp4(codes)
    check_bytes(codes, exp, f"quantize codes {elem}")


# ---------------------------------------------------------------------------------------------
# the NVFP4 E4M3 block scale: with a supplied amax A = 448, S_enc = fp32(2688 / 448) = 6 and
# mult = fp32(6 * fp32(1/6)) = fp32(1 + 2^-25) = 1, so the stored scale is encode_e4m3(block amax).


def test_nvfp4_mult_is_one_for_amax_448():
    s = np.float32(2688) / np.float32(448)
    assert s == 6 and s * (np.float32(1) / np.float32(6)) == 1


def test_nvfp4_e4m3_scale_exhaustive(check_bytes):
    xs, want = encode_cases("e4m3")
    keep = ~np.isnan(xs) & ~np.signbit(xs)            # block amaxes are >= 0 and never NaN
    b, want = xs[keep], want[keep]
    x = np.zeros((len(b), 16), np.float32)
    x[:, 0] = b
    q = fp4kit.quantize(x, "nvfp4", amax=np.array([448.0], np.float32))
    check_bytes(q.rowwise.scales[:, 0], want, "nvfp4 sf", context=lambda i: f"block amax {float(b[i])!r}")


def test_nvfp4_scale_pipeline_every_sf_code(check_bytes):
    """For every scale byte sf (blocks with amax decode(sf) under A = 448): the element codes follow
    enc = fp32(1 / fp32(decode(sf) * S_dec)) and dequantization follows final = fp32(fp32(sf * A) / 2688)."""
    e4 = O.ELEMS["e4m3"]
    sfs = list(range(0x01, 0x7F))
    x = np.zeros((len(sfs), 16), np.float32)
    vals = [0.0, 0.3, -0.7, 0.13, 0.22, -0.33, 0.49, 0.026, 0.9, -0.58, 0.42]  # fractions of the block max
    for r, sf in enumerate(sfs):
        top = e4.decode(sf)
        x[r, 0] = top
        x[r, 1:1 + len(vals)] = [float(np.float32(v * top)) for v in vals]
    A = 448.0
    q = fp4kit.quantize(x, "nvfp4", amax=np.array([A], np.float32))
    check_bytes(q.rowwise.scales[:, 0], np.array(sfs, np.uint8), "sf")
    want_codes, _ = O.nvfp4_operand([[float(v) for v in row] for row in x], A)
    check_bytes(q.rowwise.data, np.array([O.pack(r) for r in want_codes], np.uint8), "codes")
    y = fp4kit.dequantize(q)
    want_y = np.array([[O.dequant_nvfp4(c, sf, A) for c in row] for row, sf in zip(want_codes, sfs)], np.float32)
    check_bytes(y, want_y, "dequantized")


# ---------------------------------------------------------------------------------------------
# E8M0


def ceil_log2(v: Fraction) -> int:
    c = v.numerator.bit_length() - v.denominator.bit_length() - 1
    while Fraction(2) ** c < v:
        c += 1
    while Fraction(2) ** (c - 1) >= v:
        c -= 1
    return c


def floor_log2(v: Fraction) -> int:
    f = v.numerator.bit_length() - v.denominator.bit_length() + 1
    while Fraction(2) ** f > v:
        f -= 1
    return f


def rceil_math(v: float) -> int:
    """SPEC section 3: clamp(ceil(log2 v) + 127, 0, 254), every v <= 2^-127 giving 0."""
    if math.isnan(v):
        return 255
    if v == math.inf:
        return 254
    if v <= 2.0 ** -127:
        return 0
    return min(max(ceil_log2(Fraction(v)) + 127, 0), 254)


def boundary_values():
    """Every fp32 power of two 2^-149 .. 2^127, each +- 1 ulp, plus subnormal ratios and specials."""
    vs = []
    for e in range(-149, 128):
        p = np.float32(2.0 ** e)
        vs += [p, next_up(p), next_down(p)]
    # fp32-subnormal v: around 2^-127 (mantissa 0x400000) and other ratios
    for m in (1, 2, 3, 0x1FFFFF, 0x200000, 0x3FFFFF, 0x400000, 0x400001, 0x5FFFFF, 0x600000, 0x7FFFFF):
        vs.append(np.uint32(m).view(np.float32))
    vs += [np.float32(0), np.float32(np.inf), np.finfo(np.float32).max, np.float32(1.5), np.float32(3)]
    return f32(vs)


def test_e8m0_rceil_power_of_two_boundaries(check_bytes):
    v = boundary_values()
    want = np.array([rceil_math(float(a)) for a in v], np.uint8)
    check_bytes(N.e8m0_rceil(v), want, "rceil", context=lambda i: f"v=0x{int(bits(v[i])):08X}")


def test_e8m0_rceil_specials():
    assert N.e8m0_rceil(f32(np.nan)) == 255
    assert N.e8m0_rceil(f32(np.inf)) == 254
    assert N.e8m0_rceil(f32(0)) == 0
    assert N.e8m0_rceil(np.uint32(0x00400000).view(np.float32)) == 0      # 2^-127 exactly
    assert N.e8m0_rceil(np.uint32(0x00400001).view(np.float32)) == 1      # just above
    assert N.e8m0_rceil(np.uint32(0x7F000001).view(np.float32)) == 254    # ceil would be 255: clamped


@pytest.mark.parametrize("elem", ELEMS)
def test_e8m0_floor_power_of_two_boundaries(elem, check_bytes):
    emax = TABLE[elem][1]
    a = boundary_values()

    def floor_math(x: float) -> int:
        if x == math.inf:
            return 254
        if x < 2.0 ** -126:         # zero and fp32 subnormals: exponent field 0
            return 0
        return min(max(floor_log2(Fraction(x)) + 127 - emax, 0), 254)

    want = np.array([floor_math(float(x)) for x in a], np.uint8)
    check_bytes(N.e8m0_floor(a, elem), want, f"floor {elem}", context=lambda i: f"amax=0x{int(bits(a[i])):08X}")


@pytest.mark.parametrize("elem", ELEMS)
@pytest.mark.parametrize("rule", ("rceil", "floor"))
def test_e8m0_scale_through_quantize(elem, rule, check_bytes):
    """Block amaxes max * 2^k +- 1 ulp and fp32-subnormal amaxes through the public quantize;
    the expected scale comes from the spec oracle (fp32(amax * fp32(1/max)) then the bit rule)."""
    vmax = TABLE[elem][0]
    amaxes = []
    for k in range(-140, 128):
        if vmax * 2.0 ** k <= float(np.finfo(np.float32).max):
            p = np.float32(vmax * 2.0 ** k)
            amaxes += [p, next_up(p), next_down(p)]
    amaxes += [np.uint32(m).view(np.float32) for m in (1, 0x1FFFFF, 0x400000, 0x600000, 0x7FFFFF)]
    amaxes += [np.float32(0), np.finfo(np.float32).max, np.float32(np.inf)]
    a = f32(amaxes)
    x = np.zeros((len(a), 32), np.float32)
    x[:, 5] = a
    x[:, 6] = -a * np.float32(0.5)
    q = fp4kit.quantize(x, MX_OF[elem], scale_rule=rule)
    want = np.array([O.mx_scale(float(v), elem, rule) for v in a], np.uint8)
    check_bytes(q.rowwise.scales[:, 0], want, f"{rule} scales", context=lambda i: f"amax=0x{int(bits(a[i])):08X}")


def test_e8m0_decode_and_inverse_scale(check_bytes):
    E = np.arange(256)
    dec = N.e8m0_decode(E)
    assert np.isnan(dec[255])
    want = np.array([0x00400000] + [e << 23 for e in range(1, 255)], np.uint32)   # E = 0 is 2^-127
    check_bytes(dec[:255].view(np.uint32), want, "e8m0 decode")
    inv = N.e8m0_scale(E[:255])
    want_inv = np.array([(254 - e) << 23 if e < 254 else 0x00400000 for e in range(255)], np.uint32)
    check_bytes(inv.view(np.uint32), want_inv, "s_inv = 2^(127-E)")   # E = 254 -> 2^-127 (subnormal)


def test_recip_constants():
    """fp32(1 / element_max), e.g. 0x3B124925 for E4M3 (SPEC section 3)."""
    want = {"e4m3": 0x3B124925, "e5m2": 0x37924925, "e2m3": 0x3E088889, "e3m2": 0x3D124925, "e2m1": 0x3E2AAAAB}
    for k, v in want.items():
        assert int(bits(N.RECIP[k])) == v, k
        assert O.f32_bits(O.div(1.0, TABLE[k][0])) == v, k

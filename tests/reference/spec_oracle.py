"""An independent, scalar, exact-arithmetic model of SPEC.md, written for the tests only.

Nothing here imports ``fp4kit.reference``: values are Python ``Fraction``s (or floats where the
SPEC says float64), every fp32 / bf16 / fp16 rounding is an explicit round-half-even on an exact
rational, element grids are built from the bit fields of every code, and Philox is a plain-int
loop. It is slow (one element at a time) and only meant for small inputs, where it checks the
vectorised NumPy reference from a second, unrelated implementation of the same text.

Conventions: an fp32 value is a Python ``float`` holding an fp32-representable number (a double
holds every fp32 exactly), NaN and infinities included.
"""
from __future__ import annotations

import math
import struct
from fractions import Fraction

# ---------------------------------------------------------------------------------------------
# binary floating point: exact rounding of rationals

#            precision p (incl. hidden bit), emin (smallest normal exponent), emax
IEEE = {"float32": (24, -126, 127), "bfloat16": (8, -126, 127), "float16": (11, -14, 15)}


def _floor_log2(a: Fraction) -> int:
    """floor(log2 a) for a > 0, exactly."""
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    elif Fraction(2) ** (e + 1) <= a:
        e += 1
    return e


def _round_half_even(n: Fraction) -> int:
    f = math.floor(n)
    rem = n - f
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and f % 2 == 1):
        return f + 1
    return f


def rn(x, kind: str = "float32") -> float:
    """Round an exact value (Fraction / int / float, NaN and inf passed through) to `kind`, RNE,
    subnormals kept, overflow to inf. Returns a Python float. Zero keeps the sign of a float input."""
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x) or x == 0.0):
        return x
    x = Fraction(x)
    if x == 0:
        return 0.0
    p, emin, emax = IEEE[kind]
    s = -1 if x < 0 else 1
    a = abs(x)
    e = max(_floor_log2(a), emin)
    q = Fraction(2) ** (e - p + 1)
    r = _round_half_even(a / q) * q
    if r >= Fraction(2) ** (emax + 1):
        return s * math.inf
    if r == 0:
        return -0.0 if s < 0 else 0.0
    return s * float(r)


def f32_bits(v: float) -> int:
    return struct.unpack("<I", struct.pack("<f", v))[0]


def bits_f32(b: int) -> float:
    return struct.unpack("<f", struct.pack("<I", b & 0xFFFFFFFF))[0]


def half_bits(v: float, kind: str) -> int:
    """Bit pattern of a value already representable in bfloat16 / float16."""
    if kind == "float16":
        return struct.unpack("<H", struct.pack("<e", v))[0]
    if math.isnan(v):
        return 0x7FC0
    return f32_bits(v) >> 16


def mul(a: float, b: float) -> float:
    """fp32_RN(a * b) of two fp32 values (IEEE special cases)."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if math.isinf(a) or math.isinf(b):
        if a == 0 or b == 0:
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    if a == 0 or b == 0:
        return math.copysign(0.0, a) * math.copysign(1.0, b)
    return rn(Fraction(a) * Fraction(b))


def div(a: float, b: float) -> float:
    """fp32_RN(a / b) of two fp32 values (IEEE special cases)."""
    if math.isnan(a) or math.isnan(b) or (a == 0 and b == 0) or (math.isinf(a) and math.isinf(b)):
        return math.nan
    sign = math.copysign(1.0, a) * math.copysign(1.0, b)
    if math.isinf(a) or b == 0:
        return sign * math.inf
    if math.isinf(b) or a == 0:
        return sign * 0.0
    return rn(Fraction(a) / Fraction(b))


FLT_MAX = bits_f32(0x7F7FFFFF)

# ---------------------------------------------------------------------------------------------
# element types, from bit fields


class Elem:
    """A sign-magnitude minifloat: `ebits` exponent bits, `mbits` mantissa bits, `bias`."""

    def __init__(self, name, ebits, mbits, bias, nan_codes=(), inf_codes=()):
        self.name, self.ebits, self.mbits, self.bias = name, ebits, mbits, bias
        self.bits = 1 + ebits + mbits
        self.sign = 1 << (self.bits - 1)
        self.nan_codes, self.inf_codes = set(nan_codes), set(inf_codes)
        finite = [c for c in range(self.sign) if c not in self.nan_codes | self.inf_codes]
        self.grid = [(self.value(c), c) for c in finite]           # ascending in c and value
        self.max, self.max_code = self.grid[-1]
        # SPEC section 2: NaN -> the positive NaN code 0x7F (FP8), else the positive max code
        self.nan_code = 0x7F if self.nan_codes else self.max_code

    def value(self, code: int) -> Fraction:
        """Unsigned value of a code (sign bit ignored) from its exponent / mantissa fields."""
        code &= self.sign - 1
        e = code >> self.mbits
        m = code & ((1 << self.mbits) - 1)
        if e == 0:
            return Fraction(m, 1 << self.mbits) * Fraction(2) ** (1 - self.bias)
        return (1 + Fraction(m, 1 << self.mbits)) * Fraction(2) ** (e - self.bias)

    def decode(self, code: int) -> float:
        code &= (1 << self.bits) - 1
        mag = code & (self.sign - 1)
        neg = bool(code & self.sign)
        if mag in self.nan_codes:
            return math.nan
        if mag in self.inf_codes:
            return -math.inf if neg else math.inf
        v = float(self.value(mag))
        return -v if neg else v

    def encode(self, y: float) -> int:
        """SPEC section 2: nearest grid value, ties to the even code, saturating, sign kept."""
        if math.isnan(y):
            return self.nan_code
        neg = math.copysign(1.0, y) < 0
        a = abs(y)
        if a >= self.max:
            code = self.max_code
        else:
            a = Fraction(a)
            code = None
            for (v0, c0), (v1, c1) in zip(self.grid, self.grid[1:]):
                if v0 <= a <= v1:
                    mid = (v0 + v1) / 2
                    if a < mid:
                        code = c0
                    elif a > mid:
                        code = c1
                    else:
                        code = c0 if c0 % 2 == 0 else c1
                    break
        return code | (self.sign if neg else 0)

    def neighbours(self, a: Fraction):
        """(lo, hi, lo_code) with lo <= a < hi on the grid (0 <= a < max)."""
        for (v0, c0), (v1, _) in zip(self.grid, self.grid[1:]):
            if v0 <= a < v1:
                return v0, v1, c0
        raise ValueError(a)


ELEMS = {
    "e4m3": Elem("e4m3", 4, 3, 7, nan_codes=(0x7F,)),
    "e5m2": Elem("e5m2", 5, 2, 15, nan_codes=(0x7D, 0x7E, 0x7F), inf_codes=(0x7C,)),
    "e2m3": Elem("e2m3", 2, 3, 1),
    "e3m2": Elem("e3m2", 3, 2, 3),
    "e2m1": Elem("e2m1", 2, 1, 1),
}
# SPEC section 1: (element, block); section 3: emax_elem
FORMATS = {
    "mxfp8_e4m3": ("e4m3", 32), "mxfp8_e5m2": ("e5m2", 32), "mxfp6_e2m3": ("e2m3", 32),
    "mxfp6_e3m2": ("e3m2", 32), "mxfp4_e2m1": ("e2m1", 32), "nvfp4": ("e2m1", 16),
}
EMAX = {"e4m3": 8, "e5m2": 15, "e2m3": 2, "e3m2": 4, "e2m1": 2}

# ---------------------------------------------------------------------------------------------
# E8M0 (SPEC section 3)


def e8m0_rceil(v: float) -> int:
    if math.isnan(v):
        return 255
    if v == math.inf:
        return 254
    if v == 0:
        return 0
    b = f32_bits(v)
    e, m = (b >> 23) & 0xFF, b & 0x7FFFFF
    if m > 0 and e != 254 and not (e == 0 and m <= 0x400000):
        e += 1
    return e


def e8m0_floor(amax: float, elem: str) -> int:
    if amax == math.inf:
        return 254
    e = (f32_bits(amax) >> 23) & 0xFF
    return min(max(e - EMAX[elem], 0), 254)


def e8m0_value(E: int) -> float:
    """2^(E - 127); E = 255 is NaN."""
    if E == 255:
        return math.nan
    return float(Fraction(2) ** (E - 127))


def block_amax(vals) -> float:
    a = [abs(v) for v in vals if not math.isnan(v)]
    return max(a, default=0.0)


def mx_scale(amax: float, elem: str, rule: str) -> int:
    if rule == "rceil":
        R = div(1.0, float(ELEMS[elem].max))
        return e8m0_rceil(mul(amax, R))
    return e8m0_floor(amax, elem)

# ---------------------------------------------------------------------------------------------
# Philox4x32-10 and stochastic rounding (SPEC section 4)


def philox(ctr, key):
    c = list(ctr)
    k0, k1 = key
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [((p1 >> 32) ^ c[1] ^ k0) & 0xFFFFFFFF, p1 & 0xFFFFFFFF,
             ((p0 >> 32) ^ c[3] ^ k1) & 0xFFFFFFFF, p0 & 0xFFFFFFFF]
        k0, k1 = (k0 + 0x9E3779B9) & 0xFFFFFFFF, (k1 + 0xBB67AE85) & 0xFFFFFFFF
    return c


def sr_draw(e: int, seed: int, stream: int) -> int:
    n = e // 4
    return philox((n & 0xFFFFFFFF, n >> 32, stream, 0), (seed & 0xFFFFFFFF, seed >> 32))[e % 4]


def encode_sr(y: float, elem: str, r: int) -> int:
    t = ELEMS[elem]
    if math.isnan(y) or abs(y) >= t.max:
        return t.encode(y)
    neg = math.copysign(1.0, y) < 0
    a = Fraction(abs(y))
    lo, hi, code = t.neighbours(a)
    frac = (a - lo) / (hi - lo) * 2 ** 24
    if Fraction(r >> 8) < frac:
        code += 1
    return code | (t.sign if neg else 0)

# ---------------------------------------------------------------------------------------------
# quantize one operand (a list of rows of fp32 values); blocks along the row


def _blocks(row, block):
    return [row[i:i + block] for i in range(0, len(row), block)]


def mx_operand(rows, fmt, rule="rceil", rounding="nearest", seed=0, stream=0):
    """-> (codes: list of rows of unpacked codes, scales: list of rows of E8M0 codes)."""
    elem, block = FORMATS[fmt]
    codes, scales = [], []
    ncols = len(rows[0]) if rows else 0
    for i, row in enumerate(rows):
        crow, srow = [], []
        for j, blk in enumerate(_blocks(row, block)):
            E = mx_scale(block_amax(blk), elem, rule)
            s_inv = float(Fraction(2) ** (127 - E))
            srow.append(E)
            for k, x in enumerate(blk):
                y = mul(x, s_inv)
                if rounding == "stochastic":
                    crow.append(encode_sr(y, elem, sr_draw(i * ncols + j * block + k, seed, stream)))
                else:
                    crow.append(ELEMS[elem].encode(y))
        codes.append(crow)
        scales.append(srow)
    return codes, scales


def nvfp4_senc(A: float) -> float:
    s = div(2688.0, A)
    s = FLT_MAX if math.isnan(s) else min(s, FLT_MAX)
    if A == 0 or s == 0:
        s = 1.0
    return s


def nvfp4_operand(rows, A, tile_amax=None, rounding="nearest", seed=0, stream=0):
    """`A`: one fp32 amax, or a list (one per row). `tile_amax(i, j)` overrides the block amax."""
    e4m3, e2m1 = ELEMS["e4m3"], ELEMS["e2m1"]
    codes, scales = [], []
    ncols = len(rows[0]) if rows else 0
    for i, row in enumerate(rows):
        Ai = A[i] if isinstance(A, (list, tuple)) else A
        senc = nvfp4_senc(Ai)
        sdec = div(1.0, senc)
        mult = mul(senc, div(1.0, 6.0))
        crow, srow = [], []
        for j, blk in enumerate(_blocks(row, 16)):
            b = tile_amax(i, j) if tile_amax else block_amax(blk)
            sf = e4m3.encode(min(mul(b, mult), FLT_MAX))
            enc = min(div(1.0, mul(e4m3.decode(sf), sdec)), FLT_MAX)
            srow.append(sf)
            for k, x in enumerate(blk):
                y = mul(x, enc)
                if rounding == "stochastic":
                    crow.append(encode_sr(y, "e2m1", sr_draw(i * ncols + j * 16 + k, seed, stream)))
                else:
                    crow.append(e2m1.encode(y))
        codes.append(crow)
        scales.append(srow)
    return codes, scales


def tile_amax_fn(rows):
    """16x16 tile amax of a list of rows (NaN ignored, missing elements 0)."""
    def f(i, j):
        i0 = (i // 16) * 16
        vals = [v for r in rows[i0:i0 + 16] for v in r[j * 16:(j + 1) * 16]]
        return block_amax(vals)
    return f


def rht_group(v, mask: int):
    """SPEC section 4 RHT of 16 fp32 values -> 16 bf16-exact floats (float64 butterflies)."""
    w = [(-x if (mask >> k) & 1 else x) for k, x in enumerate(v)]
    for h in (1, 2, 4, 8):
        for k in range(16):
            if k & h == 0:
                w[k], w[k + h] = w[k] + w[k + h], w[k] - w[k + h]
    out = []
    for x in w:
        u = rn(rn(Fraction(0.25) * Fraction(x)) if math.isfinite(x) else x, "bfloat16")
        out.append(0.0 if u == 0 else u)
    return out


def pack(codes_row):
    return [(codes_row[2 * k] & 0xF) | ((codes_row[2 * k + 1] & 0xF) << 4) for k in range(len(codes_row) // 2)]


def swizzle_offset(i, j, cols):
    cp = -(-cols // 4) * 4
    return ((i // 128) * (cp // 4) + j // 4) * 512 + (i % 32) * 16 + ((i % 128) // 32) * 4 + j % 4


def dequant_mx(code, E, elem, out="float32"):
    return rn(mul(e8m0_value(E), ELEMS[elem].decode(code)), out)


def dequant_nvfp4(code, sf, A, out="float32"):
    final = mul(mul(ELEMS["e4m3"].decode(sf), A), div(1.0, 2688.0))
    return rn(mul(ELEMS["e2m1"].decode(code), final), out)


# ---------------------------------------------------------------------------------------------
# whole quantize / dequantize calls (NumPy only for input and output)

def _rows(a):
    return [[float(v) for v in r] for r in a]


def _u8(rows, width):
    import numpy as np
    return np.array(rows, dtype=np.uint8).reshape(len(rows), width)


def quantize(x, fmt, axis="rowwise", scale_layout="compact", scale_rule="rceil", amax=None, tile_2d=False,
             row_scaled=False, rht=False, rht_sign_mask=0xD7E8, rounding="nearest", seed=0):
    """Model of ``fp4kit.quantize`` for small inputs: {"rowwise.data": ndarray, ...}."""
    import numpy as np
    x = np.asarray(x)
    K = x.shape[-1]
    M = x.size // K if K else math.prod(x.shape[:-1])
    xf = x.astype(np.float32).reshape(M, K)
    out = {}
    for operand, stream in (("rowwise", 0), ("columnwise", 1)):
        if axis not in (operand, "both"):
            continue
        a = xf if operand == "rowwise" else xf.T
        rows = _rows(a)
        if operand == "columnwise" and rht:
            rows = [sum((rht_group(r[c:c + 16], rht_sign_mask) for c in range(0, len(r), 16)), []) for r in rows]
        R, C = len(rows), (len(rows[0]) if rows else a.shape[1])
        if fmt == "nvfp4":
            if amax is not None and not (operand == "columnwise" and (rht or row_scaled)):
                A = [float(v) for v in np.asarray(amax, np.float32)]
                A = A if row_scaled else A[0]
            elif row_scaled:
                A = [block_amax(r) for r in rows]
            else:
                A = block_amax([v for r in rows for v in r])
            codes, scales = nvfp4_operand(rows, A, tile_amax_fn(rows) if tile_2d else None, rounding, seed, stream)
            out[f"{operand}.amax"] = np.array(A if isinstance(A, list) else [A], dtype=np.float32)
            nb = -(-C // 16)
        else:
            codes, scales = mx_operand(rows, fmt, scale_rule, rounding, seed, stream)
            nb = -(-C // 32)
        packed = FORMATS[fmt][0] == "e2m1"
        data = [pack(r) for r in codes] if packed else codes
        out[f"{operand}.data"] = _u8(data, C // 2 if packed else C)
        sc = _u8(scales, nb)
        if scale_layout == "swizzled":
            rp, cp = -(-R // 128) * 128, -(-nb // 4) * 4
            flat = np.zeros(rp * cp, dtype=np.uint8)
            for i in range(R):
                for j in range(nb):
                    flat[swizzle_offset(i, j, nb)] = sc[i, j]
            sc = flat.reshape(rp, cp)
        out[f"{operand}.scales"] = sc
    return out


def dequantize(fmt, data, scales, amax, shape, dtype="float32"):
    """Model of dequantizing one operand with compact scales -> ndarray of `dtype`."""
    import numpy as np
    import ml_dtypes
    elem, block = FORMATS[fmt]
    R, C = math.prod(shape[:-1]), shape[-1]
    data = np.asarray(data).reshape(R, -1)
    ys = []
    for i in range(R):
        for c in range(C):
            if elem == "e2m1":
                b = int(data[i, c // 2])
                code = b & 0xF if c % 2 == 0 else b >> 4
            else:
                code = int(data[i, c])
            sf = int(scales[i, c // block])
            if fmt == "nvfp4":
                A = float(np.asarray(amax, np.float32).reshape(-1)[0 if np.size(amax) == 1 else i])
                ys.append(dequant_nvfp4(code, sf, A, dtype))
            else:
                ys.append(dequant_mx(code, sf, elem, dtype))
    np_dt = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[dtype]
    return np.array(ys, dtype=np.float64).astype(np_dt).reshape(shape)

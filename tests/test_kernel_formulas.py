"""NumPy emulations of arithmetic shortcuts in the CUDA kernels, checked against the reference on
the CPU (the GPU tests check the kernels themselves, including an exhaustive run over all 2^32 fp32
inputs of every element encoder).

E2M1 (cuda_src/common/codecs.cuh e2m1_idx_bits / e2m1_append): the magnitude code of
a = |y| is bits(min(fp32(a + (2^23 - 2)), fp32(a / 2 + 2^23), 2^23 + 3)) - (bits(2^23) - 4) (the
fp32 ulp changes from 1/2 to 1 at 2^23, so the first candidate covers [0, 4)), and 8 codes go into a
word by multiply-adds with the offsets subtracted once at the end (mod 2^32).

Eight E2M1 codes per word (codecs.cuh e2m1_pack8_product): magnitudes by multiply-adds, signs
gathered by byte permutes with sign replication (prmt), modelled below with the PTX semantics.

E8M0 rceil without branches (codecs.cuh e8m0_rceil_code) and the E4M3 NaN fix-up after the
satfinite cvt (encode4): integer formulas, checked here against the reference.

FP6 on Hopper (codecs.cuh fp6_via_fp8x4): y clamped to [-max, max] (NaN -> +max), times 2^-k (k = 6
for E2M3, 12 for E3M2), converted by the FP8 cvt of the same mantissa width (E4M3 / E5M2), sign moved
from bit 7 to bit 5. The FP8 conversion is modelled by the reference FP8 encoder, which the GPU
self-test proves equal to the hardware cvt for every fp32 input.
"""
from __future__ import annotations

import numpy as np

from fp4kit.reference import numerics

M = 8388608.0   # 2^23
OFFSET = 0x4AFFFFFC   # bits(2^23) - 4


def _f32(x):
    return np.asarray(x, dtype=np.float32)


def _fminf(a, b):
    """CUDA fminf / FMNMX: a NaN operand (quiet or signalling, either sign) yields the other one.
    (np.fmin may return a signalling NaN's quieted copy depending on the array position.)"""
    a, b = np.broadcast_arrays(_f32(a), _f32(b))
    return np.where(np.isnan(a), b, np.where(np.isnan(b), a, np.minimum(a, b))).astype(np.float32)


def _fmaxf(a, b):
    a, b = np.broadcast_arrays(_f32(a), _f32(b))
    return np.where(np.isnan(a), b, np.where(np.isnan(b), a, np.maximum(a, b))).astype(np.float32)


def _fminf_inf(y):
    return _fminf(y, np.float32(np.inf))


def e2m1_idx_bits(y: np.ndarray) -> np.ndarray:
    """fp32 bits of 2^23 + magnitude code, as the kernel computes them (y: float32 array)."""
    with np.errstate(invalid="ignore", over="ignore"):
        s = _fminf_inf(y)                  # NaN -> +inf (fminf keeps the number)
        a = np.abs(s).astype(np.float64)
        # a + (M - 2), fmaf(a, 0.5, M): exact in float64 (or, for a < 2^-29, far from a tie), then one
        # rounding to fp32
        g = _f32(a + (M - 2.0))
        f = _f32(a * 0.5 + M)
        m = _fminf(_fminf(g, f), np.float32(M + 3.0))
    return m.view(np.uint32)


def e2m1_idx_bits_below7(y: np.ndarray) -> np.ndarray:
    """codecs.cuh e2m1_idx_bits_below7: the same two candidates without the saturation one."""
    a = np.abs(_f32(y)).astype(np.float64)
    return _fminf(_f32(a + (M - 2.0)), _f32(a * 0.5 + M)).view(np.uint32)


def e2m1_codes_product(y: np.ndarray) -> np.ndarray:
    """e2m1_append_product's code: the sign bit straight from y's bits (no NaN guard)."""
    sign = y.view(np.uint32) >> np.uint32(31)
    return ((e2m1_idx_bits(y) - np.uint32(OFFSET)) + sign * np.uint32(8)).astype(np.uint8)


def e2m1_codes(y: np.ndarray) -> np.ndarray:
    """e2m1_append's code: NaN -> +inf first, then the product form."""
    return e2m1_codes_product(_fminf_inf(y))


def _test_values() -> np.ndarray:
    rng = np.random.default_rng(0)
    parts = [
        (np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)),              # every bfloat16
        rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32),  # random fp32
    ]
    # every fp32 with exponent 2^-3 .. 2^2 and any of the top 12 mantissa bits, low bits 0 / 1 / all
    e = np.arange(124, 130, dtype=np.uint32)[:, None, None]
    m = (np.arange(1 << 12, dtype=np.uint32) << np.uint32(11))[None, :, None]
    low = np.array([0, 1, 0x3FF, 0x400, 0x7FF], dtype=np.uint32)[None, None, :]
    parts.append(((e << np.uint32(23)) | m | low).reshape(-1))
    # the grid's midpoints (ties) and their neighbours, and the saturation edge
    mids = np.array([0.25, 0.75, 1.25, 1.75, 2.0, 2.5, 3.5, 4.0, 5.0, 6.0, 6.5, 7.0, 1e30, 0.0], dtype=np.float32)
    mb = mids.view(np.uint32).astype(np.int64)
    near = np.concatenate([mb + d for d in (-2, -1, 0, 1, 2)])
    parts.append(near[near >= 0].astype(np.uint32))
    specials = np.array([0x7F800000, 0x7FC00000, 0x7F800001, 0x7FFFFFFF, 0x00000001, 0x007FFFFF,
                         0x00800000, 0x7F7FFFFF], dtype=np.uint32)
    parts.append(specials)
    b = np.concatenate(parts)
    return np.concatenate([b, b ^ np.uint32(0x80000000)]).view(np.float32)   # both signs


def test_e2m1_fma_form_equals_reference_encode():
    y = _test_values()
    got = e2m1_codes(y)
    exp = numerics.encode(y, "e2m1")
    bad = np.flatnonzero(got != exp)
    assert bad.size == 0, [(hex(int(y.view(np.uint32)[i])), int(got[i]), int(exp[i])) for i in bad[:5]]


def test_e2m1_below7_form_equals_full_form_below_7_only():
    """The NVFP4 tile kernels drop the saturation candidate in blocks where every |y| < 7 and no y is
    NaN (quantize_tile.cuh below7_ok): there the two-candidate minimum is the code; at 7 (a / 2 =
    3.5 rounds to even, M + 4) and above it is not, so the bound matters."""
    y = _test_values()
    with np.errstate(invalid="ignore"):
        ok = np.abs(y) < 7.0
    yb = y[ok]
    assert yb.size > 1 << 20
    assert np.array_equal(e2m1_idx_bits_below7(yb), e2m1_idx_bits(yb))
    assert np.array_equal((e2m1_idx_bits_below7(yb) - np.uint32(OFFSET)).astype(np.uint8) & 7,
                          numerics.encode(yb, "e2m1") & 7)
    edge = np.array([7.0, -7.0, 7.5, 100.0, np.inf], dtype=np.float32)
    assert (e2m1_idx_bits_below7(edge) - np.uint32(OFFSET) > 7).all()


def test_e2m1_product_form_needs_only_canonical_nan():
    """encode_seg appends y = fp32_RN(v * mul) without the NaN guard (e2m1_append_product): the sign
    comes straight from y's bits, which is right because GPU arithmetic returns the canonical NaN
    0x7FFFFFFF. With that NaN the codes equal the reference; a NaN with the sign bit set would give
    0xF instead of 0x7, which is why the GPU tests feed -NaN inputs through the kernels."""
    rng = np.random.default_rng(2)
    v = (rng.standard_normal(1 << 16) * np.exp2(rng.integers(-8, 8, 1 << 16))).astype(np.float32)
    v[:64] = np.nan
    v[:32] = -np.nan
    with np.errstate(invalid="ignore", over="ignore"):
        y = v * np.float32(0.75)
    canon = np.where(np.isnan(y), np.uint32(0x7FFFFFFF).view(np.float32), y).astype(np.float32)
    got = e2m1_codes_product(canon)
    assert np.array_equal(got.astype(np.uint8), numerics.encode(y, "e2m1"))
    raw = e2m1_codes_product(y)
    assert set(raw.astype(np.uint8)[:32].tolist()) == {0xF}


def prmt(a, b, sel):
    """PTX prmt.b32 (default mode) on uint32 arrays: result byte n is byte sel[4n+2:4n] of the
    64-bit value b:a, or, when bit 3 of that selector nibble is set, that byte's top bit
    replicated over all 8 bits."""
    src = (np.asarray(b, dtype=np.uint64) << np.uint64(32)) | np.asarray(a, dtype=np.uint64)
    out = np.zeros(np.broadcast(src, 0).shape, dtype=np.uint64)
    for n in range(4):
        nib = (sel >> (4 * n)) & 0xF
        byte = (src >> np.uint64(8 * (nib & 7))) & np.uint64(0xFF)
        if nib & 8:
            byte = np.where(byte & np.uint64(0x80), np.uint64(0xFF), np.uint64(0))
        out |= byte << np.uint64(8 * n)
    return out.astype(np.uint32)


def e2m1_pack8_product(y: np.ndarray) -> np.ndarray:
    """codecs.cuh e2m1_pack8_product on rows of 8 float32 values (NaNs with the sign bit clear)."""
    acc = np.zeros(y.shape[0], dtype=np.uint64)
    for i in range(7, -1, -1):
        acc = (acc * 16 + e2m1_idx_bits(y[:, i])) % (1 << 32)
    acc = ((acc - (OFFSET * 0x11111111) % (1 << 32)) % (1 << 32)).astype(np.uint32)
    b = y.view(np.uint32)
    ev = prmt(prmt(b[:, 0], b[:, 2], 0xFB), prmt(b[:, 4], b[:, 6], 0xFB), 0x5410)
    od = prmt(prmt(b[:, 1], b[:, 3], 0xFB), prmt(b[:, 5], b[:, 7], 0xFB), 0x5410)
    return acc | (ev & np.uint32(0x08080808)) | (od & np.uint32(0x80808080))


def test_e2m1_pack8_equals_nibble_packing():
    """Every test value in every position of the word (canonical NaNs, as fp32 products give)."""
    y = _test_values()
    y = np.where(np.isnan(y), np.uint32(0x7FFFFFFF).view(np.float32), y).astype(np.float32)
    n = y.size // 8 * 8
    codes = numerics.encode(y, "e2m1").astype(np.uint32)
    for shift in range(8):   # rotate so that each value visits each of the 8 positions
        yy = np.roll(y, shift)[:n].reshape(-1, 8)
        cc = np.roll(codes, shift)[:n].reshape(-1, 8)
        exp = np.zeros(yy.shape[0], dtype=np.uint32)
        for i in range(8):
            exp |= cc[:, i] << np.uint32(4 * i)
        got = e2m1_pack8_product(yy)
        bad = np.flatnonzero(got != exp)
        assert bad.size == 0, (shift, [(hex(int(got[i])), hex(int(exp[i]))) for i in bad[:3]])
    # the sign gather must see each element's own sign: swapping two selectors is caught
    yy = np.array([[-1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]], dtype=np.float32)
    b = yy.view(np.uint32)
    wrong = prmt(prmt(b[:, 2], b[:, 0], 0xFB), prmt(b[:, 4], b[:, 6], 0xFB), 0x5410)
    assert (wrong & np.uint32(0x08080808))[0] != (prmt(prmt(b[:, 0], b[:, 2], 0xFB), prmt(b[:, 4], b[:, 6], 0xFB), 0x5410) & np.uint32(0x08080808))[0]


def e8m0_rceil_branch_free(v: np.ndarray) -> np.ndarray:
    """codecs.cuh e8m0_rceil_code (sm_90 form)."""
    a = v.view(np.uint32) & np.uint32(0x7FFFFFFF)
    e = (np.where(a <= 0x400000, np.uint32(0), a).astype(np.uint64) + 0x7FFFFF) >> np.uint64(23)
    return np.where(a > 0x7F800000, 255, np.minimum(e, 254)).astype(np.uint8)


def test_e8m0_rceil_branch_free_equals_reference():
    """Every exponent field with mantissas 0, 1, 2^22 - 1, 2^22, 2^22 + 1, all ones and random
    ones, plus random fp32 of both signs' magnitudes: the kernel sees v = amax * R >= +0 or NaN."""
    rng = np.random.default_rng(3)
    e = np.arange(256, dtype=np.uint32)[:, None]
    m = np.concatenate([np.array([0, 1, 2, 0x3FFFFF, 0x400000, 0x400001, 0x7FFFFE, 0x7FFFFF], dtype=np.uint32),
                        rng.integers(0, 1 << 23, 64, dtype=np.uint32)])[None, :]
    bits = np.concatenate([((e << np.uint32(23)) | m).reshape(-1),
                           rng.integers(0, 1 << 31, 1 << 20, dtype=np.uint64).astype(np.uint32)])
    v = bits.view(np.float32)
    got = e8m0_rceil_branch_free(v)
    exp = numerics.e8m0_rceil(v)
    bad = np.flatnonzero(got != exp)
    assert bad.size == 0, [(hex(int(bits[i])), int(got[i]), int(exp[i])) for i in bad[:5]]
    # -NaN as NaN: 255
    assert e8m0_rceil_branch_free(np.array([0xFFC00000], dtype=np.uint32).view(np.float32))[0] == 255


def test_e4m3_nan_fixup_equals_byte_rule():
    """encode4<E4M3>: w & ~(((w & 0x7F7F7F7F) + 0x01010101) & 0x80808080) turns bytes of magnitude
    0x7F (NaN, either sign) into 0x7F and leaves every other byte alone, in every position (no
    carry between bytes): all 256 byte values in each of the 4 positions, with random neighbours."""
    rng = np.random.default_rng(4)
    for pos in range(4):
        byte = np.repeat(np.arange(256, dtype=np.uint32), 64)
        other = rng.integers(0, 1 << 32, byte.size, dtype=np.uint64).astype(np.uint32)
        w = (other & ~np.uint32(0xFF << (8 * pos))) | (byte << np.uint32(8 * pos))
        got = w & ~(((w & np.uint32(0x7F7F7F7F)) + np.uint32(0x01010101)) & np.uint32(0x80808080))
        for k in range(4):
            b = (w >> np.uint32(8 * k)) & np.uint32(0xFF)
            exp = np.where((b & 0x7F) == 0x7F, np.uint32(0x7F), b)
            assert np.array_equal((got >> np.uint32(8 * k)) & np.uint32(0xFF), exp), (pos, k)


FP6_VIA_FP8 = {"e2m3": ("e4m3", 7.5, 2.0 ** -6), "e3m2": ("e5m2", 28.0, 2.0 ** -12)}


def fp6_via_fp8_codes(y: np.ndarray, elem: str) -> np.ndarray:
    fp8, mx, down = FP6_VIA_FP8[elem]
    c = _fmaxf(_fminf(y, np.float32(mx)), np.float32(-mx))        # fminf(NaN, max) = max
    s = c * np.float32(down)                                      # one fp32 RN multiply
    w = numerics.encode(s, fp8)
    return (w & np.uint8(0x1F)) | ((w >> np.uint8(2)) & np.uint8(0x20))


def test_fp6_via_fp8_cvt_equals_reference_encode():
    y = _test_values()
    # and every fp32 in [2^-8, 2^6) with any of the top 12 mantissa bits, low bits 0 / 1 / half / all
    e = np.arange(119, 133, dtype=np.uint32)[:, None, None]
    m = (np.arange(1 << 12, dtype=np.uint32) << np.uint32(11))[None, :, None]
    low = np.array([0, 1, 0x3FF, 0x400, 0x401, 0x7FF], dtype=np.uint32)[None, None, :]
    dense = ((e << np.uint32(23)) | m | low).reshape(-1)
    y = np.concatenate([y, dense.view(np.float32), (dense | np.uint32(0x80000000)).view(np.float32)])
    for elem in FP6_VIA_FP8:
        got = fp6_via_fp8_codes(y, elem)
        exp = numerics.encode(y, elem)
        bad = np.flatnonzero(got != exp)
        assert bad.size == 0, (elem, [(hex(int(y.view(np.uint32)[i])), int(got[i]), int(exp[i])) for i in bad[:5]])
    # a mutation (no clamp: values above max are not saturated) must be caught
    fp8, mx, down = FP6_VIA_FP8["e2m3"]
    with np.errstate(invalid="ignore"):
        w = numerics.encode(y * np.float32(down), fp8)
    assert not np.array_equal((w & np.uint8(0x1F)) | ((w >> np.uint8(2)) & np.uint8(0x20)), numerics.encode(y, "e2m3"))


def e2m1_sr_magnitude(y: np.ndarray, r: np.ndarray) -> np.ndarray:
    """codecs.cuh e2m1_sr_magnitude (y float32, r uint32 draws): SPEC's "float(r >> 8) < (a - lo) /
    (hi - lo) * 2^24" as code = (X + 2^24 - 1 - (r >> 8)) / 2^24 + 2 j' with X = ceil(a * 2^(25 - j')),
    a = min(|y|, 6) and j' from a's exponent field; X + 2^24 - 1 is the low word of
    fma_ru(a, 2^(25 - j'), 2^52 + 2^24 - 1), exact in float64 as modelled here."""
    a = _fminf(np.abs(y), np.float32(6.0))
    j = np.maximum(a.view(np.uint32).astype(np.int64) >> 23, 127) - 127
    x = np.ceil(a.astype(np.float64) * np.exp2(25.0 - j)).astype(np.int64) + 0xFFFFFF
    return (((x - (r.astype(np.int64) >> 8) + (j << 25)) & 0xFFFFFFFF) >> 24)


def e2m1_sr_magnitude_neg(y: np.ndarray, nr: np.ndarray) -> np.ndarray:
    """codecs.cuh e2m1_sr_magnitude<true>: nr is the complement of the draw (philox_draws16 gives even
    elements so), X + 2^25 is the low word of fma_ru(a, 2^(25 - j'), 2^52 + 2^25), and the sum
    X + 2^25 + (nr >> 8) + (127 + j') 2^25 wraps to X + 2^24 - 1 - (draw >> 8) + j' 2^25."""
    a = _fminf(np.abs(y), np.float32(6.0))
    j = np.maximum(a.view(np.uint32).astype(np.int64) >> 23, 127)
    x = np.ceil(a.astype(np.float64) * np.exp2(25.0 - (j - 127))).astype(np.int64) + (1 << 25)
    return (((x + (nr.astype(np.int64) >> 8) + (j << 25)) & 0xFFFFFFFF) >> 24)


def e2m1_sr_codes(y: np.ndarray, r: np.ndarray) -> np.ndarray:
    """e2m1_pack8_stochastic's code of each element: magnitude and y's sign bit (products: NaN +)."""
    return (e2m1_sr_magnitude(y, r) | ((y.view(np.uint32) >> np.uint32(28)) & np.uint32(8))).astype(np.uint8)


def _sr_cases():
    """(y, r): every test value with random draws, and with draws on both sides of its threshold
    R = (r >> 8) vs F = (a - lo) / (hi - lo) * 2^24: floor(F) - 1 .. ceil(F) + 1, random low 8 bits."""
    rng = np.random.default_rng(5)
    y = _test_values()
    y = np.where(np.isnan(y), np.uint32(0x7FFFFFFF).view(np.float32), y).astype(np.float32)
    a = np.abs(y)
    with np.errstate(invalid="ignore", over="ignore"):
        ok = a < np.float32(6.0)
        lo, hi, _ = numerics.grid_neighbours(np.where(ok, a, np.float32(0)), "e2m1")
        f = ((np.where(ok, a, 0) - lo) / (hi - lo)).astype(np.float64) * 2.0 ** 24
    ys, rs = [y], [rng.integers(0, 1 << 32, y.size, dtype=np.uint64).astype(np.uint32)]
    for base in (np.floor(f), np.ceil(f)):
        for d in (-1, 0, 1):
            big_r = np.clip(base + d, 0, (1 << 24) - 1).astype(np.uint64)
            low = rng.integers(0, 256, y.size, dtype=np.uint64)
            ys.append(y)
            rs.append(((big_r << np.uint64(8)) | low).astype(np.uint32))
    # the extreme draws
    for rv in (0, 0xFF, 0xFFFFFF00, 0xFFFFFFFF):
        ys.append(y)
        rs.append(np.full(y.size, rv, dtype=np.uint32))
    return np.concatenate(ys), np.concatenate(rs)


def test_e2m1_stochastic_integer_form_equals_reference():
    y, r = _sr_cases()
    got = e2m1_sr_codes(y, r)
    exp = numerics.encode_sr(y, "e2m1", r)
    bad = np.flatnonzero(got != exp)
    assert bad.size == 0, [(hex(int(y.view(np.uint32)[i])), hex(int(r[i])), int(got[i]), int(exp[i]))
                           for i in bad[:5]]
    # the draws reach both sides of the thresholds, and mutations are caught: rounding to nearest
    # instead of up (the ceiling matters below 1/4), and a draw of 23 bits (r >> 9)
    assert 0 < np.mean(got != numerics.encode(y, "e2m1")) < 1
    a = _fminf(np.abs(y), np.float32(6.0))
    j = np.maximum(a.view(np.uint32).astype(np.int64) >> 23, 127) - 127
    for x in (np.rint(a.astype(np.float64) * np.exp2(25.0 - j)).astype(np.int64) + 0xFFFFFF,
              np.ceil(a.astype(np.float64) * np.exp2(25.0 - j)).astype(np.int64) + 0xFFFFFF + (r >> 8) - (r >> 9)):
        wrong = ((x - (r.astype(np.int64) >> 8) + (j << 25)) & 0xFFFFFFFF) >> 24
        assert not np.array_equal(wrong, e2m1_sr_magnitude(y, r))
    # the complemented-draw form gives the same codes from ~r (and a missing 2^25 in its addend, or
    # the plain draw in place of its complement, is caught)
    nr = ~r
    assert np.array_equal(e2m1_sr_magnitude_neg(y, nr), e2m1_sr_magnitude(y, r))
    x = np.ceil(a.astype(np.float64) * np.exp2(25.0 - j)).astype(np.int64)
    assert not np.array_equal(((x + (nr.astype(np.int64) >> 8) + ((j + 127) << 25)) & 0xFFFFFFFF) >> 24,
                              e2m1_sr_magnitude(y, r))
    assert not np.array_equal(e2m1_sr_magnitude_neg(y, r), e2m1_sr_magnitude(y, r))


def test_e2m1_pack8_stochastic_places_codes_and_signs():
    """e2m1_pack8_stochastic<true> (the tile kernels' form): magnitudes by acc * 16 + code from the
    last element down (even elements from their complemented draws), signs by e2m1_signs8 (the
    permutes of e2m1_pack8_product); every value visits every position. (<false>, the rows kernels'
    form, takes every draw plain: e2m1_sr_magnitude, tested above.)"""
    y, r = _sr_cases()
    n = y.size // 8 * 8
    codes = numerics.encode_sr(y, "e2m1", r).astype(np.uint32)
    for shift in (0, 3, 5):
        yy = np.roll(y, shift)[:n].reshape(-1, 8)
        rr = np.roll(r, shift)[:n].reshape(-1, 8)
        cc = np.roll(codes, shift)[:n].reshape(-1, 8)
        acc = np.zeros(yy.shape[0], dtype=np.uint64)
        for i in range(7, -1, -1):   # even i: the complemented draw (philox_draws16) and <true>
            m = e2m1_sr_magnitude_neg(yy[:, i], ~rr[:, i]) if i % 2 == 0 else e2m1_sr_magnitude(yy[:, i], rr[:, i])
            acc = (acc * 16 + m.astype(np.uint64)) % (1 << 32)
        b = yy.view(np.uint32)
        ev = prmt(prmt(b[:, 0], b[:, 2], 0xFB), prmt(b[:, 4], b[:, 6], 0xFB), 0x5410)
        od = prmt(prmt(b[:, 1], b[:, 3], 0xFB), prmt(b[:, 5], b[:, 7], 0xFB), 0x5410)
        got = acc.astype(np.uint32) | (ev & np.uint32(0x08080808)) | (od & np.uint32(0x80808080))
        exp = np.zeros(yy.shape[0], dtype=np.uint32)
        for i in range(8):
            exp |= cc[:, i] << np.uint32(4 * i)
        assert np.array_equal(got, exp), shift


# ---- MXFP4 from bfloat16 on packed pairs (codecs.cuh e2m1_pack8_bf16) -------------------------------

BF16_MAX = float.fromhex("0x1.fep127")


def bf16_round(v: np.ndarray) -> np.ndarray:
    """IEEE round-to-nearest-even of exact float64 values to bfloat16 (8 significant bits, fp32's
    exponent range, subnormals kept, overflow to inf), returned as float64; NaN stays NaN."""
    v = np.asarray(v, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        a = np.abs(v)
        e = np.floor(np.log2(np.where((a > 0) & np.isfinite(a), a, 1.0)))
        e = np.where(np.exp2(e) > a, e - 1, e)           # log2 rounding at binade edges
        e = np.where(np.exp2(e + 1) <= a, e + 1, e)
        q = np.exp2(np.maximum(e, -126.0) - 7.0)          # the bf16 quantum of a's binade
        r = np.rint(v / q) * q                            # exact scaling, ties to even
        r = np.where(np.abs(r) > BF16_MAX, np.copysign(np.inf, v), r)
        return np.where(np.isfinite(v), r, v)


def bf16_bits(v: np.ndarray) -> np.ndarray:
    """bfloat16 bits of bf16-representable float64 values; NaN -> the canonical 0x7FFF."""
    with np.errstate(invalid="ignore", over="ignore"):
        f = np.asarray(v, dtype=np.float64).astype(np.float32)   # exact for bf16 values
    b = (f.view(np.uint32) >> np.uint32(16)).astype(np.uint32)
    return np.where(np.isnan(f), np.uint32(0x7FFF), b)


def bf16_min(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """min.bf16x2 on one half: a NaN operand yields the other (both NaN: NaN)."""
    return np.where(np.isnan(a), b, np.where(np.isnan(b), a, np.minimum(a, b)))


def _pair_min_candidate(x: np.ndarray, s: float, p: float, rnd, bits, c: float):
    """(bits of min(rnd(a + c - 2), rnd(a / 2 + c), c + 3), bits of y) for y = rnd(rnd(x p) s),
    a = |y| (mul.rn / add.rn / fma.rn / min on one half of a bf16x2 / f16x2 word): x as float64
    values of the 16-bit type, rnd / bits its rounding and bits, c = 128 (bfloat16) or 1024 (float16)."""
    with np.errstate(invalid="ignore", over="ignore"):
        y = rnd(rnd(x * p) * s)                                 # canonical NaN for NaN x
        a = np.abs(y)
        g = bf16_min(bf16_min(rnd(a + (c - 2.0)), rnd(a * 0.5 + c)), c + 3.0)
    return bits(g), bits(y)


def _pair_codes(g: np.ndarray, y: np.ndarray, offset: int) -> np.ndarray:
    """Codes from a candidate's bits g (offset subtracted) and y's sign bit (bit 15)."""
    sign = (y >> np.uint32(15)) & np.uint32(1)
    return ((g - np.uint32(offset)) | (sign << np.uint32(3))).astype(np.uint8)


def _bf16_min_candidate(x_bits: np.ndarray, s_inv: float):
    """_pair_min_candidate for bfloat16: x as bf16 bits in uint32, y = bf16(x * s_inv)."""
    with np.errstate(invalid="ignore"):   # signalling NaN patterns
        x = (x_bits.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    return _pair_min_candidate(x, s_inv, 1.0, bf16_round, bf16_bits, 128.0)


def e2m1_bf16_codes(x_bits: np.ndarray, s_inv: float) -> np.ndarray:
    """e2m1_pack8_bf16's code of each element: x bf16 bits (uint32 < 2^16), scale 2^(127 - E)."""
    return _pair_codes(*_bf16_min_candidate(x_bits, s_inv), 0x42FC)


def e2m1_pack8_bf16(q: np.ndarray, s_inv: float) -> np.ndarray:
    """codecs.cuh e2m1_pack8_bf16 on rows of 4 words q[k] = (e_k, e_{k+4}) (bf16 bits in uint32)."""
    acc = np.zeros(q.shape[0], dtype=np.uint64)
    y = [None] * 4
    for k in range(3, -1, -1):
        (g_lo, y_lo), (g_hi, y_hi) = (_bf16_min_candidate((q[:, k] >> np.uint32(16 * h)) & np.uint32(0xFFFF), s_inv)
                                      for h in (0, 1))
        acc = (acc * 16 + (g_lo.astype(np.uint64) | (g_hi.astype(np.uint64) << np.uint64(16)))) % (1 << 32)
        y[k] = (y_lo | (y_hi << np.uint32(16))).astype(np.uint32)
    ev, od = prmt(y[0], y[2], 0x7351), prmt(y[1], y[3], 0x7351)
    acc = ((acc - (0x42FC * 0x11111111) % (1 << 32)) % (1 << 32)).astype(np.uint32)
    return acc + (((ev >> np.uint32(4)) & np.uint32(0x08080808)) | (od & np.uint32(0x80808080)))


def _every_scale(x_bits: np.ndarray, xf: np.ndarray, codes) -> None:
    """codes(x_bits, s_inv) equals SPEC's encode(fp32_RN(x * s_inv)) for every x (xf: its fp32
    values) under every scale code E = 0..254 (s_inv = 2^(127 - E); E = 254 is the subnormal 2^-127)."""
    for E in range(255):
        s = np.uint32((254 - E) << 23 if E < 254 else 0x00400000).view(np.float32)
        with np.errstate(invalid="ignore", over="ignore"):
            exp = numerics.encode(xf * s, "e2m1")
        got = codes(x_bits, float(s))
        bad = np.flatnonzero(got != exp)
        assert bad.size == 0, (E, [(hex(int(x_bits[i])), int(got[i]), int(exp[i])) for i in bad[:5]])


def test_e2m1_bf16x2_form_equals_reference_for_every_bf16_and_scale():
    """Every bfloat16 x (both signs, NaNs, infinities, subnormals) under every scale code E = 0..254
    (s_inv = 2^(127 - E); E = 254 is the subnormal 2^-127): the packed-pair code equals SPEC's
    encode(fp32_RN(x * s_inv)). The kernels only meet |x| <= the block's amax, but every pair is
    checked. A mutated form (no third candidate) is caught."""
    x_bits = np.arange(1 << 16, dtype=np.uint32)
    xf = (x_bits << np.uint32(16)).view(np.float32)
    _every_scale(x_bits, xf, e2m1_bf16_codes)
    with np.errstate(invalid="ignore", over="ignore"):
        y = bf16_round(xf.astype(np.float64))
        a = np.abs(y)
        wrong = bf16_bits(bf16_min(bf16_round(a + 126.0), bf16_round(a * 0.5 + 128.0))) - np.uint32(0x42FC)
    assert not np.array_equal(wrong.astype(np.uint8) & np.uint8(7), numerics.encode(xf, "e2m1") & np.uint8(7))


def test_e2m1_pack8_bf16_places_codes_and_signs():
    """e2m1_pack8_bf16's accumulation (pairs (e_k, e_{k+4}), offsets subtracted once) and its sign
    permutes: random bf16 words, including NaN / inf / negative zero, under several scales."""
    rng = np.random.default_rng(6)
    n = 1 << 14
    q = rng.integers(0, 1 << 32, (n, 4), dtype=np.uint64).astype(np.uint32)
    specials = np.array([0x7FC0, 0xFFC0, 0x7F80, 0xFF80, 0x8000, 0x0000, 0x0001, 0x8001, 0x40C0, 0xC0A0],
                        dtype=np.uint32)
    q[: specials.size * 4, 0] = np.repeat(specials, 4) | (np.tile(specials, 4) << np.uint32(16))
    for E in (0, 100, 127, 130, 200, 254):
        s = float(np.uint32((254 - E) << 23 if E < 254 else 0x00400000).view(np.float32))
        got = e2m1_pack8_bf16(q, s)
        exp = np.zeros(n, dtype=np.uint32)
        for k in range(4):
            for h, i in ((0, k), (1, k + 4)):
                c = e2m1_bf16_codes((q[:, k] >> np.uint32(16 * h)) & np.uint32(0xFFFF), s).astype(np.uint32)
                exp |= c << np.uint32(4 * i)
        bad = np.flatnonzero(got != exp)
        assert bad.size == 0, (E, [(hex(int(got[i])), hex(int(exp[i]))) for i in bad[:3]])


# ---- MXFP4 from float16 on packed pairs (codecs.cuh e2m1_pack8_f16, h2_scales) ----------------------

def f16_round(v: np.ndarray) -> np.ndarray:
    """IEEE round-to-nearest-even of exact float64 values to float16 (NumPy's conversion: one
    rounding, subnormals kept, overflow to inf), returned as float64; NaN stays NaN."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.asarray(v, dtype=np.float64).astype(np.float16).astype(np.float64)


def f16_bits(v: np.ndarray) -> np.ndarray:
    """float16 bits of float16-representable float64 values; NaN -> the canonical 0x7FFF."""
    with np.errstate(invalid="ignore", over="ignore"):
        f = np.asarray(v, dtype=np.float64).astype(np.float16)
    return np.where(np.isnan(f), np.uint32(0x7FFF), f.view(np.uint16).astype(np.uint32))


def h2_scales(s_inv: float) -> tuple[float, float]:
    """codecs.cuh h2_scales: (s, p) with y = (x * p) * s, both float16 values (or NaN)."""
    big = s_inv > 32768.0
    s = min(s_inv / 32768.0, 32768.0) if big else s_inv
    s = 2.0 ** -24 if s < 2.0 ** -24 else s
    return s, (32768.0 if big else 1.0)


def e2m1_f16_codes(x_bits: np.ndarray, s_inv: float) -> np.ndarray:
    """e2m1_pack8_f16's code of each element (y = f16(f16(x p) s) with h2_scales' (s, p)): x float16
    bits (uint32 < 2^16), scale 2^(127 - E)."""
    s, p = h2_scales(s_inv)
    with np.errstate(invalid="ignore"):
        x = x_bits.astype(np.uint16).view(np.float16).astype(np.float64)
    return _pair_codes(*_pair_min_candidate(x, s, p, f16_round, f16_bits, 1024.0), 0x63FC)


def test_e2m1_f16x2_form_equals_reference_for_every_f16_and_scale():
    """Every float16 x (both signs, NaNs, infinities, subnormals) under every scale code E = 0..254:
    the packed-pair code (with h2_scales' split of multipliers beyond float16's range) equals SPEC's
    encode(fp32_RN(x * s_inv)). A mutated form (one multiply by s_inv clamped to float16) is caught."""
    x_bits = np.arange(1 << 16, dtype=np.uint32)
    with np.errstate(invalid="ignore"):
        xf = x_bits.astype(np.uint16).view(np.float16).astype(np.float32)
    _every_scale(x_bits, xf, e2m1_f16_codes)
    with np.errstate(invalid="ignore", over="ignore"):   # E = 100: s_inv = 2^27 taken as 65504
        y = f16_round(xf.astype(np.float64) * 65504.0)
        a = np.abs(y)
        wrong = f16_bits(bf16_min(bf16_min(f16_round(a + 1022.0), f16_round(a * 0.5 + 1024.0)), 1027.0)) - np.uint32(0x63FC)
        exp = numerics.encode(xf * np.float32(2.0 ** 27), "e2m1")
    assert not np.array_equal(wrong.astype(np.uint8) & np.uint8(7), exp & np.uint8(7))


# ---- FP6 -> bfloat16 / float16 without the fp32 stage (dequantize_op.cuh dq_fp6x2) ----------------

_FP6_DIRECT = {  # (elem, out): (shift of the code's bits 4..0, 2^K as a 16-bit pattern)
    ("e2m3", "bfloat16"): (4, 0x7E80), ("e3m2", "bfloat16"): (5, 0x7D80),
    ("e2m3", "float16"): (7, 0x7400), ("e3m2", "float16"): (8, 0x6C00)}


def _half_values(h: np.ndarray, out: str) -> np.ndarray:
    """float64 values of 16-bit patterns (uint32 < 2^16) of bfloat16 or float16."""
    h = np.asarray(h, dtype=np.uint32)
    if out == "bfloat16":
        return (h << np.uint32(16)).view(np.float32).astype(np.float64)
    return h.astype(np.uint16).view(np.float16).astype(np.float64)


def dq_fp6_mult_x2(E: int, out: str) -> int:
    """dequantize_op.cuh dq_fp6_mult_x2 of the E8M0 multiplier 2^(E - 127) (E = 0: 2^-127): bf16x2
    bits (bf2_scale: the fp32 bits' top half, twice), or f16x2 bits within 2^-24 .. 2^15, else 0."""
    m = numerics.e8m0_decode(E)
    if out == "bfloat16":
        return (int(numerics.f32_bits(m)) >> 16) * 0x00010001
    if m > 32768.0 or m < 2.0 ** -24:
        return 0
    return int(np.float16(m).view(np.uint16)) * 0x00010001


def dq_fp6x2(w: np.ndarray, sel: int, m2: int, elem: str, out: str, k2: int | None = None) -> np.ndarray:
    """dequantize_op.cuh dq_fp6x2: two codes of each word (byte selector sel) placed as 16-bit
    patterns, times 2^K, times the multiplier (each product one RN rounding of the exact value)."""
    sh, k = _FP6_DIRECT[(elem, out)]
    k = k if k2 is None else k2
    rnd = bf16_round if out == "bfloat16" else f16_round
    bits = bf16_bits if out == "bfloat16" else f16_bits
    x = prmt(w, np.uint32(0), sel)
    mag = np.uint32((0x1F << sh) | (0x1F << (sh + 16)))
    raw = ((x << np.uint32(sh)) & mag) | ((x << np.uint32(10)) & np.uint32(0x80008000))
    res = np.zeros_like(raw)
    for half in (0, 1):
        v = _half_values((raw >> np.uint32(16 * half)) & np.uint32(0xFFFF), out)
        y = rnd(rnd(v * _half_values(np.uint32(k), out)) * _half_values(np.uint32(m2 & 0xFFFF), out))
        res |= bits(y) << np.uint32(16 * half)
    return res


def test_fp6_direct_16bit_dequantize_equals_reference_for_every_code_and_scale():
    """Every FP6 code byte (bits 7..6 set too, ignored as decode does) in every byte position, under
    every finite E8M0 scale: dq_fp6x2 equals SPEC's to_out(fp32_RN(decode(code) * 2^(E - 127)))
    for bfloat16 and float16 out (float16 only where dq_fp6_mult_x2 takes the multiplier: the other
    scales take the fp32 path). A wrong 2^K is caught."""
    c = np.arange(256, dtype=np.uint32)
    w = c | ((c * 7 + 3) % 256 << np.uint32(8)) | ((c * 13 + 5) % 256 << np.uint32(16)) | ((255 - c) << np.uint32(24))
    w = w.astype(np.uint32)
    taken = {"bfloat16": 0, "float16": 0}
    for elem in ("e2m3", "e3m2"):
        for out in ("bfloat16", "float16"):
            for E in range(255):
                m2 = dq_fp6_mult_x2(E, out)
                if m2 == 0:
                    assert out == "float16" and not -24 <= E - 127 <= 15, E
                    continue
                taken[out] += 1
                mult = numerics.e8m0_decode(E)
                for j, sel in ((0, 0x4140), (1, 0x4342)):
                    got = dq_fp6x2(w, sel, m2, elem, out)
                    for half in (0, 1):
                        code = ((w >> np.uint32(8 * (2 * j + half))) & np.uint32(0x3F)).astype(np.uint8)
                        with np.errstate(over="ignore"):
                            want = numerics.from_f32(numerics.decode(code, elem) * mult, out).view(np.uint16)
                        g = (got >> np.uint32(16 * half)) & np.uint32(0xFFFF)
                        bad = np.flatnonzero(g != want)
                        assert bad.size == 0, (elem, out, E, j, half, [(int(code[i]), hex(int(g[i])), hex(int(want[i])))
                                                                       for i in bad[:4]])
    assert taken == {"bfloat16": 2 * 255, "float16": 2 * 40}
    wrong = dq_fp6x2(w, 0x4140, dq_fp6_mult_x2(127, "bfloat16"), "e2m3", "bfloat16", k2=0x7F007F00)
    assert not np.array_equal(wrong, dq_fp6x2(w, 0x4140, dq_fp6_mult_x2(127, "bfloat16"), "e2m3", "bfloat16"))


def test_grouped_rows_direct_block_map_covers_each_members_blocks_once():
    """grouped.cu group_quantize_rows_direct: CTA b takes block row br = (b km) >> kp (the host's
    div_magic of tiles_k) of the members' 64-row tile bands, band br >> lp, and block
    ((band's index in its member) << lp) + (br & (2^lp - 1)), (b - br tiles_k) of its member, with
    log2 BR = (R == 4 ? 10 : 9) - lw and tiles_k by a shift. Emulated over the launcher's grid
    (fp4kit._cuda_grouped._rows_direct_grid) for members of every size class: the CTAs that do not
    exit take every block of the single-tensor rows kernel over each member (fp4kit._plan.rows_blocks)
    exactly once, and no CTA reads a band descriptor past group_meta's (rows // 64 + G + 1)."""
    from fp4kit import _cuda_grouped as cg
    from fp4kit._plan import div_magic, rows_blocks, rows_lw, rows_stack

    rng = np.random.default_rng(7)
    for dtype, ext in (("float32", False), ("bfloat16", False), ("bfloat16", True)):   # ext: the _sr / full kernels
        for K in (127, 128, 200, 256, 512, 1040, 7168):
            lw, R = rows_lw(K), rows_stack(ext, dtype)
            if not cg.rows_direct(ext, dtype, True, True, 5, K, 10**6):
                assert R * (256 >> lw) > 64, (dtype, K)
                continue
            lbr = (10 if R == 4 else 9) - lw
            assert 1 << lbr == R * (256 >> lw) <= 64
            lp = 6 - lbr
            tiles_k = (K + (16 << lw) - 1) >> (lw + 4)
            assert tiles_k == -(-K // (16 << lw))
            km, kp = div_magic(tiles_k)
            for first in ([0, 1, 63, 64, 65, 0, 300, 128], list(rng.integers(0, 200, 12))):
                G, rows = len(first), sum(first) + 9          # 9 slack rows, as device dims allow
                bands = [(g, j) for g, m in enumerate(first) for j in range(-(-m // 64))]
                n_desc = rows // 64 + G + 1
                grid = cg._rows_direct_grid(K, rows, G, dtype, ext)
                seen = {}
                for b in range(grid):
                    br = (b * km) >> kp
                    assert br == b // tiles_k
                    band = br >> lp
                    assert band < n_desc
                    if band >= len(bands):
                        continue                               # M = 0: past every band
                    g, j = bands[band]
                    bq = (j << lp) + (br & ((1 << lp) - 1))
                    if bq << lbr >= first[g]:
                        continue                               # past the member's last row
                    key = (g, bq * tiles_k + (b - br * tiles_k))
                    assert key not in seen, key
                    seen[key] = b
                for g, m in enumerate(first):
                    got = sorted(bl for (h, bl) in seen if h == g)
                    assert got == list(range(rows_blocks(m, K, R, lw))), (dtype, K, g, m)

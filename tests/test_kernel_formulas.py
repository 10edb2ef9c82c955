"""NumPy emulations of arithmetic shortcuts in the CUDA kernels, checked against the reference on
the CPU (the GPU tests check the kernels themselves, including an exhaustive run over all 2^32 fp32
inputs of every element encoder).

E2M1 (cuda_src/common/codecs.cuh e2m1_idx_bits / e2m1_append): the magnitude code of
a = |y| is bits(min(fp32(a + (2^23 - 2)), fp32(a / 2 + 2^23), 2^23 + 3)) - (bits(2^23) - 4) (the
fp32 ulp changes from 1/2 to 1 at 2^23, so the first candidate covers [0, 4)), and 8 codes go into a
word by multiply-adds with the offsets subtracted once at the end (mod 2^32).

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


def e2m1_sign(y: np.ndarray) -> np.ndarray:
    s = _fminf_inf(y)
    return s.view(np.uint32) >> np.uint32(31)                 # umulhi(bits, 2)


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


def test_e2m1_multiply_add_packing_equals_nibble_packing():
    rng = np.random.default_rng(1)
    y = (rng.standard_normal((4096, 8)) * np.exp2(rng.integers(-4, 4, (4096, 8)))).astype(np.float32)
    y[0, :3] = [np.nan, -np.nan, -0.0]
    acc = np.zeros(4096, dtype=np.uint64)
    for i in range(7, -1, -1):   # appended from the last element down, as encode_seg does
        acc = (acc * 16 + e2m1_sign(y[:, i]).astype(np.uint64) * 8 + e2m1_idx_bits(y[:, i])) % (1 << 32)
    word = (acc - (OFFSET * 0x11111111) % (1 << 32)) % (1 << 32)
    codes = numerics.encode(y, "e2m1").astype(np.uint64)
    exp = np.zeros(4096, dtype=np.uint64)
    for i in range(8):
        exp |= codes[:, i] << np.uint64(4 * i)
    assert np.array_equal(word, exp)


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

"""Guards found by hand mutation testing of the reference: each test pins a SPEC rule that a
plausible one-line change of the reference broke without any other CPU test failing. Every
expectation below is derived by hand from SPEC.md (comments show the derivation), not taken from
the reference itself.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import fp4kit
from fp4kit.reference.layouts import swizzle, swizzled_offset
from fp4kit.reference.nvfp4 import s_enc
from fp4kit.reference.rht import rht_transform

# ---------------------------------------------------------------------------------------------
# SPEC section 4, RHT: u_j = bf16_RN(fp32_RN(0.25 * w_j)) -- two roundings, fp32 first.
#
# One column of x holds v_0 = 4, v_1 = 2^-6, v_2 = 2^-28 (all bf16-exact), the rest 0. Bits 0..2
# of both masks below are clear (0xD7E8 = ...1000), so s_0 = s_1 = s_2 = +1 and
#   0.25 * w_j = 1 + (-1)^(j&1) 2^-8 + (-1)^((j>>1)&1) 2^-30        (exact in float64)
# j even: 1 + 2^-8 +- 2^-30 -> fp32 1 + 2^-8 (2^-30 < half an fp32 ulp) -> a bf16 tie between
#         1 and 1 + 2^-7 -> even -> 1.0 (0x3F80). Rounding float64 straight to bf16 would give
#         1 + 2^-7 (0x3F81) for j % 4 == 0: the fp32 step matters.
# j odd:  1 - 2^-8 +- 2^-30 -> fp32 1 - 2^-8 -> bf16 1 - 2^-8 = 0.99609375 (0x3F7F).

_RHT_EXPECTED = np.array([0x3F80, 0x3F7F] * 8, np.uint16)


def _rht_input(cols: int) -> np.ndarray:
    x = np.zeros((16, cols), ml_dtypes.bfloat16)
    x[0, 0], x[1, 0], x[2, 0] = 4.0, 2.0 ** -6, 2.0 ** -28
    return x


@pytest.mark.parametrize("mask", [0, 0xD7E8])
def test_rht_rounds_to_fp32_before_bf16(mask, check_bytes):
    u = rht_transform(_rht_input(1), mask)
    assert u.shape == (1, 16) and u.dtype == np.dtype(ml_dtypes.bfloat16)
    check_bytes(u.view(np.uint16)[0], _RHT_EXPECTED, "rht_transform")


@pytest.mark.parametrize("mask", [0, 0xD7E8])
def test_rht_columnwise_amax_uses_double_rounded_values(mask, check_bytes):
    x = _rht_input(2)                                  # column 1 is all zeros -> u = +0
    q = fp4kit.reference.quantize(x, "nvfp4", axis="both", rht=True, rht_sign_mask=mask)
    # columnwise amax = max |u| = 1.0 (not 1.0078125); rowwise keeps the plain amax 4.0
    check_bytes(q.columnwise.amax, np.array([1.0], np.float32), "columnwise.amax")
    check_bytes(q.rowwise.amax, np.array([4.0], np.float32), "rowwise.amax")
    # column 1 of x: every u is +0 -> codes 0 (a -0 would give 0x8 nibbles)
    check_bytes(q.columnwise.data[1], np.zeros(8, np.uint8), "columnwise.data[1]")


# ---------------------------------------------------------------------------------------------
# SPEC section 6: compact (i, j) of an (R, C) matrix lives at
#   ((i // 128) * (Cp // 4) + j // 4) * 512 + (i % 32) * 16 + ((i % 128) // 32) * 4 + j % 4
# Worked by hand for R = 300, C = 10 (Cp = 12, Cp // 4 = 3):
#   (0, 0) -> 0;   (0, 5) -> (0*3 + 1)*512 + 1 = 513;   (33, 2) -> 1*16 + 1*4 + 2 = 22;
#   (129, 5) -> (1*3 + 1)*512 + 1*16 + 0 + 1 = 2065;   (140, 4) -> (1*3 + 1)*512 + 12*16 = 2240;
#   (299, 9) -> (2*3 + 2)*512 + 11*16 + 1*4 + 1 = 4277;   (5, 11 is padding) -- not asked.

_SWZ_CASES = [((0, 0), 0), ((0, 5), 513), ((33, 2), 22), ((129, 5), 2065), ((140, 4), 2240), ((299, 9), 4277)]


def test_swizzled_offset_hand_values():
    i = np.array([c[0][0] for c in _SWZ_CASES])
    j = np.array([c[0][1] for c in _SWZ_CASES])
    want = np.array([c[1] for c in _SWZ_CASES], np.int64)
    np.testing.assert_array_equal(swizzled_offset(i, j, 10), want)


@pytest.mark.parametrize("shape", [(300, 10), (257, 13), (128, 8), (1, 5)])
def test_swizzled_offset_is_where_swizzle_puts_each_entry(shape):
    r, c = shape
    rng = np.random.default_rng(r * 100 + c)
    compact = rng.integers(1, 256, size=shape, dtype=np.uint8)          # non-zero: padding is 0
    flat = swizzle(compact).reshape(-1)
    ii, jj = np.meshgrid(np.arange(r), np.arange(c), indexing="ij")
    off = swizzled_offset(ii, jj, c)
    assert len(np.unique(off)) == r * c                                  # one byte per entry
    np.testing.assert_array_equal(flat[off], compact)
    rest = np.ones(flat.size, bool)
    rest[off.reshape(-1)] = False
    assert not flat[rest].any()                                          # every other byte is padding 0


# ---------------------------------------------------------------------------------------------
# SPEC section 4: S_enc = fp32_RN(2688 / A); min(S_enc, FLT_MAX) with NaN -> FLT_MAX;
# 1 where A == 0 or S_enc == 0.
#   NaN -> FLT_MAX (0x7F7FFFFF); 0 -> 1 (0x3F800000); +inf -> 2688/inf = 0 -> 1;
#   6 -> 448 (0x43E00000); 2^-149 -> inf -> FLT_MAX; 2688 -> 1; 1 -> 2688 (0x45280000).

def test_s_enc_special_amax_values(check_bytes):
    A = np.array([np.nan, 0.0, np.inf, 6.0, 2.0 ** -149, 2688.0, 1.0], np.float32)
    want = np.array([0x7F7FFFFF, 0x3F800000, 0x3F800000, 0x43E00000, 0x7F7FFFFF, 0x3F800000, 0x45280000],
                    np.uint32)
    check_bytes(np.asarray(s_enc(A), np.float32).view(np.uint32), want, "s_enc")

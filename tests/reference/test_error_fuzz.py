"""SPEC section 8 as a property: whatever the arguments, the public functions return a result or
raise TypeError / ValueError (naming an argument), never another exception. Hypothesis draws every
argument from a pool of valid values and of wrong types, wrong dtypes, shapes, signs, sizes and
spellings (the table-driven cases are in test_errors.py); runs on the CPU, so in CI."""
from __future__ import annotations

import os
import re

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import fp4kit

SETTINGS = settings(max_examples=int(os.environ.get("FP4KIT_ERROR_FUZZ_EXAMPLES", "300")), deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))

_rng = np.random.default_rng(0)
_X = _rng.standard_normal((64, 64)).astype(np.float32)

# values that are wrong for almost every argument, and some that are right for a few
ODD = [None, True, False, 0, 1, -1, 2, 7, 2**70, -2**70, 1.5, float("nan"), float("inf"), "", "x", "rowwise",
       "ROWWISE", "swizzled", "floor", "stochastic", "nvfp4", b"rowwise", [], [1], [1, 2], (3,), {"a": 1},
       object(), np.int64(3), np.float32(2.0), np.bool_(True), np.array(1), np.array([1.0], np.float32),
       np.array([-1.0], np.float32), np.array([np.nan], np.float32), np.array([1.0], np.float64),
       np.array([1, 2], np.int64), np.zeros((0,), np.float32), np.ones((64,), np.float32), 1j]

INPUTS = [_X, _X.astype(np.float16), _X.astype(ml_dtypes.bfloat16), _X[:, :63], _X[:63], _X.T, _X[::2],
          _X.reshape(4, 16, 64), np.zeros((0, 64), np.float32), np.zeros((64, 0), np.float32), np.float32(1.0),
          np.zeros((), np.float32), _X.astype(np.float64), _X.astype(np.int32), _X.astype(np.complex64),
          _X.astype(">f4"), [[1.0, 2.0]], "x", None, np.array([None] * 4), _X.astype(ml_dtypes.float8_e4m3fn),
          np.ma.masked_array(_X), _X[:, :1]]

QUANTIZE_KW = ["axis", "scale_layout", "scale_rule", "amax", "tile_2d", "row_scaled", "rht", "rht_sign_mask",
               "rounding", "seed"]
VALID = {"axis": ["rowwise", "columnwise", "both"], "scale_layout": ["compact", "swizzled"],
         "scale_rule": ["rceil", "floor"], "amax": [None, np.array([3.0], np.float32)], "tile_2d": [False, True],
         "row_scaled": [False, True], "rht": [False, True], "rht_sign_mask": [0xD7E8, 0],
         "rounding": ["nearest", "stochastic"], "seed": [0, 2**64 - 1]}
FORMATS = list(fp4kit.FORMATS) + ["NVFP4", "mxfp8", "", None, 3, fp4kit.FORMATS["nvfp4"]]


def _arg(name):
    return st.sampled_from(VALID.get(name, []) + ODD)


def _must_name_something(err: Exception):
    msg = str(err)
    assert msg and re.match(r"^[\w\[\]\.\(\)'\" /,=-]+:", msg), f"message does not start with what it is about: {msg!r}"


def _only_clear_errors(fn):
    try:
        return fn()
    except (TypeError, ValueError) as e:
        _must_name_something(e)
        return None


@SETTINGS
@given(x=st.sampled_from(INPUTS), fmt=st.sampled_from(FORMATS),
       kw=st.dictionaries(st.sampled_from(QUANTIZE_KW), st.deferred(lambda: st.one_of(*[_arg(n) for n in QUANTIZE_KW])),
                          max_size=4))
def test_quantize_raises_only_clear_errors(x, fmt, kw):
    q = _only_clear_errors(lambda: fp4kit.quantize(x, fmt, **kw))
    if q is None:
        return
    assert isinstance(q, fp4kit.QuantizedTensor)
    for dtype in ["float32", "bfloat16", "float16", "float64", None, 3, "f4"]:
        for operand in ["rowwise", "columnwise", "both", None, 0]:
            _only_clear_errors(lambda: fp4kit.dequantize(q, dtype=dtype, operand=operand))


@SETTINGS
@given(x=st.sampled_from(INPUTS + [_X.reshape(-1), np.zeros(0, np.float32)]), fmt=st.sampled_from(FORMATS),
       num_groups=st.sampled_from([None, None, 1, 2, 4, 0, -1, 3.0, "2", True, [2], 2**70]),
       first_dims=st.sampled_from([None, None, [32, 32], [64], [0, 64, 0], [16] * 4, [-1, 65], [32.0, 32], [True, 63],
                                   "64", 64, 16, 0, -3, np.array([32, 32]), np.array([32, 32], np.int32),
                                   np.array([[32, 32]]), [2**70], [], [[32], [32]], [None]]),
       last_dims=st.sampled_from([None, None, [64], [32, 32], [64] * 64, [0, 4096], [-64], [1.0], "x", 64, np.array([64])]),
       kw=st.dictionaries(st.sampled_from(QUANTIZE_KW + ["dbias", "max_elements", "bogus"]),
                          st.sampled_from(ODD + ["both", "swizzled", 4096, 0]), max_size=3))
def test_group_quantize_raises_only_clear_errors(x, fmt, num_groups, first_dims, last_dims, kw):
    g = _only_clear_errors(lambda: fp4kit.group_quantize(x, fmt, num_groups=num_groups, first_dims=first_dims,
                                                         last_dims=last_dims, **kw))
    if g is None:
        return
    assert isinstance(g, fp4kit.GroupedQuantizedTensor)
    for i in [0, -1, len(g), -len(g) - 1, 1.0, "0", None, slice(0, 1), np.int64(0), True]:
        try:
            g[i]
        except IndexError:          # a list's: out of range (what iteration relies on)
            assert isinstance(i, (int, np.integer)) and not -len(g) <= i < len(g), i
        except (TypeError, ValueError) as e:
            _must_name_something(e)
    for dtype in ["float32", "bfloat16", "float64", None]:
        for operand in ["rowwise", "columnwise", "x"]:
            _only_clear_errors(lambda: fp4kit.group_dequantize(g, dtype=dtype, operand=operand))


@SETTINGS
@given(a=st.sampled_from(ODD + INPUTS[:8] + [np.zeros((3, 5), np.uint8), np.ones((128, 4), np.uint8),
                                            np.ones((130, 7), np.uint8), np.ones((128, 4), np.int8),
                                            np.ones((2, 3, 4), np.uint8), np.ones((256, 8), np.uint8)[::2]]),
       shape=st.sampled_from([(3, 5), (128, 4), (0, 0), (-1, 4), (129, 4), (3.0, 5), "3,5", None, (3,), (1, 2, 3),
                              [3, 5], (np.int64(3), 5), (True, 4), (2**70, 1)]))
def test_swizzle_functions_raise_only_clear_errors(a, shape):
    s = _only_clear_errors(lambda: fp4kit.swizzle_scales(a))
    if s is not None:
        assert isinstance(s, np.ndarray) and s.dtype == np.uint8
    u = _only_clear_errors(lambda: fp4kit.unswizzle_scales(a, shape))
    if u is not None:
        assert isinstance(u, np.ndarray) and u.dtype == np.uint8


_Q = {fmt: fp4kit.quantize(_X, fmt, axis="both") for fmt in fp4kit.FORMATS}
_Q["nvfp4-rs"] = fp4kit.quantize(_X, "nvfp4", axis="both", row_scaled=True)
_Q["nvfp4-rht"] = fp4kit.quantize(_X.astype(ml_dtypes.bfloat16), "nvfp4", axis="both", rht=True)
_Q["mxfp8-row"] = fp4kit.quantize(_X[:, :32], "mxfp8_e4m3")
_Q["mxfp4-3d"] = fp4kit.quantize(_X.reshape(4, 16, 64), "mxfp4_e2m1", axis="both")


@SETTINGS
@given(a=st.sampled_from(list(_Q) + ["odd"]), b=st.sampled_from(list(_Q) + ["odd"]),
       a_operand=st.sampled_from(["rowwise", "columnwise", "both", None, 1]),
       b_operand=st.sampled_from(["rowwise", "columnwise", "x"]), odd=st.sampled_from(ODD))
def test_qmatmul_raises_only_clear_errors(a, b, a_operand, b_operand, odd):
    qa = _Q.get(a, odd)
    qb = _Q.get(b, odd)
    r = _only_clear_errors(lambda: fp4kit.qmatmul(qa, qb, a_operand=a_operand, b_operand=b_operand))
    if r is not None:
        assert isinstance(r, np.ndarray) and r.dtype == np.float32


@pytest.mark.parametrize("fn", ["compare", "error_report"])
def test_compare_functions_take_odd_arguments(fn):
    """compare / error_report of mismatched or odd arguments: a report or a clear error."""
    f = getattr(fp4kit, fn)
    for got in [_Q["nvfp4"], _Q["mxfp8_e4m3"], None, 3, "x", _X]:
        for exp in [_Q["nvfp4"], _Q["mxfp4-3d"], None, _X]:
            _only_clear_errors(lambda: f(got, exp))

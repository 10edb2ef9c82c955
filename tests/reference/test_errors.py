"""Every bad argument raises TypeError / ValueError naming the argument, the expectation and the value
(SPEC.md section 8), through the public API and the reference alike."""
from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest

import fp4kit

BF16 = ml_dtypes.bfloat16
X = np.zeros((32, 32), np.float32)
XB = X.astype(BF16)
F32 = np.float32

QUANTIZE = [fp4kit.quantize, fp4kit.reference.quantize]

# (id, args, kwargs, exception, match)
QUANTIZE_ERRORS = [
    ("dtype_float64", (X.astype(np.float64), "nvfp4"), {}, TypeError, r"x: expected dtype float32, bfloat16 or float16, got float64"),
    ("dtype_int32", (X.astype(np.int32), "mxfp8_e4m3"), {}, TypeError, r"x: expected dtype .* got int32"),
    ("dtype_uint8", (X.astype(np.uint8), "mxfp8_e4m3"), {}, TypeError, r"x: expected dtype .* got uint8"),
    ("zero_dim", (np.array(1.0, F32), "nvfp4"), {}, ValueError, r"x: expected an array with ndim >= 1, got a 0-d"),
    ("odd_packed_k", (np.zeros((4, 15), F32), "nvfp4"), {}, ValueError, r"x: nvfp4 packs two codes per byte along K, so K must be even.*K=15"),
    ("odd_packed_k_mxfp4", (np.zeros((4, 33), F32), "mxfp4_e2m1"), {"axis": "both"}, ValueError, r"K must be even"),
    ("odd_packed_m", (np.zeros((3, 16), F32), "nvfp4"), {"axis": "columnwise"}, ValueError, r"x: nvfp4 columnwise .* M must be even, got shape \(3, 16\) \(M=3\)"),
    ("odd_packed_m_nd", (np.zeros((3, 1, 16), F32), "mxfp4_e2m1"), {"axis": "both"}, ValueError, r"M must be even, got shape \(3, 1, 16\) \(M=3\)"),
    ("rht_float32", (X, "nvfp4"), {"axis": "columnwise", "rht": True}, TypeError, r"x: rht=True needs bfloat16 input, got dtype float32"),
    ("rht_float16", (X.astype(np.float16), "nvfp4"), {"axis": "both", "rht": True}, TypeError, r"rht=True needs bfloat16 .* float16"),
    ("rht_rowwise_only", (XB, "nvfp4"), {"rht": True}, ValueError, r"rht: .*columnwise operand.*got axis='rowwise'"),
    ("rht_m_not_16", (np.zeros((24, 16), BF16), "nvfp4"), {"axis": "both", "rht": True}, ValueError, r"rht=True needs M .* multiple of 16, got shape \(24, 16\) \(M=24\)"),
    ("row_scaled_tile_2d", (X, "nvfp4"), {"row_scaled": True, "tile_2d": True}, ValueError, r"row_scaled: cannot be combined with tile_2d"),
    ("row_scaled_rht", (XB, "nvfp4"), {"row_scaled": True, "rht": True, "axis": "both"}, ValueError, r"row_scaled: cannot be combined with rht"),
    ("stochastic_mxfp8", (X, "mxfp8_e4m3"), {"rounding": "stochastic"}, ValueError, r"rounding: 'stochastic' is for FP4 formats .* got format 'mxfp8_e4m3'"),
    ("stochastic_mxfp6", (X, "mxfp6_e3m2"), {"rounding": "stochastic"}, ValueError, r"rounding: 'stochastic' is for FP4"),
    ("seed_float", (X, "nvfp4"), {"rounding": "stochastic", "seed": 1.5}, TypeError, r"seed: expected an integer in \[0, 18446744073709551615\], got float 1.5"),
    ("seed_str", (X, "nvfp4"), {"rounding": "stochastic", "seed": "1"}, TypeError, r"seed: expected an integer .* got str"),
    ("seed_bool", (X, "nvfp4"), {"rounding": "stochastic", "seed": True}, TypeError, r"seed: expected an integer .* got bool"),
    ("seed_negative", (X, "nvfp4"), {"rounding": "stochastic", "seed": -1}, ValueError, r"seed: expected an integer in \[0, 18446744073709551615\], got -1"),
    ("seed_too_big", (X, "nvfp4"), {"rounding": "stochastic", "seed": 2 ** 64}, ValueError, r"seed: .* got 18446744073709551616"),
    ("mask_float", (XB, "nvfp4"), {"axis": "both", "rht": True, "rht_sign_mask": 1.0}, TypeError, r"rht_sign_mask: expected an integer in \[0, 65535\], got float"),
    ("mask_str", (XB, "nvfp4"), {"axis": "both", "rht": True, "rht_sign_mask": "0xD7E8"}, TypeError, r"rht_sign_mask: expected an integer"),
    ("mask_too_big", (XB, "nvfp4"), {"axis": "both", "rht": True, "rht_sign_mask": 0x10000}, ValueError, r"rht_sign_mask: expected an integer in \[0, 65535\], got 65536"),
    ("mask_negative", (XB, "nvfp4"), {"axis": "both", "rht": True, "rht_sign_mask": -1}, ValueError, r"rht_sign_mask: .* got -1"),
    ("axis_bad", (X, "nvfp4"), {"axis": "row"}, ValueError, r"axis: expected one of \['rowwise', 'columnwise', 'both'\], got 'row'"),
    ("axis_type", (X, "nvfp4"), {"axis": None}, TypeError, r"axis: expected one of .* got NoneType None"),
    ("layout_bad", (X, "nvfp4"), {"scale_layout": "swizzle"}, ValueError, r"scale_layout: expected one of \['compact', 'swizzled'\], got 'swizzle'"),
    ("layout_type", (X, "nvfp4"), {"scale_layout": 1}, TypeError, r"scale_layout: expected one of"),
    ("rule_bad", (X, "mxfp8_e4m3"), {"scale_rule": "round"}, ValueError, r"scale_rule: expected one of \['rceil', 'floor'\], got 'round'"),
    ("rule_nvfp4", (X, "nvfp4"), {"scale_rule": "floor"}, ValueError, r"scale_rule: NVFP4 scales are E4M3 .* got 'floor'"),
    ("rounding_bad", (X, "nvfp4"), {"rounding": "sr"}, ValueError, r"rounding: expected one of \['nearest', 'stochastic'\], got 'sr'"),
    ("fmt_bad", (X, "nvfp5"), {}, ValueError, r"fmt: expected one of .*'nvfp4'.* got 'nvfp5'"),
    ("fmt_type", (X, 5), {}, TypeError, r"fmt: expected a format name"),
    ("fmt_made_up_object", (X, fp4kit.Format("foo", "e2m1", 6.0, 32, "e8m0", None, 4)), {}, ValueError,
     r"fmt: expected one of fp4kit.FORMATS' values or a format name .* got Format\(name='foo'"),
    ("fmt_altered_object", (X, dataclasses.replace(fp4kit.FORMATS["nvfp4"], block=32)), {}, ValueError,
     r"fmt: expected one of fp4kit.FORMATS' values .* got Format\(name='nvfp4', .*block=32"),
    ("tile_2d_str", (X, "nvfp4"), {"tile_2d": "yes"}, TypeError, r"tile_2d: expected True or False, got str 'yes'"),
    ("tile_2d_int", (X, "nvfp4"), {"tile_2d": 1}, TypeError, r"tile_2d: expected True or False, got int"),
    ("row_scaled_none", (X, "nvfp4"), {"row_scaled": None}, TypeError, r"row_scaled: expected True or False"),
    ("tile_2d_on_mx", (X, "mxfp8_e4m3"), {"tile_2d": True}, ValueError, r"tile_2d: is an NVFP4 option; format 'mxfp8_e4m3'"),
    ("row_scaled_on_mx", (X, "mxfp6_e2m3"), {"row_scaled": True}, ValueError, r"row_scaled: is an NVFP4 option"),
    ("rht_on_mx", (XB, "mxfp4_e2m1"), {"rht": True, "axis": "both"}, ValueError, r"rht: is an NVFP4 option"),
    ("amax_shape", (X, "nvfp4"), {"amax": np.array([1.0, 2.0], F32)}, ValueError, r"amax: expected shape \(1,\), got \(2,\)"),
    ("amax_scalar_array", (X, "nvfp4"), {"amax": np.array(1.0, F32)}, ValueError, r"amax: expected shape \(1,\), got \(\)"),
    ("amax_row_scaled_shape", (X, "nvfp4"), {"amax": np.array([1.0], F32), "row_scaled": True}, ValueError,
     r"amax: expected shape \(32,\) \(one amax per row, row_scaled=True\), got \(1,\)"),
    ("amax_row_scaled_2d", (X, "nvfp4"), {"amax": np.ones((32, 1), F32), "row_scaled": True}, ValueError, r"amax: expected shape \(32,\)"),
    ("amax_dtype", (X, "nvfp4"), {"amax": np.array([1.0], np.float64)}, TypeError, r"amax: expected a float32 array, got dtype float64"),
    ("amax_float", (X, "nvfp4"), {"amax": 1.0}, TypeError, r"amax: expected a float32 NumPy array .* got float"),
    ("amax_list", (X, "nvfp4"), {"amax": [1.0]}, TypeError, r"amax: expected a float32 NumPy array .* got list"),
    ("amax_on_mx", (X, "mxfp8_e4m3"), {"amax": np.array([1.0], F32)}, ValueError, r"amax: only NVFP4 takes a global amax; format 'mxfp8_e4m3'"),
    ("amax_negative", (X, "nvfp4"), {"amax": np.array([-1.0], F32)}, ValueError, r"amax\[0\]: expected a non-negative value, got -1.0"),
    ("amax_nan", (X, "nvfp4"), {"amax": np.array([np.nan], F32)}, ValueError, r"amax\[0\]: expected a non-negative value, got nan"),
    ("amax_negative_row", (X, "nvfp4"), {"amax": np.where(np.arange(32) == 7, -1, 1).astype(F32), "row_scaled": True},
     ValueError, r"amax\[7\]: expected a non-negative value, got -1.0"),
]


@pytest.mark.parametrize("quantize", QUANTIZE, ids=["fp4kit", "reference"])
@pytest.mark.parametrize("args,kwargs,exc,match", [c[1:] for c in QUANTIZE_ERRORS], ids=[c[0] for c in QUANTIZE_ERRORS])
def test_quantize_errors(quantize, args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        quantize(*args, **kwargs)


@pytest.mark.parametrize("x", [[1.0, 2.0], 3.0, np.float32(1.0), None], ids=["list", "float", "numpy_scalar", "none"])
def test_quantize_rejects_non_arrays(x):
    with pytest.raises(TypeError, match=r"x: expected a NumPy array"):
        fp4kit.quantize(x, "nvfp4")
    with pytest.raises(TypeError, match=r"x: expected a NumPy array"):
        fp4kit.reference.quantize(x, "nvfp4")


def test_numpy_scalar_input_says_how_to_pass_it():
    """A NumPy scalar where an array belongs: the TypeError says so and how to make it an array."""
    hint = r"got float32 \(a NumPy scalar, not an array: np.asarray keeps it 0-d, np.atleast_1d makes it one\)$"
    for q in (fp4kit.quantize, fp4kit.reference.quantize):
        with pytest.raises(TypeError, match=hint):
            q(np.float32(1.0), "nvfp4")
    with pytest.raises(TypeError, match=r"got float$"):   # a Python float: no NumPy hint
        fp4kit.quantize(3.0, "nvfp4")


def test_dequantize_errors():
    q = fp4kit.quantize(X, "nvfp4")
    for dq in (fp4kit.dequantize, fp4kit.reference.dequantize):
        with pytest.raises(ValueError, match=r"dtype: expected one of \['float32', 'bfloat16', 'float16'\], got 'float64'"):
            dq(q, dtype="float64")
        with pytest.raises(TypeError, match=r"dtype: expected one of .* \(a name, NumPy dtype or type\), got int 5"):
            dq(q, dtype=5)
        with pytest.raises(ValueError, match=r"operand: expected one of \['rowwise', 'columnwise'\], got 'both'"):
            dq(q, operand="both")
        with pytest.raises(ValueError, match=r"operand: this tensor was quantized with axis='rowwise' and has no columnwise operand"):
            dq(q, operand="columnwise")
        with pytest.raises(TypeError, match=r"q: expected a QuantizedTensor, got ndarray"):
            dq(X)


def test_swizzle_errors():
    for sw in (fp4kit.swizzle_scales, fp4kit.reference.swizzle_scales):
        with pytest.raises(TypeError, match=r"compact: expected dtype uint8, got float32"):
            sw(X)
        with pytest.raises(ValueError, match=r"compact: expected a 2-D \(rows, cols\) array, got shape \(4,\)"):
            sw(np.zeros(4, np.uint8))
    with pytest.raises(TypeError, match=r"compact: expected a NumPy array"):
        fp4kit.swizzle_scales([[1]])
    s = np.zeros((128, 4), np.uint8)
    for un in (fp4kit.unswizzle_scales, fp4kit.reference.unswizzle_scales):
        with pytest.raises(ValueError, match=r"swizzled: a compact shape \(3, 5\) swizzles to \(128, 8\), got an array of shape \(128, 4\)"):
            un(s, (3, 5))
        with pytest.raises(TypeError, match=r"shape: expected a \(rows, cols\) tuple, got 3"):
            un(s, 3)
        with pytest.raises(ValueError, match=r"shape: expected non-negative \(rows, cols\), got \(-1, 4\)"):
            un(s, (-1, 4))
        with pytest.raises(TypeError, match=r"swizzled: expected dtype uint8"):
            un(s.astype(np.int8), (3, 4))


FLAT = np.zeros(64 * 4, F32)
GROUP_ERRORS = [
    ("sum_mismatch", (X, "nvfp4"), {"first_dims": [16, 8]}, ValueError, r"first_dims: sum\(first_dims\)=24 does not match x.shape\[0\]=32"),
    ("negative_dim", (X, "nvfp4"), {"first_dims": [40, -8]}, ValueError, r"first_dims\[1\]: expected a non-negative size, got -8"),
    ("negative_last", (FLAT, "nvfp4"), {"first_dims": 4, "last_dims": [-32, 96]}, ValueError, r"last_dims\[0\]: expected a non-negative size, got -32"),
    ("empty_dims", (X, "nvfp4"), {"first_dims": []}, ValueError, r"first_dims: expected at least one member \(G >= 1\)"),
    ("float_dim", (X, "nvfp4"), {"first_dims": [16, 16.0]}, TypeError, r"first_dims\[1\]: expected an integer, got float 16.0"),
    ("bool_dim", (X, "nvfp4"), {"first_dims": [16, True]}, TypeError, r"first_dims\[1\]: expected an integer, got bool"),
    ("int_first_dims", (X, "nvfp4"), {"first_dims": 5}, TypeError, r"first_dims: expected a sequence of member row counts"),
    # a string is iterable, but its characters are no sizes: named whole, not as first_dims[0] = '1'
    ("str_first_dims", (X, "nvfp4"), {"first_dims": "16"}, TypeError, r"^first_dims: expected a sequence of integers, got str '16'$"),
    ("bytes_last_dims", (FLAT, "nvfp4"), {"first_dims": 4, "last_dims": b"\x20\x20"}, TypeError,
     r"^last_dims: expected a sequence of integers, got bytes"),
    ("length_mismatch", (FLAT, "nvfp4"), {"first_dims": [4, 4], "last_dims": [32, 32, 0]}, ValueError,
     r"first_dims/last_dims: expected the same number of members, got 2 and 3"),
    ("total_mismatch", (FLAT, "nvfp4"), {"first_dims": [4, 4], "last_dims": [32, 30]}, ValueError,
     r"members hold sum\(M_i\*K_i\)=248 elements but x has 256"),
    ("dbias_varying_last", (FLAT, "nvfp4"), {"first_dims": 4, "last_dims": [32, 32], "dbias": True}, ValueError,
     r"dbias: only kinds 'same' and 'varying_first' .* got kind 'varying_last'"),
    ("dbias_varying_both", (FLAT, "nvfp4"), {"first_dims": [4, 2], "last_dims": [32, 64], "dbias": True}, ValueError,
     r"dbias: .* got kind 'varying_both'"),
    ("num_groups_divide", (X, "nvfp4"), {"num_groups": 3}, ValueError, r"x: kind 'same' needs rows divisible by num_groups=3, got 32 rows"),
    ("num_groups_zero", (X, "nvfp4"), {"num_groups": 0}, ValueError, r"num_groups: expected an integer in \[1, 2147483647\], got 0"),
    ("num_groups_float", (X, "nvfp4"), {"num_groups": 2.0}, TypeError, r"num_groups: expected an integer"),
    ("num_groups_and_dims", (X, "nvfp4"), {"num_groups": 2, "first_dims": [16, 16]}, ValueError, r"num_groups: give either num_groups"),
    ("no_dims", (X, "nvfp4"), {}, ValueError, r"group dims: give num_groups, first_dims, or first_dims and last_dims"),
    ("last_without_first", (X, "nvfp4"), {"last_dims": [16, 16]}, ValueError, r"first_dims: kinds 'varying_last'/'varying_both' need first_dims"),
    ("varying_last_2d", (X, "nvfp4"), {"first_dims": 4, "last_dims": [32, 32]}, ValueError, r"expect a 1-D buffer, got shape \(32, 32\)"),
    ("same_1d", (FLAT, "nvfp4"), {"num_groups": 2}, ValueError, r"x: kind 'same' expects a 2-D \(G\*M, K\) array"),
    ("fp4_odd_k_member", (FLAT, "mxfp4_e2m1"), {"first_dims": 4, "last_dims": [33, 31]}, ValueError,
     r"last_dims\[0\]: mxfp4_e2m1 packs two codes per byte along K, so K_i must be even, got 33"),
    ("fp4_odd_m_member", (FLAT, "mxfp4_e2m1"), {"first_dims": [3, 5], "last_dims": [32, 32], "axis": "both"}, ValueError,
     r"first_dims\[0\]: mxfp4_e2m1 columnwise packs two codes per byte along M, so every member's M must be even, got 3"),
    ("rht_member_rows", (np.zeros((48, 32), BF16), "nvfp4"), {"first_dims": [16, 24, 8], "rht": True, "axis": "both"}, ValueError,
     r"first_dims\[1\]: rht=True needs every member's M a multiple of 16, got 24"),
    ("amax_members", (X, "nvfp4"), {"num_groups": 2, "amax": np.ones(3, F32)}, ValueError, r"amax: expected shape \(G,\) one per member = \(2,\), got \(3,\)"),
    ("amax_row_scaled", (X, "nvfp4"), {"num_groups": 2, "amax": np.ones(2, F32), "row_scaled": True}, ValueError,
     r"amax: expected shape \(sum M_i,\) one per row = \(32,\), got \(2,\)"),
    ("amax_mx", (X, "mxfp8_e4m3"), {"num_groups": 2, "amax": np.ones(2, F32)}, ValueError, r"amax: only NVFP4 takes a global amax"),
    ("amax_dtype", (X, "nvfp4"), {"num_groups": 2, "amax": np.ones(2, np.float64)}, TypeError,
     r"^amax: expected a float32 array, got dtype float64$"),
    ("amax_list", (X, "nvfp4"), {"num_groups": 2, "amax": [1.0, 1.0]}, TypeError,
     r"^amax: expected a float32 NumPy array of shape \(G,\) or \(sum M_i,\), got list$"),
    ("amax_numpy_scalar", (X, "nvfp4"), {"num_groups": 2, "amax": np.float32(1)}, TypeError,
     r"^amax: expected a float32 NumPy array of shape \(G,\) or \(sum M_i,\), got float32$"),
    ("bad_option", (X, "nvfp4"), {"num_groups": 2, "axis": "diagonal"}, ValueError, r"axis: expected one of"),
    ("unknown_option", (X, "nvfp4"), {"num_groups": 2, "bogus": 1}, TypeError, r"bogus"),
    ("x_dtype", (X.astype(np.float64), "nvfp4"), {"num_groups": 2}, TypeError, r"x: expected dtype float32, bfloat16 or float16, got float64"),
    # the same options as the GPU path: max_elements (the bound) and dbias checked alike
    ("max_elements_float", (X, "nvfp4"), {"num_groups": 2, "max_elements": 1024.0}, TypeError,
     r"max_elements: expected an integer in \[0, 4611686018427387904\], got float 1024.0"),
    ("max_elements_small", (X, "nvfp4"), {"num_groups": 2, "max_elements": 1000}, ValueError,
     r"max_elements: the members hold more elements than the buffer bound: sum\(M_i\*K_i\)=1024 > max_elements=1000"),
    ("max_elements_big", (X, "nvfp4"), {"num_groups": 2, "max_elements": 2048}, ValueError,
     r"max_elements: the bound 2048 exceeds the input's 1024 elements"),
    ("dbias_str", (X, "nvfp4"), {"num_groups": 2, "dbias": "no"}, TypeError, r"dbias: expected True or False, got str 'no'"),
    ("dbias_int", (X, "nvfp4"), {"num_groups": 2, "dbias": 0}, TypeError, r"dbias: expected True or False, got int 0"),
    # dims taken from x (num_groups, or K of 'varying_first') are named as x's shape, not as dims never passed
    ("same_odd_k", (np.ones((96, 63), F32), "nvfp4"), {"num_groups": 3}, ValueError,
     r"^x: nvfp4 packs two codes per byte along K, so K must be even, got shape \(96, 63\) \(K=63\)$"),
    ("varying_first_odd_k", (np.ones((96, 63), F32), "mxfp4_e2m1"), {"first_dims": [32, 64]}, ValueError,
     r"^x: mxfp4_e2m1 packs two codes per byte along K, so K must be even, got shape \(96, 63\) \(K=63\)$"),
    ("same_odd_m", (np.ones((99, 64), F32), "nvfp4"), {"num_groups": 3, "axis": "columnwise"}, ValueError,
     r"^x: nvfp4 columnwise packs two codes per byte along M, so every member's M must be even, "
     r"got shape \(99, 64\) with num_groups=3 \(M=33 per member\)$"),
    ("varying_last_odd_int_m", (np.zeros(3 * 64, F32), "nvfp4"), {"first_dims": 3, "last_dims": [32, 32], "axis": "both"},
     ValueError, r"^first_dims: nvfp4 columnwise packs two codes per byte along M, so every member's M must be even, got 3$"),
    ("rht_same_rows", (np.zeros((48, 32), BF16), "nvfp4"), {"num_groups": 2, "rht": True, "axis": "both"}, ValueError,
     r"^x: rht=True needs every member's M a multiple of 16, got shape \(48, 32\) with num_groups=2 \(M=24 per member\)$"),
    # every member's amax is checked before any work, and the bad one is named
    ("amax_member_nan", (np.ones((96, 64), F32), "nvfp4"), {"num_groups": 3, "amax": np.array([1, np.nan, 1], F32)},
     ValueError, r"^amax\[1\] \(member 1\): expected a non-negative value, got nan$"),
    ("amax_member_row_negative", (np.ones((96, 64), F32), "nvfp4"),
     {"first_dims": [16, 48, 32], "row_scaled": True, "amax": np.where(np.arange(96) == 70, -2, 1).astype(F32)},
     ValueError, r"^amax\[70\] \(member 2\): expected a non-negative value, got -2.0$"),
]


@pytest.mark.parametrize("gq", [fp4kit.group_quantize, fp4kit.reference.group_quantize], ids=["fp4kit", "reference"])
@pytest.mark.parametrize("args,kwargs,exc,match", [c[1:] for c in GROUP_ERRORS], ids=[c[0] for c in GROUP_ERRORS])
def test_group_quantize_errors(gq, args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        gq(*args, **kwargs)


def test_group_dequantize_and_indexing_errors():
    g = fp4kit.group_quantize(X, "nvfp4", num_groups=2)
    for gdq in (fp4kit.group_dequantize, fp4kit.reference.group_dequantize):
        with pytest.raises(TypeError, match=r"g: expected a GroupedQuantizedTensor, got QuantizedTensor"):
            gdq(fp4kit.quantize(X, "nvfp4"))
        with pytest.raises(ValueError, match=r"dtype: expected one of \['float32', 'bfloat16', 'float16'\], got 'int8'"):
            gdq(g, dtype="int8")
    with pytest.raises(ValueError, match=r"operand: this tensor was quantized with axis='rowwise' and has no columnwise"):
        fp4kit.group_dequantize(g, operand="columnwise")
    with pytest.raises(IndexError, match=r"index: group has 2 members, got 2"):
        g[2]
    with pytest.raises(TypeError, match=r"index: expected an int, got float"):
        g[1.0]


def test_numpy_booleans_are_booleans():
    """NumPy booleans (numpy.bool in NumPy 2, numpy.bool_ before) are accepted wherever True/False is;
    they give the same bytes as Python booleans."""
    x = np.random.default_rng(3).standard_normal((32, 64)).astype(np.float32)
    want = fp4kit.reference.quantize(x, "nvfp4", tile_2d=True, row_scaled=False)
    got = fp4kit.reference.quantize(x, "nvfp4", tile_2d=np.True_, row_scaled=np.bool_(False))
    assert fp4kit.compare(got, want).ok
    with pytest.raises(TypeError, match=r"tile_2d: expected True or False, got int"):
        fp4kit.reference.quantize(x, "nvfp4", tile_2d=np.int8(1))


def test_grouped_amaxes_are_checked_before_any_member(monkeypatch):
    """A bad amax of member 1 is found before member 0 is quantized (and named amax[1])."""
    import fp4kit.reference.grouped as grouped

    def quantize_member(*a, **k):
        raise AssertionError("a member was quantized before every amax was checked")
    monkeypatch.setattr(grouped, "quantize", quantize_member)
    with pytest.raises(ValueError, match=r"amax\[1\] \(member 1\)"):
        fp4kit.group_quantize(np.ones((96, 64), F32), "nvfp4", num_groups=3, amax=np.array([1, np.nan, 1], F32))


def test_group_quantize_takes_max_elements_and_numpy_booleans_on_the_cpu():
    """The GPU's options are the CPU's: max_elements (the input's size) and dbias as a NumPy bool."""
    x = np.random.default_rng(5).standard_normal((64, 32)).astype(F32)
    want = fp4kit.reference.group_quantize(x, "nvfp4", num_groups=2, dbias=True)
    for gq in (fp4kit.group_quantize, fp4kit.reference.group_quantize):
        got = gq(x, "nvfp4", num_groups=2, dbias=np.True_, max_elements=np.int64(x.size))
        assert fp4kit.compare(got, want).ok
        np.testing.assert_array_equal(got.dbias, want.dbias)


class _CAI:
    """A device array by its __cuda_array_interface__ alone (never dereferenced here)."""
    __cuda_array_interface__ = {"shape": (4, 32), "typestr": "<f4", "data": (0, False), "version": 3}


@pytest.fixture
def without_cupy(monkeypatch):
    """CuPy cannot be imported, and fp4kit's GPU backend is not loaded yet."""
    import sys

    from fp4kit import api
    monkeypatch.setitem(sys.modules, "cupy", None)
    monkeypatch.setattr(api, "_device_api", None)


def test_device_array_without_cupy_says_how_to_install_it(without_cupy):
    # the README's commands (a source checkout), the package-index form and the bare CuPy wheels
    install = (r'needs CuPy.*pip install "\.\[cuda13\]" or pip install "\.\[cuda12\]" in a source checkout '
               r'\("fp4kit\[cuda13\]" / "fp4kit\[cuda12\]" from a package index\), or cupy-cuda13x / cupy-cuda12x')
    calls = [lambda: fp4kit.quantize(_CAI(), "nvfp4"), lambda: fp4kit.swizzle_scales(_CAI()),
             lambda: fp4kit.group_quantize(_CAI(), "nvfp4", num_groups=2), lambda: fp4kit.rht_transform(_CAI()),
             fp4kit.warmup, lambda: fp4kit._interop.as_cupy(_CAI())]
    for call in calls:
        with pytest.raises(fp4kit.BackendUnavailableError, match=install):
            call()
    assert issubclass(fp4kit.BackendUnavailableError, ImportError)


def _fake_array(module: str, name: str, **attrs):
    """An object whose type looks like `module`.`name` (torch / JAX are not needed for the messages)."""
    cls = type(name, (), {"__dlpack__": lambda self, stream=None: None, **attrs})
    cls.__module__ = module
    return cls()


CPU_TORCH = _fake_array("torch", "Tensor", is_cuda=False, device="cpu", dtype="torch.float32")
CPU_TORCH_BF16 = _fake_array("torch", "Tensor", is_cuda=False, device="cpu", dtype="torch.bfloat16")
CPU_JAX = _fake_array("jaxlib.xla_extension", "ArrayImpl", dtype="float32",
                      devices=lambda self: {type("CpuDevice", (), {"platform": "cpu"})()})


@pytest.mark.parametrize("x,match", [
    (CPU_TORCH, r"x: expected a CUDA device array, got a PyTorch tensor on cpu \(Tensor\): pass a NumPy array "
                r"\(x\.detach\(\)\.numpy\(\)\) to run the CPU reference, or move it to a CUDA device \(x\.cuda\(\)\)"),
    (CPU_TORCH_BF16, r"x: expected a CUDA device array, got a PyTorch tensor on cpu \(Tensor\): pass a NumPy array "
                     r"\(x\.detach\(\)\.view\(torch\.int16\)\.numpy\(\)\.view\(ml_dtypes\.bfloat16\)\) to run"),
    (CPU_JAX, r"x: expected a CUDA device array, got a JAX array on cpu \(ArrayImpl\): pass a NumPy array "
              r"\(np\.asarray\(x\)\) to run the CPU reference, or move it to a CUDA device \(jax\.device_put"),
], ids=["torch", "torch_bf16", "jax"])
def test_cpu_tensor_of_a_device_library_says_what_to_pass(without_cupy, x, match):
    """With or without CuPy: before the backend loads (here) and inside it (device_input)."""
    with pytest.raises(TypeError, match=match):
        fp4kit.quantize(x, "nvfp4")
    with pytest.raises(TypeError, match=match.replace("x:", "compact:", 1).replace(r"\(x\.", r"\(compact\.")
                       .replace(r"asarray\(x\)", r"asarray\(compact\)")):
        fp4kit.swizzle_scales(x)
    from fp4kit import _device_api
    with pytest.raises(TypeError, match=match):
        _device_api.device_input(x)


def test_results_holding_host_arrays_of_a_device_library_say_what_to_pass(without_cupy):
    """dequantize, group_dequantize and qmatmul of a result whose codes are a CPU torch tensor (a
    hand-built one) name that array and the way out, as quantize does for x: they raised
    BackendUnavailableError ("install CuPy"), the wrong fix."""
    import dataclasses

    def cpu_torch(a):
        return _fake_array("torch", "Tensor", is_cuda=False, device="cpu", dtype="torch.uint8", shape=a.shape)

    x = np.random.default_rng(5).standard_normal((32, 64)).astype(F32)
    q = fp4kit.quantize(x, "mxfp8_e4m3", axis="both")
    for name in ("rowwise", "columnwise"):
        op = getattr(q, name)
        hand = dataclasses.replace(q, **{name: dataclasses.replace(op, data=cpu_torch(op.data))},
                                   **({"rowwise": None, "options": dataclasses.replace(q.options, axis=name)}
                                      if name == "columnwise" else {}))
        msg = rf"q\.{name}\.data: expected a CUDA device array, got a PyTorch tensor on cpu \(Tensor\): pass a NumPy"
        with pytest.raises(TypeError, match=msg):
            fp4kit.dequantize(hand, operand=name)
        if name == "columnwise":          # the operand asked for decides, not the NumPy one beside it
            mixed = dataclasses.replace(q, columnwise=dataclasses.replace(op, data=cpu_torch(op.data)))
            with pytest.raises(TypeError, match=msg):
                fp4kit.dequantize(mixed, operand=name)
            np.testing.assert_array_equal(fp4kit.dequantize(mixed), fp4kit.dequantize(q))
    hand = dataclasses.replace(q, rowwise=dataclasses.replace(q.rowwise, data=cpu_torch(q.rowwise.data)))
    with pytest.raises(TypeError, match=r"a\.rowwise\.data: expected a NumPy array or a CUDA device array, got a "
                                        r"PyTorch tensor on cpu \(Tensor\): pass a NumPy array"):
        fp4kit.qmatmul(hand, q)
    with pytest.raises(TypeError, match=r"b\.rowwise\.data: expected a NumPy array or a CUDA device array, got a "
                                        r"PyTorch tensor"):
        fp4kit.qmatmul(q, hand)
    g = fp4kit.group_quantize(x, "mxfp8_e4m3", num_groups=2)
    hg = dataclasses.replace(g, rowwise_data=cpu_torch(g.rowwise_data))
    with pytest.raises(TypeError, match=r"g\.rowwise_data: expected a CUDA device array, got a PyTorch tensor"):
        fp4kit.group_dequantize(hg)


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_numpy_subclasses_are_their_values_and_masks_are_refused():
    """np.matrix is its values everywhere (group_quantize sliced its rows, not its elements, and
    failed in a reshape; compare's grouped x too); a masked array with masked values is a TypeError
    (the mask was ignored: a masked 1e30 set the amax), one without is its values."""
    x = np.random.default_rng(6).standard_normal((64, 64)).astype(F32)
    m = np.asmatrix(x)
    want = fp4kit.group_quantize(x, "mxfp8_e4m3", num_groups=2, axis="both")
    got = fp4kit.group_quantize(m, "mxfp8_e4m3", num_groups=2, axis="both")
    assert fp4kit.compare(got, want, x=m).ok and type(got.rowwise_data) is np.ndarray
    assert fp4kit.compare(fp4kit.quantize(m, "nvfp4"), fp4kit.quantize(x, "nvfp4")).ok
    ma = np.ma.masked_array(x.copy())
    assert fp4kit.compare(fp4kit.quantize(ma, "nvfp4"), fp4kit.quantize(x, "nvfp4")).ok      # nothing masked
    ma[0, 0] = np.ma.masked
    ma.data[0, 0] = 1e30
    for call in (lambda: fp4kit.quantize(ma, "nvfp4"), lambda: fp4kit.group_quantize(ma, "nvfp4", num_groups=2)):
        with pytest.raises(TypeError, match=r"x: a masked array with 1 masked value: fp4kit quantizes every value, "
                                            r"the masked ones too; pass x\.filled\(value\) or x\.data"):
            call()
    amax = np.ma.masked_array(np.ones(1, F32), mask=[True])
    with pytest.raises(TypeError, match=r"amax: a masked array with 1 masked value"):
        fp4kit.quantize(x, "nvfp4", amax=amax)


def test_dims_items_may_be_any_integer_index():
    """Host dims items: ints, NumPy integers, or anything with __index__ (the 0-d items of a CPU
    torch / JAX integer array); floats and bools are TypeErrors naming the item."""
    class Item:                                     # a 0-d integer tensor's item, as far as dims go
        def __init__(self, v):
            self.v = v

        def __index__(self):
            return self.v

    x = np.random.default_rng(7).standard_normal((48, 64)).astype(F32)
    want = fp4kit.group_quantize(x, "mxfp8_e4m3", first_dims=[16, 0, 32])
    for dims in ([Item(16), Item(0), Item(32)], (np.int32(16), 0, np.uint64(32)), np.array([16, 0, 32])):
        assert fp4kit.compare(fp4kit.group_quantize(x, "mxfp8_e4m3", first_dims=dims), want).ok
    class TorchBool(Item):                          # a 0-d torch.bool tensor: __index__ works, a bool
        dtype = "torch.bool"

        def __repr__(self):
            return "tensor(True)"

    with pytest.raises(TypeError, match=r"first_dims\[0\]: expected an integer, got TorchBool tensor\(True\)"):
        fp4kit.group_quantize(x, "mxfp8_e4m3", first_dims=[TorchBool(1), 15, 32])
    for dims, shown in (([16.0, 0, 32], "float 16.0"), ([True, 15, 32], "bool True"),
                        (np.array([True, False, True]), r"bool_? (np\.)?True_?")):
        with pytest.raises(TypeError, match=rf"first_dims\[0\]: expected an integer, got {shown}"):
            fp4kit.group_quantize(x, "mxfp8_e4m3", first_dims=dims)


def test_member_indices_are_list_indices():
    x = np.random.default_rng(2).standard_normal((96, 64)).astype(F32)
    g = fp4kit.group_quantize(x, "nvfp4", first_dims=[16, 48, 32])
    y = fp4kit.group_dequantize(g)
    for i, same in ((np.int64(1), 1), (np.int32(-1), 2), (-3, 0), (np.uint8(2), 2), (True, 1)):
        assert fp4kit.compare(g[i], g[same]).ok
        np.testing.assert_array_equal(y[i], y[same])
    for bad in (3, -4, np.int64(7)):
        with pytest.raises(IndexError, match=rf"index: group has 3 members, got {int(bad)}"):
            g[bad]
        with pytest.raises(IndexError, match=rf"index: group has 3 members, got {int(bad)}"):
            y[bad]
    for bad in (1.0, "1", np.float32(1), None):
        with pytest.raises(TypeError, match=rf"index: expected an int, got {type(bad).__name__}"):
            g[bad]
        with pytest.raises(TypeError, match=r"index: expected an int"):
            y[bad]


@pytest.mark.parametrize("grouped", [False, True], ids=["dequantize", "group_dequantize"])
@pytest.mark.parametrize("api", [fp4kit, fp4kit.reference], ids=["fp4kit", "reference"])
def test_dtype_names_dtypes_and_types_are_one_dtype(api, grouped):
    """dequantize and group_dequantize take the same dtype= values and raise the same errors."""
    x = np.random.default_rng(4).standard_normal((32, 64)).astype(F32)
    if grouped:
        arg, dq = fp4kit.group_quantize(x, "nvfp4", num_groups=2), lambda g, **k: api.group_dequantize(g, **k).data
    else:
        arg, dq = fp4kit.quantize(x, "nvfp4"), api.dequantize
    for name, same in (("float16", (np.float16, np.dtype(np.float16), np.dtype(">f2"))),
                       ("bfloat16", (BF16, np.dtype(BF16))), ("float32", (np.float32, np.dtype("float32"), "f4"))):
        want = dq(arg, dtype=name)
        for d in same:
            got = dq(arg, dtype=d)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    for bad, shown in ((np.float64, "float64"), ("float64", "float64"), (np.int8, "int8"), ("fp16", "fp16")):
        with pytest.raises(ValueError, match=rf"dtype: expected one of \['float32', 'bfloat16', 'float16'\], got '{shown}'"):
            dq(arg, dtype=bad)
    for bad in (None, 5, 1.5, True, object()):
        with pytest.raises(TypeError, match=r"dtype: expected one of .*\(a name, NumPy dtype or type\), got"):
            dq(arg, dtype=bad)


@pytest.mark.parametrize("dtype", [">f4", ">f2"])
def test_big_endian_input_is_its_native_dtype(dtype):
    x = np.random.default_rng(6).standard_normal((32, 64)).astype(np.dtype(dtype).newbyteorder("="))
    xb = x.astype(dtype)
    assert not xb.dtype.isnative
    for fmt, kw in (("nvfp4", {"amax": np.array([3.0], ">f4")}), ("mxfp8_e4m3", {})):
        want = fp4kit.quantize(x, fmt, axis="both", **{k: v.astype(F32) for k, v in kw.items()})
        assert fp4kit.compare(fp4kit.quantize(xb, fmt, axis="both", **kw), want).ok
        assert fp4kit.compare(fp4kit.reference.quantize(xb, fmt, axis="both", **kw), want).ok
    want = fp4kit.group_quantize(x, "nvfp4", num_groups=2, amax=np.array([1.0, 2.0], F32))
    assert fp4kit.compare(fp4kit.group_quantize(xb, "nvfp4", num_groups=2, amax=np.array([1.0, 2.0], ">f4")), want).ok


def test_negative_zero_amax_is_zero():
    """SPEC: an amax is max |x| (+0 for an all-zero tensor): a caller's -0 is stored as +0, so zeros
    dequantize to +0 exactly as with the computed amax."""
    z = np.zeros((4, 32), F32)
    want = fp4kit.quantize(z, "nvfp4", axis="both")
    for quantize in QUANTIZE:
        q = quantize(z, "nvfp4", axis="both", amax=np.array([-0.0], F32))
        assert q.rowwise.amax.view(np.uint32).tolist() == [0]
        assert fp4kit.compare(q, want).ok
        assert not np.signbit(fp4kit.dequantize(q)).any()
    g = fp4kit.group_quantize(np.zeros((64, 32), F32), "nvfp4", num_groups=2, amax=np.array([-0.0, 1.0], F32))
    assert g.rowwise_amax.view(np.uint32).tolist() == [0, np.float32(1).view(np.uint32)]
    assert not np.signbit(fp4kit.group_dequantize(g).data).any()


def test_unswizzle_shape_takes_integers_only():
    s = np.zeros((128, 4), np.uint8)
    for un in (fp4kit.unswizzle_scales, fp4kit.reference.unswizzle_scales):
        for bad in ((3.7, 4), (3, 4.0), (True, 4), ("3", 4)):
            with pytest.raises(TypeError, match=r"shape: expected a \(rows, cols\) tuple of integers, got"):
                un(s, bad)
        assert un(s, (np.int64(3), np.uint16(4))).shape == (3, 4)


def test_operand_with_unknown_format():
    d = np.zeros((1, 8), np.uint8)
    with pytest.raises(ValueError, match=r"format: expected one of \[.*'nvfp4'.*\], got 'nvfp9'"):
        fp4kit.Operand(d, np.zeros((1, 1), np.uint8), "compact", None, 1, 16, format="nvfp9")
    with pytest.raises(TypeError, match=r"format: expected a format name"):
        fp4kit.Operand(d, np.zeros((1, 1), np.uint8), "compact", None, 1, 16, format=4)
    with pytest.raises(TypeError, match=r"data: expected a uint8 array \(NumPy or device\), got list"):
        fp4kit.Operand(d.tolist(), np.zeros((1, 1), np.uint8), "compact", None, 1, 16, format="nvfp4")
    with pytest.raises(TypeError, match=r"scales: expected a uint8 array \(NumPy or device\), got bytes"):
        fp4kit.Operand(d, b"\x00", "compact", None, 1, 16, format="nvfp4")
    op = fp4kit.Operand(d, np.zeros((1, 1), np.uint8), "compact", np.ones(1, F32), 1, 16,
                        format=fp4kit.FORMATS["nvfp4"])
    assert op.format == "nvfp4"


def test_hand_built_quantized_tensor_is_checked():
    """A QuantizedTensor assembled by hand (e.g. from stored bytes) whose parts disagree is a
    ValueError when built, and codes / scales / amax of the wrong dtype a TypeError when
    dequantized: never a silently wrong or NaN result."""
    x = np.random.default_rng(0).standard_normal((4, 64)).astype(F32)
    q = fp4kit.quantize(x, "nvfp4", axis="both")
    QT, Op = fp4kit.QuantizedTensor, fp4kit.Operand
    r = q.rowwise
    ro = dataclasses.replace(q.options, axis="rowwise")         # the options of a rowwise-only tensor

    def op(**kw):
        args = dict(data=r.data, scales=r.scales, scale_layout="compact", amax=r.amax, rows=4, cols=64, format="nvfp4")
        return Op(**{**args, **kw})

    with pytest.raises(ValueError, match=r"rowwise: expected the \(M, K\) = \(4, 64\) operand of shape \(4, 64\), got 64x4"):
        QT("nvfp4", (4, 64), q.columnwise, None, ro)            # operands swapped
    with pytest.raises(ValueError, match=r"columnwise: expected the \(K, M\) = \(64, 4\) operand .* got 4x64"):
        QT("nvfp4", (4, 64), None, q.rowwise, q.options)
    with pytest.raises(ValueError, match=r"rowwise: expected the \(M, K\) = \(8, 32\) operand"):
        QT("nvfp4", (8, 32), q.rowwise, None, ro)
    mx = fp4kit.quantize(x, "mxfp8_e4m3")
    with pytest.raises(ValueError, match=r"rowwise: expected a 'nvfp4' operand, got format 'mxfp8_e4m3'"):
        QT("nvfp4", (4, 64), mx.rowwise, None, ro)
    with pytest.raises(ValueError, match=r"options: expected QuantizeOptions of format 'nvfp4', got 'mxfp8_e4m3'"):
        QT("nvfp4", (4, 64), q.rowwise, None, mx.options)
    with pytest.raises(ValueError, match=r"amax: an NVFP4 operand needs its float32 amax"):
        QT("nvfp4", (4, 64), op(amax=None), None, ro)
    with pytest.raises(ValueError, match=r"amax: expected shape \(1,\) or \(4,\), got \(2,\)"):
        QT("nvfp4", (4, 64), op(amax=np.ones(2, F32)), None, ro)
    # dtypes are checked where the arrays are read (the reference for NumPy arrays)
    for kw, match in (({"amax": np.ones(1)}, r"amax: expected a float32 NumPy array .*, got dtype float64"),
                      ({"data": r.data.astype(F32)}, r"data: expected a uint8 NumPy array .*, got dtype float32"),
                      ({"scales": r.scales.astype(np.int64)}, r"scales: expected a uint8 NumPy array .*, got dtype int64")):
        hand = QT("nvfp4", (4, 64), op(**kw), None, ro)
        for dq in (fp4kit.dequantize, fp4kit.reference.dequantize):
            with pytest.raises(TypeError, match=match):
                dq(hand)
    with pytest.raises(ValueError, match=r"shape: expected the input's shape \(ndim >= 1\), got \(\)"):
        QT("nvfp4", (), q.rowwise, None, ro)
    # consistent parts still build, in any ndim, and dequantize as the original
    q3 = QT("nvfp4", (2, 2, 64), q.rowwise, q.columnwise, q.options)
    assert (fp4kit.dequantize(q3).reshape(4, 64) == fp4kit.dequantize(q)).all()
    # parts of the wrong type: a TypeError naming the field (was an AttributeError from inside)
    for args, match in ((("nvfp4", (4, 64), r, None, None), r"options: expected QuantizeOptions .*, got NoneType"),
                        (("nvfp4", (4, 64), r.data, None, ro), r"rowwise: expected an Operand or None, got ndarray"),
                        (("nvfp4", (4, 64), "x", None, ro), r"rowwise: expected an Operand or None, got str"),
                        (("nvfp4", (4, 64), r, r, q.options), None)):
        if match is None:
            with pytest.raises(ValueError, match=r"columnwise: expected the \(K, M\)"):
                QT(*args)
            continue
        with pytest.raises(TypeError, match=match):
            QT(*args)
    with pytest.raises(TypeError, match=r"amax: expected a float32 array \(NumPy or device\) or None, got list"):
        op(amax=[1.0])
    # a negative amax (quantize never gives one) would flip every sign: refused where it is read
    neg = QT("nvfp4", (4, 64), op(amax=-r.amax), None, ro)
    for call in (fp4kit.dequantize, fp4kit.reference.dequantize, lambda t: fp4kit.qmatmul(t, q)):
        with pytest.raises(ValueError, match=r"amax: expected non-negative values \(an amax is max \|x\|\), got -"):
            call(neg)
    nan = QT("nvfp4", (4, 64), op(amax=np.full(1, np.nan, F32)), None, ro)    # an input with NaN gives one
    assert np.isnan(fp4kit.dequantize(nan)).all()


def test_hand_built_grouped_tensor_is_checked():
    """A GroupedQuantizedTensor built by hand or by dataclasses.replace whose metadata disagree is
    a ValueError / TypeError when built (members and group_dequantize raised KeyError or IndexError
    from inside); consistent metadata still build and give the same members."""
    import dataclasses

    x = np.random.default_rng(1).standard_normal((96, 64)).astype(F32)
    g = fp4kit.group_quantize(x, "nvfp4", first_dims=[32, 0, 64], axis="both")
    rep = dataclasses.replace
    for kw, exc, match in (
            (dict(format="bogus"), ValueError, r"format: .*bogus"),
            (dict(format="mxfp8_e4m3"), ValueError, r"options: expected QuantizeOptions of format 'mxfp8_e4m3'"),
            (dict(kind="ragged"), ValueError, r"kind: expected one of \('same', 'varying_first', 'varying_last', "
                                              r"'varying_both'\), got 'ragged'"),
            (dict(options=None), TypeError, r"options: expected QuantizeOptions"),
            (dict(last_dims=(64,)), ValueError, r"last_dims: expected one per member, 3 as first_dims, got 1"),
            (dict(first_dims=(32, -1, 65)), ValueError, r"first_dims\[1\]: expected a non-negative integer, got -1"),
            (dict(first_dims=(32, 0.5, 64)), ValueError, r"first_dims\[1\]: expected a non-negative integer"),
            (dict(first_dims=(64, 0, 32)), ValueError, r"offsets: expected \(0, 4096, 4096, 6144\) for first_dims"),
            (dict(offsets=(0, 2048, 2048, 6144), first_dims=(32, 0, 64)), None, None),
            (dict(scale_offsets_rowwise=(0, 1, 2, 3)), ValueError, r"scale_offsets_rowwise: expected \(0, 128, 128, 384\)"),
            (dict(extra={"G": 2}), ValueError, r"extra\['G'\]: expected the number of members, 3, got 2"),
            (dict(extra=None), TypeError, r"extra: expected a dict, got NoneType")):
        if exc is None:
            h = rep(g, **kw)            # the same metadata: builds, and gives the same members
            assert all(fp4kit.compare(a, b).ok for a, b in zip(h, g))
            continue
        with pytest.raises(exc, match=match):
            rep(g, **kw)
    with pytest.raises(TypeError, match=r"first_dims: expected a sequence of integers in member order, got set"):
        fp4kit.group_quantize(x, "nvfp4", first_dims={32, 64})
    with pytest.raises(TypeError, match=r"first_dims: expected a sequence of integers in member order, got dict"):
        fp4kit.group_quantize(x, "nvfp4", first_dims={96: 0})
    assert len(fp4kit.group_quantize(x, "nvfp4", first_dims=iter([32, 64]))) == 2       # ordered iterables stay


def test_compare_x_must_be_real():
    """compare's x: strings and complex values are a TypeError naming x (a string array failed in a
    float conversion that named nothing; complex values lost their imaginary parts silently)."""
    x = np.random.default_rng(2).standard_normal((4, 64)).astype(F32)
    q = fp4kit.quantize(x, "mxfp4_e2m1")
    for bad in (np.full((4, 64), "a"), x.astype(np.complex64)):
        with pytest.raises(TypeError, match=rf"x: expected a real-valued array .*, got dtype {bad.dtype}"):
            fp4kit.compare(q, q, x=bad)
    for ok in (x, x.astype(np.float16), x.astype(ml_dtypes.bfloat16), x.astype(np.int8)):
        assert fp4kit.compare(q, q, x=ok).ok


def test_tile_2d_empty_operand_takes_no_time():
    """SPEC 5: empty inputs give empty outputs; with tile_2d the reference once spent time linear in
    the other dimension (np.repeat of an empty array): 2**40 rows of 0 columns ran for minutes."""
    import time

    for shape, axis in (((2 ** 40, 0), "rowwise"), ((0, 2 ** 40), "columnwise")):
        t = time.perf_counter()
        q = fp4kit.quantize(np.zeros(shape, F32), "nvfp4", tile_2d=True, axis=axis)
        assert time.perf_counter() - t < 5.0
        assert q.operand(axis).data.size == 0


def test_group_quantize_stray_keyword_lists_every_keyword():
    """A misspelt keyword of group_quantize names itself and lists what the function takes: quantize's
    options and its own amax / dbias / max_elements (the list once left those three out), each of them
    really accepted."""
    import inspect
    import re

    x = np.zeros((4, 32), F32)
    with pytest.raises(TypeError, match=r"^scale_layuot: not an option of group_quantize; expected one of ") as e:
        fp4kit.group_quantize(x, "mxfp8_e4m3", num_groups=2, scale_layuot="swizzled")
    listed = re.findall(r"'([a-z_0-9]+)'", str(e.value))
    assert {"amax", "dbias", "max_elements", "axis", "scale_layout", "seed"} <= set(listed)
    quantize_params = inspect.signature(fp4kit.quantize).parameters
    assert set(listed) - {"dbias", "max_elements"} <= set(quantize_params)
    g = fp4kit.group_quantize(x, "mxfp8_e4m3", num_groups=2, amax=None, dbias=False, max_elements=x.size)
    assert len(g) == 2


def test_operand_fp4_odd_cols_and_bad_dims():
    """An FP4 operand packs two codes per byte along its rows: odd cols (an operand built by hand)
    is a ValueError naming cols, on every backend, before anything reads the codes (the GPU once
    made up a zero for the missing nibble, the reference failed inside NumPy); rows / cols must be
    non-negative integers."""
    d, s = np.zeros((2, 1), np.uint8), np.full((2, 1), 0x38, np.uint8)
    amax = np.array([2688.0], F32)
    for fmt, sc in (("nvfp4", s), ("mxfp4_e2m1", np.full((2, 1), 127, np.uint8))):
        with pytest.raises(ValueError, match=rf"cols: {fmt} packs two codes per byte along each row, so an "
                                             rf"operand's cols must be even, got 3"):
            fp4kit.Operand(d, sc, "compact", amax if fmt == "nvfp4" else None, 2, 3, fmt)
    for kw, match in ((dict(rows=-2), r"rows: expected a non-negative integer, got -2"),
                      (dict(cols=2.0), r"cols: expected a non-negative integer, got 2.0"),
                      (dict(rows=True), r"rows: expected a non-negative integer, got True")):
        args = dict(data=d, scales=s, scale_layout="compact", amax=amax, rows=2, cols=2, format="nvfp4")
        with pytest.raises(ValueError, match=match):
            fp4kit.Operand(**{**args, **kw})
    ok = fp4kit.Operand(d, s, "compact", amax, np.int64(2), 2, "nvfp4")   # NumPy integers are integers
    assert ok.rows == 2


def test_group_dims_upper_bound():
    """Host dims past 2**48 (a member of that many rows, even with K = 0 and so no elements) are a
    ValueError naming the entry: NumPy cannot reshape an empty (2**62, 0) member and said so
    without naming anything."""
    x = np.zeros(32, F32)
    with pytest.raises(ValueError, match=r"first_dims\[0\]: expected a size of at most 2\*\*48, got 4611686018427387904"):
        fp4kit.group_quantize(x, "mxfp8_e4m3", first_dims=[2**62, 1], last_dims=[0, 32])
    with pytest.raises(ValueError, match=r"last_dims\[1\]: expected a size of at most 2\*\*48"):
        fp4kit.group_quantize(x, "mxfp8_e4m3", first_dims=[1, 0], last_dims=[32, 2**49])
    with pytest.raises(ValueError, match=r"first_dims: expected a size of at most 2\*\*48"):
        fp4kit.group_quantize(x, "mxfp8_e4m3", first_dims=2**50, last_dims=[0, 0])
    g = fp4kit.group_quantize(x, "mxfp8_e4m3", first_dims=[2**48, 1], last_dims=[0, 32], scale_layout="swizzled")
    assert g[0].rowwise.data.shape == (2**48, 0)
    want = fp4kit.quantize(x.reshape(1, 32), "mxfp8_e4m3", scale_layout="swizzled")
    assert (g[1].rowwise.scales == want.rowwise.scales).all() and (g[1].rowwise.data == want.rowwise.data).all()


def test_hand_built_groups_options_and_operands_agree_with_their_data():
    """Every constructor checks what it can without reading an array (shapes only): host dims given
    as a list are checked as tuples (they were taken for device dims: g[0] then read other members'
    bytes), the buffers have the layout's lengths and are present as options.axis says, the kind
    describes the dims, len() follows host dims (not extra['G']); QuantizeOptions are valid values
    in a combination SPEC allows and describe the operands they sit with; an Operand's amax is
    there exactly for NVFP4."""
    rep = dataclasses.replace
    x = np.random.default_rng(8).standard_normal((96, 64)).astype(F32)
    g = fp4kit.group_quantize(x, "nvfp4", first_dims=[32, 0, 64], axis="both")
    assert rep(g, first_dims=[32, 0, 64]).first_dims == (32, 0, 64)
    for kw, match in (({"first_dims": [64, 0, 32]}, r"offsets: expected \(0, 4096, 4096, 6144\)"),
                      ({"first_dims": [-1, 0, 97]}, r"first_dims\[0\]: expected a non-negative integer"),
                      ({"rowwise_amax": np.ones(7, F32)}, r"rowwise_amax: expected shape \(3,\)"),
                      ({"columnwise_data": np.zeros(5, np.uint8)}, r"columnwise_data: expected shape \(3072,\)"),
                      ({"rowwise_data": None}, r"rowwise_data: expected a flat array of 3072 entries"),
                      ({"kind": "same"}, r"kind: 'same' does not describe first_dims \(32, 0, 64\)"),
                      ({"input_dtype": 5}, r"input_dtype: expected one of"),
                      ({"offsets": None, "first_dims": np.array([32, 0, 64])}, None)):
        if match is None:                           # NumPy standing in for device dims: offsets None
            assert len(rep(g, **kw)) == 3
            with pytest.raises(ValueError, match=r"offsets: a group whose dims live on the device has offsets None"):
                rep(g, first_dims=np.array([32, 0, 64]))
            continue
        with pytest.raises(ValueError, match=match):
            rep(g, **kw)
    mx = fp4kit.group_quantize(x, "mxfp8_e4m3", first_dims=[32, 0, 64])
    with pytest.raises(ValueError, match=r"rowwise_amax: expected None \(format 'mxfp8_e4m3' has no amax\)"):
        rep(mx, rowwise_amax=np.ones(3, F32))
    with pytest.raises(ValueError, match=r"columnwise_data: expected None \(options.axis='rowwise'\)"):
        rep(mx, columnwise_data=mx.rowwise_data)
    g.extra["G"] = 5                                # a plain dict: len follows the host dims
    assert len(g) == 3 and len(list(g)) == 3

    opts = fp4kit.QuantizeOptions
    for kw, err, match in ((dict(format="bogus"), ValueError, r"format: expected one of"),
                           (dict(format="nvfp4", axis="sideways"), ValueError, r"axis: expected one of"),
                           (dict(format="nvfp4", seed=-5), ValueError, r"seed: expected an integer in"),
                           (dict(format="nvfp4", tile_2d=1), TypeError, r"tile_2d: expected True or False"),
                           (dict(format="mxfp8_e4m3", rounding="stochastic"), ValueError, r"rounding: 'stochastic'"),
                           (dict(format="nvfp4", rht=True), ValueError, r"rht: the Hadamard transform applies"),
                           (dict(format="nvfp4", row_scaled=True, tile_2d=True), ValueError, r"row_scaled: cannot")):
        with pytest.raises(err, match=match):
            opts(**kw)
    assert opts(format=fp4kit.FORMATS["nvfp4"], seed=np.uint64(3)).seed == 3
    q = fp4kit.quantize(x, "nvfp4", axis="both")
    for kw, match in (({"rowwise": None}, r"rowwise: options.axis='both' asks for it, got None"),
                      ({"options": rep(q.options, axis="rowwise")}, r"columnwise: options.axis='rowwise' does not ask"),
                      ({"options": rep(q.options, scale_layout="swizzled")},
                       r"rowwise.scale_layout: expected options.scale_layout='swizzled', got 'compact'"),
                      ({"options": rep(q.options, rht=True)}, r"options: rht=True quantizes bfloat16 input only"),
                      ({"input_dtype": 5}, r"input_dtype: expected one of")):
        with pytest.raises(ValueError, match=match):
            rep(q, **kw)
    m = fp4kit.quantize(x, "mxfp8_e4m3").rowwise
    with pytest.raises(ValueError, match=r"amax: only NVFP4 operands carry an amax; format 'mxfp8_e4m3' takes None"):
        rep(m, amax=np.ones(1, F32))
    with pytest.raises(ValueError, match=r"amax: an NVFP4 operand needs its float32 amax"):
        rep(q.rowwise, amax=None)
    assert type(rep(m, rows=np.int64(96)).rows) is int


def test_hand_built_grouped_arrays_are_checked():
    """GroupedArray's metadata agree with each other and with its buffer (they were taken as
    given: a last_dims one short made y[1] an IndexError and list(y) one member; offsets that
    disagreed with the dims gave y[i] and iteration different slices)."""
    x = np.random.default_rng(9).standard_normal((96, 64)).astype(F32)
    y = fp4kit.group_dequantize(fp4kit.group_quantize(x, "mxfp8_e4m3", first_dims=[32, 0, 64]))
    GA = fp4kit.GroupedArray
    ok = GA(data=y.data, kind=y.kind, first_dims=[32, 0, 64], last_dims=[64, 64, 64], offsets=y.offsets)
    assert ok.first_dims == (32, 0, 64) and [a.shape for a in ok] == [(32, 64), (0, 64), (64, 64)]
    base = dict(data=y.data, kind=y.kind, first_dims=(32, 0, 64), last_dims=(64, 64, 64), offsets=y.offsets)
    for kw, err, match in (({"kind": "whatever"}, ValueError, r"kind: expected one of"),
                           ({"operand": "both"}, ValueError, r"operand: expected 'rowwise' or 'columnwise'"),
                           ({"data": list(range(6144))}, TypeError, r"data: expected a flat array"),
                           ({"last_dims": (64, 64)}, ValueError, r"last_dims: expected one per member, 3"),
                           ({"offsets": (0, 2048, 2048, 4096)}, ValueError, r"offsets: expected the running sums"),
                           ({"data": y.data[:-1]}, ValueError, r"data: expected a flat array of the members' 6144"),
                           ({"data": y.data.reshape(96, 64)}, ValueError, r"got shape \(96, 64\)"),
                           ({"first_dims": (32, -1, 64)}, ValueError, r"first_dims\[1\]: expected a non-negative")):
        with pytest.raises(err, match=match):
            GA(**{**base, **kw})
    from fp4kit._grouped_views import _grouped_array    # the GPU paths' unchecked twin sets the same fields
    for kw in (base, {**base, "operand": "columnwise", "group": "<g>"}):
        fast = _grouped_array(**kw)
        ref = vars(GA(**kw))
        assert type(fast) is GA and list(vars(fast)) == list(ref) == [f.name for f in dataclasses.fields(GA)]
        assert all(vars(fast)[k] is v for k, v in ref.items())


def test_the_format_registry_is_read_only():
    with pytest.raises(TypeError):
        fp4kit.FORMATS["nvfp4"] = fp4kit.FORMATS["mxfp8_e4m3"]       # type: ignore[index]
    assert list(fp4kit.FORMATS)[-1] == "nvfp4" and dict(fp4kit.FORMATS)["nvfp4"].block == 16

"""fp4kit.qmatmul on the CPU: hand-computed products (decoded codes x block scales, float64 sums,
NVFP4 global scales per tensor or per row) and the argument checks (SPEC.md section 8)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import fp4kit

F32 = np.float32
QMATMUL = [fp4kit.qmatmul, fp4kit.reference.qmatmul]


def _alpha(amax: float) -> float:
    """NVFP4's global decode scale fp32(amax * fp32(1/2688)), as float64."""
    return float(F32(F32(amax) * (F32(1) / F32(2688))))


@pytest.mark.parametrize("qmatmul", QMATMUL)
def test_mxfp8_by_hand(qmatmul):
    # a: amax 96 -> rceil(96/448) = 2^-2 (E = 125): 96 -> 384, 2.3 -> 9.2 -> E4M3 9 (2.25), 2 -> 8
    a = np.full((1, 32), 2.0, F32)
    a[0, :2] = (96.0, 2.3)
    qa = fp4kit.quantize(a, "mxfp8_e4m3")
    assert qa.rowwise.scales.tolist() == [[125]]
    # b: ones -> rceil(1/448) = 2^-8 (E = 119), element 256; a second row of -0.5
    b = np.stack([np.ones(32, F32), np.full(32, -0.5, F32)])
    qb = fp4kit.quantize(b, "mxfp8_e4m3", scale_layout="swizzled")
    got = qmatmul(qa, qb)
    exp = 96 + 2.25 + 30 * 2
    assert got.dtype == np.float32 and got.shape == (1, 2)
    assert got.tolist() == [[exp, -0.5 * exp]]


@pytest.mark.parametrize("qmatmul", QMATMUL)
def test_mixed_mx_elements_by_hand(qmatmul):
    """MX element types may differ (MXFP8 x MXFP4): E8M0 scales per 32 on both sides."""
    a = np.full((1, 32), 2.0, F32)
    a[0, :2] = (96.0, 2.3)
    b = np.ones((1, 32), F32)                # MXFP4: rceil(fp32(1/6)) = 2^-2, element 4 -> 1.0
    qb = fp4kit.quantize(b, "mxfp4_e2m1")
    assert qb.rowwise.scales.tolist() == [[125]]
    assert qmatmul(fp4kit.quantize(a, "mxfp8_e4m3"), qb).tolist() == [[96 + 2.25 + 30 * 2]]


@pytest.mark.parametrize("qmatmul", QMATMUL)
def test_nvfp4_global_scales_by_hand(qmatmul):
    # a: amax 6 -> S_enc 448, block scale E4M3 448 (0x7E), elements 6 -> 6, 1.2 -> 1 (E2M1 values)
    a = np.zeros((1, 16), F32)
    a[0, :2] = (6.0, 1.2)
    # b: ones, amax 1 -> S_enc 2688, block scale 448, elements 1 * ~6 -> 6
    b = np.ones((1, 16), F32)
    qa, qb = fp4kit.quantize(a, "nvfp4"), fp4kit.quantize(b, "nvfp4")
    assert qa.rowwise.scales.tolist() == [[0x7E]] and qb.rowwise.scales.tolist() == [[0x7E]]
    acc = (6 * 448 + 1 * 448) * (6 * 448)       # sum over k of (decoded element x block scale) products
    exp = F32(acc * _alpha(6.0) * _alpha(1.0))
    got = qmatmul(qa, qb)
    assert got.dtype == np.float32 and got.tolist() == [[float(exp)]]
    assert abs(float(exp) - 7.0) < 1e-5          # 6 * 1 + 1 * 1


@pytest.mark.parametrize("qmatmul", QMATMUL)
def test_nvfp4_row_scaled_alpha_per_row_and_column(qmatmul):
    """Row-scaled a: alpha per output row; row-scaled b: alpha per output column."""
    a = np.stack([np.full(16, 6.0, F32), np.full(16, 3.0, F32)])      # row amax 6 and 3
    b = np.stack([np.ones(16, F32), np.full(16, 2.0, F32)])           # row amax 1 and 2
    qa = fp4kit.quantize(a, "nvfp4", row_scaled=True)
    qb = fp4kit.quantize(b, "nvfp4", row_scaled=True, scale_layout="swizzled")
    # every row's block scale is 448 and every element 6: each is 6 * 448 before alpha
    assert (qa.rowwise.scales == 0x7E).all() and (fp4kit.unswizzle_scales(qb.rowwise.scales, (2, 1)) == 0x7E).all()
    acc = 16 * (6 * 448) ** 2
    exp = np.array([[acc * _alpha(ra) * _alpha(rb) for rb in (1.0, 2.0)] for ra in (6.0, 3.0)]).astype(F32)
    got = qmatmul(qa, qb)
    np.testing.assert_array_equal(got, exp)
    np.testing.assert_allclose(got, [[96, 192], [48, 96]], rtol=1e-6)
    # b not row-scaled: one alpha (amax 2) for both output columns; b's row of ones has the block
    # scale 224 (E4M3 0x76) and elements 1 * ~6 -> 6
    qb1 = fp4kit.quantize(b, "nvfp4")
    assert qb1.rowwise.scales.tolist() == [[0x76], [0x7E]]
    exp1 = np.array([[16 * (6 * 448) * (c * s) * _alpha(ra) * _alpha(2.0) for c, s in ((6, 224), (6, 448))]
                     for ra in (6.0, 3.0)]).astype(F32)
    np.testing.assert_array_equal(qmatmul(qa, qb1), exp1)


@pytest.mark.parametrize("qmatmul", QMATMUL)
def test_columnwise_operands_and_empty_shapes(qmatmul):
    x = np.arange(64 * 4, dtype=F32).reshape(64, 4) / 64
    q = fp4kit.quantize(x, "mxfp8_e4m3", axis="both")
    # x^T x from the columnwise operands (K = 64 along the rows of x) equals the dequantized product
    xt = fp4kit.dequantize(q, operand="columnwise").astype(np.float64)
    got = qmatmul(q, q, a_operand="columnwise", b_operand="columnwise")
    np.testing.assert_array_equal(got, (xt @ xt.T).astype(F32))
    e = qmatmul(fp4kit.quantize(np.zeros((0, 32), F32), "mxfp8_e4m3"), fp4kit.quantize(np.ones((3, 32), F32), "mxfp8_e4m3"))
    assert e.shape == (0, 3) and e.dtype == np.float32
    z = qmatmul(fp4kit.quantize(np.ones((2, 0), F32), "nvfp4"), fp4kit.quantize(np.ones((3, 0), F32), "nvfp4"))
    assert z.shape == (2, 3) and z.dtype == np.float32 and not z.any()


_X = np.ones((4, 32), F32)


def _q(fmt="mxfp8_e4m3", shape=(4, 32), **kw):
    return fp4kit.quantize(np.ones(shape, F32), fmt, **kw)


def _hand_built(q, field, convert):
    """q with its rowwise operand's `field` replaced by convert(field): an operand no quantize gives."""
    import dataclasses
    op = q.rowwise
    return dataclasses.replace(q, rowwise=dataclasses.replace(op, **{field: convert(getattr(op, field))}))


QMATMUL_ERRORS = [
    ("a_data_float32", lambda: (_hand_built(_q(), "data", lambda d: d.astype(F32) + F32(0.5)), _q()), {}, TypeError,
     r"data: expected a uint8 NumPy array \(as quantize gives\), got dtype float32"),
    ("b_scales_int64", lambda: (_q(), _hand_built(_q(), "scales", lambda d: d.astype(np.int64) + 256)), {},
     TypeError, r"scales: expected a uint8 NumPy array \(as quantize gives\), got dtype int64"),
    ("b_amax_float64", lambda: (_q("nvfp4"), _hand_built(_q("nvfp4"), "amax", lambda a: a.astype(np.float64))), {},
     TypeError, r"amax: expected a float32 NumPy array \(as quantize gives\), got dtype float64"),
    ("a_not_quantized", lambda: (_X, _q()), {}, TypeError, r"a: expected a QuantizedTensor, got ndarray"),
    ("b_not_quantized", lambda: (_q(), None), {}, TypeError, r"b: expected a QuantizedTensor, got NoneType"),
    ("a_grouped", lambda: (fp4kit.group_quantize(np.ones((64, 32), F32), "mxfp8_e4m3", num_groups=2), _q()), {},
     TypeError, r"a: expected a QuantizedTensor \(one member of a group: a\[i\]\), got GroupedQuantizedTensor"),
    ("k_mismatch", lambda: (_q(), _q(shape=(3, 64))), {}, ValueError,
     r"b: the operands must share the block axis K; expected b's rowwise operand with 32 columns .* got 3x64"),
    ("b_transposed", lambda: (_q(), _q(shape=(32, 8))), {}, ValueError, r"got 32x8 \(its rows run along K"),
    ("nvfp4_with_mx", lambda: (_q(), _q("nvfp4")), {}, ValueError,
     r"b: block-scaled GEMMs pair NVFP4 only with NVFP4 .*expected an MX format like a's 'mxfp8_e4m3'.*got 'nvfp4'"),
    ("mx_with_nvfp4", lambda: (_q("nvfp4"), _q("mxfp4_e2m1")), {}, ValueError,
     r"b: block-scaled GEMMs .*expected nvfp4 like a's 'nvfp4' \(E4M3 scales per 16\), got 'mxfp4_e2m1' \(E8M0 scales per 32\)"),
    ("a_operand_missing", lambda: (_q(), _q()), {"a_operand": "columnwise"}, ValueError,
     r"a_operand: a was quantized with axis='rowwise' and has no columnwise operand"),
    ("b_operand_missing", lambda: (_q(), _q(axis="columnwise")), {}, ValueError,
     r"b_operand: b was quantized with axis='columnwise' and has no rowwise operand"),
    ("operand_choice", lambda: (_q(), _q()), {"b_operand": "both"}, ValueError,
     r"b_operand: expected one of \['rowwise', 'columnwise'\], got 'both'"),
    ("rht_with_plain", lambda: (_qrht(), _qrht(rht=False)), {"a_operand": "columnwise", "b_operand": "columnwise"},
     ValueError, r"b_operand: both operands' K axes must be in one basis; expected b's columnwise operand "
                 r"Hadamard-transformed with rht_sign_mask=0xd7e8 like a's columnwise operand, got without"),
    ("rht_masks_differ", lambda: (_qrht(), _qrht(rht_sign_mask=0x1234)),
     {"a_operand": "columnwise", "b_operand": "columnwise"}, ValueError,
     r"expected b's columnwise operand Hadamard-transformed with rht_sign_mask=0xd7e8 .*got Hadamard-transformed "
     r"with rht_sign_mask=0x1234"),
    ("rht_columnwise_with_rowwise", lambda: (_qrht(), _qrht(shape=(16, 32), rht=False)), {"a_operand": "columnwise"},
     ValueError, r"expected b's rowwise operand Hadamard-transformed .*got without the Hadamard transform"),
]


def _qrht(shape=(32, 8), rht=True, **kw):
    """NVFP4 "both" of a bfloat16 (T, N) tensor; with rht, its columnwise operand (N, T) is transformed."""
    x = np.random.default_rng(3).standard_normal(shape).astype(ml_dtypes.bfloat16)
    return fp4kit.quantize(x, "nvfp4", axis="both", rht=rht, **kw)


def test_qmatmul_of_two_hadamard_transformed_operands():
    """The wgrad product dY^T X from both columnwise operands, each quantized with rht=True and one sign
    mask: H is orthonormal, so the product approximates dY^T X like the untransformed one does."""
    rng = np.random.default_rng(5)
    dy = rng.standard_normal((64, 16)).astype(ml_dtypes.bfloat16)
    x = rng.standard_normal((64, 24)).astype(ml_dtypes.bfloat16)
    want = dy.astype(np.float64).T @ x.astype(np.float64)
    for rht in (False, True):
        got = fp4kit.qmatmul(fp4kit.quantize(dy, "nvfp4", axis="both", rht=rht),
                             fp4kit.quantize(x, "nvfp4", axis="both", rht=rht), "columnwise", "columnwise")
        assert got.shape == (16, 24) and got.dtype == np.float32
        assert np.linalg.norm(got - want) < 0.25 * np.linalg.norm(want), rht


@pytest.mark.parametrize("qmatmul", QMATMUL)
@pytest.mark.parametrize("case", QMATMUL_ERRORS, ids=[c[0] for c in QMATMUL_ERRORS])
def test_qmatmul_errors(qmatmul, case):
    _, args, kw, exc, match = case
    with pytest.raises(exc, match=match):
        qmatmul(*args(), **kw)

"""fp4kit.error_report and the repr/HTML summaries (CPU, reference backend)."""
from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest

import fp4kit
from fp4kit.analysis import ErrorReport

RNG = np.random.default_rng(7)
X = RNG.standard_normal((48, 64)).astype(np.float32)

VARIANTS = [
    ("mxfp8_e4m3", {}), ("mxfp8_e5m2", {"scale_rule": "floor"}), ("mxfp6_e2m3", {"scale_layout": "swizzled"}),
    ("mxfp6_e3m2", {}), ("mxfp4_e2m1", {"rounding": "stochastic", "seed": 3}), ("nvfp4", {}),
    ("nvfp4", {"tile_2d": True}), ("nvfp4", {"row_scaled": True}), ("nvfp4", {"rounding": "stochastic"}),
    ("nvfp4", {"rht": True}),
]


@pytest.mark.parametrize("fmt,opts", VARIANTS, ids=lambda v: str(v))
def test_every_format_and_variant(fmt, opts):
    x = X.astype(ml_dtypes.bfloat16) if opts.get("rht") else X
    q = fp4kit.quantize(x, fmt, axis="both", **opts)
    rep = fp4kit.error_report(x, q)
    assert isinstance(rep, ErrorReport)
    assert [o.operand for o in rep.operands] == ["rowwise", "columnwise"]
    for o in rep.operands:
        assert 5 < o.snr_db < 60, (fmt, opts, o)
        assert o.finite == x.size and o.nan == o.inf == 0
        assert o.max_abs_error >= np.sqrt(o.mse) * 0.999
        assert 0 <= o.saturated <= 1 and 0 <= o.zeroed <= 1
        n_blocks = o.shape[0] * -(-o.shape[1] // fp4kit.FORMATS[fmt].block)
        assert sum(c for _, c in o.scale_histogram) == n_blocks      # swizzle padding excluded
    text = str(rep)
    assert "rowwise" in text and "columnwise" in text and "SNR dB" in text
    assert "<table" in rep._repr_html_()
    want = "rht16(x^T, 0xD7E8)" if opts.get("rht") else "x^T"
    assert rep["columnwise"].reference == want


def test_figures_are_the_definitions():
    q = fp4kit.quantize(X, "nvfp4", axis="both")
    rep = fp4kit.error_report(X, q)
    y = fp4kit.dequantize(q).astype(np.float64)
    e = y - X
    r = rep["rowwise"]
    assert r.mse == pytest.approx(np.mean(e * e))
    assert r.max_abs_error == pytest.approx(np.max(np.abs(e)))
    assert r.snr_db == pytest.approx(10 * np.log10(np.sum(X.astype(np.float64) ** 2) / np.sum(e * e)))
    yc = fp4kit.dequantize(q, operand="columnwise").astype(np.float64)
    assert rep["columnwise"].mse == pytest.approx(np.mean((yc - X.T) ** 2))


def test_rht_columnwise_is_compared_with_the_transform():
    xb = X.astype(ml_dtypes.bfloat16)
    q = fp4kit.quantize(xb, "nvfp4", axis="columnwise", rht=True, rht_sign_mask=0x1234)
    ref = fp4kit.reference.rht.rht16(np.ascontiguousarray(xb.astype(np.float32).T), 0x1234)
    yc = fp4kit.dequantize(q, operand="columnwise").astype(np.float64)
    rep = fp4kit.error_report(xb, q)
    assert rep["columnwise"].reference == "rht16(x^T, 0x1234)"
    assert rep["columnwise"].mse == pytest.approx(np.mean((yc - ref) ** 2))


def test_saturated_zeroed_and_exact():
    ones = np.ones((2, 32), np.float32)              # NVFP4: every block amax maps onto 6 exactly
    r = fp4kit.error_report(ones, fp4kit.quantize(ones, "nvfp4"))["rowwise"]
    assert r.saturated == 1.0 and r.zeroed == 0.0 and r.snr_db == float("inf") and r.mse == 0
    x = np.full((1, 32), 1e-4, np.float32)
    x[0, 0] = 6.0                                     # MXFP4: the small ones fall below the grid
    r = fp4kit.error_report(x, fp4kit.quantize(x, "mxfp4_e2m1"))["rowwise"]
    assert r.zeroed == pytest.approx(31 / 32)
    assert r.scale_histogram == ((127, 1),) and r.scale_label(127) == "2^0"


def test_non_finite_inputs_are_counted_and_excluded():
    x = X.copy()
    x[0, 0], x[1, 40], x[2, 2] = np.nan, np.inf, -np.inf
    rep = fp4kit.error_report(x, fp4kit.quantize(x, "mxfp8_e4m3", axis="both"))
    for o in rep.operands:
        assert (o.nan, o.inf, o.finite) == (1, 2, x.size - 3)
        assert np.isfinite(o.mse) and np.isfinite(o.snr_db)


def test_bad_arguments():
    q = fp4kit.quantize(X, "nvfp4")
    with pytest.raises(ValueError, match="x: expected the shape"):
        fp4kit.error_report(X[:16], q)
    with pytest.raises(TypeError, match="q: expected a QuantizedTensor"):
        fp4kit.error_report(X, X)
    with pytest.raises(KeyError):
        fp4kit.error_report(X, q)["columnwise"]
    with pytest.raises(TypeError, match="x: expected the array that q was quantized from .* got list"):
        fp4kit.error_report(X.tolist(), q)
    # the arguments swapped, or two QuantizedTensors (as fp4kit.compare takes them): a TypeError that
    # says the order (q has a .shape, so the float conversion of its fields used to fail unnamed)
    for x in (q, q.rowwise):
        with pytest.raises(TypeError, match=r"^x: expected the array that q was quantized from .* got "
                                            r"(QuantizedTensor|Operand) \(error_report takes the input first"):
            fp4kit.error_report(x, q)


def test_result_types_compare_by_identity_and_hash():
    """They hold arrays: == must not raise NumPy's "truth value ... is ambiguous", and they can be
    set members / dict keys (frozen dataclasses with array fields used to fail at both)."""
    q, q2 = fp4kit.quantize(X, "nvfp4", axis="both"), fp4kit.quantize(X, "nvfp4", axis="both")
    g = fp4kit.group_quantize(np.ones((64, 32), np.float32), "mxfp8_e4m3", num_groups=2)
    g2 = fp4kit.group_quantize(np.ones((64, 32), np.float32), "mxfp8_e4m3", num_groups=2)
    y, y2 = fp4kit.group_dequantize(g), fp4kit.group_dequantize(g2)
    for a, b in ((q, q2), (q.rowwise, q2.rowwise), (g, g2), (y, y2)):
        assert a == a and not (a == b) and a != b
        assert len({a, b, a}) == 2
    assert fp4kit.compare(q, q2)          # contents: byte for byte
    assert q.options == q2.options        # plain values still compare by value


def test_operand_repr_and_grouped_nbytes():
    q = fp4kit.quantize(np.ones((4, 64), np.float32), "nvfp4", axis="both", scale_layout="swizzled")
    assert repr(q.rowwise) == ("Operand: nvfp4 4x64, codes (4, 32), swizzled scales (128, 4), 644 bytes, amax 1")
    assert "array(" not in repr(q.columnwise) and "64x4" in repr(q.columnwise)
    g = fp4kit.group_quantize(np.ones((96, 64), np.float32), "nvfp4", first_dims=[32, 0, 64], axis="both")
    assert g.nbytes == sum(g[i].nbytes for i in range(len(g))) == 6936
    assert f"{g.nbytes:,} bytes" in repr(g)


class _DeviceLike:
    """Stands in for a device array: shape and nbytes only; any host conversion fails."""

    def __init__(self, shape, itemsize=1):
        self.shape, self.nbytes = shape, int(np.prod(shape)) * itemsize

    def __array__(self, *a, **k):
        raise RuntimeError("no host copies of device arrays in repr")


def test_repr_never_copies_device_arrays():
    q = fp4kit.quantize(X, "nvfp4", axis="both", scale_layout="swizzled")
    ops = {}
    for name in ("rowwise", "columnwise"):
        op = getattr(q, name)
        ops[name] = fp4kit.Operand(data=_DeviceLike(op.data.shape), scales=_DeviceLike(op.scales.shape),
                                   scale_layout=op.scale_layout, amax=_DeviceLike((1,), 4),
                                   rows=op.rows, cols=op.cols, format=op.format)
    qd = fp4kit.QuantizedTensor(format=q.format, shape=q.shape, rowwise=ops["rowwise"], columnwise=ops["columnwise"],
                                options=q.options, input_dtype=q.input_dtype)
    assert "amax (1,) on device, not read" in repr(qd)
    assert str(q.nbytes) in repr(qd).replace(",", "")
    assert "QuantizedTensor" in qd._repr_html_()


def test_repr_contents():
    q = fp4kit.quantize(X, "mxfp4_e2m1", axis="both", scale_layout="swizzled")
    text = repr(q)
    for part in ("mxfp4_e2m1", "(48, 64)", "rowwise", "columnwise", "swizzled", "compression", "bytes", "amax"):
        assert part in text, part
    h = q._repr_html_()
    assert "E2M1" in h and "swizzled" in h and "<table" in h
    g = fp4kit.group_quantize(np.ones((96, 64), np.float32), "nvfp4", first_dims=[32, 0, 64], axis="both")
    text = repr(g)
    for part in ("nvfp4", "varying_first", "3 members", "32x64", "compression", "rowwise amax (3,)"):
        assert part in text, part
    assert "<table" in g._repr_html_()


def _as_device_dims(g, error_code=0):
    """g as the GPU returns a group with device-side dims: dims as arrays, no host offsets, an error
    word (NumPy arrays stand in for the device arrays: the views read them through to_numpy)."""
    import dataclasses
    return dataclasses.replace(g, first_dims=np.array(g.first_dims, np.int64), last_dims=np.array(g.last_dims, np.int64),
                               offsets=None, extra={"G": len(g), "error_flag": np.array([error_code], np.int32)})


def test_device_dims_group_views_and_display():
    x = np.random.default_rng(3).standard_normal((96, 64)).astype(np.float32)
    g = fp4kit.group_quantize(x, "mxfp8_e4m3", first_dims=[32, 0, 64], axis="both")
    gd = _as_device_dims(g)
    assert gd.host_dims() == (g.first_dims, g.last_dims)
    assert repr(gd) == repr(g)
    assert gd._repr_html_() == g._repr_html_()
    y = fp4kit.reference.group_dequantize(g)
    yd = fp4kit.GroupedArray(data=y.data, kind=y.kind, first_dims=gd.first_dims, last_dims=gd.last_dims,
                             offsets=None, group=gd)
    assert yd.host_dims() == (g.first_dims, g.last_dims)
    for i in range(len(g)):
        np.testing.assert_array_equal(yd[i], y[i])
        assert yd[i].shape == y[i].shape
    assert yd[-1].shape == (64, 64)
    with pytest.raises(IndexError, match="group has 3 members, got 3"):
        yd[3]
    with pytest.raises(TypeError, match="index: expected an int"):
        yd[1.0]
    bad = _as_device_dims(g, error_code=1)
    text = repr(bad)
    assert "dims not shown: group dims (device):" in text and "32x64" not in text and "mxfp8_e4m3" in text
    assert "<table" in bad._repr_html_()
    yb = fp4kit.GroupedArray(data=y.data, kind=y.kind, first_dims=bad.first_dims, last_dims=bad.last_dims,
                             offsets=None, group=bad)
    with pytest.raises(ValueError, match="group dims \\(device\\)"):
        yb[0]


# ---------------------------------------------------------------------------------------------
# fp4kit.compare: structural differences first, bytes only where they mean the same thing

def test_compare_reports_another_format_up_front():
    x = X[:4]
    rep = fp4kit.compare(fp4kit.quantize(x, "nvfp4"), fp4kit.quantize(x, "mxfp4_e2m1"))
    assert not rep and rep.errors[0].startswith("format: got 'nvfp4', expected 'mxfp4_e2m1'")
    assert rep.fields == {} and rep.mismatches == []          # no "rounding off by one code", no "0 / 8"
    text = str(rep)
    assert text.splitlines()[0] == "MISMATCH: 1 structural difference(s), 0 differing bytes"
    assert "rounding" not in text and " / " not in text
    op_rep = fp4kit.compare(fp4kit.quantize(x, "nvfp4").rowwise, fp4kit.quantize(x, "mxfp4_e2m1").rowwise)
    assert not op_rep and op_rep.errors[0].startswith("operand.format: got 'nvfp4', expected 'mxfp4_e2m1'")
    assert op_rep.mismatches == []


def test_compare_reports_shape_and_layout_differences():
    rep = fp4kit.compare(fp4kit.quantize(X[:2], "nvfp4"), fp4kit.quantize(X[:4], "nvfp4"))
    assert not rep and rep.errors == ["shape: got (2, 64), expected (4, 64) (bytes not compared)"]
    assert rep.fields == {}
    got = fp4kit.quantize(X, "mxfp8_e4m3", scale_layout="swizzled")
    rep = fp4kit.compare(got, fp4kit.quantize(X, "mxfp8_e4m3"))
    assert not rep and rep.errors == ["rowwise.scale_layout: got 'swizzled', expected 'compact' (scales not compared)"]
    assert "rowwise.scales" not in rep.fields and rep.fields["rowwise.data"].differing == 0
    # a shape mismatch inside an operand: an error, never a field that reads "0 / n"
    op = got.rowwise
    bad = fp4kit.Operand.__new__(fp4kit.Operand)
    bad.__dict__.update(vars(op), scales=op.scales[:, :2])
    rep = fp4kit.compare(bad, op)
    assert rep.errors == ["operand.scales: shape (128, 2) != expected (128, 4)"] and "operand.scales" not in rep.fields


def test_compare_grouped_structure():
    x = np.random.default_rng(8).standard_normal((96, 64)).astype(np.float32)
    g = fp4kit.group_quantize(x, "nvfp4", first_dims=[32, 32, 32])
    rep = fp4kit.compare(fp4kit.group_quantize(x, "mxfp4_e2m1", first_dims=[32, 32, 32]), g)
    assert rep.errors == ["format: got 'mxfp4_e2m1', expected 'nvfp4' (codes and scales of different formats are not compared)"]
    assert rep.fields == {}
    rep = fp4kit.compare(fp4kit.group_quantize(x, "nvfp4", first_dims=[16, 48, 32]), g)
    assert len(rep.errors) == 1 and rep.errors[0].startswith("dims: got first_dims=(16, 48, 32)") and rep.fields == {}
    rep = fp4kit.compare(fp4kit.group_quantize(x, "nvfp4", num_groups=3), g)
    assert rep.errors == ["kind: got 'same', expected 'varying_first'"] and rep.differing == 0    # same bytes
    assert fp4kit.compare(fp4kit.quantize(x, "nvfp4"), g).errors == ["got is a QuantizedTensor, expected a grouped result"]


def test_grouped_array_repr_is_metadata_only():
    """GroupedArray's repr names its members, kind, operand, where the dims live and the buffer's size,
    never the buffer's values (a large group printed whole otherwise)."""
    g = fp4kit.group_quantize(np.ones((96, 64), np.float32), "mxfp8_e4m3", num_groups=3)
    y = fp4kit.group_dequantize(g)
    assert repr(y) == "GroupedArray: 3 members (same, rowwise, dims on the host), ndarray of 6,144 float32 elements"
    assert "1." not in repr(y)


def test_error_report_of_an_empty_operand_has_no_snr():
    """An operand with no finite element has no SNR to report: NaN, not the inf of an exact result."""
    x = np.ones((0, 64), np.float32)
    rep = fp4kit.error_report(x, fp4kit.quantize(x, "mxfp8_e4m3"))
    assert np.isnan(rep["rowwise"].snr_db) and rep["rowwise"].finite == 0
    exact = fp4kit.error_report(np.ones((2, 32), np.float32), fp4kit.quantize(np.ones((2, 32), np.float32), "mxfp8_e4m3"))
    assert exact["rowwise"].snr_db == float("inf")



@pytest.mark.parametrize("fmt,kw", [("nvfp4", {}), ("nvfp4", {"row_scaled": True}), ("mxfp4_e2m1", {}),
                                    ("mxfp8_e4m3", {})])
def test_scale_values_are_the_dequantize_factors(fmt, kw):
    """fp32_RN(decode(code) * scale_values) is dequantize's float32 value, bit for bit (NVFP4: SPEC
    section 4's fp32 steps, not a float64 amax / 2688)."""
    from fp4kit.analysis import operand_codes, scale_values
    from fp4kit.reference.numerics import decode

    rng = np.random.default_rng(11)
    x = (rng.standard_normal((32, 64)) * np.exp2(rng.integers(-20, 20, (32, 1)))).astype(np.float32)
    q = fp4kit.quantize(x, fmt, **kw)
    op = q.rowwise
    elem = fp4kit.FORMATS[fmt].element
    got = (decode(operand_codes(op), elem).astype(np.float32) * scale_values(op).astype(np.float32))
    assert np.array_equal(got.view(np.uint32), fp4kit.dequantize(q).view(np.uint32))


# fp4kit.compare given the wrong things: a report or a TypeError / ValueError naming the argument,
# never an AttributeError or NumPy's reshape message

def test_compare_different_kinds_of_result_is_a_structural_difference():
    q = fp4kit.quantize(X[:4], "nvfp4", axis="both")
    assert fp4kit.compare(q, q.rowwise).errors == ["got is a QuantizedTensor, expected an Operand"]
    assert fp4kit.compare(q.rowwise, q).errors == ["got is an Operand, expected a QuantizedTensor"]
    g = fp4kit.group_quantize(X[:4], "nvfp4", num_groups=2)
    assert fp4kit.compare(g, q).errors == ["got is a grouped result, expected a QuantizedTensor"]
    for got, want, who in ((q, X, "expected"), (X, q, "got"), (None, q, "got")):
        with pytest.raises(TypeError, match=rf"^{who}: expected a QuantizedTensor, Operand or GroupedQuantizedTensor, got"):
            fp4kit.compare(got, want)


def test_compare_checks_x_and_max_shown_up_front():
    q = fp4kit.quantize(X[:4], "nvfp4", axis="both")
    with pytest.raises(ValueError, match=r"^x: expected shape \(4, 64\) \(the input that `expected` was quantized from\), got \(2, 64\)$"):
        fp4kit.compare(q, q, x=X[:2])
    with pytest.raises(TypeError, match=r"^x: expected the input that `expected` was quantized from \(a NumPy or device array\), got list$"):
        fp4kit.compare(q, q, x=[1.0, 2.0])
    with pytest.raises(ValueError, match=r"^x: expected shape \(64, 4\) \(the operand.s own input: x for a rowwise operand, x\^T for a columnwise one\), got \(4, 64\)$"):
        fp4kit.compare(q.columnwise, q.columnwise, x=X[:4])          # an operand's own (rows, cols) input: x^T
    assert fp4kit.compare(q.columnwise, q.columnwise, x=X[:4].T)
    g = fp4kit.group_quantize(X[:4], "nvfp4", num_groups=2)
    with pytest.raises(ValueError, match=r"^x: expected the members' sum\(M_i\*K_i\)=256 elements"):
        fp4kit.compare(g, g, x=X[:2])
    # the report keeps max_shown mismatches: a non-integer failed only at the first mismatch, with '<' not supported
    with pytest.raises(TypeError, match=r"^max_shown: expected an integer >= 0, got str '3'$"):
        fp4kit.compare(q, q, max_shown="3")
    with pytest.raises(ValueError, match=r"^max_shown: expected an integer >= 0, got -1$"):
        fp4kit.compare(q, q, max_shown=-1)


def _with_data(q, name, data):
    import dataclasses
    return dataclasses.replace(q, **{name: dataclasses.replace(getattr(q, name), data=data)})


def test_compare_names_a_flipped_rounding_tie_given_x():
    """The classes table promises 'rounding tie flipped' when x puts the scaled input on a midpoint;
    the classifier was never handed the scaled input, so every such byte read 'off by one code'."""
    # MXFP8 E4M3: amax 448 -> E = 127, scale 1; 1.0625 lies halfway between codes 0x38 (1.0) and 0x39
    x = np.zeros((2, 64), np.float32)
    x[:, 0], x[:, 1], x[:, 40] = 448.0, 1.0625, 1.1
    for layout in ("compact", "swizzled"):
        exp = fp4kit.quantize(x, "mxfp8_e4m3", scale_layout=layout)
        bad = exp.rowwise.data.copy()
        bad[1, 1] += 1              # the other side of the tie
        bad[0, 40] += 1             # no tie: 1.1 is nearer 1.125
        rep = fp4kit.compare(_with_data(exp, "rowwise", bad), exp, x=x)
        assert {m.index: m.kind for m in rep.mismatches} == {(0, 40): "rounding off by one code",
                                                             (1, 1): "rounding tie flipped"}, layout
        rep = fp4kit.compare(_with_data(exp, "rowwise", bad), exp)      # without x: cannot tell
        assert rep.fields["rowwise.data"].kinds == {"rounding off by one code": 2}
    # NVFP4, columnwise operand (x^T), packed nibbles: amax 2688 gives S_enc = 1; a block of max 6 has
    # scale 1.0, so 2.5 lies halfway between E2M1 2 (code 4) and 3 (code 5)
    x = np.zeros((32, 4), np.float32)
    x[0, 0], x[16, 1], x[17, 1], x[18, 1] = 2688.0, 6.0, 2.5, 2.4
    exp = fp4kit.quantize(x, "nvfp4", axis="both")
    bad = exp.columnwise.data.copy()
    assert (bad[1, 8], bad[1, 9]) == (0x47, 0x04)     # column 1, rows 16-18: 6.0 -> 7, 2.5 -> 4 (2.0), 2.4 -> 4
    bad[1, 8], bad[1, 9] = 0x57, 0x05                  # 2.5 -> 3.0 (the tie's other side), 2.4 -> 3.0 (no tie)
    rep = fp4kit.compare(_with_data(exp, "columnwise", bad), exp, x=x)
    assert {m.index: m.kind for m in rep.mismatches} == {(1, 8): "rounding tie flipped",
                                                         (1, 9): "rounding off by one code"}
    # a grouped result: x is the members' elements back to back, split per member
    flat = np.ascontiguousarray(x.T).reshape(-1)
    exp = fp4kit.group_quantize(flat, "nvfp4", first_dims=2, last_dims=[32, 32], amax=np.full(2, 2688, np.float32))
    bad = exp.rowwise_data.copy()
    assert (bad[24], bad[25]) == (0x47, 0x04)          # member 0 (x^T rows 0-1), row 1, bytes 8 and 9
    bad[24], bad[25] = 0x57, 0x05
    import dataclasses
    rep = fp4kit.compare(dataclasses.replace(exp, rowwise_data=bad), exp, x=flat)
    assert {m.index: m.kind for m in rep.mismatches} == {(1, 8): "rounding tie flipped",
                                                         (1, 9): "rounding off by one code"}
    assert rep.fields["[0].rowwise.data"].differing == 2 and rep.fields["[1].rowwise.data"].differing == 0


def test_repr_reads_host_amax_of_any_size_without_warnings():
    """A NumPy amax is host memory: summarised whatever its size (only device arrays over 65536
    entries are left unread); an all-NaN row-scaled amax is shown as nan without NumPy's warning."""
    import warnings
    x = np.ones((70000, 16), np.float32)
    x[5] = 3
    q = fp4kit.quantize(x, "nvfp4", row_scaled=True)
    assert "(70000,) per row, max 3" in repr(q) and "on device" not in repr(q)
    op = dataclasses.replace(q.rowwise, amax=np.full(70000, np.nan, np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "(70000,) per row, max nan" in repr(dataclasses.replace(q, rowwise=op))


def test_hand_built_shape_items_are_plain_integers():
    q = fp4kit.quantize(X, "mxfp8_e4m3")
    built = dataclasses.replace(q, shape=tuple(np.int64(d) for d in q.shape))
    assert built.shape == q.shape and all(type(d) is int for d in built.shape)
    assert "np.int64" not in repr(built) and str(q.shape) in repr(built)
    for bad in ((float(q.shape[0]), q.shape[1]), (True, q.shape[1]), (-1, q.shape[1]), ("64", q.shape[1])):
        with pytest.raises(ValueError, match=r"shape: expected non-negative integers"):
            dataclasses.replace(q, shape=bad)


def test_outputs_lost_at_finite_inputs_make_the_error_infinite():
    """NVFP4 of an input holding inf: the global amax is inf and every other element dequantizes
    to NaN. The figures say so (SNR -inf, errors inf, the lost count) instead of nan, which means
    "nothing to measure"; saturated / zeroed are nan when they have no population."""
    x = RNG.standard_normal((64, 64)).astype(np.float32)
    x[3, 3] = np.inf
    o = fp4kit.error_report(x, fp4kit.quantize(x, "nvfp4"))["rowwise"]
    assert (o.finite, o.inf, o.lost) == (4095, 1, 4095)
    assert o.snr_db == -np.inf and o.mse == o.max_abs_error == o.max_rel_error == np.inf
    assert "1 in, 4095 out" in str(fp4kit.error_report(x, fp4kit.quantize(x, "nvfp4")))
    one = np.ones((2, 16), np.float32)
    ok = fp4kit.error_report(one, fp4kit.quantize(one, "nvfp4"))["rowwise"]
    assert ok.lost == 0 and ok.snr_db == np.inf
    z = np.zeros((32, 32), np.float32)
    oz = fp4kit.error_report(z, fp4kit.quantize(z, "mxfp8_e4m3"))["rowwise"]
    assert oz.saturated == 0 and np.isnan(oz.zeroed)             # no non-zero input to zero
    n = np.full((32, 32), np.nan, np.float32)
    on = fp4kit.error_report(n, fp4kit.quantize(n, "mxfp8_e4m3"))["rowwise"]
    assert on.finite == 0 and np.isnan(on.saturated) and np.isnan(on.zeroed) and np.isnan(on.snr_db)


def test_error_report_iterates_over_its_operands():
    """ErrorReport is indexed by operand name; iteration, len and `in` follow the operands (list(rep)
    and "rowwise" in rep fell back to rep[0] and raised KeyError; len(rep) was a TypeError)."""
    both = fp4kit.error_report(X, fp4kit.quantize(X, "mxfp8_e4m3", axis="both"))
    assert list(both) == list(both.operands) and [o.operand for o in both] == ["rowwise", "columnwise"]
    assert len(both) == 2 and "rowwise" in both and "columnwise" in both
    assert "x" not in both and 0 not in both and both["columnwise"] is both.operands[1]
    col = fp4kit.error_report(X, fp4kit.quantize(X, "nvfp4", axis="columnwise"))
    assert len(col) == 1 and "rowwise" not in col and "columnwise" in col
    assert [o.operand for o in col] == ["columnwise"]

"""fp4kit.compare never says "ok" for results whose bytes differ (CPU, reference backend).

Each test takes a reference result, changes a few bytes (or a structural detail) by hand, and
checks that the report is not ok and names the right field.
"""
from __future__ import annotations

import dataclasses

import numpy as np

import fp4kit

RNG = np.random.default_rng(11)
X = RNG.standard_normal((256, 64)).astype(np.float32)   # 256 rows: a swizzled buffer with padding


def _ref(fmt="nvfp4", x=X, **kw):
    return fp4kit.reference.quantize(x, fmt, **kw)


def _with(q, operand="rowwise", **changes):
    """`q` with its `operand` Operand rebuilt with `changes` (arrays copied by the caller)."""
    op = dataclasses.replace(getattr(q, operand), **changes)
    return dataclasses.replace(q, **{operand: op})


def _bad(rep, field):
    assert not rep.ok and not bool(rep), str(rep)
    assert field in rep.fields and rep.fields[field].differing > 0, str(rep)


def test_a_changed_amax_is_a_mismatch():
    q = _ref(axis="both")
    for operand in ("rowwise", "columnwise"):
        amax = np.array(getattr(q, operand).amax, copy=True)
        amax[0] = np.nextafter(amax[0], np.float32(np.inf))
        _bad(fp4kit.compare(_with(q, operand, amax=amax), q), f"{operand}.amax")


def test_every_row_amax_is_compared():
    q = _ref(row_scaled=True)
    amax = np.array(q.rowwise.amax, copy=True)
    assert amax.size == X.shape[0]
    amax[-1] *= 2
    rep = fp4kit.compare(_with(q, amax=amax), q)
    _bad(rep, "rowwise.amax")
    assert rep.fields["rowwise.amax"].differing == 1


def test_amax_signed_zero_and_nan_payload_are_compared_as_bytes():
    z = np.zeros((4, 64), np.float32)
    q = _ref(x=z)
    assert q.rowwise.amax.view(np.uint32)[0] == 0
    neg = np.array([-0.0], np.float32)                           # equal as floats, not as bytes
    _bad(fp4kit.compare(_with(q, amax=neg), q), "rowwise.amax")
    nan1, nan2 = np.array([0x7FC00000], np.uint32).view(np.float32), np.array([0x7FC00001], np.uint32).view(np.float32)
    _bad(fp4kit.compare(_with(q, amax=nan2), _with(q, amax=nan1)), "rowwise.amax")
    assert fp4kit.compare(_with(q, amax=nan1.copy()), _with(q, amax=nan1)).ok


def test_a_missing_amax_is_a_structural_difference():
    op = _ref().rowwise                              # a QuantizedTensor insists on it; an Operand does not
    no_amax = dataclasses.replace(op, amax=None)
    for got, exp in ((no_amax, op), (op, no_amax)):
        rep = fp4kit.compare(got, exp)
        assert not rep.ok and any(e.startswith("operand.amax") for e in rep.errors), str(rep)


def test_a_missing_operand_is_a_structural_difference():
    q = _ref(axis="both")
    for operand in ("rowwise", "columnwise"):
        part = dataclasses.replace(q, **{operand: None})
        for got, exp in ((part, q), (q, part)):
            rep = fp4kit.compare(got, exp)
            assert not rep.ok and any(e.startswith(f"{operand}:") for e in rep.errors), str(rep)


def test_nonzero_padding_of_swizzled_scales_is_a_mismatch():
    q = _ref("mxfp8_e4m3", x=X[:100], scale_layout="swizzled")   # 100 rows -> 28 padding rows
    sc = np.array(q.rowwise.scales, copy=True)
    flat = sc.reshape(-1)
    from fp4kit.reference.layouts import swizzled_offset
    R, C = q.rowwise.scale_shape
    ii, jj = np.meshgrid(np.arange(R), np.arange(C), indexing="ij")
    used = np.zeros(flat.size, bool)
    used[swizzled_offset(ii, jj, C).reshape(-1)] = True
    pad = np.flatnonzero(~used)
    assert pad.size and not flat[pad].any()
    flat[pad[-1]] = 0x7F
    rep = fp4kit.compare(_with(q, scales=sc), q)
    _bad(rep, "rowwise.scales")
    assert rep.fields["rowwise.scales"].kinds["padding not zero"] == 1


def test_every_differing_scale_byte_counts_in_both_layouts():
    for layout in ("compact", "swizzled"):
        q = _ref("mxfp8_e4m3", scale_layout=layout)
        sc = np.array(q.rowwise.scales, copy=True)
        flat = sc.reshape(-1)
        idx = [0, flat.size // 2, flat.size - 1]   # swizzled: the last byte may be padding; it counts too
        for i in idx:
            flat[i] ^= 0x01                          # one code away
        rep = fp4kit.compare(_with(q, scales=sc), q)
        _bad(rep, "rowwise.scales")
        assert rep.fields["rowwise.scales"].differing == len(idx), (layout, str(rep))
        one = np.array(q.rowwise.scales, copy=True)
        one.reshape(-1)[-1] ^= 0x01                  # only the last byte
        _bad(fp4kit.compare(_with(q, scales=one), q), "rowwise.scales")


def test_a_scale_one_code_away_is_a_mismatch():
    q = _ref("mxfp4_e2m1")
    sc = np.array(q.rowwise.scales, copy=True)
    sc[3, 1] += 1
    rep = fp4kit.compare(_with(q, scales=sc), q)
    _bad(rep, "rowwise.scales")
    assert rep.fields["rowwise.scales"].kinds["scale off by one code"] == 1


def test_swapped_nibbles_are_a_mismatch():
    q = _ref()
    d = np.array(q.rowwise.data, copy=True)
    r, c = np.argwhere((d >> 4) != (d & 0xF))[0]
    d[r, c] = (d[r, c] >> 4) | ((d[r, c] & 0xF) << 4)
    rep = fp4kit.compare(_with(q, data=d), q)
    _bad(rep, "rowwise.data")
    assert rep.fields["rowwise.data"].kinds["nibble order swapped"] == 1


def test_ok_counts_every_differing_byte_not_only_those_shown():
    q = _ref(axis="both")
    d = np.array(q.columnwise.data, copy=True)
    d[-1, -1] ^= 0x11
    rep = fp4kit.compare(_with(q, "columnwise", data=d), q, max_shown=0)
    assert rep.mismatches == []
    _bad(rep, "columnwise.data")
    assert rep.differing == 1


def test_codes_in_another_dtype_are_not_equal_by_value():
    q = _ref("mxfp8_e4m3")
    as_float = np.asarray(q.rowwise.data).astype(np.float32)     # same values, other bytes
    rep = fp4kit.compare(_with(q, data=as_float), q)
    assert not rep.ok and any("rowwise.data" in e for e in rep.errors), str(rep)


def test_grouped_member_structure_differences_are_reported():
    x = RNG.standard_normal((96, 64)).astype(np.float32)
    g = fp4kit.reference.group_quantize(x, "nvfp4", first_dims=[32, 0, 64])
    gs = fp4kit.reference.group_quantize(x, "nvfp4", first_dims=[32, 0, 64], scale_layout="swizzled")
    rep = fp4kit.compare(gs, g)
    assert not rep.ok and any(e.startswith("[0] ") and "scale_layout" in e for e in rep.errors), str(rep)


def test_grouped_last_member_bytes_are_compared():
    x = RNG.standard_normal((96, 64)).astype(np.float32)
    g = fp4kit.reference.group_quantize(x, "mxfp8_e4m3", first_dims=[32, 0, 64])
    d = np.array(g.rowwise_data, copy=True)
    d[-1] ^= 0x01
    rep = fp4kit.compare(dataclasses.replace(g, rowwise_data=d), g)
    _bad(rep, "[2].rowwise.data")


def test_grouped_dbias_is_compared():
    x = RNG.standard_normal((96, 64)).astype(np.float32)
    g = fp4kit.reference.group_quantize(x, "mxfp8_e4m3", first_dims=[32, 0, 64], dbias=True)
    assert fp4kit.compare(g, g).ok
    b = np.array(g.dbias, copy=True)
    b[-1, -1] += 1.0
    _bad(fp4kit.compare(dataclasses.replace(g, dbias=b), g), "dbias")
    rep = fp4kit.compare(dataclasses.replace(g, dbias=None), g)
    assert not rep.ok and any("dbias" in e for e in rep.errors), str(rep)


def test_a_nan_dbias_is_a_mismatch():
    x = RNG.standard_normal((96, 64)).astype(np.float32)
    g = fp4kit.reference.group_quantize(x, "mxfp8_e4m3", first_dims=[32, 0, 64], dbias=True)
    b = np.array(g.dbias, copy=True)
    b[0, 5] = np.nan
    _bad(fp4kit.compare(dataclasses.replace(g, dbias=b), g), "dbias")


def test_dbias_with_an_inf_column_still_compares_the_others():
    """An inf in one column of a member must not widen the tolerance of its other columns (it
    made it inf), and the inf itself must match by sign."""
    x = RNG.standard_normal((96, 64)).astype(np.float32)
    x[0, 3] = np.inf
    g = fp4kit.reference.group_quantize(x, "mxfp8_e4m3", first_dims=[32, 0, 64], dbias=True)
    assert np.isposinf(g.dbias[0, 3])
    assert fp4kit.compare(g, g).ok and fp4kit.compare(g, g, x=x).ok
    b = np.array(g.dbias, copy=True)
    b[0, 7] = 12345.0
    _bad(fp4kit.compare(dataclasses.replace(g, dbias=b), g), "dbias")
    _bad(fp4kit.compare(dataclasses.replace(g, dbias=b), g, x=x), "dbias")
    b = np.array(g.dbias, copy=True)
    b[0, 3] = -np.inf
    _bad(fp4kit.compare(dataclasses.replace(g, dbias=b), g), "dbias")


def test_dbias_nan_matches_nan_and_an_extra_dbias_is_reported():
    x = RNG.standard_normal((96, 64)).astype(np.float32)
    x[40, 2] = np.nan                                     # member 2's column 2 sums to NaN
    g = fp4kit.reference.group_quantize(x, "mxfp8_e4m3", first_dims=[32, 0, 64], dbias=True)
    assert np.isnan(g.dbias[2, 2]) and fp4kit.compare(g, g).ok
    b = np.array(g.dbias, copy=True)
    b[2, 2] = 0.0
    _bad(fp4kit.compare(dataclasses.replace(g, dbias=b), g), "dbias")
    plain = fp4kit.reference.group_quantize(x, "mxfp8_e4m3", first_dims=[32, 0, 64])
    rep = fp4kit.compare(g, plain)
    assert not rep.ok and any("dbias" in e for e in rep.errors)


def test_dbias_tolerance_with_x_is_spec_s_per_column_bound():
    """Given x, the bound is 1e-6 * sum |x| over the member's rows of that column (SPEC section 7):
    a column that cancels to ~0 from large values keeps a wide bound, a column of small values a
    narrow one."""
    x = np.zeros((64, 32), np.float32)
    x[0::2, 0], x[1::2, 0] = 1000.0, -1000.0             # column 0: sum 0, sum |x| = 64000
    x[:, 1] = 0.001                                       # column 1: sum 0.064, sum |x| = 0.064
    g = fp4kit.reference.group_quantize(x, "mxfp8_e4m3", first_dims=[64], dbias=True)
    b = np.array(g.dbias, copy=True)
    b[0, 0] += 0.03                                       # within 1e-6 * 64000 = 0.064
    assert fp4kit.compare(dataclasses.replace(g, dbias=b), g, x=x).ok
    b[0, 0] += 0.05                                       # 0.08 > 0.064
    _bad(fp4kit.compare(dataclasses.replace(g, dbias=b), g, x=x), "dbias")
    b = np.array(g.dbias, copy=True)
    b[0, 1] += 1e-7                                       # 1e-7 > 1e-6 * 0.064
    _bad(fp4kit.compare(dataclasses.replace(g, dbias=b), g, x=x), "dbias")


def test_an_amax_in_another_dtype_is_not_equal_by_value():
    q = _ref(axis="both")
    as_f64 = np.asarray(q.rowwise.amax).astype(np.float64)        # same value, other bytes
    rep = fp4kit.compare(_with(q, amax=as_f64), q)
    assert not rep.ok and any("rowwise.amax" in e and "float64" in e for e in rep.errors), str(rep)


def test_a_misplaced_swizzled_scale_byte_is_one_from_its_own_tile():
    """Swizzled scales come in 512-byte tiles (128 rows x 4 blocks): a wrong byte is "misplaced"
    when it is another entry's expected byte in the same tile, "other" when it only occurs in
    another tile (the two row tiles here hold disjoint scale values)."""
    from fp4kit.reference.layouts import swizzled_offset
    steps = (2.0 ** (3 * (np.arange(128) % 4) - 40)).astype(np.float32)[:, None]
    x = np.concatenate([X[:128] * steps, X[128:] * np.float32(2.0 ** 20)])
    q = _ref("mxfp8_e4m3", x=x, scale_layout="swizzled")
    R, C = q.rowwise.scale_shape
    assert (R, C) == (256, 2)
    flat = np.asarray(q.rowwise.scales).reshape(-1)
    off = lambda i, j: int(swizzled_offset(i, j, C))              # noqa: E731
    top = {int(flat[off(i, j)]) for i in range(128) for j in range(C)}
    bottom = {int(flat[off(i, j)]) for i in range(128, 256) for j in range(C)}
    assert not top & bottom
    a = off(0, 0)
    b = next(off(i, j) for i in range(128) for j in range(C) if abs(int(flat[off(i, j)]) - int(flat[a])) > 1)
    far = next(v for v in sorted(bottom) if all(abs(v - t) > 1 for t in top))
    sc = np.array(q.rowwise.scales, copy=True)
    s = sc.reshape(-1)
    s[a], s[b] = flat[b], flat[a]                                 # two entries of tile 0 swapped
    s[off(5, 1)] = far                                            # a value only tile 1 holds
    kinds = fp4kit.compare(_with(q, scales=sc), q).fields["rowwise.scales"].kinds
    assert kinds["swizzled byte misplaced"] == 2 and kinds["other"] == 1, dict(kinds)

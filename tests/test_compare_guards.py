"""fp4kit.compare never says "ok" for results whose bytes differ (CPU, reference backend).

Each test takes a reference result, changes a few bytes (or a structural detail) by hand, and
checks that the report is not ok and names the right field.
"""
from __future__ import annotations

import copy
import dataclasses
from collections import Counter

import numpy as np
import pytest

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
    op = _ref().rowwise                              # the constructors insist on it; a copy edited past them
    no_amax = copy.copy(op)
    object.__setattr__(no_amax, "amax", None)
    for got, exp in ((no_amax, op), (op, no_amax)):
        rep = fp4kit.compare(got, exp)
        assert not rep.ok and any(e.startswith("operand.amax") for e in rep.errors), str(rep)


def test_a_missing_operand_is_a_structural_difference():
    q = _ref(axis="both")
    for operand in ("rowwise", "columnwise"):
        other = "columnwise" if operand == "rowwise" else "rowwise"
        part = dataclasses.replace(q, **{operand: None}, options=dataclasses.replace(q.options, axis=other))
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


def test_reports_with_input_blocks_compare_with_eq():
    """Mismatch.input_block (an array) is shown, not compared: two reports of one comparison made
    with x are equal (== raised NumPy's "truth value of an array is ambiguous")."""
    q = _ref("mxfp8_e4m3")
    d = np.array(q.rowwise.data, copy=True)
    d[1, 2] ^= 0x01
    d[7, 40] ^= 0x33
    a, b = fp4kit.compare(_with(q, data=d), q, x=X), fp4kit.compare(_with(q, data=d), q, x=X)
    assert a.mismatches[0].input_block is not None
    assert a == b and a.mismatches == b.mismatches and a.mismatches[0] == b.mismatches[0]
    assert a != fp4kit.compare(_with(q, data=d), q, x=X, max_shown=1)


def test_grouped_mismatches_name_their_member():
    """A grouped report's mismatches carry the member index, like the keys of rep.fields."""
    x = RNG.standard_normal((96, 64)).astype(np.float32)
    g = fp4kit.reference.group_quantize(x, "mxfp8_e4m3", first_dims=[32, 0, 64])
    d = np.array(g.rowwise_data, copy=True)
    d[0] ^= 0x01
    d[-1] ^= 0x01
    rep = fp4kit.compare(dataclasses.replace(g, rowwise_data=d), g, x=x)
    assert [m.field for m in rep.mismatches] == ["[0].rowwise.data", "[2].rowwise.data"], str(rep)
    assert all(m.field in rep.fields for m in rep.mismatches)
    assert "    [2].rowwise.data[63, 63]: got" in str(rep), str(rep)


# -- the classification, byte by byte: the comparator's rules written as one loop per field (how
#    compare classified every differing byte before it was vectorised), to check the vectorised
#    counts and the mismatches it shows against ----------------------------------------------------

def _slow_code_kind(g, e, elem, scaled_input=None):
    from fp4kit.reference.numerics import decode
    sign = 1 << (elem.bits - 1)
    gm, em = g & (sign - 1), e & (sign - 1)
    if gm == 0 and em == 0 and g != e:
        return "sign of zero"
    if elem.has_nan and ({gm, em} == {elem.max_code, elem.nan_code}) and (g & sign) == (e & sign):
        return "saturation vs NaN"
    if (not elem.has_nan) and g == elem.nan_code and e != g and scaled_input is not None and np.isnan(scaled_input):
        return "saturation vs NaN"
    if (g & sign) == (e & sign) and abs(gm - em) == 1:
        if scaled_input is not None and np.isfinite(scaled_input):
            lo, hi = sorted((float(decode(np.uint8(gm), elem)), float(decode(np.uint8(em), elem))))
            if abs(float(scaled_input)) == (lo + hi) / 2:
                return "rounding tie flipped"
        return "rounding off by one code"
    return "other"


def _slow_operand(name, got, exp, x2, transposed):
    """[(field, index, got, expected, kind, block, input_block)] of every differing byte, in order."""
    from fp4kit.comparator import _scale_factors
    from fp4kit.reference.layouts import swizzled_offset
    out = []
    f = fp4kit.FORMATS[exp.format]
    gd, ed = np.asarray(got.data), np.asarray(exp.data)
    diff = np.argwhere(gd != ed)
    mult = _scale_factors(exp) if x2 is not None and len(diff) else None

    def scaled(r, col):
        if mult is None:
            return None
        xv = x2[col, r] if transposed else x2[r, col]
        with np.errstate(over="ignore", invalid="ignore"):
            return np.float32(xv) * mult[r, col // f.block]

    for r, c in diff.tolist():
        g, e = int(gd[r, c]), int(ed[r, c])
        if f.packed and ((g >> 4) | ((g & 0xF) << 4)) == e:
            kind, col = "nibble order swapped", 2 * c
        elif f.packed:
            col = 2 * c if (g & 0xF) != (e & 0xF) else 2 * c + 1
            sh = 0 if col == 2 * c else 4
            kind = _slow_code_kind((g >> sh) & 0xF, (e >> sh) & 0xF, f.elem, scaled(r, col))
        else:
            col = c
            kind = _slow_code_kind(g, e, f.elem, scaled(r, col))
        blk = (r, col // f.block)
        ib = None
        if x2 is not None:
            b0, b1 = blk[1] * f.block, min((blk[1] + 1) * f.block, exp.cols)
            ib = x2[b0:b1, r] if transposed else x2[r, b0:b1]
        out.append((f"{name}.data", (r, c), g, e, kind, blk, ib))
    fname = f"{name}.scales"
    gs, es = np.asarray(got.scales), np.asarray(exp.scales)
    R, C = exp.scale_shape
    if exp.scale_layout == "swizzled":
        owner = np.full(es.size, -1, dtype=np.int64)
        for i in range(R):
            for j in range(C):
                owner[int(swizzled_offset(i, j, C))] = i * C + j
        ge, ee = gs.reshape(-1), es.reshape(-1)
        for r, c in np.argwhere(gs != es).tolist():
            flat = r * es.shape[1] + c
            g, e, o = int(ge[flat]), int(ee[flat]), int(owner[flat])
            if o < 0:
                out.append((fname, (r, c), g, e, "padding not zero", None, None))
                continue
            tile = range(flat // 512 * 512, flat // 512 * 512 + 512)
            if abs(g - e) == 1:
                kind = "scale off by one code"
            elif any(owner[t] >= 0 and ee[t] == g for t in tile):
                kind = "swizzled byte misplaced"
            else:
                kind = "other"
            out.append((fname, (r, c), g, e, kind, (o // C, o % C), None))
    else:
        for r, c in np.argwhere(gs != es).tolist():
            g, e = int(gs[r, c]), int(es[r, c])
            out.append((fname, (r, c), g, e, "scale off by one code" if abs(g - e) == 1 else "other", (r, c), None))
    if exp.amax is not None:
        ga, ea = np.asarray(got.amax), np.asarray(exp.amax)
        for (i,) in np.argwhere(ga.view(np.uint32) != ea.view(np.uint32)).tolist():
            out.append((f"{name}.amax", (i,), float(ga[i]), float(ea[i]), "amax differs", None, None))
    return out


def _perturb(q, rng):
    """`q` with about a tenth of its code and scale bytes (and amax) changed in every way the
    comparator tells apart: one code away, nibbles swapped, sign flipped, max / NaN codes, a byte
    of another entry of the same tile, random bytes, padding written."""
    f = fp4kit.FORMATS[q.format]
    elem = f.elem
    sign = 1 << (elem.bits - 1)
    ops = {}
    for name in ("rowwise", "columnwise"):
        op = getattr(q, name)
        d = np.array(op.data, copy=True)
        flat = d.reshape(-1)
        at = rng.choice(flat.size, size=max(1, flat.size // 10), replace=False)
        how = rng.integers(0, 8, size=at.size)
        v = flat[at].astype(np.int64)
        hi_sign = sign << 4 if f.packed else 0
        new = np.select(
            [how == 0, how == 1, how == 2, how == 3, how == 4, how == 5, how == 6],
            [v ^ 0x01, v ^ 0x10 if f.packed else v ^ 0x02, (v >> 4) | ((v & 0xF) << 4) if f.packed else v - 1,
             v ^ sign, v ^ hi_sign if f.packed else v + 1,
             (v & ~(sign - 1)) | elem.max_code, (v & ~(sign - 1)) | elem.nan_code],
            default=rng.integers(0, 1 << min(8, 2 * elem.bits if f.packed else elem.bits), size=at.size))
        flat[at] = (new & 0xFF).astype(np.uint8)
        s = np.array(op.scales, copy=True)
        sf = s.reshape(-1)
        at = rng.choice(sf.size, size=max(1, sf.size // 10), replace=False)
        how = rng.integers(0, 4, size=at.size)
        other = (at // 512) * 512 + rng.integers(0, min(512, sf.size), size=at.size) % max(1, min(512, sf.size))
        other = np.minimum(other, sf.size - 1)
        sv = sf[at].astype(np.int64)
        sf[at] = (np.select([how == 0, how == 1, how == 2], [sv ^ 0x01, sv + 1, sf[other]],
                            default=rng.integers(0, 256, size=at.size)) & 0xFF).astype(np.uint8)
        amax = op.amax
        if amax is not None:
            amax = np.array(amax, copy=True)
            amax.reshape(-1)[0] = np.nextafter(amax.reshape(-1)[0], np.float32(np.inf))
        ops[name] = dataclasses.replace(op, data=d, scales=s, amax=amax)
    return dataclasses.replace(q, **ops)


def _tie_rich_input(rng, fmt):
    """Values on a fine dyadic grid, so many scaled inputs sit exactly on a midpoint of two codes;
    MX inputs also hold NaN and inf."""
    x = (rng.integers(-96, 97, size=(200, 96)) / 16).astype(np.float32)
    x *= np.float32(2.0) ** rng.integers(-3, 4, size=(200, 1)).astype(np.float32)
    if fmt != "nvfp4":
        x.reshape(-1)[rng.choice(x.size, 40, replace=False)] = np.nan
        x.reshape(-1)[rng.choice(x.size, 10, replace=False)] = np.inf
    return x


CLASSES_SEEN: set = set()
ALL_CLASSES = {"nibble order swapped", "sign of zero", "saturation vs NaN", "rounding tie flipped",
               "rounding off by one code", "other", "scale off by one code", "swizzled byte misplaced",
               "padding not zero", "amax differs"}


@pytest.mark.parametrize("with_x", [False, True], ids=["no_x", "x"])
@pytest.mark.parametrize("layout", ["compact", "swizzled"])
@pytest.mark.parametrize("fmt", sorted(fp4kit.FORMATS))
def test_vectorised_classification_is_the_per_byte_one(fmt, layout, with_x):
    """compare counts every class as the byte-by-byte rules do, and shows the same first bytes
    (either way round: a perturbed result against the reference's, and the reference's against it)."""
    rng = np.random.default_rng(sum(map(ord, fmt + layout)) + with_x)
    x = _tie_rich_input(rng, fmt)
    with np.errstate(invalid="ignore", over="ignore"):
        q = fp4kit.reference.quantize(x, fmt, axis="both", scale_layout=layout)
    p = _perturb(q, rng)
    for got, exp in ((p, q), (q, p)):
        want = []
        for name in ("rowwise", "columnwise"):
            want += _slow_operand(name, getattr(got, name), getattr(exp, name), x if with_x else None,
                                  transposed=(name == "columnwise"))
        with np.errstate(invalid="ignore", over="ignore"):
            rep = fp4kit.compare(got, exp, x=x if with_x else None, max_shown=len(want))
            short = fp4kit.compare(got, exp, x=x if with_x else None, max_shown=5)
        counts: dict = {}
        for w in want:
            counts.setdefault(w[0], Counter())[w[4]] += 1
        assert {k: dict(v.kinds) for k, v in rep.fields.items() if v.differing} == \
            {k: dict(v) for k, v in counts.items()}
        assert rep.differing == len(want) == len(rep.mismatches)
        for m, w in zip(rep.mismatches, want):
            assert (m.field, m.index, m.got, m.expected, m.kind, m.block) == w[:6], (m, w[:6])
            assert (m.input_block is None) == (w[6] is None)
            if w[6] is not None:
                assert np.array_equal(m.input_block, w[6], equal_nan=True)
        for k, v in rep.fields.items():            # classes listed in the order they first occur
            assert list(v.kinds) == list(dict.fromkeys(w[4] for w in want if w[0] == k)), k
        assert short.fields == rep.fields and short.mismatches == rep.mismatches[:5]
        CLASSES_SEEN.update((fmt, k) for v in rep.fields.values() for k in v.kinds)


def test_the_classification_check_saw_every_class():
    """The randomised check above met every class (runs after it; alone it checks nothing)."""
    if not CLASSES_SEEN:
        pytest.skip("runs after test_vectorised_classification_is_the_per_byte_one")
    assert {k for _, k in CLASSES_SEEN} == ALL_CLASSES, ALL_CLASSES - {k for _, k in CLASSES_SEEN}
    no_nan = [f for f in fp4kit.FORMATS if not fp4kit.FORMATS[f].elem.has_nan]
    assert any((f, "saturation vs NaN") in CLASSES_SEEN for f in no_nan)      # the rule that needs x


def test_compare_builds_only_the_mismatches_it_shows(monkeypatch):
    """Counting is done on arrays: no Mismatch object per differing byte, only the max_shown kept."""
    import fp4kit.comparator as comparator
    made = []

    class Counted(comparator.Mismatch):
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            made.append(self)
    monkeypatch.setattr(comparator, "Mismatch", Counted)
    x = RNG.standard_normal((256, 256)).astype(np.float32)
    a = _ref("mxfp4_e2m1", x=x, axis="both", scale_layout="swizzled")
    b = _ref("mxfp4_e2m1", x=-x, axis="both", scale_layout="swizzled")
    rep = fp4kit.compare(a, b, x=-x, max_shown=3)
    assert rep.differing > 10_000 and len(rep.mismatches) == 3
    assert len(made) == 3


def test_a_large_comparison_of_unrelated_results_counts_every_byte():
    """1024 x 1024 MXFP8, both operands, swizzled scales, nearly every byte different: counted on
    arrays (a Python loop per byte took seconds per million bytes)."""
    rng = np.random.default_rng(5)
    x1, x2 = (rng.standard_normal((1024, 1024)).astype(np.float32) for _ in range(2))
    a = _ref("mxfp8_e4m3", x=x1, axis="both", scale_layout="swizzled")
    b = _ref("mxfp8_e4m3", x=x2, axis="both", scale_layout="swizzled")
    for x in (None, x2):
        rep = fp4kit.compare(a, b, x=x, max_shown=0)
        assert rep.mismatches == [] and not rep.ok
        for name in ("rowwise", "columnwise"):
            for part in ("data", "scales"):
                n = int(np.count_nonzero(np.asarray(getattr(getattr(a, name), part))
                                         != np.asarray(getattr(getattr(b, name), part))))
                fr = rep.fields[f"{name}.{part}"]
                assert fr.differing == n == sum(fr.kinds.values()) and n > 0

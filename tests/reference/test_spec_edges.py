"""SPEC.md edge cases that the other reference tests leave unchecked or check only by chance.

* RHT: "a zero result is +0" (section 4). test_rht_matches_spec_model compares floats with ``==``,
  which cannot tell -0 from +0; here the bits and the resulting E2M1 codes are checked.
* NVFP4: ``S_enc = min(S_enc, FLT_MAX)`` when 2688 / A overflows fp32 (a tiny global amax), with the
  expected bytes derived by hand below.
* Stochastic rounding: "NaN and |y| >= 6 handled as in section 2" and the sign of zero, for many seeds.
* Row-scaled NVFP4 dequantize: each row of the operand uses its own amax (the spec-model dequantize
  test draws one global amax only).
* "NaN ignored" by every amax (block, tile, global, per row and per column) for signalling NaNs
  too, wherever they sit: np.fmax.reduce returned NaN for one in a reduction's last position (found
  by a GPU fuzz run with a fresh seed, where the kernels were right and the reference was not).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import fp4kit
import spec_oracle as O


# ---------------------------------------------------------------------------------------------
# RHT: zero results are +0

@pytest.mark.parametrize("mask", [0, 0xFFFF, 0xD7E8, 0x1234])
def test_rht_zero_result_is_positive_zero(mask, check_bytes):
    """v_k = -0 where bit k of the mask is clear and +0 where it is set, so every s_k * v_k is -0 and
    the butterfly's first output is -0 + ... + -0 = -0 in float64; SPEC makes it +0. The rowwise
    operand (no transform) keeps the input's -0 signs, which shows the input really carries them."""
    col = np.array([0.0 if (mask >> k) & 1 else -0.0 for k in range(16)], np.float32)
    x = np.stack([col, col], axis=1).astype(ml_dtypes.bfloat16)                  # (16, 2), M = 16
    u = fp4kit.rht_transform(x, sign_mask=mask)
    check_bytes(u.view(np.uint16), np.zeros((2, 16), np.uint16), "rht_transform bits")
    q = fp4kit.quantize(x, "nvfp4", axis="both", rht=True, rht_sign_mask=mask)
    # A = 0 -> S_enc = 1; b = 0 -> sf 0, enc = FLT_MAX; +0 * FLT_MAX = +0 -> code 0 (a -0 would give 8)
    check_bytes(q.columnwise.data, np.zeros((2, 8), np.uint8), "columnwise codes")
    check_bytes(q.columnwise.amax, np.zeros(1, np.float32), "columnwise amax")
    neg = [0x8 if np.signbit(v) else 0x0 for v in (col[0], col[0])]              # row 0 = (col[0], col[0])
    assert q.rowwise.data[0, 0] == (neg[0] | neg[1] << 4)


# ---------------------------------------------------------------------------------------------
# NVFP4: S_enc clamped to FLT_MAX
#
# nvfp4 with supplied A = 2^-120: 2688 / A = 2688 * 2^120 > FLT_MAX, so fp32_RN gives +inf and
# S_enc = FLT_MAX = (2^24 - 1) * 2^104 (0x7F7FFFFF).
# S_dec = RN(1 / FLT_MAX) = RN(2^-128 (1 + 2^-24 + ...)) = 2^-128 (fp32 subnormal, unit 2^-149: 2^21 + 1/8 -> 2^21).
# mult = RN(FLT_MAX * 11184811 * 2^-26) = RN((2^24 - 1) * 11184811 * 2^78) = RN(11184810.33 * 2^102)
#      = 11184810 * 2^102 (0x7E2AAAAA).
# x = [6, 3, -1, 0.5, 0...] * 2^-120: b = 6 * 2^-120; b * mult = 67108860 * 2^-18 = 256 - 2^-16 (exact)
#   -> E4M3 nearest is 256 -> sf 0x78. enc = RN(1 / RN(256 * 2^-128)) = 2^120; y = [6, 3, -1, 0.5]
#   -> codes 7, 5, 0xA, 1 -> bytes 0x57 0x1A. (Without the clamp S_enc = inf, S_dec = 0, and the
#   block would get sf 0x7E.)
# Dequantize: final = RN(RN(256 * 2^-120) * 12782641 * 2^-35) = 12782641 * 2^-147 (0x01C30C31);
#   6 -> RN(38347923 * 2^-146) = 9586981 * 2^-144 (0x03124925); 3 -> 0x02924925; -1 -> 0x81C30C31;
#   0.5 -> 0x01430C31.

def test_nvfp4_s_enc_overflow_clamps_to_flt_max(check_bytes):
    t = np.float32(2.0 ** -120)
    x = np.zeros((1, 16), np.float32)
    x[0, :4] = np.array([6.0, 3.0, -1.0, 0.5], np.float32) * t
    with np.errstate(over="ignore"):
        assert np.isinf(np.float32(2688) / t)                                  # the clamp is needed
    q = fp4kit.quantize(x, "nvfp4", amax=np.array([t], np.float32))
    check_bytes(q.rowwise.scales, np.array([[0x78]], np.uint8), "sf")
    check_bytes(q.rowwise.data, np.array([[0x57, 0x1A, 0, 0, 0, 0, 0, 0]], np.uint8), "codes")
    want = np.zeros(16, np.uint32)
    want[:4] = [0x03124925, 0x02924925, 0x81C30C31, 0x01430C31]
    check_bytes(fp4kit.dequantize(q).view(np.uint32), want.reshape(1, 16), "dequantized")
    # the same through the computed amax (max |x| = 6 * 2^-120 also overflows 2688 / A)
    qc = fp4kit.quantize(x, "nvfp4")
    want_codes, want_sf = O.nvfp4_operand([[float(v) for v in x[0]]], float(6 * t))
    check_bytes(qc.rowwise.data, np.array([O.pack(want_codes[0])], np.uint8), "codes (computed amax)")
    check_bytes(qc.rowwise.scales, np.array(want_sf, np.uint8), "sf (computed amax)")


# ---------------------------------------------------------------------------------------------
# Stochastic rounding: specials keep section 2's rules whatever the draw

_NAN = np.float32(np.nan)
_NEG_NAN = np.array([0xFFC00000], np.uint32).view(np.float32)[0]


def _sr_row(fmt):
    """One block (NVFP4 16 / MXFP4 32) scaled by exactly 1, so y = x. NVFP4 with the supplied A = 6:
    S_enc = 448, the block amax 100 gives sf 0x7E and enc = fp32(1 / fp32(448 * fp32(1/448))) = 1.
    MXFP4 under the floor rule: block amax 7 gives E = exponent_field(7) - 2 = 127; 6.5 and -7 lie
    above the element max (y in (6, 8) is where floor needs saturation)."""
    big = [12.0, -100.0] if fmt == "nvfp4" else [6.5, -7.0]
    vals = [6.0, _NAN, _NEG_NAN, -0.0] + big + [-0.1, 0.1, 0.0, -5.99]
    n = 16 if fmt == "nvfp4" else 32
    x = np.zeros((1, n), np.float32)
    x[0, :len(vals)] = vals
    return x


# position -> the only allowed codes (fixed ones have one entry)
_SR_ALLOWED = {0: {0x7}, 1: {0x7}, 2: {0x7}, 3: {0x8}, 4: {0x7}, 5: {0xF}, 6: {0x8, 0x9}, 7: {0x0, 0x1}, 8: {0x0},
               9: {0xE, 0xF}}


@pytest.mark.parametrize("fmt", ["nvfp4", "mxfp4_e2m1"])
def test_sr_specials_follow_section_2_for_every_draw(fmt):
    x = _sr_row(fmt)
    kw = {"amax": np.array([6.0], np.float32)} if fmt == "nvfp4" else {"scale_rule": "floor"}
    seen = {i: set() for i in _SR_ALLOWED}
    for seed in range(256):
        q = fp4kit.quantize(x, fmt, rounding="stochastic", seed=seed, **kw)
        if fmt == "nvfp4":
            assert q.rowwise.scales[0, 0] == 0x7E
        else:
            assert q.rowwise.scales[0, 0] == 127
        b = q.rowwise.data[0]
        codes = np.empty(b.size * 2, np.uint8)
        codes[0::2], codes[1::2] = b & 0xF, b >> 4
        for i, allowed in _SR_ALLOWED.items():
            assert int(codes[i]) in allowed, (seed, i, hex(int(codes[i])))
            seen[i].add(int(codes[i]))
        assert not codes[len(_SR_ALLOWED):].any()                          # +0 padding stays +0
    # the draws really decide: both neighbours of -0.1, 0.1 and -5.99 occur over the seeds
    assert seen[6] == {0x8, 0x9} and seen[7] == {0x0, 0x1} and seen[9] == {0xE, 0xF}


# ---------------------------------------------------------------------------------------------
# Row-scaled NVFP4 dequantize: one amax per operand row

@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_row_scaled_dequantize_uses_each_rows_amax(dtype, check_bytes):
    g = np.random.default_rng(31)
    M, K = 6, 40
    x = (g.standard_normal((M, K)) * np.exp2(g.integers(-8, 9, (M, 1)))).astype(np.float32)
    q = fp4kit.quantize(x, "nvfp4", axis="both", row_scaled=True)
    assert q.rowwise.amax.shape == (M,) and q.columnwise.amax.shape == (K,)
    assert len(set(q.rowwise.amax.tolist())) > 1                          # the rows' amaxes differ
    for operand, shape in (("rowwise", (M, K)), ("columnwise", (K, M))):
        op = getattr(q, operand)
        want = O.dequantize("nvfp4", op.data, op.scales, op.amax, shape, dtype)
        got = fp4kit.dequantize(q, dtype=dtype, operand=operand)
        u = np.uint32 if dtype == "float32" else np.uint16
        check_bytes(got.view(u), want.view(u), f"{operand} {dtype}")


def test_member_loops_are_linear_in_the_number_of_members(monkeypatch):
    """SPEC 7 allows any G: iterating a group, group_dequantize and compare build the members'
    layout once (indexing g[i] rebuilt it for every member, O(G^2): 35 s for G = 8000 before), and
    iterating a GroupedArray reads its dims once. The members are the same as g[i]'s."""
    from fp4kit import _grouped_views

    calls = []
    real = _grouped_views.grouped_layout
    monkeypatch.setattr(_grouped_views, "grouped_layout", lambda *a: calls.append(1) or real(*a))
    G = 300
    first = [0] * (G - 3) + [16, 0, 48]
    x = np.random.default_rng(3).standard_normal((64, 64)).astype(np.float32)
    g = fp4kit.group_quantize(x, "nvfp4", first_dims=first, axis="both")
    del calls[:]
    members = list(g)
    assert len(calls) == 1 and len(members) == G
    for i in (0, G - 3, G - 2, G - 1):
        assert fp4kit.compare(members[i], g[i]).ok
        assert members[i].shape == (first[i], 64)
    del calls[:]
    d = fp4kit.group_dequantize(g, operand="columnwise")
    assert len(calls) == 1
    del calls[:]
    assert fp4kit.compare(g, g, x=x).ok and len(calls) == 2          # one layout per group
    back = list(d)
    assert len(back) == G and all(np.array_equal(b, d[i]) for i, b in enumerate(back))
    assert back[G - 1].shape == (64, 48)
    np.testing.assert_array_equal(back[G - 3], fp4kit.dequantize(g[G - 3], operand="columnwise"))


def test_members_of_a_group_with_dims_as_arrays_read_the_dims_once(monkeypatch):
    """A GPU group with device dims keeps them as arrays (offsets None, no scale offsets), and each
    read of them synchronises: iterating such a group (here NumPy arrays stand in for the device
    ones) reads them once and gives g[i]'s members; a GroupedArray of it (offsets None) iterates
    from one read as well."""
    import dataclasses

    from fp4kit.tensor import GroupedQuantizedTensor, _new

    x = np.random.default_rng(4).standard_normal((96, 64)).astype(np.float32)
    ref = fp4kit.group_quantize(x, "nvfp4", first_dims=[32, 0, 64], axis="both")
    g = _new(GroupedQuantizedTensor)                # as fp4kit._grouped_device._result builds one
    g.__dict__.update({f.name: getattr(ref, f.name) for f in dataclasses.fields(ref)})
    g.__dict__.update(first_dims=np.array([32, 0, 64], np.int64), last_dims=np.array([64] * 3, np.int64),
                      offsets=None, scale_offsets_rowwise=(), scale_offsets_columnwise=(), extra={"G": 3})
    reads = []
    real = GroupedQuantizedTensor.host_dims
    monkeypatch.setattr(GroupedQuantizedTensor, "host_dims", lambda self: reads.append(1) or real(self))
    members = list(g)
    assert len(reads) == 1 and len(members) == 3
    del reads[:]
    it = iter(g)                                    # lazy members: the dims are read at iter(), once
    assert len(reads) == 1 and next(it).shape == (32, 64)
    del reads[:]
    assert fp4kit.compare(g, ref).ok and len(reads) == 2     # once per group (it read them twice)
    arr = fp4kit.reference.group_dequantize(ref)
    dev_arr = fp4kit.GroupedArray(data=arr.data, kind=arr.kind, first_dims=g.first_dims,
                                  last_dims=g.last_dims, offsets=None, group=g)
    del reads[:]
    back = list(dev_arr)
    assert len(reads) == 1
    for i in range(3):
        assert fp4kit.compare(members[i], ref[i]).ok and members[i].shape == ref[i].shape
        np.testing.assert_array_equal(back[i], arr[i])


# ---------------------------------------------------------------------------------------------
# NaN ignored by the amaxes, signalling NaNs included

_SNANS = np.array([0x7F800001, 0xFF800001, 0x7FBFFFFF, 0xFFBFFFFF], np.uint32).view(np.float32)
_QNAN = np.float32(np.nan)


@pytest.mark.parametrize("fmt,opts", [("mxfp8_e4m3", {}), ("mxfp6_e3m2", {}), ("mxfp4_e2m1", {}),
                                      ("nvfp4", {}), ("nvfp4", {"row_scaled": True}),
                                      ("nvfp4", {"tile_2d": True})])
def test_signalling_nan_is_ignored_like_a_quiet_one(fmt, opts):
    """A signalling NaN gives the bytes of a quiet NaN at the same place: SPEC's amaxes ignore NaN
    whatever its payload. Small shapes, one NaN at each position in turn (the last element of the
    tensor, of a row and of a column included: there np.fmax.reduce used to keep a signalling NaN,
    as in the 2 x 2 row-scaled case a GPU fuzz run found), and 32 x 32 with one per row and column."""
    rng = np.random.default_rng(11)
    cases = []
    for shape in ((2, 2), (4, 18), (6, 34)):
        base = (rng.standard_normal(shape) * 3).astype(np.float32)
        for pos in np.ndindex(*shape):
            cases.append((base, (np.array([pos[0]]), np.array([pos[1]]))))
    base = (rng.standard_normal((32, 32)) * 3).astype(np.float32)
    cases.append((base, (np.arange(32), (np.arange(32) * 7 + 5) % 32)))
    for i, (base, where) in enumerate(cases):
        snan = _SNANS[i % len(_SNANS)]
        xs, xq = base.copy(), base.copy()
        xs[where], xq[where] = snan, _QNAN
        assert xs.view(np.uint32)[where[0][0], where[1][0]] == snan.view(np.uint32)
        qs = fp4kit.reference.quantize(xs, fmt, axis="both", **opts)
        qq = fp4kit.reference.quantize(xq, fmt, axis="both", **opts)
        rep = fp4kit.compare(qs, qq)
        assert rep.ok, f"{base.shape}, signalling NaN {snan.view(np.uint32):#x} at {where}: {rep}"
        gs = fp4kit.reference.group_quantize(xs, fmt, first_dims=[base.shape[0]], axis="both", **opts)
        rep = fp4kit.compare(gs[0], qq)
        assert rep.ok, f"group of one, {base.shape}, NaN at {where}: {rep}"


def test_nanmax_abs_ignores_every_nan_in_every_position():
    from fp4kit.reference.numerics import nanmax_abs
    for n in (1, 2, 3, 15, 16, 17, 33, 100):
        for pos in range(n):
            for nan in (*_SNANS, _QNAN, -_QNAN):
                v = np.linspace(-1, 0.5, n, dtype=np.float32)
                v[pos] = nan
                want = np.float32(np.abs(np.delete(v, pos)).max(initial=0))
                got = nanmax_abs(v, axis=0)
                assert got.view(np.uint32) == want.view(np.uint32), (n, pos, hex(int(np.float32(nan).view(np.uint32))))
                got2 = nanmax_abs(np.stack([v, v]).T, axis=0)        # strided along the reduction
                assert np.array_equal(got2.view(np.uint32), np.full(2, want).view(np.uint32)), (n, pos)

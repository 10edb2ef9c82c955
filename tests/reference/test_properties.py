"""Properties of the reference (SPEC.md sections 3-7), with hypothesis where natural and fixed seeds.

Error bounds of dequantize(quantize(x)) (finite x, nearest rounding; s = 2^(E-127) the block scale,
y = x / s, element type with m mantissa bits, smallest normal exponent emin, element max `max` and
max exponent emax_e; b = block amax, A = NVFP4 global amax):

* encoding y costs at most half an ulp of the element grid, 2^(max(floor(log2|y|), emin) - m - 1),
  i.e. <= 2^-(m+1) |y| in the normal range and <= 2^(emin-m-1) in the subnormal range, plus the
  saturation overshoot |y| - max when |y| > max.
* rceil: v = fp32(b * fp32(1/max)) >= (b / max)(1 - 2^-24) since fp32(1/max) >= 1/max for all five
  types, and s = 2^ceil(log2 v) >= v (or s = 2^-127 >= v), so |y| <= max (1 + 2^-23): no real
  saturation; s < 2 v <= 2 (b / max)(1 + 2^-22) unless s = 2^-127. Hence
      |x - dq| <= 2^-(m+1) |x| + 2^(emin-m-1) s + 2^-23 max s.
* floor: s = 2^(floor(log2 b) - emax_e), |y| < 2^(emax_e+1), the overshoot is at most
  (1 - max / 2^(emax_e+1)) |x| (E4M3 1/8, E5M2 1/8, E2M3 1/16, E3M2 1/8, E2M1 1/4), so
      |x - dq| <= max(2^-(m+1), 1 - max / 2^(emax_e+1)) |x| + 2^(emin-m-1) s.
* NVFP4 (computed A, so b <= A): sf = E4M3(b * mult) with b * mult ~ 448 b / A. If that is a normal
  E4M3 value (>= 2^-6) its relative error is <= 2^-4, the dequant scale is >= (15/16) b / 6 and
  |y| <= 6.4; E2M1 half ulps give <= |x| / 4 for |y| >= 1 and <= 0.25 * (17/16) b / 6 < b / 22 below,
  the overshoot above 6 is covered by the |x| / 4 term. If sf is subnormal or zero, the absolute error
  of decode(sf) is <= 2^-10, which costs at most 2^-10 A / 448. Hence
      |x - dq| <= (|x| / 4 + b / 22 + 2^-10 A / 448)(1 + 2^-16).
"""
from __future__ import annotations

import math
import os

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fp4kit
import spec_oracle as O
from fp4kit.reference import layouts
from fp4kit.reference.layouts import unpack_fp4
from fp4kit.reference.rht import rht16

R = fp4kit.reference
MX = ("mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4_e2m1")
ALL = MX + ("nvfp4",)
DTYPES = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}
HYP = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")


def rand(shape, seed, dtype="float32", spread=4):
    """Finite values with per-block magnitudes varying over 2^-spread .. 2^spread."""
    g = np.random.default_rng(seed)
    x = g.standard_normal(shape) * np.exp2(g.integers(-spread, spread + 1, size=shape[:-1] + (1,)))
    return x.astype(DTYPES[dtype])


def operands(q):
    return [(n, getattr(q, n)) for n in ("rowwise", "columnwise") if getattr(q, n) is not None]


def assert_same_quantized(a, b, check_bytes, what=""):
    for (name, oa), (_, ob) in zip(operands(a), operands(b), strict=True):
        check_bytes(oa.data, ob.data, f"{what} {name}.data")
        check_bytes(oa.scales, ob.scales, f"{what} {name}.scales")
        if oa.amax is not None or ob.amax is not None:
            check_bytes(oa.amax, ob.amax, f"{what} {name}.amax")


# ---------------------------------------------------------------------------------------------
# swizzled scales (section 6)

@HYP
@given(st.integers(0, 300), st.integers(0, 12), st.integers(0, 2 ** 32 - 1))
def test_swizzle_round_trip_and_zero_padding(rows, cols, seed):
    c = np.random.default_rng(seed).integers(1, 256, size=(rows, cols), dtype=np.uint8)   # no zero entries
    s = fp4kit.swizzle_scales(c)
    rp, cp = -(-rows // 128) * 128, -(-cols // 4) * 4
    assert s.shape == (rp, cp) and s.dtype == np.uint8
    flat = s.reshape(-1)
    i, j = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    off = ((i // 128) * (cp // 4) + j // 4) * 512 + (i % 32) * 16 + ((i % 128) // 32) * 4 + j % 4
    assert np.array_equal(flat[off], c)                       # SPEC's offset formula
    assert np.count_nonzero(flat) == rows * cols              # every padding byte is 0
    assert np.array_equal(fp4kit.unswizzle_scales(s, (rows, cols)), c)
    dirty = s.copy()
    mask = np.ones(flat.size, bool)
    mask[off.reshape(-1)] = False
    dirty.reshape(-1)[mask] = 0xA5                            # unswizzle ignores padding
    assert np.array_equal(fp4kit.unswizzle_scales(dirty, (rows, cols)), c)


@pytest.mark.parametrize("fmt", ALL)
def test_quantize_swizzled_equals_swizzled_compact(fmt, check_bytes):
    x = rand((150, 70), 1)
    a = fp4kit.quantize(x, fmt, axis="both")
    b = fp4kit.quantize(x, fmt, axis="both", scale_layout="swizzled")
    for (n, oa), (_, ob) in zip(operands(a), operands(b)):
        assert ob.scale_layout == "swizzled"
        check_bytes(ob.scales, layouts.swizzle(oa.scales), n)
        check_bytes(ob.data, oa.data, n)
        check_bytes(fp4kit.dequantize(b, operand=n), fp4kit.dequantize(a, operand=n), n)


# ---------------------------------------------------------------------------------------------
# orientation (section 5)

@pytest.mark.parametrize("fmt", ALL)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ("compact", "swizzled"))
def test_columnwise_is_rowwise_of_transpose(fmt, dtype, layout, check_bytes):
    x = rand((130, 96), hash((fmt, dtype)) % 1000, dtype)
    kw = dict(scale_layout=layout)
    for extra in ({}, {"scale_rule": "floor"} if fmt != "nvfp4" else {"amax": np.array([3.5], np.float32)}):
        c = fp4kit.quantize(x, fmt, axis="columnwise", **kw, **extra).columnwise
        r = fp4kit.quantize(np.ascontiguousarray(x.T), fmt, axis="rowwise", **kw, **extra).rowwise
        check_bytes(c.data, r.data, "data")
        check_bytes(c.scales, r.scales, "scales")
        if fmt == "nvfp4":
            check_bytes(c.amax, r.amax, "amax")


@pytest.mark.parametrize("seed", range(4))
def test_tile_2d_columnwise_is_transpose_of_rowwise(seed, check_bytes):
    g = np.random.default_rng(seed)
    M, K = 2 * int(g.integers(1, 40)), 2 * int(g.integers(1, 40))
    x = rand((M, K), seed, ("float32", "bfloat16", "float16")[seed % 3], spread=6)
    q = fp4kit.quantize(x, "nvfp4", axis="both", tile_2d=True)
    check_bytes(unpack_fp4(q.columnwise.data), unpack_fp4(q.rowwise.data).T.copy(), "codes")
    rs, cs = q.rowwise.scales, q.columnwise.scales
    r, c = np.meshgrid(np.arange(M), np.arange(K), indexing="ij")
    check_bytes(cs[c, r // 16], rs[r, c // 16], "tile scales")


@pytest.mark.parametrize("fmt", ALL)
def test_nd_input_flattens_to_2d(fmt, check_bytes):
    x = rand((2, 3, 4, 48), 7, "bfloat16")
    q = fp4kit.quantize(x, fmt, axis="both")
    f = fp4kit.quantize(x.reshape(24, 48), fmt, axis="both")
    assert q.shape == (2, 3, 4, 48) and q.rowwise.data.shape == f.rowwise.data.shape
    assert_same_quantized(q, f, check_bytes, "N-D")
    y = fp4kit.dequantize(q)
    assert y.shape == (2, 3, 4, 48)
    check_bytes(y.reshape(24, 48), fp4kit.dequantize(f), "dequantized")
    assert fp4kit.dequantize(q, operand="columnwise").shape == (48, 24)


@pytest.mark.parametrize("fmt", ALL)
@pytest.mark.parametrize("shape", [(0, 32), (4, 0), (0, 0), (2, 0, 4), (3, 4, 0)])
def test_empty_inputs_give_empty_outputs(fmt, shape):
    f = fp4kit.FORMATS[fmt]
    x = np.zeros(shape, np.float32)
    M, K = math.prod(shape[:-1]), shape[-1]
    for layout in ("compact", "swizzled"):
        q = fp4kit.quantize(x, fmt, axis="both", scale_layout=layout)
        for op, (r, c) in ((q.rowwise, (M, K)), (q.columnwise, (K, M))):
            assert op.data.shape == (r, f.packed_len(c)) and op.data.size == 0
            sc = (r, f.num_blocks(c))
            if layout == "swizzled":
                sc = (-(-sc[0] // 128) * 128, -(-sc[1] // 4) * 4)
            assert op.scales.shape == sc and not op.scales.any()
            if f.is_nvfp4:
                assert op.amax.shape == (1,) and op.amax[0] == 0
        assert fp4kit.dequantize(q).shape == shape
        assert fp4kit.dequantize(q, operand="columnwise").shape == (K, M)


# ---------------------------------------------------------------------------------------------
# grouped tensors (section 7)

GROUPS = {
    "same": dict(num_groups=3, shape=(3 * 32, 64)),
    "varying_first": dict(first_dims=[0, 32, 0, 18, 64, 0], shape=(114, 64)),
    "varying_last": dict(first_dims=16, last_dims=[0, 32, 0, 48, 2, 0]),
    "varying_both": dict(first_dims=[0, 16, 34, 0, 2, 4], last_dims=[64, 0, 32, 16, 6, 0]),
}


def group_input(kind, dtype, seed):
    spec = dict(GROUPS[kind])
    if "shape" in spec:
        shape = spec.pop("shape")
    else:
        fd, ld = spec["first_dims"], spec["last_dims"]
        fd = [fd] * len(ld) if isinstance(fd, int) else fd
        shape = (sum(m * k for m, k in zip(fd, ld)),)
    return rand(shape, seed, dtype).reshape(shape), spec


def members(x, g):
    flat = x.reshape(-1)
    return [flat[g.offsets[i]:g.offsets[i + 1]].reshape(g.first_dims[i], g.last_dims[i]) for i in range(len(g))]


@pytest.mark.parametrize("fmt", ALL)
@pytest.mark.parametrize("kind", list(GROUPS))
def test_grouped_equals_per_member(fmt, kind, check_bytes):
    x, dims = group_input(kind, ("float32", "bfloat16", "float16")[len(kind) % 3], len(fmt) + len(kind))
    for layout in ("compact", "swizzled"):
        g = fp4kit.group_quantize(x, fmt, **dims, axis="both", scale_layout=layout)
        assert g.kind == kind and len(g) == len(g.first_dims)
        parts = {k: [] for k in ("rd", "rs", "cd", "cs")}
        for i, xi in enumerate(members(x, g)):
            want = fp4kit.quantize(np.ascontiguousarray(xi), fmt, axis="both", scale_layout=layout)
            assert_same_quantized(g[i], want, check_bytes, f"{kind} member {i}")
            parts["rd"].append(want.rowwise.data.reshape(-1)); parts["rs"].append(want.rowwise.scales.reshape(-1))
            parts["cd"].append(want.columnwise.data.reshape(-1)); parts["cs"].append(want.columnwise.scales.reshape(-1))
            yi = fp4kit.group_dequantize(g)[i]
            check_bytes(yi, fp4kit.dequantize(want), f"{kind} dequantized member {i}")
        # the buffers are the members back to back, with no gaps (codes at offsets[i] elements)
        check_bytes(g.rowwise_data, np.concatenate(parts["rd"]), "rowwise buffer")
        check_bytes(g.rowwise_scales, np.concatenate(parts["rs"]), "rowwise scales buffer")
        check_bytes(g.columnwise_data, np.concatenate(parts["cd"]), "columnwise buffer")
        check_bytes(g.columnwise_scales, np.concatenate(parts["cs"]), "columnwise scales buffer")
        sizes = [m * k for m, k in zip(g.first_dims, g.last_dims)]
        assert list(g.offsets) == [0] + list(np.cumsum(sizes))


@st.composite
def _random_group(draw):
    fmt = draw(st.sampled_from(ALL))
    f = fp4kit.FORMATS[fmt]
    kind = draw(st.sampled_from(list(GROUPS)))
    G = draw(st.integers(1, 6))
    unit = 2 if f.packed else 1

    def dim(hi):
        return unit * draw(st.integers(0, hi // unit))
    first = [dim(70) for _ in range(G)] if kind in ("varying_first", "varying_both") else [dim(70)] * G
    last = [dim(90) for _ in range(G)] if kind in ("varying_last", "varying_both") else [dim(90)] * G
    kw = dict(axis=draw(st.sampled_from(["rowwise", "columnwise", "both"])),
              scale_layout=draw(st.sampled_from(["compact", "swizzled"])))
    if f.is_mx:
        kw["scale_rule"] = draw(st.sampled_from(["rceil", "floor"]))
    else:
        v = draw(st.sampled_from(["plain", "tile_2d", "row_scaled", "amax"]))
        if v == "amax":
            kw["amax"] = np.array([draw(st.sampled_from([0.0, 1.0, 3.5, 1e30])) for _ in range(G)], np.float32)
        elif v != "plain":
            kw[v] = True
    if f.packed and draw(st.booleans()):
        kw["rounding"], kw["seed"] = "stochastic", draw(st.integers(0, 2**64 - 1))
    return fmt, kind, first, last, kw, draw(st.sampled_from(["float32", "bfloat16", "float16"])), draw(st.integers(0, 99))


@settings(max_examples=int(os.environ.get("FP4KIT_GROUP_EXAMPLES", "150")), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(_random_group())
def test_grouped_equals_per_member_random(case):
    """Section 7 as a property over random kinds, member sizes (empty ones included), formats and
    options (NVFP4 amaxes one per member; stochastic rounding indexes each member's own elements):
    member i of group_quantize is quantize of member i, and the group's buffers are the members'
    back to back."""
    fmt, kind, first, last, kw, dtype, seed = case
    total = sum(m * k for m, k in zip(first, last))
    x = rand((total,), seed, dtype)
    dims = dict(num_groups=len(first)) if kind == "same" else dict(first_dims=first) if kind == "varying_first" \
        else dict(first_dims=first, last_dims=last)
    if kind in ("same", "varying_first"):
        x = x.reshape(sum(first), last[0])
    try:
        g = fp4kit.group_quantize(x, fmt, **dims, **kw)
    except ValueError as e:
        # the one refusal of valid-looking draws: "same" with G members needs x.shape[0] = G M
        assert kind == "same" and first[0] == 0 and last[0] == 0, e
        return
    flat = x.reshape(-1)
    offs = np.cumsum([0] + [m * k for m, k in zip(first, last)])
    rows = []
    for i in range(len(first)):
        xi = np.ascontiguousarray(flat[offs[i]:offs[i + 1]].reshape(first[i], last[i]))
        kwi = dict(kw)
        if "amax" in kw:
            kwi["amax"] = kw["amax"][i:i + 1]
        want = fp4kit.quantize(xi, fmt, **kwi)
        rep = fp4kit.compare(g[i], want)
        assert rep.ok, f"member {i}: {rep}"
        if want.rowwise is not None:
            rows.append(want.rowwise.data.reshape(-1))
    if rows:
        assert np.array_equal(g.rowwise_data, np.concatenate(rows))


@pytest.mark.parametrize("kind", list(GROUPS))
def test_grouped_nvfp4_amax_per_member(kind, check_bytes):
    x, dims = group_input(kind, "float32", 11)
    G = len(dims.get("last_dims") or dims.get("first_dims") or [0] * dims["num_groups"])
    amax = np.linspace(0.5, 4.0, G).astype(np.float32)
    g = fp4kit.group_quantize(x, "nvfp4", **dims, axis="both", amax=amax)
    check_bytes(g.rowwise_amax, amax, "rowwise amax")
    for i, xi in enumerate(members(x, g)):
        want = fp4kit.quantize(np.ascontiguousarray(xi), "nvfp4", axis="both", amax=amax[i:i + 1])
        assert_same_quantized(g[i], want, check_bytes, f"member {i}")
    g2 = fp4kit.group_quantize(x, "nvfp4", **dims, axis="rowwise")
    for i, xi in enumerate(members(x, g2)):
        a = np.abs(xi.astype(np.float32))
        assert g2[i].rowwise.amax[0] == (a.max() if a.size else 0)


@pytest.mark.parametrize("kind", ["same", "varying_first"])
def test_grouped_dbias(kind):
    x, dims = group_input(kind, "bfloat16", 5)
    g = fp4kit.group_quantize(x, "mxfp8_e4m3", **dims, dbias=True)
    assert g.dbias.shape == (len(g), x.shape[1]) and g.dbias.dtype == np.float32
    for i, xi in enumerate(members(x, g)):
        xf = xi.astype(np.float64)
        tol = 1e-6 * np.abs(xf).sum(axis=0)
        assert (np.abs(g.dbias[i] - xf.sum(axis=0)) <= tol).all()


# ---------------------------------------------------------------------------------------------
# RHT (section 4)

bf16_vals = st.floats(min_value=-1e4, max_value=1e4, allow_nan=False, width=32).map(
    lambda v: float(np.float32(v).astype(ml_dtypes.bfloat16)))


@HYP
@given(st.lists(bf16_vals, min_size=16, max_size=16), st.integers(0, 0xFFFF))
def test_rht_matches_spec_model_and_inverts(v, mask):
    u = rht16(np.array([v], np.float32), mask)[0]
    assert [float(a) for a in u] == O.rht_group(v, mask)          # independent scalar model
    # H H = 16 I: applying 0.25 H again and the signs recovers v up to the bf16 rounding of u
    H = np.array([[(-1) ** bin(j & k).count("1") for k in range(16)] for j in range(16)], np.float64)
    s = np.array([-1.0 if (mask >> k) & 1 else 1.0 for k in range(16)])
    back = s * (0.25 * (H @ u.astype(np.float64)))
    bound = 0.25 * np.abs(u.astype(np.float64)).sum() * 2.0 ** -7 + 2.0 ** -130
    assert np.all(np.abs(back - np.array(v)) <= bound), (v, mask)


def test_rht_exact_inverse_without_rounding():
    v = np.zeros((1, 16), np.float32)
    v[0, 5] = 4.0
    for mask in (0, 0xD7E8, 0xFFFF):
        u = rht16(v, mask)
        assert np.all(np.abs(u) == 1.0)
        assert np.array_equal(rht16(u, 0) * np.where((mask >> np.arange(16)) & 1, -1, 1), v)


@pytest.mark.parametrize("mask", [0xD7E8, 0, 0x1234])
def test_rht_quantize_is_quantize_of_transformed(mask, check_bytes):
    """quantize(x, rht=True).columnwise == rowwise quantize of rht16(x^T) (bf16-exact by construction);
    the rowwise operand is unchanged and keeps the plain amax."""
    x = rand((64, 48), mask % 97, "bfloat16")
    q = fp4kit.quantize(x, "nvfp4", axis="both", rht=True, rht_sign_mask=mask)
    u = rht16(np.ascontiguousarray(x.astype(np.float32).T), mask).astype(ml_dtypes.bfloat16)
    want = fp4kit.quantize(u, "nvfp4").rowwise
    check_bytes(q.columnwise.data, want.data, "data")
    check_bytes(q.columnwise.scales, want.scales, "scales")
    check_bytes(q.columnwise.amax, want.amax, "amax")
    plain = fp4kit.quantize(x, "nvfp4").rowwise
    check_bytes(q.rowwise.data, plain.data, "rowwise")
    check_bytes(q.rowwise.amax, plain.amax, "rowwise amax")
    # a supplied amax is not used by the transformed operand
    qa = fp4kit.quantize(x, "nvfp4", axis="both", rht=True, rht_sign_mask=mask, amax=np.array([100.0], np.float32))
    check_bytes(qa.columnwise.amax, want.amax, "columnwise amax with a supplied amax")
    assert qa.rowwise.amax[0] == 100


# ---------------------------------------------------------------------------------------------
# stochastic rounding (section 4)

def sr_block_input(n_rows, values, fmt):
    """Rows whose first element is 6 (so y = x: MX E = 127, NVFP4 enc = 1 with A = 6)."""
    block = 32 if fmt == "mxfp4_e2m1" else 16
    x = np.empty((n_rows, block), np.float32)
    x[:, 0] = 6.0
    x[:, 1:] = np.resize(np.asarray(values, np.float32), (n_rows, block - 1))
    return x


@pytest.mark.parametrize("fmt", ["mxfp4_e2m1", "nvfp4"])
def test_sr_picks_a_neighbour(fmt):
    g = np.random.default_rng(3)
    vals = (g.uniform(-6, 6, 4000) * np.exp2(g.integers(-4, 1, 4000))).astype(np.float32)
    x = sr_block_input(300, vals, fmt)
    q = fp4kit.quantize(x, fmt, rounding="stochastic", seed=99)
    got = R.dequantize(q)
    y = x.astype(np.float64)
    grid = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])
    a = np.abs(y)
    lo = grid[np.searchsorted(grid, a, side="right") - 1]
    hi = grid[np.minimum(np.searchsorted(grid, a, side="left"), 7)]
    ga = np.abs(got.astype(np.float64))
    assert np.all((ga == lo) | (ga == hi)), "stochastic rounding left the two neighbours"
    assert np.all((np.sign(got) == np.sign(y)) | (got == 0))
    assert np.any((ga == hi) & (lo != hi)) and np.any((ga == lo) & (lo != hi))


@pytest.mark.parametrize("fmt", ["mxfp4_e2m1", "nvfp4"])
def test_sr_reproducible_and_seed_dependent(fmt, check_bytes):
    x = rand((64, 64), 4)
    a = fp4kit.quantize(x, fmt, axis="both", rounding="stochastic", seed=12345)
    b = fp4kit.quantize(x, fmt, axis="both", rounding="stochastic", seed=12345)
    assert_same_quantized(a, b, check_bytes, "same seed")
    for other in (12346, 12345 + 2 ** 32, 0):
        c = fp4kit.quantize(x, fmt, axis="both", rounding="stochastic", seed=other)
        assert not np.array_equal(a.rowwise.data, c.rowwise.data), other
        assert np.array_equal(a.rowwise.scales, c.rowwise.scales)    # only E2M1 rounding changes
    n = fp4kit.quantize(x, fmt, axis="both")
    assert not np.array_equal(a.rowwise.data, n.rowwise.data)


def test_sr_streams_differ_between_operands():
    x = rand((64, 64), 8)
    x = ((x + x.T) / 2).astype(np.float32)                           # symmetric: same values both ways
    q = fp4kit.quantize(x, "nvfp4", axis="both", rounding="stochastic", seed=5)
    assert np.array_equal(fp4kit.quantize(x, "nvfp4", axis="both").rowwise.data,
                          fp4kit.quantize(x, "nvfp4", axis="both").columnwise.data)
    assert not np.array_equal(q.rowwise.data, q.columnwise.data)     # stream 0 vs stream 1


@pytest.mark.parametrize("fmt", ["mxfp4_e2m1", "nvfp4"])
@pytest.mark.parametrize("value", [0.3, 1.1, 2.7, 4.4, 5.9, -3.3, 0.01])
def test_sr_unbiased(fmt, value):
    """Mean of N stochastic roundings of the same value is the value: fixed seed, 6-sigma threshold."""
    a = float(np.float32(value))
    x = sr_block_input(4096, [a], fmt)
    q = fp4kit.quantize(x, fmt, rounding="stochastic", seed=2024)
    got = R.dequantize(q)[:, 1:].astype(np.float64).reshape(-1)
    grid = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])
    lo = grid[np.searchsorted(grid, abs(a), side="right") - 1]
    hi = grid[np.searchsorted(grid, abs(a), side="left")]
    p = (abs(a) - lo) / (hi - lo)
    sd = (hi - lo) * math.sqrt(p * (1 - p) / got.size)
    assert abs(got.mean() - a) <= 6 * sd + (hi - lo) * 2.0 ** -23, (got.mean(), a, sd)


# ---------------------------------------------------------------------------------------------
# error bounds of dequantize(quantize(x))

def mx_bound(fmt, x, scale_rule):
    t = fp4kit.FORMATS[fmt].elem
    xb = x.astype(np.float64).reshape(x.shape[0], -1, 32)
    b = np.abs(xb).max(axis=2, keepdims=True)
    m, emin, vmax = t.mbits, t.emin, t.max
    if scale_rule == "rceil":
        s = np.maximum(2 * b / vmax * (1 + 2.0 ** -22), 2.0 ** -127)
        return (2.0 ** -(m + 1) * np.abs(xb) + 2.0 ** (emin - m - 1) * s + 2.0 ** -23 * vmax * s).reshape(x.shape)
    s = np.where(b > 0, np.exp2(np.floor(np.log2(np.where(b > 0, b, 1))) - t.emax), 2.0 ** -127)
    rel = max(2.0 ** -(m + 1), 1 - vmax / 2.0 ** (t.emax + 1))
    return (rel * np.abs(xb) + 2.0 ** (emin - m - 1) * s).reshape(x.shape)


@pytest.mark.parametrize("fmt", MX)
@pytest.mark.parametrize("rule", ("rceil", "floor"))
@pytest.mark.parametrize("seed", range(3))
def test_mx_error_bound(fmt, rule, seed):
    x = rand((64, 256), seed, spread=20)
    x[::7, ::5] *= 1e-3                                     # small elements inside blocks
    q = fp4kit.quantize(x, fmt, scale_rule=rule)
    err = np.abs(R.dequantize(q).astype(np.float64) - x)
    bound = mx_bound(fmt, x, rule)
    assert np.all(err <= bound), f"max excess {np.max(err - bound)}"
    t = fp4kit.FORMATS[fmt].elem
    s = np.repeat(np.exp2(q.rowwise.scales.astype(np.float64) - 127), 32, axis=1)
    over = np.abs(x) / s > t.max                          # |y| above the element max
    if rule == "floor":   # values in (max, 2^(emax+1)) exist and saturate to +-max (satfinite)
        assert over.any()
        assert np.array_equal(np.abs(R.dequantize(q)[over]), (t.max * s[over]).astype(np.float32))
    else:                 # rceil never needs to saturate (up to 2^-23 relative)
        assert np.all(np.abs(x) / s <= t.max * (1 + 2.0 ** -23))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("variant", [{}, {"tile_2d": True}, {"row_scaled": True}])
def test_nvfp4_error_bound(seed, variant):
    x = rand((64, 256), seed, ("float32", "bfloat16", "float16")[seed % 3], spread=8).astype(np.float32)
    x[::5, ::3] *= 1e-3
    q = fp4kit.quantize(x, "nvfp4", **variant)
    y = R.dequantize(q).astype(np.float64)
    xd = x.astype(np.float64)
    if variant.get("tile_2d"):
        t = np.abs(xd).reshape(4, 16, 16, 16).max(axis=(1, 3))
        b = np.repeat(np.repeat(t, 16, axis=0), 16, axis=1)
    else:
        b = np.repeat(np.abs(xd).reshape(64, 16, 16).max(axis=2), 16, axis=1)
    A = np.abs(xd).max(axis=1, keepdims=True) if variant.get("row_scaled") else np.abs(xd).max()
    bound = (np.abs(xd) / 4 + b / 22 + 2.0 ** -10 * A / 448) * (1 + 2.0 ** -16)
    err = np.abs(y - xd)
    assert np.all(err <= bound), f"max excess {np.max(err - bound)}"


@pytest.mark.parametrize("fmt", ALL)
@pytest.mark.parametrize("dtype", ("bfloat16", "float16"))
def test_dequantize_other_dtypes_round_the_fp32_result_once(fmt, dtype, check_bytes):
    x = rand((32, 64), 2, spread=30 if dtype == "bfloat16" else 6)
    q = fp4kit.quantize(x, fmt, axis="both")
    for operand in ("rowwise", "columnwise"):
        y32 = fp4kit.dequantize(q, "float32", operand)
        want = np.array([O.rn(float(v), dtype) for v in y32.reshape(-1)], np.float64).astype(DTYPES[dtype])
        check_bytes(fp4kit.dequantize(q, dtype, operand), want.reshape(y32.shape), f"{operand} {dtype}")


@pytest.mark.parametrize("fmt", ALL)
def test_grouped_all_members_empty(fmt):
    g = fp4kit.group_quantize(np.zeros((0, 64), np.float32), fmt, num_groups=3, axis="both")
    assert g.kind == "same" and len(g) == 3 and g.offsets == (0, 0, 0, 0)
    assert g.rowwise_data.size == 0 and g.columnwise_data.size == 0
    for i in range(3):
        assert g[i].rowwise.data.shape[0] == 0 and fp4kit.group_dequantize(g)[i].shape == (0, 64)
    g = fp4kit.group_quantize(np.zeros(0, np.float32), fmt, first_dims=[0, 4, 0], last_dims=[8, 0, 0])
    assert g.kind == "varying_both" and g.rowwise_data.size == 0


@pytest.mark.parametrize("dtype,bits", [("float32", 0x7FC00000), ("bfloat16", 0x7FC0), ("float16", 0x7E00)])
def test_dequantized_nan_is_canonical(dtype, bits):
    """NaN outputs (FP8 NaN codes, NaN E8M0 scale 255, 0 * inf) are the type's canonical quiet NaN."""
    from fp4kit.tensor import Operand, QuantizedTensor, QuantizeOptions
    data = np.array([[0x7F, 0xFF, 0x00, 0x38] + [0] * 28, [0x38] * 32], np.uint8)
    op = Operand(data=data, scales=np.array([[127], [255]], np.uint8), scale_layout="compact", amax=None,
                 rows=2, cols=32, format="mxfp8_e4m3")
    q = QuantizedTensor(format="mxfp8_e4m3", shape=(2, 32), rowwise=op, columnwise=None,
                        options=QuantizeOptions(format="mxfp8_e4m3"))
    y = fp4kit.dequantize(q, dtype)
    u = y.view(np.uint32 if dtype == "float32" else np.uint16)
    assert (u[0, :2] == bits).all() and (u[1] == bits).all()
    assert not np.isnan(y[0, 2:].astype(np.float32)).any()

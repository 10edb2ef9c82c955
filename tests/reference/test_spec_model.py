"""Differential tests: the vectorised NumPy reference against the scalar, exact-rational spec model
(tests/reference/spec_oracle.py) on random small problems, every option combination, special values
included. The two implementations share nothing but SPEC.md."""
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

DT = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}
# FP4KIT_SPEC_EXAMPLES raises the number of random problems for a longer hunt (default 150).
SETTINGS = settings(max_examples=int(os.environ.get("FP4KIT_SPEC_EXAMPLES", "150")), deadline=None, suppress_health_check=[HealthCheck.too_slow])

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning",
                                        "ignore:invalid value encountered:RuntimeWarning")

interesting = st.sampled_from([0.0, -0.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0, 7.0, 7.5, 28.0, 30.0, 448.0,
                               464.0, 480.0, 57344.0, 61440.0, math.inf, -math.inf, math.nan])
values = st.one_of(
    st.floats(width=32),                                                     # anything fp32, specials too
    st.floats(min_value=-8, max_value=8, width=32),
    st.builds(lambda v, e: v * 2.0 ** e, interesting, st.integers(-140, 120)),
)


# signalling NaNs (quiet bit clear), payload NaNs and negative NaNs of each input dtype
_NAN_BITS = {"float32": [0x7F800001, 0xFF800001, 0x7FBFFFFF, 0xFFBFFFFF, 0x7FC0DEAD, 0xFFC00000],
             "bfloat16": [0x7F81, 0xFF81, 0x7FBF, 0x7FC1, 0xFFC0],
             "float16": [0x7C01, 0xFC01, 0x7DFF, 0x7E01, 0xFE00]}


@st.composite
def problems(draw):
    fmt = draw(st.sampled_from(sorted(fp4kit.FORMATS)))
    nv = fmt == "nvfp4"
    packed = fmt in ("nvfp4", "mxfp4_e2m1")
    kw = {"axis": draw(st.sampled_from(["rowwise", "columnwise", "both"])),
          "scale_layout": draw(st.sampled_from(["compact", "swizzled"]))}
    dtype = draw(st.sampled_from(sorted(DT)))
    if not nv:
        kw["scale_rule"] = draw(st.sampled_from(["rceil", "floor"]))
    variant = draw(st.sampled_from(["plain", "tile_2d", "row_scaled", "rht", "amax"])) if nv else "plain"
    M, K = draw(st.integers(1, 36)), draw(st.integers(1, 40))
    if variant == "tile_2d":
        kw["tile_2d"] = True
    elif variant == "row_scaled":
        kw["row_scaled"] = True
    elif variant == "rht":
        kw.update(rht=True, rht_sign_mask=draw(st.integers(0, 0xFFFF)))
        dtype = "bfloat16"
        M = 16 * draw(st.integers(1, 2))
        if kw["axis"] == "rowwise":
            kw["axis"] = draw(st.sampled_from(["columnwise", "both"]))
    if packed:
        if draw(st.booleans()):
            kw.update(rounding="stochastic", seed=draw(st.integers(0, 2 ** 64 - 1)))
        M += M % 2 if kw["axis"] != "rowwise" else 0
        K += K % 2 if kw["axis"] != "columnwise" else 0
    x = np.array(draw(st.lists(values, min_size=M * K, max_size=M * K)), np.float32).reshape(M, K)
    if draw(st.booleans()):                                   # mostly finite, moderate tensors as well
        x = np.where(np.isfinite(x), np.clip(x, -1e6, 1e6), 1.0).astype(np.float32)
    with np.errstate(over="ignore"):
        x = x.astype(DT[dtype])
    if draw(st.booleans()):
        # NaNs by their bits: signalling and payload NaNs of either sign cannot come through Python
        # floats (the float -> double conversion quiets them); a signalling NaN last in a reduction
        # (of the whole tensor, or of a column) once slipped through the reference's amax
        # (np.fmax.reduce)
        bits = x.view({"float32": np.uint32, "bfloat16": np.uint16, "float16": np.uint16}[dtype]).reshape(-1)
        where = st.one_of(st.integers(0, M * K - 1), st.just(M * K - 1),        # anywhere, last,
                          st.integers((M - 1) * K, M * K - 1))                     # the last row
        pos = draw(st.lists(where, min_size=1, max_size=3))
        bits[pos] = draw(st.lists(st.sampled_from(_NAN_BITS[dtype]), min_size=len(pos), max_size=len(pos)))
    if variant == "amax" or (variant == "row_scaled" and draw(st.booleans())):
        n = M if variant == "row_scaled" else 1
        kw["amax"] = np.array(draw(st.lists(st.floats(0, float(np.float32(1e30)), width=32), min_size=n, max_size=n)), np.float32)
    return fmt, x, kw


@SETTINGS
@given(problems())
def test_quantize_matches_spec_model(problem):
    fmt, x, kw = problem
    q = fp4kit.quantize(x, fmt, **kw)
    want = O.quantize(x, fmt, **kw)
    for key, w in want.items():
        operand, field = key.split(".")
        got = np.asarray(getattr(getattr(q, operand), field))
        assert got.dtype == w.dtype and got.shape == w.shape, key
        if not np.array_equal(got.view(np.uint8), w.view(np.uint8)):
            bad = np.argwhere(got != w)[:4].tolist()
            pytest.fail(f"{fmt} {kw} {key}: differs at {bad}", pytrace=False)


@st.composite
def operands(draw):
    fmt = draw(st.sampled_from(sorted(fp4kit.FORMATS)))
    f = fp4kit.FORMATS[fmt]
    R, C = draw(st.integers(1, 8)), 2 * draw(st.integers(1, 24))
    nb = f.num_blocks(C)
    data = np.array(draw(st.lists(st.integers(0, 255), min_size=R * f.packed_len(C), max_size=R * f.packed_len(C))),
                    np.uint8).reshape(R, f.packed_len(C))
    if not f.packed:
        data &= (1 << f.elem.bits) - 1
    hi = 0x7E if f.is_nvfp4 else 254                         # valid scale bytes (E4M3 >= 0 / E8M0 non-NaN)
    scales = np.array(draw(st.lists(st.integers(0, hi), min_size=R * nb, max_size=R * nb)), np.uint8).reshape(R, nb)
    amax = None
    if f.is_nvfp4:
        amax = np.array([draw(st.one_of(st.floats(0, 1e6, width=32), st.floats(0, float(np.float32(3e38)), width=32)))], np.float32)
    return fmt, data, scales, amax, (R, C), draw(st.sampled_from(sorted(DT)))


@SETTINGS
@given(operands())
def test_dequantize_matches_spec_model(problem):
    from fp4kit.tensor import Operand, QuantizedTensor, QuantizeOptions
    fmt, data, scales, amax, shape, dtype = problem
    op = Operand(data=data, scales=scales, scale_layout="compact", amax=amax, rows=shape[0], cols=shape[1], format=fmt)
    q = QuantizedTensor(format=fmt, shape=shape, rowwise=op, columnwise=None, options=QuantizeOptions(format=fmt))
    with np.errstate(over="ignore", invalid="ignore"):
        got = fp4kit.dequantize(q, dtype=dtype)
    want = O.dequantize(fmt, data, scales, amax, shape, dtype)
    gn, wn = np.isnan(got.astype(np.float32)), np.isnan(want.astype(np.float32))
    assert np.array_equal(gn, wn), "NaN positions differ"
    g = np.where(gn, 0, got.astype(np.float64)).astype(DT[dtype])
    w = np.where(wn, 0, want.astype(np.float64)).astype(DT[dtype])
    u = np.uint32 if dtype == "float32" else np.uint16
    if not np.array_equal(g.view(u), w.view(u)):
        bad = np.argwhere(g.view(u) != w.view(u))[:4].tolist()
        pytest.fail(f"{fmt} {dtype}: differs at {bad}", pytrace=False)

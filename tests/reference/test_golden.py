"""The named golden cases (reference/golden.py): `pytest -k <case name>` runs one idea.

Each case's expected bytes were derived by hand; here they are checked against the reference and,
independently, against the scalar spec model of tests/reference/spec_oracle.py.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import fp4kit
import spec_oracle as O
from fp4kit.reference import golden as G
from fp4kit.reference.philox import philox4x32_10

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")


@pytest.mark.parametrize("case", G.CASES, ids=[c.name for c in G.CASES])
def test_golden_reference(case):
    passed, detail = G.check_case(case)
    assert passed, f"{case.name} ({case.idea}): {detail}"


@pytest.mark.parametrize("case", G.CASES, ids=[c.name for c in G.CASES])
def test_golden_spec_model(case, check_bytes):
    """The hand-derived bytes agree with a second, scalar model of SPEC.md (exact rationals)."""
    if case.op == "quantize":
        kw = case.kwargs
        if "amax" in dict(case.inputs):
            kw["amax"] = case.input("amax")
        got = O.quantize(case.input("x"), case.fmt, **kw)
    else:
        ins = {k: a.array() for k, a in case.inputs}
        got = {"y": O.dequantize(case.fmt, ins["data"], ins["scales"], ins.get("amax"), case.kwargs["shape"],
                                 case.kwargs["dtype"])}
    for key, want in case.expected_arrays.items():
        check_bytes(got[key], want, f"{case.name} {key}")


def test_golden_catalogue():
    names = [c.name for c in G.CASES]
    assert len(names) >= 30 and len(set(names)) == len(names)
    assert all(re.fullmatch(r"[a-z0-9_]+", n) for n in names)
    required = ["bf16_subnormal", "fp32_subnormal", "inf_in_block", "nan_in_block", "all_nan_block", "satfinite_480",
                "negative_zero", "ties_to_even", "e8m0_rceil", "e8m0_floor", "e254", "partial_trailing_block",
                "nvfp4_amax_zero", "nvfp4_zero_block_scale", "nvfp4_supplied_amax", "row_scaled_zero_row", "tile_2d",
                "rht_mask0", "rht_default_mask", "sr_seed", "swizzled_layout", "fp4_nibble_order",
                "dequantize_float32", "dequantize_bfloat16", "dequantize_float16"]
    for r in required:
        assert any(r in n for n in names), r
    for fmt in fp4kit.FORMATS:
        assert f"all_zero_block_{fmt}" in names
    assert {c.op for c in G.CASES} == {"quantize", "dequantize"}
    for c in G.CASES:
        assert c.idea, c.name


def test_run_all_records():
    recs = G.run_all()
    assert len(recs) == len(G.CASES)
    for fmt, op, name, passed, detail in recs:
        assert fmt in fp4kit.FORMATS and op in ("quantize", "dequantize") and isinstance(detail, str)
        assert passed, (name, detail)
    assert [r[2] for r in G.run_all(formats=("nvfp4",))] == [c.name for c in G.CASES if c.fmt == "nvfp4"]


def test_run_all_detects_a_wrong_backend():
    """A backend that flips one bit of the codes fails every quantize case and says where."""
    def bad_quantize(x, fmt, **kw):
        q = fp4kit.reference.quantize(x, fmt, **kw)
        for op in (q.rowwise, q.columnwise):
            if op is not None and op.data.size:
                op.data.reshape(-1)[0] ^= 1
        return q

    def bad_dequantize(q, dtype="float32", operand="rowwise"):
        y = fp4kit.reference.dequantize(q, dtype=dtype, operand=operand)
        return np.asarray(y).copy().reshape(-1)[::-1].reshape(y.shape)

    calls = []

    def to_numpy(a):
        calls.append(type(a))
        return np.asarray(a)

    recs = G.run_all(quantize=bad_quantize, dequantize=bad_dequantize, to_numpy=to_numpy)
    assert calls, "to_numpy must be applied to the backend's arrays"
    for fmt, op, name, passed, detail in recs:
        assert not passed, name
        if op == "quantize":
            assert "differ" in detail and "got 0x" in detail and "expected 0x" in detail, detail


def test_run_all_reports_exceptions():
    def boom(x, fmt, **kw):
        raise RuntimeError("no kernel")

    recs = G.run_all(quantize=boom, names=("tile_2d_nvfp4",))
    assert recs == [("nvfp4", "quantize", "tile_2d_nvfp4", False, "raised RuntimeError: no kernel")]


def test_philox_known_answers():
    """Random123 known-answer tests for Philox4x32-10, through the reference's vectorised Philox."""
    kats = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
            ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
            ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
             (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]
    for ctr, key, want in kats:
        got = philox4x32_10(*[np.array([c], np.uint32) for c in ctr], *key)
        assert tuple(int(g[0]) for g in got) == want
        assert tuple(O.philox(ctr, key)) == want


def test_byte_diff_report():
    a = np.arange(20, dtype=np.uint8).reshape(4, 5)
    b = a.copy()
    assert G.byte_diff(a, b) is None
    b[1, 2] = 0xFF
    b[3, 4] = 0xEE
    d = G.byte_diff(a, b, "codes")
    assert d.startswith("codes: 2 of 20 items differ") and "[1,2] got 0x07 expected 0xFF" in d
    assert "shape" in G.byte_diff(a, b[:2], "codes")
    assert "dtype" in G.byte_diff(a, b.astype(np.uint16))
    f = np.array([1.0, -0.0], np.float32)
    assert "0x80000000" in G.byte_diff(np.zeros(2, np.float32), f)     # -0.0 != +0.0 bitwise

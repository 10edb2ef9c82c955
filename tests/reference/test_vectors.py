"""Conformance vectors (reference/vectors.py, reference/data/vectors.npz).

The stored file must equal what the reference produces now: a change of the reference's bytes (or of
the seeded inputs, or of the vector set) fails here until `python -m fp4kit.reference.vectors
--regenerate` is run on purpose.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import spec_oracle as O
from fp4kit.reference import vectors as V

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")


def test_vectors_file_regenerates_identically():
    stored = V.load_store()
    fresh = V.build_store()
    diffs = V.compare_stores(stored, fresh)
    assert not diffs, "reference bytes changed; if deliberate run `python -m fp4kit.reference.vectors " \
                      "--regenerate`:\n" + "\n".join(diffs[:20])


def test_vectors_file_is_small_and_shipped():
    assert V.DATA_PATH.is_file()
    assert V.DATA_PATH.stat().st_size < 2 * 1024 * 1024
    assert V.DATA_PATH.parent.name == "data" and V.DATA_PATH.parent.parent.name in ("reference",)


def test_iter_cases_and_run_all():
    cases = list(V.iter_cases())
    assert [c.name for c in cases] == [s.name for s in V.SPECS]
    for c in cases:
        assert c.expected and c.kwargs["fmt"] == c.spec.fmt
        assert tuple(c.x.shape) == c.spec.shape
    recs = V.run_all()
    assert len(recs) == 2 * len(V.SPECS)
    bad = [r for r in recs if not r[3]]
    assert not bad, bad[:5]


def test_checks_can_fail():
    """Expected.check finds a flipped byte whether the bytes are stored whole or only as a digest."""
    seen_full = seen_digest = False
    for case in V.iter_cases():
        _, outs = V.compute_outputs(case.spec)
        for key, exp in case.expected.items():
            got = outs[key]
            assert exp.check(got) is None, (case.name, key)
            if got.size == 0 or (seen_full and seen_digest):
                continue
            bad = got.copy()
            bad.reshape(-1).view(np.uint8)[0] ^= 0x40
            msg = exp.check(bad)
            assert msg, (case.name, key)
            if exp.data is not None:
                seen_full = True
                assert "differ" in msg and "got 0x" in msg
            else:
                seen_digest = True
                assert "sha256" in msg
        if seen_full and seen_digest:
            break
    assert seen_full and seen_digest


def test_vector_coverage():
    specs = V.SPECS
    opts = [dict(s.options) for s in specs]
    mx = {(s.fmt, o.get("axis"), o.get("scale_layout", "compact"), o.get("scale_rule", "rceil"), s.dtype)
          for s, o in zip(specs, opts) if s.fmt != "nvfp4"}
    for combo in itertools.product(V.MX_FORMATS, V.AXES, ("compact", "swizzled"), ("rceil", "floor"), V.DTYPES):
        assert combo in mx, combo
    nv = {(o.get("axis"), o.get("scale_layout", "compact"), s.dtype) for s, o in zip(specs, opts) if s.fmt == "nvfp4"}
    for combo in itertools.product(V.AXES, ("compact", "swizzled"), V.DTYPES):
        assert combo in nv, combo
    nvo = [(s, o) for s, o in zip(specs, opts) if s.fmt == "nvfp4"]
    assert {s.amax for s, _ in nvo} >= {None, "exact", "half", "double", "zero", "random"}
    assert any(o.get("tile_2d") for _, o in nvo) and any(o.get("row_scaled") for _, o in nvo)
    masks = {o.get("rht_sign_mask", 0xD7E8) for _, o in nvo if o.get("rht")}
    assert {0xD7E8, 0} <= masks
    seeds = {o.get("seed") for s, o in zip(specs, opts) if o.get("rounding") == "stochastic"}
    assert {0, 1, 2 ** 64 - 1} <= seeds
    shapes = {s.shape for s in specs}
    assert {(1, 16), (3, 48), (130, 96), (16, 34)} <= shapes
    assert any(len(sh) > 2 for sh in shapes) and any(0 in sh for sh in shapes)
    assert {s.recipe for s in specs} == set(V.RECIPES)


def test_inputs_are_seeded_exact_and_special():
    a = V.make_input((130, 96), "bfloat16", "special", 5)
    b = V.make_input((130, 96), "bfloat16", "special", 5)
    assert a.tobytes() == b.tobytes()
    assert a.tobytes() != V.make_input((130, 96), "bfloat16", "special", 6).tobytes()
    f = a.astype(np.float32)
    assert np.isnan(f).any() and np.isposinf(f).any() and np.isneginf(f).any()
    u = a.view(np.uint16)
    assert (u == 0x8000).any() and (u == 0x0000).any() and (u == 0x0001).any()      # -0, +0, min subnormal
    assert (u == 0x7FC0).any() and (u == 0xFFC0).any()                              # both NaN signs
    t = V.make_input((64, 64), "float32", "tiny", 3)
    assert (np.abs(t) < np.finfo(np.float32).tiny).any()                          # fp32 subnormals
    h = V.make_input((64, 64), "float16", "special_finite", 3).astype(np.float32)
    assert np.isfinite(h[~np.isnan(h)]).all() and (np.abs(h) == 65504).any()
    # SplitMix64 known values (seed 0): Vigna's reference implementation
    assert [hex(int(v)) for v in V.splitmix64(0, 3)] == ["0xe220a8397b1dcdaf", "0x6e789e6aa1b965f4", "0x6c45d188009454f"]


@pytest.mark.parametrize("spec", [s for s in V.SPECS if math.prod(s.shape) <= 1600], ids=lambda s: s.name)
def test_small_vectors_match_the_spec_model(spec, check_bytes):
    """Small vectors recomputed by the scalar spec model (independent of the reference)."""
    x = V.make_input(spec.shape, spec.dtype, spec.recipe, spec.seed)
    kw = V.spec_kwargs(spec, x)
    fmt = kw.pop("fmt")
    want = O.quantize(x, fmt, **kw)
    _, got = V.compute_outputs(spec)
    for key, w in want.items():
        check_bytes(got[key], w, f"{spec.name} {key}")


def test_vectors_command_line(tmp_path, capsys):
    assert V.main(["--list"]) == 0
    assert capsys.readouterr().out.split() == [s.name for s in V.SPECS]
    assert V.main([]) == 0                                         # check mode: the stored file is current
    assert "identical" in capsys.readouterr().out
    out = tmp_path / "v.npz"
    assert V.main(["--regenerate", "--out", str(out)]) == 0
    assert not V.compare_stores(V.load_store(out), V.load_store())
    assert V.main(["--out", str(out)]) == 0

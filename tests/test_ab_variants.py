"""scripts/ab_variants.py's host-side parts (no GPU): variant parsing, the variant sources it
compiles, and that switching variants drops the module's cached handles and restoring brings back
fp4kit's own sources."""
from __future__ import annotations

import pytest

from fp4kit import _loader, _plan, _torch_exec


@pytest.fixture(scope="module")
def ab(script):
    return script("ab_variants")


def test_parse_variants(ab):
    v = ab.parse_variants(["base=", "new=FP4KIT_X 1; FP4KIT_Y 3 ;"])
    assert list(v) == ["base", "new"]                       # order kept: the first is the reference
    assert v == {"base": [], "new": ["FP4KIT_X 1", "FP4KIT_Y 3"]}


def test_parse_variants_host_entries(ab):
    v = ab.parse_variants(["base=", "grid=FP4KIT_X 1;py:fp4kit._cuda_grouped._DQ_MIN_CTAS={**orig, 'bfloat16': 3}"])
    assert v["grid"] == ["FP4KIT_X 1", "py:fp4kit._cuda_grouped._DQ_MIN_CTAS={**orig, 'bfloat16': 3}"]


@pytest.mark.parametrize("bad", [["base"], ["=FP4KIT_X 1"], ["a=X 1", "a=X 2"], ["a=py:nodots=1"],
                                 ["a=py:fp4kit._cuda_grouped._DQ_MIN_CTAS"]])
def test_parse_variants_rejects(ab, bad):
    with pytest.raises(ValueError, match="--variant"):
        ab.parse_variants(bad)


def test_variant_sources_prefix_one_module(ab):
    orig = _loader._read_sources()
    src = ab._variant_sources("grouped", ["FP4KIT_X 1", "FP4KIT_Y 3"])
    assert src["grouped.cu"] == "#define FP4KIT_X 1\n#define FP4KIT_Y 3\n" + orig["grouped.cu"]
    assert {k: v for k, v in src.items() if k != "grouped.cu"} == {k: v for k, v in orig.items() if k != "grouped.cu"}
    # a different cache key from the shipped source's, so variants never share a cubin
    opts = _loader._part_options("sm_90", 0)
    assert _loader._cache_key("grouped", "sm_90", src, opts) != _loader._cache_key("grouped", "sm_90", orig, opts)


def test_activate_and_restore(ab, monkeypatch):
    orig = _loader._read_sources()
    for cache, keys in ((_loader._modules, [(0, "grouped", 0, "sm_90"), (0, "quantize", None, "sm_90")]),
                        (_loader._functions, [(0, "grouped", "k"), (0, "quantize", "k")]),
                        (_torch_exec._RAW_FUNCS, [(0, "grouped", "k"), (0, "quantize", "k")])):
        for k in keys:
            monkeypatch.setitem(cache, k, object())
    monkeypatch.setitem(_plan.GROUP_PLANS, ("some", "plan"), object())
    try:
        ab._activate("grouped", ["FP4KIT_X 1"])
        assert _loader._read_sources()["grouped.cu"].startswith("#define FP4KIT_X 1\n")
        assert _loader._read_sources(_loader.cuda_src_dir()) == orig   # an explicit root: unchanged
        assert (0, "grouped", 0, "sm_90") not in _loader._modules
        assert (0, "quantize", None, "sm_90") in _loader._modules      # other modules' handles stay
        assert (0, "grouped", "k") not in _loader._functions and (0, "grouped", "k") not in _torch_exec._RAW_FUNCS
        assert (0, "quantize", "k") in _torch_exec._RAW_FUNCS
        assert not _plan.GROUP_PLANS                                    # executors hold handles
    finally:
        ab._restore("grouped")
    assert _loader._read_sources is ab._ORIG_READ
    assert _loader._read_sources() == orig


def test_prebuild_caches_each_variant(ab, monkeypatch, tmp_path):
    """_prebuild puts every variant's compile parts into fp4kit's cubin cache (build_cubin with the
    variant's sources), each under its own key, where get_module will find them."""
    from fp4kit import _nvrtc
    try:
        _nvrtc.version()
    except Exception as e:   # noqa: BLE001 - no NVRTC here: nothing to compile with
        pytest.skip(f"NVRTC not available: {e}")
    monkeypatch.setenv("FP4KIT_CACHE_DIR", str(tmp_path))
    variants = {"a": ["FP4KIT_AB_TEST 1"], "b": ["FP4KIT_AB_TEST 2"]}
    ab._prebuild("grouped", variants, "sm_90", [9])
    paths = set()
    for defs in variants.values():
        src = ab._variant_sources("grouped", defs)
        paths.add(_loader.build_cubin("grouped", "sm_90", part=9, sources=src))   # a cache hit: no compile
    assert len(paths) == 2 and all(p.parent == tmp_path and p.exists() for p in paths)
    assert len(list(tmp_path.glob("grouped.p9-sm_90-*.cubin"))) == 2


def test_host_entries_patch_and_restore(ab, monkeypatch):
    """A variant's py: entries hold while it is active (evaluated with `orig` and the module's own
    names), are left out of its sources, undone when the next variant activates and by _restore;
    the plans that could hold the old choice are dropped."""
    from fp4kit import _cuda_grouped
    orig = dict(_cuda_grouped._DQ_MIN_CTAS)
    threads = _cuda_grouped._THREADS
    monkeypatch.setitem(_plan.GROUP_FAST_CALLS, ("some", "call"), object())
    defs = ["FP4KIT_X 1", "py:fp4kit._cuda_grouped._DQ_MIN_CTAS={**orig, 'bfloat16': _THREADS}"]
    try:
        ab._activate("grouped", defs)
        assert _cuda_grouped._DQ_MIN_CTAS == {**orig, "bfloat16": threads}
        assert not _plan.GROUP_FAST_CALLS
        assert _loader._read_sources()["grouped.cu"].startswith("#define FP4KIT_X 1\n//")   # no py: define
        ab._activate("grouped", ["FP4KIT_X 2"])   # the next variant: the attribute back first
        assert _cuda_grouped._DQ_MIN_CTAS == orig
        ab._activate("grouped", defs)
    finally:
        ab._restore("grouped")
    assert _cuda_grouped._DQ_MIN_CTAS == orig and not ab._PATCHED
    # a function wrapping the original: `orig` (and the module's names) visible inside a lambda's body
    grid = _cuda_grouped._persistent_grid
    try:
        ab._activate("grouped", ["py:fp4kit._cuda_grouped._persistent_grid=lambda n, r, sm: orig(n, r, sm) + _QT"])
        assert _cuda_grouped._persistent_grid(10**6, None, 132) == grid(10**6, None, 132) + _cuda_grouped._QT
    finally:
        ab._restore("grouped")
    assert _cuda_grouped._persistent_grid is grid
    with pytest.raises(ValueError, match="py:MODULE.ATTR=EXPR"):
        ab._patch("py:fp4kit._cuda_grouped._DQ_MIN_CTAS")


def test_sequence_cases(ab):
    """The 'sequence' cases (no GPU: a stand-in torch and fp4kit): their names, each a list of calls
    on distinct slices, the dequantize cases on the quantize results, and --quick's subset."""
    import types

    class Tensor:
        def __init__(self, rows=None):
            self.rows = rows

        def __getitem__(self, k):
            return Tensor((k.start, k.stop))

        def to(self, dtype):
            return self

    torch = types.SimpleNamespace(bfloat16="bf16", randn=lambda *shape, device: Tensor())
    log = []

    def quantize(t, fmt, **kw):
        log.append(("q", fmt, t.rows))
        return types.SimpleNamespace(rowwise=None, columnwise=None, tag=(fmt, t.rows))
    fp4kit = types.SimpleNamespace(quantize=quantize, dequantize=lambda q, dtype: log.append(("d", q.tag)))
    cases = list(ab.cases_sequence(torch, fp4kit, False))
    assert [c[0] for c in cases] == [
        "64x quantize mxfp8_e4m3 rowwise 1024x7168", "64x quantize nvfp4 rowwise 1024x7168",
        "8x quantize mxfp8_e4m3 rowwise 2048x7168", "8x dequantize mxfp8_e4m3 -> bfloat16 2048x7168",
        "8x quantize mxfp4_e2m1 rowwise 2048x7168", "8x dequantize mxfp4_e2m1 -> bfloat16 2048x7168",
        "8x quantize nvfp4 rowwise 2048x7168", "8x dequantize nvfp4 -> bfloat16 2048x7168",
        "8x quantize mxfp8_e4m3 both 2048x7168"]
    assert all(c[2] > 0 and c[3] == "" for c in cases)
    log.clear()
    cases[0][1]()
    assert log == [("q", "mxfp8_e4m3", (i * 1024, (i + 1) * 1024)) for i in range(64)]
    log.clear()
    cases[3][1]()
    assert log == [("d", ("mxfp8_e4m3", (i * 2048, (i + 1) * 2048))) for i in range(8)]
    assert [c[0] for c in ab.cases_sequence(torch, fp4kit, True)] == [c[0] for c in cases if "mxfp4" not in c[0]
                                                                       and "both" not in c[0]]

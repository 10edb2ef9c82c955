"""fp4kit._loader / _nvrtc: NVRTC compilation and the disk cache (no GPU needed)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from fp4kit import formats


def _nvrtc_or_skip():
    from fp4kit import _nvrtc

    try:
        _nvrtc.load_library()
    except _nvrtc.NVRTCError as e:
        pytest.skip(f"NVRTC not available: {e}")
    return _nvrtc


def test_enums_header_matches_python():
    from fp4kit._loader import cuda_src_dir

    text = (cuda_src_dir() / "common" / "enums.cuh").read_text()
    vals = {m.group(1): int(m.group(2)) for m in re.finditer(r"\b([A-Z0-9_]+)\s*=\s*(\d+)\s*,", text)}
    for name, f in formats.FORMATS.items():
        assert vals[f"FORMAT_{name.upper()}"] == f.format_id
    for i, r in enumerate(formats.SCALE_RULES):
        assert vals[f"SCALE_RULE_{r.upper()}"] == i
    for i, r in enumerate(formats.SCALE_LAYOUTS):
        assert vals[f"SCALE_LAYOUT_{r.upper()}"] == i
    for i, r in enumerate(formats.ROUNDINGS):
        assert vals[f"ROUNDING_{r.upper()}"] == i
    for i, r in enumerate(formats.DTYPES):
        assert vals[f"DTYPE_{r.upper()}"] == i
    for i, r in enumerate(formats.AXES):
        assert vals[f"AXIS_{r.upper()}"] == i


def test_compile_error_raises_with_log():
    nvrtc = _nvrtc_or_skip()
    with pytest.raises(nvrtc.NVRTCError, match="undeclared|identifier"):
        nvrtc.compile_program("extern \"C\" __global__ void k() { nope(); }", "bad.cu", ["-arch=sm_90"])


_NATIVE_CVT = ("cvt.rn.satfinite.e2m1x2.f32", "cvt.rn.satfinite.e2m3x2.f32", "cvt.rn.satfinite.e3m2x2.f32",
               "cvt.rp.satfinite.ue8m0x2.f32")


@pytest.mark.parametrize("arch, native", [("sm_90", False), ("sm_100", False), ("sm_100a", True),
                                          ("sm_120a", True)])
def test_native_conversions_only_on_blackwell_targets(arch, native):
    """codecs.cuh's native FP4/FP6/E8M0 cvt forms are compiled for the Blackwell arch-specific targets
    and nowhere else: the selftest module (it calls encode<E2M1>, encode4<E2M3/E3M2> and the rceil code)
    has all four instructions in its sm_100a / sm_120a PTX and none in its sm_90 / plain sm_100 PTX."""
    nvrtc = _nvrtc_or_skip()
    from fp4kit import _loader

    cc = int(arch[3:].rstrip("af"))
    if nvrtc.supported_archs() and cc not in nvrtc.supported_archs():
        pytest.skip(f"NVRTC {nvrtc.version()} cannot target {arch}")
    sources = _loader._read_sources()
    headers = {k: v for k, v in sources.items() if not k.endswith(".cu")}
    ptx, _ = nvrtc.compile_program(sources["selftest.cu"], "selftest.cu", _loader.options_for(arch),
                                   headers=headers, output="ptx")
    text = ptx.decode()
    for ins in _NATIVE_CVT:
        assert (ins in text) == native, f"{arch}: {ins} {'missing from' if native else 'found in'} the PTX"


def test_native_conversions_can_be_switched_off(monkeypatch):
    """FP4KIT_NATIVE_CVT=0: sm_100a compiles the software forms (no native cvt in its PTX)."""
    nvrtc = _nvrtc_or_skip()
    from fp4kit import _loader

    if nvrtc.supported_archs() and 100 not in nvrtc.supported_archs():
        pytest.skip(f"NVRTC {nvrtc.version()} cannot target sm_100a")
    monkeypatch.setenv("FP4KIT_NATIVE_CVT", "0")
    opts = _loader.options_for("sm_100a")
    assert "-DFP4KIT_NO_NATIVE_CVT" in opts
    sources = _loader._read_sources()
    headers = {k: v for k, v in sources.items() if not k.endswith(".cu")}
    ptx, _ = nvrtc.compile_program(sources["selftest.cu"], "selftest.cu", opts, headers=headers, output="ptx")
    text = ptx.decode()
    assert not any(ins in text for ins in _NATIVE_CVT)
    monkeypatch.delenv("FP4KIT_NATIVE_CVT")
    assert "-DFP4KIT_NO_NATIVE_CVT" not in _loader.options_for("sm_100a")


def test_disk_cache_detects_corruption(tmp_path, monkeypatch):
    _nvrtc_or_skip()
    from fp4kit import _loader

    monkeypatch.setenv("FP4KIT_CACHE_DIR", str(tmp_path))
    p = Path(_loader.build_cubin("swizzle", "sm_90"))
    assert p.parent == tmp_path and p.read_bytes()[:4] == b"\x7fELF"
    good = p.read_bytes()
    assert Path(_loader.build_cubin("swizzle", "sm_90")) == p   # cache hit
    p.write_bytes(good[: len(good) // 2])                          # truncated entry
    assert Path(_loader.build_cubin("swizzle", "sm_90")).read_bytes() == good
    p.with_suffix(".sha256").write_text("0" * 64)                  # checksum mismatch
    assert Path(_loader.build_cubin("swizzle", "sm_90")).read_bytes() == good

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

"""fp4kit._nvrtc's library search order (no GPU, no library loaded): after prefer_driver, NVRTC
libraries of a newer CUDA major than the driver's come last, so that `.[cuda12,test]` (NVRTC 12 and 13
side by side) compiles cubins a CUDA 12 driver can load."""
from __future__ import annotations

import sys
import types

import pytest

from fp4kit import _nvrtc


@pytest.fixture
def fake_wheels(tmp_path, monkeypatch):
    """An `nvidia` namespace with the NVRTC 13 wheel (cu13/lib) and the NVRTC 12 one (cuda_nvrtc/lib)."""
    for sub, name in (("cu13/lib", "libnvrtc.so.13"), ("cuda_nvrtc/lib", "libnvrtc.so.12")):
        d = tmp_path / sub
        d.mkdir(parents=True)
        (d / name).write_bytes(b"")
    monkeypatch.setitem(sys.modules, "nvidia", types.SimpleNamespace(__path__=[str(tmp_path)]))
    for env in ("CUDA_PATH", "CUDA_HOME"):
        monkeypatch.delenv(env, raising=False)
    monkeypatch.setattr(_nvrtc, "_max_major", None)
    monkeypatch.setattr(_nvrtc, "_lib", None)
    monkeypatch.setattr(_nvrtc, "_lib_path", None)
    return tmp_path


def _wheel_order(paths, root):
    return [p[len(str(root)) + 1:] for p in paths if p.startswith(str(root))]


def test_major_of_library_names():
    assert _nvrtc._major_of("/x/nvidia/cu13/lib/libnvrtc.so.13") == 13
    assert _nvrtc._major_of("/x/libnvrtc.so.12.8.93") == 12
    assert _nvrtc._major_of("C:/cuda/bin/nvrtc64_120_0.dll") == 12
    assert _nvrtc._major_of("nvrtc64_130_0.dll") == 13
    assert _nvrtc._major_of("libnvrtc.so") is None and _nvrtc._major_of(None) is None


def test_driver_major_puts_newer_libraries_last(fake_wheels):
    assert _wheel_order(_nvrtc._candidate_paths(), fake_wheels)[:2] == [
        "cu13/lib/libnvrtc.so.13", "cuda_nvrtc/lib/libnvrtc.so.12"]   # no driver known: the wheel order
    _nvrtc.prefer_driver(12080)                                       # a CUDA 12.8 driver
    paths = _nvrtc._candidate_paths()
    assert _wheel_order(paths, fake_wheels) == ["cuda_nvrtc/lib/libnvrtc.so.12", "cu13/lib/libnvrtc.so.13"]
    assert paths.index("libnvrtc.so.12") < paths.index("libnvrtc.so.13")   # the system loader's names too
    _nvrtc.prefer_driver(13000)                                       # a CUDA 13 driver: 13 first again
    assert _wheel_order(_nvrtc._candidate_paths(), fake_wheels)[0] == "cu13/lib/libnvrtc.so.13"


def test_prefer_driver_drops_a_loaded_library_that_is_too_new(fake_wheels, monkeypatch):
    monkeypatch.setattr(_nvrtc, "_lib", object())
    monkeypatch.setattr(_nvrtc, "_lib_path", str(fake_wheels / "cu13/lib/libnvrtc.so.13"))
    _nvrtc.prefer_driver(13020)
    assert _nvrtc._lib is not None                # 13 runs on a 13.2 driver: kept
    _nvrtc.prefer_driver(12040)
    assert _nvrtc._lib is None and _nvrtc._lib_path is None   # reloaded on next use, 12 first


def test_no_library_names_the_wheel_for_the_driver(monkeypatch):
    """Without a loadable NVRTC the error names what to install for the driver's CUDA major: the CUDA 12
    wheel under a CUDA 12 driver (CUDA 13's cubins would not load there), the CUDA 13 one otherwise."""
    monkeypatch.setattr(_nvrtc, "_lib", None)
    monkeypatch.setattr(_nvrtc, "_lib_path", None)
    monkeypatch.setattr(_nvrtc, "_max_major", None)
    monkeypatch.setattr(_nvrtc, "_candidate_paths", lambda: ["/nonexistent/libnvrtc.so.12"])
    for driver, want, not_want in ((None, "`nvidia-cuda-nvrtc` wheel (CUDA 13", "runs CUDA"),
                                   (13020, "`nvidia-cuda-nvrtc` wheel (CUDA 13", "runs CUDA"),
                                   (12040, 'runs CUDA 12, so install the CUDA 12 NVRTC wheel, `pip install '
                                           '"nvidia-cuda-nvrtc-cu12>=12.8"`', "update the driver"),
                                   (11080, "runs CUDA 11", "`nvidia-cuda-nvrtc` wheel")):
        if driver is not None:
            _nvrtc.prefer_driver(driver)
        with pytest.raises(_nvrtc.NVRTCError) as e:
            _nvrtc.load_library()
        msg = str(e.value)
        assert msg.startswith("could not load libnvrtc: ") and want in msg and not_want not in msg, msg
        assert "/nonexistent/libnvrtc.so.12" in msg
        assert _nvrtc._lib is None
    assert "update the driver too" in _nvrtc.install_hint()

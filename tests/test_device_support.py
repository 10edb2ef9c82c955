"""Which GPUs the loader builds for, checked without a GPU: a stand-in `cupy` module reports a
device's compute capability. Hopper (9.0) and later get their NVRTC architecture; an older device
(an A100 is 8.0, an L40 8.9: their compilers reject the kernels' FP8 conversions and clusters)
raises fp4kit.BackendUnavailableError naming the device, before anything is compiled or launched.
"""
from __future__ import annotations

import sys
import types

import pytest

import fp4kit
from fp4kit import _loader


def _fake_cupy(cc: str, name="NVIDIA Test GPU", props_fail=False):
    """A `cupy` with one device of compute capability `cc` ("80", "90", "100", ...)."""
    class Device:
        def __init__(self, device=None):
            self.id = 0 if device is None else int(device)
            self.compute_capability = cc

    def get_props(dev):
        if props_fail:
            raise RuntimeError("no properties")
        return {"name": name.encode(), "major": int(cc[:-1]), "minor": int(cc[-1])}

    runtime = types.SimpleNamespace(getDeviceProperties=get_props, driverGetVersion=lambda: 13000,
                                    getDevice=lambda: 0)
    return types.SimpleNamespace(cuda=types.SimpleNamespace(Device=Device, runtime=runtime))


@pytest.fixture
def no_build(monkeypatch):
    """Fail the test if anything would be compiled or loaded."""
    def refuse(*a, **k):
        raise AssertionError("compiled or loaded for a device that is not supported")
    monkeypatch.setattr(_loader, "build_cubin", refuse)
    monkeypatch.setattr(_loader, "_match_driver", lambda: None)    # leave _nvrtc's search order alone
    monkeypatch.setattr(_loader, "_modules", {})
    monkeypatch.setattr(_loader, "_functions", {})


@pytest.mark.parametrize("cc, arch", [("90", "sm_90"), ("100", "sm_100a"), ("103", "sm_103a"), ("120", "sm_120a")])
def test_hopper_and_later_get_their_architecture(monkeypatch, cc, arch):
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(cc))
    assert _loader.device_arch() == arch
    assert _loader.device_arch(0) == arch


@pytest.mark.parametrize("cc, name", [("80", "NVIDIA A100-SXM4-80GB"), ("89", "NVIDIA L40S"), ("75", "Tesla T4")])
def test_older_devices_raise_a_clear_error(monkeypatch, no_build, cc, name):
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(cc, name))
    have = f"{cc[:-1]}.{cc[-1]}"
    for call in (lambda: _loader.device_arch(0), lambda: _loader.get_module("quantize"),
                 lambda: _loader.get_function("quantize", "quantize_f0_d0_plain"), _loader.warmup):
        with pytest.raises(fp4kit.BackendUnavailableError) as e:
            call()
        msg = str(e.value)
        assert f"device 0 ({name}) has {have}" in msg, msg
        assert "compute capability 9.0 (Hopper) or later" in msg, msg
        assert "reference on the CPU" in msg, msg
        assert isinstance(e.value, ImportError)    # the backend-unavailable family, as without CuPy


def test_the_device_name_is_optional(monkeypatch, no_build):
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy("86", props_fail=True))
    with pytest.raises(fp4kit.BackendUnavailableError, match=r"device 0 has 8\.6\. "):
        _loader.device_arch()


def test_cli_and_loader_share_the_bound():
    from fp4kit import cli

    assert _loader.MIN_COMPUTE_CAPABILITY == (9, 0)
    assert cli.MIN_COMPUTE_CAPABILITY == 90

"""The GPU tests' shared helpers (tests/gpu/gpu_helpers.py) on NumPy stand-ins, so that a helper that
stopped comparing or counting would fail here, on the CPU, before it could make GPU tests vacuous."""
from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np
import pytest

import fp4kit

sys.path.insert(0, str(Path(__file__).resolve().parent / "gpu"))
import gpu_helpers  # noqa: E402


def _u8(a):
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


def _meta(a):
    return (type(a), a.dtype, a.shape, a.flags.c_contiguous)


def _q(seed=0, **kw):
    x = np.random.default_rng(seed).standard_normal((64, 96)).astype(np.float32)
    return fp4kit.reference.quantize(x, "nvfp4", axis="both", **kw)


def test_compare_quantized_passes_equal_and_catches_every_field():
    q = _q()
    gpu_helpers.compare_quantized(q, q, "same", q, u8=_u8, meta=_meta)
    for op in ("rowwise", "columnwise"):
        for field in ("data", "scales", "amax"):
            bad = _q()
            arr = np.array(getattr(getattr(bad, op), field), copy=True)
            arr.reshape(-1).view(np.uint8)[0] ^= 1
            object.__setattr__(getattr(bad, op), field, arr)
            with pytest.raises(AssertionError):
                gpu_helpers.compare_quantized(bad, q, f"{op}.{field}", u8=_u8, meta=_meta)
            with pytest.raises(AssertionError):             # against the general path too
                gpu_helpers.compare_quantized(q, q, f"{op}.{field}", bad, u8=_u8, meta=_meta)
    x = np.random.default_rng(0).standard_normal((64, 96)).astype(np.float32)
    rowwise_only = fp4kit.reference.quantize(x, "nvfp4")
    with pytest.raises(AssertionError, match="columnwise"):
        gpu_helpers.compare_quantized(rowwise_only, q, "operands", u8=_u8, meta=_meta)
    other = _q(scale_layout="swizzled")
    with pytest.raises(AssertionError):                     # the general path's arrays differ in shape
        gpu_helpers.compare_quantized(q, q, "meta", other, u8=_u8, meta=_meta)


def test_path_spy_counts_and_calls_through(monkeypatch):
    from fp4kit import _interop

    mod = types.SimpleNamespace(run=lambda a, b=0: a + b)
    counts = gpu_helpers.path_spy(monkeypatch, mod, "run")
    assert mod.run(2, b=3) == 5 and mod.run(1) == 1
    with pytest.raises(Exception):                          # no CuPy here, or not an array: counted anyway
        _interop.as_cupy(object())
    assert counts == {"fast": 2, "as_cupy": 1}


def test_run_in_threads_returns_in_order_and_reports_errors():
    assert gpu_helpers.run_in_threads(lambda k: k * k, 4) == [0, 1, 4, 9]

    def boom(k):
        if k == 2:
            raise ValueError("thread 2")
        return k

    with pytest.raises(AssertionError, match="thread 2"):
        gpu_helpers.run_in_threads(boom, 3)


def test_general_path_turns_the_checks_off_and_restores_them():
    from fp4kit import _device_api

    keep = _device_api._cupy_fast_device, _device_api._torch_fast_device
    with gpu_helpers.general_path("_cupy_fast_device", "_torch_fast_device"):
        assert _device_api._cupy_fast_device(1, None) is None and _device_api._torch_fast_device(1, None) is None
        assert (_device_api._cupy_fast_device, _device_api._torch_fast_device) != keep
    assert (_device_api._cupy_fast_device, _device_api._torch_fast_device) == keep


class _JaxArray(np.ndarray):
    """A NumPy stand-in for a JAX array: a buffer address and nothing else."""

    def unsafe_buffer_pointer(self):
        return self.ctypes.data + getattr(self, "shift", 0)


def test_assert_xla_usable_checks_the_address_and_the_computed_bytes(monkeypatch):
    ran = []

    def jit(fn):
        def run(a):
            ran.append(a)
            return fn(np.asarray(a))
        return run

    monkeypatch.setitem(sys.modules, "jax", types.SimpleNamespace(jit=jit))
    buf = np.zeros(64, np.uint8)
    at = buf[(-buf.ctypes.data) % 16:][:32].view(np.float32).view(_JaxArray)   # a 16-byte address
    at[:] = np.arange(8, dtype=np.float32)
    gpu_helpers.assert_xla_usable(at, "aligned")
    assert len(ran) == 1
    gpu_helpers.assert_xla_usable(None, "none")
    gpu_helpers.assert_xla_usable(at[:0], "empty")
    assert len(ran) == 1                                                # nothing computed for those
    off = at.view(_JaxArray)
    off.shift = 8
    with pytest.raises(AssertionError, match="off by 8"):
        gpu_helpers.assert_xla_usable(off, "off by 8")
    monkeypatch.setitem(sys.modules, "jax", types.SimpleNamespace(jit=lambda fn: lambda a: np.ascontiguousarray(np.asarray(a)[::-1][:3])))
    with pytest.raises(AssertionError, match="wrong bytes"):
        gpu_helpers.assert_xla_usable(at, "wrong bytes")


def test_jax_gpus_skips_without_a_jax_gpu(monkeypatch):
    monkeypatch.setattr(gpu_helpers, "require_gpu", lambda: None)
    def no_gpu(kind):
        raise RuntimeError("no gpu backend")
    monkeypatch.setitem(sys.modules, "jax", types.SimpleNamespace(devices=no_gpu))
    with pytest.raises(pytest.skip.Exception, match="jax without GPU"):
        gpu_helpers.jax_gpus()
    fake = types.SimpleNamespace(devices=lambda kind: ["gpu0", "gpu1"])
    monkeypatch.setitem(sys.modules, "jax", fake)
    assert gpu_helpers.jax_gpus() == (fake, ["gpu0", "gpu1"])


def test_device_changes_reports_where_the_current_device_moved(monkeypatch):
    """device_changes on a CuPy stand-in whose current device a called function switches: the result
    comes back, each switch is reported once with the line after it, and the tracer is removed."""
    state = {"dev": 0}
    runtime = types.SimpleNamespace(getDevice=lambda: state["dev"])
    fake = types.ModuleType("cupy")
    fake.cuda = types.SimpleNamespace(runtime=runtime)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupy", fake)

    def switch(to):
        state["dev"] = to

    def work(x):
        switch(1)
        y = x + 1          # first traced line after the switch
        switch(0)
        return y * 2

    before = sys.gettrace()
    result, changes = gpu_helpers.device_changes(work, 3)
    assert result == 8 and sys.gettrace() is before
    assert len(changes) == 2, changes
    assert changes[0].startswith("device 0 -> 1 by ") and "(switch, return)" in changes[0], changes[0]
    assert changes[1].startswith("device 1 -> 0 by "), changes[1]
    state["dev"] = 0
    _, none = gpu_helpers.device_changes(lambda: 5)
    assert none == []
    # a switch left in place at the end is reported too
    _, left = gpu_helpers.device_changes(switch, 2)
    assert left and left[-1].startswith("device 0 -> 2"), left

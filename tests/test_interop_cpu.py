"""fp4kit._interop without a GPU: the JAX alignment rule (its GPU form: tests/gpu/test_interop.py)."""
from __future__ import annotations

import types

from fp4kit import _interop


class _Device:
    """A CuPy Device stand-in: a context manager that says whether it is entered."""

    def __init__(self):
        self.entered = False

    def __enter__(self):
        self.entered = True

    def __exit__(self, *exc):
        self.entered = False


class _Arr:
    """What jax_aligned reads of a CuPy array: size, data.ptr, device and copy() (which CuPy
    allocates on the current device, so jax_aligned must make the array's device current)."""

    def __init__(self, ptr, size=4):
        self.size, self.data, self.copies = size, types.SimpleNamespace(ptr=ptr), []
        self.device = _Device()

    def copy(self):
        assert self.device.entered, "copy() with another device current"
        c = _Arr(0x7F0000000000, self.size)
        self.copies.append(c)
        return c


def test_jax_gets_copies_of_results_off_16_byte_addresses_only():
    assert _interop.JAX_ALIGN == 16
    for ptr in (0x7FE017E4D400, 0x7FE017E4D410, 0x7FE017E4D500):
        a = _Arr(ptr)
        assert _interop.jax_aligned(a) is a and not a.copies
    for ptr in (0x7FE017E4D408, 0x7FE017E4D404, 0x7FE017E4D401):      # the fuzz's case: offset 8
        a = _Arr(ptr)
        c = _interop.jax_aligned(a)
        assert c is not a and a.copies == [c] and c.data.ptr % 16 == 0 and not a.device.entered
    empty = _Arr(0x7FE017E4D408, size=0)                               # nothing for XLA to read
    assert _interop.jax_aligned(empty) is empty


def _fake_cupy(monkeypatch, dev=0):
    """A `cupy` module stand-in with a thread's current device (runtime.getDevice / setDevice) and a
    from_dlpack that, like JAX's DLPack exchange, makes the array's device current."""
    import sys

    state = {"dev": dev, "sets": 0}

    def set_device(d):
        state["dev"] = d
        state["sets"] += 1

    runtime = types.SimpleNamespace(getDevice=lambda: state["dev"], setDevice=set_device)

    def from_dlpack(a):
        state["dev"] = a.on
        return types.SimpleNamespace(shape=(2,), dtype="float32", source=a)

    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime), from_dlpack=from_dlpack)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    return state


def test_dlpack_conversions_keep_the_callers_current_device(monkeypatch):
    """keep_current_device: the JAX and generic DLPack conversions (as_cupy's, to_library's) leave
    the caller's current device current even when the producer switched it (seen with JAX on two
    H200s); untouched when nothing switched it, and restored when the conversion raises."""
    state = _fake_cupy(monkeypatch)

    class Foreign:                       # a generic DLPack producer on device 1
        on = 1
        dtype = "float32"

        def __dlpack__(self, stream=None):
            raise AssertionError("not called by the stand-in")

    arr, dn = _interop._generic_to_cupy(Foreign())
    assert arr.source.on == 1 and state["dev"] == 0 and state["sets"] == 1
    Foreign.on = 0                       # nothing switched: no setDevice call
    _interop._generic_to_cupy(Foreign())
    assert state["dev"] == 0 and state["sets"] == 1
    try:
        with _interop.keep_current_device():
            state["dev"] = 3
            raise RuntimeError("inside")
    except RuntimeError:
        pass
    assert state["dev"] == 0 and state["sets"] == 2

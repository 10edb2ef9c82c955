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

"""Helpers of the GPU tests (skip logic, byte-exact comparisons)."""
from __future__ import annotations

import functools

import numpy as np
import pytest


@functools.lru_cache(maxsize=1)
def gpu_skip_reason() -> str | None:
    """None when CuPy imports and sees a CUDA device, else why not."""
    try:
        import cupy
    except Exception as e:  # ImportError, or a broken CUDA install
        return f"CuPy not available ({type(e).__name__}: {e})"
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "no CUDA device"
    except Exception as e:
        return f"no CUDA device ({type(e).__name__}: {e})"
    return None


def require_gpu():
    """Skip the calling test when there is no usable GPU."""
    reason = gpu_skip_reason()
    if reason:
        pytest.skip(reason)


def hexdiff(got: np.ndarray, want: np.ndarray, what: str, context=None, limit: int = 8) -> str:
    """Describe byte differences between two arrays of equal shape (uint8 views)."""
    g = np.ascontiguousarray(got).view(np.uint8).reshape(-1) if got.dtype != np.uint8 else got.reshape(-1)
    w = np.ascontiguousarray(want).view(np.uint8).reshape(-1) if want.dtype != np.uint8 else want.reshape(-1)
    bad = np.flatnonzero(g != w)
    lines = [f"{what}: {bad.size} of {g.size} bytes differ (shape {got.shape})"]
    for i in bad[:limit]:
        idx = np.unravel_index(i, got.shape) if got.dtype == np.uint8 else i
        lines.append(f"  [{idx}] got 0x{g[i]:02X} expected 0x{w[i]:02X}" + (f"  {context(i)}" if context else ""))
    return "\n".join(lines)


def assert_bytes_equal(got: np.ndarray, want: np.ndarray, what: str, context=None):
    assert got.shape == want.shape, f"{what}: shape {got.shape} != expected {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != expected {want.dtype}"
    if not np.array_equal(np.ascontiguousarray(got).view(np.uint8), np.ascontiguousarray(want).view(np.uint8)):
        raise AssertionError(hexdiff(got, want, what, context))


def assert_float_bits_equal(got: np.ndarray, want: np.ndarray, what: str):
    """Bit-exact float compare where every NaN matches every NaN (payloads are not part of SPEC)."""
    assert got.shape == want.shape, f"{what}: shape {got.shape} != expected {want.shape}"
    gi = np.ascontiguousarray(got).view(np.uint16 if got.itemsize == 2 else np.uint32)
    wi = np.ascontiguousarray(want).view(gi.dtype)
    gn = np.isnan(got.astype(np.float32))
    wn = np.isnan(want.astype(np.float32))
    bad = np.flatnonzero(((gi != wi) & ~(gn & wn)).reshape(-1))
    if bad.size:
        lines = [f"{what}: {bad.size} of {gi.size} values differ"]
        for i in bad[:8]:
            lines.append(f"  [{np.unravel_index(i, got.shape)}] got 0x{int(gi.reshape(-1)[i]):X} "
                         f"({float(got.reshape(-1)[i])!r}) expected 0x{int(wi.reshape(-1)[i]):X} "
                         f"({float(want.reshape(-1)[i])!r})")
        raise AssertionError("\n".join(lines))

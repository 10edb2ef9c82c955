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


def jax_gpus():
    """(jax, its GPU devices); skips the calling test when jax is missing or sees no GPU."""
    require_gpu()
    jax = pytest.importorskip("jax")
    try:
        devs = jax.devices("gpu")
    except RuntimeError:
        devs = []
    if not devs:
        pytest.skip("jax without GPU")
    return jax, devs


def device_changes(fn, *args, **kwargs):
    """(fn's result, where the thread's current CUDA device changed while fn ran): Python-level
    tracing checks cudaGetDevice at every call, line and return, so a change made inside C code is
    reported at the first Python line after it (with the line before). For diagnosing which
    library moves the current device; a small call takes milliseconds more under the tracer."""
    import sys

    import cupy

    get = cupy.cuda.runtime.getDevice
    state = {"dev": get(), "prev": "entry"}
    changes: list[str] = []

    def tracer(frame, event, arg):
        d = get()
        where = f"{frame.f_code.co_filename}:{frame.f_lineno} ({frame.f_code.co_name}, {event})"
        if d != state["dev"]:
            changes.append(f"device {state['dev']} -> {d} by {where}; the line before: {state['prev']}")
            state["dev"] = d
        state["prev"] = where
        return tracer

    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        result = fn(*args, **kwargs)
    finally:
        sys.settrace(old)
    if get() != state["dev"]:
        changes.append(f"device {state['dev']} -> {get()} after the last traced line {state['prev']}")
    return result, changes


def assert_xla_usable(a, what: str) -> None:
    """JAX array `a` sits at a 16-byte address and a jitted XLA computation on it gives its first
    bytes as np.asarray reads them (XLA refuses buffers off 16 bytes, which np.asarray reads
    happily). Nothing to check for None or an empty array."""
    if a is None or a.size == 0:
        return
    import jax

    assert a.unsafe_buffer_pointer() % 16 == 0, what
    head = np.asarray(jax.jit(lambda v: v.reshape(-1)[:3])(a))
    assert np.array_equal(head.view(np.uint8), np.asarray(a).reshape(-1)[:3].view(np.uint8)), what


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


def path_spy(monkeypatch, module, name: str) -> dict:
    """Counts calls of `module.name` (a fast-path executor: "fast") and of fp4kit._interop.as_cupy
    (the general path's conversions: "as_cupy"), thread safe; both still run."""
    import threading

    from fp4kit import _interop

    counts = {"fast": 0, "as_cupy": 0}
    lock = threading.Lock()

    def counting(key, real):
        def call(*a, **k):
            with lock:
                counts[key] += 1
            return real(*a, **k)
        return call

    monkeypatch.setattr(module, name, counting("fast", getattr(module, name)))
    monkeypatch.setattr(_interop, "as_cupy", counting("as_cupy", _interop.as_cupy))
    return counts


def general_path(*names: str):
    """A context manager within which fp4kit._device_api's eligibility checks `names` (e.g.
    "_torch_fast_device", "_cupy_fast_device") say no: every call takes the general path."""
    from fp4kit import _device_api

    mp = pytest.MonkeyPatch()
    for n in names:
        mp.setattr(_device_api, n, lambda *a, **k: None)
    return _Undo(mp)


class _Undo:
    def __init__(self, mp):
        self.mp = mp

    def __enter__(self):
        return self.mp

    def __exit__(self, *exc):
        self.mp.undo()
        return False


def run_in_threads(fn, n: int) -> list:
    """fn(k) in n threads at once (k = 0 .. n - 1); their results in order. An exception in any
    thread fails the calling test."""
    import threading

    results, errors = [None] * n, []

    def worker(k):
        try:
            results[k] = fn(k)
        except Exception as e:  # reported in the calling thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


def compare_quantized(q, ref, what: str, general=None, *, u8, meta):
    """A device QuantizedTensor `q` against the reference's `ref` byte for byte (data, scales, amax
    of each operand) and, when given, against the general path's result `general`: the same bytes
    and the same array metadata. u8(a): a device array's bytes as a flat uint8 NumPy array;
    meta(a): what must match between the two paths' arrays (type, dtype, shape, device, layout)."""
    for name in ("rowwise", "columnwise"):
        got, want = getattr(q, name), getattr(ref, name)
        assert (got is None) == (want is None), f"{what}: {name}"
        if want is None:
            continue
        tag = f"{what} {name}"
        assert_bytes_equal(u8(got.data), want.data.reshape(-1).view(np.uint8), f"{tag}: data")
        assert_bytes_equal(u8(got.scales), np.ascontiguousarray(want.scales).reshape(-1).view(np.uint8),
                           f"{tag}: scales")
        assert tuple(got.data.shape) == want.data.shape and tuple(got.scales.shape) == want.scales.shape, tag
        if want.amax is None:
            assert got.amax is None, tag
        else:
            assert_bytes_equal(u8(got.amax), np.asarray(want.amax, np.float32).reshape(-1).view(np.uint8),
                               f"{tag}: amax")
        if general is not None:
            gen = getattr(general, name)
            for field in ("data", "scales", "amax"):
                a, b = getattr(got, field), getattr(gen, field)
                if b is None:
                    assert a is None, (tag, field)
                    continue
                assert meta(a) == meta(b), (tag, field)
                assert_bytes_equal(u8(a), u8(b), f"{tag}: {field} vs the general path")
    assert q.shape == ref.shape and q.format == ref.format
    if general is not None:
        assert (q.shape, q.options, q.input_dtype) == (general.shape, general.options, general.input_dtype)

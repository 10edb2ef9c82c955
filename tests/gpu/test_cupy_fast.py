"""The CuPy fast path of fp4kit.quantize (fp4kit._torch_exec.run_cupy): byte-identical to the
reference and to the general path (cupy.RawKernel launches), same result types, taken when it
should be, thread safe, on CuPy's current stream and capturable in a CUDA graph. Outputs are
poisoned (the `gpu` fixture), so an unwritten byte fails."""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

import fp4kit

from gpu_helpers import assert_bytes_equal, compare_quantized, general_path, path_spy, run_in_threads

pytestmark = pytest.mark.gpu

FMTS = ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4_e2m1", "nvfp4"]


@pytest.fixture
def cp(gpu):
    return gpu


@pytest.fixture
def spy(monkeypatch):
    """Counts fast-path executions (run_cupy) and general-path conversions (as_cupy of x)."""
    from fp4kit import _torch_exec

    return path_spy(monkeypatch, _torch_exec, "run_cupy")


def _general():
    """Within: quantize takes the general path for every CuPy input."""
    return general_path("_cupy_fast_device")


def _input(cp, shape, dtype, seed=0, scale=3.0):
    rng = np.random.default_rng(seed)
    return cp.asarray((rng.standard_normal(shape) * scale).astype(dtype))


def _u8(a):
    return np.ascontiguousarray(a.get()).reshape(-1).view(np.uint8)


def _compare(q, ref, what, g=None):
    import cupy

    def meta(a):
        assert type(a) is cupy.ndarray
        return (type(a), a.dtype, a.shape, a.device.id, a.flags.c_contiguous)

    compare_quantized(q, ref, what, g, u8=_u8, meta=meta)


def check(cp, spy, x, fmt, amax=None, **kw):
    """Fast path vs reference vs general path for one CuPy input."""
    before = dict(spy)
    q = fp4kit.quantize(x, fmt, amax=amax, **kw)
    assert spy["fast"] == before["fast"] + 1 and spy["as_cupy"] == before["as_cupy"], "fast path not taken"
    with _general():
        g = fp4kit.quantize(x, fmt, amax=amax, **kw)
    assert spy["fast"] == before["fast"] + 1
    cp.cuda.get_current_stream().synchronize()
    ref = fp4kit.reference.quantize(x.get(), fmt, amax=None if amax is None else amax.get(), **kw)
    _compare(q, ref, f"{fmt} {x.shape} {x.dtype} ptr%16={x.data.ptr % 16} {kw}", g)
    return q


@pytest.mark.parametrize("layout", ["compact", "swizzled"])
@pytest.mark.parametrize("axis", ["rowwise", "columnwise", "both"])
@pytest.mark.parametrize("fmt", FMTS)
def test_fast_path_matches_reference_and_general_path(cp, spy, fmt, axis, layout):
    for i, (dtype, shape) in enumerate([(np.float32, (64, 192)), (np.float16, (130, 200)), (np.float16, (2, 34)),
                                        (np.float32, (128, 256))]):
        check(cp, spy, _input(cp, shape, dtype, seed=i), fmt, axis=axis, scale_layout=layout)
    # a repeated call: the memoised signature, new output buffers, same bytes
    x = _input(cp, (64, 192), np.float16, seed=9)
    a = check(cp, spy, x, fmt, axis=axis, scale_layout=layout)
    b = check(cp, spy, x, fmt, axis=axis, scale_layout=layout)
    assert a.operand(axis if axis != "both" else "rowwise").data.data.ptr != \
        b.operand(axis if axis != "both" else "rowwise").data.data.ptr


NVFP4_CASES = [
    dict(axis="both", amax="global"),
    dict(axis="rowwise", amax="global", scale_layout="swizzled"),
    dict(axis="columnwise", amax="global"),
    dict(axis="both", amax="zero"),
    dict(axis="both", row_scaled=True),
    dict(axis="both", row_scaled=True, amax="rows"),
    dict(axis="rowwise", row_scaled=True, amax="strided_rows", scale_layout="swizzled"),
    dict(axis="both", tile_2d=True),
    dict(axis="rowwise", tile_2d=True, amax="global"),
    dict(axis="both", rounding="stochastic", seed=123),
    dict(axis="rowwise", rounding="stochastic", seed=2**64 - 1, scale_layout="swizzled"),
]


@pytest.mark.parametrize("case", NVFP4_CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_fast_path_nvfp4_variants(cp, spy, case, dtype):
    kw = dict(case)
    x = _input(cp, (96, 160), dtype, seed=7)
    amax = kw.pop("amax", None)
    xa = cp.abs(x.astype(cp.float32))
    if amax == "global":
        amax = xa.max().reshape(1) * 1.5
    elif amax == "zero":                       # -0 is stored as +0 (nvfp4_amax_out)
        amax = cp.asarray(np.float32([-0.0]))
    elif amax == "rows":
        amax = xa.max(axis=1) * 1.25
    elif amax == "strided_rows":               # every second float of a (96, 2) array
        amax = cp.stack([xa.max(axis=1), cp.ones(96, cp.float32)], axis=1)[:, 0]
    q = check(cp, spy, x, "nvfp4", amax=amax, **kw)
    if case.get("amax") == "zero":
        assert q.rowwise.amax.view(cp.uint32).tolist() == [0]


def test_fast_path_seeds(cp, spy):
    x = _input(cp, (64, 128), np.float16)
    a = check(cp, spy, x, "mxfp4_e2m1", axis="both", rounding="stochastic", seed=1)
    b = check(cp, spy, x, "mxfp4_e2m1", axis="both", rounding="stochastic", seed=2)
    assert not bool((a.rowwise.data == b.rowwise.data).all())     # the seed is a per-call argument


@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "mxfp6_e3m2", "mxfp4_e2m1", "nvfp4"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_fast_path_odd_shapes_and_misaligned_views(cp, spy, fmt, dtype):
    packed = fmt in ("mxfp4_e2m1", "nvfp4")
    for shape in [(1, 64), (1, 100), (5, 34), (33, 1000), (3, 3000)]:
        axis = "rowwise" if packed and shape[0] % 2 else "both"
        check(cp, spy, _input(cp, shape, dtype, seed=shape[1]), fmt, axis=axis, scale_layout="swizzled")
    M, K = 32, 96
    flat = _input(cp, (M * K + 16,), dtype, seed=12)
    off1 = flat[1:1 + M * K].reshape(M, K)                      # 2 (4) bytes past 16: C-contiguous
    off8 = flat[8:8 + M * K].reshape(M, K)                      # 16 (32) bytes: aligned again
    assert off1.flags.c_contiguous and off1.data.ptr % 16 != 0 and off8.data.ptr % 16 == 0
    for x in (off1, off8):
        check(cp, spy, x, fmt, axis="both")
        check(cp, spy, x, fmt, axis="rowwise", scale_layout="swizzled")


def test_fast_path_3d_and_empty_inputs(cp, spy):
    check(cp, spy, _input(cp, (4, 6, 64), np.float16), "nvfp4", axis="both")
    for shape in [(0, 64), (64, 0), (0, 0)]:
        for layout in ("compact", "swizzled"):
            x = cp.zeros(shape, cp.float32)
            for amax in (None, cp.asarray(np.float32([-0.0]))):
                q = fp4kit.quantize(x, "nvfp4", axis="both", scale_layout=layout, amax=amax)
                with _general():
                    g = fp4kit.quantize(x, "nvfp4", axis="both", scale_layout=layout, amax=amax)
                for name in ("rowwise", "columnwise"):
                    a, b = getattr(q, name), getattr(g, name)
                    for field in ("data", "scales", "amax"):
                        assert getattr(a, field).shape == getattr(b, field).shape
                        assert getattr(a, field).dtype == getattr(b, field).dtype
                        assert _u8(getattr(a, field)).tolist() == _u8(getattr(b, field)).tolist(), (shape, field)
                    assert _u8(a.amax).tolist() == [0, 0, 0, 0]


def test_general_path_for_other_inputs(cp, spy):
    """CuPy inputs the fast path does not take still work, through the general path; a strided
    view with a fast-path amax is copied C-contiguous by CuPy and takes the fast path."""
    x = _input(cp, (64, 128), np.float32)
    amax = cp.abs(x).max().reshape(1)
    cases = [
        (x.T, {}, True),                                         # not C-contiguous: copied, then fast
        (x[:, ::2], {"amax": amax.get()}, False),                # not C-contiguous, NumPy amax: general
        (x, {"amax": amax.get()}, False),                        # NumPy amax
        (x, {"amax": cp.stack([amax, amax], axis=1)[:, 0]}, True),   # a strided float32 CuPy amax: fast
    ]
    for xi, kw, fast in cases:
        before = spy["fast"]
        q = fp4kit.quantize(xi, "nvfp4", axis="both", **kw)
        am = kw.get("amax")
        ref = fp4kit.reference.quantize(xi.get(), "nvfp4", axis="both",
                                        amax=None if am is None else (am if isinstance(am, np.ndarray) else am.get()))
        _compare(q, ref, f"{xi.shape} {type(am).__name__}")
        assert (spy["fast"] > before) == fast


def test_fast_path_validation_is_unchanged(cp, spy):
    x = _input(cp, (16, 64), np.float32)
    errors = [
        (dict(axis="diagonal"), ValueError, r"axis: expected one of \['rowwise', 'columnwise', 'both'\], got 'diagonal'"),
        (dict(tile_2d=1), TypeError, "tile_2d: expected True or False, got int 1"),
        (dict(amax=cp.ones(2, cp.float32)), ValueError, r"amax: expected shape \(1,\), got \(2,\)"),
        (dict(amax=cp.ones(1, cp.float16)), TypeError, "amax: expected a float32 array, got dtype float16"),
        (dict(rht=True, axis="both"), TypeError, "bfloat16"),
        (dict(seed=-1), ValueError, r"seed: expected an integer in \[0, 18446744073709551615\], got -1"),
    ]
    for kw, exc, msg in errors:
        for general in (False, True):
            with _general() if general else contextlib.nullcontext():
                with pytest.raises(exc, match=msg):
                    fp4kit.quantize(x, "nvfp4", **kw)
    with pytest.raises(ValueError, match="only NVFP4 takes a global amax"):
        fp4kit.quantize(x, "mxfp8_e4m3", amax=cp.ones(1, cp.float32))
    with pytest.raises(TypeError, match="x: expected dtype float32, bfloat16 or float16, got float64"):
        fp4kit.quantize(x.astype(cp.float64), "nvfp4")
    with pytest.raises(ValueError, match="K must be even"):
        fp4kit.quantize(_input(cp, (4, 33), np.float32), "nvfp4")
    assert spy["fast"] == 0                                      # nothing was launched


def test_fast_path_on_a_side_stream(cp, spy):
    """A non-blocking CuPy stream: the work is queued there (its synchronize suffices)."""
    x = _input(cp, (64, 128), np.float32)
    side = cp.cuda.Stream(non_blocking=True)
    cp.cuda.get_current_stream().synchronize()
    with side:
        q = fp4kit.quantize(x, "nvfp4", axis="both")
    side.synchronize()
    assert spy["fast"] == 1
    _compare(q, fp4kit.reference.quantize(x.get(), "nvfp4", axis="both"), "side stream")


def test_fast_path_graph_capture(cp, spy):
    """Captured on a CuPy stream, replayed after the input changed: the new input's bytes."""
    x = _input(cp, (128, 256), np.float16, seed=3)
    fp4kit.quantize(x, "nvfp4", axis="both", scale_layout="swizzled")      # warm-up: memo, pool blocks
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        q = fp4kit.quantize(x, "nvfp4", axis="both", scale_layout="swizzled")
        graph = stream.end_capture()
    for seed in (4, 5):
        x[...] = _input(cp, (128, 256), np.float16, seed=seed)
        cp.cuda.get_current_stream().synchronize()
        graph.launch(stream)
        stream.synchronize()
        _compare(q, fp4kit.reference.quantize(x.get(), "nvfp4", axis="both", scale_layout="swizzled"),
                 f"replay {seed}")


def test_fast_path_from_threads(cp, spy):
    """Several threads quantizing with one plan at once (per-thread packed arguments)."""
    xs = [_input(cp, (64, 256), np.float16, seed=k) for k in range(4)]
    with _general():
        want = [fp4kit.quantize(x, "nvfp4", axis="both", scale_layout="swizzled") for x in xs]

    def worker(k):
        for _ in range(50):
            q = fp4kit.quantize(xs[k], "nvfp4", axis="both", scale_layout="swizzled")
        cp.cuda.get_current_stream().synchronize()
        return q

    results = run_in_threads(worker, 4)
    cp.cuda.Device().synchronize()
    for k in range(4):
        for name in ("rowwise", "columnwise"):
            for field in ("data", "scales", "amax"):
                assert_bytes_equal(_u8(getattr(getattr(results[k], name), field)),
                                   _u8(getattr(getattr(want[k], name), field)), f"thread {k} {name}.{field}")
    assert spy["fast"] == 200


@pytest.mark.parametrize("fmt", FMTS)
def test_dequantize_fast_path(cp, monkeypatch, dq_spy, fmt):
    """dequantize of CuPy results: the kernel launched directly into a cupy.empty output
    (poisoned), every layout, operand and output dtype (bfloat16 as the general path returns it),
    against the general path and the reference; a strided operand takes the general path."""
    from fp4kit import _device_api

    n = dq_spy

    def dq(q, ref, dtype, operand, fast=True):
        before = n[0]
        y = fp4kit.dequantize(q, dtype, operand)
        assert (n[0] > before) == (fast and q.operand(operand).rows * q.operand(operand).cols > 0)
        with monkeypatch.context() as mp:
            mp.setattr(_device_api, "_dequantize_fast", lambda op, dt, shape: None)
            g = fp4kit.dequantize(q, dtype, operand)
        want = fp4kit.reference.dequantize(ref, dtype, operand)
        tag = f"{fmt} {q.shape} {operand} -> {dtype}"
        assert type(y) is type(g) and y.dtype == g.dtype and y.shape == g.shape == want.shape, tag
        assert_bytes_equal(_u8(y), np.ascontiguousarray(want).reshape(-1).view(np.uint8), tag)
        assert_bytes_equal(_u8(y), _u8(g), f"{tag} vs the general path")

    for shape in [(64, 192), (130, 200), (4, 6, 64), (0, 64)]:
        x = _input(cp, shape, np.float16, seed=shape[-1])
        for layout in ("compact", "swizzled"):
            q = fp4kit.quantize(x, fmt, axis="both", scale_layout=layout)
            ref = fp4kit.reference.quantize(x.get(), fmt, axis="both", scale_layout=layout)
            for operand in ("rowwise", "columnwise"):
                for dtype in ("float32", "float16", "bfloat16"):
                    dq(q, ref, dtype, operand)
    x = _input(cp, (96, 160), np.float32, seed=5)
    if fmt == "nvfp4":
        q = fp4kit.quantize(x, fmt, axis="both", row_scaled=True)
        ref = fp4kit.reference.quantize(x.get(), fmt, axis="both", row_scaled=True)
        for operand in ("rowwise", "columnwise"):
            dq(q, ref, "float16", operand)
    q = fp4kit.quantize(x, fmt)
    ref = fp4kit.reference.quantize(x.get(), fmt)
    d = q.rowwise.data
    wide = cp.zeros((d.shape[0], d.shape[1] + 16), cp.uint8)
    wide[:, :d.shape[1]] = d
    op = fp4kit.Operand(data=wide[:, :d.shape[1]], scales=q.rowwise.scales, scale_layout="compact",
                        amax=q.rowwise.amax, rows=q.rowwise.rows, cols=q.rowwise.cols, format=fmt)
    q2 = fp4kit.QuantizedTensor(format=fmt, shape=q.shape, rowwise=op, columnwise=None, options=q.options,
                                input_dtype=q.input_dtype)
    dq(q2, ref, "float32", "rowwise", fast=False)

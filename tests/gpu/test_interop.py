"""fp4kit._interop: device arrays from CuPy / PyTorch / JAX <-> CuPy views without copies."""
from __future__ import annotations

import numpy as np
import pytest

from gpu_helpers import assert_xla_usable, general_path, jax_gpus, require_gpu

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _poisoned(gpu):
    """Every test here runs with output poisoning on (the gpu fixture), so a byte that a path
    (a captured graph's first replay included) leaves unwritten shows instead of reading as zero."""
    yield


def _torch():
    require_gpu()
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    return torch


def test_cupy_roundtrip():
    require_gpu()
    import cupy as cp

    from fp4kit import _interop

    x = cp.arange(12, dtype=cp.float32).reshape(3, 4)
    d = _interop.as_cupy(x)
    assert d.dtype == "float32" and d.library == "cupy" and d.array.data.ptr == x.data.ptr
    nc = x.T
    d = _interop.as_cupy(nc)
    assert d.array.flags.c_contiguous and np.array_equal(cp.asnumpy(d.array), cp.asnumpy(nc))
    assert _interop.to_library(d.array, "cupy") is d.array
    assert _interop.current_stream(x) is not None


def test_torch_bf16_in_and_out():
    torch = _torch()
    import cupy as cp

    from fp4kit import _interop

    t = torch.randn(8, 32, device="cuda", dtype=torch.bfloat16)
    d = _interop.as_cupy(t)
    assert d.dtype == "bfloat16" and d.library == "torch"
    assert d.array.dtype == cp.uint16 and d.array.data.ptr == t.data_ptr()
    assert np.array_equal(cp.asnumpy(d.array), t.view(torch.int16).cpu().numpy().view(np.uint16))
    back = _interop.to_library(d.array, "torch", "bfloat16")
    assert back.dtype == torch.bfloat16 and back.data_ptr() == t.data_ptr() and torch.equal(back, t)
    u8 = cp.arange(10, dtype=cp.uint8)
    tu8 = _interop.to_library(u8, "torch")
    assert tu8.dtype == torch.uint8 and tu8.data_ptr() == u8.data.ptr
    f16 = torch.randn(4, 4, device="cuda", dtype=torch.float16).t()   # non-contiguous
    d = _interop.as_cupy(f16)
    assert d.dtype == "float16" and d.array.flags.c_contiguous
    s = _interop.current_stream(t)
    assert int(s.ptr) == int(torch.cuda.current_stream().cuda_stream)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        assert int(_interop.current_stream(t).ptr) == int(side.cuda_stream)


def test_jax_in_and_out():
    jax, (dev, *_) = jax_gpus()
    import cupy as cp
    import jax.numpy as jnp

    from fp4kit import _interop

    a = jax.device_put(jnp.arange(64, dtype=jnp.float32).reshape(4, 16), dev)
    d = _interop.as_cupy(a)
    assert d.dtype == "float32" and d.library == "jax"
    assert np.array_equal(cp.asnumpy(d.array), np.asarray(a))
    b = jax.device_put(jnp.linspace(-3, 3, 32, dtype=jnp.bfloat16), dev)
    d = _interop.as_cupy(b)
    assert d.dtype == "bfloat16" and d.array.dtype == cp.uint16
    back = _interop.to_library(d.array, "jax", "bfloat16")
    assert back.dtype == jnp.bfloat16 and bool(jnp.all(back == b))
    u8 = _interop.to_library(cp.arange(5, dtype=cp.uint8), "jax")
    assert u8.dtype == jnp.uint8 and np.array_equal(np.asarray(u8), np.arange(5))


def test_jax_results_have_addresses_xla_accepts():
    """Every array of a JAX result is at an address XLA computes on (found by the fuzz: a G = 2
    NVFP4 "both" group's columnwise amaxes sat at byte offset 8 of the buffer they share with the
    rowwise ones). Results that share a buffer are laid out at 16-byte offsets (checked through
    PyTorch, both paths, and CuPy): amaxes, and a group's last dims after its first dims; a view
    off 16 bytes (only a caller's array now) reaches JAX as a copy."""
    jax, (dev, *_) = jax_gpus()
    import cupy as cp
    import jax.numpy as jnp

    import fp4kit
    from fp4kit import _interop

    base = cp.arange(40, dtype=cp.uint8)
    odd = _interop.to_library(base[4:20], "jax")
    assert odd.dtype == jnp.uint8 and odd.unsafe_buffer_pointer() % 16 == 0
    assert np.array_equal(np.asarray(jax.jit(lambda v: v + 1)(odd)), np.arange(4, 20) + 1)
    whole = cp.arange(64, dtype=cp.float32)
    assert _interop.jax_aligned(whole) is whole

    rng = np.random.default_rng(7)
    # the amaxes that share a buffer are laid out 16 bytes apart, so JAX gets them without copies
    torch = pytest.importorskip("torch")
    tb = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
    q = fp4kit.quantize(tb, "nvfp4", axis="both", rht=True)                   # the fast path
    assert q.columnwise.amax.data_ptr() - q.rowwise.amax.data_ptr() == 16
    with general_path("_torch_fast_device"):
        q = fp4kit.quantize(tb, "nvfp4", axis="both", rht=True)
    assert q.columnwise.amax.data_ptr() - q.rowwise.amax.data_ptr() == 16
    xc = cp.asarray(rng.standard_normal((160, 64)).astype(np.float32))
    for G in (1, 2, 3, 5):                       # 32 rows a member: NVFP4 columnwise needs M even
        g = fp4kit.group_quantize(xc[:G * 32], "nvfp4", num_groups=G, axis="both")
        assert g.rowwise_amax.data.ptr % 16 == 0 and g.columnwise_amax.data.ptr % 16 == 0, G
        # host dims: the last dims start 16 bytes after the first ones (a padding int64 for G odd)
        h = fp4kit.group_quantize(xc[:G * 32], "nvfp4", first_dims=[32] * G, axis="both")
        assert h.extra["fd"].data.ptr % 16 == 0 and h.extra["ld"].data.ptr % 16 == 0, G
        assert h.extra["ld"].tolist() == [64] * G and h.extra["fd"].tolist() == [32] * G
    x = jax.device_put(jnp.asarray(rng.standard_normal((64, 64)).astype(np.float32), dtype=jnp.bfloat16), dev)
    xn = np.asarray(x)
    q = fp4kit.quantize(x, "nvfp4", axis="both", rht=True)
    qr = fp4kit.reference.quantize(xn, "nvfp4", axis="both", rht=True)
    assert fp4kit.compare(q, qr).ok
    for op in ("rowwise", "columnwise"):
        o = q.operand(op)
        for f in ("data", "scales", "amax"):
            assert_xla_usable(getattr(o, f), f"{op}.{f}")
    for G in (2, 3):
        xg = jax.device_put(jnp.asarray(rng.standard_normal((G * 32, 64)).astype(np.float32)), dev)
        g = fp4kit.group_quantize(xg, "nvfp4", num_groups=G, axis="both")
        gv = fp4kit.group_quantize(xg, "nvfp4", first_dims=[0, 32 * G - 16, 16][:G] if G == 3 else [32, 32],
                                   axis="both")
        for grp in (g, gv):
            for f in ("rowwise_data", "rowwise_scales", "rowwise_amax", "columnwise_data",
                      "columnwise_scales", "columnwise_amax", "dbias"):
                assert_xla_usable(getattr(grp, f), f"G={G} {f}")
            for k, v in grp.extra.items():
                if hasattr(v, "unsafe_buffer_pointer"):
                    assert_xla_usable(v, f"G={G} extra {k}")
        ref = fp4kit.reference.group_quantize(np.asarray(xg), "nvfp4", num_groups=G, axis="both")
        assert fp4kit.compare(g, ref).ok
        for i in range(G):                       # member views slice the group's arrays with XLA
            assert fp4kit.compare(g[i], ref[i]).ok
        back = fp4kit.group_dequantize(g, operand="columnwise")
        assert_xla_usable(back.data, f"G={G} dequantized")


def test_torch_kernel_through_interop_matches_reference():
    """bf16 torch tensor -> _interop -> _cuda.quantize on torch's stream -> torch results."""
    torch = _torch()
    import ml_dtypes

    from fp4kit import _cuda, _interop
    from fp4kit._validate import quantize_options
    from fp4kit.reference import api as ref_api

    t = torch.randn(64, 96, device="cuda", dtype=torch.bfloat16) * 3
    d = _interop.as_cupy(t)
    opts = quantize_options(tuple(t.shape), d.dtype, "nvfp4", axis="both")
    with _interop.current_stream(t):
        row, col = _cuda.quantize(d.array, opts, None, input_dtype=d.dtype)
        got = {(op, k): _interop.to_library(v, "torch") for op, o in (("rowwise", row), ("columnwise", col))
               for k, v in o.items() if k in ("data", "scales", "amax")}
    torch.cuda.current_stream().synchronize()
    x_np = t.view(torch.int16).cpu().numpy().view(np.uint16).view(ml_dtypes.bfloat16)
    q = ref_api.quantize(x_np, "nvfp4", axis="both")
    assert len(got) == 6
    for (op, k), v in got.items():
        want = getattr(getattr(q, op), k)
        assert np.array_equal(v.cpu().numpy().view(np.uint8), want.view(np.uint8)), (op, k)


def _torch_bytes(a):
    return a.contiguous().view(-1).view(a.dtype).cpu().numpy().view(np.uint8)


@pytest.mark.parametrize("fmt,kw", [
    ("mxfp8_e4m3", dict(axis="both", scale_layout="swizzled")),
    ("nvfp4", dict(axis="both", scale_layout="swizzled")),          # amax kernel + memset + quantize
    ("nvfp4", dict(axis="both", rht=True, scale_layout="swizzled")),
    ("mxfp4_e2m1", dict(axis="rowwise", rounding="stochastic", seed=5)),
])
@pytest.mark.parametrize("path", ["fast", "general"])
def test_torch_cuda_graph_capture_and_replay(fmt, kw, path, monkeypatch):
    """fp4kit.quantize captured inside torch.cuda.graph: replays after new data is copied into the
    captured input give the reference's bytes. "fast": the PyTorch fast path (torch allocations,
    raw launches on the capturing stream); "general": the CuPy path (results handed back on the
    capturing stream through DLPack)."""
    torch = _torch()
    import ml_dtypes

    import fp4kit
    from fp4kit import _device_api, _torch_exec

    fast_runs = []
    run = _torch_exec.run
    monkeypatch.setattr(_torch_exec, "run", lambda *a, **k: fast_runs.append(1) or run(*a, **k))
    if path == "general":
        monkeypatch.setattr(_device_api, "_torch_fast_device", lambda *a, **k: None)

    x = torch.empty(256, 512, device="cuda", dtype=torch.bfloat16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):                   # warm-up on the capture stream (compile, pool blocks)
        x.copy_(torch.randn(256, 512, device="cuda"))
        for _ in range(2):
            fp4kit.quantize(x, fmt, **kw)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    fast_runs.clear()
    with torch.cuda.graph(g, stream=s):
        q = fp4kit.quantize(x, fmt, **kw)
    assert len(fast_runs) == (1 if path == "fast" else 0)
    for trial in range(3):
        x.copy_(torch.randn(256, 512, device="cuda") * (10.0 ** trial))
        g.replay()
        torch.cuda.synchronize()
        xs = x.view(torch.int16).cpu().numpy().view(ml_dtypes.bfloat16)
        ref = fp4kit.reference.quantize(xs, fmt, **kw)
        for name in ("rowwise", "columnwise"):
            want = getattr(ref, name)
            got = getattr(q, name)
            assert (got is None) == (want is None)
            if want is None:
                continue
            assert np.array_equal(_torch_bytes(got.data), want.data.reshape(-1)), (trial, name, "data")
            assert np.array_equal(_torch_bytes(got.scales), want.scales.reshape(-1).view(np.uint8)), (trial, name, "scales")
            if want.amax is not None:
                assert np.array_equal(_torch_bytes(got.amax), want.amax.reshape(-1).view(np.uint8)), (trial, name, "amax")


def _bf16_np(torch, t):
    import ml_dtypes
    return t.contiguous().view(torch.int16).cpu().numpy().view(ml_dtypes.bfloat16)


@pytest.mark.parametrize("case", ["strided_device_amax", "strided_rht_swizzled", "strided_fast",
                                  "grouped_strided_device_dims", "grouped_strided_fast", "dequantize_general"])
def test_torch_general_path_capture_on_a_fresh_stream(case, monkeypatch):
    """The general path (a strided PyTorch input, or a path forced off its fast path; and a strided
    input's contiguous copy before the fast path) captured by
    torch.cuda.graph on its own fresh capture stream, with no warm-up there: CuPy's buffers come
    from PyTorch's allocator (the graph's private pool), so the capture records no cudaMalloc (it
    failed with cudaErrorStreamCaptureUnsupported when CuPy's pool had no block for that stream),
    and replays after new data (and, grouped, new dims) are copied in give the reference's bytes."""
    torch = _torch()
    import fp4kit
    from fp4kit import _device_api, _torch_exec

    fast_runs = []
    run = _torch_exec.run
    monkeypatch.setattr(_torch_exec, "run", lambda *a, **k: fast_runs.append(1) or run(*a, **k))
    torch.manual_seed(11)
    base = torch.empty(512, 256, device="cuda", dtype=torch.bfloat16)
    xs = base.t()                                          # (256, 512), not C-contiguous
    x = torch.empty(256, 512, device="cuda", dtype=torch.bfloat16)
    dims = torch.tensor([128, 0, 128], device="cuda", dtype=torch.int64)
    amax_dev = torch.empty(1, device="cuda", dtype=torch.float32)

    def fill(trial):
        base.copy_(torch.randn(512, 256, device="cuda") * 10.0 ** trial)
        x.copy_(torch.randn(256, 512, device="cuda") * 10.0 ** trial)
        amax_dev.fill_(float(4 * 10.0 ** trial))
        dims.copy_(torch.tensor([[128, 0, 128], [0, 200, 56], [256, 0, 0]][trial], device="cuda"))

    if case in ("strided_device_amax", "strided_rht_swizzled", "grouped_strided_device_dims"):  # general path
        monkeypatch.setattr(_device_api, "_torch_fast_device", lambda *a, **k: None)
    if case in ("strided_device_amax", "strided_fast"):   # strided_fast: PyTorch's copy, then the fast path
        fn = lambda: fp4kit.quantize(xs, "nvfp4", axis="both", amax=amax_dev)  # noqa: E731
        ref = lambda: fp4kit.reference.quantize(_bf16_np(torch, xs), "nvfp4", axis="both",  # noqa: E731
                                                amax=amax_dev.cpu().numpy())
    elif case == "strided_rht_swizzled":
        fn = lambda: fp4kit.quantize(xs, "nvfp4", axis="both", rht=True, scale_layout="swizzled")  # noqa: E731
        ref = lambda: fp4kit.reference.quantize(_bf16_np(torch, xs), "nvfp4", axis="both", rht=True,  # noqa: E731
                                                scale_layout="swizzled")
    elif case in ("grouped_strided_device_dims", "grouped_strided_fast"):
        fn = lambda: fp4kit.group_quantize(xs, "mxfp8_e4m3", first_dims=dims, axis="both")  # noqa: E731
        ref = lambda: fp4kit.reference.group_quantize(_bf16_np(torch, xs), "mxfp8_e4m3",  # noqa: E731
                                                      first_dims=dims.cpu().tolist(), axis="both")
    else:
        monkeypatch.setattr(_device_api, "_dequantize_fast", lambda *a, **k: None)
        fn = lambda: fp4kit.dequantize(fp4kit.quantize(x, "mxfp6_e3m2"), "bfloat16")  # noqa: E731
        ref = lambda: fp4kit.reference.dequantize(  # noqa: E731
            fp4kit.reference.quantize(_bf16_np(torch, x), "mxfp6_e3m2"), "bfloat16")

    fill(0)
    fn()                                   # compile and run once on the default stream
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    fast_runs.clear()
    with torch.cuda.graph(g):              # a fresh capture stream: nothing cached for it
        out = fn()
    # the strided copies take the fast path; the forced general cases do not (dequantize_general:
    # its quantize is fast, its dequantize general)
    assert len(fast_runs) == {"strided_fast": 1, "grouped_strided_fast": 1, "dequantize_general": 1}.get(case, 0)
    for trial in range(3):
        fill(trial)
        g.replay()
        torch.cuda.synchronize()
        want = ref()
        if isinstance(out, fp4kit.QuantizedTensor):
            rep = fp4kit.compare(out, want)
            assert rep.ok, (trial, str(rep))
        elif isinstance(out, torch.Tensor):
            assert np.array_equal(out.view(torch.int16).cpu().numpy().view(np.uint16), want.view(np.uint16)), trial
        else:
            assert len(out) == 3
            for i in range(3):
                rep = fp4kit.compare(out[i], want[i])
                assert rep.ok, (trial, i, str(rep))


def test_torch_general_path_buffers_come_from_torch():
    """A PyTorch caller's general-path call takes every buffer (results and scratch) from PyTorch's
    caching allocator: CuPy's pool holds no more bytes afterwards, PyTorch's allocator holds the
    results, and they stay exact after their scratch is gone."""
    torch = _torch()
    import cupy as cp

    import fp4kit

    from fp4kit import _device_api

    xs = (torch.randn(512, 256, device="cuda") * 3).to(torch.bfloat16).t()
    fp4kit.quantize(xs, "nvfp4", axis="both", rht=True)       # compile
    torch.cuda.synchronize()
    pool = cp.get_default_memory_pool()
    used, held = pool.used_bytes(), torch.cuda.memory_allocated()
    fast = _device_api._torch_fast_device
    _device_api._torch_fast_device = lambda *a, **k: None       # the general path
    try:
        q = fp4kit.quantize(xs, "nvfp4", axis="both", rht=True)
    finally:
        _device_api._torch_fast_device = fast
    torch.cuda.synchronize()
    assert pool.used_bytes() <= used
    assert torch.cuda.memory_allocated() > held
    for t in (q.rowwise.data, q.rowwise.scales, q.columnwise.data, q.rowwise.amax):
        # the storage of a uint8 tensor PyTorch allocated, not a DLPack import (whose storage is
        # not resizable): record_stream works. (Not t._base: a float32 view of uint8 storage is a
        # new tensor over the same storage, with no _base, as the H100 run of 3b56734 showed.)
        assert type(t) is torch.Tensor and t.untyped_storage().resizable()
    junk = [torch.full((n,), 0x5A, device="cuda", dtype=torch.uint8) for n in (4096, 65536, 1 << 20)]
    want = fp4kit.reference.quantize(_bf16_np(torch, xs), "nvfp4", axis="both", rht=True)
    assert fp4kit.compare(q, want).ok
    del junk


def test_torch_tensor_subclass_is_a_torch_input():
    """A torch.Tensor subclass defined outside torch (off the fast paths) is a PyTorch input: the
    general path runs on PyTorch's current stream (here a side stream whose producer kernel has not
    been waited for) and hands back PyTorch tensors, exact; grouped ops alike."""
    torch = _torch()
    import fp4kit
    from fp4kit import _interop

    class Sub(torch.Tensor):
        pass

    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        x = (torch.randn(256, 512, device="cuda") * 3).to(torch.bfloat16).as_subclass(Sub)
        assert _interop.library_of(x) == "torch" and _interop.library_of(x.cpu()) == "torch"
        q = fp4kit.quantize(x, "nvfp4", axis="both")
        g = fp4kit.group_quantize(x, "mxfp8_e4m3", first_dims=[128, 0, 128], axis="both")
        y = fp4kit.dequantize(q, "bfloat16")
    s.synchronize()
    xn = _bf16_np(torch, x.as_subclass(torch.Tensor))
    assert type(q.rowwise.data) is torch.Tensor and type(y) is torch.Tensor
    want = fp4kit.reference.quantize(xn, "nvfp4", axis="both")
    assert fp4kit.compare(q, want).ok
    assert np.array_equal(y.view(torch.int16).cpu().numpy().view(np.uint16),
                          fp4kit.reference.dequantize(want, "bfloat16").view(np.uint16))
    gw = fp4kit.reference.group_quantize(xn, "mxfp8_e4m3", first_dims=[128, 0, 128], axis="both")
    assert all(fp4kit.compare(g[i], gw[i]).ok for i in range(3))
    with pytest.raises(TypeError, match=r"x\.cuda\(\)"):
        fp4kit.quantize(x.cpu(), "nvfp4")

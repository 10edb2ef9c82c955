"""The PyTorch fast path of fp4kit.quantize (fp4kit._torch_exec): byte-identical to the reference
and to the general (CuPy + DLPack) path, same result types, taken when it should be, thread safe
and CUDA-graph capturable. Outputs are poisoned (the `gpu` fixture), so an unwritten byte fails."""
from __future__ import annotations


import numpy as np
import pytest

from gpu_helpers import assert_bytes_equal, compare_quantized, general_path, path_spy, require_gpu, run_in_threads

pytestmark = pytest.mark.gpu

FMTS = ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4_e2m1", "nvfp4"]


@pytest.fixture
def torch(gpu):
    require_gpu()
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    return torch


@pytest.fixture
def spy(monkeypatch):
    """Counts fast-path executions (fp4kit._torch_exec.run) and general-path conversions (as_cupy)."""
    from fp4kit import _torch_exec

    return path_spy(monkeypatch, _torch_exec, "run")


def _general():
    """Within: quantize takes the general path for every input."""
    return general_path("_torch_fast_device")


def _np(t):
    import torch

    t = t.detach()
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.view(torch.int16).cpu().numpy().view(ml_dtypes.bfloat16)
    return t.cpu().numpy()


def _u8(t):
    """A result tensor's bytes (uint8 view, C order)."""
    return np.ascontiguousarray(t.detach().cpu().numpy()).reshape(-1).view(np.uint8)


def _compare(q_fast, q_ref, what, q_general=None):
    compare_quantized(q_fast, q_ref, what, q_general, u8=_u8,
                      meta=lambda a: (type(a), a.dtype, tuple(a.shape), a.device, a.is_contiguous()))


def check(torch, spy, x, fmt, amax=None, **kw):
    """Fast path vs reference vs general path for one input (a torch CUDA tensor)."""
    import fp4kit

    before = dict(spy)
    q = fp4kit.quantize(x, fmt, amax=amax, **kw)
    assert spy["fast"] == before["fast"] + 1 and spy["as_cupy"] == before["as_cupy"], "fast path not taken"
    with _general():
        g = fp4kit.quantize(x, fmt, amax=amax, **kw)
    assert spy["fast"] == before["fast"] + 1
    torch.cuda.synchronize()
    ref = fp4kit.reference.quantize(_np(x), fmt, amax=None if amax is None else _np(amax), **kw)
    _compare(q, ref, f"{fmt} {tuple(x.shape)} {x.dtype} ptr%16={x.data_ptr() % 16} {kw}", g)
    return q


def _input(torch, shape, dtype, seed=0, scale=3.0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.randn(shape, device="cuda", generator=g) * scale).to(getattr(torch, dtype))


SHAPES = [("bfloat16", (64, 192)), ("float32", (48, 80)), ("float16", (130, 200)), ("bfloat16", (2, 34)),
          ("bfloat16", (128, 256))]   # (128, 256): compact MXFP8 scales through the staging buffers


@pytest.mark.parametrize("layout", ["compact", "swizzled"])
@pytest.mark.parametrize("axis", ["rowwise", "columnwise", "both"])
@pytest.mark.parametrize("fmt", FMTS)
def test_fast_path_matches_reference_and_general_path(torch, spy, fmt, axis, layout):
    for i, (dtype, shape) in enumerate(SHAPES):
        check(torch, spy, _input(torch, shape, dtype, seed=i), fmt, axis=axis, scale_layout=layout)


@pytest.mark.parametrize("fmt", [f for f in FMTS if f != "nvfp4"])
def test_fast_path_floor_rule(torch, spy, fmt):
    check(torch, spy, _input(torch, (64, 96), "bfloat16"), fmt, axis="both", scale_rule="floor")


NVFP4_CASES = [
    dict(axis="both", amax="global"),
    dict(axis="rowwise", amax="global", scale_layout="swizzled"),
    dict(axis="columnwise", amax="global"),
    dict(axis="both", row_scaled=True),
    dict(axis="both", row_scaled=True, amax="rows"),
    dict(axis="rowwise", row_scaled=True, amax="rows", scale_layout="swizzled"),
    dict(axis="both", rht=True),
    dict(axis="both", rht=True, scale_layout="swizzled", rht_sign_mask=0x1234),
    dict(axis="columnwise", rht=True),
    dict(axis="both", rht=True, amax="global"),
    dict(axis="both", tile_2d=True),
    dict(axis="rowwise", tile_2d=True, amax="global"),
    dict(axis="both", rounding="stochastic", seed=123),
    dict(axis="rowwise", rounding="stochastic", seed=2**64 - 1, scale_layout="swizzled"),
]


@pytest.mark.parametrize("case", NVFP4_CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_fast_path_nvfp4_variants(torch, spy, case, dtype):
    kw = dict(case)
    x = _input(torch, (96, 160), dtype, seed=7)
    if kw.get("rht") and dtype != "bfloat16":     # SPEC: RHT takes bfloat16 only; refused before any launch
        import fp4kit
        kw.pop("amax", None)
        with pytest.raises(TypeError, match="bfloat16"):
            fp4kit.quantize(x, "nvfp4", **kw)
        assert spy["fast"] == 0 and spy["as_cupy"] == 0
        return
    amax = kw.pop("amax", None)
    if amax == "global":
        amax = x.float().abs().amax().reshape(1) * 1.5            # a caller's (larger) amax
    elif amax == "rows":
        amax = x.float().abs().amax(dim=1) * 1.25
    check(torch, spy, x, "nvfp4", amax=amax, **kw)


@pytest.mark.parametrize("axis", ["rowwise", "columnwise", "both"])
def test_fast_path_stored_amaxes(torch, spy, axis):
    """A caller's amax on the fast path goes straight to the nvfp4_amax_out launch (no copy first):
    -0 is stored as +0 and quantizes as +0; a strided amax (every second float, one per row) is read
    through a contiguous copy, the caller's tensor is left as it was."""
    x = _input(torch, (96, 160), "bfloat16", seed=8)
    zero = torch.tensor([-0.0], device="cuda")
    q = check(torch, spy, x, "nvfp4", amax=zero, axis=axis)
    for op in (q.rowwise, q.columnwise):
        if op is not None:
            assert op.amax.view(torch.int32).tolist() == [0]
    assert zero.view(torch.int32).tolist() == [-2**31]
    rows = x.float().abs().amax(dim=1) * 1.25
    rows[::7] = -0.0
    wide = torch.stack([rows, torch.full_like(rows, 9.0)], dim=1)
    if axis != "columnwise":
        check(torch, spy, x, "nvfp4", amax=wide[:, 0], axis=axis, row_scaled=True)
        assert wide[:, 0].view(torch.int32)[::7].eq(-2**31).all()


def test_fast_path_stochastic_mxfp4_and_seeds(torch, spy):
    x = _input(torch, (64, 128), "bfloat16")
    a = check(torch, spy, x, "mxfp4_e2m1", axis="both", rounding="stochastic", seed=1)
    b = check(torch, spy, x, "mxfp4_e2m1", axis="both", rounding="stochastic", seed=2)
    assert not torch.equal(a.rowwise.data, b.rowwise.data)      # the seed really is a per-call argument


@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "mxfp6_e3m2", "mxfp4_e2m1", "nvfp4"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_fast_path_odd_shapes_and_misaligned_views(torch, spy, fmt, dtype):
    packed = fmt in ("mxfp4_e2m1", "nvfp4")
    # M = 1 (columnwise packs along M: rowwise only for FP4), K not a multiple of 64 or of the block
    for shape in [(1, 64), (1, 100), (5, 34), (33, 1000), (3, 3000)]:
        axis = "rowwise" if packed and shape[0] % 2 else "both"
        if packed and shape[1] % 2:
            continue
        check(torch, spy, _input(torch, shape, dtype, seed=shape[1]), fmt, axis=axis,
              scale_layout="swizzled")
    M, K = 32, 96
    big = _input(torch, (M, K + 1), dtype, seed=11)
    fresh = big[:, 1:].contiguous()                              # a copy: aligned
    flat = _input(torch, (M * K + 16,), dtype, seed=12)
    off1 = flat[1:1 + M * K].view(M, K)                          # 2 (4 for float32) bytes past 16
    off8 = flat[8:8 + M * K].view(M, K)                          # 16 (32) bytes: aligned again
    assert fresh.data_ptr() % 16 == 0 and off1.data_ptr() % 16 != 0 and off8.data_ptr() % 16 == 0
    for x in (fresh, off1, off8):
        check(torch, spy, x, fmt, axis="both")
        if fmt == "nvfp4" and dtype == "bfloat16":
            check(torch, spy, x, fmt, axis="both", rht=True)    # misaligned: two amax passes
            check(torch, spy, x, fmt, axis="columnwise", rht=True)


def test_fast_path_3d_and_empty_inputs(torch, spy):
    import fp4kit

    check(torch, spy, _input(torch, (4, 6, 64), "bfloat16"), "nvfp4", axis="both")
    for shape in [(0, 64), (64, 0), (0, 0)]:
        for layout in ("compact", "swizzled"):
            x = torch.zeros(shape, device="cuda", dtype=torch.float32)
            q = fp4kit.quantize(x, "nvfp4", axis="both", scale_layout=layout)
            with _general():
                g = fp4kit.quantize(x, "nvfp4", axis="both", scale_layout=layout)
            for name in ("rowwise", "columnwise"):
                a, b = getattr(q, name), getattr(g, name)
                for field in ("data", "scales", "amax"):
                    assert tuple(getattr(a, field).shape) == tuple(getattr(b, field).shape)
                    assert getattr(a, field).dtype == getattr(b, field).dtype
                assert _u8(a.amax).tolist() == _u8(b.amax).tolist()


def test_general_path_for_other_inputs(torch, spy):
    """Inputs the fast path does not take still work, through the general path; a strided view
    with a fast-path amax is copied contiguous by PyTorch and takes the fast path."""
    import fp4kit

    x = _input(torch, (64, 128), "bfloat16")
    amax = x.float().abs().amax().reshape(1)
    cases = [
        (x.t(), {}),                                             # not contiguous: copied, then fast
        (x[:, ::2], {"amax": amax.cpu().numpy()}),               # not contiguous, NumPy amax: general
        (x, {"amax": amax.cpu().numpy()}),                       # NumPy amax
        (x, {"amax": amax.reshape(1, 1)[:, 0]}),                 # a view, still a plain float32 tensor: fast
    ]
    for xi, kw in cases:
        fast_before = spy["fast"]
        view_before = (xi.stride(), xi.storage_offset(), np.ascontiguousarray(_np(xi)))
        q = fp4kit.quantize(xi, "nvfp4", axis="both", **kw)
        torch.cuda.synchronize()
        am = kw.get("amax")
        ref = fp4kit.reference.quantize(_np(xi), "nvfp4", axis="both",
                                        amax=None if am is None else (am if isinstance(am, np.ndarray) else _np(am)))
        _compare(q, ref, f"{tuple(xi.shape)} {type(am).__name__}")
        took_fast = spy["fast"] > fast_before
        assert took_fast == (not isinstance(am, np.ndarray))
        assert (xi.stride(), xi.storage_offset()) == view_before[:2]       # the caller's view is left as it was
        assert np.array_equal(np.ascontiguousarray(_np(xi)).view(np.uint8), view_before[2].view(np.uint8))


def test_fast_path_validation_is_unchanged(torch, spy):
    import fp4kit

    x = _input(torch, (16, 64), "bfloat16")
    errors = [
        (dict(axis="diagonal"), ValueError, r"axis: expected one of \['rowwise', 'columnwise', 'both'\], got 'diagonal'"),
        (dict(tile_2d=1), TypeError, "tile_2d: expected True or False, got int 1"),
        (dict(amax=torch.ones(2, device="cuda")), ValueError, r"amax: expected shape \(1,\), got \(2,\)"),
        (dict(amax=torch.ones(1, device="cuda", dtype=torch.float16)), TypeError,
         "amax: expected a float32 array, got dtype float16"),
        (dict(amax=torch.ones(1)), TypeError, r"amax: expected a float32 NumPy array or CUDA device array, got a "
                                              r"PyTorch tensor on cpu \(Tensor\): pass a NumPy array \(amax\.detach\(\)\.numpy\(\)\)"),
        (dict(rht=True, axis="rowwise"), ValueError, "rht: the Hadamard transform applies to the columnwise"),
        (dict(seed=-1), ValueError, r"seed: expected an integer in \[0, 18446744073709551615\], got -1"),
    ]
    for kw, exc, msg in errors:
        with pytest.raises(exc, match=msg):
            fp4kit.quantize(x, "nvfp4", **kw)
    with pytest.raises(ValueError, match="only NVFP4 takes a global amax"):
        fp4kit.quantize(x, "mxfp8_e4m3", amax=torch.ones(1, device="cuda"))
    with pytest.raises(TypeError, match="x: expected dtype float32, bfloat16 or float16, got float64"):
        fp4kit.quantize(x.double(), "nvfp4")
    with pytest.raises(ValueError, match="K must be even"):
        fp4kit.quantize(_input(torch, (4, 33), "float32"), "nvfp4")
    assert spy["fast"] == 0                                      # nothing was launched


def test_fast_path_on_a_side_stream_and_parameter(torch, spy):
    import fp4kit

    x = torch.nn.Parameter(_input(torch, (64, 128), "float32"))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        q = fp4kit.quantize(x, "nvfp4", axis="both")
    side.synchronize()
    assert spy["fast"] == 1
    ref = fp4kit.reference.quantize(_np(x), "nvfp4", axis="both")
    _compare(q, ref, "Parameter on a side stream")


def test_fast_path_from_threads(torch, spy):
    """Several threads quantizing with one plan at once (per-thread packed arguments)."""
    import fp4kit

    xs = [_input(torch, (64, 256), "bfloat16", seed=k) for k in range(4)]
    with _general():
        want = [fp4kit.quantize(x, "nvfp4", axis="both", scale_layout="swizzled") for x in xs]

    def worker(k):                                               # a fresh thread: no set_device
        for _ in range(50):
            q = fp4kit.quantize(xs[k], "nvfp4", axis="both", scale_layout="swizzled")
        torch.cuda.current_stream().synchronize()
        return q

    results = run_in_threads(worker, 4)
    torch.cuda.synchronize()
    for k in range(4):
        for name in ("rowwise", "columnwise"):
            for field in ("data", "scales", "amax"):
                assert torch.equal(getattr(getattr(results[k], name), field), getattr(getattr(want[k], name), field)), \
                    (k, name, field)
    assert spy["fast"] == 200



def _dq_general():
    from fp4kit import _device_api

    mp = pytest.MonkeyPatch()
    mp.setattr(_device_api, "_dequantize_fast", lambda op, dtype, shape: None)
    return mp


def _dq_check(torch, dq_spy, q, ref, dtype, operand, fast=True):
    import fp4kit

    before = dq_spy[0]
    y = fp4kit.dequantize(q, dtype, operand)
    assert (dq_spy[0] > before) == (fast and q.operand(operand).rows * q.operand(operand).cols > 0), "fast path"
    mp = _dq_general()
    try:
        g = fp4kit.dequantize(q, dtype, operand)
    finally:
        mp.undo()
    torch.cuda.synchronize()
    want = fp4kit.reference.dequantize(ref, dtype, operand)
    tag = f"{q.format} {q.shape} {operand} -> {dtype}"
    assert type(y) is torch.Tensor and y.dtype == g.dtype and tuple(y.shape) == tuple(g.shape) == want.shape, tag
    assert str(y.dtype) == f"torch.{dtype}", tag
    bits = lambda t: _u8(t.view(torch.int16) if t.dtype == torch.bfloat16 else t)  # noqa: E731
    assert_bytes_equal(bits(y), np.ascontiguousarray(want).reshape(-1).view(np.uint8), tag)
    assert_bytes_equal(bits(y), bits(g), f"{tag} vs the general path")


@pytest.mark.parametrize("fmt", FMTS)
def test_dequantize_fast_path(torch, dq_spy, fmt):
    """dequantize of torch results: the kernel launched directly into a torch.empty output
    (poisoned), for every format, layout, operand and output dtype; 3-D and empty inputs; NVFP4
    with a global and a per-row amax; operands the fast path does not take still work."""
    import fp4kit

    for shape in [(64, 192), (130, 200), (4, 6, 64), (0, 64)]:
        x = _input(torch, shape, "bfloat16", seed=shape[-1])
        for layout in ("compact", "swizzled"):
            q = fp4kit.quantize(x, fmt, axis="both", scale_layout=layout)
            ref = fp4kit.reference.quantize(_np(x), fmt, axis="both", scale_layout=layout)
            for operand in ("rowwise", "columnwise"):
                for dtype in ("float32", "float16", "bfloat16"):
                    _dq_check(torch, dq_spy, q, ref, dtype, operand)
    x = _input(torch, (96, 160), "float32", seed=5)
    if fmt == "nvfp4":
        q = fp4kit.quantize(x, fmt, axis="both", row_scaled=True)
        ref = fp4kit.reference.quantize(_np(x), fmt, axis="both", row_scaled=True)
        for operand in ("rowwise", "columnwise"):
            _dq_check(torch, dq_spy, q, ref, "bfloat16", operand)
    # a non-contiguous view as the operand's data (same bytes): the general path
    q = fp4kit.quantize(x, fmt)
    ref = fp4kit.reference.quantize(_np(x), fmt)
    d = q.rowwise.data
    wide = torch.zeros((d.shape[0], d.shape[1] + 16), dtype=torch.uint8, device="cuda")
    wide[:, :d.shape[1]] = d
    op = fp4kit.Operand(data=wide[:, :d.shape[1]], scales=q.rowwise.scales, scale_layout="compact",
                        amax=q.rowwise.amax, rows=q.rowwise.rows, cols=q.rowwise.cols, format=fmt)
    q2 = fp4kit.QuantizedTensor(format=fmt, shape=q.shape, rowwise=op, columnwise=None, options=q.options,
                                input_dtype=q.input_dtype)
    _dq_check(torch, dq_spy, q2, ref, "float32", "rowwise", fast=False)


# ---------------------------------------------------------------------------------------------
# programmatic dependent launch: every fast-path kernel (fp4kit._torch_exec.PDL, PDL_ALL)

@pytest.fixture
def pdl_calls(monkeypatch):
    """Counts programmatic dependent launches (fp4kit._torch_exec._PdlLaunch calls) with PDL on;
    every cached plan dropped before and after (a plan's executor packs its launches with PDL's
    value then)."""
    from fp4kit import _plan, _torch_exec

    calls = [0]
    orig = _torch_exec._PdlLaunch.__call__

    def counting(self, f, stream, params):
        calls[0] += 1
        return orig(self, f, stream, params)

    monkeypatch.setattr(_torch_exec._PdlLaunch, "__call__", counting)
    monkeypatch.setattr(_torch_exec, "PDL", True)        # whatever FP4KIT_PDL says
    monkeypatch.setattr(_torch_exec, "PDL_ALL", True)
    _plan.clear_plans()
    yield calls
    _plan.clear_plans()


# (shape, format, options, kernels in the plan, programmatic launches: all of them, or all but the
# first when the call clears the computed amax first); the sizes where the plan has these launches
PDL_CASES = [
    ((2048, 4096), "nvfp4", {"axis": "rowwise"}, 2, 1),                               # amax, rows
    ((1024, 2048), "nvfp4", {"axis": "both", "scale_layout": "compact"}, 3, 2),       # amax, copies, tile
    ((1024, 2048), "nvfp4", {"axis": "columnwise", "scale_layout": "swizzled", "amax": True}, 2, 2),
    ((8192, 8192), "mxfp8_e4m3", {"axis": "both", "scale_layout": "compact"}, 2, 2),  # quad tiles, unswizzle
]


@pytest.mark.parametrize("case", PDL_CASES, ids=lambda c: f"{c[1]}-{c[2]['axis']}-{c[0][0]}")
def test_pdl_dependent_launches_give_the_same_bytes(torch, spy, pdl_calls, monkeypatch, case):
    """With PDL each kernel of a plan is launched with programmatic stream serialization (the
    first one not after the computed amax's memset; counted), and the results are byte-identical
    to PDL off (ordinary launches), over repeated calls on fresh random inputs: a kernel that read
    its predecessor's output before waiting for it (the computed amax, the staged scales) would
    differ. The small cases also against the reference."""
    import fp4kit
    from fp4kit import _plan, _torch_exec

    shape, fmt, kw, _, n_pdl = case
    kw = dict(kw)
    want_amax = kw.pop("amax", False)
    for rep in range(4):
        x = _input(torch, shape, "bfloat16", seed=rep, scale=1.0 + rep)
        amax = x.abs().amax().float().reshape(1) if want_amax else None
        before = pdl_calls[0]
        q = fp4kit.quantize(x, fmt, amax=amax, **kw)
        assert pdl_calls[0] - before == n_pdl, "kernels not launched with PDL"
        monkeypatch.setattr(_torch_exec, "PDL", False)
        _plan.clear_plans()
        q_off = fp4kit.quantize(x, fmt, amax=amax, **kw)
        assert pdl_calls[0] - before == n_pdl
        monkeypatch.setattr(_torch_exec, "PDL", True)
        _plan.clear_plans()
        torch.cuda.synchronize()
        if shape[0] * shape[1] <= 1 << 21:
            ref = fp4kit.reference.quantize(_np(x), fmt, amax=None if amax is None else _np(amax), **kw)
            _compare(q, ref, f"PDL {fmt} {shape} {kw} rep {rep}", q_off)
        else:
            for name in ("rowwise", "columnwise"):
                a, b = getattr(q, name), getattr(q_off, name)
                assert (a is None) == (b is None)
                if a is None:
                    continue
                for field in ("data", "scales"):
                    assert_bytes_equal(_u8(getattr(a, field)), _u8(getattr(b, field)), f"{fmt} {name} {field} rep {rep}")


def test_pdl_off_and_first_kernels_launch_plainly(torch, spy, pdl_calls, monkeypatch):
    """PDL_ALL False (item 134): a one-kernel plan never goes through cuLaunchKernelEx, a
    three-kernel plan's later two do; PDL_ALL True: every kernel; PDL False: none."""
    import fp4kit
    from fp4kit import _plan, _torch_exec

    monkeypatch.setattr(_torch_exec, "PDL_ALL", False)
    _plan.clear_plans()
    x = _input(torch, (256, 512), "bfloat16")
    fp4kit.quantize(x, "mxfp8_e4m3", axis="both", scale_layout="swizzled")   # one kernel
    assert pdl_calls[0] == 0
    x3 = _input(torch, (1024, 2048), "bfloat16")
    fp4kit.quantize(x3, "nvfp4", axis="both", scale_layout="compact")          # amax, copies, tile
    assert pdl_calls[0] == 2
    monkeypatch.setattr(_torch_exec, "PDL_ALL", True)
    _plan.clear_plans()
    fp4kit.quantize(x, "mxfp8_e4m3", axis="both", scale_layout="swizzled")
    assert pdl_calls[0] == 3
    monkeypatch.setattr(_torch_exec, "PDL", False)
    _plan.clear_plans()
    fp4kit.quantize(x, "mxfp8_e4m3", axis="both", scale_layout="swizzled")
    fp4kit.quantize(x3, "nvfp4", axis="both")
    torch.cuda.synchronize()
    assert pdl_calls[0] == 3 and spy["fast"] == 5


@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "mxfp4_e2m1", "nvfp4"])
def test_pdl_back_to_back_calls_read_what_the_kernel_ahead_wrote(torch, pdl_calls, fmt):
    """PDL_ALL: a call's first kernel and the raw dequantize launch overlap the kernel ahead of
    them, so each must still read what that kernel wrote: a PyTorch kernel writes the input, the
    quantize reads it, the dequantize reads the quantize's codes, scales and amax and a PyTorch
    kernel reads its output, all queued without a synchronisation, for fresh inputs each round;
    bytes against the reference (and the launches counted as PDL)."""
    import fp4kit

    outs = []
    base = _input(torch, (512, 1024), "bfloat16", seed=3)
    for rep in range(6):
        x = base * (rep + 1) - rep          # a PyTorch kernel writes the input just before quantize
        before = pdl_calls[0]
        q = fp4kit.quantize(x, fmt, axis="rowwise", scale_layout="swizzled")
        d = fp4kit.dequantize(q, dtype="bfloat16")
        assert pdl_calls[0] - before >= 2, "first kernel / raw dequantize launch not PDL"
        outs.append((x, q, d, d.float() * 1.0))   # a PyTorch kernel reads the dequantize's output
    torch.cuda.synchronize()
    for rep, (x, q, d, d32) in enumerate(outs):
        ref = fp4kit.reference.quantize(_np(x), fmt, axis="rowwise", scale_layout="swizzled")
        _compare(q, ref, f"PDL back to back {fmt} rep {rep}")
        ref_d = fp4kit.reference.dequantize(ref, dtype="bfloat16")
        assert_bytes_equal(_u8(d.view(torch.int16)), np.ascontiguousarray(ref_d).reshape(-1).view(np.uint8),
                           f"dequantize rep {rep}")
        assert torch.equal(d32, d.float())


@pytest.mark.parametrize("fmt,axis", [("mxfp8_e4m3", "rowwise"), ("mxfp4_e2m1", "both"), ("nvfp4", "both")])
def test_pdl_group_quantize_same_bytes(torch, pdl_calls, monkeypatch, fmt, axis):
    """group_quantize with device dims (the metadata kernel, then the quantize kernels, launched
    with PDL) gives the bytes of ordinary launches, over repeated calls with new dims."""
    import fp4kit
    from fp4kit import _plan, _torch_exec

    names = ("rowwise_data", "rowwise_scales", "rowwise_amax", "columnwise_data", "columnwise_scales",
             "columnwise_amax")
    for rep, dims in enumerate(([384, 0, 1280, 128, 256], [128, 640, 0, 512, 768], [2048, 0, 0, 0, 0])):
        x = _input(torch, (sum(dims), 512), "bfloat16", seed=rep)
        dims_dev = torch.tensor(dims, dtype=torch.int64, device="cuda")
        before = pdl_calls[0]
        g = fp4kit.group_quantize(x, fmt, first_dims=dims_dev, axis=axis, scale_layout="swizzled")
        assert pdl_calls[0] > before, "no dependent kernel launched with PDL"
        monkeypatch.setattr(_torch_exec, "PDL", False)
        _plan.clear_plans()
        g_off = fp4kit.group_quantize(x, fmt, first_dims=dims_dev, axis=axis, scale_layout="swizzled")
        monkeypatch.setattr(_torch_exec, "PDL", True)
        _plan.clear_plans()
        torch.cuda.synchronize()
        for n in names:
            a, b = getattr(g, n), getattr(g_off, n)
            assert (a is None) == (b is None), n
            if a is not None:
                assert_bytes_equal(_u8(a), _u8(b), f"{fmt} {axis} {n} dims {dims}")

"""The grouped fast path of fp4kit.group_quantize: PyTorch tensors and CuPy arrays run the memoised
launch plan (fp4kit._cuda_grouped.group_quantize_plan) with fp4kit._torch_exec. Its results must be
byte-identical to the general path's (CuPy buffers, handed back through DLPack) and match the
reference, on the first call of a signature and on memo hits, for every dims kind; its arrays are
of the caller's library; group_dequantize, check() and member views work on them; CUDA-graph
capture with PyTorch works. Outputs are poisoned (the `gpu` fixture), so an unwritten byte fails."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import fp4kit

from fp4kit import _grouped_device, _plan
from gpu_helpers import assert_bytes_equal, general_path

pytestmark = pytest.mark.gpu

_BUFFERS = ("rowwise_data", "rowwise_scales", "rowwise_amax", "columnwise_data", "columnwise_scales",
            "columnwise_amax")


@pytest.fixture
def cp(gpu):
    return gpu


@pytest.fixture
def counts(monkeypatch):
    """Counts the grouped fast path's executions (both executors) and its checked (memo-miss) calls."""
    from fp4kit import _grouped_device, _torch_exec

    n = {"run": 0, "checked": 0, "raw": 0}

    def counting(key, real):
        def call(*a, **k):
            n[key] += 1
            return real(*a, **k)
        return call

    monkeypatch.setattr(_torch_exec, "run", counting("run", _torch_exec.run))
    monkeypatch.setattr(_torch_exec, "run_cupy", counting("run", _torch_exec.run_cupy))
    monkeypatch.setattr(_torch_exec, "raw_launch", counting("raw", _torch_exec.raw_launch))
    monkeypatch.setattr(_grouped_device, "_group_quantize_checked",
                        counting("checked", _grouped_device._group_quantize_checked))
    return n


def _host(a):
    from fp4kit.comparator import to_numpy
    return np.ascontiguousarray(to_numpy(a))


def _u8(a):
    return _host(a).reshape(-1).view(np.uint8)


def _lib_of(a):
    return type(a).__module__.split(".")[0]


def _to_dev(lib, a):
    """A host array on the GPU in `lib` (bfloat16 through its int16 bits for torch)."""
    if lib == "torch":
        import torch
        if a.dtype == ml_dtypes.bfloat16:
            return torch.from_numpy(a.view(np.int16)).cuda().view(torch.bfloat16)
        return torch.from_numpy(a).cuda()
    import cupy
    return cupy.asarray(a)


# (format, options, dims kind); kinds: "dev" device first_dims (varying_first), "host" a host list,
# "num" num_groups (same), "last_int" an int first_dims with device last_dims (varying_last),
# "both" device first and last dims (varying_both)
CASES = [
    ("mxfp8_e4m3", dict(axis="both", scale_layout="swizzled"), "dev"),
    ("mxfp4_e2m1", dict(axis="both"), "dev"),
    ("nvfp4", dict(axis="both", scale_layout="swizzled"), "dev"),
    ("nvfp4", dict(axis="both", amax=True), "dev"),
    ("mxfp6_e3m2", dict(axis="rowwise"), "host"),
    ("nvfp4", dict(rounding="stochastic", seed=12345), "host"),
    ("mxfp8_e5m2", dict(axis="columnwise", scale_layout="swizzled"), "num"),
    ("mxfp8_e4m3", dict(axis="both"), "last_int"),
    ("nvfp4", dict(axis="both", row_scaled=True), "both"),
    ("mxfp8_e4m3", dict(axis="both", dbias=True), "host"),
]


def _case(lib, fmt, kw, kind, seed=0):
    """(x host, call kwargs with device arrays, reference kwargs)."""
    rng = np.random.default_rng(seed)
    dt = ml_dtypes.bfloat16 if lib == "torch" else np.float16
    first = [64, 0, 130, 2, 256, 0] if kind != "num" else None
    K = 96
    call, ref = {}, {}
    if kind in ("dev", "host", "num"):
        M = sum(first) if first else 4 * 64
        x = (rng.standard_normal((M, K)) * 3).astype(np.float32).astype(dt)
        if kind == "dev":
            call["first_dims"] = _to_dev(lib, np.array(first, np.int64))
            ref["first_dims"] = first
        elif kind == "host":
            call["first_dims"] = ref["first_dims"] = first
        else:
            call["num_groups"] = ref["num_groups"] = 4
    else:
        last = [64, 0, 32, 96, 2, 16]
        firsts = [16] * len(last) if kind == "last_int" else [16, 32, 0, 48, 16, 64]
        x = (rng.standard_normal(sum(m * k for m, k in zip(firsts, last))) * 3).astype(np.float32).astype(dt)
        call["first_dims"] = 16 if kind == "last_int" else _to_dev(lib, np.array(firsts, np.int64))
        call["last_dims"] = _to_dev(lib, np.array(last, np.int64))
        ref["first_dims"] = 16 if kind == "last_int" else firsts
        ref["last_dims"] = last
    kw = dict(kw)
    if kw.pop("amax", False):
        G = len(first)
        a = np.abs(rng.standard_normal(G)).astype(np.float32) * 4
        a[1] = -0.0                                    # stored as +0 (SPEC: an amax is max |x|)
        call["amax"] = _to_dev(lib, a)
        ref["amax"] = np.abs(a)
    call.update(kw)
    ref.update(kw)
    return x, call, ref


def _same(fast, gen, what, dbias_tol=None):
    """Two grouped results: the same bytes in every buffer and the device metadata, the same kinds."""
    for name in _BUFFERS:
        a, b = getattr(fast, name), getattr(gen, name)
        assert (a is None) == (b is None), (what, name)
        if b is not None:
            assert tuple(a.shape) == tuple(b.shape), (what, name)
            assert_bytes_equal(_u8(a), _u8(b), f"{what}: {name}")
    for key in ("meta", "error_flag"):
        assert_bytes_equal(_u8(fast.extra[key]), _u8(gen.extra[key]), f"{what}: extra[{key!r}]")
    assert fast.kind == gen.kind and fast.format == gen.format and fast.options == gen.options, what
    assert len(fast) == len(gen) and fast.offsets == gen.offsets, what
    assert fast.scale_offsets_rowwise == gen.scale_offsets_rowwise, what
    assert fast.scale_offsets_columnwise == gen.scale_offsets_columnwise, what
    assert fast.host_dims() == gen.host_dims(), what
    if gen.dbias is not None:
        a, b = _host(fast.dbias), _host(gen.dbias)
        assert a.dtype == b.dtype == np.float32 and a.shape == b.shape, what
        assert np.all(np.abs(a.astype(np.float64) - b) <= dbias_tol), what   # float64 atomics: any order


@pytest.mark.parametrize("lib", ["torch", "cupy"])
@pytest.mark.parametrize("fmt,kw,kind", CASES, ids=[f"{c[0]}-{c[2]}-{i}" for i, c in enumerate(CASES)])
def test_fast_path_matches_general_path_and_reference(cp, counts, lib, fmt, kw, kind):
    if lib == "torch":
        pytest.importorskip("torch")
    x, call, ref = _case(lib, fmt, kw, kind)
    xd = _to_dev(lib, x)
    xin = x if "last_dims" in call or "first_dims" not in ref else x[:sum(ref["first_dims"])]
    exp = fp4kit.reference.group_quantize(xin, fmt, **ref)
    with general_path("_torch_fast_device", "_cupy_fast_device"):
        gen = fp4kit.group_quantize(xd, fmt, **call)
    assert counts == {"run": 0, "checked": 1, "raw": 0}
    tol = None
    if call.get("dbias"):
        tol = 1e-6 * np.abs(_host(gen.dbias)).astype(np.float64) + 1e-30
    seeds = [call.get("seed", 0)] * 2 + ([call["seed"] + 1] if "seed" in call else [])
    checked = 2
    for trial, seed in enumerate(seeds):
        if "seed" in call:
            call["seed"] = seed
        g = fp4kit.group_quantize(xd, fmt, **call)
        what = f"{lib} {fmt} {kind} call {trial}"
        # first call: the checks (a memo miss); later calls: memo hits; every call runs the plan fast
        assert counts["run"] == trial + 1 and counts["checked"] == checked, (what, counts)
        for name in _BUFFERS + ("dbias",):
            a = getattr(g, name)
            assert a is None or _lib_of(a) == lib, (what, name, type(a))
        if kind in ("dev", "both"):   # the metadata launch's copy of the caller's device dims, not the array itself
            assert g.first_dims is not call["first_dims"] and _lib_of(g.first_dims) == lib, what
            assert np.array_equal(_u8(g.first_dims), _u8(call["first_dims"])), what
        if trial == 2:                                             # another seed: other bytes
            assert not np.array_equal(_u8(g.rowwise_data), _u8(gen.rowwise_data)), what
            assert g.options.seed == seed
            continue
        _same(g, gen, what, tol)
        g.check()
        rep = fp4kit.compare(g, exp, x=xin if call.get("dbias") else None)   # x: SPEC's dbias bound
        assert rep.ok, f"{what}\n{rep}"
        for operand in ("rowwise", "columnwise"):
            if getattr(g, f"{operand}_data") is None:
                continue
            raw = counts["raw"]
            a = fp4kit.group_dequantize(g, operand=operand)       # its fast path: one raw launch
            assert counts["raw"] == raw + 1, what
            with pytest.MonkeyPatch.context() as mp:               # the general path
                mp.setattr(_grouped_device, "_group_dequantize_fast", lambda *args: None)
                b = fp4kit.group_dequantize(gen, operand=operand)
            assert counts["raw"] == raw + 1, what
            assert _lib_of(a.data) == lib and a.offsets == b.offsets and a.operand == b.operand, what
            assert_bytes_equal(_u8(a.data), _u8(b.data), f"{what}: group_dequantize {operand}")


def test_fast_path_bad_device_dims_flagged(cp):
    """A memo hit with device dims that became invalid: nothing written, check() raises."""
    torch = pytest.importorskip("torch")
    x = torch.randn(256, 64, device="cuda").to(torch.bfloat16)
    dims = torch.tensor([64, 64, 128], dtype=torch.int64, device="cuda")
    fp4kit.group_quantize(x, "mxfp8_e4m3", first_dims=dims, axis="both").check()
    dims.copy_(torch.tensor([64, -1, 128]))
    g = fp4kit.group_quantize(x, "mxfp8_e4m3", first_dims=dims, axis="both")
    with pytest.raises(ValueError, match="negative"):
        g.check()
    assert type(g.extra["error_flag"]) is torch.Tensor
    for buf in (g.rowwise_data, g.columnwise_data, g.rowwise_scales, g.columnwise_scales):
        assert bool((buf.view(torch.uint8) == 0xA5).all())     # poisoned, never written


def test_fast_path_not_taken(cp, counts):
    """Inputs the fast path leaves to the general path: dims of another library, non-contiguous
    device dims, a host amax, numpy-integer dims; and a hashable-but-invalid call raises each time
    (host dims of an entry's length checked on the hit, others by the checks)."""
    torch = pytest.importorskip("torch")
    x = torch.randn(192, 64, device="cuda").to(torch.bfloat16)
    first = [64, 0, 128]
    ref = fp4kit.group_quantize(x, "nvfp4", first_dims=first, axis="both")
    dev_ref = fp4kit.group_quantize(x, "nvfp4", first_dims=torch.tensor(first, device="cuda"), axis="both")
    n = counts["run"]
    for kw, want in ((dict(first_dims=cp.asarray(np.array(first, np.int64))), dev_ref),
                     (dict(first_dims=torch.tensor([64, 9, 0, 9, 128, 9], device="cuda")[::2]), dev_ref),
                     (dict(first_dims=first, amax=np.array([1.0, 2.0, 3.0], np.float32)), None),
                     (dict(first_dims=[np.int64(v) for v in first]), ref)):
        g = fp4kit.group_quantize(x, "nvfp4", axis="both", **kw)
        assert counts["run"] == n, kw
        if want is not None:
            _same(g, want, str(kw))
    for k in range(2):          # bad host dims on a memo hit: the same error every time, nothing run
        with pytest.raises(ValueError, match=r"first_dims: sum\(first_dims\)=191"):
            fp4kit.group_quantize(x, "nvfp4", first_dims=[64, 0, 127], axis="both")
        assert counts["run"] == n
    checked = counts["checked"]
    for k in range(2):          # without an entry: the checks every time, never memoised
        with pytest.raises(ValueError, match="first_dims"):
            fp4kit.group_quantize(x, "nvfp4", first_dims=[64, 0, 127, 1], axis="both")
        assert counts["checked"] == checked + k + 1 and counts["run"] == n


def test_fast_path_torch_graph_capture_then_change_dims(cp):
    """torch.cuda.graph capture of a grouped quantize on the fast path (a memo hit inside the
    capture), dims changed on the device, replayed: the right bytes every time."""
    torch = pytest.importorskip("torch")
    K = 64
    x = (np.random.default_rng(3).standard_normal((512, K)) * 2).astype(np.float32).astype(ml_dtypes.bfloat16)
    xd = _to_dev("torch", x)
    dims = torch.tensor([100, 0, 200, 12], dtype=torch.int64, device="cuda")
    for fmt in ("mxfp8_e4m3", "nvfp4"):
        fp4kit.group_quantize(xd, fmt, first_dims=dims, axis="both")     # warm-up: compile, memo
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            g = fp4kit.group_quantize(xd, fmt, first_dims=dims, axis="both")
        for new in ([100, 0, 200, 12], [0, 300, 2, 210], [512, 0, 0, 0]):      # even: FP4 packs M
            dims.copy_(torch.tensor(new))
            graph.replay()
            torch.cuda.synchronize()
            exp = fp4kit.reference.group_quantize(x[:sum(new)], fmt, first_dims=new, axis="both")
            for i in range(len(new)):
                rep = fp4kit.compare(g[i], exp[i])
                assert rep.ok, f"{fmt} {new} member {i}\n{rep}"


def _fresh_input(lib, seed, shape):
    """No memoised plans; (rng, the element dtype, a random host input, the same on the GPU in
    `lib`: bfloat16 for PyTorch, float16 for CuPy)."""
    if lib == "torch":
        pytest.importorskip("torch")
    _plan.clear_plans()
    rng = np.random.default_rng(seed)
    dt = ml_dtypes.bfloat16 if lib == "torch" else np.float16
    x = (rng.standard_normal(shape) * 3).astype(np.float32).astype(dt)
    return rng, dt, x, _to_dev(lib, x)


def _both_lib(lib, fmt, kw, x, call, what):
    """The fast path's result (a memo hit or miss) against the general path's, byte for byte."""
    g = fp4kit.group_quantize(x, fmt, **call, **kw)
    with general_path("_torch_fast_device", "_cupy_fast_device"):
        gen = fp4kit.group_quantize(x, fmt, **call, **kw)
    _same(g, gen, what)
    return g


@pytest.mark.parametrize("lib", ["torch", "cupy"])
@pytest.mark.parametrize("fmt,kw", [("mxfp8_e4m3", dict(axis="both", scale_layout="swizzled")),
                                    ("mxfp4_e2m1", dict(axis="both")),
                                    ("nvfp4", dict(axis="both", scale_layout="swizzled")),
                                    ("nvfp4", dict(axis="both", row_scaled=True)),
                                    ("mxfp6_e2m3", dict(axis="columnwise"))])
def test_fast_path_host_dims_new_every_call(cp, counts, lib, fmt, kw):
    """Host dims lists that change every call: one memo entry per lists' length serves them all
    (the values as group_meta_dims' parameters, results trimmed to the call's sizes): every call
    after the first is a memo hit, byte-identical to the general path and equal to the reference,
    for varying_first and for 1-D inputs whose kind moves between varying_last and varying_both."""
    K = 96
    rng, dt, x, xd = _fresh_input(lib, 7, (512, K))
    runs = counts["run"]
    for trial, first in enumerate(([128, 0, 250, 134], [0, 0, 512, 0], [2, 300, 80, 130], [128, 0, 250, 134])):
        what = f"{lib} {fmt} varying_first {first}"
        g = _both_lib(lib, fmt, kw, xd, dict(first_dims=first), what)
        assert counts["run"] == runs + trial + 1 and counts["checked"] == trial + 2, (what, counts)
        rep = fp4kit.compare(g, fp4kit.reference.group_quantize(x, fmt, first_dims=first, **kw))
        assert rep.ok, f"{what}\n{rep}"
    flat = (rng.standard_normal(6144) * 3).astype(np.float32).astype(dt)
    fd = _to_dev(lib, flat)
    checked = counts["checked"]
    for trial, (first, last) in enumerate((([16, 16, 16], [128, 0, 256]), ([32, 0, 64], [96, 64, 48]),
                                           ([16, 32, 16], [64, 96, 128]), ([64, 64, 64], [32, 32, 32]))):
        what = f"{lib} {fmt} 1-D {first} {last}"
        g = _both_lib(lib, fmt, kw, fd, dict(first_dims=first, last_dims=last), what)
        assert counts["checked"] == checked + trial + 2, (what, counts)     # one miss, then hits (+ general)
        n = sum(m * k for m, k in zip(first, last))
        exp = fp4kit.reference.group_quantize(flat[:n], fmt, first_dims=first, last_dims=last, **kw)
        assert g.kind == exp.kind, what
        rep = fp4kit.compare(g, exp)
        assert rep.ok, f"{what}\n{rep}"
        for i in range(len(first)):
            if g[i].rowwise is not None and first[i] * last[i]:
                assert tuple(g[i].rowwise.scales.shape) == tuple(exp[i].rowwise.scales.shape), what
        operand = "rowwise" if g.rowwise_data is not None else "columnwise"
        back = fp4kit.group_dequantize(g, operand=operand)              # its fast path on the trimmed arrays
        want = fp4kit.reference.group_dequantize(exp, operand=operand)
        assert_bytes_equal(_u8(back.data), _u8(want.data), f"{what}: group_dequantize")


def _store_launches(kind: str, G: int) -> int:
    """group_dims_store launches of the fast path's plan for host dims of `kind` and G members (the
    memo entry's plan; for 1-D inputs the plan of the latest call's rounded sizes)."""
    plans = [e[1] for e in _plan.GROUP_FAST_CALLS.values()
             if e[3] == kind and e[4] == G and e[7] is not None and e[7][0] == "bound"]
    plans += [info[4] for info in _plan.GROUP_HOST_LAYOUTS.values() if info[4] is not None and info[0] == kind
              and len(info[1][0]) == G]
    assert plans, (kind, G)
    return sum(st.kernel == "group_dims_store" for st in plans[-1].launches())


def test_fast_path_host_dims_many_members_and_the_bounds(cp, counts):
    """Many host-dims members: with one K (varying_first) the G first dims are the parameters, so
    257 and 480 members take group_meta_dims alone and 481 one group_dims_store launch per 480
    values before the metadata launch; 1-D inputs send first and last dims (241 members: 482
    values, two store launches). Each with a repeat of other values, byte-identical to the general
    path and equal to the reference. And 1-D host dims whose rows exceed the bounds of device dims
    (row-scaled NVFP4 with a long member of no columns): buffers of the call's rounded sizes."""
    pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    K = 64
    for G, stores in ((257, 0), (480, 0), (481, 2)):
        for trial in range(2):
            first = [int(v) for v in rng.integers(0, 9, G) * 2]
            x = (rng.standard_normal((sum(first), K)) * 2).astype(np.float32).astype(ml_dtypes.bfloat16)
            xd = _to_dev("torch", x)
            g = _both_lib("torch", "mxfp4_e2m1", dict(axis="both", scale_layout="swizzled"), xd,
                          dict(first_dims=first), f"G={G} trial {trial}")
            rep = fp4kit.compare(g, fp4kit.reference.group_quantize(x, "mxfp4_e2m1", first_dims=first, axis="both",
                                                                    scale_layout="swizzled"))
            assert rep.ok, str(rep)
            assert g.last_dims == (K,) * G
        assert _store_launches("varying_first", G) == stores, G
    for trial in range(2):
        first = [int(v) for v in rng.integers(1, 5, 241) * 2]
        last = [int(v) for v in rng.integers(1, 9, 241) * 8]
        n = sum(m * k for m, k in zip(first, last))
        flat = (rng.standard_normal(n) * 2).astype(np.float32).astype(ml_dtypes.bfloat16)
        g = _both_lib("torch", "nvfp4", dict(axis="both"), _to_dev("torch", flat),
                      dict(first_dims=first, last_dims=last), f"1-D G=241 trial {trial}")
        rep = fp4kit.compare(g, fp4kit.reference.group_quantize(flat, "nvfp4", first_dims=first, last_dims=last,
                                                                axis="both"))
        assert rep.ok, str(rep)
        assert _store_launches(g.kind, 241) == 2
    first, last = [2048, 16], [0, 32]
    flat = (rng.standard_normal(512) * 2).astype(np.float32).astype(ml_dtypes.bfloat16)
    runs = counts["run"]
    g = _both_lib("torch", "nvfp4", dict(row_scaled=True), _to_dev("torch", flat),
                  dict(first_dims=first, last_dims=last), "rows past the device bounds")
    assert counts["run"] == runs + 1 and g.rowwise_amax.shape[0] == 2064      # the fast path, rounded sizes
    rep = fp4kit.compare(g, fp4kit.reference.group_quantize(flat, "nvfp4", first_dims=first, last_dims=last,
                                                            row_scaled=True))
    assert rep.ok, str(rep)


def test_fast_path_torch_graph_capture_with_host_dims(cp):
    """A grouped quantize with host dims captured in a CUDA graph: the dims are kernel parameters,
    so a replay writes the captured dims' bytes, also after calls with other dims."""
    torch = pytest.importorskip("torch")
    K = 64
    x = (np.random.default_rng(5).standard_normal((512, K)) * 2).astype(np.float32).astype(ml_dtypes.bfloat16)
    xd = _to_dev("torch", x)
    first = [100, 0, 200, 212]
    for fmt in ("mxfp8_e4m3", "nvfp4"):
        fp4kit.group_quantize(xd, fmt, first_dims=[512, 0, 0, 0], axis="both")      # warm-up: the entry
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            g = fp4kit.group_quantize(xd, fmt, first_dims=first, axis="both")
        exp = fp4kit.reference.group_quantize(x, fmt, first_dims=first, axis="both")
        for other in ([0, 0, 0, 512], [256, 256, 0, 0]):
            fp4kit.group_quantize(xd, fmt, first_dims=other, axis="both")
            for name in _BUFFERS:
                a = getattr(g, name)
                if a is not None:
                    a.view(torch.uint8).fill_(0xA5)
            graph.replay()
            torch.cuda.synchronize()
            assert g.first_dims == tuple(first)
            rep = fp4kit.compare(g, exp)
            assert rep.ok, f"{fmt} after {other}\n{rep}"


@pytest.mark.parametrize("lib", ["torch", "cupy"])
def test_fast_path_host_dims_with_supplied_amax(cp, counts, lib):
    """NVFP4 with the caller's device amaxes and host dims that change every call: one amax per
    member (G,), and one per row with row_scaled (its length the call's row count: a 1-D input
    whose row count changes gets the general path's error). Memo hits, byte-identical to the
    general path, equal to the reference."""
    K = 64
    rng, dt, x, xd = _fresh_input(lib, 9, (256, K))
    for row_scaled in (False, True):
        runs = counts["run"]
        for trial, first in enumerate(([64, 0, 192], [2, 126, 128], [256, 0, 0])):
            n = 256 if row_scaled else 3
            a = (np.abs(rng.standard_normal(n)) * 4).astype(np.float32)
            kw = dict(axis="both" if not row_scaled else "rowwise", row_scaled=row_scaled)
            what = f"{lib} row_scaled={row_scaled} {first}"
            g = _both_lib(lib, "nvfp4", kw, xd, dict(first_dims=first, amax=_to_dev(lib, a)), what)
            assert counts["run"] == runs + trial + 1, (what, counts)
            rep = fp4kit.compare(g, fp4kit.reference.group_quantize(x, "nvfp4", first_dims=first, amax=a, **kw))
            assert rep.ok, f"{what}\n{rep}"
    flat = (rng.standard_normal(2048) * 3).astype(np.float32).astype(dt)
    fd = _to_dev(lib, flat)
    a = _to_dev(lib, np.ones(48, np.float32))
    fp4kit.group_quantize(fd, "nvfp4", first_dims=[16, 32], last_dims=[64, 32], amax=a, row_scaled=True)
    with pytest.raises(ValueError, match="amax"):       # 64 rows now: the amax of 48 does not fit
        fp4kit.group_quantize(fd, "nvfp4", first_dims=[32, 32], last_dims=[32, 32], amax=a, row_scaled=True)


@pytest.mark.parametrize("lib", ["torch", "cupy"])
def test_strided_view_takes_the_fast_path(cp, counts, lib):
    """A strided PyTorch / CuPy view (x.t(), x.T) is copied contiguous by its library and takes
    the grouped fast path, with host and with device dims; the bytes equal the general path's and
    the caller's view is left as it was."""
    base = _to_dev(lib, (np.random.default_rng(5).standard_normal((64, 192)) * 3).astype(np.float32))
    xs = base.t() if lib == "torch" else base.T             # (192, 64), not contiguous
    dev_dims = _to_dev(lib, np.array([64, 0, 128], np.int64))
    strides = xs.stride() if lib == "torch" else xs.strides
    contents = np.ascontiguousarray(_host(xs)).copy()
    for dims in ([64, 0, 128], dev_dims):
        with general_path("_torch_fast_device", "_cupy_fast_device"):
            gen = fp4kit.group_quantize(xs, "nvfp4", first_dims=dims, axis="both")
        n = counts["run"]
        g = fp4kit.group_quantize(xs, "nvfp4", first_dims=dims, axis="both")
        assert counts["run"] == n + 1
        _same(g, gen, f"{lib} {type(dims).__name__}")
    assert (xs.stride() if lib == "torch" else xs.strides) == strides       # the caller's view is left as it was
    assert np.array_equal(np.ascontiguousarray(_host(xs)), contents)

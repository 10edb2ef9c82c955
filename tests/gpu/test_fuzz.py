"""Randomised kernel-vs-reference properties that reach every planner path.

Drawn: shapes around the multiples of 16, 64 and 128 that the planners branch on; three planner
modes (the shipped size bounds; SIZE_RULES off; "low", LOW_BOUNDS too), so small shapes also take
the large tensors' kernels; inputs contiguous, one element into their buffer (no 16-byte loads),
transposed, row-stepped or N-D, from CuPy, PyTorch or JAX, on the default or a side stream, with
special values (NaN payloads and signs included); every recipe option, NVFP4 amaxes computed or
supplied on the device; grouped tensors of all four kinds with host or device dims, and dims that
change between calls of one plan and between replays of one captured graph; qmatmul of any operand
pair; swizzle / unswizzle of any matrix. Checked: each result and its dequantize against the
reference (bytes, or qmatmul within a float32 rounding); a refusal of the reference must be a
refusal with the same exception type naming the same argument; odd arguments on the device paths
give a result or a named TypeError / ValueError (SPEC section 8).

The example budget is FP4KIT_FUZZ_EXAMPLES (default 40 per test and format; derandomised, so a run
is repeatable and a failure prints its case). scripts/sanitize.sh runs these tests under memcheck and
initcheck; tests/test_fuzz_harness.py runs their strategies and checks on the CPU."""
from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest

import fp4kit
from fp4kit import _plan
from gpu_helpers import assert_xla_usable

pytestmark = pytest.mark.gpu

pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

N_EXAMPLES = int(os.environ.get("FP4KIT_FUZZ_EXAMPLES", "40"))
FORMATS = list(fp4kit.FORMATS)
SETTINGS = settings(max_examples=N_EXAMPLES, deadline=None, derandomize=True,
                    suppress_health_check=list(HealthCheck), print_blob=True)
DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -3e-39, 6.0, 448.0, 1e30, 57344.0, 65504.0,
           *np.array([0xFFC00000, 0x7F800001, 0xFFBFFFFF, 0x7FC0DEAD], np.uint32).view(np.float32)]  # -NaN, NaN payloads


@pytest.fixture
def cp(gpu):
    """CuPy, with output poisoning on (conftest's gpu fixture)."""
    return gpu


# The planners' other size bounds, lowered in the "low" mode so that small shapes take what large
# ones take: NVFP4 multiplier tables from one launch, staged compact NVFP4 "both" and MXFP4
# columnwise scales, and no one-launch small NVFP4 quantize (values keep each rule's "not
# applicable" zero meaning: K >= 1, M >= 1)
LOW_BOUNDS = {"ENC_TABS_MIN_TILES": 1, "STAGED_NVFP4_MIN_K": 1, "STAGED_MXFP4_COL_MIN_M": 1,
              "STAGED_MXFP4_COL_MIN_ELEMENTS": 0, "SMALL_FUSED_MAX": 0}


@pytest.fixture
def size_rules():
    """Set the planners' size bounds for one example (hypothesis runs the examples of one test call
    inside one fixture scope): True, the shipped bounds; False, fp4kit._plan.SIZE_RULES off (the
    squares and staged scales at every size); "low", that and LOW_BOUNDS. Restores them and clears
    the memoised plans afterwards."""
    saved = {k: getattr(_plan, k) for k in ["SIZE_RULES", *LOW_BOUNDS]}
    state = [True]

    def set_rules(mode):
        if mode == state[0]:
            return
        for k, v in saved.items():
            setattr(_plan, k, v)
        _plan.SIZE_RULES = mode is True
        if mode == "low":
            for k, v in LOW_BOUNDS.items():
                setattr(_plan, k, v)
        state[0] = mode
        _plan.clear_plans()
    yield set_rules
    for k, v in saved.items():
        setattr(_plan, k, v)
    _plan.clear_plans()


def _side(draw, even: bool) -> int:
    """A length near a multiple of 128 (0-4 of them) or of 16, or any small one."""
    kind = draw(st.sampled_from(["m128", "m128", "near128", "m16", "any"]))
    if kind == "m128":
        n = 128 * draw(st.integers(0, 4))
    elif kind == "near128":
        n = 128 * draw(st.integers(1, 3)) + draw(st.sampled_from([-32, -16, -2, 2, 16, 32, 64]))
    elif kind == "m16":
        n = 16 * draw(st.integers(0, 24))
    else:
        n = draw(st.integers(0, 200))
    return n - n % 2 if even else n


def _values(rng, n: int, specials: list) -> np.ndarray:
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-12, 12, n))).astype(np.float32)
    if n and specials:
        x[rng.integers(0, n, len(specials))] = np.array(specials, np.float32)
    return x


_JAX: list = []


def _jax_gpu():
    """jax when it is importable and sees a GPU, else None (the "jax" cases then use CuPy)."""
    if not _JAX:
        try:
            import jax
            _JAX.append(jax if jax.devices("gpu") else None)
        except Exception:       # not installed, or no GPU backend
            _JAX.append(None)
    return _JAX[0]


def _lib(lib: str, a_dtype) -> str:
    """The library that carries an input: bfloat16 never through CuPy; jax only where it has a GPU."""
    if lib == "jax" and _jax_gpu() is None:
        lib = "cupy"
    if lib == "cupy" and np.dtype(a_dtype) == np.dtype(ml_dtypes.bfloat16):
        lib = "torch"
    return lib


def _to_device(cp, a: np.ndarray, lib: str, view: str):
    """a on the device through `lib` ("cupy", "torch" or "jax"; see _lib), as a contiguous array,
    a view one element into a larger buffer, the transpose of a contiguous (K, M) array or every
    other row of a taller one (strided views; JAX arrays are not views, the same values)."""
    import torch
    bf16 = a.dtype == np.dtype(ml_dtypes.bfloat16)
    lib = _lib(lib, a.dtype)
    if lib == "jax":
        return _jax_gpu().device_put(np.ascontiguousarray(a), _jax_gpu().devices("gpu")[0])

    def put(h):
        if lib == "cupy":
            return cp.asarray(h)
        if bf16:
            return torch.from_numpy(np.ascontiguousarray(h).view(np.int16)).cuda().view(torch.bfloat16)
        return torch.from_numpy(np.ascontiguousarray(h)).cuda()
    return _view(a, view, put)


def _view(a: np.ndarray, view: str, put):
    """The values of `a` as `view` of the buffer that `put` makes from a host array."""
    if view == "offset":
        flat = np.concatenate([np.zeros(1, a.dtype), a.reshape(-1)])
        return put(flat)[1:].reshape(a.shape)
    if view == "transposed" and a.ndim == 2:
        return put(np.ascontiguousarray(a.T)).T
    if view == "stepped" and a.ndim == 2:          # every other row of a buffer twice as tall
        tall = np.zeros((2 * a.shape[0], a.shape[1]), a.dtype)
        tall[::2] = a
        return put(tall)[::2]
    return put(a)


class _Stream:
    """The call's current stream: the library's default, or a new non-blocking stream of the input's
    library (entered around the fp4kit calls, synchronised on exit), so that every launch and
    allocation must follow the caller's stream."""

    def __init__(self, cp, lib: str, side: bool):
        self.cp, self.lib, self.side, self.ctx, self.stream = cp, lib, side, None, None

    def __enter__(self):
        if self.lib == "jax":
            self.side = False               # JAX has no current-stream context to enter
        if self.side:
            self.cp.cuda.Device().synchronize()        # inputs written on the default stream
            if self.lib == "torch":
                import torch
                self.stream = torch.cuda.Stream()
                self.ctx = torch.cuda.stream(self.stream)
            else:
                self.stream = self.cp.cuda.Stream(non_blocking=True)
                self.ctx = self.stream
            self.ctx.__enter__()
        return self

    def __exit__(self, *exc):
        if self.side:
            self.ctx.__exit__(*exc)
            self.stream.synchronize()
        return False


def _host(a):
    """A device array (CuPy, PyTorch, JAX) of codes / values back on the host as NumPy."""
    if isinstance(a, np.ndarray):
        return a
    if type(a).__module__.startswith("cupy"):
        return a.get()
    import torch
    if isinstance(a, torch.Tensor):
        if a.dtype == torch.bfloat16:
            return a.contiguous().view(torch.int16).cpu().numpy().view(ml_dtypes.bfloat16)
        return a.cpu().numpy()
    return np.asarray(a)


def _xla_usable(result):
    """Every JAX array of a result (operands' data, scales and amaxes, a group's arrays, the
    extras) through a jitted XLA computation, which refuses buffers off 16-byte addresses that
    np.asarray reads happily (a result whose arrays are views into a shared buffer)."""
    arrays = []
    for op in ("rowwise", "columnwise"):
        o = getattr(result, op, None)
        if o is not None:
            arrays += [o.data, o.scales, o.amax]
        arrays += [getattr(result, f"{op}_{f}", None) for f in ("data", "scales", "amax")]
    arrays += [getattr(result, "dbias", None)] + list(getattr(result, "extra", {}).values())
    for i, a in enumerate(arrays):
        if hasattr(a, "unsafe_buffer_pointer"):
            assert_xla_usable(a, f"result array {i}")


def _refuses(fn):
    """The exception `fn` raises (TypeError / ValueError), or None."""
    try:
        return None, fn()
    except (TypeError, ValueError) as e:
        return e, None


def _same_refusal(ref_err, gpu_call):
    """The GPU call raises what the reference raised: the same type, naming the same argument (the
    text before the first colon; the rest may describe a device array differently)."""
    with pytest.raises(type(ref_err)) as info:
        gpu_call()
    assert str(info.value).split(":")[0] == str(ref_err).split(":")[0], (str(info.value), str(ref_err))


def _options(draw, f, amaxes: list, rht_masks: bool = False,
             variants=("plain", "plain", "tile_2d", "row_scaled", "rht")):
    """quantize's options for format `f` (axis, layout, MX rule or one NVFP4 recipe of `variants`,
    stochastic rounding for FP4 one time in four) and how to supply an NVFP4 amax (one of `amaxes`)."""
    kw = dict(axis=draw(st.sampled_from(["rowwise", "columnwise", "both", "both"])),
              scale_layout=draw(st.sampled_from(["compact", "swizzled"])))
    amax = None
    if f.is_mx:
        kw["scale_rule"] = draw(st.sampled_from(["rceil", "floor"]))
    else:
        v = draw(st.sampled_from(list(variants)))
        if v != "plain":
            kw[v] = True
        if v == "rht" and rht_masks and draw(st.booleans()):
            kw["rht_sign_mask"] = draw(st.sampled_from([0, 0xFFFF, 0x0001, 0xD7E8, 0x1234]))
        amax = draw(st.sampled_from(amaxes))
    if f.packed and draw(st.integers(0, 3)) == 0:
        kw["rounding"] = "stochastic"
        kw["seed"] = draw(st.integers(0, 2**64 - 1))
    return kw, amax


@st.composite
def _single_case(draw, fmt):
    f = fp4kit.FORMATS[fmt]
    M, K = _side(draw, f.packed), _side(draw, f.packed)
    dtype = draw(st.sampled_from(list(DTYPES)))
    kw, amax = _options(draw, f, [None, None, "true", "third", "zero", "tiny", "huge", "inf"], rht_masks=True)
    return dict(fmt=fmt, M=M, K=K, dtype=dtype, kw=kw, amax=amax,
                lib=draw(st.sampled_from(["cupy", "torch", "jax"])),
                view=draw(st.sampled_from(["contiguous", "contiguous", "offset", "transposed", "stepped", "nd"])),
                size_rules=draw(st.sampled_from([True, False, "low"])), seed=draw(st.integers(0, 2**32 - 1)),
                side_stream=draw(st.booleans()),
                specials=draw(st.lists(st.sampled_from(SPECIAL), max_size=6)),
                out=draw(st.sampled_from(["float32", "bfloat16", "float16"])))


def _amax_array(kind, members: list, rows: bool) -> np.ndarray:
    """A supplied NVFP4 amax for 2-D `members` (one tensor, or a group's): one per member, or one
    per row of each (row_scaled), NaN ignored; `kind` scales the true values."""
    a = [np.nan_to_num(np.abs(m.astype(np.float32)), nan=0.0) for m in members]
    true = np.concatenate([m.max(axis=1, initial=0.0) for m in a]) if rows and a else \
        np.array([m.max(initial=0.0) for m in a], np.float32)
    return {"true": true, "third": true / 3, "zero": np.zeros_like(true), "tiny": np.full_like(true, 1e-38),
            "huge": np.full_like(true, 3e38), "inf": np.full_like(true, np.inf)}[kind].astype(np.float32)


@pytest.mark.parametrize("fmt", FORMATS)
@SETTINGS
@given(data=st.data())
def test_fuzz_quantize_and_dequantize_equal_reference(cp, size_rules, fmt, data):
    case = data.draw(_single_case(fmt), label="case")
    size_rules(case["size_rules"])
    M, K = case["M"], case["K"]
    rng = np.random.default_rng(case["seed"])
    with np.errstate(over="ignore", invalid="ignore"):
        xn = _values(rng, M * K, case["specials"]).reshape(M, K).astype(DTYPES[case["dtype"]])
    kw = dict(case["kw"])
    ref_kw = dict(kw)
    if case["amax"] is not None and M * K:
        a = _amax_array(case["amax"], [xn], kw.get("row_scaled", False))
        ref_kw["amax"], kw["amax"] = a, cp.asarray(a)
    if case["view"] == "nd" and M % 2 == 0:          # (2, M/2, K): flattened to (M, K) by quantize
        xn = xn.reshape(2, M // 2, K)
    err, exp = _refuses(lambda: fp4kit.reference.quantize(xn, case["fmt"], **ref_kw))
    xd = _to_device(cp, xn, case["lib"], case["view"])
    if err is not None:
        _same_refusal(err, lambda: fp4kit.quantize(xd, case["fmt"], **kw))
        return
    operands = [op for op in ("rowwise", "columnwise") if getattr(exp, op) is not None]
    with _Stream(cp, _lib(case["lib"], xn.dtype), case["side_stream"]):
        got = fp4kit.quantize(xd, case["fmt"], **kw)
        backs = {op: fp4kit.dequantize(got, dtype=case["out"], operand=op) for op in operands}
    rep = fp4kit.compare(got, exp, x=xn)
    assert rep.ok, str(rep)
    _xla_usable(got)
    for operand in operands:
        want = fp4kit.reference.dequantize(exp, dtype=case["out"], operand=operand)
        back = _host(backs[operand])
        assert back.shape == want.shape and back.dtype == want.dtype, (back.shape, want.shape, back.dtype)
        w = want.dtype.itemsize
        view = {4: np.uint32, 2: np.uint16}[w]
        assert np.array_equal(back.view(view), want.view(view)), f"dequantize {operand} to {case['out']}"


@st.composite
def _group_case(draw, fmt):
    f = fp4kit.FORMATS[fmt]
    kind = draw(st.sampled_from(["same", "varying_first", "varying_first", "varying_last", "varying_both"]))
    G = draw(st.sampled_from([1, 2, 3, 5, 8, 9]))
    step = draw(st.sampled_from([1, 2, 16, 128])) if not f.packed else draw(st.sampled_from([2, 16, 128]))

    def dims(n, hi):
        ds = [step * draw(st.integers(0, hi // step)) for _ in range(n)]
        return ds
    if kind == "same":
        first, last = [draw(st.sampled_from([0, 2, 16, 64, 128, 130]))] * G, None
        K = _side(draw, f.packed) if draw(st.booleans()) else draw(st.sampled_from([64, 128, 256]))
        last = [K] * G
    elif kind == "varying_first":
        first = dims(G, 300)
        K = draw(st.sampled_from([0, 2, 32, 64, 96, 128, 130, 256, 384]))
        last = [K] * G
    elif kind == "varying_last":
        M = draw(st.sampled_from([0, 2, 16, 32, 64, 128, 130]))
        first, last = [M] * G, dims(G, 300)
    else:
        first, last = dims(G, 200), dims(G, 200)
    kw, amax = _options(draw, f, [None, None, "true", "third", "zero"])
    return dict(fmt=fmt, kind=kind, G=G, first=first, last=last, kw=kw, amax=amax,
                dtype=draw(st.sampled_from(list(DTYPES))), lib=draw(st.sampled_from(["cupy", "torch", "jax"])),
                device_dims=kind != "same" and draw(st.booleans()), spare=draw(st.sampled_from([0, 0, 64])),
                int_m=draw(st.booleans()), side_stream=draw(st.booleans()), member=draw(st.integers(0, 8)),
                size_rules=draw(st.sampled_from([True, False, "low"])), seed=draw(st.integers(0, 2**32 - 1)),
                specials=draw(st.lists(st.sampled_from(SPECIAL), max_size=4)),
                out=draw(st.sampled_from(["float32", "bfloat16"])))


@pytest.mark.parametrize("fmt", FORMATS)
@SETTINGS
@given(data=st.data())
def test_fuzz_group_quantize_and_dequantize_equal_reference(cp, size_rules, fmt, data):
    case = data.draw(_group_case(fmt), label="case")
    size_rules(case["size_rules"])
    first, last, kind = case["first"], case["last"], case["kind"]
    total = sum(m * k for m, k in zip(first, last))
    rng = np.random.default_rng(case["seed"])
    dt = DTYPES[case["dtype"]]
    if kind in ("same", "varying_first"):
        K = last[0]
        rows = sum(first)
        spare_rows = case["spare"] if kind == "varying_first" and case["device_dims"] else 0
        with np.errstate(over="ignore", invalid="ignore"):
            full = _values(rng, (rows + spare_rows) * K, case["specials"]).reshape(rows + spare_rows, K).astype(dt)
        xn = full[:rows]
    else:
        spare = case["spare"] if case["device_dims"] else 0
        with np.errstate(over="ignore", invalid="ignore"):
            full = _values(rng, total + spare, case["specials"]).astype(dt)
        xn = full[:total]
    kw = dict(case["kw"])
    ref_kw = dict(kw)
    if case["amax"] is not None:
        flat, offs = xn.reshape(-1), np.cumsum([0] + [m * k for m, k in zip(first, last)])
        members = [flat[offs[g]:offs[g + 1]].reshape(first[g], last[g]) for g in range(case["G"])]
        a = _amax_array(case["amax"], members, kw.get("row_scaled", False))
        ref_kw["amax"], kw["amax"] = a, cp.asarray(a)
    if kind == "same":
        ref_dims, dev_dims = dict(num_groups=case["G"]), dict(num_groups=case["G"])
    elif kind == "varying_first":
        ref_dims = dict(first_dims=first)
        dev_dims = dict(first_dims=cp.asarray(np.array(first, np.int64))) if case["device_dims"] else ref_dims
    else:
        ref_dims = dict(first_dims=first, last_dims=last)
        shared_m = kind == "varying_last" and case["int_m"]
        dev_dims = (dict(first_dims=first[0] if shared_m else cp.asarray(np.array(first, np.int64)),
                         last_dims=cp.asarray(np.array(last, np.int64)))
                    if case["device_dims"] else ref_dims)
    err, exp = _refuses(lambda: fp4kit.reference.group_quantize(xn, case["fmt"], **ref_dims, **ref_kw))
    xd = _to_device(cp, full, case["lib"], "contiguous")
    if case["device_dims"] and case["spare"]:
        kw["max_elements"] = full.size
    elif not case["device_dims"] and full.shape != xn.shape:
        xd = xd[:xn.shape[0]]
    if err is not None:
        if case["device_dims"]:
            # what the host can tell (dtype, options) raises as the reference does; what only the
            # members' sizes tell is flagged on the device and raised by check()
            try:
                got = fp4kit.group_quantize(xd, case["fmt"], **dev_dims, **kw)
            except (TypeError, ValueError) as e:
                assert type(e) is type(err), (repr(e), repr(err))
                return
            with pytest.raises(ValueError):
                got.check()
            return
        _same_refusal(err, lambda: fp4kit.group_quantize(xd, case["fmt"], **dev_dims, **kw))
        return
    operands = [op for op in ("rowwise", "columnwise") if getattr(exp[0], op) is not None]
    with _Stream(cp, _lib(case["lib"], dt), case["side_stream"]):
        got = fp4kit.group_quantize(xd, case["fmt"], **dev_dims, **kw)
        backs = {op: fp4kit.group_dequantize(got, dtype=case["out"], operand=op) for op in operands}
    if case["device_dims"] and kw.get("row_scaled") and kind in ("varying_last", "varying_both"):
        # one amax per row and per column: with device dims of a 1-D input the buffers are bounded
        # by the element bound, which rows without columns (and columns without rows) exceed
        N, Ms = full.size, first[0] if shared_m else None
        if sum(first) > (N if Ms is None else Ms * case["G"]) or sum(last) > (N // Ms if Ms else N):
            with pytest.raises(ValueError, match="row amaxes exceed the amax buffer bound"):
                got.check()
            return
    got.check()
    assert len(got) == case["G"]
    _xla_usable(got)
    if case["device_dims"]:
        for i in range(case["G"]):
            rep = fp4kit.compare(got[i], exp[i])
            assert rep.ok, f"member {i}: {rep}"
    else:
        rep = fp4kit.compare(got, exp)
        assert rep.ok, str(rep)
    view = {"float32": np.uint32, "bfloat16": np.uint16}[case["out"]]
    i = case["member"] % case["G"]                   # one member's views through dequantize
    for operand in operands:
        want = fp4kit.reference.dequantize(exp[i], dtype=case["out"], operand=operand)
        b = _host(fp4kit.dequantize(got[i], dtype=case["out"], operand=operand))
        assert b.shape == want.shape and np.array_equal(b.view(view), want.view(view)), f"dequantize member {i} {operand}"
    for operand in operands:
        want = fp4kit.reference.group_dequantize(exp, dtype=case["out"], operand=operand)
        back = backs[operand]
        for i in range(case["G"]):
            b, w = _host(back[i]), want[i]
            assert b.shape == w.shape, (operand, i, b.shape, w.shape)
            assert np.array_equal(b.view(view), w.view(view)), f"group_dequantize {operand} member {i}"


@st.composite
def _qmatmul_case(draw, family):
    fa = "nvfp4" if family == "nvfp4" else family
    fb = "nvfp4" if family == "nvfp4" else draw(st.sampled_from([f for f in FORMATS if f != "nvfp4"]))
    # K even for FP4 (the packed axis of a rowwise operand, M / N of a columnwise one)
    M, N, K = (2 * draw(st.integers(0, 80)) for _ in range(3))
    kw = {}
    if family == "nvfp4":
        kw = draw(st.sampled_from([{}, dict(rht=True), dict(row_scaled=True), dict(tile_2d=True)]))
    return dict(fa=fa, fb=fb, M=M, N=N, K=K, kw=kw,
                a_op=draw(st.sampled_from(["rowwise", "columnwise"])), b_op=draw(st.sampled_from(["rowwise", "columnwise"])),
                la=draw(st.sampled_from(["compact", "swizzled"])), lb=draw(st.sampled_from(["compact", "swizzled"])),
                seed=draw(st.integers(0, 2**32 - 1)), specials=draw(st.lists(st.sampled_from(SPECIAL[:7]), max_size=3)),
                side_stream=draw(st.booleans()))


@pytest.mark.parametrize("family", [f for f in FORMATS if f != "mxfp8_e5m2"])
@SETTINGS
@given(data=st.data())
def test_fuzz_qmatmul_equals_reference(cp, family, data):
    """qmatmul of two GPU-quantized operands (either operand of each, any MX pair, NVFP4 with its
    recipes) against the reference's: float64 accumulation in another order, so equal within a
    float32 rounding; refusals (K mismatch, RHT basis, ...) the reference's."""
    case = data.draw(_qmatmul_case(family), label="case")
    rng = np.random.default_rng(case["seed"])
    M, N, K = case["M"], case["N"], case["K"]
    # the a operand is (M, K) blocked along K: x (M, K) rowwise or x (K, M) columnwise
    sa = (M, K) if case["a_op"] == "rowwise" else (K, M)
    sb = (N, K) if case["b_op"] == "rowwise" else (K, N)
    kw = dict(case["kw"])
    rht = kw.pop("rht", False)
    xa = _values(rng, sa[0] * sa[1], case["specials"]).reshape(sa).astype(ml_dtypes.bfloat16 if rht else np.float32)
    xb = _values(rng, sb[0] * sb[1], []).reshape(sb).astype(ml_dtypes.bfloat16 if rht else np.float32)
    opts_a = dict(kw, axis="both", scale_layout=case["la"], rht=rht and case["a_op"] == "columnwise")
    opts_b = dict(kw, axis="both", scale_layout=case["lb"], rht=rht and case["b_op"] == "columnwise")
    err, ra = _refuses(lambda: fp4kit.reference.quantize(xa, case["fa"], **opts_a))
    err_b, rb = _refuses(lambda: fp4kit.reference.quantize(xb, case["fb"], **opts_b))
    if err is not None or err_b is not None:
        return          # quantize's refusals are the other tests' business
    with _Stream(cp, "torch" if rht else "cupy", case["side_stream"]):
        ga = fp4kit.quantize(_to_device(cp, xa, "cupy", "contiguous"), case["fa"], **opts_a)
        gb = fp4kit.quantize(_to_device(cp, xb, "cupy", "contiguous"), case["fb"], **opts_b)
    err, exp = _refuses(lambda: fp4kit.reference.qmatmul(ra, rb, a_operand=case["a_op"], b_operand=case["b_op"]))
    if err is not None:
        _same_refusal(err, lambda: fp4kit.qmatmul(ga, gb, a_operand=case["a_op"], b_operand=case["b_op"]))
        return
    with _Stream(cp, "torch" if rht else "cupy", case["side_stream"]):
        got = fp4kit.qmatmul(ga, gb, a_operand=case["a_op"], b_operand=case["b_op"])
    got = _host(got)
    assert got.dtype == np.float32 and got.shape == exp.shape == (M, N), (got.shape, exp.shape)
    fin = exp[np.isfinite(exp)]
    scale = float(np.abs(fin).max()) if fin.size else 0.0
    np.testing.assert_allclose(got, exp, rtol=2**-23, atol=1e-12 * scale)


@st.composite
def _dims_sequence_case(draw, fmt):
    """One grouped signature (format, options, G, K, rows of x) and several dims vectors for it."""
    f = fp4kit.FORMATS[fmt]
    G = draw(st.sampled_from([1, 2, 4, 7]))
    K = draw(st.sampled_from([32, 64, 128, 160, 256]))
    rows = draw(st.sampled_from([128, 256, 384, 520]))
    step = draw(st.sampled_from([2, 16, 128]) if f.packed else st.sampled_from([1, 16, 128]))
    seqs = []
    for _ in range(4):
        d = [step * draw(st.integers(0, rows // step)) for _ in range(G)]
        while sum(d) > rows:                     # keep within the buffer: shrink the largest
            i = int(np.argmax(d))
            d[i] -= step
        seqs.append(d)
    kw, _ = _options(draw, f, [None], variants=("plain", "tile_2d", "row_scaled"))
    return dict(G=G, K=K, rows=rows, seqs=seqs, kw=kw, how=draw(st.sampled_from(["host", "device", "graph"])),
                dtype=draw(st.sampled_from(list(DTYPES))),
                lib=draw(st.sampled_from(["cupy", "torch"])), size_rules=draw(st.sampled_from([True, False, "low"])),
                seed=draw(st.integers(0, 2**32 - 1)))


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=max(1, N_EXAMPLES // 4), deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck), print_blob=True)
@given(data=st.data())
def test_fuzz_changing_dims_reuse_plans_and_graphs(cp, size_rules, fmt, data):
    """Kind varying_first, one signature, four dims vectors in a row on one input buffer: host dims
    lists (the fast path's one plan for every dims of G members, the values as kernel parameters),
    device dims rewritten between calls, or one CUDA graph (CuPy stream capture, device dims)
    replayed after each rewrite. Every call's members equal the reference's for its dims."""
    case = data.draw(_dims_sequence_case(fmt), label="case")
    size_rules(case["size_rules"])
    rng = np.random.default_rng(case["seed"])
    dt = DTYPES[case["dtype"] if case["how"] != "graph" or case["dtype"] != "bfloat16" else "float16"]
    xh = _values(rng, case["rows"] * case["K"], []).reshape(case["rows"], case["K"]).astype(dt)
    xd = _to_device(cp, xh, case["lib"], "contiguous")
    kw = case["kw"]
    G = case["G"]

    def check(got, d):
        got.check()
        exp = fp4kit.reference.group_quantize(xh[:sum(d)], fmt, first_dims=d, **kw)
        for i in range(G):
            rep = fp4kit.compare(got[i], exp[i])
            assert rep.ok, f"dims {d}, member {i}: {rep}"

    if case["how"] == "host":
        for d in case["seqs"]:
            check(fp4kit.group_quantize(xd[:sum(d)], fmt, first_dims=d, **kw), d)
        return
    dims = cp.asarray(np.array(case["seqs"][0], np.int64))
    if case["how"] == "device":
        for d in case["seqs"]:
            dims[...] = cp.asarray(np.array(d, np.int64))
            check(fp4kit.group_quantize(xd, fmt, first_dims=dims, **kw), d)
        return
    xc = cp.asarray(xh)                        # the capture runs on a CuPy stream
    fp4kit.group_quantize(xc, fmt, first_dims=dims, **kw)          # compile, pool blocks
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        g = fp4kit.group_quantize(xc, fmt, first_dims=dims, **kw)
        graph = stream.end_capture()
    for d in case["seqs"]:
        dims.set(np.array(d, np.int64), stream=stream)
        graph.launch(stream)
        stream.synchronize()
        check(g, d)


@SETTINGS
@given(R=st.integers(0, 600), C=st.integers(0, 70), lib=st.sampled_from(["cupy", "torch"]),
       view=st.sampled_from(["contiguous", "offset", "transposed", "stepped"]), seed=st.integers(0, 2**32 - 1))
def test_fuzz_swizzle_roundtrip_equals_reference(cp, R, C, lib, view, seed):
    """swizzle_scales of any (R, C) uint8 matrix (contiguous or not) and unswizzle_scales back, against
    the reference; the swizzled padding is written (poisoned outputs)."""
    c = np.random.default_rng(seed).integers(0, 256, (R, C), dtype=np.uint8)
    want = fp4kit.reference.swizzle_scales(c)
    s = _host(fp4kit.swizzle_scales(_to_device(cp, c, lib, view)))
    assert s.shape == want.shape and np.array_equal(s, want)
    back = _host(fp4kit.unswizzle_scales(_to_device(cp, want, lib, view), (R, C)))
    assert back.shape == (R, C) and np.array_equal(back, c)


def _error_fuzz_module():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "reference" / "test_error_fuzz.py"
    spec = importlib.util.spec_from_file_location("_error_fuzz", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_EF = _error_fuzz_module()
_DEVICE_ODD = ["cupy-amax", "torch-amax", "cupy-amax2", "cupy-int-dims", "torch-dims", "cupy-2d-dims"]


def _device_odd(cp, v):
    """The pool's device stand-ins: amaxes and dims as CuPy / PyTorch arrays of odd dtypes and shapes."""
    import torch
    return {"cupy-amax": lambda: cp.ones(1, cp.float32), "torch-amax": lambda: torch.ones(1, device="cuda"),
            "cupy-amax2": lambda: cp.ones((2, 1), cp.float64), "cupy-int-dims": lambda: cp.array([32, 32], cp.int32),
            "torch-dims": lambda: torch.tensor([32, 32], device="cuda"),
            "cupy-2d-dims": lambda: cp.array([[32, 32]], cp.int64)}[v]() if isinstance(v, str) and v in _DEVICE_ODD else v


@SETTINGS
@given(x=st.sampled_from(_EF.INPUTS[:10]), lib=st.sampled_from(["cupy", "torch"]), fmt=st.sampled_from(_EF.FORMATS),
       kw=st.dictionaries(st.sampled_from(_EF.QUANTIZE_KW),
                          st.one_of(*[_EF._arg(n) for n in _EF.QUANTIZE_KW], st.sampled_from(_DEVICE_ODD)), max_size=4),
       side=st.booleans())
def test_fuzz_device_quantize_raises_only_clear_errors(cp, x, lib, fmt, kw, side):
    """SPEC section 8 on the device paths (fast and general): odd arguments give a result or a
    TypeError / ValueError naming the argument, as on the CPU (tests/reference/test_error_fuzz.py)."""
    kw = {k: _device_odd(cp, v) for k, v in kw.items()}
    xd = _to_device(cp, np.asarray(x), lib, "contiguous") if np.asarray(x).ndim else cp.asarray(x)
    with _Stream(cp, _lib(lib, np.asarray(x).dtype), side):
        q = _EF._only_clear_errors(lambda: fp4kit.quantize(xd, fmt, **kw))
        if q is not None:
            for dtype in ["float32", "bfloat16", None, 3]:
                for operand in ["rowwise", "columnwise", "both"]:
                    _EF._only_clear_errors(lambda: fp4kit.dequantize(q, dtype=dtype, operand=operand))


@SETTINGS
@given(x=st.sampled_from(_EF.INPUTS[:10] + [_EF._X.reshape(-1)]), lib=st.sampled_from(["cupy", "torch"]),
       fmt=st.sampled_from(_EF.FORMATS),
       num_groups=st.sampled_from([None, None, 1, 2, 0, -1, 3.0, True]),
       first_dims=st.sampled_from([None, None, [32, 32], [64], [0, 64, 0], [-1, 65], [32.0, 32], 64, 16, -3,
                                   np.array([32, 32]), [2**70], [], "cupy-int-dims", "torch-dims", "cupy-2d-dims"]),
       last_dims=st.sampled_from([None, None, [64], [32, 32], [0, 4096], [-64], 64, "cupy-int-dims", "torch-dims"]),
       kw=st.dictionaries(st.sampled_from(_EF.QUANTIZE_KW + ["dbias", "max_elements", "bogus"]),
                          st.sampled_from(_EF.ODD + ["both", "swizzled", 4096, 0] + _DEVICE_ODD), max_size=3))
def test_fuzz_device_group_quantize_raises_only_clear_errors(cp, x, lib, fmt, num_groups, first_dims, last_dims, kw):
    kw = {k: _device_odd(cp, v) for k, v in kw.items()}
    first_dims, last_dims = _device_odd(cp, first_dims), _device_odd(cp, last_dims)
    xd = _to_device(cp, np.asarray(x), lib, "contiguous")
    g = _EF._only_clear_errors(lambda: fp4kit.group_quantize(xd, fmt, num_groups=num_groups, first_dims=first_dims,
                                                             last_dims=last_dims, **kw))
    if g is None:
        return
    _EF._only_clear_errors(g.check)              # device dims: a flagged problem is a ValueError here
    for dtype in ["float32", "float64"]:
        for operand in ["rowwise", "columnwise", "x"]:
            _EF._only_clear_errors(lambda: fp4kit.group_dequantize(g, dtype=dtype, operand=operand))

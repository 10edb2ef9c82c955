"""Arrays on another GPU: the kernels run on the array's device whichever device is current, the
results stay on it, and arrays from two places in one call are a clear error before any launch.

The arrays go to the machine's last device while device 0 is current: on a machine with two or
more GPUs that is the multi-device case; with one GPU the same tests run on device 0 (so their own
logic is exercised everywhere). The test of arrays from two devices needs two.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import fp4kit
from fp4kit.reference import api as ref_api

from gpu_helpers import (assert_bytes_equal, assert_float_bits_equal, assert_xla_usable, device_changes, jax_gpus,
                         require_gpu)

pytestmark = pytest.mark.gpu

CASES = [("mxfp8_e4m3", "swizzled"), ("mxfp6_e2m3", "compact"), ("mxfp4_e2m1", "swizzled"), ("nvfp4", "compact")]


@pytest.fixture
def cp2(gpu):
    """CuPy with output poisoning on; device 0 is current."""
    with gpu.cuda.Device(0):
        yield gpu


@pytest.fixture
def other(cp2) -> int:
    """The device the arrays go to: the last one (device 1 on a two-GPU machine)."""
    return cp2.cuda.runtime.getDeviceCount() - 1


def _torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    return torch


def _x(shape, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(shape) * np.exp2(rng.integers(-6, 7, shape))
    return v.astype(np.float32).astype(dtype)


def _host(a):
    """A result array (CuPy or torch) as NumPy, after checking nothing else is needed."""
    if type(a).__module__.startswith("torch"):
        return a.cpu().numpy()
    return a.get()


def _device_of(a) -> int:
    if type(a).__module__.startswith("torch"):
        return a.device.index
    return a.device.id


def _check_quantized(got, want, dev: int, what: str):
    """Every operand of `got` lives on device `dev` and equals the reference's bytes."""
    for name in ("rowwise", "columnwise"):
        g, w = getattr(got, name), getattr(want, name)
        assert (g is None) == (w is None), f"{what}: {name} present"
        if w is None:
            continue
        for field in ("data", "scales"):
            arr = getattr(g, field)
            assert _device_of(arr) == dev, f"{what}: {name}.{field} on device {_device_of(arr)}, expected {dev}"
            assert_bytes_equal(_host(arr), getattr(w, field), f"{what}: {name}.{field}")
        if w.amax is not None:
            assert _device_of(g.amax) == dev
            assert_bytes_equal(_host(g.amax).view(np.uint32), np.asarray(w.amax, np.float32).view(np.uint32),
                               f"{what}: {name}.amax")


@pytest.mark.parametrize("fmt,layout", CASES)
def test_cupy_arrays_on_another_device_while_device_0_is_current(cp2, other, fmt, layout):
    x = _x((200, 96), seed=1)
    want = ref_api.quantize(x, fmt, axis="both", scale_layout=layout)
    with cp2.cuda.Device(other):
        xd = cp2.asarray(x)
    assert cp2.cuda.runtime.getDevice() == 0
    got = fp4kit.quantize(xd, fmt, axis="both", scale_layout=layout)
    assert cp2.cuda.runtime.getDevice() == 0, "quantize left another device current"
    _check_quantized(got, want, other, f"{fmt} {layout}")
    y = fp4kit.dequantize(got, dtype="bfloat16")
    assert _device_of(y) == other
    assert_float_bits_equal(_host(y).view(ml_dtypes.bfloat16), ref_api.dequantize(want, dtype="bfloat16"),
                            f"{fmt} dequantize")
    s = fp4kit.unswizzle_scales(got.rowwise.scales, shape=want.rowwise.scale_shape) if layout == "swizzled" \
        else fp4kit.swizzle_scales(got.rowwise.scales)
    assert _device_of(s) == other


def test_same_shape_on_both_devices_alternately(cp2, other):
    """Launch plans and loaded kernels are per device: the same call signature on device 0, then 1,
    then 0 again gives the reference's bytes each time."""
    x = _x((256, 128), seed=2)
    want = ref_api.quantize(x, "nvfp4", axis="both", scale_layout="swizzled")
    for dev in (0, other, 0, other):
        with cp2.cuda.Device(dev):
            xd = cp2.asarray(x)
        got = fp4kit.quantize(xd, "nvfp4", axis="both", scale_layout="swizzled")
        _check_quantized(got, want, dev, f"device {dev}")


def test_torch_tensor_on_another_device(cp2, other):
    """General path (torch's current device is 0) and fast path (the tensor's device current for
    torch and CuPy), on the default stream and on a side stream of that device."""
    torch = _torch()
    x = _x((128, 256), seed=3)
    want = ref_api.quantize(x, "nvfp4", axis="both", scale_layout="swizzled")
    want8 = ref_api.quantize(x, "mxfp8_e4m3", axis="rowwise")
    t = torch.from_numpy(x).to(f"cuda:{other}")
    with torch.cuda.device(0):
        got = fp4kit.quantize(t, "nvfp4", axis="both", scale_layout="swizzled")
        _check_quantized(got, want, other, "torch, device 0 current")
        assert isinstance(got.rowwise.data, torch.Tensor)
    with torch.cuda.device(other), cp2.cuda.Device(other):
        for _ in range(3):   # the first call validates, the others take the memoised plan
            got = fp4kit.quantize(t, "nvfp4", axis="both", scale_layout="swizzled")
            _check_quantized(got, want, other, "torch, its device current")
            _check_quantized(fp4kit.quantize(t, "mxfp8_e4m3"), want8, other, "torch mxfp8, its device current")
        side = torch.cuda.Stream(device=other)
        with torch.cuda.stream(side):
            got = fp4kit.quantize(t, "nvfp4", axis="both", scale_layout="swizzled")
        side.synchronize()
        _check_quantized(got, want, other, "torch, a side stream of its device")


def test_group_quantize_on_another_device_with_device_dims(cp2, other):
    first = [0, 130, 64, 0, 2, 256, 0]
    x = _x((sum(first) + 40, 64), seed=4)
    exp = fp4kit.reference.group_quantize(x[:sum(first)], "mxfp4_e2m1", first_dims=first, axis="both",
                                          scale_layout="swizzled")
    with cp2.cuda.Device(other):
        xd = cp2.asarray(x)
        dims = cp2.asarray(np.array(first, np.int64))
    got = fp4kit.group_quantize(xd, "mxfp4_e2m1", first_dims=dims, axis="both", scale_layout="swizzled")
    got.check()
    assert cp2.cuda.runtime.getDevice() == 0
    for i in range(len(first)):
        rep = fp4kit.compare(got[i], exp[i])
        assert rep.ok, str(rep)
        if got[i].rowwise is not None and got[i].rowwise.data.size:
            assert _device_of(got[i].rowwise.data) == other
    back = fp4kit.group_dequantize(got)
    want_back = fp4kit.reference.group_dequantize(exp)
    for i in range(len(first)):
        assert_float_bits_equal(_host(back[i]), want_back[i], f"member {i} dequantized")


def test_jax_array_on_another_device(cp2, other):
    """A JAX array on the other device: results on that device, usable by XLA computations; and a
    view off 16 bytes, which JAX gets as a copy (fp4kit._interop.jax_aligned: XLA refuses such
    addresses; fp4kit's own results all sit at 16-byte offsets), is copied on that device."""
    jax, devs = jax_gpus()
    if len(devs) <= other:
        pytest.skip("jax without that GPU")
    x = _x((64, 64), seed=6)
    exp = fp4kit.reference.group_quantize(x, "nvfp4", num_groups=2, axis="both")
    xj = jax.device_put(x, devs[other])
    # jax.device_put itself can leave the array's device current (seen on two H200s in
    # batched_device_put, jax/_src/interpreters/pxla.py): that is JAX's, so device 0 is made
    # current again before the call whose device handling is under test
    cp2.cuda.runtime.setDevice(0)
    got, changes = device_changes(fp4kit.group_quantize, xj, "nvfp4", num_groups=2, axis="both")
    assert cp2.cuda.runtime.getDevice() == 0, changes
    rep = fp4kit.compare(got, exp)
    assert rep.ok, str(rep)
    for f in ("rowwise_data", "rowwise_amax", "columnwise_scales", "columnwise_amax"):
        a = getattr(got, f)
        assert a.devices() == {devs[other]}, f
        assert_xla_usable(a, f)
    for i in range(2):
        rep = fp4kit.compare(got[i], exp[i])
        assert rep.ok, f"member {i}: {rep}"
    # last: the copy lands on the array's device whatever device is current. (jax.dlpack.from_dlpack
    # of an array on the other device can leave that device current on this thread, seen on two
    # H100s, and traced on two H200s with the guard off; every DLPack crossing restores the caller's
    # device: fp4kit._interop.keep_current_device.)
    with cp2.cuda.Device(other):
        base = cp2.arange(40, dtype=cp2.uint8)
    from fp4kit import _interop

    with cp2.cuda.Device(0):
        odd, changes = device_changes(_interop.to_library, base[4:20], "jax")
        assert cp2.cuda.runtime.getDevice() == 0, changes
    assert odd.devices() == {devs[other]} and odd.unsafe_buffer_pointer() % 16 == 0
    assert_xla_usable(odd, "a view at byte offset 4")
    assert np.array_equal(np.asarray(odd), np.arange(4, 20))


def test_arrays_from_two_devices_raise_before_any_launch(cp2):
    if cp2.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two CUDA devices")
    x = _x((64, 64), seed=5)
    with cp2.cuda.Device(1):
        xd = cp2.asarray(x)
        dims1 = cp2.asarray(np.array([32, 32], np.int64))
    a0 = cp2.asarray(np.array([4.0], np.float32))          # device 0
    dims0 = cp2.asarray(np.array([32, 32], np.int64))
    with pytest.raises(ValueError, match=r"amax: expected an array on device 1 \(where x is\), got device 0"):
        fp4kit.quantize(xd, "nvfp4", amax=a0)
    with pytest.raises(ValueError, match=r"first_dims: expected an array on device 1"):
        fp4kit.group_quantize(xd, "mxfp8_e4m3", first_dims=dims0)
    q1 = fp4kit.quantize(xd, "mxfp8_e4m3")
    q0 = fp4kit.quantize(cp2.asarray(x), "mxfp8_e4m3")
    with pytest.raises(ValueError, match=r"b: the two operands must live in the same place.*on device 0.*on device 1"):
        fp4kit.qmatmul(q0, q1)
    fp4kit.group_quantize(xd, "mxfp8_e4m3", first_dims=dims1).check()   # the right device works
    # a grouped amax and the parts of a hand-built operand on another device than x / data: one
    # kernel reads them all, so they are refused before it would be handed a foreign pointer
    with pytest.raises(ValueError, match=r"amax: expected an array on device 1 \(where x is\), got device 0"):
        fp4kit.group_quantize(xd, "nvfp4", first_dims=[32, 32], amax=cp2.ones(2, cp2.float32))
    qn = fp4kit.quantize(xd, "nvfp4")
    r = qn.rowwise
    for field in ("scales", "amax"):
        op = fp4kit.Operand(**{**vars(r), field: cp2.asarray(getattr(r, field).get())})   # a copy on device 0
        h = fp4kit.QuantizedTensor("nvfp4", (64, 64), op, None, qn.options)
        with pytest.raises(ValueError, match=rf"{field}: expected an array on device 1 \(where data is\), got device 0"):
            fp4kit.dequantize(h)


def test_qmatmul_host_and_device_operands_raise(gpu):
    """One operand in NumPy, the other on the GPU: a ValueError naming both places (one device suffices)."""
    require_gpu()
    x = _x((32, 64), seed=6)
    qh = fp4kit.quantize(x, "mxfp8_e4m3")
    qd = fp4kit.quantize(gpu.asarray(x), "mxfp8_e4m3")
    dev = gpu.cuda.runtime.getDevice()
    with pytest.raises(ValueError, match=r"a's is in host memory \(NumPy\), b's is on device " + str(dev)):
        fp4kit.qmatmul(qh, qd)
    with pytest.raises(ValueError, match=r"a's is on device \d+, b's is in host memory"):
        fp4kit.qmatmul(qd, qh)
    # the GPU sums in another order (float64): equal to the reference within float64 rounding
    np.testing.assert_allclose(fp4kit.qmatmul(qd, qd).get(), fp4kit.qmatmul(qh, qh), rtol=1e-6, atol=0)


def test_torch_pdl_sequences_on_two_devices(cp2, other, monkeypatch):
    """Programmatic dependent launches (fp4kit._torch_exec: cuLaunchKernelEx for a plan's kernels and
    for the raw dequantize / group_dequantize launches) on the tensor's device: calls alternate
    between the last device and device 0, each device's own current, PDL forced on; every result
    equals the reference's bytes and stays on its tensor's device, and the fast path did launch
    with PDL on each device."""
    torch = _torch()
    from fp4kit import _plan, _torch_exec

    launched = []
    orig = _torch_exec._PdlLaunch.__call__

    def counting(self, f, stream, params):
        launched.append(torch.cuda.current_device())
        return orig(self, f, stream, params)

    monkeypatch.setattr(_torch_exec._PdlLaunch, "__call__", counting)
    monkeypatch.setattr(_torch_exec, "PDL", True)
    monkeypatch.setattr(_torch_exec, "PDL_ALL", True)
    _plan.clear_plans()
    x = _x((384, 256), seed=5)
    first = [0, 128, 64, 0, 192]
    want = ref_api.quantize(x, "nvfp4", axis="both", scale_layout="swizzled")
    want_dq = ref_api.dequantize(want, dtype="float32")
    want_g = fp4kit.reference.group_quantize(x, "mxfp8_e4m3", first_dims=first, axis="rowwise",
                                             scale_layout="swizzled")
    want_gdq = fp4kit.reference.group_dequantize(want_g, dtype="float32")
    try:
        for dev in (other, 0, other, 0):
            t = torch.from_numpy(x).to(f"cuda:{dev}")
            dims = torch.tensor(first, dtype=torch.int64, device=f"cuda:{dev}")
            with torch.cuda.device(dev), cp2.cuda.Device(dev):
                n0 = len(launched)
                q = fp4kit.quantize(t, "nvfp4", axis="both", scale_layout="swizzled")
                dq = fp4kit.dequantize(q, dtype="float32")
                g = fp4kit.group_quantize(t, "mxfp8_e4m3", first_dims=dims, axis="rowwise", scale_layout="swizzled")
                gdq = fp4kit.group_dequantize(g, dtype="float32")
                torch.cuda.synchronize(dev)
                assert len(launched) > n0 and set(launched[n0:]) == {dev}, f"PDL launches on device {dev}"
            _check_quantized(q, want, dev, f"PDL nvfp4 on device {dev}")
            assert _device_of(dq) == dev
            assert_float_bits_equal(_host(dq), want_dq, f"PDL dequantize on device {dev}")
            g.check()
            for i in range(len(first)):
                rep = fp4kit.compare(g[i], want_g[i])
                assert rep.ok, f"device {dev}, member {i}: {rep}"
            for i in range(len(first)):
                assert _device_of(gdq[i]) == dev
                assert_float_bits_equal(_host(gdq[i]), want_gdq[i], f"PDL group_dequantize on device {dev}, member {i}")
    finally:
        _plan.clear_plans()

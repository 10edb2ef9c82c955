#!/usr/bin/env python3
"""Where the host time of one small fp4kit call goes (M x 4096 bf16, warm): each layer timed alone
with perf_counter over many calls; then the grouped ops (8 members, 4096 x 2048, sizes as an MoE
layer's; `--grouped`: only those). Used for docs/performance.md.

Two paths for a PyTorch input: the fast path (fp4kit._torch_exec: torch allocations, raw
cuLaunchKernel, no CuPy arrays, no DLPack) and the general path (CuPy views, CuPy launches, DLPack
hand-back), forced here by disabling the fast path's eligibility check; the same two for a CuPy
input (fast: fp4kit._torch_exec.run_cupy, cupy.empty and raw cuLaunchKernel)."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np  # noqa: E402
import torch  # noqa: E402
import cupy as cp  # noqa: E402

import fp4kit  # noqa: E402
from fp4kit import _cuda, _device_api, _grouped_device, _interop, _plan, _torch_exec, _validate  # noqa: E402
from fp4kit import tensor  # noqa: E402
from fp4kit.tensor import Operand, QuantizedTensor  # noqa: E402


def t(fn, n=2000):
    for _ in range(100):
        fn()
    torch.cuda.synchronize()
    s = time.perf_counter()
    for _ in range(n):
        fn()
    e = time.perf_counter()
    torch.cuda.synchronize()
    return (e - s) / n * 1e6


def general(fn):
    """fn() with the fast path switched off (the general path, as before the fast path existed)."""
    def run():
        keep = (_device_api._torch_fast_device, _device_api._cupy_fast_device, _device_api._dequantize_fast,
                _grouped_device._group_dequantize_fast)
        _device_api._torch_fast_device = _device_api._cupy_fast_device = lambda *a, **k: None
        _device_api._dequantize_fast = lambda op, dtype, shape: None
        _grouped_device._group_dequantize_fast = lambda *a: None
        try:
            return fn()
        finally:
            (_device_api._torch_fast_device, _device_api._cupy_fast_device, _device_api._dequantize_fast,
             _grouped_device._group_dequantize_fast) = keep
    return run


M, K = 16, 4096
x = torch.randn(M, K, device="cuda").to(torch.bfloat16)
xc = cp.asarray(np.random.default_rng(0).standard_normal((M, K)).astype(np.float32))
xh = xc.astype(cp.float16)
amax_c = cp.asarray(np.float32([4.0]))
da = _interop.as_cupy(x)
out = cp.empty(1000, cp.uint8)
KW = dict(axis="rowwise", scale_layout="compact", scale_rule="rceil", tile_2d=False, row_scaled=False, rht=False,
          rht_sign_mask=0xD7E8, rounding="nearest", seed=0)
opts = _validate.quantize_options(da.shape, da.dtype, "mxfp8_e4m3")
optsn = _validate.quantize_options(da.shape, da.dtype, "nvfp4")
dev = x.get_device()
plan_m = _plan.quantize_plan(dev, _cuda._sm_count_of, M, K, "bfloat16", opts, None, x.data_ptr())
plan_n = _plan.quantize_plan(dev, _cuda._sm_count_of, M, K, "bfloat16", optsn, None, x.data_ptr())
_torch_exec.run(plan_m, x, None, 0, dev)           # prepares the plans (kernel handles, packed arguments)
_torch_exec.run(plan_n, x, None, 0, dev)
prep = plan_m.exec_cache["torch"]
# one launch alone, with its own packed arguments pointing at buffers kept alive here
keep = _torch_exec.run(plan_m, x, None, 0, dev)
fn_, grid_, block_, statics_, dyn_ = prep.launches[0][:5]
pack_ = _torch_exec._pack(statics_)
vals_ = [x.data_ptr(), 0, 0, 0, 0][:_torch_exec._VAL_BUF0] + [b.data_ptr() for b in keep]
for i_, j_, o_ in dyn_:
    pack_[0][i_] = vals_[j_] + o_
params_ = pack_[2]
stream_ = _torch_exec._stream_ptr(dev)
pdl_ = _torch_exec._PdlLaunch(grid_, block_, _torch_exec._launch_ex())
q_m = fp4kit.quantize(x, "mxfp8_e4m3")
q_c = fp4kit.quantize(xh, "mxfp8_e4m3")
OPTS8 = tuple(v for k, v in KW.items() if k != "seed")
rows = [
    ("fp4kit.quantize torch bf16 mxfp8_e4m3 (fast path)", lambda: fp4kit.quantize(x, "mxfp8_e4m3")),
    ("fp4kit.quantize torch bf16 nvfp4 (fast path)", lambda: fp4kit.quantize(x, "nvfp4")),
    ("fp4kit.quantize torch bf16 mxfp8_e4m3 (general path)", general(lambda: fp4kit.quantize(x, "mxfp8_e4m3"))),
    ("fp4kit.quantize torch bf16 nvfp4 (general path)", general(lambda: fp4kit.quantize(x, "nvfp4"))),
    ("fp4kit.quantize cupy f32 mxfp8_e4m3", lambda: fp4kit.quantize(xc, "mxfp8_e4m3")),
    ("fp4kit.quantize cupy f16 mxfp8_e4m3 (general path)", general(lambda: fp4kit.quantize(xh, "mxfp8_e4m3"))),
    ("fp4kit.quantize cupy f16 nvfp4 (general path)", general(lambda: fp4kit.quantize(xh, "nvfp4"))),
    ("fp4kit.quantize cupy f16 mxfp8_e4m3", lambda: fp4kit.quantize(xh, "mxfp8_e4m3")),
    ("fp4kit.quantize cupy f16 nvfp4", lambda: fp4kit.quantize(xh, "nvfp4")),
    ("fp4kit.quantize cupy f16 nvfp4, supplied amax", lambda: fp4kit.quantize(xh, "nvfp4", amax=amax_c)),
    ("fp4kit.quantize cupy f16 mxfp8_e4m3 both swizzled", lambda: fp4kit.quantize(xh, "mxfp8_e4m3", axis="both",
                                                                                  scale_layout="swizzled")),
    ("fp4kit.dequantize torch mxfp8_e4m3 -> bfloat16 (fast path)", lambda: fp4kit.dequantize(q_m, "bfloat16")),
    ("fp4kit.dequantize torch mxfp8_e4m3 -> bfloat16 (general path)", general(lambda: fp4kit.dequantize(q_m, "bfloat16"))),
    ("fp4kit.dequantize cupy mxfp8_e4m3 -> float16 (fast path)", lambda: fp4kit.dequantize(q_c, "float16")),
    ("fp4kit.dequantize cupy mxfp8_e4m3 -> float16 (general path)", general(lambda: fp4kit.dequantize(q_c, "float16"))),
    ("fast path:", None),
    ("  _device_api._torch_fast_device (eligibility)", lambda: _device_api._torch_fast_device(x, None)),
    ("  _validate.quantize_options (memoised)", lambda: _validate.quantize_options(
        tuple(x.shape), "bfloat16", "mxfp8_e4m3", **KW, amax_shape=None, amax_dtype=None)),
    ("  _plan.quantize_plan (memoised)", lambda: _plan.quantize_plan(
        dev, _cuda._sm_count_of, M, K, "bfloat16", opts, None, x.data_ptr())),
    ("  _torch_exec.run mxfp8 (2 torch.empty + 1 launch)", lambda: _torch_exec.run(plan_m, x, None, 0, dev)),
    ("  _torch_exec.run nvfp4 (3 torch.empty + 1 cudaMemsetAsync + 2 launches)",
     lambda: _torch_exec.run(plan_n, x, None, 0, dev)),
    ("  _torch_exec._stream_ptr", lambda: _torch_exec._stream_ptr(dev)),
    ("  cuLaunchKernel alone (driver.launchKernel, packed args)",
     lambda: prep.launch(fn_, grid_[0], grid_[1], grid_[2], block_, 1, 1, 0, stream_, params_, 0)),
    ("  cuLaunchKernelEx alone (ctypes, PDL: a plan's later kernels)", lambda: pdl_(fn_, stream_, params_)),
    ("  torch.empty", lambda: torch.empty((M, K), dtype=torch.uint8, device=x.device)),
    ("  torch.zeros(1) (not used: a fill kernel)", lambda: torch.zeros((1,), dtype=torch.float32, device=x.device)),
    ("  torch.empty(1) + cudaMemsetAsync (ZEROS buffers)", lambda: prep.memset(
        torch.empty((1,), dtype=torch.float32, device=x.device).data_ptr(), 0, 4, stream_)),
    ("  Operand + QuantizedTensor", lambda: QuantizedTensor(
        format="mxfp8_e4m3", shape=(M, K), rowwise=Operand(
            data=q_m.rowwise.data, scales=q_m.rowwise.scales, scale_layout="compact", amax=None, rows=M, cols=K,
            format="mxfp8_e4m3"), columnwise=None, options=opts, input_dtype="bfloat16")),
    ("  Operand + QuantizedTensor, unchecked (what a memo hit builds)", lambda: tensor._quantized_unchecked(
        "mxfp8_e4m3", (M, K), tensor._operand_unchecked(q_m.rowwise.data, q_m.rowwise.scales, "compact", None, M, K,
                                                        "mxfp8_e4m3"), None, opts, "bfloat16")),
    ("  memo key + lookup (_plan.FAST_CALLS)", lambda: _plan.FAST_CALLS.get(
        (dev, x.shape, x.dtype, 16, None, "mxfp8_e4m3", str, OPTS8, tuple(map(type, OPTS8))))),
    ("general path:", None),
    ("  _interop.as_cupy(torch)", lambda: _interop.as_cupy(x)),
    ("  _interop.current_stream(torch)", lambda: _interop.current_stream(x)),
    ("  _cuda.quantize mxfp8 (allocs + launches)", lambda: _cuda.quantize(da.array, opts, input_dtype="bfloat16")),
    ("  _cuda.quantize nvfp4 (allocs + launches)", lambda: _cuda.quantize(da.array, optsn, input_dtype="bfloat16")),
    ("  _interop.to_library(cupy -> torch)", lambda: _interop.to_library(out, "torch")),
    ("  cupy.empty", lambda: cp.empty(4096, cp.uint8)),
    ("CuPy input:", None),
    ("  _interop.as_cupy(cupy)", lambda: _interop.as_cupy(xh)),
    ("  _interop.current_stream(cupy)", lambda: _interop.current_stream(xh)),
    ("  _cuda.quantize mxfp8 f16 (allocs + launches)", lambda: _cuda.quantize(xh, opts16, input_dtype="float16")),
    ("  cupy.cuda.Device(0) enter + exit", lambda: _enter_exit(cp.cuda.Device(dev))),
]
opts16 = _validate.quantize_options(xh.shape, "float16", "mxfp8_e4m3")


def _enter_exit(ctx):
    with ctx:
        pass


GROUPED_ONLY = "--grouped" in sys.argv     # only the grouped table
print(f"device: {torch.cuda.get_device_name(dev)}; torch {torch.__version__}, cupy {cp.__version__}")
if not GROUPED_ONLY:
    print("| what | host us/call |\n|---|---|")
    for name, fn in rows:
        print(f"| {name} | {'' if fn is None else f'{t(fn):.1f}'} |")

# grouped: 8 members (one empty) of 4096 x 2048 rows in all; the fast path (memoised signature and
# plan, fp4kit._torch_exec) and the general path; host dims that change every call (one signature:
# the values checked and laid out per call, passed as kernel parameters) against dims on the device
GF = [512, 0, 1024, 384, 640, 1024, 256, 256]
GK = 2048
gx = torch.randn(sum(GF), GK, device="cuda").to(torch.bfloat16)
gxc = cp.asarray(np.random.default_rng(1).standard_normal((sum(GF), GK)).astype(np.float16))
gd, gdc = torch.tensor(GF, device="cuda"), cp.asarray(np.array(GF, np.int64))
gx1, GL = gx.reshape(-1), [GK] * len(GF)       # the same bytes as a 1-D input (kinds varying_last / _both)
_moving = [0]


def moving_dims():
    """GF with rows moved between two members, a different list each call (1000 distinct, more
    than the calls timed)."""
    _moving[0] = (_moving[0] + 1) % 1000
    d = list(GF)
    d[2] -= _moving[0]
    d[3] += _moving[0]
    return d


gq = fp4kit.group_quantize(gx, "mxfp8_e4m3", first_dims=gd, axis="both", scale_layout="swizzled")
BOTH = dict(axis="both", scale_layout="swizzled")
grows = [
    ("group_quantize torch bf16 mxfp8_e4m3 both swizzled, device dims (fast path)",
     lambda: fp4kit.group_quantize(gx, "mxfp8_e4m3", first_dims=gd, **BOTH)),
    ("group_quantize torch bf16 mxfp8_e4m3 both swizzled, device dims (general path)",
     general(lambda: fp4kit.group_quantize(gx, "mxfp8_e4m3", first_dims=gd, **BOTH))),
    ("group_quantize torch bf16 mxfp8_e4m3 rowwise, device dims (fast path)",
     lambda: fp4kit.group_quantize(gx, "mxfp8_e4m3", first_dims=gd)),
    ("group_quantize torch bf16 nvfp4 both, device dims (fast path)",
     lambda: fp4kit.group_quantize(gx, "nvfp4", first_dims=gd, axis="both")),
    ("group_quantize torch bf16 nvfp4 both, device dims (general path)",
     general(lambda: fp4kit.group_quantize(gx, "nvfp4", first_dims=gd, axis="both"))),
    ("group_quantize torch bf16 mxfp8_e4m3 both swizzled, host dims, the same every call (fast path)",
     lambda: fp4kit.group_quantize(gx, "mxfp8_e4m3", first_dims=GF, **BOTH)),
    ("group_quantize torch bf16 mxfp8_e4m3 both swizzled, host dims, new every call (fast path)",
     lambda: fp4kit.group_quantize(gx, "mxfp8_e4m3", first_dims=moving_dims(), **BOTH)),
    ("group_quantize torch bf16 mxfp8_e4m3 both swizzled, host dims, new every call (general path)",
     general(lambda: fp4kit.group_quantize(gx, "mxfp8_e4m3", first_dims=moving_dims(), **BOTH))),
    ("group_quantize torch bf16 mxfp8_e4m3 both swizzled, 1-D input, host first and last dims, new every call "
     "(fast path)", lambda: fp4kit.group_quantize(gx1, "mxfp8_e4m3", first_dims=moving_dims(), last_dims=GL, **BOTH)),
    ("group_quantize cupy f16 mxfp8_e4m3 both swizzled, device dims (fast path)",
     lambda: fp4kit.group_quantize(gxc, "mxfp8_e4m3", first_dims=gdc, **BOTH)),
    ("group_quantize cupy f16 mxfp8_e4m3 both swizzled, device dims (general path)",
     general(lambda: fp4kit.group_quantize(gxc, "mxfp8_e4m3", first_dims=gdc, **BOTH))),
    ("group_dequantize torch mxfp8_e4m3 -> bfloat16 (fast path)", lambda: fp4kit.group_dequantize(gq, "bfloat16")),
    ("group_dequantize torch mxfp8_e4m3 -> bfloat16 (general path)",
     general(lambda: fp4kit.group_dequantize(gq, "bfloat16"))),
    ("  torch.empty (8 a call above: 2 metadata, 2 lookups / dims, 4 operand buffers)",
     lambda: torch.empty(4096, dtype=torch.uint8, device=gx.device)),
]
print("\n| grouped (8 members, 4096 x 2048) | host us/call |\n|---|---|")
for name, fn in grows:
    print(f"| {name} | {t(fn, 500):.1f} |")

import cProfile  # noqa: E402
import pstats  # noqa: E402
for what, call in () if GROUPED_ONLY else (("torch nvfp4 (fast path)", lambda: fp4kit.quantize(x, "nvfp4")),
                   ("cupy f16 mxfp8_e4m3", lambda: fp4kit.quantize(xh, "mxfp8_e4m3")),
                   ("torch dequantize mxfp8_e4m3 -> bfloat16", lambda: fp4kit.dequantize(q_m, "bfloat16")),
                   ("torch group_quantize mxfp8_e4m3 both swizzled, device dims", grows[0][1])):
    print(f"\ncProfile, 2000 calls: {what}")
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(2000):
        call()
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(14)

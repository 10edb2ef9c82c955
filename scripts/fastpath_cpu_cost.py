#!/usr/bin/env python3
"""Python cost of the PyTorch fast path's parts, without a GPU, torch or CuPy (timeit, best of 5).

torch's allocations, the stream query, cudaMemsetAsync, cuLaunchKernel and cuLaunchKernelEx are replaced by stubs
that cost next to nothing, so what is timed is fp4kit's own Python: option validation, the plan
lookup, argument packing, the executor loop and the result objects. scripts/host_overhead.py
times the real thing on a GPU.

    python scripts/fastpath_cpu_cost.py [--number N]

(--number: calls per timing, 100000 by default; a CPU test runs it with a few to keep it working.)
"""
import argparse
import itertools
import os
import sys
import timeit
import types

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from fp4kit import _cuda, _device_api, _plan, _torch_exec  # noqa: E402
from fp4kit._validate import flat_2d, quantize_options  # noqa: E402
from fp4kit.tensor import Operand, QuantizedTensor  # noqa: E402

PTR = 0x7F0000000000
M, K = 16, 4096


_ap = argparse.ArgumentParser(description="fp4kit fast path's Python cost")
_ap.add_argument("--number", type=int, default=100000, help="calls per timing")
NUMBER = _ap.parse_args().number


def us(fn, n=None):
    n = n or NUMBER
    return min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e6


class Stub:
    """A stand-in tensor: shape, pointer, one element."""

    device = "cuda:0"

    def __init__(self, shape=(M, K)):
        self.shape = shape

    def data_ptr(self):
        return PTR

    def numel(self):
        return 1

    def element_size(self):
        return 4

    def fill_(self, v):
        return self

    def clone(self):
        return self

    def __getitem__(self, sl):
        return self


class StubDtype:
    def __str__(self):
        return "torch.bfloat16"


Stub.dtype = StubDtype()
torch = types.SimpleNamespace(uint8=1, float32=2, int32=3, int64=4, float64=5,
                              empty=lambda *shape, dtype, device: Stub(shape),
                              full=lambda shape, value, dtype, device: Stub(shape))
_torch_exec._torch = lambda: torch
_torch_exec._stream_ptr = lambda dev: 0
_torch_exec._function_handle = lambda module, kernel: 1
_torch_exec._driver_launch = lambda: (lambda *a: None)
_torch_exec._launch_ex = lambda: (lambda *a: 0)     # a plan's later kernels: cuLaunchKernelEx, stubbed (PDL)
_torch_exec._memset_async = lambda: (lambda *a: None)
_torch_exec._ensure_context = lambda: None
_device_api._sm_count_of = lambda dev: 132
_cuda._poison = False

KW = dict(axis="rowwise", scale_layout="compact", scale_rule="rceil", tile_2d=False, row_scaled=False, rht=False,
          rht_sign_mask=0xD7E8, rounding="nearest", seed=0)
opts = {f: quantize_options((M, K), "bfloat16", f) for f in ("mxfp8_e4m3", "nvfp4")}
opts_rht = quantize_options((256, 512), "bfloat16", "nvfp4", axis="both", rht=True)
plans = {
    "mxfp8 rowwise": _plan.quantize_plan(0, lambda d: 132, M, K, "bfloat16", opts["mxfp8_e4m3"], None, PTR),
    "nvfp4 rowwise": _plan.quantize_plan(0, lambda d: 132, M, K, "bfloat16", opts["nvfp4"], None, PTR),
    "nvfp4 both rht": _plan.quantize_plan(0, lambda d: 132, 256, 512, "bfloat16", opts_rht, None, PTR),
}
x = Stub()

rows = [
    ("quantize_options, memo hit (the fast path's call)",
     lambda: quantize_options((M, K), "bfloat16", "nvfp4", **KW, amax_shape=None, amax_dtype=None)),
    ("_plan.quantize_plan, memo hit",
     lambda: _plan.quantize_plan(0, None, M, K, "bfloat16", opts["nvfp4"], None, PTR)),
    ("flat_2d", lambda: flat_2d((M, K))),
]
for name, p in plans.items():
    prep = _torch_exec._Prepared(p)
    packs = prep.packs()
    vals = [PTR, 0, 0, 0, 0] + [PTR + 4096 * i for i in range(p.n_buffers)]   # x, seed, amax, fd, ld, buffers

    def pack(prep=prep, packs=packs, vals=vals):
        for li in range(len(prep.launches)):
            dyn = prep.launches[li][4]
            values = packs[li][0]
            for i, j, o in dyn:
                values[i] = vals[j] + o

    slots = sum(len(launch[4]) for launch in prep.launches)
    rows.append((f"argument packing, {name} ({len(prep.launches)} launches, {slots} slots written)", pack))
    rows.append((f"_torch_exec.run, {name} (allocations, memset, launches stubbed)",
                 lambda p=p: _torch_exec.run(p, x, None, 0, 0)))
rows.append(("building one 12-argument pack per call instead (not done)",
             lambda s=_torch_exec._Prepared(plans["nvfp4 both rht"]).launches[-1][3]: _torch_exec._pack(s)))
data, scales = Stub((M, K)), Stub((M, K // 32))
rows.append(("Operand + QuantizedTensor", lambda: QuantizedTensor(
    format="mxfp8_e4m3", shape=(M, K), rowwise=Operand(data=data, scales=scales, scale_layout="compact", amax=None,
                                                       rows=M, cols=K, format="mxfp8_e4m3"),
    columnwise=None, options=opts["mxfp8_e4m3"], input_dtype="bfloat16")))
_device_api._torch_fast_device = lambda *a, **k: 0      # eligibility stubbed: every input takes the fast path
for f in ("mxfp8_e4m3", "nvfp4"):
    rows.append((f"_device_api.quantize(x, {f!r}) (all of the above, eligibility and torch/CUDA stubbed)",
                 lambda f=f: _device_api.quantize(x, f)))
seeds = itertools.count()
rows.append(("_device_api.quantize(x, 'nvfp4', rounding='stochastic', seed=<new each call>)",
             lambda: _device_api.quantize(x, "nvfp4", rounding="stochastic", seed=next(seeds))))

print(f"python {sys.version.split()[0]}; us per call, best of 5")
for name, fn in rows:
    print(f"{us(fn):7.2f}  {name}")

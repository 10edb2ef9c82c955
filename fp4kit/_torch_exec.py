"""Runs a launch plan (fp4kit._plan) with PyTorch tensors: the fast path of PyTorch callers.

Buffers come from PyTorch's caching allocator on the input's device (``torch.empty``; 0xA5 in
every byte of an EMPTY buffer when output poisoning is on, like ``fp4kit._cuda._empty``; ZEROS
buffers cleared with ``cudaMemsetAsync`` on the launch stream, as ``cupy.zeros`` does on the general
path: expected to cost less host time than ``torch.zeros``'s fill kernel, not yet measured; both
rows are in scripts/host_overhead.py), and every kernel is launched with ``cuLaunchKernel`` (CuPy's thin binding ``cupy.cuda.driver.launchKernel``) on PyTorch's
current stream with raw device pointers. No CuPy
array, DLPack exchange or CuPy stream wrapper is created; the kernels themselves are the ones
``fp4kit._loader`` compiled and loaded (CUfunction handles of its cupy.RawKernel objects).

Kernel arguments. cuLaunchKernel takes ``void** kernelParams``: one pointer per kernel parameter,
to a value of that parameter's C type. For each launch of a plan this module keeps a ctypes array
of 8-byte slots holding the values and a ``void*`` array pointing at the slots, built once; a call
only writes the input/buffer pointers and the seed into their slots. A 4-byte ``int`` / ``unsigned
int`` value sits in the low half of its slot, where a pointer to the slot reads it on the
little-endian hosts CUDA runs on. The slots are per thread: ``launchKernel`` releases the GIL, so
another thread could rewrite shared slots between this thread's writes and its launch.
cuLaunchKernel copies the values before it returns, so the slots can be reused by the next call.

Nothing here imports PyTorch or CuPy at import time.
"""
from __future__ import annotations

import ctypes
import threading

from . import _cuda, _plan

__all__ = ["run"]

_U64 = (1 << 64) - 1
_SCALAR_MASK = {"i64": _U64, "u64": _U64, "i32": 0xFFFF_FFFF, "u32": 0xFFFF_FFFF}

# Where a dynamic argument's value comes from, in the per-call `vals` list: 0 the input's pointer,
# 1 the seed, 2 + n the pointer of buffer n.
_VAL_X, _VAL_SEED, _VAL_BUF0 = 0, 1, 2


def _torch():
    import torch
    return torch


def _function_handle(module: str, kernel: str) -> int:
    """CUfunction of `kernel` on the current device (compiled, loaded and cached by fp4kit._loader)."""
    from ._loader import get_function
    return _cuda._kernel_ptr(get_function(module, kernel))


def _driver_launch():
    """cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared_mem, stream, kernel_params, extra)."""
    from cupy.cuda import driver
    return driver.launchKernel


def _memset_async():
    """cudaMemsetAsync(ptr, value, nbytes, stream)."""
    from cupy.cuda import runtime
    return runtime.memsetAsync


def _ensure_context() -> None:
    """Give the calling thread a current CUDA context if it has none (cuLaunchKernel needs one; the
    runtime API makes the current device's primary context current on a thread's first runtime call,
    and a thread that so far only used PyTorch's cached memory may not have made one)."""
    import cupy

    if cupy.cuda.driver.ctxGetCurrent() == 0:
        rt = cupy.cuda.runtime
        rt.setDevice(rt.getDevice())      # CUDA 12+: initialises the primary context, makes it current


_stream_fn = None


def _stream_ptr(device: int) -> int:
    """The raw cudaStream_t of PyTorch's current stream on `device` (0: the legacy default stream)."""
    global _stream_fn
    f = _stream_fn
    if f is None:
        torch = _torch()
        # torch._C._cuda_getCurrentRawStream returns the pointer without building a Stream object
        # (what torch.compile's generated launchers use); the public API is the fallback.
        f = getattr(torch._C, "_cuda_getCurrentRawStream", None) if hasattr(torch, "_C") else None
        if f is None:
            f = lambda dev: torch.cuda.current_stream(dev).cuda_stream  # noqa: E731
        _stream_fn = f
    return int(f(device))


class _Prepared:
    """What this executor derives from a plan once: per launch the CUfunction, grid, block, the
    static 8-byte argument values and the (slot, value source) pairs written per call; and, per
    thread, the packed argument arrays."""

    __slots__ = ("launch", "memset", "launches", "tls")

    def __init__(self, plan):
        self.launch = _driver_launch()
        self.memset = _memset_async()
        self.launches = []
        for step in plan.launches():
            statics = [0] * len(step.args)
            dyn = []
            for i, a in enumerate(step.args):
                if a.kind == "x":
                    dyn.append((i, _VAL_X))
                elif a.kind == "seed":
                    dyn.append((i, _VAL_SEED))
                elif a.kind == "buf":
                    dyn.append((i, _VAL_BUF0 + a.value))
                elif a.kind != "null":                      # "null" stays 0
                    statics[i] = a.value & _SCALAR_MASK[a.kind]
            self.launches.append((_function_handle(step.module, step.kernel), step.grid, step.block,
                                  tuple(statics), tuple(dyn)))
        self.tls = threading.local()

    def packs(self) -> list:
        """This thread's (values, params, params address) per launch, built on its first call."""
        packs = getattr(self.tls, "packs", None)
        if packs is None:
            _ensure_context()
            packs = self.tls.packs = [_pack(statics) for _, _, _, statics, _ in self.launches]
        return packs


def _pack(statics: tuple):
    """8-byte value slots initialised to `statics`, and the void* array pointing at them."""
    n = len(statics)
    if n == 0:
        return (None, None, 0)
    values = (ctypes.c_uint64 * n)(*statics)
    base = ctypes.addressof(values)
    params = (ctypes.c_void_p * n)(*[base + 8 * i for i in range(n)])
    return (values, params, ctypes.addressof(params))


_TORCH_DTYPES: dict = {}


def run(plan, x, amax, seed: int, device: int) -> list:
    """Run `plan` with PyTorch on `device` (the current device of PyTorch and CuPy, where x is) and
    PyTorch's current stream there.

    x: the C-contiguous input tensor ("x" arguments); amax: the caller's float32 CUDA tensor (AMAX
    buffers) or None; seed: the "seed" argument. Returns the plan's buffers as tensors, indexed by
    buffer number.
    """
    prep = plan.exec_cache.get("torch")
    if prep is None:
        prep = plan.exec_cache["torch"] = _Prepared(plan)
    torch = _torch()
    if not _TORCH_DTYPES:
        _TORCH_DTYPES.update(uint8=torch.uint8, float32=torch.float32)
    packs = prep.packs()
    stream = _stream_ptr(device)
    where = x.device
    poison = _cuda._poison
    launch = prep.launch
    bufs: list = [None] * plan.n_buffers
    vals = [x.data_ptr(), seed] + bufs
    li = 0
    for step in plan.steps:
        kind = type(step)
        if kind is _plan.Buffer:
            init = step.init
            if init == _plan.EMPTY:
                a = torch.empty(step.shape, dtype=_TORCH_DTYPES[step.dtype], device=where)
                if poison and a.numel():
                    (a if step.dtype == "uint8" else a.view(torch.uint8)).fill_(0xA5)
            elif init == _plan.ZEROS:
                a = torch.empty(step.shape, dtype=_TORCH_DTYPES[step.dtype], device=where)
                nbytes = a.numel() * a.element_size()
                if nbytes:
                    prep.memset(a.data_ptr(), 0, nbytes, stream)
            elif init == _plan.AMAX:
                a = torch.empty(step.shape, dtype=torch.float32, device=where)
                a.copy_(amax.detach().reshape(-1))
            elif init == _plan.COPY:
                a = bufs[step.src].clone()
            else:                                       # VIEW
                a = bufs[step.src][step.start:step.start + step.shape[0]]
            bufs[step.slot] = a
            vals[_VAL_BUF0 + step.slot] = a.data_ptr()
        elif kind is _plan.Launch:
            fn, grid, block, _, dyn = prep.launches[li]
            values, _, params = packs[li]
            for i, j in dyn:
                values[i] = vals[j]
            launch(fn, grid, 1, 1, block, 1, 1, 0, stream, params, 0)
            li += 1
        else:                                           # ZeroFill
            bufs[step.slot].zero_()
    return bufs

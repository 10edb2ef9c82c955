"""Runs a launch plan (fp4kit._plan) with PyTorch tensors (``run``) or CuPy arrays (``run_cupy``):
the fast paths of PyTorch and CuPy callers.

Buffers come from PyTorch's caching allocator on the input's device (``torch.empty``; 0xA5 in
every byte of an EMPTY buffer when output poisoning is on, like ``fp4kit._cuda._empty``; ZEROS
buffers cleared with ``cudaMemsetAsync`` on the launch stream, as ``cupy.zeros`` does on the general
path: 5.5 us of host time against 9.9 us for ``torch.zeros``'s fill kernel on the H200,
scripts/host_overhead.py), and every kernel is launched with ``cuLaunchKernel`` (CuPy's thin
binding ``cupy.cuda.driver.launchKernel``) on PyTorch's current stream with raw device pointers;
or, with programmatic dependent launch (``PDL`` below), with ``cuLaunchKernelEx``.
No CuPy array, DLPack exchange or CuPy stream wrapper is created; the kernels themselves are the
ones ``fp4kit._loader`` compiled and loaded (CUfunction handles of its cupy.RawKernel objects).
``run_cupy`` does the same with ``cupy.empty`` buffers on CuPy's current stream: the launches
skip cupy.RawKernel's per-call argument handling (host time, H100: quantize of a 16 x 4096 float16
CuPy array, MXFP8 rowwise, 92.6 us on the general path; see docs/performance.md).

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
import os
import threading

from . import _cuda, _plan

__all__ = ["run", "run_cupy", "dequantize_launch", "raw_launch"]

_U64 = (1 << 64) - 1
_SCALAR_MASK = {"i64": _U64, "u64": _U64, "i32": 0xFFFF_FFFF, "u32": 0xFFFF_FFFF}

# Where a dynamic argument's value comes from, in the per-call `vals` list: 0 the input's pointer,
# 1 the seed, 2 the caller's amax, 3 / 4 a grouped op's first / last dims, 5 + n the pointer of buffer n.
_VAL_X, _VAL_SEED, _VAL_AMAX, _VAL_FD, _VAL_LD, _VAL_BUF0 = 0, 1, 2, 3, 4, 5
_VAL_OF_KIND = {"x": _VAL_X, "seed": _VAL_SEED, "amax": _VAL_AMAX, "fd": _VAL_FD, "ld": _VAL_LD}


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


# Programmatic dependent launch (Hopper and later). Kernels are launched with cuLaunchKernelEx and
# CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION: the driver may schedule such a kernel's
# CTAs as soon as every CTA of the kernel ahead of it has passed its
# griddepcontrol.launch_dependents, instead of after that kernel's completion and memory flush.
# Every fp4kit kernel starts with FP4KIT_GRID_DEP() (cuda_src/common/types.cuh): it waits there,
# before any memory access, until the kernels it depends on have completed and their writes are
# visible, so the kernel reads and writes exactly what it would after an ordinary launch. A kernel
# ahead that never triggers (the caller's own) counts as triggering when it completes, so the
# overlap is with fp4kit's kernels: a plan's later kernels (item 134 of docs/performance.md) and,
# with PDL_ALL, a plan's first kernel (unless the call clears, copies or fills a buffer before it:
# _nothing_before_first_launch) and the one-kernel raw launches (dequantize, group_dequantize)
# after the previous fp4kit call's kernels (item 136).
# PDL: the switch (read when a thread packs a plan's launches: fp4kit._plan.clear_plans() drops
# the packed executors); False (FP4KIT_PDL=0 in the environment), or a driver without
# cuLaunchKernelEx, launches every kernel with cuLaunchKernel. A programmatic launch the driver
# refuses while the same launch without the attribute succeeds (a tool or driver without PDL)
# switches PDL off for the process (_pdl_refused); any other launch error is raised as before.
PDL = os.environ.get("FP4KIT_PDL", "").strip() not in ("0", "false", "False", "off")
_pdl_refused = 0        # the CUresult of the refused programmatic launch, if one was
# PDL for every fast-path launch; False: a plan's second and later kernels only (the A/B switch of
# scripts/ab_variants.py; read where PDL is)
PDL_ALL = True
# a plan's first kernel with PDL even when the call clears or copies a buffer (cudaMemsetAsync, a
# PyTorch copy or fill) before it: no kernel of fp4kit's is then right ahead of it (A/B switch)
PDL_AFTER_MEMSET = False
_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6


class _LaunchAttribute(ctypes.Structure):
    """CUlaunchAttribute: the id, padding to 8 bytes, a 64-byte value union (here its int member)."""
    _fields_ = [("id", ctypes.c_int), ("_pad", ctypes.c_char * 4), ("value", ctypes.c_int),
                ("_rest", ctypes.c_char * 60)]


class _LaunchConfig(ctypes.Structure):
    """CUlaunchConfig."""
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(_LaunchAttribute)), ("numAttrs", ctypes.c_uint)]


_launch_ex_fn = None     # cuLaunchKernelEx through ctypes; False when the driver has none


def _launch_ex():
    """ctypes' cuLaunchKernelEx(config, f, kernelParams, extra) -> CUresult, or None (no such entry
    point: a driver before CUDA 12.0, or no libcuda.so.1)."""
    global _launch_ex_fn
    if _launch_ex_fn is None:
        try:
            fn = ctypes.CDLL("libcuda.so.1").cuLaunchKernelEx
        except (OSError, AttributeError):
            fn = False
        else:
            fn.restype = ctypes.c_int
            fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        _launch_ex_fn = fn
    return _launch_ex_fn or None


class _PdlLaunch:
    """One launch's cuLaunchKernelEx configuration with programmatic stream serialization (per
    thread, like the packed arguments: the stream is written per call)."""
    __slots__ = ("config", "attr", "address", "fn")

    def __init__(self, grid: tuple, block: int, fn):
        self.attr = _LaunchAttribute(id=_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, value=1)
        self.config = _LaunchConfig(grid[0], grid[1], grid[2], block, 1, 1, 0, None,
                                    ctypes.pointer(self.attr), 1)
        self.address = ctypes.addressof(self.config)
        self.fn = fn

    def __call__(self, f: int, stream: int, params: int) -> None:
        self.config.hStream = stream
        status = self.fn(self.address, f, params, None)
        if status:
            _pdl_failed(self.config, f, stream, params, status)


def _pdl_failed(config, f: int, stream: int, params: int, status: int) -> None:
    """A programmatic launch returned `status`: the same launch with cuLaunchKernel. Its error, if
    it fails too, is the call's; if it succeeds, the driver refused the attribute alone: PDL is
    switched off and the memoised plans dropped (their executors pack plain launches when next
    built), so every later launch is an ordinary one."""
    global PDL, _pdl_refused
    _driver_launch()(f, config.gridDimX, config.gridDimY, config.gridDimZ, config.blockDimX, 1, 1, 0, stream,
                     params, 0)
    PDL, _pdl_refused = False, status
    _plan.clear_plans()


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


# Operations of a prepared plan (_Prepared.program), one per plan step, each a 6-tuple
# (op, slot or launch number, a, b, c, d) with the op's fields resolved once (see _Prepared).
# _OP_LAUNCH_DIMS: a launch whose last parameter is a "dims" struct (fp4kit._plan.Arg): its 8-byte
# words follow the other slots in the launch's packed values and are written from the call's host
# values first. HOST buffers (one host-to-device copy) are the general path's alone: the fast path
# passes host values as "dims" arguments.
_OP_EMPTY, _OP_ZEROS, _OP_COPY, _OP_VIEW, _OP_LAUNCH, _OP_ZERO_FILL, _OP_FILL, _OP_ARENA, _OP_LAUNCH_DIMS = range(9)
# A plan with `arena` set: its one-dimensional EMPTY / ZEROS buffers come from one uint8 allocation
# (_OP_ARENA, at the first of them), each at a multiple of _ARENA_ALIGN bytes; the buffers the
# caller gets (outputs, sources of views and copies) as views of it, the others only as pointers.
# Buffers larger than _ARENA_MAX bytes keep their own allocation: a large scratch buffer is freed
# once the call has queued its work instead of living as long as the results, and a large output
# (an operand's codes or scales) can be freed on its own (a view keeps its whole allocation alive).
_ARENA_ALIGN = 256
_ARENA_MAX = 1 << 20
# plan buffer dtypes: fp4kit._cuda._NP_DTYPES names them (the general path's CuPy dtypes)
_ITEMSIZE = {n: d().itemsize for n, d in _cuda._NP_DTYPES.items()}


class _Prepared:
    """What this executor derives from a plan once: the plan's steps as a program of operations
    with everything that does not depend on the call resolved (torch dtypes, byte counts, slice
    bounds; per launch the CUDA function, grid, block, the static 8-byte argument values and the
    (slot, value source) pairs written per call); and, per thread, the packed argument arrays."""

    __slots__ = ("launch", "memset", "launches", "program", "empty", "full", "uint8", "tls", "stream", "ndarray", "first_pdl")

    def __init__(self, plan, lib: str = "torch"):
        if lib == "torch":
            torch = _torch()
            if not _TORCH_DTYPES:
                _TORCH_DTYPES.update({n: getattr(torch, n) for n in _ITEMSIZE})
            dtypes = _TORCH_DTYPES
            self.empty = torch.empty
            self.full = torch.full
            self.uint8 = torch.uint8
            self.stream = None
        else:                                       # CuPy: NumPy dtypes, cupy.empty, CuPy's current stream
            import cupy
            import numpy as np
            dtypes = {n: np.dtype(d) for n, d in _cuda._NP_DTYPES.items()}
            self.empty = cupy.empty
            self.full = cupy.full
            self.uint8 = np.uint8
            self.stream = cupy.cuda.get_current_stream
        self.ndarray = None if lib == "torch" else cupy.ndarray
        self.launch = _driver_launch()
        self.memset = _memset_async()
        self.launches: list[tuple] = []
        program = []
        arena = _arena_layout(plan, torch_views=lib == "torch", dtypes=dtypes) if plan.arena else None
        for step in plan.steps:
            kind = type(step)
            if arena is not None and kind is _plan.Buffer and step.slot in arena[1]:
                if arena[0] is not None:                    # the arena's op, at its first buffer
                    program.append(arena[0])
                    arena = (None, arena[1])
                continue
            if kind is _plan.Buffer:
                n = 1
                for d in step.shape:
                    n *= d
                init = step.init
                if init == _plan.EMPTY:
                    # (shape, torch dtype, poison fill needed: non-empty, uint8 already)
                    program.append((_OP_EMPTY, step.slot, step.shape, dtypes[step.dtype], n > 0,
                                    step.dtype == "uint8"))
                elif init == _plan.ZEROS:
                    # (shape, torch dtype, bytes to clear)
                    program.append((_OP_ZEROS, step.slot, step.shape, dtypes[step.dtype],
                                    n * _ITEMSIZE[step.dtype], None))
                elif init == _plan.COPY:
                    program.append((_OP_COPY, step.slot, step.src, None, None, None))
                elif init == _plan.FILL:                    # (shape, dtype, value)
                    program.append((_OP_FILL, step.slot, step.shape, dtypes[step.dtype], step.value, None))
                elif init == _plan.VIEW:                    # (source, start, stop)
                    program.append((_OP_VIEW, step.slot, step.src, step.start, step.start + step.shape[0], None))
                else:
                    raise ValueError(f"fp4kit internal: buffer init {init!r} runs on fp4kit._cuda.run_plan only")
            elif kind is _plan.Launch:
                statics = [0] * len(step.args)
                dyn = []
                blob = None
                for i, a in enumerate(step.args):
                    if a.kind == "dims":
                        if i != len(step.args) - 1:
                            raise ValueError(f"fp4kit internal: {step.kernel}: a 'dims' argument must come last")
                        blob = (i, a.value)                     # (its first slot, its first host value)
                    elif a.kind in _VAL_OF_KIND:
                        dyn.append((i, _VAL_OF_KIND[a.kind], 0))
                    elif a.kind == "buf":
                        dyn.append((i, _VAL_BUF0 + a.value, a.offset))
                    elif a.kind != "null":                      # "null" stays 0
                        statics[i] = a.value & _SCALAR_MASK[a.kind]
                fn = _function_handle(step.module, step.kernel)
                # (launch number, CUfunction, grid, block, dynamic slots (with the "dims" struct's
                # first slot and first host value))
                grid = (step.grid, step.grid_y, step.grid_z)
                if blob is None:
                    program.append((_OP_LAUNCH, len(self.launches), fn, grid, step.block, tuple(dyn)))
                else:
                    program.append((_OP_LAUNCH_DIMS, len(self.launches), fn, grid, step.block, (tuple(dyn),) + blob))
                    statics += [0] * (_plan.DIMS_ARG_MAX - 1)   # the struct's words after its first
                self.launches.append((fn, grid, step.block, tuple(statics), tuple(dyn), len(step.args)))
            else:                                           # ZeroFill
                program.append((_OP_ZERO_FILL, step.slot, None, None, None, None))
        self.program = tuple(program)
        self.first_pdl = _nothing_before_first_launch(self.program)
        self.tls = threading.local()

    def packs(self) -> list:
        """This thread's (values, params, params address) per launch, built on its first call."""
        packs = getattr(self.tls, "packs", None)
        if packs is None:
            _ensure_context()
            ex = _launch_ex() if PDL else None
            first = PDL_ALL and (self.first_pdl or PDL_AFTER_MEMSET)
            packs = self.tls.packs = [
                _pack(statics, n_params) + (_PdlLaunch(grid, block, ex) if ex is not None and (n or first) else None,)
                for n, (_, grid, block, statics, _, n_params) in enumerate(self.launches)]
        return packs


def _nothing_before_first_launch(program: tuple) -> bool:
    """Whether a call of `program` queues no stream work before its first kernel: no buffer
    cleared (cudaMemsetAsync: ZEROS buffers, zero fills, an arena's zero ranges), copied or filled
    (PyTorch / CuPy), so the kernel ahead of the first one is the previous call's."""
    for op in program:
        if op[0] in (_OP_LAUNCH, _OP_LAUNCH_DIMS):
            return True
        if op[0] in (_OP_ZEROS, _OP_ZERO_FILL, _OP_COPY, _OP_FILL) or (op[0] == _OP_ARENA and op[5]):
            return False
    return True


def _arena_layout(plan, torch_views: bool, dtypes: dict):
    """(the _OP_ARENA program op, the set of buffer numbers it creates) for a plan with `arena`.

    The op: (_OP_ARENA, total bytes, torch split sizes (chunks alternate a view's bytes and the gap
    to the next view, the last one the rest) or None, views (torch: (slot, dtype or None for
    uint8, chunk); CuPy: (slot, byte offset, elements, dtype)), pointers ((slot, byte offset) of
    every buffer), zero ranges ((byte offset, bytes) of the ZEROS buffers))."""
    needed = plan.output_slots()
    for st in plan.steps:
        if type(st) is _plan.Buffer and st.init in (_plan.VIEW, _plan.COPY):
            needed.add(st.src)
        elif type(st) is _plan.ZeroFill:
            needed.add(st.slot)
    members = []
    for st in plan.steps:
        if type(st) is _plan.Buffer and st.init in (_plan.EMPTY, _plan.ZEROS) and len(st.shape) == 1:
            nbytes = st.shape[0] * _ITEMSIZE[st.dtype]
            if nbytes <= _ARENA_MAX:
                members.append((st.slot in needed, st, nbytes))
    members.sort(key=lambda m: not m[0])            # the views first (stable: plan order within)
    views: list[tuple]      # torch: (slot, dtype or None, chunk); CuPy: (slot, offset, elements, dtype)
    off, end, ptrs, zeros, views, sizes = 0, 0, [], [], [], []    # end: where the last torch chunk ends
    for keep, st, nbytes in members:
        ptrs.append((st.slot, off))
        if st.init == _plan.ZEROS and nbytes:
            zeros.append((off, nbytes))
        if keep:
            if torch_views:
                if off > end:
                    sizes.append(off - end)                     # the gap before this view
                views.append((st.slot, None if st.dtype == "uint8" else dtypes[st.dtype], len(sizes)))
                sizes.append(nbytes)
                end = off + nbytes
            else:
                views.append((st.slot, off, st.shape[0], dtypes[st.dtype]))
        off += -(-nbytes // _ARENA_ALIGN) * _ARENA_ALIGN
    total = off
    if torch_views:
        sizes.append(total - end)
    op = (_OP_ARENA, total, tuple(sizes) if torch_views else None, tuple(views), tuple(ptrs), tuple(zeros))
    return op, {st.slot for _, st, _ in members}


def _pack(statics: tuple, n_params: int | None = None):
    """8-byte value slots initialised to `statics`, and the void* array pointing at the first
    `n_params` of them (default: all), one per kernel parameter: a struct parameter that comes
    last spans the slots from its own to the end."""
    n = len(statics)
    if n == 0:
        return (None, None, 0)
    values = (ctypes.c_uint64 * n)(*statics)
    base = ctypes.addressof(values)
    params = (ctypes.c_void_p * (n if n_params is None else n_params))(
        *[base + 8 * i for i in range(n if n_params is None else n_params)])
    return (values, params, ctypes.addressof(params))


_TORCH_DTYPES: dict = {}


def _launch(prep, values, fn, grid, block, dyn, vals, stream) -> None:
    """One launch of a prepared plan: this call's pointers and seed into the packed slots
    `values` (the (slot, source, byte offset) triples `dyn`, sources from `vals`), then cuLaunchKernel."""
    v = values[0]
    for i, j, o in dyn:
        v[i] = vals[j] + o
    pdl = values[3]
    if pdl is None:
        prep.launch(fn, grid[0], grid[1], grid[2], block, 1, 1, 0, stream, values[2], 0)
    else:
        pdl(fn, stream, values[2])


def _launch_dims(prep, values, fn, grid, block, d, vals, stream, host_vals: tuple) -> None:
    """A launch whose last parameter is a "dims" struct (_OP_LAUNCH_DIMS; d: (dynamic slots, the
    struct's first slot, its first host value)): the call's host values into the struct's slots,
    then _launch."""
    h = host_vals[d[2]:d[2] + _plan.DIMS_ARG_MAX]
    values[0][d[1]:d[1] + len(h)] = h
    _launch(prep, values, fn, grid, block, d[0], vals, stream)


def run(plan, x, amax, seed: int, device: int, x_ptr: int | None = None, fd_ptr: int = 0, ld_ptr: int = 0,
        host_vals: tuple = ()) -> list:
    """Run `plan` with PyTorch on `device` (the current device of PyTorch and CuPy, where x is) and
    PyTorch's current stream there.

    x: the C-contiguous input tensor ("x" arguments); amax: the caller's float32 CUDA tensor ("amax"
    arguments) or None; seed: the "seed" argument; x_ptr: x.data_ptr() when the caller has it;
    fd_ptr / ld_ptr: a grouped op's int64 dims ("fd" / "ld" arguments); host_vals: the call's host
    values ("dims" arguments: non-negative ints).
    Returns the plan's buffers as tensors, indexed by buffer number.
    """
    prep = plan.exec_cache.get("torch")
    if prep is None:
        prep = plan.exec_cache["torch"] = _Prepared(plan)
    packs = getattr(prep.tls, "packs", None)        # prep.packs(), inlined for its common case
    if packs is None:
        packs = prep.packs()
    stream = _stream_ptr(device)
    where = x.device
    poison = _cuda._poison
    empty = prep.empty
    bufs: list = [None] * plan.n_buffers
    if amax is not None and not amax.is_contiguous():
        amax = amax.contiguous()                    # kept alive by this frame until the launches are queued
    vals = [x.data_ptr() if x_ptr is None else x_ptr, seed, 0 if amax is None else amax.data_ptr(), fd_ptr, ld_ptr] + bufs
    for op, slot, a, b, c, d in prep.program:
        if op == _OP_LAUNCH:                            # slot: launch number; a, b, c, d: fn, (gx, gy, gz), block, dyn
            _launch(prep, packs[slot], a, b, c, d, vals, stream)
            continue
        if op == _OP_LAUNCH_DIMS:
            _launch_dims(prep, packs[slot], a, b, c, d, vals, stream, host_vals)
            continue
        if op == _OP_ARENA:                             # slot: bytes; a: split sizes; b: views; c: pointers; d: zeros
            t = empty(slot, dtype=prep.uint8, device=where)
            base = t.data_ptr()
            if poison and slot:
                t.fill_(0xA5)
            if b:
                chunks = t.split_with_sizes(a)
                for s_, dt, k in b:
                    bufs[s_] = chunks[k] if dt is None else chunks[k].view(dt)
            for s_, off in c:
                vals[_VAL_BUF0 + s_] = base + off
            for off, n in d:
                prep.memset(base + off, 0, n, stream)
            continue
        if op == _OP_EMPTY:                             # a, b: shape, dtype; c: not empty; d: uint8
            t = empty(*a, dtype=b, device=where)        # sizes as arguments: ~2 us less than a tuple
            if poison and c:
                (t if d else t.view(prep.uint8)).fill_(0xA5)
            ptr = t.data_ptr()
        elif op == _OP_ZEROS:                           # c: bytes
            t = empty(*a, dtype=b, device=where)
            ptr = t.data_ptr()
            if c:
                prep.memset(ptr, 0, c, stream)
        elif op == _OP_COPY:                            # a: source buffer
            t = bufs[a].clone()
            ptr = t.data_ptr()
        elif op == _OP_VIEW:                            # a: source buffer, b:c its elements
            t = bufs[a][b:c]
            ptr = t.data_ptr()
        elif op == _OP_FILL:                            # a, b, c: shape, dtype, value
            t = prep.full(a, c, dtype=b, device=where)
            ptr = t.data_ptr()
        else:                                           # ZeroFill
            bufs[slot].zero_()
            continue
        bufs[slot] = t
        vals[_VAL_BUF0 + slot] = ptr
    return bufs


def run_cupy(plan, x, amax, seed: int, x_ptr: int, fd_ptr: int = 0, ld_ptr: int = 0, host_vals: tuple = ()) -> list:
    """Run `plan` with CuPy on the current device (where x is) and CuPy's current stream there.

    x: the C-contiguous input array ("x" arguments; its pointer `x_ptr`); amax: the caller's float32
    CuPy array ("amax" arguments) or None; seed: the "seed" argument; fd_ptr / ld_ptr / host_vals as
    for run. Returns the plan's buffers as
    CuPy arrays, indexed by buffer number: the same arrays fp4kit._cuda.run_plan makes (cupy.empty,
    0xA5 in every byte of an EMPTY buffer when output poisoning is on, ZEROS cleared on the stream).
    """
    prep = plan.exec_cache.get("cupy")
    if prep is None:
        prep = plan.exec_cache["cupy"] = _Prepared(plan, "cupy")
    packs = getattr(prep.tls, "packs", None)
    if packs is None:
        packs = prep.packs()
    stream = prep.stream().ptr
    poison = _cuda._poison
    empty = prep.empty
    bufs: list = [None] * plan.n_buffers
    if amax is not None and not amax.flags.c_contiguous:
        amax = amax.copy()                          # C order; kept alive by this frame until queued
    vals = [x_ptr, seed, 0 if amax is None else amax.data.ptr, fd_ptr, ld_ptr] + bufs
    for op, slot, a, b, c, d in prep.program:
        if op == _OP_LAUNCH:
            _launch(prep, packs[slot], a, b, c, d, vals, stream)
            continue
        if op == _OP_LAUNCH_DIMS:
            _launch_dims(prep, packs[slot], a, b, c, d, vals, stream, host_vals)
            continue
        if op == _OP_ARENA:                         # slot: bytes; b: views; c: pointers; d: zeros
            t = empty((slot,), dtype=prep.uint8)
            mem = t.data
            base = mem.ptr
            if poison and slot:
                t.fill(0xA5)
            for s_, off, n, dt in b:
                bufs[s_] = prep.ndarray((n,), dt, memptr=mem + off)
            for s_, off in c:
                vals[_VAL_BUF0 + s_] = base + off
            for off, n in d:
                prep.memset(base + off, 0, n, stream)
            continue
        if op == _OP_EMPTY:
            t = empty(a, dtype=b)
            if poison and c:
                (t if d else t.view(prep.uint8)).fill(0xA5)
        elif op == _OP_ZEROS:
            t = empty(a, dtype=b)
            if c:
                prep.memset(t.data.ptr, 0, c, stream)
        elif op == _OP_COPY:
            t = bufs[a].copy()
        elif op == _OP_VIEW:
            t = bufs[a][b:c]
        elif op == _OP_FILL:
            t = prep.full(a, c, dtype=b)
        else:                                       # ZeroFill
            bufs[slot].fill(0)
            continue
        bufs[slot] = t
        vals[_VAL_BUF0 + slot] = t.data.ptr
    return bufs


# ---------------------------------------------------------------------------------------------
# one kernel with per-call arguments (the dequantize fast paths): the values written into this
# thread's packed slots for that argument count, then one cuLaunchKernel, or with PDL and PDL_ALL
# one cuLaunchKernelEx with programmatic stream serialization.

_RAW_FUNCS: dict = {}       # (device, module, kernel name) -> CUfunction
_RAW_TLS = threading.local()


def raw_launch(dev: int, module: str, kernel: str, grid: int, values: tuple, stream: int) -> None:
    """Launch cuda_src/<module>.cu `kernel` with `grid` CTAs of _cuda._THREADS threads on `stream`
    of device `dev` (current). values: one int per kernel parameter, in order (pointers, and
    integers of the parameter's C type: a 4-byte int sits in the low half of its 8-byte slot)."""
    fn = _RAW_FUNCS.get((dev, module, kernel))
    if fn is None:
        fn = _RAW_FUNCS[(dev, module, kernel)] = _function_handle(module, kernel)
    packs = getattr(_RAW_TLS, "packs", None)
    if packs is None:
        _ensure_context()
        packs = _RAW_TLS.packs = {}
    n = len(values)
    pack = packs.get(n)
    if pack is None:
        ex = _launch_ex()
        pack = packs[n] = (_pack((0,) * n), _driver_launch(),
                           _PdlLaunch((1, 1, 1), _cuda._THREADS, ex) if ex is not None else None)
    (slots, _, params), launch, pdl = pack
    for i, v in enumerate(values):
        slots[i] = v & _U64
    if pdl is not None and PDL and PDL_ALL:
        pdl.config.gridDimX = grid
        pdl(fn, stream, params)
    else:
        launch(fn, grid, 1, 1, _cuda._THREADS, 1, 1, 0, stream, params, 0)


def dequantize_launch(dev: int, kernel: str, grid: int, data_ptr: int, scales_ptr: int, amax_ptr: int,
                      rows: int, cols: int, swizzled: int, row_scaled: int, out_ptr: int, stream: int) -> None:
    """Launch dequantize.cu `kernel` (data, scales, amax, i64 rows, i64 cols, int swizzled, int
    row_scaled, out) with `grid` CTAs of _cuda._THREADS threads on `stream` of device `dev` (current)."""
    raw_launch(dev, "dequantize", kernel, grid, (data_ptr, scales_ptr, amax_ptr, rows, cols, swizzled, row_scaled,
                                                 out_ptr), stream)

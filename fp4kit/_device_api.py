"""The CUDA side of the public API: device arrays in, device arrays (caller's library) out.

validate (fp4kit._validate, before any launch) -> view as CuPy (fp4kit._interop) -> launch on the
caller's current stream and device (fp4kit._cuda) -> wrap the results back in the caller's library.

quantize of a PyTorch CUDA tensor takes a fast path when it can (see _torch_fast_device): the
same validation, the same launch plan (fp4kit._plan), run by fp4kit._torch_exec with PyTorch
tensors and raw launches, without CuPy arrays or DLPack. A CuPy array takes the same fast path
(_cupy_fast_device; fp4kit._torch_exec.run_cupy: CuPy buffers, raw launches). A strided view of
either library that is otherwise eligible is copied contiguous by that library first and takes
the fast path too. The general path of a PyTorch caller takes its CuPy buffers from PyTorch's
caching allocator (_device_ctx).
"""
from __future__ import annotations

import numpy as np

from . import _interop, _plan, _torch_exec
from ._cuda import _sm_count_of
from ._validate import check_amax_values, check_choice, check_dtype, flat_2d, native_order, quantize_options
from .formats import DTYPES, FORMATS
from .tensor import Operand, QuantizedTensor, _operand_unchecked, _options_with_seed, _quantized_unchecked

__all__ = ["quantize", "dequantize", "swizzle_scales", "unswizzle_scales", "group_quantize", "group_dequantize"]


def _cuda():
    from . import _cuda as c
    return c


class _TorchDeviceCtx:
    """cupy.cuda.Device(dev) with CuPy's allocations taken from PyTorch's caching allocator
    (fp4kit._interop.torch_allocator): the general path's context for a PyTorch caller."""

    __slots__ = ("_dev", "_alloc")

    def __init__(self, dev: int):
        import cupy
        self._dev = cupy.cuda.Device(dev)
        self._alloc = cupy.cuda.using_allocator(_interop.torch_allocator(dev))

    def __enter__(self):
        self._dev.__enter__()
        try:
            self._alloc.__enter__()
        except BaseException:
            self._dev.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        try:
            self._alloc.__exit__(*exc)
        finally:
            self._dev.__exit__(*exc)
        return False


def _device_ctx(dev: int, library: str | None = None):
    """Enter the array's device; for a PyTorch caller (`library` "torch") CuPy's buffers inside
    come from PyTorch's caching allocator on that device and stream (graph-capture safe:
    fp4kit._interop.torch_allocator), and results reach PyTorch, without copies, as views of the
    tensors that own that memory (fp4kit._interop.to_library; DLPack only where there is none)."""
    if library == "torch":
        return _TorchDeviceCtx(dev)
    import cupy
    return cupy.cuda.Device(dev)


def device_input(x, name="x", dtypes=DTYPES):
    if not _interop.is_device_array(x):
        raise _interop.not_a_device_array(x, name)
    da = _interop.as_cupy(x, name)
    if da.dtype not in dtypes:
        want = ", ".join(dtypes[:-1]) + " or " + dtypes[-1] if len(dtypes) > 1 else dtypes[0]
        raise TypeError(f"{name}: expected dtype {want}, got {da.dtype}")
    return da


def _amax_input(amax, dev: int, x):
    """amax= as a CuPy float32 array on `dev` (NumPy input is uploaded; not inside a CUDA graph
    capture on x's stream, which cannot record the copy)."""
    if amax is None:
        return None, None, None
    if isinstance(amax, np.ndarray):
        amax = native_order(amax)
        if amax.dtype != np.float32:
            raise TypeError(f"amax: expected a float32 array, got dtype {amax.dtype}")
        amax = check_amax_values(amax)          # -0 as +0 here; a device amax in the AMAX copy (_cuda)
        _interop.refuse_host_copy_in_capture(x, "amax", "a NumPy amax")
        import cupy
        # on the stream the kernels will run on (a copy from pageable memory may still be in
        # flight when cupy.asarray returns), with the caller's library's memory
        with _device_ctx(dev, _interop.library_of(x)), _interop.current_stream(x):
            return cupy.asarray(amax), amax.shape, "float32"
    if not _interop.is_device_array(amax):
        raise _interop.not_a_device_array(amax, "amax", "a float32 NumPy array or CUDA device array")
    da = _interop.as_cupy(amax, "amax")
    if da.device != dev:
        raise ValueError(f"amax: expected an array on device {dev} (where x is), got device {da.device}")
    return da.array, da.shape, da.dtype


def _wrap(op: dict | None, rows: int, cols: int, fmt, layout: str, lib: str):
    if op is None:
        return None
    conv = lambda a: None if a is None else _interop.to_library(a, lib)  # noqa: E731
    return Operand(data=conv(op["data"]), scales=conv(op["scales"]), scale_layout=layout, amax=conv(op["amax"]),
                   rows=rows, cols=cols, format=fmt.name)


_FAST_DTYPES = frozenset(("float32", "bfloat16", "float16"))
_torch_mod = None           # torch and cupy.cuda.runtime, imported by the first torch input
_cupy_runtime = None
_torch_current_device = None    # torch._C._cuda_getDevice (0.23 us; torch.cuda.current_device 0.62 us)


def _import_torch():
    """torch, imported once (by the first torch array), with PyTorch's current-device query."""
    global _torch_mod, _torch_current_device
    import torch
    # PyTorch's current device without torch.cuda.current_device()'s Python layer (its lazy
    # initialisation has run: a CUDA tensor exists); the public function where the binding is absent
    _torch_current_device = (getattr(getattr(torch, "_C", None), "_cuda_getDevice", None)
                             or torch.cuda.current_device)
    _torch_mod = torch
    return torch


def _runtime():
    """cupy.cuda.runtime (imported once)."""
    global _cupy_runtime
    if _cupy_runtime is None:
        from cupy.cuda import runtime
        _cupy_runtime = runtime
    return _cupy_runtime


def _import_cupy_ndarray():
    """cupy.ndarray, imported once (by the first CuPy array)."""
    global _cupy_ndarray
    import cupy
    _cupy_ndarray = cupy.ndarray
    return _cupy_ndarray


def _torch_fast_device(x, amax, any_strides: bool = False) -> int | None:
    """x's device index when quantize can take the PyTorch fast path, else None.

    The fast path needs: x a dense (strided) torch.Tensor (or nn.Parameter; other subclasses take
    the general path) on a CUDA device, C-contiguous, float32 / bfloat16 / float16, on the device that is
    current for both PyTorch and CuPy (kernels are loaded per CuPy device, launched in the current
    context); amax None or a float32 CUDA torch.Tensor on the same device. With `any_strides`, x
    need not be C-contiguous (quantize and group_quantize then run the fast path on
    x.contiguous()). Whatever fails the rest takes the general path, which validates, copies and
    converts exactly as before.
    """
    if not type(x).__module__.startswith("torch"):
        return None
    torch = _torch_mod or _import_torch()
    if type(x) is not torch.Tensor and type(x) is not torch.nn.Parameter:
        return None
    if (not x.is_cuda or x.layout is not torch.strided or _interop.dtype_name(x) not in _FAST_DTYPES
            or not (any_strides or x.is_contiguous())):
        return None
    dev = x.get_device()
    if amax is not None and (type(amax) is not torch.Tensor or not amax.is_cuda or amax.layout is not torch.strided
                             or amax.dtype != torch.float32 or amax.get_device() != dev):
        return None
    if dev != _torch_current_device() or dev != _runtime().getDevice():  # type: ignore[misc]  # set with _torch_mod
        return None
    return dev


_cupy_ndarray = None


def _cupy_fast_device(x, amax, any_strides: bool = False) -> int | None:
    """x's device index when quantize can take the fast path with CuPy arrays, else None: x a
    cupy.ndarray (not a subclass), C-contiguous, of a dtype in _FAST_DTYPES (float32, float16, or
    bfloat16 where CuPy holds one), on CuPy's current device; amax None or a float32 cupy.ndarray
    on that device. With `any_strides`, x need not be C-contiguous (quantize and group_quantize
    then run the fast path on its C-contiguous copy, _cupy_contiguous). Anything else takes the
    general path."""
    nd = _cupy_ndarray
    if nd is None:
        if not type(x).__module__.startswith("cupy"):
            return None
        nd = _import_cupy_ndarray()
    if type(x) is not nd or not (any_strides or x.flags.c_contiguous) or _interop.dtype_name(x) not in _FAST_DTYPES:
        return None
    dev = x.device.id
    if amax is not None and (type(amax) is not nd or amax.dtype != np.float32 or amax.device.id != dev):
        return None
    if dev != _runtime().getDevice():
        return None
    return dev


def _strided_fast(x, amax):
    """(contiguous copy, device, "torch" | "cupy") for a strided PyTorch tensor or CuPy array that the
    fast path takes once contiguous: the copy made by its library on its current stream (quantize
    and group_quantize). None for anything else."""
    dev = _torch_fast_device(x, amax, any_strides=True)
    if dev is not None:
        return x.contiguous(), dev, "torch"
    dev = _cupy_fast_device(x, amax, any_strides=True)
    if dev is not None:
        return _cupy_contiguous(x), dev, "cupy"
    return None


def _cupy_contiguous(x):
    """A C-contiguous copy of CuPy array x on CuPy's current stream (bfloat16 through its uint16
    bits, which every CuPy version copies)."""
    import cupy
    if _interop.dtype_name(x) == "bfloat16":
        return cupy.ascontiguousarray(x.view(cupy.uint16)).view(x.dtype)
    return cupy.ascontiguousarray(x)


def _torch_operand(slots, bufs: list, rows: int, cols: int, fmt, layout: str):
    if slots is None:
        return None
    return Operand(data=bufs[slots.data], scales=bufs[slots.scales], scale_layout=layout,
                   amax=None if slots.amax is None else bufs[slots.amax], rows=rows, cols=cols, format=fmt.name)


def _operand_spec(slots, rows: int, cols: int):
    return None if slots is None else (slots.data, slots.scales, slots.amax, rows, cols)


_OPTION_NAMES = ("axis", "scale_layout", "scale_rule", "tile_2d", "row_scaled", "rht", "rht_sign_mask", "rounding")
_MAX_FAST_CALLS = 4096
_SEED_MAX = 2**64 - 1


def _quantize_fast(x, dev: int, fmt, amax, options: tuple, seed, lib: str = "torch") -> QuantizedTensor:
    """quantize's fast path (x, amax: see _torch_fast_device, or _cupy_fast_device with lib
    "cupy"): the general path's validation and launch plan, run by fp4kit._torch_exec; results are
    torch tensors (CuPy arrays) of the general path's shapes, dtypes and bytes, queued on PyTorch's
    (CuPy's) current stream.

    options: quantize's keyword options but the seed, in _OPTION_NAMES order.

    A call whose signature (device, x's shape and dtype, x's pointer alignment, amax's shape, the
    format and options, each with its type, the seed aside) passed validation once is memoised in
    _plan.FAST_CALLS with its options, plan and result layout: a repeated call pays one dict lookup
    for validation and planning, and builds its result objects without re-running their
    constructors' checks (the first call of a signature built them with the checks, on buffers of
    the same shapes). The seed's only check (an integer in [0, 2**64 - 1]) depends on no other
    option: a plain int seed in range reuses the entry; any other seed goes through the checks.
    Failed validation is never memoised, so invalid calls raise the same errors every time.
    """
    x_ptr = x.data_ptr() if lib == "torch" else x.data.ptr
    try:
        key: tuple | None = (lib, dev, x.shape, x.dtype, _plan.align_class(x_ptr),
               None if amax is None else amax.shape, fmt, type(fmt), options, tuple(map(type, options)))
        hit = _plan.FAST_CALLS.get(key)
    except TypeError:                   # an unhashable format or option: the checks will name it
        key = hit = None
    if hit is None or type(seed) is not int or not 0 <= seed <= _SEED_MAX:
        return _quantize_fast_checked(x, dev, fmt, amax, options, seed, x_ptr, key, lib)
    opts, plan, shape, dn, fname, layout, row, col = hit
    if seed != opts.seed:
        opts = _options_with_seed(opts, seed)
    bufs = (_torch_exec.run(plan, x, amax, seed, dev, x_ptr) if lib == "torch"
            else _torch_exec.run_cupy(plan, x, amax, seed, x_ptr))
    if row is not None:
        d, sc, a, r, c = row
        row = _operand_unchecked(bufs[d], bufs[sc], layout, None if a is None else bufs[a], r, c, fname)
    if col is not None:
        d, sc, a, r, c = col
        col = _operand_unchecked(bufs[d], bufs[sc], layout, None if a is None else bufs[a], r, c, fname)
    return _quantized_unchecked(fname, shape, row, col, opts, dn)


def _quantize_fast_checked(x, dev: int, fmt, amax, options: tuple, seed, x_ptr: int, key,
                            lib: str = "torch") -> QuantizedTensor:
    """_quantize_fast without its memo: every check, the public result constructors; memoises
    the call's signature `key` (None: not memoisable) once everything has passed."""
    dn = _interop.dtype_name(x)
    shape = tuple(x.shape)
    opts = quantize_options(shape, dn, fmt, **dict(zip(_OPTION_NAMES, options)), seed=seed,
                            amax_shape=None if amax is None else tuple(amax.shape),
                            amax_dtype=None if amax is None else "float32")
    M, K = flat_2d(shape)
    plan = _plan.quantize_plan(dev, _sm_count_of, M, K, dn, opts, None if amax is None else amax.numel() if lib == "torch" else int(amax.size), x_ptr)
    bufs = (_torch_exec.run(plan, x, amax, opts.seed, dev, x_ptr) if lib == "torch"
            else _torch_exec.run_cupy(plan, x, amax, opts.seed, x_ptr))
    f = opts.fmt
    row, col = plan.outputs
    q = QuantizedTensor(format=f.name, shape=shape,
                        rowwise=_torch_operand(row, bufs, M, K, f, opts.scale_layout),
                        columnwise=_torch_operand(col, bufs, K, M, f, opts.scale_layout), options=opts,
                        input_dtype=dn)
    if key is not None:
        memo = _plan.FAST_CALLS
        if len(memo) >= _MAX_FAST_CALLS:            # many signatures: start over
            memo.clear()
        memo[key] = (opts, plan, shape, dn, f.name, opts.scale_layout, _operand_spec(row, M, K),
                     _operand_spec(col, K, M))
    return q


def quantize(x, fmt, axis="rowwise", scale_layout="compact", scale_rule="rceil", amax=None,
             tile_2d=False, row_scaled=False, rht=False, rht_sign_mask=0xD7E8,
             rounding="nearest", seed=0) -> QuantizedTensor:
    dev = _torch_fast_device(x, amax)
    if dev is not None:
        return _quantize_fast(x, dev, fmt, amax, (axis, scale_layout, scale_rule, tile_2d, row_scaled, rht,
                                                   rht_sign_mask, rounding), seed)
    dev = _cupy_fast_device(x, amax)
    if dev is not None:
        return _quantize_fast(x, dev, fmt, amax, (axis, scale_layout, scale_rule, tile_2d, row_scaled, rht,
                                                   rht_sign_mask, rounding), seed, "cupy")
    # a strided view (x.t(), a slice): the library's copy on its current stream, then the fast path
    strided = _strided_fast(x, amax)
    if strided is not None:
        return _quantize_fast(strided[0], strided[1], fmt, amax, (axis, scale_layout, scale_rule, tile_2d,
                                                                  row_scaled, rht, rht_sign_mask, rounding),
                              seed, strided[2])
    da = device_input(x)
    amax_cp, amax_shape, amax_dtype = _amax_input(amax, da.device, x)
    opts = quantize_options(da.shape, da.dtype, fmt, axis=axis, scale_layout=scale_layout, scale_rule=scale_rule,
                            tile_2d=tile_2d, row_scaled=row_scaled, rht=rht, rht_sign_mask=rht_sign_mask,
                            rounding=rounding, seed=seed, amax_shape=amax_shape, amax_dtype=amax_dtype)
    M, K = flat_2d(da.shape)
    f = opts.fmt
    # results go back to the caller's library inside the stream context: a DLPack exchange (JAX, or
    # PyTorch where no owning tensor exists) then sees the stream the work was queued on (no event
    # on another stream: CUDA-graph capture safe)
    with _device_ctx(da.device, da.library), _interop.current_stream(x):
        row, col = _cuda().quantize(da.array.reshape(M, K), opts, amax_cp, input_dtype=da.dtype)
        return QuantizedTensor(format=f.name, shape=da.shape,
                               rowwise=_wrap(row, M, K, f, opts.scale_layout, da.library),
                               columnwise=_wrap(col, K, M, f, opts.scale_layout, da.library), options=opts,
                               input_dtype=da.dtype)


def _operand_arrays(op: Operand, name: str = "q"):
    """(data, scales, amax or None) of a device operand as DeviceArrays, with the dtypes quantize
    gives (uint8 codes and scales, float32 amax) checked before any launch: an operand built by hand
    from other dtypes would otherwise be read as raw bytes (the reference's dequantize_operand
    raises the same TypeError for NumPy arrays)."""
    data = _interop.as_cupy(op.data, f"{name}.data")
    scales = _interop.as_cupy(op.scales, f"{name}.scales")
    amax = _interop.as_cupy(op.amax, f"{name}.amax") if op.amax is not None else None
    for field, a, want in (("data", data, "uint8"), ("scales", scales, "uint8"), ("amax", amax, "float32")):
        if a is not None and a.dtype != want:
            raise TypeError(f"{field}: expected a {want} device array (as quantize gives), got dtype {a.dtype}")
        if a is not None and a.device != data.device:   # one kernel reads all three
            raise ValueError(f"{field}: expected an array on device {data.device} (where data is), got device {a.device}")
    return data, scales, amax


def dequantize_operand(op: Operand, dtype: str, stream_src=None, shape=None, name: str = "q"):
    """One device operand -> (rows, cols) (or `shape`) in the library of its arrays; `name` is
    the operand's name in errors ("q.rowwise")."""
    data, scales, da = _operand_arrays(op, name)
    amax = da.array if da is not None else None
    with _device_ctx(data.device, data.library), _interop.current_stream(stream_src if stream_src is not None else op.data):
        y = _cuda().dequantize(data.array, scales.array, amax, op.format, op.rows, op.cols, op.scale_layout, dtype)
        if shape is not None:
            y = y.reshape(shape)
        return _interop.to_library(y, data.library, dtype=dtype)


def _fast_arrays(arrays: tuple, kinds: tuple):
    """(library, device) when `arrays` are all C-contiguous PyTorch CUDA tensors or all CuPy arrays
    (exact types), of the dtypes named by `kinds`, on one device that is current for that library
    and CuPy; else None. The dequantize fast paths take their operands only so."""
    t = type(arrays[0])
    for a in arrays:
        if type(a) is not t:
            return None
    if _torch_mod is None and t.__module__.startswith("torch"):
        _import_torch()
    elif _cupy_ndarray is None and t.__module__.startswith("cupy"):
        _import_cupy_ndarray()
    if _torch_mod is not None and t is _torch_mod.Tensor:
        torch = _torch_mod
        dev = arrays[0].get_device()
        for a, k in zip(arrays, kinds):
            if not a.is_cuda or a.get_device() != dev or not a.is_contiguous() or a.dtype != getattr(torch, k):
                return None
        if dev != _torch_current_device() or dev != _runtime().getDevice():  # type: ignore[misc]  # set with _torch_mod
            return None
        return "torch", dev
    if _cupy_ndarray is not None and t is _cupy_ndarray:
        dev = arrays[0].device.id
        for a, k in zip(arrays, kinds):
            if a.device.id != dev or not a.flags.c_contiguous or a.dtype != k:
                return None
        if dev != _runtime().getDevice():
            return None
        return "cupy", dev
    return None


def _fast_output(lib: str, dev: int, shape: tuple, dtype: str, like):
    """(a dequantize output of `shape` and dtype name `dtype` from `lib`'s allocator on `like`'s
    device, 0xA5 in every byte when output poisoning is on; its pointer; the stream to launch on:
    the library's current one)."""
    c = _cuda()
    if lib == "torch":
        out = _torch_mod.empty(*shape, dtype=getattr(_torch_mod, dtype), device=like.device)  # type: ignore[union-attr]  # lib "torch": imported
        if c._poison and out.numel():
            out.view(_torch_mod.uint8).fill_(0xA5)  # type: ignore[union-attr]
        return out, out.data_ptr(), _torch_exec._stream_ptr(dev)
    import cupy
    out = cupy.empty(shape, dtype=c.DEQUANT_NP_DTYPES[dtype])
    if c._poison and out.size:
        out.view(np.uint8).fill(0xA5)
    return out, out.data.ptr, cupy.cuda.get_current_stream().ptr


def _dequantize_fast(op: Operand, dtype: str, shape):
    """dequantize's fast path, or None: the operand's data and scales are C-contiguous uint8 arrays
    of one library, PyTorch CUDA tensors or CuPy arrays, on the device current for that library and
    CuPy (its amax None or a C-contiguous float32 array of the same kind there: _fast_arrays). The
    output comes from that library's allocator and the kernel is launched directly on its current
    stream (fp4kit._torch_exec.dequantize_launch): the general path's bytes, without DLPack or CuPy
    wrappers. Anything else returns None and takes the general path."""
    data, scales, amax = op.data, op.scales, op.amax
    fast = _fast_arrays((data, scales) if amax is None else (data, scales, amax), ("uint8", "uint8", "float32"))
    if fast is None:
        return None
    lib, dev = fast
    fmt = FORMATS[op.format]
    if fmt.is_nvfp4 and amax is None:
        return None
    c = _cuda()
    rows, cols = op.rows, op.cols
    out, out_ptr, stream = _fast_output(lib, dev, (rows, cols), dtype, data)
    if rows and cols:
        ptr = (lambda a: a.data_ptr()) if lib == "torch" else (lambda a: a.data.ptr)  # noqa: E731
        kernel, grid = c.dequantize_kernel(fmt, dtype, rows, cols)
        _torch_exec.dequantize_launch(
            dev, kernel, grid, ptr(data), ptr(scales), 0 if amax is None else ptr(amax), rows, cols,
            int(op.scale_layout == "swizzled"), int(fmt.is_nvfp4 and (amax.numel() if lib == "torch" else amax.size) > 1),
            out_ptr, stream)
    if shape is not None:
        out = out.reshape(shape)
    if lib == "cupy" and dtype == "bfloat16":
        out = _interop.to_library(out, "cupy", dtype="bfloat16")
    return out


def dequantize(q: QuantizedTensor, dtype="float32", operand="rowwise"):
    dtype = check_dtype("dtype", dtype)
    check_choice("operand", operand, ("rowwise", "columnwise"))
    op = q.operand(operand)
    shape = q.shape if operand == "rowwise" else None
    y = _dequantize_fast(op, dtype, shape)
    if y is not None:
        return y
    return dequantize_operand(op, dtype, shape=shape, name=f"q.{operand}")


def _u8_matrix(a, name):
    if not _interop.is_device_array(a):
        raise _interop.not_a_device_array(a, name, "a uint8 CUDA device array")
    da = _interop.as_cupy(a, name)
    if da.dtype != "uint8":
        raise TypeError(f"{name}: expected dtype uint8, got {da.dtype}")
    if len(da.shape) != 2:
        raise ValueError(f"{name}: expected a 2-D (rows, cols) array, got shape {da.shape}")
    return da


def swizzle_scales(compact):
    da = _u8_matrix(compact, "compact")
    with _device_ctx(da.device, da.library), _interop.current_stream(compact):
        out = _cuda().swizzle_scales(da.array)
        return _interop.to_library(out, da.library)


def unswizzle_scales(swizzled, shape):
    from .reference.api import check_unswizzle_shape
    da = _u8_matrix(swizzled, "swizzled")
    r, c = check_unswizzle_shape(da.shape, shape)
    with _device_ctx(da.device, da.library), _interop.current_stream(swizzled):
        out = _cuda().unswizzle_scales(da.array, (r, c))
        return _interop.to_library(out, da.library)


def group_quantize(x, fmt, num_groups=None, first_dims=None, last_dims=None, **options):
    from . import _grouped_device
    return _grouped_device.group_quantize(x, fmt, num_groups=num_groups, first_dims=first_dims,
                                          last_dims=last_dims, **options)


def group_dequantize(g, dtype="float32", operand="rowwise"):
    from . import _grouped_device
    return _grouped_device.group_dequantize(g, dtype=dtype, operand=operand)


def qmatmul(a, b, a_operand="rowwise", b_operand="rowwise"):
    """GPU twin of reference.qmatmul: decode to float64 on the device, float64 GEMM, alpha, float32."""
    import cupy as cp
    from ._validate import check_qmatmul
    oa, ob = check_qmatmul(a, b, a_operand, b_operand)
    lib = _interop.library_of(oa.data)
    dev = _interop.as_cupy(oa.data, "a.data").device
    # its decode tables come from the host (the reference codecs)
    _interop.refuse_host_copy_in_capture(oa.data, "a", "qmatmul's decode tables")
    with _device_ctx(dev, lib), _interop.current_stream(oa.data):
        va, aa = _operand_f64_device(oa)
        vb, ab = _operand_f64_device(ob)
        acc = va @ vb.T
        out = (acc * aa * ab.reshape(1, -1)).astype(cp.float32)
        return _interop.to_library(out, lib)


def _operand_f64_device(op):
    """Device twin of reference.qmatmul.operand_f64 (CuPy elementwise decode, exact in float64)."""
    import cupy as cp
    from .reference.numerics import decode, e8m0_decode
    f = FORMATS[op.format]
    d, dsc, _ = _operand_arrays(op)
    data, sc = d.array, dsc.array
    if op.scale_layout == "swizzled":
        sc = _cuda().unswizzle_scales(sc, op.scale_shape)
    if f.packed:
        q = cp.empty((op.rows, data.shape[1] * 2), dtype=cp.uint8)
        q[:, 0::2] = data & 0xF
        q[:, 1::2] = data >> 4
    else:
        q = data
    # decode tables from the reference codecs (exact), applied on the device by indexing
    nbits = f.elem.bits
    table = cp.asarray(decode(np.arange(1 << nbits, dtype=np.uint8), f.elem).astype(np.float64))
    v = table[(q[:, :op.cols] & ((1 << nbits) - 1)).astype(cp.int64)]
    if f.is_nvfp4:
        st = cp.asarray(decode(np.arange(256, dtype=np.uint8), "e4m3").astype(np.float64))
    else:
        st = cp.asarray(e8m0_decode(np.arange(256)).astype(np.float64))
    s = st[sc.astype(cp.int64)]
    v = v * cp.repeat(s, f.block, axis=1)[:, :op.cols]
    if f.is_nvfp4:
        # the sign bit of a device amax is ignored, as quantize and dequantize do (not read: no sync)
        A = cp.abs(_interop.as_cupy(op.amax, "q.amax").array.astype(cp.float32)).reshape(-1, 1)
        alpha = (A * (np.float32(1) / np.float32(2688))).astype(cp.float32).astype(cp.float64)
    else:
        alpha = cp.ones((1, 1))
    return v, alpha


def rht_transform(x, sign_mask=0xD7E8):
    from ._validate import check_rht_transform
    da = device_input(x)
    M, K = flat_2d(da.shape)
    mask = check_rht_transform(da.dtype, M, sign_mask)
    from . import _cuda_rht
    with _device_ctx(da.device, da.library), _interop.current_stream(x):
        out = _cuda_rht.rht_transform(da.array.reshape(M, K), mask)
        return _interop.to_library(out, da.library, dtype="bfloat16")

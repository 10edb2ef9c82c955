"""Device arrays from any library <-> C-contiguous CuPy views, streams, results back.

Supported inputs: CuPy arrays, PyTorch CUDA tensors (subclasses defined outside torch included:
library_of), JAX GPU arrays, and anything exposing ``__cuda_array_interface__`` or ``__dlpack__``.
bfloat16 data travels as uint16 bits (CuPy may have
no bfloat16): torch tensors are viewed by their data pointer as uint16 CuPy arrays, JAX arrays
reinterpreted with ``lax.bitcast_convert_type``. Results (uint8 / float32 / float16 /
bfloat16-as-uint16 CuPy arrays) go back to the caller's library without copies: to PyTorch as
views of the PyTorch tensor that owns their memory (the general path allocates through
torch_allocator; DLPack where no such tensor exists), to JAX through DLPack; CuPy and other
callers get the CuPy arrays. (JAX gets a copy of a small result whose address XLA refuses:
jax_aligned.)

Nothing here imports CuPy, PyTorch or JAX at module import time.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["DeviceArray", "BackendUnavailableError", "require_cupy", "not_a_device_array", "library_of",
           "is_device_array", "as_cupy", "current_stream", "torch_allocator", "to_library", "jax_aligned", "dtype_name"]


class BackendUnavailableError(ImportError):
    """fp4kit's GPU backend cannot run: CuPy is not installed (or fails to import), or the device
    is older than Hopper (compute capability below 9.0: fp4kit._loader.device_arch)."""


def require_cupy():
    """The cupy module, or BackendUnavailableError saying how to install it."""
    try:
        import cupy
    except ImportError as e:
        raise BackendUnavailableError(
            f"fp4kit's GPU backend (device arrays, fp4kit.warmup) needs CuPy, which could not be imported "
            f"({e}); install the CuPy extra that matches your CUDA driver: pip install \".[cuda13]\" or "
            f"pip install \".[cuda12]\" in a source checkout (\"fp4kit[cuda13]\" / \"fp4kit[cuda12]\" from "
            f"a package index), or cupy-cuda13x / cupy-cuda12x alone (NumPy arrays run the CPU reference "
            f"without it)") from e
    return cupy


@dataclass
class DeviceArray:
    """A caller's device array seen as CuPy: `array` is C-contiguous, on the caller's device.

    `dtype` is "float32" / "bfloat16" / "float16" / "uint8" ... (bfloat16 data: `array` holds
    uint16 bits), `library` is "cupy", "torch", "jax" or "other", `source` the original object.
    """

    array: Any
    dtype: str
    library: str
    device: int
    shape: tuple
    source: Any = None


def _mod(obj) -> str:
    return type(obj).__module__.split(".")[0]


def library_of(x) -> str:
    """"cupy", "torch", "jax" or "other": by the module of x's type, and for a subclass defined
    elsewhere (a user's torch.Tensor subclass) by isinstance against an already imported library,
    so that it runs on that library's current stream and gets that library's arrays back."""
    m = _mod(x)
    if m == "cupy":
        return "cupy"
    if m == "torch":
        return "torch"
    if m in ("jax", "jaxlib"):
        return "jax"
    import sys
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, getattr(torch, "Tensor", ())):
        return "torch"
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(x, getattr(cupy, "ndarray", ())):
        return "cupy"
    return "other"


def is_device_array(x) -> bool:
    lib = library_of(x)
    if lib == "torch":
        return bool(getattr(x, "is_cuda", False))
    if lib == "jax":
        try:
            return all(d.platform == "gpu" for d in x.devices())
        except Exception:
            return False
    if lib == "cupy":
        return True
    if hasattr(x, "__cuda_array_interface__"):
        return True
    if hasattr(x, "__dlpack_device__"):
        try:
            return int(x.__dlpack_device__()[0]) in (2, 3, 13)   # kDLCUDA, kDLCUDAHost, kDLCUDAManaged
        except Exception:
            return False
    return False


def _host_array(x) -> str | None:
    """What `x` is when it is an array of a device library that lives in host memory (a CPU torch
    tensor, a JAX array on the CPU, a DLPack array on kDLCPU), else None."""
    lib = library_of(x)
    if lib == "torch":
        return None if getattr(x, "is_cuda", False) else f"a PyTorch tensor on {getattr(x, 'device', 'the CPU')}"
    if lib == "jax":
        try:
            where = sorted({d.platform for d in x.devices()})
        except Exception:
            return None
        return None if where == ["gpu"] else f"a JAX array on {', '.join(where) or 'no device'}"
    if hasattr(x, "__dlpack_device__") and not hasattr(x, "__cuda_array_interface__"):
        try:
            if int(x.__dlpack_device__()[0]) == 1:                     # kDLCPU
                return "a DLPack array in host memory (kDLCPU)"
        except Exception:
            return None
    return None


def not_a_device_array(x, name: str = "x", what: str = "a CUDA device array") -> TypeError:
    """The TypeError for an `x` that is no CUDA device array; a host array of a device library gets
    the way out (a NumPy array for the CPU reference, or the array moved to a CUDA device)."""
    where = _host_array(x)
    if where is None:
        return TypeError(f"{name}: expected {what} (CuPy, PyTorch, JAX, DLPack or __cuda_array_interface__), "
                         f"got {type(x).__name__}")
    lib = library_of(x)
    numpy_of = f"np.asarray({name})"
    if lib == "torch":      # detach(): requires_grad and nn.Parameter; NumPy has no torch.bfloat16
        numpy_of = (f"{name}.detach().view(torch.int16).numpy().view(ml_dtypes.bfloat16)"
                    if str(getattr(x, "dtype", "")) == "torch.bfloat16" else f"{name}.detach().numpy()")
    to_gpu = {"torch": f"{name}.cuda()", "jax": f"jax.device_put({name}, jax.devices('gpu')[0])"}.get(lib)
    return TypeError(f"{name}: expected {what}, got {where} ({type(x).__name__}): pass a NumPy array "
                     f"({numpy_of}) to run the CPU reference, or move it to a CUDA device"
                     + (f" ({to_gpu})" if to_gpu else ""))


def _bf16_dtype_name(dt) -> bool:
    return str(dt) in ("bfloat16", "torch.bfloat16")


_DTYPE_NAMES: dict = {}


def dtype_name(x) -> str:
    """The dtype of a device array as a plain name: "float32", "bfloat16", "float16", "uint8", ..."""
    dt = getattr(x, "dtype", None)
    try:
        return _DTYPE_NAMES[dt]          # str(numpy dtype) costs ~5 us; dtypes are hashable
    except (KeyError, TypeError):
        pass
    name = _dtype_name_uncached(dt)
    try:
        _DTYPE_NAMES[dt] = name
    except TypeError:
        pass
    return name


def _dtype_name_uncached(dt) -> str:
    s = str(dt)
    if s.startswith("torch."):
        s = s[len("torch."):]
    return {"float": "float32", "half": "float16"}.get(s, s)


_TORCH_TO_NP = {"torch.float32": "float32", "torch.float16": "float16", "torch.bfloat16": "uint16",
                "torch.uint8": "uint8", "torch.int64": "int64", "torch.int32": "int32", "torch.float64": "float64",
                "torch.int16": "int16", "torch.int8": "int8", "torch.bool": "bool"}


def _torch_to_cupy(t):
    """A CuPy view of a CUDA tensor's memory (no DLPack round trip: that costs ~20 us a call)."""
    import cupy

    if not t.is_cuda:
        raise not_a_device_array(t)
    t = t.contiguous()
    dn = dtype_name(t)
    np_dt = _TORCH_TO_NP.get(str(t.dtype))
    if np_dt is None:                                   # anything unusual: the general DLPack path
        return cupy.from_dlpack(t), dn
    nbytes = t.numel() * t.element_size()
    if nbytes == 0:
        return cupy.empty(tuple(t.shape), dtype=np_dt), dn
    mem = cupy.cuda.UnownedMemory(t.data_ptr(), nbytes, t, t.device.index)
    return cupy.ndarray(tuple(t.shape), dtype=np_dt, memptr=cupy.cuda.MemoryPointer(mem, 0)), dn


class keep_current_device:
    """Restores the thread's current CUDA device on exit if the code inside changed it. JAX's DLPack
    exchange can leave the array's device current on the thread: on two H200s (traced with
    tests/gpu/gpu_helpers.py device_changes), jax.dlpack.from_dlpack of a CuPy array on device 1
    with device 0 current left device 1 current (in make_single_device_sharding), and a JAX array's
    __dlpack__ switched to device 1 too (cupy.from_dlpack happened to switch back); jax.device_put
    does the same, outside fp4kit. Two runtime queries; used only around the JAX and generic DLPack
    conversions (the PyTorch and CuPy paths take no DLPack)."""

    __slots__ = ("_rt", "_dev")

    def __enter__(self):
        import cupy

        self._rt = cupy.cuda.runtime
        self._dev = self._rt.getDevice()
        return self

    def __exit__(self, *exc):
        if self._rt.getDevice() != self._dev:
            self._rt.setDevice(self._dev)
        return False


def _jax_to_cupy(a):
    import cupy

    with keep_current_device():
        if _bf16_dtype_name(a.dtype):
            import jax
            import jax.numpy as jnp

            a = jax.lax.bitcast_convert_type(a, jnp.uint16)
            return cupy.from_dlpack(a), "bfloat16"
        return cupy.from_dlpack(a), dtype_name(a)


def _cupy_to_cupy(a):
    import cupy

    dn = dtype_name(a)
    if dn == "bfloat16":
        return a.view(cupy.uint16), "bfloat16"
    return a, dn


def _generic_to_cupy(x):
    import cupy

    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:
        typestr = cai.get("typestr", "")
        if _bf16_dtype_name(getattr(x, "dtype", "")) or typestr in ("<V2", "|V2"):
            # bfloat16 without a CuPy dtype: take the buffer as uint16 bits
            import numpy as np

            shape = tuple(cai["shape"])
            nbytes = 2
            for s in shape:
                nbytes *= s
            mem = cupy.cuda.UnownedMemory(cai["data"][0], max(nbytes, 1), x)
            strides = cai.get("strides")
            arr = cupy.ndarray(shape, dtype=np.uint16, memptr=cupy.cuda.MemoryPointer(mem, 0), strides=strides)
            return arr, "bfloat16"
        arr = cupy.asarray(x)
        return arr, dtype_name(arr)
    if hasattr(x, "__dlpack__"):
        with keep_current_device():
            arr = cupy.from_dlpack(x)
        return arr, dtype_name(arr)
    raise not_a_device_array(x)


def as_cupy(x, name: str = "x") -> DeviceArray:
    """A C-contiguous CuPy view of device array `x` (copied only when `x` is not contiguous)."""
    cupy = require_cupy()
    lib = library_of(x)
    try:
        if lib == "torch":
            arr, dn = _torch_to_cupy(x)
        elif lib == "jax":
            arr, dn = _jax_to_cupy(x)
        elif lib == "cupy":
            arr, dn = _cupy_to_cupy(x)
        else:
            arr, dn = _generic_to_cupy(x)
    except TypeError as e:
        if _host_array(x) is not None:
            raise not_a_device_array(x, name) from None
        raise TypeError(str(e).replace("x:", f"{name}:", 1)) from None
    shape = tuple(int(s) for s in arr.shape)
    if not arr.flags.c_contiguous:
        arr = cupy.ascontiguousarray(arr)
    return DeviceArray(array=arr, dtype=dn, library=lib, device=int(arr.device.id), shape=shape, source=x)


def current_stream(x):
    """The caller's current stream as a CuPy stream (usable as ``with stream:``).

    torch: torch.cuda.current_stream(device) wrapped in cupy.cuda.ExternalStream; CuPy and others:
    CuPy's current stream (DLPack exchange synchronises JAX's producer stream with it).
    """
    import cupy

    if library_of(x) == "torch" and getattr(x, "is_cuda", False):
        import torch

        from . import _torch_exec

        dev = x.device.index if x.device.index is not None else torch.cuda.current_device()
        ptr = _torch_exec._stream_ptr(dev)      # the raw pointer, no Stream object
        if ptr == 0:
            return cupy.cuda.Stream.null
        st = _EXTERNAL_STREAMS.get((dev, ptr))
        if st is None:
            st = _external_stream(ptr, dev)
        return st
    return cupy.cuda.get_current_stream()


def refuse_host_copy_in_capture(x, name: str, what: str) -> None:
    """A ValueError naming `name` when the caller's current stream (x's library) is capturing a
    CUDA graph: `what` (host values bound for the device) would take a host-to-device copy, which a
    capture cannot record, and attempting it invalidates the capture with an error that names
    nothing. Called only on paths that make such a copy (one runtime query)."""
    import cupy

    st = current_stream(x)
    try:
        capturing = bool(cupy.cuda.runtime.streamIsCapturing(st.ptr))
    except Exception:                       # a CuPy without the query: let the copy decide
        return
    if capturing:
        raise ValueError(f"{name}: {what} must be copied from host memory to the device, which a CUDA "
                         f"graph capture cannot record; pass it as a device array for capture")


# device -> a CuPy allocator that takes its memory from PyTorch's caching allocator (torch_allocator)
_TORCH_ALLOCATORS: dict = {}


def torch_allocator(dev: int):
    """A CuPy allocator (for ``cupy.cuda.using_allocator``) whose buffers are uint8 tensors from
    PyTorch's caching allocator on device `dev`, made on PyTorch's current stream there: the stream
    fp4kit launches on for a PyTorch caller (current_stream).

    The general path runs PyTorch inputs under it, so every CuPy buffer of the call (results and
    scratch) lives where PyTorch's own tensors would. Inside ``torch.cuda.graph`` that is the
    graph's private memory pool: no cudaMalloc during the capture (which a capture in PyTorch's
    default "global" mode refuses with cudaErrorStreamCaptureUnsupported when CuPy's pool has no
    block cached for the capturing stream), and no scratch buffer handed back to CuPy's pool after
    the capture while replays still write to it. A buffer is freed, in stream order, when the last
    CuPy array or PyTorch view (a result handed back by _torch_owner_view) that holds it goes."""
    alloc = _TORCH_ALLOCATORS.get(dev)
    if alloc is None:
        import cupy
        import torch

        empty, uint8, device = torch.empty, torch.uint8, torch.device("cuda", dev)
        unowned, pointer = cupy.cuda.UnownedMemory, cupy.cuda.MemoryPointer

        def alloc(nbytes: int):
            t = empty(nbytes, dtype=uint8, device=device)
            return pointer(unowned(t.data_ptr(), nbytes, t, dev), 0)

        _TORCH_ALLOCATORS[dev] = alloc
    return alloc


# (device, stream pointer) -> cupy ExternalStream. The wrapper holds no resources (it neither
# owns nor synchronises the stream), so reusing it for a pointer torch hands out again is safe;
# building one costs ~10 us (a warnings filter and a device switch), a dict hit well under 1 us.
_EXTERNAL_STREAMS: dict = {}


def _external_stream(ptr: int, dev: int):
    import warnings

    import cupy

    with cupy.cuda.Device(dev):
        with warnings.catch_warnings():   # CuPy 14 deprecates ExternalStream (kept for CuPy 12/13)
            warnings.simplefilter("ignore", DeprecationWarning)
            st = cupy.cuda.ExternalStream(ptr, dev)
    if len(_EXTERNAL_STREAMS) > 256:      # many short-lived streams: start over
        _EXTERNAL_STREAMS.clear()
    _EXTERNAL_STREAMS[(dev, ptr)] = st
    return st


def _torch_owner_view(torch, arr):
    """`arr` as a view of the PyTorch tensor that owns its memory (a buffer of torch_allocator,
    or a uint8 caller's tensor), or None. Such a result is PyTorch's own storage: its
    ``record_stream`` works (PyTorch ignores it on tensors made from DLPack capsules) and no
    capsule is built."""
    owner = getattr(arr.data.mem, "_owner", None)
    if type(owner) is not torch.Tensor or owner.dtype != torch.uint8 or owner.dim() != 1 or not arr.flags.c_contiguous:
        return None
    tdt = _TORCH_OF_NP.get(arr.dtype.name)
    off = arr.data.ptr - owner.data_ptr()
    if tdt is None or off < 0 or off + arr.nbytes > owner.numel() or off % arr.itemsize:
        return None
    return owner[off:off + arr.nbytes].view(getattr(torch, tdt)).view(tuple(arr.shape))


_TORCH_OF_NP = {"uint8": "uint8", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
                "float16": "float16", "float32": "float32", "float64": "float64"}


def _torch_from_cupy(torch, cupy, arr):
    """A torch tensor over a CuPy array's memory: a view of the PyTorch tensor that owns it where
    there is one (_torch_owner_view), else through DLPack. The results are made on CuPy's current stream,
    which is PyTorch's current one here (current_stream), so the capsule is asked for that stream
    (no synchronisation, nothing recorded: graph-capture safe) and handed to torch as a capsule;
    torch.from_dlpack(arr) would ask PyTorch for its current stream through the public API first
    (~15 us a call). Stream pointer 0 is passed as 1, DLPack's name for the legacy default stream."""
    t = _torch_owner_view(torch, arr)
    if t is not None:
        return t
    s = cupy.cuda.get_current_stream().ptr
    try:
        cap = arr.__dlpack__(stream=s if s else 1)
    except (TypeError, ValueError, BufferError):
        return torch.from_dlpack(arr)
    return torch.utils.dlpack.from_dlpack(cap)


# XLA refuses to run a computation on a buffer whose address is not a multiple of 16 bytes
# ("Address of buffer 0 must be a multiple of 10"), though jax.dlpack.from_dlpack imports one.
# Every result fp4kit allocates on its own is 256-byte aligned, and the results that share a buffer
# start at 16-byte offsets in it (RHT's amax after the plain one, a group's columnwise amaxes after
# its rowwise ones, a group's last dims after its first dims and a padding int64 when G is odd;
# tests/test_plan.py checks every plan); a view at another offset (a caller's array, say) goes to
# JAX as a copy.
JAX_ALIGN = 16


def jax_aligned(arr):
    """`arr`, or a copy of it at a fresh allocation on its device when its address is not a
    multiple of JAX_ALIGN bytes (queued on CuPy's current stream of that device, like the work that
    wrote it; CuPy's copy() alone allocates on the current device, which may be another)."""
    if arr.size and arr.data.ptr % JAX_ALIGN:
        with arr.device:
            return arr.copy()
    return arr


def to_library(arr, library: str, dtype: str | None = None):
    """A CuPy result back in `library` ("cupy", "torch", "jax", "other"), without copies (but
    jax_aligned's, for JAX).

    `dtype` "bfloat16" means `arr` holds uint16 bits that become the library's bfloat16 (for CuPy
    and "other": a bfloat16 CuPy view where CuPy supports it, else the uint16 bits).
    """
    import cupy

    bf16 = dtype == "bfloat16"
    if library == "torch":
        import torch

        if bf16:
            return _torch_from_cupy(torch, cupy, arr.view(cupy.int16)).view(torch.bfloat16)
        return _torch_from_cupy(torch, cupy, arr)
    if library == "jax":
        import jax
        import jax.dlpack

        arr = jax_aligned(arr)
        with keep_current_device():
            if bf16:
                import jax.numpy as jnp

                return jax.lax.bitcast_convert_type(jax.dlpack.from_dlpack(arr), jnp.bfloat16)
            return jax.dlpack.from_dlpack(arr)
    if bf16:
        try:
            import ml_dtypes

            return arr.view(ml_dtypes.bfloat16)
        except Exception:
            return arr
    return arr


"""fp4kit: block-scaled low-precision formats (MXFP8, MXFP6, MXFP4, NVFP4) on NVIDIA GPUs from
Hopper on, with a NumPy reference that every kernel reproduces bit for bit.

``import fp4kit`` never imports CuPy: the GPU side loads on first use with a device array.
"""
import importlib.util as _ilu
import sys as _sys
from pathlib import Path as _Path

__version__ = "0.1.0"


def _attach_reference():
    """In a source tree the reference lives at ../reference; installed, it is fp4kit/reference."""
    here = _Path(__file__).resolve().parent
    if (here / "reference" / "__init__.py").is_file() or "fp4kit.reference" in _sys.modules:
        return
    src = here.parent / "reference"
    spec = _ilu.spec_from_file_location("fp4kit.reference", src / "__init__.py",
                                        submodule_search_locations=[str(src)])
    mod = _ilu.module_from_spec(spec)
    _sys.modules["fp4kit.reference"] = mod
    spec.loader.exec_module(mod)


from .formats import FORMATS, Format, ElementType  # noqa: E402
from .tensor import GroupedQuantizedTensor, Operand, QuantizedTensor, QuantizeOptions  # noqa: E402

_attach_reference()
from . import reference  # noqa: E402
from .api import (dequantize, group_dequantize, group_quantize, qmatmul, quantize,  # noqa: E402
                  rht_transform, swizzle_scales, unswizzle_scales)
from ._grouped_views import GroupedArray  # noqa: E402
from ._interop import BackendUnavailableError, require_cupy as _require_cupy  # noqa: E402


def warmup():
    """Compile (or load from the disk cache) every CUDA kernel for the current GPU.

    Takes no arguments; call it once at start-up so that the first quantize does not pay for
    NVRTC compilation. Needs CuPy and a GPU (sm_90 or later); without CuPy, or on an older GPU,
    it raises ``fp4kit.BackendUnavailableError`` (an ImportError) saying how to install CuPy, or
    which device is too old (the same error as any kernel call on such a device).

    Example:
        >>> import fp4kit
        >>> fp4kit.warmup()                       # doctest: +SKIP
    """
    _require_cupy()
    from ._loader import warmup as _w
    return _w()


from .comparator import CompareReport, compare  # noqa: E402
from .analysis import error_report  # noqa: E402


__all__ = [
    "FORMATS", "Format", "ElementType", "QuantizedTensor", "Operand", "QuantizeOptions",
    "GroupedQuantizedTensor", "GroupedArray", "quantize", "dequantize", "swizzle_scales",
    "unswizzle_scales", "group_quantize", "group_dequantize", "qmatmul", "rht_transform", "reference", "warmup", "compare",
    "CompareReport", "error_report", "BackendUnavailableError",
]

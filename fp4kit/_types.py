"""Type aliases of the public signatures (for type checkers and IDEs; fp4kit ships py.typed).

The option strings are Literal types, so a checker flags ``axis="cols"`` before it runs; a format
is any ``str`` (names are often taken from ``fp4kit.FORMATS``) or a ``Format``. Arrays are ``Any``:
NumPy arrays run the reference and device arrays of any library (CuPy, PyTorch, JAX, DLPack) the
kernels, and results come back in the caller's library.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Sequence, Union

if TYPE_CHECKING:
    from .formats import Format

__all__ = ["FormatLike", "Axis", "ScaleLayout", "ScaleRule", "Rounding", "OperandName", "OutDType", "Dims"]

FormatLike = Union[str, "Format"]
Axis = Literal["rowwise", "columnwise", "both"]
ScaleLayout = Literal["compact", "swizzled"]
ScaleRule = Literal["rceil", "floor"]
Rounding = Literal["nearest", "stochastic"]
OperandName = Literal["rowwise", "columnwise"]
# "float32" / "bfloat16" / "float16", or a dtype object naming one (np.float32, ml_dtypes.bfloat16, ...)
OutDType = Any
# grouped dims: an int (the one M or K of every member), a host sequence of ints, or a device int64 array
Dims = Union[int, Sequence[int], Any, None]

"""fp4kit.reference: the executable contract of SPEC.md in NumPy + ml_dtypes, no GPU needed.

Every CUDA kernel of fp4kit reproduces these functions' bytes exactly.
"""
from .api import dequantize, quantize, swizzle_scales, unswizzle_scales  # noqa: F401
from .grouped import group_dequantize, group_quantize  # noqa: F401
from .qmatmul import qmatmul  # noqa: F401
from .rht import rht_transform  # noqa: F401

__all__ = ["quantize", "dequantize", "swizzle_scales", "unswizzle_scales", "group_quantize", "group_dequantize",
           "qmatmul", "rht_transform"]

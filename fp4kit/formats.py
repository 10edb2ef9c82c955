"""The format registry: the single source of truth for element types, block sizes and scales.

SPEC.md section 1. Nothing else in fp4kit infers a format property from a dtype or a name.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import get_args

from . import _types

__all__ = [
    "ElementType", "Format", "ELEMENTS", "FORMATS", "AXES", "SCALE_LAYOUTS", "SCALE_RULES",
    "ROUNDINGS", "DTYPES", "get_format",
]


@dataclass(frozen=True)
class ElementType:
    """A sign-magnitude minifloat element type (no infinities are ever produced)."""

    name: str          # "e4m3", "e5m2", "e2m3", "e3m2", "e2m1"
    ebits: int
    mbits: int
    bias: int
    max: float         # largest finite value
    max_code: int      # code (sign bit clear) of the largest finite value
    nan_code: int      # code that NaN encodes to (positive NaN, or positive max where there is no NaN)
    has_nan: bool      # whether some code decodes to NaN (FP8 only)

    @property
    def bits(self) -> int:
        return 1 + self.ebits + self.mbits

    @property
    def emin(self) -> int:
        """Unbiased exponent of the smallest normal value (also the exponent of subnormals)."""
        return 1 - self.bias

    @property
    def emax(self) -> int:
        """Unbiased exponent of the element max (SPEC section 3, `emax_elem`)."""
        return (self.max_code >> self.mbits) - self.bias


ELEMENTS: dict[str, ElementType] = {
    "e4m3": ElementType("e4m3", 4, 3, 7, 448.0, 0x7E, 0x7F, True),
    "e5m2": ElementType("e5m2", 5, 2, 15, 57344.0, 0x7B, 0x7F, True),
    "e2m3": ElementType("e2m3", 2, 3, 1, 7.5, 0x1F, 0x1F, False),
    "e3m2": ElementType("e3m2", 3, 2, 3, 28.0, 0x1F, 0x1F, False),
    "e2m1": ElementType("e2m1", 2, 1, 1, 6.0, 0x7, 0x7, False),
}


@dataclass(frozen=True)
class Format:
    """A block-scaled format (SPEC.md section 1)."""

    name: str
    element: str               # key of ELEMENTS
    element_max: float
    block: int                 # elements per scale along the block axis
    scale: str                 # "e8m0" or "e4m3"
    second_level: str | None   # "fp32 amax" for NVFP4, else None
    format_id: int             # mirrored in cuda_src/common/enums.cuh

    @property
    def elem(self) -> ElementType:
        return ELEMENTS[self.element]

    @property
    def packed(self) -> bool:
        """True when two codes share a byte (FP4)."""
        return self.elem.bits == 4

    @property
    def is_mx(self) -> bool:
        return self.scale == "e8m0"

    @property
    def is_nvfp4(self) -> bool:
        return self.name == "nvfp4"

    def packed_len(self, n: int) -> int:
        """Bytes holding `n` codes along the block axis."""
        return n // 2 if self.packed else n

    def num_blocks(self, n: int) -> int:
        return -(-n // self.block)


# read-only: the registry is the single source of truth (a user's FORMATS["x"] = ... is a TypeError)
FORMATS: Mapping[str, Format] = MappingProxyType({
    "mxfp8_e4m3": Format("mxfp8_e4m3", "e4m3", 448.0, 32, "e8m0", None, 0),
    "mxfp8_e5m2": Format("mxfp8_e5m2", "e5m2", 57344.0, 32, "e8m0", None, 1),
    "mxfp6_e2m3": Format("mxfp6_e2m3", "e2m3", 7.5, 32, "e8m0", None, 2),
    "mxfp6_e3m2": Format("mxfp6_e3m2", "e3m2", 28.0, 32, "e8m0", None, 3),
    "mxfp4_e2m1": Format("mxfp4_e2m1", "e2m1", 6.0, 32, "e8m0", None, 4),
    "nvfp4": Format("nvfp4", "e2m1", 6.0, 16, "e4m3", "fp32 amax", 5),
})

# Every choice is a literal string, read from the Literal types of the public signatures
# (fp4kit._types); the integer codes are mirrored in cuda_src/common/enums.cuh
# (tests/test_plan.py and tests/gpu/test_loader.py keep the two in step).
AXES: tuple[str, ...] = get_args(_types.Axis)
SCALE_LAYOUTS: tuple[str, ...] = get_args(_types.ScaleLayout)
SCALE_RULES: tuple[str, ...] = get_args(_types.ScaleRule)
ROUNDINGS: tuple[str, ...] = get_args(_types.Rounding)
DTYPES = ("float32", "bfloat16", "float16")


def get_format(fmt, name: str = "fmt") -> Format:
    """Resolve a format name (or Format) with a clear error naming the argument `name`."""
    if isinstance(fmt, Format):   # one of FORMATS' own objects (or an equal one): a made-up one is refused
        if FORMATS.get(fmt.name) != fmt:
            raise ValueError(f"{name}: expected one of fp4kit.FORMATS' values or a format name (one of "
                             f"{sorted(FORMATS)}), got {fmt!r}")
        return FORMATS[fmt.name]
    if not isinstance(fmt, str):
        raise TypeError(f"{name}: expected a format name (one of {sorted(FORMATS)}), got {type(fmt).__name__}")
    try:
        return FORMATS[fmt]
    except KeyError:
        raise ValueError(f"{name}: expected one of {sorted(FORMATS)}, got {fmt!r}") from None

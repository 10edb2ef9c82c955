"""MX formats (MXFP8 E4M3/E5M2, MXFP6 E2M3/E3M2, MXFP4 E2M1): one operand (SPEC.md section 3).

Contract
--------
Per 32-element block along the operand's columns: ``amax`` = max |x| in fp32, NaN ignored, missing
elements 0. ``E`` = ``e8m0_rceil(fp32(amax * fp32(1/max)))`` (rule rceil) or
``clamp(exponent_field(amax) - emax, 0, 254)`` (rule floor). ``s_inv = 2^(127 - E)`` from bits
(E = 254 -> 2^-127, an fp32 subnormal). ``q = encode(fp32(x * s_inv))`` with section 2's rules, or
the stochastic rounding of section 4 (E2M1 only). Dequantize: ``OType(fp32(2^(E-127) * decode(q)))``; NaN results are the output type's canonical
quiet NaN (numerics.CANONICAL_NAN).
"""
from __future__ import annotations

import numpy as np

from .blocks import block_amax, from_blocks, to_blocks
from .layouts import pack_fp4, unpack_fp4
from .numerics import decode, e8m0_codes, e8m0_decode, e8m0_scale, encode, encode_sr
from .philox import sr_draws

__all__ = ["quantize_operand", "dequantize_operand"]


def quantize_operand(x: np.ndarray, fmt, scale_rule: str = "rceil", rounding: str = "nearest",
                     seed: int = 0, stream: int = 0):
    """fp32 (R, C) -> (codes uint8 (R, C or C/2), compact scales uint8 (R, ceil(C/32)))."""
    elem = fmt.elem
    r, c = x.shape
    xb = to_blocks(x, fmt.block)
    E = e8m0_codes(block_amax(xb), elem, scale_rule)
    with np.errstate(over="ignore", invalid="ignore"):
        y = from_blocks(xb * e8m0_scale(E)[:, :, None], c)
    if rounding == "stochastic":
        q = encode_sr(y, elem, sr_draws(r * c, seed, stream).reshape(r, c))
    else:
        q = encode(y, elem)
    if fmt.packed:
        q = pack_fp4(q)
    return q, E


def dequantize_operand(codes: np.ndarray, scales: np.ndarray, fmt, cols: int) -> np.ndarray:
    """Codes + compact E8M0 scales -> fp32 (R, cols) = fp32(2^(E-127) * decode(q))."""
    q = unpack_fp4(codes) if fmt.packed else codes
    v = decode(q[:, :cols], fmt.elem)
    s = np.repeat(e8m0_decode(scales), fmt.block, axis=1)[:, :cols]
    with np.errstate(over="ignore", invalid="ignore"):
        return (s * v).astype(np.float32)

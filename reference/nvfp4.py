"""NVFP4 (E2M1 elements, 16-element blocks, E4M3 block scales, fp32 global amax): SPEC.md section 4.

Contract
--------
Global amax ``A`` (max |x|, NaN ignored; or the caller's; one per row when row-scaled):
``S_enc = fp32(2688 / A)``, ``min(S_enc, FLT_MAX)`` with NaN -> FLT_MAX, and 1 when A == 0 or
S_enc == 0; ``S_dec = fp32(1 / S_enc)``. Per block with amax ``b`` (16 elements, or a 16x16 tile):
``mult = fp32(S_enc * fp32(1/6))``; ``sf = encode_e4m3(min(fp32(b * mult), FLT_MAX))``;
``enc = min(fp32(1 / fp32(decode(sf) * S_dec)), FLT_MAX)`` (sf == 0 gives 1/0 = inf -> FLT_MAX);
``q = encode_e2m1(fp32(x * enc))`` (nearest even, or stochastic rounding).
Dequantize: ``final = fp32(fp32(decode(sf) * A) * fp32(1/2688))``; ``y = fp32(decode(q) * final)``.
Every step is one fp32 operation in the order written (multiply first, never fused).
"""
from __future__ import annotations

import numpy as np

from .blocks import block_amax, from_blocks, tile_amax, to_blocks
from .layouts import pack_fp4, unpack_fp4
from .numerics import FLT_MAX, decode, encode, encode_sr, nanmax_abs
from .philox import sr_draws

__all__ = ["global_amax", "s_enc", "quantize_operand", "dequantize_operand"]

_F6 = np.float32(1) / np.float32(6)          # 0x3E2AAAAB
_F2688 = np.float32(1) / np.float32(2688)


def global_amax(x: np.ndarray, per_row: bool = False) -> np.ndarray:
    """float32 (1,) amax of the whole tensor, or (R,) per row; NaN ignored, empty -> 0."""
    if per_row:
        return nanmax_abs(x, axis=1).reshape(-1)
    return nanmax_abs(x.reshape(-1), axis=0).reshape(1)


def s_enc(A: np.ndarray) -> np.ndarray:
    A = np.asarray(A, dtype=np.float32)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        s = np.float32(2688) / A
    s = np.where(np.isnan(s), FLT_MAX, np.minimum(s, FLT_MAX)).astype(np.float32)
    return np.where((A == 0) | (s == 0), np.float32(1), s).astype(np.float32)


def quantize_operand(x: np.ndarray, A: np.ndarray, tile_2d: bool = False, rounding: str = "nearest",
                     seed: int = 0, stream: int = 0):
    """fp32 (R, C) + amax (1,) or (R,) -> (codes uint8 (R, C/2), compact E4M3 scales (R, ceil(C/16)))."""
    r, c = x.shape
    xb = to_blocks(x, 16)
    b = tile_amax(xb, 16) if tile_2d else block_amax(xb)
    senc = s_enc(A).reshape(-1, 1)                      # (1, 1) or (R, 1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        sdec = np.float32(1) / senc
        mult = senc * _F6
        sf = encode(np.minimum(b * mult, FLT_MAX), "e4m3")
        enc = np.minimum(np.float32(1) / (decode(sf, "e4m3") * sdec), FLT_MAX)
        y = from_blocks(xb * enc[:, :, None], c)
    if rounding == "stochastic":
        q = encode_sr(y, "e2m1", sr_draws(r * c, seed, stream).reshape(r, c))
    else:
        q = encode(y, "e2m1")
    return pack_fp4(q), sf


def dequantize_operand(codes: np.ndarray, scales: np.ndarray, A: np.ndarray, cols: int) -> np.ndarray:
    """Codes + compact E4M3 scales + amax (1,) or (R,) -> fp32 (R, cols)."""
    v = decode(unpack_fp4(codes)[:, :cols], "e2m1")
    A = np.asarray(A, dtype=np.float32).reshape(-1, 1)
    with np.errstate(over="ignore", invalid="ignore"):
        final = (decode(scales, "e4m3") * A) * _F2688
        f = np.repeat(final, 16, axis=1)[:, :cols]
        return (v * f).astype(np.float32)

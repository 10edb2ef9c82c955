"""Scale layouts and FP4 packing (SPEC.md sections 1 and 6).

Contract
--------
* ``compact``: the (R, C) scale matrix, row-major, no padding.
* ``swizzled`` (cuBLASLt / CUTLASS 128x4): padded with zeros to (Rp, Cp) = (roundup(R, 128),
  roundup(C, 4)); compact (i, j) lives at flat offset
  ``((i // 128) * (Cp // 4) + j // 4) * 512 + (i % 32) * 16 + ((i % 128) // 32) * 4 + j % 4``,
  i.e. reshape to (Rp/128, 4, 32, Cp/4, 4) and permute (0, 3, 2, 1, 4). Padding bytes are 0.
  Unswizzling reads only the real (i < R, j < C) positions.
* FP4 packing: element 2k in the low nibble, 2k+1 in the high nibble of byte k (packed axis even).
"""
from __future__ import annotations

import numpy as np

__all__ = ["swizzle", "unswizzle", "swizzled_offset", "pack_fp4", "unpack_fp4", "roundup"]


def roundup(n: int, m: int) -> int:
    return -(-int(n) // m) * m


def swizzled_offset(i, j, cols: int):
    """Flat byte offset of compact entry (i, j) in the swizzled buffer of a matrix with `cols` columns."""
    cp4 = roundup(cols, 4) // 4
    i = np.asarray(i, dtype=np.int64)
    j = np.asarray(j, dtype=np.int64)
    return ((i // 128) * cp4 + j // 4) * 512 + (i % 32) * 16 + ((i % 128) // 32) * 4 + j % 4


def swizzle(compact: np.ndarray) -> np.ndarray:
    """(R, C) uint8 -> (roundup(R,128), roundup(C,4)) uint8 in the 128x4 layout, zero padded."""
    r, c = compact.shape
    rp, cp = roundup(r, 128), roundup(c, 4)
    padded = np.zeros((rp, cp), dtype=np.uint8)
    padded[:r, :c] = compact
    out = padded.reshape(rp // 128, 4, 32, cp // 4, 4).transpose(0, 3, 2, 1, 4)
    return np.ascontiguousarray(out).reshape(rp, cp)


def unswizzle(swizzled: np.ndarray, shape) -> np.ndarray:
    """Inverse of ``swizzle``: the real (R, C) entries, padding ignored."""
    r, c = (int(s) for s in shape)
    rp, cp = roundup(r, 128), roundup(c, 4)
    s = np.asarray(swizzled).reshape(rp // 128, cp // 4, 32, 4, 4).transpose(0, 3, 2, 1, 4)
    return np.ascontiguousarray(s.reshape(rp, cp)[:r, :c])


def pack_fp4(codes: np.ndarray) -> np.ndarray:
    """(..., 2n) 4-bit codes (one per byte) -> (..., n) bytes, element 2k in the low nibble."""
    c = np.asarray(codes, dtype=np.uint8)
    return (c[..., 0::2] & 0xF) | ((c[..., 1::2] & 0xF) << 4)


def unpack_fp4(packed: np.ndarray) -> np.ndarray:
    """(..., n) bytes -> (..., 2n) 4-bit codes (one per byte)."""
    p = np.asarray(packed, dtype=np.uint8)
    out = np.empty(p.shape[:-1] + (p.shape[-1] * 2,), dtype=np.uint8)
    out[..., 0::2] = p & 0xF
    out[..., 1::2] = p >> 4
    return out

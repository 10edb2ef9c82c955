"""Block bookkeeping shared by the MX and NVFP4 references.

An operand is an fp32 (R, C) array whose blocks run along C. Partial trailing blocks are padded
with zeros for the amax (missing elements count as 0) and the padding is cut off afterwards.
"""
from __future__ import annotations

import numpy as np

from .numerics import nanmax_abs

__all__ = ["to_blocks", "from_blocks", "block_amax", "tile_amax"]


def to_blocks(x: np.ndarray, block: int) -> np.ndarray:
    """(R, C) -> (R, nb, block) with zero padding of the last block."""
    r, c = x.shape
    nb = -(-c // block)
    if nb * block != c:
        pad = np.zeros((r, nb * block), dtype=x.dtype)
        pad[:, :c] = x
        x = pad
    return x.reshape(r, nb, block)


def from_blocks(xb: np.ndarray, cols: int) -> np.ndarray:
    r, nb, b = xb.shape
    return xb.reshape(r, nb * b)[:, :cols]


def block_amax(xb: np.ndarray) -> np.ndarray:
    """(R, nb, block) -> (R, nb) max |x| ignoring NaN."""
    return nanmax_abs(xb, axis=2)


def tile_amax(xb: np.ndarray, tile_rows: int) -> np.ndarray:
    """(R, nb, block) -> (R, nb): amax over tiles of `tile_rows` rows x one block, broadcast back to
    every row of the tile (NVFP4 2-D 16x16 blocks)."""
    r, nb, b = xb.shape
    rt = -(-r // tile_rows)
    pad = np.zeros((rt * tile_rows, nb, b), dtype=xb.dtype)
    pad[:r] = xb
    t = nanmax_abs(pad.reshape(rt, tile_rows, nb, b), axis=(1, 3))
    if t.size == 0:     # np.repeat of an empty (rt, 0) array still takes time linear in rt
        return np.zeros((r, nb), dtype=t.dtype)
    return np.repeat(t, tile_rows, axis=0)[:r]

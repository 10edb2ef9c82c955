"""Launcher of the standalone RHT kernel (cuda_src/rht.cu): the unfused RHT path."""
from __future__ import annotations

import numpy as np

from ._cuda import _THREADS, _empty, _fn, _grid_stride_blocks


def rht_transform(x, sign_mask: int):
    """x: C-contiguous CuPy (M, K) uint16 (bfloat16 bits), M % 16 == 0 -> (K, M) uint16 bfloat16 bits."""
    M, K = (int(s) for s in x.shape)
    out = _empty((K, M), np.uint16)
    n = (M // 16) * K
    if n:
        _fn("rht", "rht_transform_bf16")((_grid_stride_blocks(n, 8),), (_THREADS,),
                                         (x, np.int64(M), np.int64(K), np.uint32(sign_mask), out))
    return out

"""The 16-point random Hadamard transform of NVFP4's columnwise operand (SPEC.md section 4).

Contract
--------
Groups of 16 consecutive elements ``v_0..v_15`` along the block axis are transformed in float64:
``w_k = s_k * v_k`` with ``s_k = -1`` where bit k of the sign mask is set (exact); then butterflies
for h = 1, 2, 4, 8 in this order, ``(w_k, w_{k+h}) = (w_k + w_{k+h}, w_k - w_{k+h})`` for every k
with ``k & h == 0``, each a float64 RN operation; ``u_j = bf16_RN(fp32_RN(0.25 * w_j))`` (two
roundings, as written) and a zero result is +0. No fast-math, no fused operations, no tensor cores.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

__all__ = ["rht16", "rht_transform", "DEFAULT_SIGN_MASK"]

DEFAULT_SIGN_MASK = 0xD7E8


def rht16(v: np.ndarray, sign_mask: int = DEFAULT_SIGN_MASK) -> np.ndarray:
    """Transform (R, C) values (C a multiple of 16, blocks along C); returns bf16-exact fp32 (R, C)."""
    v = np.asarray(v, dtype=np.float32)
    r, c = v.shape
    w: np.ndarray = v.astype(np.float64).reshape(r, c // 16, 16)
    signs = np.where((int(sign_mask) >> np.arange(16)) & 1, -1.0, 1.0)
    w = w * signs
    with np.errstate(invalid="ignore", over="ignore"):      # inf - inf -> NaN is the defined result
        for h in (1, 2, 4, 8):
            w = w.reshape(r, c // 16, 16 // (2 * h), 2, h)
            a, b = w[:, :, :, 0, :], w[:, :, :, 1, :]
            w = np.stack((a + b, a - b), axis=3)
        w = w.reshape(r, c)
        u = (0.25 * w).astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)
    return np.where(u == 0, np.float32(0), u)


def rht_transform(x: np.ndarray, sign_mask: int = DEFAULT_SIGN_MASK) -> np.ndarray:
    """Reference of ``fp4kit.rht_transform``: bfloat16 x (..., K) flattened to (M, K) -> the
    transformed columnwise input u, bfloat16 (K, M). Quantizing u rowwise gives NVFP4's RHT
    columnwise operand (with nearest rounding; stochastic rounding draws from stream 1 there)."""
    from .._validate import check_rht_transform, flat_2d
    from .api import _np_input
    from .numerics import from_f32
    x, dn = _np_input(x)
    M, K = flat_2d(x.shape)
    mask = check_rht_transform(dn, M, sign_mask)
    xt = np.ascontiguousarray(x.reshape(M, K).astype(np.float32).T)
    return from_f32(rht16(xt, mask), "bfloat16")

"""Philox4x32-10 and the stochastic-rounding draws (SPEC.md section 4).

Contract
--------
Philox4x32-10 (Salmon et al., 2011) with the standard constants: multipliers 0xD2511F53 and
0xCD9E8D57, Weyl key increments 0x9E3779B9 and 0xBB67AE85, ten rounds, the key bumped between
rounds. For the element with linear index ``e`` in its operand (row-major over the operand's
logical (rows, cols) elements) the draw is word ``e % 4`` of
``Philox(counter=(lo32(e // 4), hi32(e // 4), stream, 0), key=(lo32(seed), hi32(seed)))``,
stream 0 for the rowwise operand and 1 for the columnwise operand. All arithmetic is exact
unsigned 32-bit (products through uint64).
"""
from __future__ import annotations

import numpy as np

__all__ = ["philox4x32_10", "sr_draws"]

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_MASK = np.uint64(0xFFFFFFFF)
_SH = np.uint64(32)


def philox4x32_10(c0, c1, c2, c3, k0: int, k1: int):
    """Vectorised Philox4x32-10 on uint32 counter arrays; returns four uint32 arrays."""
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint64) for c in (c0, c1, c2, c3))
    k0, k1 = int(k0) & 0xFFFFFFFF, int(k1) & 0xFFFFFFFF
    for rnd in range(10):
        if rnd:
            k0 = (k0 + _W0) & 0xFFFFFFFF
            k1 = (k1 + _W1) & 0xFFFFFFFF
        p0 = _M0 * c0
        p1 = _M1 * c2
        c0, c1, c2, c3 = ((p1 >> _SH) ^ c1 ^ np.uint64(k0), p1 & _MASK,
                          (p0 >> _SH) ^ c3 ^ np.uint64(k1), p0 & _MASK)
    return tuple(c.astype(np.uint32) for c in (c0, c1, c2, c3))


def sr_draws(n: int, seed: int, stream: int, start: int = 0) -> np.ndarray:
    """uint32 draws for linear element indices start .. start + n - 1 of one operand."""
    if n == 0:
        return np.zeros(0, dtype=np.uint32)
    first, last = start // 4, (start + n - 1) // 4
    ctr = np.arange(first, last + 1, dtype=np.uint64)
    z = np.zeros_like(ctr)
    words = philox4x32_10(ctr & _MASK, ctr >> _SH, z + np.uint64(stream), z,
                          seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF)
    r = np.stack(words, axis=1).reshape(-1)
    off = start - first * 4
    return r[off:off + n]

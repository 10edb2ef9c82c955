"""What a block-scaled GEMM computes from two quantized operands (reference for ``fp4kit.qmatmul``).

Contract
--------
``qmatmul(a, b)`` multiplies operand ``a`` (rows M, cols K) by operand ``b`` (rows N, cols K) —
both blocked along K, as block-scaled tensor-core GEMMs (cuBLASLt, CUTLASS) consume them — and
returns float32 ``(M, N) = A_hat @ B_hat^T`` where:

* every element is ``decode(q) * decode(scale)`` exactly in float64 (E8M0 ``2^(E-127)``, NaN for
  E = 255; NVFP4 E4M3 block scales), products accumulated in float64 along K;
* NVFP4 then multiplies by the global decode scales ``alpha = fp32(A * fp32(1/2688))`` of the two
  operands (per row of ``a`` and per row of ``b`` when row-scaled), in float64;
* the float64 result is rounded once to float32.

The two operands are both NVFP4 or both MX (MX element types may differ, e.g. MXFP8 x MXFP4, as
block-scaled tensor cores allow); NVFP4 with MX is rejected, like a K mismatch or a missing operand
(``fp4kit._validate.check_qmatmul``).

The GPU path accumulates in float64 in another order, so it matches this within float64 rounding
(well below one float32 ulp) rather than bit for bit.
"""
from __future__ import annotations

import numpy as np

from ..formats import FORMATS
from ..tensor import QuantizedTensor
from .._types import OperandName
from .api import check_operand_amax, check_operand_dtypes
from .layouts import unpack_fp4, unswizzle
from .numerics import decode, e8m0_decode

__all__ = ["qmatmul", "operand_f64"]

_F2688 = np.float32(1) / np.float32(2688)


def operand_f64(op):
    """(rows, cols) float64 block-scaled values and the per-row global factor (float64 (rows, 1))."""
    check_operand_dtypes(op)   # as dequantize: float codes or a float64 amax are no operand
    check_operand_amax(op)
    f = FORMATS[op.format]
    sc = unswizzle(op.scales, op.scale_shape) if op.scale_layout == "swizzled" else op.scales
    q = unpack_fp4(op.data) if f.packed else op.data
    v = decode(q[:, :op.cols], f.elem).astype(np.float64)
    s = (decode(sc, "e4m3") if f.is_nvfp4 else e8m0_decode(sc)).astype(np.float64)
    v = v * np.repeat(s, f.block, axis=1)[:, :op.cols]
    if f.is_nvfp4:
        A = np.asarray(op.amax, dtype=np.float32).reshape(-1, 1)
        alpha = (A * _F2688).astype(np.float64)
    else:
        alpha = np.ones((1, 1))
    return v, alpha


def qmatmul(a: QuantizedTensor, b: QuantizedTensor, a_operand: OperandName = "rowwise",
            b_operand: OperandName = "rowwise") -> np.ndarray:
    """float32 (M, N) product of two quantized operands; see the module contract."""
    from .._validate import check_qmatmul
    oa, ob = check_qmatmul(a, b, a_operand, b_operand)
    va, aa = operand_f64(oa)
    vb, ab = operand_f64(ob)
    with np.errstate(invalid="ignore", over="ignore"):
        acc = va @ vb.T
        return (acc * aa * ab.reshape(1, -1)).astype(np.float32)

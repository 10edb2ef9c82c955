"""Code that uses fp4kit's public API as a user would: mypy must accept it (tests/test_typing.py),
and it runs (the same test executes it with the reference)."""
from __future__ import annotations

import ml_dtypes
import numpy as np

import fp4kit
from fp4kit import CompareReport, GroupedArray, GroupedQuantizedTensor, Operand, QuantizedTensor

x = np.linspace(-4, 4, 32 * 64, dtype=np.float32).reshape(32, 64)
q: QuantizedTensor = fp4kit.quantize(x, "nvfp4", axis="both", scale_layout="swizzled",
                                     rounding="stochastic", seed=3)
for name in fp4kit.FORMATS:                      # format names as plain strings
    fp4kit.quantize(x, name, scale_rule="floor" if name != "nvfp4" else "rceil")
q2 = fp4kit.quantize(x, fp4kit.FORMATS["nvfp4"], amax=np.array([4.0], np.float32))
q3 = fp4kit.quantize(x.astype(ml_dtypes.bfloat16), "nvfp4", axis="both", rht=True, rht_sign_mask=0)
q4 = fp4kit.quantize(x, "nvfp4", axis="both", tile_2d=True)
q5 = fp4kit.quantize(x, "nvfp4", row_scaled=True)
y = fp4kit.dequantize(q, dtype="bfloat16", operand="columnwise")
y2 = fp4kit.dequantize(q2, dtype=np.float16)
op: Operand | None = q.rowwise
assert op is not None
rows: int = op.rows
layout: str = op.scale_layout
g: GroupedQuantizedTensor = fp4kit.group_quantize(x, "mxfp4_e2m1", first_dims=[16, 0, 16], axis="both",
                                                  dbias=True)
g2 = fp4kit.group_quantize(x.reshape(-1), "mxfp8_e4m3", first_dims=32, last_dims=[32, 32])
g3 = fp4kit.group_quantize(x, "nvfp4", num_groups=2, scale_layout="swizzled")
members: list[QuantizedTensor] = [g[i] for i in range(len(g))]
ga: GroupedArray = fp4kit.group_dequantize(g, dtype=ml_dtypes.bfloat16, operand="columnwise")
m = fp4kit.qmatmul(q, q2, a_operand="rowwise", b_operand="rowwise")
s = fp4kit.unswizzle_scales(fp4kit.swizzle_scales(np.ones((3, 5), np.uint8)), (3, 5))
u = fp4kit.rht_transform(x.astype(ml_dtypes.bfloat16), sign_mask=0)
r = fp4kit.reference.quantize(x, "mxfp6_e2m3", axis="columnwise")
ry = fp4kit.reference.dequantize(r, operand="columnwise")
report: CompareReport = fp4kit.compare(q, q)
assert report.ok

"""Mistakes a type checker catches before anything runs: every line marked `# E` must get a mypy
error, and no other line (tests/test_typing.py)."""
from __future__ import annotations

import numpy as np

import fp4kit

x = np.ones((32, 64), np.float32)
q = fp4kit.quantize(x, "nvfp4", axis="both")
fp4kit.quantize(x, "nvfp4", axis="cols")  # E
fp4kit.quantize(x, "mxfp8_e4m3", scale_layout="swizzle")  # E
fp4kit.quantize(x, "mxfp8_e4m3", scale_rule="nearest")  # E
fp4kit.quantize(x, "nvfp4", rounding="sr")  # E
fp4kit.quantize(x, "nvfp4", seed="7")  # E
fp4kit.quantize(x, "nvfp4", stochastic=True)  # E
fp4kit.dequantize(q, operand="both")  # E
fp4kit.dequantize(x)  # E
fp4kit.qmatmul(x, q)  # E
fp4kit.group_dequantize(q)  # E
fp4kit.reference.quantize(x, "nvfp4", axis="col")  # E

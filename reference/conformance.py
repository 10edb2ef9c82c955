"""The conformance-vector suite as ``python -m fp4kit check`` runs it (see vectors.py for the vectors).

``run_all(quantize=None, dequantize=None, to_numpy=None, formats=None)`` returns
``(format, "quantize" | "dequantize", vector name, passed, detail)`` records; the defaults check the
reference against the stored bytes of ``data/vectors.npz``.
"""
from __future__ import annotations

from .vectors import iter_cases, run_all  # noqa: F401

__all__ = ["run_all", "iter_cases"]

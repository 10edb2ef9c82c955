"""GPU test fixtures: everything here skips cleanly without CuPy or a CUDA device."""
from __future__ import annotations

import os

import pytest

# JAX (imported by the interop and fuzz tests) takes 75 % of the GPU's memory on first use unless
# told not to; the tests after it (CuPy and PyTorch pools, the > 2^31-element test) need that memory
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

from gpu_helpers import require_gpu


@pytest.fixture
def gpu():
    """Fixture form of require_gpu(); yields the cupy module with output poisoning on."""
    require_gpu()
    import cupy

    from fp4kit import _cuda

    old = _cuda.poison_enabled()
    _cuda.set_poison(True)
    try:
        yield cupy
    finally:
        _cuda.set_poison(old)



@pytest.fixture
def dq_spy(monkeypatch):
    """Counts dequantize fast-path launches (fp4kit._torch_exec.dequantize_launch): a one-item list."""
    from fp4kit import _torch_exec

    n = [0]
    launch = _torch_exec.dequantize_launch

    def spy(*a, **k):
        n[0] += 1
        return launch(*a, **k)

    monkeypatch.setattr(_torch_exec, "dequantize_launch", spy)
    return n

"""GPU test fixtures: everything here skips cleanly without CuPy or a CUDA device."""
from __future__ import annotations

import pytest

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

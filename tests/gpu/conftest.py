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


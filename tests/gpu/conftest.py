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
def size_rules_off(monkeypatch):
    """The planner's size bounds off (fp4kit._plan.SIZE_RULES): the 128 x 128 squares and the staged
    compact scales of "both" at every size, so that small shapes reach those kernel paths."""
    from fp4kit import _plan

    monkeypatch.setattr(_plan, "SIZE_RULES", False)
    _plan.clear_plans()
    yield
    _plan.clear_plans()

"""Fixtures shared by the CPU and GPU tests."""
from __future__ import annotations

import pytest


@pytest.fixture
def size_rules_off(monkeypatch):
    """The planners' size bounds off (fp4kit._plan.SIZE_RULES): the 128 x 128 squares and the staged
    compact scales of "both" (single tensors and grouped) at every size, so that small shapes reach
    those kernel paths and show their plans; test_plan.py's *_from_a_size_up tests check the bounds."""
    from fp4kit import _plan

    monkeypatch.setattr(_plan, "SIZE_RULES", False)
    _plan.clear_plans()
    yield
    _plan.clear_plans()

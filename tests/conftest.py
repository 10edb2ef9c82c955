"""Fixtures shared by the CPU and GPU tests."""
from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def installed_layout(tmp_path_factory) -> Path:
    """A folder holding fp4kit as it is installed (fp4kit/ with reference/ inside, py.typed), copied
    from the source tree, where `fp4kit.reference` lives beside the package: the root that mypy is
    pointed at (MYPYPATH) by tests/test_typing.py and tests/test_mypy_clean.py. Read-only."""
    root = tmp_path_factory.mktemp("site")
    pkg = root / "fp4kit"
    shutil.copytree(REPO / "fp4kit", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "reference", pkg / "reference", ignore=shutil.ignore_patterns("__pycache__", "data"))
    return root


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


@pytest.fixture(scope="session")
def script():
    """script(name): scripts/<name>.py imported as a module (once per name; no GPU needed to import)."""
    loaded: dict = {}

    def load(name: str):
        if name not in loaded:
            spec = importlib.util.spec_from_file_location(f"fp4kit_script_{name}", REPO / "scripts" / f"{name}.py")
            mod = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = mod
            spec.loader.exec_module(mod)
            loaded[name] = mod
        return loaded[name]
    return load

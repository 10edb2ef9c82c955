"""Fixtures shared by the CPU and GPU tests."""
from __future__ import annotations

import importlib.util
import os
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


# FP4KIT_FUZZ_SEED: every hypothesis test of the run draws from this seed instead of its
# derandomised default (derandomize=True makes each run repeat the same examples, which is what a
# regression run wants; a fresh seed explores new ones, e.g. `FP4KIT_FUZZ_SEED=$RANDOM bash
# scripts/gpu_check.sh`). The seed is printed in pytest's header; a failure also prints hypothesis'
# reproduction blob (print_blob=True in the fuzz settings).
FUZZ_SEED_ENV = "FP4KIT_FUZZ_SEED"


def fuzz_seed() -> int | None:
    """FP4KIT_FUZZ_SEED as an int, or None when unset or empty; pytest.UsageError when not one."""
    raw = os.environ.get(FUZZ_SEED_ENV, "").strip()
    if not raw:
        return None
    try:
        return int(raw, 0)
    except ValueError:
        raise pytest.UsageError(f"{FUZZ_SEED_ENV}: expected an integer, got {raw!r}") from None


def apply_fuzz_seed(functions, seed: int) -> int:
    """Seed every hypothesis test among `functions` (hypothesis.seed, which outranks derandomize);
    returns how many were seeded (a parametrized test counts once)."""
    from hypothesis import seed as hseed

    done = set()
    for fn in functions:
        if getattr(fn, "is_hypothesis_test", False) and id(fn) not in done:
            hseed(seed)(fn)
            done.add(id(fn))
    return len(done)


def pytest_report_header(config):
    seed = fuzz_seed()
    if seed is not None:
        return f"hypothesis tests seeded with {FUZZ_SEED_ENV}={seed} (not derandomised)"
    return None


def pytest_terminal_summary(terminalreporter):
    seed = fuzz_seed()
    if seed is not None:   # also under -q, which leaves out the header
        terminalreporter.write_line(f"hypothesis tests were seeded with {FUZZ_SEED_ENV}={seed}")


def pytest_collection_modifyitems(config, items):
    seed = fuzz_seed()
    if seed is not None:
        apply_fuzz_seed([getattr(item, "function", None) for item in items], seed)

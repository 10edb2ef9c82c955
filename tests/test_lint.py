"""pyflakes over every Python file of the repository: undefined names, unused imports and
variables, repeated dict keys. The GPU-only scripts and tests never run in CI (no GPU there), so
this is what keeps a typo in them from landing."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_pyflakes_clean():
    api = pytest.importorskip("pyflakes.api", reason="pyflakes is in the [test] extra")
    from pyflakes import reporter

    class Collect(reporter.Reporter):
        def __init__(self):
            self.found = []

        def unexpectedError(self, filename, msg):
            self.found.append(f"{filename}: {msg}")

        def syntaxError(self, filename, msg, lineno, offset, text):
            self.found.append(f"{filename}:{lineno}: {msg}")

        def flake(self, message):
            self.found.append(str(message))

    files = sorted(p for d in ("fp4kit", "reference", "scripts", "tests", "examples") if (ROOT / d).is_dir()
                   for p in (ROOT / d).rglob("*.py"))
    assert len(files) > 50
    rep = Collect()
    for p in files:
        api.checkPath(str(p), rep)
    assert not rep.found, "\n".join(rep.found)

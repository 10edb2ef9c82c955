"""mypy reports no error inside fp4kit itself: every module of the package, fp4kit.reference included,
checked as it is installed (fp4kit/ with reference/ inside, which is why a copy of that layout is
checked and not the source tree, where `fp4kit.reference` does not resolve). tests/test_typing.py
checks the public API as a user's code sees it (errors inside fp4kit silenced); this keeps the
implementation's own annotations consistent, the GPU-only modules included (which no CPU test runs).
Where the code is right but mypy cannot see it, the line carries `# type: ignore[<code>]`."""
from __future__ import annotations

import pytest


def test_package_type_checks(installed_layout, tmp_path, monkeypatch):
    api = pytest.importorskip("mypy.api", reason="mypy is in the [test] extra")
    site = installed_layout
    # the copy is what `-p fp4kit` finds: the working directory and MYPYPATH both point at it
    monkeypatch.chdir(site)
    monkeypatch.setenv("MYPYPATH", str(site))
    stdout, stderr, _ = api.run(["-p", "fp4kit", "--ignore-missing-imports", "--config-file", "",
                                 "--cache-dir", str(tmp_path / ".mypy_cache"), "--no-error-summary",
                                 "--show-error-codes"])
    assert not stderr.strip(), stderr
    errors = [line for line in stdout.splitlines() if ": error:" in line]
    assert not errors, "\n".join(errors)

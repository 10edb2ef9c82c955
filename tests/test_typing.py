"""fp4kit is typed (PEP 561: fp4kit/py.typed ships in the wheel). mypy, seeing the package as a
user's checker does, accepts tests/typecheck/usage_ok.py (which also runs, on the reference) and
reports an error on exactly the lines of tests/typecheck/usage_bad.py marked `# E`: option strings
outside their Literal types, arguments of the wrong type, unknown keywords."""
from __future__ import annotations

import importlib.util
import runpy
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CASES = Path(__file__).resolve().parent / "typecheck"


def _installed_parent() -> Path | None:
    """Where an installed fp4kit lives (site-packages), or None when it is the source tree."""
    spec = importlib.util.find_spec("fp4kit")
    parent = Path(list(spec.submodule_search_locations)[0]).resolve().parent
    return None if parent == REPO else parent


@pytest.fixture(scope="module", params=["source", "installed"])
def mypypath(request) -> str | None:
    """'source': the installed layout copied from the source tree (conftest's installed_layout) on
    MYPYPATH. 'installed': no MYPYPATH, so mypy finds the installed package in site-packages, which
    it reads only with a py.typed marker (what .ci/run tests)."""
    pytest.importorskip("mypy.api", reason="mypy is in the [test] extra")
    if request.param == "installed":
        if _installed_parent() is None:
            pytest.skip("fp4kit is imported from the source tree; .ci/run tests the installed package")
        return None
    return str(request.getfixturevalue("installed_layout"))


def _mypy_errors(case: str, mypypath: str | None, tmp_path: Path, monkeypatch) -> list[str]:
    from mypy import api

    if mypypath is None:
        monkeypatch.delenv("MYPYPATH", raising=False)
    else:
        monkeypatch.setenv("MYPYPATH", mypypath)
    shutil.copy(CASES / case, tmp_path / case)
    monkeypatch.chdir(tmp_path)
    # follow-imports=silent: no errors reported from inside fp4kit, as for any installed package
    stdout, stderr, _ = api.run([case, "--follow-imports=silent", "--no-error-summary", "--show-error-codes",
                                 "--cache-dir", str(tmp_path / ".mypy_cache"), "--config-file", "",
                                 "--ignore-missing-imports"])
    assert not stderr.strip(), stderr
    errors = [line for line in stdout.splitlines() if ": error:" in line]
    unfound = [e for e in errors if "import-not-found" in e or "import-untyped" in e]
    assert not unfound, "mypy does not see fp4kit as a typed package:\n" + "\n".join(unfound)
    return errors


def test_public_api_use_type_checks(mypypath, tmp_path, monkeypatch):
    errors = _mypy_errors("usage_ok.py", mypypath, tmp_path, monkeypatch)
    assert not errors, "\n".join(errors)


def test_usage_ok_runs():
    runpy.run_path(str(CASES / "usage_ok.py"), run_name="usage_ok")


def test_mistakes_are_flagged_on_their_lines(mypypath, tmp_path, monkeypatch):
    lines = (CASES / "usage_bad.py").read_text().splitlines()
    marked = {i for i, line in enumerate(lines, 1) if line.rstrip().endswith("# E")}
    assert len(marked) >= 10
    errors = _mypy_errors("usage_bad.py", mypypath, tmp_path, monkeypatch)
    flagged = {int(e.split(":")[1]) for e in errors}
    assert flagged == marked, ("mypy flagged lines " + str(sorted(flagged)) + ", marked " + str(sorted(marked))
                               + "\n" + "\n".join(errors))


def test_literal_types_are_the_validated_choices():
    """The Literal types of the signatures accept exactly what the run-time checks accept."""
    import typing

    from fp4kit import _types, formats

    assert typing.get_args(_types.Axis) == formats.AXES
    assert typing.get_args(_types.ScaleLayout) == formats.SCALE_LAYOUTS
    assert typing.get_args(_types.ScaleRule) == formats.SCALE_RULES
    assert typing.get_args(_types.Rounding) == formats.ROUNDINGS
    assert typing.get_args(_types.OperandName) == ("rowwise", "columnwise")


def test_public_signatures_match_the_reference():
    """fp4kit.X and fp4kit.reference.X take the same parameters with the same annotations (the
    reference's array parameters are NumPy arrays where the dispatcher takes any array)."""
    import inspect

    import fp4kit

    for name in fp4kit.reference.__all__:
        pub = inspect.signature(getattr(fp4kit, name)).parameters
        ref = inspect.signature(getattr(fp4kit.reference, name)).parameters
        assert [p for p in pub if p in ref] == [p for p in ref if p in pub], f"{name}: parameter order differs"
        assert set(pub) <= set(ref), f"{name}: fp4kit.{name} has parameters the reference lacks"
        for p in set(pub) & set(ref):
            a, b = pub[p].annotation, ref[p].annotation
            assert a == b or a == "Any", f"{name}({p}): {a} vs {b}"
            assert pub[p].default == ref[p].default, f"{name}({p}) defaults differ"

"""Every public function has a docstring with a short example, and the examples run (doctest)."""
from __future__ import annotations

import doctest
import inspect

import pytest

import fp4kit
import fp4kit.analysis
import fp4kit.support

FUNCTIONS = [n for n in fp4kit.__all__ if inspect.isfunction(getattr(fp4kit, n))]


@pytest.mark.parametrize("pkg", ["fp4kit", "fp4kit.reference"])
def test_top_level_names_are_the_api(pkg):
    """dir(pkg) without underscores is its __all__ plus its submodules: nothing leaks (a __future__
    feature, a helper import) into what users tab-complete."""
    import importlib
    import types
    mod = importlib.import_module(pkg)
    public = {n for n in dir(mod) if not n.startswith("_")}
    extra = {n for n in public - set(mod.__all__) if not isinstance(getattr(mod, n), types.ModuleType)}
    assert not extra, f"{pkg} exposes names outside __all__: {sorted(extra)}"
    assert set(mod.__all__) <= public


def test_there_are_public_functions():
    assert {"quantize", "dequantize", "error_report"} <= set(FUNCTIONS)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_public_function_has_an_example(name):
    doc = inspect.getdoc(getattr(fp4kit, name)) or ""
    assert "Example" in doc, f"fp4kit.{name} needs a docstring with arguments, shapes and an 'Example:' section"


@pytest.mark.parametrize("name", FUNCTIONS)
def test_public_examples_run(name):
    fn = getattr(fp4kit, name)
    finder = doctest.DocTestFinder(recurse=False)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(fn, f"fp4kit.{name}", globs={}):
        runner.run(test)
    assert runner.failures == 0, f"fp4kit.{name}: {runner.failures} docstring example(s) failed (see output)"


@pytest.mark.parametrize("fn", [fp4kit.analysis.operand_reference, fp4kit.support.support_matrix,
                                fp4kit.support.render_markdown], ids=lambda f: f.__name__)
def test_helper_examples_run(fn):
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in doctest.DocTestFinder(recurse=False).find(fn, fn.__name__, globs={}):
        runner.run(test)
    assert runner.failures == 0

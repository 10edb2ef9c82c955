"""docs/*.md stay true: their examples run and print what the pages show.

Per page, the ```python blocks run in order in one namespace; a python block followed directly by a
plain ``` block must print exactly that block's text (as in tests/test_readme.py).
"""
from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)
PAGES = ["formats.md", "layouts.md", "grouped.md", "recipes.md", "exactness.md"]


@pytest.mark.parametrize("page", PAGES)
def test_page_examples_print_what_they_show(page):
    text = (DOCS / page).read_text()
    ms = list(FENCE.finditer(text))
    ns: dict = {}
    ran = 0
    for m, nxt in zip(ms, ms[1:] + [None]):
        if m.group(1) != "python":
            continue
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(compile(m.group(2), f"docs/{page}", "exec"), ns)
        ran += 1
        if nxt is not None and nxt.group(1) == "" and nxt.start() == m.end():
            assert buf.getvalue() == nxt.group(2), \
                f"docs/{page}: example printed\n{buf.getvalue()}\ninstead of\n{nxt.group(2)}\nfor\n{m.group(2)}"
    assert ran, f"docs/{page} has no example"


REPO = DOCS.parent
FILE_NAME = re.compile(r"\b[\w.-]+\.(?:py|cu|cuh|sh|ipynb|npz|md)\b")
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)\s]*)?\)")


def _repo_file_names() -> set[str]:
    skip = {".git", ".prof", "__pycache__", ".pytest_cache", ".hypothesis", "build", "dist", ".venv"}
    names = set()
    for p in REPO.rglob("*"):
        rel = p.relative_to(REPO).parts
        if not any(part in skip or part.endswith(".egg-info") for part in rel) and p.is_file():
            names.add(p.name)
    return names


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md")) + ["../README.md"])
def test_page_names_files_that_exist(page):
    """Relative links resolve, and every file name a page mentions (design.md's module map,
    `scripts/bench.py`, `tests/gpu/test_loader.py`, ...) is a file of the repository."""
    path = DOCS / page
    text = path.read_text()
    broken = [m.group(1) for m in LINK.finditer(text)
              if "://" not in m.group(1) and not (path.parent / m.group(1)).exists()]
    assert not broken, f"docs/{page}: broken relative links {broken}"
    names = _repo_file_names()
    # SPEC.md: the specification the pages cite by section; it is not part of this repository
    unknown = sorted({m.group(0) for m in FILE_NAME.finditer(text)} - names - {"SPEC.md"})
    assert not unknown, f"docs/{page} names files that do not exist: {unknown}"

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

"""The README stays true: its tour prints what it shows, and its two set-up commands are the ones CI uses.

A ```python block followed directly by a plain ``` block is an executed example: the blocks run in
order in one namespace and each must print exactly the plain block's text. Python blocks without an
output block (the GPU example) are not run here.
"""
from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)


def blocks() -> list[tuple[str, str, int]]:
    """(language, text, end offset) of every fenced block."""
    return [(m.group(1), m.group(2), m.end()) for m in FENCE.finditer(README.read_text())]


def examples() -> list[tuple[str, str]]:
    bs = blocks()
    text = README.read_text()
    out = []
    for (lang, code, end), (lang2, expected, _) in zip(bs, bs[1:]):
        if lang == "python" and lang2 == "" and text.startswith("```\n", end):
            out.append((code, expected))
    return out


def test_setup_commands():
    bash = [code.strip() for lang, code, _ in blocks() if lang == "bash"]
    assert bash == ['pip install . && python -m fp4kit check', 'pip install ".[test]" && python -m pytest']
    ci = (REPO / ".ci" / "run").read_text()
    assert 'pip install -q ".[test]"' in ci, ".ci/run must install with the README's test command"


def test_tour_prints_what_it_shows():
    exs = examples()
    assert exs, "the README has no executed example"
    ns: dict = {}
    for code, expected in exs:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(compile(code, str(README), "exec"), ns)
        assert buf.getvalue() == expected, f"README example printed\n{buf.getvalue()}\ninstead of\n{expected}\nfor\n{code}"


def test_support_matrix_markers():
    text = README.read_text()
    start, end = text.find("<!-- support-matrix:start -->"), text.find("<!-- support-matrix:end -->")
    if start < 0 or end < start:
        pytest.fail("README.md lost its support-matrix markers")

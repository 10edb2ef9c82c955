"""The README's support matrix is the one fp4kit.support generates from the code, and that matrix
agrees with what the option validation and the reference really do."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import fp4kit
from fp4kit.support import BACKENDS, render_markdown, support_matrix

REPO = Path(__file__).resolve().parents[1]
START, END = "<!-- support-matrix:start -->", "<!-- support-matrix:end -->"


def test_readme_matrix_is_current():
    text = (REPO / "README.md").read_text()
    i, j = text.find(START), text.find(END)
    assert 0 <= i < j, "README.md lost its support-matrix markers"
    got = text[i + len(START):j].strip("\n")
    assert got == render_markdown().strip("\n"), \
        "README.md's support matrix is stale: run `python scripts/update_readme_matrix.py` and commit README.md"


def test_matrix_covers_every_format_and_backend():
    rows = support_matrix()
    assert rows
    for r in rows:
        assert [f for f, _ in r.formats] == list(fp4kit.FORMATS)
        assert [b for b, _ in r.backends] == list(BACKENDS)
        assert r.available("CPU reference"), f"{r.op}: the reference must implement every op"


@pytest.mark.parametrize("row", [r for r in support_matrix() if r.op == "quantize"], ids=lambda r: r.variant)
def test_quantize_rows_match_the_reference(row):
    """A ✓ quantizes on the CPU; a — is refused with TypeError/ValueError."""
    import ml_dtypes
    from fp4kit.support import _CASES
    case = next(c for c in _CASES if c.op == row.op and c.variant == row.variant)
    x = np.random.default_rng(0).standard_normal((32, 32)).astype(np.float32)
    if case.dtype == "bfloat16":
        x = x.astype(ml_dtypes.bfloat16)
    for fmt, ok in row.formats:
        if ok:
            fp4kit.quantize(x, fmt, **case.options)
        else:
            with pytest.raises((TypeError, ValueError)):
                fp4kit.quantize(x, fmt, **case.options)

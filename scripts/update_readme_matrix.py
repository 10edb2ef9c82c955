#!/usr/bin/env python
"""Write fp4kit.support.render_markdown() into README.md between the support-matrix markers.

Usage: python scripts/update_readme_matrix.py [--check]
Only the text between ``<!-- support-matrix:start -->`` and ``<!-- support-matrix:end -->`` changes;
with ``--check`` nothing is written and the exit status is 1 when the README is stale.
"""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

START, END = "<!-- support-matrix:start -->", "<!-- support-matrix:end -->"


def splice(text: str, table: str) -> str:
    """README text with the region between the markers replaced by `table`."""
    i, j = text.find(START), text.find(END)
    if i < 0 or j < i:
        raise SystemExit(f"README.md: markers {START} ... {END} not found (put them under a 'Support matrix' heading)")
    return text[: i + len(START)] + "\n" + table.rstrip("\n") + "\n" + text[j:]


def main(argv: list[str]) -> int:
    from fp4kit.support import render_markdown
    readme = REPO / "README.md"
    text = readme.read_text()
    new = splice(text, render_markdown())
    if "--check" in argv:
        if new != text:
            print("README.md support matrix is stale: run python scripts/update_readme_matrix.py")
            return 1
        print("README.md support matrix is up to date")
        return 0
    if new != text:
        readme.write_text(new)
        print("README.md support matrix updated")
    else:
        print("README.md support matrix already up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

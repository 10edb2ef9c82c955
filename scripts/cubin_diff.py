"""Which kernels' machine code a change of cuda_src/ (or of the compile parts) changed; no GPU needed.

    python scripts/cubin_diff.py OLD_REV [--modules quantize,grouped] [--arch sm_90]

Compiles each module of git revision OLD_REV (its cuda_src/, built whole, or in the compile parts
that revision's fp4kit/_loader.py declares) and of the working tree (this checkout's parts) with
NVRTC, and compares every kernel's `.text.<name>` section byte for byte. A refactor of sources,
macros or parts that should change no kernel shows "identical" for all; a changed kernel is listed
with its size before and after and how many 16-byte instructions differ (bytes that differ in a few
instructions and not in size are usually addresses: shared-memory or constant offsets). Only the
machine code is compared, not the kernels' metadata (registers, launch bounds).
"""
from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fp4kit import _loader  # noqa: E402


def _old_parts(rev: str) -> dict:
    """PARTS as revision `rev` declares it in fp4kit/_loader.py ({} before compile parts existed)."""
    text = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:fp4kit/_loader.py"], check=True,
                          capture_output=True, text=True).stdout
    m = re.search(r"^PARTS\b[^=]*=\s*(\{[^{}]*\})", text, re.M)   # a dict literal, over lines or not
    return ast.literal_eval(m.group(1)) if m else {}


def kernel_texts(sources: dict[str, str], module: str, arch: str, parts) -> dict[str, frozenset]:
    """name -> the distinct machine codes of every code section (`.text.<name>`: the kernels, and device
    functions ptxas keeps apart) of `module`; a device function compiled into several parts keeps
    all its copies."""
    out: dict[str, set] = {}
    for part in parts:
        sections = _loader.elf_sections(_loader._compile(module, arch, sources, _loader._part_options(arch, part)))
        for name, data in sections.items():
            if name.startswith(".text."):
                out.setdefault(name[len(".text."):], set()).add(data)
    return {k: frozenset(v) for k, v in out.items()}


def compare(old: dict[str, frozenset], new: dict[str, frozenset]) -> tuple[list[str], list[str]]:
    """Prints one line per changed, added or removed kernel; returns (changed, identical). A name is
    identical when its distinct codes are the same on both sides."""
    changed, same = [], []
    for k in sorted(set(old) | set(new)):
        if k not in old or k not in new:
            print(f"  {'added' if k in new else 'removed'}: {k}")
            continue
        if old[k] == new[k]:
            same.append(k)
            continue
        changed.append(k)
        if len(old[k]) == len(new[k]) == 1:
            a, b = next(iter(old[k])), next(iter(new[k]))
            n = len({i // 16 for i in range(min(len(a), len(b))) if a[i] != b[i]})
            print(f"  changed: {k}: {len(a)} -> {len(b)} bytes, {n} instructions differ")
        else:
            print(f"  changed: {k}: {len(old[k])} -> {len(new[k])} distinct copies across the parts")
    return changed, same


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old_rev")
    ap.add_argument("--modules", default="quantize,grouped")
    ap.add_argument("--arch", default="sm_90")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(f"git -C '{ROOT}' archive '{a.old_rev}' cuda_src | tar -x -C '{d}'", shell=True, check=True)
        old_src = _loader._read_sources(Path(d) / "cuda_src")
    new_src = _loader._read_sources()
    old_parts = _old_parts(a.old_rev)
    total = 0
    for m in a.modules.split(","):
        old = kernel_texts(old_src, m, a.arch, old_parts.get(m, (None,)))
        new = kernel_texts(new_src, m, a.arch, _loader.parts_of(m))
        print(f"{m}: {len(old)} / {len(new)} code sections (old / new)")
        changed, same = compare(old, new)
        print(f"{m}: {len(same)} identical, {len(changed)} changed")
        total += len(changed) + len(set(old) ^ set(new))
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())

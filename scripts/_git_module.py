"""Load one module of fp4kit as it was at a git revision (the equivalence scripts' "before" side)."""
import importlib.util
import os
import subprocess
import tempfile


def module_at(repo: str, rev: str, path: str, name: str, edits=()):
    """The module file `path` (relative to `repo`) at revision `rev`, imported as `name` inside the
    fp4kit package (its relative imports resolve against the current fp4kit). `edits`: (old, new) or
    (old, new, count) source replacements of text found exactly once (or `count` times): a
    deliberate later change applied to the "before" side, so that the comparison still tests
    everything else."""
    src = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=repo, check=True, capture_output=True).stdout
    for a, b, *count in edits:
        want = count[0] if count else 1
        n = src.count(a.encode())
        if n != want:
            raise ValueError(f"module_at: {a!r} occurs {n} times in {path} at {rev}, not {want}")
        src = src.replace(a.encode(), b.encode())
    with tempfile.NamedTemporaryFile("wb", suffix=".py", delete=False) as fh:
        fh.write(src)
    try:
        spec = importlib.util.spec_from_file_location(name, fh.name)
        mod = importlib.util.module_from_spec(spec)
        mod.__package__ = "fp4kit"
        spec.loader.exec_module(mod)
    finally:
        os.unlink(fh.name)
    return mod

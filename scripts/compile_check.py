#!/usr/bin/env python3
"""Compile every cuda_src/*.cu with NVRTC for sm_90 and sm_100a (no GPU needed), and, for the first
arch, the move-only builds of scripts/move_probe.py (the encode left out: a probe, not shipped).

Prints one line per (file, arch) and a summary; exits non-zero if anything failed.
Usage: python scripts/compile_check.py [arch ...]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fp4kit import _loader, _nvrtc  # noqa: E402


def probe_builds(arch: str) -> int:
    """Compiles move_probe's move-only modules for `arch`; returns the number that failed."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from move_probe import MOVE_MODULES, move_only_sources
    try:
        _loader.compile_check(arch, [f"{m}_move" for m in MOVE_MODULES], sources=move_only_sources())
    except RuntimeError as e:
        print(e)
        return 1
    return 0


def main(argv):
    if any(a.startswith("-") for a in argv[1:]):
        print(__doc__.strip())
        return 0 if set(argv[1:]) <= {"-h", "--help"} else 2
    archs = argv[1:] or ["sm_90", "sm_100a"]
    print(f"NVRTC {'.'.join(map(str, _nvrtc.version()))} from {_nvrtc.library_path()}")
    print(f"options: {' '.join(_loader.options_for('<arch>'))}")
    total = failed = 0
    for arch in archs:
        try:
            res = _loader.compile_check(arch)
        except RuntimeError as e:
            print(e)
            failed += 1
            total += 1
            continue
        total += len(res)
        if arch == archs[0]:
            failed += probe_builds(arch)
    ok = failed == 0
    print(f"summary: {'OK' if ok else 'FAILED'}: {len(archs)} arch(s) {', '.join(archs)}, "
          f"{'all files compiled' if ok else f'{failed} failure(s)'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

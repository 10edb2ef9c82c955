#!/usr/bin/env python3
"""Compile every cuda_src/*.cu with NVRTC for sm_90 and sm_100a (no GPU needed), and, for the first
arch, the move-only builds of scripts/move_probe.py (the encode left out: a probe, not shipped).

Every kernel's ptxas resources (registers, stack frame, spill stores / loads; also of non-inlined
device functions) are compared with scripts/kernel_resources.json: more spill or stack than there
fails (a kernel that starts spilling cannot land silently: items 22, 106 and 111 of
docs/performance.md measured what spills cost), as does a kernel the file does not know; register
changes are listed. The comparison is enforced only under the NVRTC version the file was written
with (another version's ptxas may allocate differently; .ci/run installs that version, and with
CI set a different one fails); --update-resources rewrites it.

`--nvrtc-major N` compiles with the NVRTC of CUDA major N (the nvidia-cuda-nvrtc-cu12 wheel for 12:
what the `cuda12` extra installs), sources only, resources not compared; .ci/run runs it for 12.

Prints one line per (file, part, arch) and a summary; exits non-zero if anything failed.
Usage: python scripts/compile_check.py [--update-resources | --nvrtc-major N] [arch ...]
"""
import json
import os
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


RESOURCES = Path(__file__).resolve().parent / "kernel_resources.json"
_FIELDS = ("registers", "stack", "spill_stores", "spill_loads")


def resources_of(results: list[dict]) -> dict[str, list[int]]:
    """'<module>[<part>]:<function>' -> [registers, stack, spill stores, spill loads] (-1: not given)."""
    out = {}
    for r in results:
        unit = r["file"][:-3] + ("" if r["part"] is None else f"[{r['part']}]")
        for fn, v in r["resources"].items():
            out[f"{unit}:{fn}"] = [v.get(k, -1) for k in _FIELDS]
    return out


def compare_resources(now: dict[str, list[int]], base: dict[str, list[int]]) -> tuple[list[str], list[str]]:
    """(failures, notes): more stack or spill than the baseline, or a function it lacks, fail;
    register changes and functions gone are notes."""
    fails, notes = [], []
    for key, v in sorted(now.items()):
        b = base.get(key)
        if b is None:
            fails.append(f"{key}: not in {RESOURCES.name} (registers {v[0]}, stack {v[1]}, spill {v[2]}/{v[3]})")
            continue
        if any(v[i] > b[i] for i in (1, 2, 3)):
            fails.append(f"{key}: stack / spill stores / spill loads {b[1]}/{b[2]}/{b[3]} -> {v[1]}/{v[2]}/{v[3]} bytes")
        if v[0] != b[0]:
            notes.append(f"{key}: registers {b[0]} -> {v[0]}")
    notes += [f"{key}: gone" for key in sorted(set(base) - set(now))]
    return fails, notes


def dump_resources(base: dict) -> str:
    """The baseline as JSON with one line per function (reviewable diffs)."""
    archs = ",\n".join(
        f'    {json.dumps(arch)}: {{\n' + ",\n".join(f"      {json.dumps(k)}: {json.dumps(v)}" for k, v in sorted(fns.items()))
        + "\n    }" for arch, fns in sorted(base["archs"].items()))
    return ('{\n  "comment": "ptxas resources per function: [registers, stack, spill stores, spill loads] '
            '(bytes; -1: not given); scripts/compile_check.py",\n'
            f'  "nvrtc": {json.dumps(base["nvrtc"])},\n  "archs": {{\n{archs}\n  }}\n}}\n')


def compile_only(archs: list[str]) -> int:
    """--nvrtc-major: every source compiles for `archs` with that NVRTC (what the `cuda12` extra
    gives its users); resources are not compared (the baseline is another version's)."""
    failed = 0
    for arch in archs:
        try:
            _loader.compile_check(arch)
        except RuntimeError as e:
            print(e)
            failed += 1
    print(f"summary: {'OK' if not failed else 'FAILED'}: {len(archs)} arch(s) {', '.join(archs)}, "
          f"{'all files compiled' if not failed else f'{failed} arch(s) failed'} (resources not compared)")
    return 0 if not failed else 1


def main(argv):
    args = list(argv[1:])
    major = None
    if "--nvrtc-major" in args:
        i = args.index("--nvrtc-major")
        if i + 1 >= len(args) or not args[i + 1].isdigit():
            print("--nvrtc-major needs a CUDA major version, e.g. --nvrtc-major 12")
            return 2
        major = int(args[i + 1])
        del args[i:i + 2]
    update = "--update-resources" in args
    args = [a for a in args if a != "--update-resources"]
    if any(a.startswith("-") for a in args) or (update and major is not None):
        print(__doc__.strip())
        return 0 if set(args) <= {"-h", "--help"} and not update else 2
    if major is not None:
        _nvrtc.prefer_driver(major * 1000 + 990)    # as under a driver of that major: its NVRTC first
    archs = args or ["sm_90", "sm_100a"]
    found = _nvrtc.version()
    version = ".".join(map(str, found))
    print(f"NVRTC {version} from {_nvrtc.library_path()}")
    if major is not None:
        if found[0] != major:
            print(f"summary: FAILED: --nvrtc-major {major}, but the NVRTC found is {version} "
                  f"(install nvidia-cuda-nvrtc-cu{major})")
            return 1
        return compile_only(archs)
    print(f"options: {' '.join(_loader.options_for('<arch>'))}")
    base = json.loads(RESOURCES.read_text()) if RESOURCES.is_file() else {"nvrtc": None, "archs": {}}
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
        now = resources_of(res)
        if update:
            base["archs"][arch] = now
        else:
            fails, notes = compare_resources(now, base["archs"].get(arch, {}))
            enforced = base["nvrtc"] == version
            if not enforced and os.environ.get("CI"):
                print(f"resources {arch}: FAILED: CI compiles with NVRTC {version}, {RESOURCES.name} was "
                      f"written with {base['nvrtc']} (.ci/run installs that one)")
                failed += 1
            for line in notes + fails:
                print(f"resources {arch}: {line}")
            spills = sum(1 for v in now.values() if v[2] or v[3])
            print(f"resources {arch}: {len(now)} functions, {spills} with spills; against {RESOURCES.name} "
                  f"(NVRTC {base['nvrtc']}): {len(fails)} failure(s), {len(notes)} note(s)"
                  + ("" if enforced else f" (not enforced: this is NVRTC {version})"))
            if enforced and fails:
                failed += 1
        if arch == archs[0]:
            failed += probe_builds(arch)
    if update and failed:
        print(f"{RESOURCES.name} not written: the compile check failed")
    elif update:
        base["nvrtc"] = version
        RESOURCES.write_text(dump_resources(base))
        print(f"wrote {RESOURCES} ({', '.join(sorted(base['archs']))}, NVRTC {version})")
    ok = failed == 0
    print(f"summary: {'OK' if ok else 'FAILED'}: {len(archs)} arch(s) {', '.join(archs)}, "
          f"{'all files compiled' if ok else f'{failed} failure(s)'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

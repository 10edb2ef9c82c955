"""Which kernels of cuda_src/ the GPU runs actually launched.

    FP4KIT_KERNEL_LOG=/tmp/k.log python3 -m pytest tests -q -m gpu     # any GPU runs, appending
    python3 scripts/kernel_coverage.py --log /tmp/k.log [--arch sm_90] [--fail]

Every module is compiled for --arch (default the current GPU's; NVRTC, through fp4kit's disk cache) and its
kernel names are read from the cubin (`fp4kit._loader.entry_points`). The log holds the kernels the
runs fetched (`fp4kit._loader.get_function`, the only way a launch gets its kernel). The report
lists, per module, how many kernels ran and names every kernel that did not. Kernels that exist on
purpose without a caller in the library (probes, self-tests another step runs) are listed in
ALLOWED_UNUSED with their reason. Exit status: 0, or with --fail 1 when a kernel outside that list
never ran (a kernel no test exercised: dead code, or a gap in the GPU tests).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fp4kit import _loader  # noqa: E402

# kernel -> why it may stay unlaunched by the GPU tests and `fp4kit check --quick`
ALLOWED_UNUSED: dict[str, str] = {}


def all_kernels(arch: str) -> dict[str, list[str]]:
    out = {}
    for m in _loader.module_names():
        out[m] = []
        for part in _loader.parts_of(m):
            cubin = _loader.build_cubin(m, arch, part=part)
            out[m] += _loader.entry_points(cubin if isinstance(cubin, bytes) else Path(cubin).read_bytes())
        out[m].sort()
    return out


def read_log(path: Path) -> set[tuple[str, str]]:
    seen = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) == 2:
            seen.add((parts[0], parts[1]))
    return seen


def report(kernels: dict[str, list[str]], seen: set[tuple[str, str]]) -> tuple[list[str], int, int]:
    """Prints the table; returns (unlaunched kernels outside ALLOWED_UNUSED, launched, total)."""
    missing: list[str] = []
    n_seen = n_all = 0
    print(f"{'module':<15} {'launched':>8} {'kernels':>8}")
    for m, names in kernels.items():
        ran = [k for k in names if (m, k) in seen]
        n_seen += len(ran)
        n_all += len(names)
        print(f"{m:<15} {len(ran):>8} {len(names):>8}")
    for m, names in kernels.items():
        for k in names:
            if (m, k) not in seen:
                why = ALLOWED_UNUSED.get(k)
                print(f"  not launched: {m}.{k}" + (f"  (allowed: {why})" if why else ""))
                if why is None:
                    missing.append(f"{m}.{k}")
    unknown = sorted(f"{m}.{k}" for m, k in seen if k not in kernels.get(m, ()))
    for u in unknown:
        print(f"  in the log but not in the cubins: {u}")
    return missing, n_seen, n_all


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--log", type=Path, required=True, help="the FP4KIT_KERNEL_LOG file of the runs")
    ap.add_argument("--arch", default=None,
                    help="architecture to list the kernels of (default: the current GPU's, else sm_90)")
    ap.add_argument("--fail", action="store_true", help="exit 1 when a kernel outside ALLOWED_UNUSED never ran")
    a = ap.parse_args(argv)
    if not a.log.is_file():
        print(f"kernel_coverage: no log at {a.log} (run the GPU steps with FP4KIT_KERNEL_LOG set)")
        return 1
    if a.arch is None:
        try:
            a.arch = _loader.device_arch()
        except Exception:   # noqa: BLE001 - no CuPy or no GPU: the Hopper build
            a.arch = "sm_90"
    missing, n_seen, n_all = report(all_kernels(a.arch), read_log(a.log))
    print(f"kernel coverage ({a.arch}): {n_seen} of {n_all} kernels launched, "
          f"{len(missing)} never launched outside the allowed list")
    return 1 if (a.fail and missing) else 0


if __name__ == "__main__":
    sys.exit(main())

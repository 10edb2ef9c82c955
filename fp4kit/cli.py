"""The command line: ``python -m fp4kit check`` (the exactness check) and ``python -m fp4kit info``.

``check`` always runs the NumPy reference against its own golden cases and conformance vectors
(the suites in ``SUITES``; each module offers ``run_all()`` yielding or returning
``(format, op, case, passed, detail)`` records) and prints a table. With a usable GPU (CuPy can see
a device of compute capability 9.0 or later) it then hands over to ``fp4kit._gpucheck.run``, which
compares every kernel with the reference. Without one it says so and names the kernel checks that
were skipped. The exit status is 0 only when every check that ran passed and at least one ran;
1 is a failure (also when the reader of stdout goes away, as in ``| head``), 2 a usage error.

No array library beyond NumPy is imported until a GPU is looked for.
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import os
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from ._loader import MIN_COMPUTE_CAPABILITY as _MIN_CC
from .formats import FORMATS

__all__ = ["main", "Progress", "CheckResult", "run_reference_checks", "detect_gpu", "SUITES"]

# (suite name, module): each module has run_all(**optional kwargs) -> iterable of records.
SUITES: tuple[tuple[str, str], ...] = (
    ("golden", "fp4kit.reference.golden"),
    ("conformance", "fp4kit.reference.vectors"),
)
GPU_CHECK_MODULE = "fp4kit._gpucheck"
# What fp4kit._gpucheck covers; named when those checks cannot run.
KERNEL_FAMILIES = (
    "quantize (MX rceil/floor; NVFP4 incl. tile_2d, row_scaled, rht, stochastic)",
    "dequantize",
    "swizzle_scales/unswizzle_scales",
    "group_quantize/group_dequantize",
)
MIN_COMPUTE_CAPABILITY = 10 * _MIN_CC[0] + _MIN_CC[1]  # 90: Hopper, the loader's bound


# --------------------------------------------------------------------------------------------
# progress

def _fmt_seconds(s: float) -> str:
    s = max(0.0, s)
    if s < 60:
        return f"{s:.1f}s"
    m, s = divmod(int(round(s)), 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


class Progress:
    """A progress line on stderr: items done, elapsed time and, when the total is known, the time left.

    On a terminal the line is redrawn in place a few times a second; otherwise (logs, CI) a plain
    line is written every ``interval`` seconds, so short runs print nothing. Usable as a context
    manager; ``fp4kit._gpucheck`` can use it for the long kernel runs::

        with Progress(total=len(jobs), label="kernels") as p:
            for job in jobs:
                run(job)
                p.update(note=job.name)
    """

    def __init__(self, total: int | None = None, label: str = "", stream=None, interval: float | None = None):
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = interval if interval is not None else (0.25 if self.tty else 10.0)
        self.total = total
        self.label = label
        self.done = 0
        self.start = time.monotonic()
        self._last = self.start
        self._width = 0

    def text(self, now: float | None = None, note: str = "") -> str:
        el = (time.monotonic() if now is None else now) - self.start
        head = f"{self.label}: " if self.label else ""
        if self.total:
            pct = 100.0 * self.done / self.total
            left = f", ~{_fmt_seconds(el / self.done * (self.total - self.done))} left" if self.done else ""
            s = f"{head}{self.done}/{self.total} ({pct:.0f}%), {_fmt_seconds(el)} elapsed{left}"
        else:
            s = f"{head}{self.done} done, {_fmt_seconds(el)} elapsed"
        return f"{s}  {note}" if note else s

    def update(self, n: int = 1, note: str = "") -> None:
        self.done += n
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            self._draw(self.text(now, note))

    def _draw(self, s: str) -> None:
        if self.tty:
            s = s[:200]
            self.stream.write("\r" + s.ljust(self._width))
            self._width = len(s)
        else:
            self.stream.write(s + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# --------------------------------------------------------------------------------------------
# reference checks

@dataclass(frozen=True)
class CheckResult:
    suite: str
    format: str
    op: str
    case: str
    passed: bool
    detail: str = ""


def _as_result(suite: str, rec: Any) -> CheckResult:
    """Accept (format, op, case, passed[, detail]) tuples, dicts, or objects with those fields."""
    if isinstance(rec, CheckResult):
        return rec
    if isinstance(rec, dict):
        get = rec.get
    elif isinstance(rec, (tuple, list)) and not hasattr(rec, "_fields"):
        if len(rec) not in (4, 5):
            raise ValueError(f"expected a (format, op, case, passed, detail) record, got {rec!r}")
        fmt, op, case, passed = rec[:4]
        return CheckResult(suite, str(fmt), str(op), str(case), bool(passed), str(rec[4]) if len(rec) == 5 else "")
    else:
        def get(k, default=None):
            return getattr(rec, k, default)
    fmt = get("format", None) or get("fmt", "-")
    case = get("case", None) or get("name", "?")
    return CheckResult(suite, str(getattr(fmt, "name", fmt)), str(get("op", "-")), str(case),
                       bool(get("passed", False)), str(get("detail", "") or ""))


def _call_with_supported(fn: Callable, **kwargs):
    """Call ``fn`` with those keyword arguments its signature names (never through ``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return fn()
    named = {k for k, p in params.items()
             if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)}
    return fn(**{k: v for k, v in kwargs.items() if k in named})


def _missing(e: ModuleNotFoundError, modname: str) -> bool:
    """True when the module itself (or a parent package) is absent, not something it imports."""
    return e.name is not None and (modname == e.name or modname.startswith(e.name + "."))


def run_reference_checks(formats: tuple[str, ...] | None = None, quick: bool = False, full: bool = False,
                         suites: Iterable[tuple[str, str]] | None = None) -> tuple[list[CheckResult], list[str]]:
    """Run every available reference suite. Returns (results, notes about suites that were absent).

    A suite that fails to import or raises is recorded as a failed check, never swallowed.
    """
    results: list[CheckResult] = []
    notes: list[str] = []
    keep = None if formats is None else set(formats)
    for suite, modname in (SUITES if suites is None else suites):
        try:
            mod = importlib.import_module(modname)
        except ModuleNotFoundError as e:
            if _missing(e, modname):
                notes.append(f"{suite}: {modname} is not available in this build (skipped)")
                continue
            results.append(CheckResult(suite, "-", "import", modname, False, f"{type(e).__name__}: {e}"))
            continue
        except Exception as e:  # a broken suite is a failure, not a skip
            results.append(CheckResult(suite, "-", "import", modname, False, f"{type(e).__name__}: {e}"))
            continue
        run_all = getattr(mod, "run_all", None)
        if not callable(run_all):
            results.append(CheckResult(suite, "-", "run_all", modname, False, f"{modname} has no run_all()"))
            continue
        with Progress(label=f"reference {suite}") as progress:
            try:
                records = _call_with_supported(run_all, formats=formats, quick=quick, full=full,
                                               progress=progress)
                for rec in records:
                    r = _as_result(suite, rec)
                    progress.update(note=f"{r.format} {r.op} {r.case}")
                    if keep is None or r.format in keep or r.format not in FORMATS:
                        results.append(r)
            except Exception as e:
                results.append(CheckResult(suite, "-", "run_all", modname, False,
                                           f"raised {type(e).__name__}: {e}\n{traceback.format_exc()}"))
    return results, notes


def format_table(results: list[CheckResult], failures_only: bool = False) -> str:
    cols = ("suite", "format", "op", "case", "result")
    rows = [(r.suite, r.format, r.op, r.case, "pass" if r.passed else "FAIL")
            for r in results if not (failures_only and r.passed)]
    if not rows:
        return ""
    widths = [max(len(c), *(len(row[i]) for row in rows)) for i, c in enumerate(cols)]
    line = "  ".join("{:<%d}" % w for w in widths)
    out = [line.format(*cols).rstrip(), line.format(*("-" * w for w in widths))]
    out += [line.format(*row).rstrip() for row in rows]
    return "\n".join(out)


def format_summary(results: list[CheckResult]) -> str:
    """A format x op matrix of passed/total."""
    cells: dict[tuple[str, str], list[int]] = {}
    c: list[int] | None       # a cell; below, None where a format lacks an op
    for r in results:
        c = cells.setdefault((r.format, r.op), [0, 0])
        c[0] += r.passed
        c[1] += 1
    fmts = sorted({f for f, _ in cells}, key=lambda f: (f not in FORMATS, list(FORMATS).index(f) if f in FORMATS else 0, f))
    ops = sorted({o for _, o in cells})
    width = max([len("format")] + [len(f) for f in fmts])
    cw = [max(len(o), 7) for o in ops]
    out = ["  ".join(["format".ljust(width)] + [o.rjust(w) for o, w in zip(ops, cw)])]
    for f in fmts:
        row = [f.ljust(width)]
        for o, w in zip(ops, cw):
            c = cells.get((f, o))
            row.append(("-" if c is None else f"{c[0]}/{c[1]}" + ("" if c[0] == c[1] else "!")).rjust(w))
        out.append("  ".join(row))
    return "\n".join(out)


# --------------------------------------------------------------------------------------------
# GPU

@dataclass(frozen=True)
class GpuInfo:
    name: str
    compute_capability: int  # e.g. 90 for sm_90
    count: int


def detect_gpu() -> tuple[GpuInfo | None, str]:
    """(info, "") for a usable device, else (None, why not). Imports CuPy, and only here."""
    try:
        import cupy
    except ImportError:
        return None, "CuPy is not installed"
    except Exception as e:  # a broken CuPy install
        return None, f"CuPy failed to import ({type(e).__name__}: {e})"
    try:
        n = int(cupy.cuda.runtime.getDeviceCount())
        if n == 0:
            return None, "CuPy sees no CUDA device"
        dev = cupy.cuda.Device()
        props = cupy.cuda.runtime.getDeviceProperties(dev.id)
    except Exception as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        return None, f"CuPy is installed but no CUDA device is usable ({msg})"
    name = props["name"]
    name = name.decode() if isinstance(name, bytes) else str(name)
    info = GpuInfo(name, int(props["major"]) * 10 + int(props["minor"]), n)
    if info.compute_capability < MIN_COMPUTE_CAPABILITY:
        return None, (f"{info.name} is sm_{info.compute_capability}; fp4kit's kernels need "
                      f"sm_{MIN_COMPUTE_CAPABILITY} (Hopper) or later")
    return info, ""


def _skipped_line(why: str) -> str:
    return f"{why}: kernel checks skipped ({'; '.join(KERNEL_FAMILIES)})"


def run_gpu_checks(quick: bool, full: bool, formats: tuple[str, ...] | None) -> tuple[int | None, str]:
    """Run fp4kit._gpucheck.run. Returns (exit status or None when the module is absent, message)."""
    try:
        mod = importlib.import_module(GPU_CHECK_MODULE)
    except ModuleNotFoundError as e:
        if _missing(e, GPU_CHECK_MODULE):
            return None, f"a GPU is present but {GPU_CHECK_MODULE} is missing from this build"
        traceback.print_exc()
        return 1, f"{GPU_CHECK_MODULE} failed to import: {e}"
    try:
        rc = _call_with_supported(mod.run, quick=quick, full=full, formats=formats)
    except Exception as e:
        traceback.print_exc()
        return 1, f"kernel checks raised {type(e).__name__}: {e}"
    if rc is None or rc is True:
        rc = 0
    elif rc is False:
        rc = 1
    rc = int(rc)
    return rc, "kernel checks passed" if rc == 0 else f"kernel checks failed (status {rc})"


# --------------------------------------------------------------------------------------------
# commands

def _parse_formats(values: list[str] | None) -> tuple[str, ...] | None:
    if values is None:
        return None
    names: list[str] = []
    for v in values:
        names += [s for s in v.replace(",", " ").split() if s]
    if not names:
        raise argparse.ArgumentTypeError(f"--formats: expected at least one name from {', '.join(FORMATS)} "
                                         f"(or 'all'), got an empty list")
    if "all" in names:
        return None
    bad = [n for n in names if n not in FORMATS]
    if bad:
        raise argparse.ArgumentTypeError(f"--formats: expected names from {', '.join(FORMATS)} (or 'all'), got {', '.join(bad)}")
    return tuple(dict.fromkeys(names))


def cmd_check(args: argparse.Namespace) -> int:
    try:
        formats = _parse_formats(args.formats)
    except argparse.ArgumentTypeError as e:
        print(f"fp4kit check: error: {e}", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    mode = "quick" if args.quick else "full" if args.full else "default"
    print(f"fp4kit check ({mode}; formats: {', '.join(formats) if formats else 'all'})")

    results, notes = run_reference_checks(formats, quick=args.quick, full=args.full)
    print()
    print("Reference (NumPy) against golden cases and conformance vectors")
    if results:
        table = format_table(results, failures_only=args.brief)
        print(table or "(--brief: no failing case to list)")
        print()
        print(format_summary(results))
    for n in notes:
        print(f"note: {n}")
    failed = [r for r in results if not r.passed]
    for r in failed:
        if r.detail:
            print(f"\nFAIL {r.suite} {r.format} {r.op} {r.case}:\n  " + r.detail.rstrip().replace("\n", "\n  "))
    ok = bool(results) and not failed
    print(f"\nreference: {len(results)} checks, {len(results) - len(failed)} passed, {len(failed)} failed")
    if not results:
        print("reference: no reference check could run (the golden cases / conformance vectors are missing)")

    print()
    gpu, why = (None, "--cpu-only given") if args.cpu_only else detect_gpu()
    if gpu is None:
        print(_skipped_line(f"no GPU found ({why})" if not args.cpu_only else "CPU only (--cpu-only)"))
        if args.require_gpu:
            print("--require-gpu: failing because the kernels were not checked")
            ok = False
    else:
        print(f"GPU: {gpu.name} (sm_{gpu.compute_capability}, {gpu.count} device(s))")
        rc, msg = run_gpu_checks(args.quick, args.full, formats)
        if rc is None:
            print(_skipped_line(msg))
            if args.require_gpu:
                print("--require-gpu: failing because the kernels were not checked")
                ok = False
        else:
            print(msg)
            ok = ok and rc == 0
    print(f"\nfp4kit check: {'OK' if ok else 'FAILED'} in {_fmt_seconds(time.monotonic() - t0)}")
    return 0 if ok else 1


def cmd_info(args: argparse.Namespace) -> int:
    import platform
    from pathlib import Path

    import numpy as np

    try:
        from importlib.metadata import version
        ver = version("fp4kit")
    except Exception:
        ver = "unknown (not installed)"
    print(f"fp4kit {ver} imported from {Path(__file__).resolve().parent}")
    print(f"python {platform.python_version()}, numpy {np.__version__}", end="")
    try:
        import ml_dtypes
        print(f", ml_dtypes {ml_dtypes.__version__}")
    except ImportError:
        print(", ml_dtypes missing")
    try:
        importlib.import_module("fp4kit.reference")
        print("reference: available")
    except Exception as e:
        print(f"reference: not importable ({type(e).__name__}: {e})")
    gpu, why = detect_gpu()
    print(f"GPU: {gpu.name} (sm_{gpu.compute_capability}, {gpu.count} device(s))" if gpu else f"GPU: none ({why})")
    from . import _loader, _nvrtc, _torch_exec
    print("dependent launches (PDL, the fast paths' kernels): "
          + ("on (FP4KIT_PDL=0 turns them off)" if _torch_exec.PDL else "off (FP4KIT_PDL=0)"))
    try:
        print(f"NVRTC: {'.'.join(map(str, _nvrtc.version()))} ({_nvrtc.library_path()})")
    except Exception as e:   # noqa: BLE001 - any failure to load NVRTC is reported, not raised
        print(f"NVRTC: not found ({str(e).splitlines()[0] if str(e) else type(e).__name__})")
        return 0
    archs = ([_loader.arch_for_capability(gpu.compute_capability // 10, gpu.compute_capability % 10)] if gpu
             else ["sm_90", "sm_100a"])
    cached = ", ".join("{} {} of {}".format(a, *_loader.cached_units(a)) for a in archs)
    where = _loader.cache_dir(create=False)
    made = "" if where.is_dir() else "not made yet; "
    print(f"kernel cache: {where} ({made}compile units of this build: {cached}; "
          "python -m fp4kit warmup fills it)")
    return 0


def cmd_warmup(args: argparse.Namespace) -> int:
    """Compile every kernel into the disk cache: for the current GPU, or with --arch for the named
    architectures with NVRTC alone (no GPU needed, e.g. while building a container image)."""
    from . import _loader
    t0 = time.perf_counter()
    if args.arch:
        try:
            done = _loader.precompile(args.arch, progress=lambda d: print(
                f"  {d[0]:<8} {d[1]}.cu" + ("" if d[2] is None else f" [{d[2]}]") + f"  {d[3]:.1f}s", flush=True))
        except ValueError as e:
            print(f"python -m fp4kit warmup: {e}", file=sys.stderr)
            return 2
        except Exception as e:   # noqa: BLE001 - NVRTC missing or a compile error: say so, exit 1
            print(f"python -m fp4kit warmup: {type(e).__name__}: {e}", file=sys.stderr)
            return 1
        print(f"warmup: {len(done)} compile units for {', '.join(dict.fromkeys(args.arch))} in {_fmt_seconds(time.perf_counter() - t0)}, "
              f"cached in {_loader.cache_dir()}")
        return 0
    gpu, why = detect_gpu()
    if gpu is None:
        print(f"python -m fp4kit warmup: no GPU ({why}); name the targets to compile for without one, "
              "e.g. --arch sm_90 sm_100a", file=sys.stderr)
        return 1
    import fp4kit
    try:
        fp4kit.warmup()
    except Exception as e:   # noqa: BLE001 - reported with its type, exit 1
        print(f"python -m fp4kit warmup: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(f"warmup: every kernel for {gpu.name} (sm_{gpu.compute_capability}) in "
          f"{_fmt_seconds(time.perf_counter() - t0)}, cached in {_loader.cache_dir()}")
    return 0


class _FormatsAction(argparse.Action):
    """--formats parsed and checked while the command line is parsed: an unknown name or an empty
    list is a usage error (argparse's message and exit status 2), before anything runs."""

    def __call__(self, parser, namespace, values, option_string=None):
        try:
            names = _parse_formats(values)
        except argparse.ArgumentTypeError as e:
            raise argparse.ArgumentError(self, str(e).removeprefix("--formats: ")) from None
        setattr(namespace, self.dest, ["all"] if names is None else list(names))


def build_parser(prog: str = "python -m fp4kit") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="fp4kit: block-scaled low-precision formats, bit-exact on the GPU.")
    from . import __version__
    p.add_argument("--version", action="version", version=f"fp4kit {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    p.set_defaults(commands=sub.choices)     # main() reports a command's stray arguments with its usage
    c = sub.add_parser("check", help="check the reference (and, with a GPU, every kernel) against the contract",
                       description="Run the reference against its golden cases and conformance vectors; "
                                   "with a GPU, compare every kernel with the reference. Exit status 0 "
                                   "only when everything that ran passed.")
    size = c.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="a small shape matrix (minutes on a GPU)")
    size.add_argument("--full", action="store_true", help="every option combination and the large shapes")
    c.add_argument("--formats", nargs="+", metavar="FORMAT", action=_FormatsAction,
                   help=f"restrict to these formats ({', '.join(FORMATS)}); space or comma separated")
    c.add_argument("--brief", action="store_true", help="list only failing cases (plus the summary matrix)")
    gpu = c.add_mutually_exclusive_group()     # contradictory together: a usage error (exit 2)
    gpu.add_argument("--cpu-only", action="store_true", help="do not look for a GPU")
    gpu.add_argument("--require-gpu", action="store_true",
                     help="fail when the kernel checks cannot run (no GPU, or no kernel checks in this build)")
    c.set_defaults(func=cmd_check)
    i = sub.add_parser("info", help="versions, where fp4kit is imported from, the GPU it sees, the kernel cache")
    i.set_defaults(func=cmd_info)
    w = sub.add_parser("warmup", help="compile every kernel into the disk cache (the GPU's, or --arch without one)",
                       description="Compile every kernel into fp4kit's disk cache, so that no later call waits "
                                   "for NVRTC: for the current GPU, or with --arch for the named architectures "
                                   "without a GPU (e.g. while building a container image for GPU machines "
                                   "that use the same NVRTC).")
    w.add_argument("--arch", nargs="+", metavar="ARCH",
                   help="compile for these (sm_90 for Hopper, sm_100a / sm_120a for Blackwell) with NVRTC alone")
    w.set_defaults(func=cmd_warmup)
    return p


def main(argv: list[str] | None = None, prog: str = "python -m fp4kit") -> int:
    """Run the command line ``argv`` (default: sys.argv[1:]); ``prog`` names the program in usage
    and error messages (the ``fp4kit`` console script passes "fp4kit")."""
    parser = build_parser(prog)
    args, extra = parser.parse_known_args(argv)
    if extra:   # argparse would report them with the top-level usage: use the command's own
        (args.commands.get(args.command) or parser).error(f"unrecognized arguments: {' '.join(extra)}")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args))
    except BrokenPipeError:
        # the reader went away (python -m fp4kit check | head): exit 1 without a traceback, and
        # point stdout at /dev/null so that the interpreter's last flush cannot fail again
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (AttributeError, OSError, ValueError):
            pass
        return 1

"""Compiles ``cuda_src/`` with NVRTC and loads the cubins into CuPy.

The only module that reads ``cuda_src/``. Every .cu is compiled by :mod:`fp4kit._nvrtc` (never through
CuPy's RawModule(code=...), which appends ``-ftz=true``) with ``-ftz=false -prec-div=true
-prec-sqrt=true -fmad=false`` for the current device's architecture, and the cubin is loaded with
``cupy.RawModule(path=...)``.

Disk cache: ``$FP4KIT_CACHE_DIR`` or ``~/.cache/fp4kit`` (fallbacks: :func:`cache_dir`); the key
hashes every file of ``cuda_src/``, the options, the NVRTC version and the architecture. Entries
are written through a temporary file and ``os.replace`` (process safe) under a per-key thread
lock; each cubin has a ``.sha256`` sidecar, and an entry whose bytes do not match it (truncated,
corrupt) is rebuilt.

Compile parts: quantize.cu and grouped.cu are compiled once per part (``PARTS``; NVRTC option
``-DFP4KIT_PART=<p>``, cuda_src/common/parts.cuh): part F holds the kernels of format F (named
``..._f<F>_...``), part 10 + F the full recipe kernels of the FP4 formats, part 9 the others.
:func:`warmup` and :func:`precompile` compile every part in parallel threads, and a first call
compiles only the parts its kernels are in (:func:`part_of`).

Kernel coverage: with ``FP4KIT_KERNEL_LOG=<file>`` in the environment, every process appends, at
exit, one line ``<module> <kernel>`` per kernel it fetched with :func:`get_function` (every launch
path takes its kernels from there; the grouped planner also fetches a plan's kernels for its
occupancy queries, so a logged kernel is, strictly, one that a plan of the run was built with).
``scripts/kernel_coverage.py`` compares that log with the kernels of the compiled modules
(:func:`entry_points`), so a kernel no test launches shows up.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import struct
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from . import _nvrtc

__all__ = ["cuda_src_dir", "module_names", "options_for", "arch_for_capability", "device_arch",
           "MIN_COMPUTE_CAPABILITY", "build_cubin", "get_function", "get_module", "warmup", "compile_check", "cache_dir",
           "entry_points", "elf_sections", "ptxas_resources", "fetched_kernels", "precompile", "cached_units",
           "compile_units", "PARTS", "part_of", "parts_of"]

log = logging.getLogger("fp4kit")

_LOADER_VERSION = "1"
# The oldest device the kernels build for: Hopper. Below it NVRTC fails on the FP8 conversions
# (sm_89) and the thread-block clusters (sm_90) with a compiler log; device_arch says so instead.
MIN_COMPUTE_CAPABILITY = (9, 0)
_BASE_OPTIONS = ("--std=c++17", "-ftz=false", "-prec-div=true", "-prec-sqrt=true", "-fmad=false")

_key_locks: dict[str, threading.Lock] = {}
_key_locks_guard = threading.Lock()
_modules: dict[tuple, object] = {}
_modules_guard = threading.Lock()
_logged_options = False


def cuda_src_dir() -> Path:
    """`<package>/cuda_src` when installed, `<repo>/cuda_src` in a source tree."""
    pkg = Path(__file__).resolve().parent
    for cand in (pkg / "cuda_src", pkg.parent / "cuda_src"):
        if (cand / "common").is_dir():
            return cand
    raise FileNotFoundError(f"fp4kit CUDA sources not found in {pkg / 'cuda_src'} or {pkg.parent / 'cuda_src'}")


def _read_sources(root: Path | None = None) -> dict[str, str]:
    """Every .cu / .cuh under cuda_src/ (or `root`), keyed by its path relative to it (POSIX)."""
    root = cuda_src_dir() if root is None else root
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.suffix in (".cu", ".cuh", ".h"):
            out[p.relative_to(root).as_posix()] = p.read_text()
    return out


def module_names() -> list[str]:
    """The op-family modules: one per top-level .cu file (e.g. 'quantize', 'dequantize')."""
    return sorted(Path(n).stem for n in _read_sources() if n.endswith(".cu") and "/" not in n)


# module -> its compile parts (cuda_src/common/parts.cuh: FP4KIT_PART_COMMON is 9). On the
# development machine (NVRTC 13.5) each part of grouped.cu compiles in 2-9 s, the whole file in 33 s;
# on an H100 host (NVRTC 13.0) the whole file took 48 s.
PARTS: dict[str, tuple[int, ...]] = {"quantize": (0, 1, 2, 3, 4, 5, 9, 14, 15),
                                     "grouped": (0, 1, 2, 3, 4, 5, 9, 14, 15)}
_FORMAT_IN_NAME = re.compile(r"_f(\d)_")
# the full kernels of the FP4 recipes (parts.cuh FP4KIT_PART_RECIPES(F) = 10 + F)
_RECIPE_KERNEL = re.compile(r"_d\d(_rowsx|_sr|_rowssr|_rht|_ext|_rs|_t2d)?$")
_COMMON_PART = 9   # cuda_src/common/parts.cuh FP4KIT_PART_COMMON (tests/test_kernel_coverage.py)


def parts_of(module: str) -> tuple:
    """The compile parts of `module`: (None,) for a module compiled whole."""
    return PARTS.get(module, (None,))


def part_of(module: str, kernel: str) -> int | None:
    """The compile part holding `kernel` of `module` (None: the module is compiled whole): the
    format id F of a name with ``_f<F>_`` (10 + F for the FP4 formats' full recipe kernels, names
    ending in ``_d<D>``, ``_rowsx``, ``_sr``, ``_rowssr``, ``_rht``, ``_ext``, ``_rs`` or ``_t2d``), else the common part 9
    (parts.cuh)."""
    if module not in PARTS:
        return None
    m = _FORMAT_IN_NAME.search(kernel)
    if m is None:
        return _COMMON_PART
    f = int(m.group(1))
    return 10 + f if f in (4, 5) and _RECIPE_KERNEL.search(kernel) else f


def options_for(arch: str) -> list[str]:
    """NVRTC options for `arch`. FP4KIT_NATIVE_CVT=0 in the environment adds -DFP4KIT_NO_NATIVE_CVT:
    Blackwell targets then use the software FP4/FP6/E8M0 conversions too (the options are part of
    the disk cache key, so the two builds never mix)."""
    extra = ["-DFP4KIT_NO_NATIVE_CVT"] if os.environ.get("FP4KIT_NATIVE_CVT", "").strip() == "0" else []
    return [*_BASE_OPTIONS, *extra, f"-arch={arch}", f"-I{cuda_src_dir()}"]


def arch_for_capability(major: int, minor: int, supported: list[int] | None = None) -> str:
    """sm_90 for 9.x; sm_XYa (architecture-specific features) for 10.0 and later; sm_XY otherwise."""
    if major == 9:
        return "sm_90"
    if major >= 10:
        return f"sm_{major}{minor}a"
    return f"sm_{major}{minor}"


def device_arch(device=None) -> str:
    """The NVRTC architecture for `device` (default: the current one). A device older than
    MIN_COMPUTE_CAPABILITY raises fp4kit.BackendUnavailableError naming it, before anything is
    compiled or launched (every kernel is fetched through get_module, which asks this first)."""
    import cupy

    dev = cupy.cuda.Device(device)
    cc = str(dev.compute_capability)
    major, minor = int(cc[:-1]), int(cc[-1])
    if (major, minor) < MIN_COMPUTE_CAPABILITY:
        raise _unsupported_device(cupy, int(dev.id), major, minor)
    return arch_for_capability(major, minor)


def _unsupported_device(cupy, dev: int, major: int, minor: int) -> Exception:
    from ._interop import BackendUnavailableError

    try:
        name = cupy.cuda.runtime.getDeviceProperties(dev)["name"]
        name = f" ({name.decode() if isinstance(name, bytes) else name})"
    except Exception:   # the name is a courtesy: the capability says it all
        name = ""
    need = ".".join(map(str, MIN_COMPUTE_CAPABILITY))
    return BackendUnavailableError(
        f"fp4kit's CUDA kernels need an NVIDIA GPU of compute capability {need} (Hopper) or later; "
        f"device {dev}{name} has {major}.{minor}. NumPy arrays run the reference on the CPU "
        f"with the same bytes (copy the array to the host)")


_private_cache: Path | None = None      # this process's own cache directory, when no shared one is safe
_warned_cache: set[str] = set()


def _writable_dir(path: Path, create: bool = True) -> bool:
    """`path` is (or, with `create`, now is) a writable directory; without `create`, a missing
    `path` counts when its nearest existing ancestor is a writable directory (it could be made)."""
    if not create:
        if path.exists():
            return path.is_dir() and os.access(path, os.W_OK)
        parent = next((p for p in path.parents if p.exists()), None)
        return parent is not None and parent.is_dir() and os.access(parent, os.W_OK | os.X_OK)
    try:
        path.mkdir(parents=True, exist_ok=True)
        return path.is_dir() and os.access(path, os.W_OK)
    except OSError:
        return False


def _only_ours(path: Path) -> bool:
    """A directory no other user can put files in: ours, not a link, not group/other-writable
    (a cubin found there is run on the GPU, and its .sha256 sidecar checks integrity, not origin)."""
    if not hasattr(os, "getuid"):
        return True
    try:
        st = path.lstat()
    except OSError:
        return False
    import stat
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def _warn_cache(msg: str) -> None:
    if msg not in _warned_cache:
        _warned_cache.add(msg)
        import warnings
        warnings.warn(msg, RuntimeWarning, stacklevel=3)


def cache_dir(create: bool = True) -> Path:
    """The kernel cache: ``$FP4KIT_CACHE_DIR`` (used as given, shared caches included), else
    ``~/.cache/fp4kit``; when that cannot be written, ``<tmp>/fp4kit-cache-<uid>`` if only this user
    can write there, else a fresh private directory for this process. Falling back from a
    ``$FP4KIT_CACHE_DIR`` or from a shared temporary directory that is not safe warns once.
    ``create=False`` (``fp4kit info``) makes no directory: it names the one a compile would use
    (which may not exist yet) and warns as a compile would."""
    global _private_cache
    d = os.environ.get("FP4KIT_CACHE_DIR")
    path = Path(d) if d else Path.home() / ".cache" / "fp4kit"
    if _writable_dir(path, create):
        return path
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    tmp = Path(tempfile.gettempdir()) / f"fp4kit-cache-{uid}"
    if create:
        try:
            tmp.mkdir(mode=0o700, exist_ok=True)
        except OSError:
            pass
    if not create and not tmp.exists() and _writable_dir(tmp, create=False):
        fallback = tmp              # a compile would make it, 0700 and ours
    elif _only_ours(tmp) and os.access(tmp, os.W_OK):
        fallback = tmp
    else:
        if _private_cache is None or not _private_cache.is_dir():
            if not create:          # named, not made: mkdtemp's name is not known before it runs
                fallback = Path(tempfile.gettempdir()) / "fp4kit-cache-XXXXXXXX"
                _warn_cache(f"fp4kit: {tmp} is not a directory that only this user can write (another "
                            f"user could plant kernels there); kernels would be cached in a private "
                            f"directory for each process")
                return fallback
            _private_cache = Path(tempfile.mkdtemp(prefix="fp4kit-cache-"))
        fallback = _private_cache
        _warn_cache(f"fp4kit: {tmp} is not a directory that only this user can write (another user "
                    f"could plant kernels there); kernels are cached in {fallback} for this process only")
    if d:
        _warn_cache(f"fp4kit: FP4KIT_CACHE_DIR={d!r} is not a writable directory; kernels are cached "
                    f"in {fallback} instead")
    return fallback


def _cache_key(module: str, arch: str, sources: dict[str, str], options: list[str]) -> str:
    # -I<dir> is left out: the headers are passed to NVRTC by name, so the path does not matter.
    opts = [o for o in options if not o.startswith("-I")]
    blob = json.dumps({"loader": _LOADER_VERSION, "module": module, "arch": arch, "options": opts,
                       "nvrtc": list(_nvrtc.version()), "sources": sources}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def _lock_for(key: str) -> threading.Lock:
    with _key_locks_guard:
        lock = _key_locks.get(key)
        if lock is None:
            lock = _key_locks[key] = threading.Lock()
        return lock


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _valid_entry(cubin: Path, sidecar: Path) -> bool:
    try:
        data = cubin.read_bytes()
        want = sidecar.read_text().strip()
    except OSError:
        return False
    return data[:4] == b"\x7fELF" and hashlib.sha256(data).hexdigest() == want


def _compile(module: str, arch: str, sources: dict[str, str], options: list[str]) -> bytes:
    return _compile_logged(module, arch, sources, options)[0]


def _compile_logged(module: str, arch: str, sources: dict[str, str], options: list[str]) -> tuple[bytes, str]:
    """(cubin, NVRTC's log) of cuda_src/<module>.cu from `sources` with `options`."""
    global _logged_options
    name = f"{module}.cu"
    if name not in sources:
        raise FileNotFoundError(f"no CUDA source {name} in {cuda_src_dir()} (modules: {module_names()})")
    headers = {k: v for k, v in sources.items() if not k.endswith(".cu")}
    if not _logged_options:
        log.info("fp4kit: NVRTC %s.%s (%s), options: %s", *_nvrtc.version(), _nvrtc.library_path(),
                 " ".join(options))
        _logged_options = True
    return _nvrtc.compile_program(sources[name], name, options, headers=headers, output="cubin")


def _part_options(arch: str, part: int | None) -> list[str]:
    return options_for(arch) + ([] if part is None else [f"-DFP4KIT_PART={int(part)}"])


def _cache_entry(module: str, arch: str, part: int | None, sources: dict[str, str], options: list[str],
                 directory: Path | None = None) -> tuple[str, Path]:
    """(cache key, cubin path) of one compile unit, in `directory` (default: cache_dir())."""
    key = _cache_key(module, arch, sources, options)
    return key, (cache_dir() if directory is None else directory) / f"{module}{'' if part is None else f'.p{part}'}-{arch}-{key[:40]}.cubin"


def compile_units() -> list[tuple[str, int | None]]:
    """(module, part) of every compile unit, the slowest (grouped.cu's parts) first."""
    units = [(n, p) for n in module_names() for p in parts_of(n)]
    units.sort(key=lambda u: u[0] != "grouped")
    return units


def cached_units(arch: str) -> tuple[int, int]:
    """(compile units of this build already in the disk cache for `arch`, all units): this build is
    these sources, options and NVRTC version; nothing is compiled and no directory is made."""
    sources = _read_sources()
    units = compile_units()
    directory = cache_dir(create=False)
    if not directory.is_dir():
        return 0, len(units)
    hits = 0
    for module, part in units:
        _, cubin = _cache_entry(module, arch, part, sources, _part_options(arch, part), directory)
        hits += _valid_entry(cubin, cubin.with_suffix(".sha256"))
    return hits, len(units)


_ARCH = re.compile(r"sm_(\d+)a?$")


def precompile(archs: list[str], progress=None) -> list[tuple[str, str, int | None, float]]:
    """Compile every kernel for each of `archs` ("sm_90", "sm_100a", ...; one name alone is one
    architecture, and one named twice is compiled once) into the disk cache with
    NVRTC alone: no GPU and no CuPy needed (a container image built on a CPU-only machine then starts
    warm on the GPU machine, given the same NVRTC). Units run in parallel threads; `progress`, if
    given, is called with each finished (arch, module, part, seconds). Returns those tuples.
    ValueError for an architecture that is not a real one (sm_XY or sm_XYa) of compute capability
    9.0 or later, for one that fp4kit never loads (a GPU of compute capability X.Y loads
    arch_for_capability's sm_90 or sm_XYa: a cache for sm_100 or sm_90a would never be read), or
    for one that this NVRTC cannot target."""
    from concurrent.futures import ThreadPoolExecutor

    if isinstance(archs, str):
        archs = [archs]
    archs = list(dict.fromkeys(archs))      # an architecture named twice is compiled once
    for a in archs:
        m = _ARCH.match(a) if isinstance(a, str) else None
        if m is None or int(m.group(1)) < 10 * MIN_COMPUTE_CAPABILITY[0]:
            raise ValueError(f"arch: expected sm_90 or a later real architecture such as sm_100a, got {a!r}")
        n = int(m.group(1))
        loaded = arch_for_capability(n // 10, n % 10)
        if a != loaded:
            raise ValueError(f"arch: a GPU of compute capability {n // 10}.{n % 10} loads {loaded} kernels, "
                             f"never {a!r}: use {loaded}")
        can = _nvrtc.supported_archs()
        if can and n not in can:
            raise ValueError(f"arch: NVRTC {'.'.join(map(str, _nvrtc.version()))} cannot target {a} "
                             f"(it targets sm_{', sm_'.join(map(str, can))})")
    jobs = [(a, n, p) for a in archs for n, p in compile_units()]

    def one(job):
        t0 = time.perf_counter()
        build_cubin(job[1], job[0], part=job[2])
        done = (*job, time.perf_counter() - t0)
        if progress is not None:
            progress(done)
        return done

    with ThreadPoolExecutor(max_workers=max(1, min(len(jobs), compile_workers()))) as pool:
        return list(pool.map(one, jobs))


def compile_workers() -> int:
    """Compile units run at once by precompile and compile_check (threads: NVRTC releases the
    GIL): the CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def build_cubin(module: str, arch: str, use_cache: bool = True, part: int | None = None,
                sources: dict[str, str] | None = None) -> Path | bytes:
    """Compile `module` (cuda_src/<module>.cu) for `arch`, only its compile part `part` when given
    (parts_of); returns the cached cubin's path (or the bytes when use_cache is False).
    sources: the sources to compile instead of cuda_src's (scripts/ab_variants.py's variants; the
    cache key covers them)."""
    sources = _read_sources() if sources is None else sources
    options = _part_options(arch, part)
    if not use_cache:
        return _compile(module, arch, sources, options)
    key, cubin = _cache_entry(module, arch, part, sources, options)
    sidecar = cubin.with_suffix(".sha256")
    with _lock_for(key):
        if _valid_entry(cubin, sidecar):
            return cubin
        data = _compile(module, arch, sources, options)
        _atomic_write(cubin, data)
        _atomic_write(sidecar, hashlib.sha256(data).hexdigest().encode())
        return cubin


_driver_matched = False


def _match_driver() -> None:
    """Once: tell _nvrtc the CUDA driver's version, so that it prefers an NVRTC the driver can run."""
    global _driver_matched
    if _driver_matched:
        return
    try:
        import cupy

        _nvrtc.prefer_driver(int(cupy.cuda.runtime.driverGetVersion()))
    except Exception:   # no driver to ask: keep the library search order as it is
        pass
    _driver_matched = True


def get_module(module: str, part: int | None = None):
    """The loaded cupy.RawModule of cuda_src/<module>.cu (its compile part `part`) for the current device."""
    import cupy

    _match_driver()
    dev = cupy.cuda.Device().id
    arch = device_arch(dev)
    k = (dev, module, part, arch)
    mod = _modules.get(k)
    if mod is not None:
        return mod
    path = build_cubin(module, arch, part=part)
    with _modules_guard:
        mod = _modules.get(k)
        if mod is None:
            mod = cupy.RawModule(path=str(path))
            _modules[k] = mod
    return mod


_functions: dict[tuple, object] = {}
# (module, kernel) of every kernel this process fetched (never cleared, unlike caches tests reset)
_fetched: set[tuple[str, str]] = set()


def get_function(module_name: str, kernel_name: str):
    """The kernel `kernel_name` (extern "C") of cuda_src/<module_name>.cu, as a cupy.RawKernel."""
    import cupy

    k = (cupy.cuda.Device().id, module_name, kernel_name)
    fn = _functions.get(k)
    if fn is None:
        fn = get_module(module_name, part_of(module_name, kernel_name)).get_function(kernel_name)
        _functions[k] = fn
        _note_fetched(module_name, kernel_name)
    return fn


def fetched_kernels() -> list[tuple[str, str]]:
    """(module, kernel) of every kernel this process has fetched through get_function, sorted."""
    return sorted(_fetched)


def _write_kernel_log(path: str) -> None:
    lines = "".join(f"{m} {k}\n" for m, k in sorted(_fetched))
    try:
        with open(path, "a", encoding="utf-8") as f:   # one write: processes append whole blocks
            f.write(lines)
    except OSError as e:
        log.warning("FP4KIT_KERNEL_LOG=%s: not written (%s)", path, e)


_fetched_guard = threading.Lock()
_log_registered = False


def _note_fetched(module_name: str, kernel_name: str) -> None:
    global _log_registered
    with _fetched_guard:
        if not _log_registered:
            _log_registered = True
            path = os.environ.get("FP4KIT_KERNEL_LOG", "").strip()
            if path:
                import atexit
                atexit.register(_write_kernel_log, path)
        _fetched.add((module_name, kernel_name))


def elf_sections(cubin: bytes) -> dict[str, bytes]:
    """The sections of a cubin (64-bit ELF), name -> contents (empty for sections without file
    contents, such as .nv.shared.*). No CUDA tools needed."""
    if cubin[:4] != b"\x7fELF" or len(cubin) < 64 or cubin[4] != 2:
        raise ValueError("not a 64-bit ELF cubin")
    try:
        shoff, = struct.unpack_from("<Q", cubin, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
        headers = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
        names_at = headers[shstrndx][4]

        def name(off: int) -> str:
            start = names_at + off
            return cubin[start:cubin.index(b"\0", start)].decode()

        nobits = 8   # SHT_NOBITS
        out = {}
        for h in headers:
            if h[1] != nobits and h[4] + h[5] > len(cubin):
                raise ValueError("a section past the end")
            out[name(h[0])] = b"" if h[1] == nobits else cubin[h[4]:h[4] + h[5]]
        return out
    except (struct.error, IndexError, ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"not a 64-bit ELF cubin (truncated or corrupt: {e})") from None


_PTXAS_FUNC = re.compile(r"Function properties for (\S+)")
_PTXAS_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_REGS = re.compile(r"Used (\d+) registers")


def ptxas_resources(log: str) -> dict[str, dict[str, int]]:
    """Per function, from a compile log with ``--ptxas-options=-v``: "stack", "spill_stores",
    "spill_loads" (bytes) and, for kernels, "registers". Non-inlined device functions appear
    under their (mangled) names with their own frames."""
    out: dict[str, dict[str, int]] = {}
    func = entry = None
    for line in log.splitlines():
        m = _PTXAS_ENTRY.search(line)
        if m:
            entry = m.group(1)
            continue
        m = _PTXAS_FUNC.search(line)
        if m:
            func = m.group(1)
            continue
        m = _PTXAS_FRAME.search(line)
        if m and func is not None:
            out.setdefault(func, {}).update(stack=int(m.group(1)), spill_stores=int(m.group(2)),
                                            spill_loads=int(m.group(3)))
            continue
        m = _PTXAS_REGS.search(line)
        if m and entry is not None:
            out.setdefault(entry, {})["registers"] = int(m.group(1))
    return out


def entry_points(cubin: bytes) -> list[str]:
    """The kernel names (entry points) of a cubin, sorted: the ELF sections ``.nv.constant0.<name>``
    (each kernel's parameter bank; device functions have none)."""
    try:
        sections = elf_sections(cubin)
    except ValueError as e:
        raise ValueError(f"entry_points: {e}") from None
    prefix = ".nv.constant0."
    return sorted(n[len(prefix):] for n in sections if n.startswith(prefix))


def warmup() -> list[str]:
    """Compile (or load from the cache) every module for the current device; returns their names.

    Cold caches compile the compile units in parallel threads (precompile: NVRTC compiles separate
    programs concurrently and ctypes releases the GIL), so a cold start costs about the slowest unit.
    """
    import cupy

    _match_driver()
    precompile([device_arch(cupy.cuda.Device().id)])      # compile / validate the disk cache
    for n, p in compile_units():
        get_module(n, p)                                   # load (main thread: CuPy context)
    return module_names()


def _unknown_parts(module: str, source: str) -> list[str]:
    """The FP4KIT_IN_PART(p) arguments of `source` (a .cu file) that are not compile parts of `module`."""
    parts = {p for p in parts_of(module) if p is not None}
    known = ({str(p) for p in parts} | ({"FP4KIT_PART_COMMON"} if _COMMON_PART in parts else set())
             | {f"FP4KIT_PART_RECIPES({p - 10})" for p in parts if p >= 10})
    used = re.findall(r"FP4KIT_IN_PART\(\s*((?:[^()]|\([^()]*\))*?)\s*\)", source)   # one level of (...)
    return sorted(set(used) - known)


def _check_unit(m: str, part: int | None, arch: str, sources: dict[str, str]) -> dict:
    """compile_check's result for one compile unit (never raises: a failure is in its "error")."""
    t0 = time.perf_counter()
    res: dict[str, Any] = {"file": f"{m}.cu", "part": part, "arch": arch, "ok": False, "bytes": 0, "error": "",
                           "kernels": [], "resources": {}}
    try:
        cubin, log_text = _compile_logged(m, arch, sources, _part_options(arch, part) + ["--ptxas-options=-v"])
        res.update(ok=True, bytes=len(cubin), kernels=entry_points(cubin), resources=ptxas_resources(log_text))
        stray = [k for k in res["kernels"] if part_of(m, k) != part]
        if part is not None and (stray or not res["kernels"]):
            res.update(ok=False, error=f"part {part} of {m}.cu: " + (
                f"kernels that part_of places elsewhere: {stray}" if stray else "no kernel"))
    except Exception as e:   # noqa: BLE001 - one failed part must not hide the others
        res["error"] = f"{type(e).__name__}: {e}"
    res["seconds"] = time.perf_counter() - t0
    return res


def compile_check(arch: str, modules: list[str] | None = None, verbose: bool = True,
                  sources: dict[str, str] | None = None, workers: int | None = None) -> list[dict]:
    """Compile every cuda_src/*.cu for `arch` (e.g. "sm_90", "sm_100a") with NVRTC alone, each compile
    part of a module that has them (parts_of): no GPU and no CuPy needed, no cache. A part must hold
    kernels, and only kernels that part_of places in it (else get_function could not find them).
    Returns one dict per (file, part) with its kernels and their ptxas resources (ptxas_resources:
    compiled with --ptxas-options=-v, which changes only the cubin's tool note, not its code), in
    module and part order; raises RuntimeError if any failed.
    sources: the sources to compile from instead of cuda_src's (a probe's extra modules).
    workers: compile units at once, in threads; default compile_workers(). Each unit's "seconds" is its own wall time, overlapping the others'."""
    from concurrent.futures import ThreadPoolExecutor
    sources = _read_sources() if sources is None else sources
    jobs: list[Any] = []   # per unit: its result dict (a module with unknown parts) or (module, part)
    for m in modules or module_names():
        unknown = _unknown_parts(m, sources.get(f"{m}.cu", ""))
        if unknown:   # kernels under such a part are in no cubin (part_of cannot name it)
            jobs.append({"file": f"{m}.cu", "part": None, "arch": arch, "ok": False, "bytes": 0, "kernels": [],
                         "resources": {}, "seconds": 0.0,
                         "error": f"{m}.cu names compile parts {unknown} that PARTS[{m!r}] lacks"})
        else:
            jobs.extend((m, part) for part in parts_of(m))
    if workers is None:
        workers = compile_workers()
    results: list[dict] = []
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(jobs) or 1))) as pool:
        futures = [j if isinstance(j, dict) else pool.submit(_check_unit, j[0], j[1], arch, sources) for j in jobs]
        for f in futures:   # in unit order, each as soon as it and the ones before it are done
            res = f if isinstance(f, dict) else f.result()
            results.append(res)
            if not verbose:
                continue
            if isinstance(f, dict):   # unknown parts: not compiled
                print(res["error"], flush=True)
                continue
            status = f"ok  {res['bytes']:>9} bytes, {len(res['kernels']):>3} kernels" if res["ok"] else "FAILED"
            name = res["file"] + ("" if res["part"] is None else f" [{res['part']}]")
            print(f"{name:<18} {arch:<8} {status}  {res['seconds']:.1f}s", flush=True)
            if not res["ok"]:
                print(res["error"], flush=True)
    failed = [r for r in results if not r["ok"]]
    if failed:
        raise RuntimeError(f"compile_check({arch}): {len(failed)} of {len(results)} files failed: "
                           + ", ".join(r["file"] for r in failed))
    return results

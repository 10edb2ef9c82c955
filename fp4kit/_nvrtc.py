"""A small ctypes binding of NVRTC (the CUDA runtime compiler); no GPU and no CuPy needed.

Library search order: the ``nvidia-cuda-nvrtc`` wheel (``nvidia/cu13/lib``, ``nvidia/cuda_nvrtc/lib``),
``$CUDA_PATH``/``$CUDA_HOME`` and ``/usr/local/cuda`` (``lib64``, ``lib``), then the system loader;
after :func:`prefer_driver`, libraries of a newer CUDA major than the driver's come last (a cubin
of CUDA 13's NVRTC needs a CUDA 13 driver: ``.[cuda12,test]`` installs both NVRTC 12 and 13).
Errors raise :class:`NVRTCError` carrying the program log.
"""
from __future__ import annotations

import ctypes
import glob
import os
import re
import sys
import threading
from pathlib import Path

__all__ = ["NVRTCError", "load_library", "version", "supported_archs", "compile_program", "library_path",
           "prefer_driver", "install_hint"]

_lock = threading.Lock()
_lib = None
_lib_path: str | None = None
_max_major: int | None = None   # the newest CUDA major the driver runs (prefer_driver), else None


def _major_of(path: str | None) -> int | None:
    """The CUDA major version in an NVRTC library's file name (libnvrtc.so.13[.x.y], nvrtc64_120_0.dll),
    None when the name has none (libnvrtc.so)."""
    m = re.search(r"libnvrtc\.so\.(\d+)", path or "") or re.search(r"nvrtc64_(\d+?)\d_\d", path or "")
    return int(m.group(1)) if m else None


def prefer_driver(driver_version: int) -> None:
    """Prefer NVRTC libraries no newer than the CUDA driver (`driver_version` as cudaDriverGetVersion
    gives it, e.g. 12080): the loader calls this before its first compile. A library already loaded
    from a newer major is dropped, so that the next load_library() takes an older one if there is one."""
    global _lib, _lib_path, _max_major
    major = int(driver_version) // 1000
    with _lock:
        _max_major = major if major > 0 else None
        if _lib is not None and _max_major is not None and (_major_of(_lib_path) or 0) > _max_major:
            _lib = _lib_path = None


class NVRTCError(RuntimeError):
    """An NVRTC call failed; `log` holds the compiler's program log (may be empty)."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message + (f"\n--- NVRTC log ---\n{log}" if log else ""))
        self.log = log


def _candidate_paths() -> list[str]:
    names = ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"] if sys.platform != "win32" else []
    if sys.platform == "win32":
        names = ["nvrtc64_130_0.dll", "nvrtc64_120_0.dll"]
    found: list[str] = []
    p: Path | str      # a candidate's Path below, then a str of `found`
    # 1. the nvidia-cuda-nvrtc wheel (namespace package `nvidia`)
    try:
        import nvidia  # type: ignore

        roots = list(getattr(nvidia, "__path__", []))
    except ImportError:
        roots = []
    for root in roots:
        for sub in ("cu13/lib", "cuda_nvrtc/lib", "cu12/lib", "cu13/bin", "cuda_nvrtc/bin"):
            d = Path(root) / sub
            for n in names:
                if (d / n).is_file():
                    found.append(str(d / n))
            if sys.platform != "win32":
                found.extend(sorted(glob.glob(str(d / "libnvrtc.so.*[0-9]")), reverse=True))
    # 2. a CUDA toolkit
    for env in ("CUDA_PATH", "CUDA_HOME"):
        if os.environ.get(env):
            for sub in ("lib64", "lib", "bin"):
                for n in names:
                    p = Path(os.environ[env]) / sub / n
                    if p.is_file():
                        found.append(str(p))
    for sub in ("lib64", "lib"):
        for n in names:
            p = Path("/usr/local/cuda") / sub / n
            if p.is_file():
                found.append(str(p))
    # 3. the system loader
    found.extend(names)
    seen, out = set(), []
    for p in found:
        if p not in seen:
            seen.add(p)
            out.append(p)
    if _max_major is not None:   # newer majors than the driver's last, the order otherwise kept
        out.sort(key=lambda p: (_major_of(p) or 0) > _max_major)
    return out


def load_library():
    """Load libnvrtc once (thread safe) and declare the functions used here."""
    global _lib, _lib_path
    with _lock:
        if _lib is not None:
            return _lib
        errors = []
        for path in _candidate_paths():
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                errors.append(f"{path}: {e}")
                continue
            _declare(lib)
            _lib, _lib_path = lib, path
            return lib
        raise NVRTCError(f"could not load libnvrtc: {install_hint()}; tried:\n  " + "\n  ".join(errors[-8:]))


def install_hint() -> str:
    """What to install for an NVRTC the CUDA driver can run (its major, when prefer_driver told it):
    a cubin of CUDA 13's NVRTC does not load under a CUDA 12 driver."""
    if _max_major is not None and _max_major <= 12:
        return (f"the CUDA driver runs CUDA {_max_major}, so install the CUDA 12 NVRTC wheel, "
                f"`pip install \"nvidia-cuda-nvrtc-cu12>=12.8\"` (fp4kit's `cuda12` extra has it), or a CUDA "
                f"12.8+ toolkit (set CUDA_PATH)" + ("" if _max_major == 12 else
                                                   "; fp4kit needs NVRTC 12.8 or later, so update the driver too"))
    return ("install the `nvidia-cuda-nvrtc` wheel (CUDA 13; fp4kit's `cuda13` extra has it, `cuda12` the "
            "CUDA 12 one) or a CUDA toolkit (set CUDA_PATH)")


def library_path() -> str | None:
    load_library()
    return _lib_path


def _declare(lib) -> None:
    c = ctypes
    prog = c.c_void_p
    lib.nvrtcGetErrorString.restype = c.c_char_p
    lib.nvrtcGetErrorString.argtypes = [c.c_int]
    lib.nvrtcVersion.restype = c.c_int
    lib.nvrtcVersion.argtypes = [c.POINTER(c.c_int), c.POINTER(c.c_int)]
    lib.nvrtcCreateProgram.restype = c.c_int
    lib.nvrtcCreateProgram.argtypes = [c.POINTER(prog), c.c_char_p, c.c_char_p, c.c_int,
                                       c.POINTER(c.c_char_p), c.POINTER(c.c_char_p)]
    lib.nvrtcDestroyProgram.restype = c.c_int
    lib.nvrtcDestroyProgram.argtypes = [c.POINTER(prog)]
    lib.nvrtcCompileProgram.restype = c.c_int
    lib.nvrtcCompileProgram.argtypes = [prog, c.c_int, c.POINTER(c.c_char_p)]
    for name in ("nvrtcGetProgramLogSize", "nvrtcGetPTXSize", "nvrtcGetCUBINSize"):
        f = getattr(lib, name)
        f.restype = c.c_int
        f.argtypes = [prog, c.POINTER(c.c_size_t)]
    for name in ("nvrtcGetProgramLog", "nvrtcGetPTX", "nvrtcGetCUBIN"):
        f = getattr(lib, name)
        f.restype = c.c_int
        f.argtypes = [prog, c.c_char_p]
    if hasattr(lib, "nvrtcGetNumSupportedArchs"):
        lib.nvrtcGetNumSupportedArchs.restype = c.c_int
        lib.nvrtcGetNumSupportedArchs.argtypes = [c.POINTER(c.c_int)]
        lib.nvrtcGetSupportedArchs.restype = c.c_int
        lib.nvrtcGetSupportedArchs.argtypes = [c.POINTER(c.c_int)]


def _check(lib, status: int, what: str, log: str = "") -> None:
    if status != 0:
        msg = lib.nvrtcGetErrorString(status)
        msg = msg.decode() if msg else f"error {status}"
        raise NVRTCError(f"{what} failed: {msg} (nvrtcResult {status})", log)


def version() -> tuple[int, int]:
    lib = load_library()
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(lib, lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    return (major.value, minor.value)


def supported_archs() -> list[int]:
    """Compute capabilities (e.g. 90, 100) this NVRTC can target; [] when it cannot say."""
    lib = load_library()
    if not hasattr(lib, "nvrtcGetNumSupportedArchs"):
        return []
    n = ctypes.c_int()
    _check(lib, lib.nvrtcGetNumSupportedArchs(ctypes.byref(n)), "nvrtcGetNumSupportedArchs")
    arr = (ctypes.c_int * n.value)()
    _check(lib, lib.nvrtcGetSupportedArchs(arr), "nvrtcGetSupportedArchs")
    return list(arr)


def _get_log(lib, p) -> str:
    size = ctypes.c_size_t()
    if lib.nvrtcGetProgramLogSize(p, ctypes.byref(size)) != 0 or size.value <= 1:
        return ""
    buf = ctypes.create_string_buffer(size.value)
    if lib.nvrtcGetProgramLog(p, buf) != 0:
        return ""
    return buf.value.decode(errors="replace")


def compile_program(source: str, name: str, options: list[str], headers: dict[str, str] | None = None,
                    output: str = "cubin") -> tuple[bytes, str]:
    """Compile one CUDA C++ translation unit; returns (cubin or ptx bytes, program log).

    `headers` maps include names (as written in `#include "..."`) to their source text.
    `output` is "cubin" (needs a real architecture, e.g. -arch=sm_90) or "ptx".
    """
    if output not in ("cubin", "ptx"):
        raise ValueError(f"output: expected 'cubin' or 'ptx', got {output!r}")
    lib = load_library()
    headers = headers or {}
    hnames = list(headers)
    h_src = (ctypes.c_char_p * max(1, len(hnames)))(*[headers[h].encode() for h in hnames])
    h_inc = (ctypes.c_char_p * max(1, len(hnames)))(*[h.encode() for h in hnames])
    p = ctypes.c_void_p()
    _check(lib, lib.nvrtcCreateProgram(ctypes.byref(p), source.encode(), name.encode(), len(hnames),
                                       h_src if hnames else None, h_inc if hnames else None),
           f"nvrtcCreateProgram({name})")
    try:
        opts = (ctypes.c_char_p * max(1, len(options)))(*[o.encode() for o in options])
        status = lib.nvrtcCompileProgram(p, len(options), opts)
        log = _get_log(lib, p)
        _check(lib, status, f"compiling {name} with {' '.join(options)}", log)
        size = ctypes.c_size_t()
        if output == "cubin":
            _check(lib, lib.nvrtcGetCUBINSize(p, ctypes.byref(size)), "nvrtcGetCUBINSize", log)
            if size.value == 0:
                raise NVRTCError(f"{name}: NVRTC produced no CUBIN (options {options}; a virtual "
                                 "architecture such as compute_90 gives PTX only)", log)
            buf = ctypes.create_string_buffer(size.value)
            _check(lib, lib.nvrtcGetCUBIN(p, buf), "nvrtcGetCUBIN", log)
            return buf.raw[: size.value], log
        _check(lib, lib.nvrtcGetPTXSize(p, ctypes.byref(size)), "nvrtcGetPTXSize", log)
        buf = ctypes.create_string_buffer(size.value)
        _check(lib, lib.nvrtcGetPTX(p, buf), "nvrtcGetPTX", log)
        return buf.raw[: max(0, size.value - 1)], log
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(p))

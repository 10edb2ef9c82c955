"""Programmatic dependent launch (fp4kit._torch_exec.PDL) without a GPU: the ctypes structures
have cuda.h's layout, and every kernel waits for its predecessors before anything else (a kernel
the fast paths launch with PDL that did not would race with the kernel ahead of it)."""
from __future__ import annotations

import ctypes
import pathlib
import re

from fp4kit import _torch_exec

SRC = pathlib.Path(__file__).resolve().parents[1] / "cuda_src"


def test_launch_structures_have_the_driver_layout():
    # CUlaunchAttribute: id, pad to 8 bytes, a 64-byte value union; CUlaunchConfig: 7 unsigned
    # ints, the stream, the attribute pointer, their count (64-bit hosts)
    assert ctypes.sizeof(_torch_exec._LaunchAttribute) == 72
    assert _torch_exec._LaunchAttribute.value.offset == 8
    cfg = _torch_exec._LaunchConfig
    assert ctypes.sizeof(cfg) == 56
    assert (cfg.sharedMemBytes.offset, cfg.hStream.offset, cfg.attrs.offset, cfg.numAttrs.offset) == (24, 32, 40, 48)
    assert _torch_exec._CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION == 6


def _kernels(text):
    """(signature, first statement of the body) of every __global__ function in a source text
    (macro bodies too: their line continuations are dropped)."""
    text = re.sub(r"\\[ \t]*\n", " ", text)
    for m in re.finditer(r"__global__", text):
        body = text.index("{", m.end())
        yield " ".join(text[m.end():body].split())[:80], text[body + 1:body + 200].strip()


def test_every_kernel_starts_with_the_grid_dependency_wait():
    found = 0
    for path in sorted(SRC.glob("*.cu")):
        if path.name == "selftest.cu":       # launched by fp4kit._gpucheck alone, never by a plan
            continue
        for name, first in _kernels(path.read_text()):
            found += 1
            assert first.startswith("FP4KIT_GRID_DEP();"), f"{path.name}: {name} starts with {first[:60]!r}"
    assert found == 38      # amax 4, dequantize 1, grouped 18, quantize 9, quantize_cols 1, rht 1, swizzle 4
    types = (SRC / "common" / "types.cuh").read_text()
    assert 'asm volatile("griddepcontrol.wait;" ::: "memory");' in types


def test_pdl_switch_from_the_environment():
    import os
    import subprocess
    import sys

    code = "from fp4kit import _torch_exec; print(_torch_exec.PDL)"
    for value, want in (("0", "False"), ("off", "False"), ("1", "True"), ("", "True")):
        env = dict(os.environ, FP4KIT_PDL=value)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.strip() == want, value


class _Recorder:
    def __init__(self, fail=None):
        self.calls, self.fail = [], fail

    def __call__(self, *args):
        self.calls.append(args)
        if self.fail is not None:
            raise self.fail


def _refusing_launch(status):
    """A programmatic launch whose cuLaunchKernelEx returns `status` (no driver involved)."""
    return _torch_exec._PdlLaunch((3, 2, 1), 256, lambda cfg, f, params, extra: status)


def test_refused_programmatic_launch_falls_back_and_switches_pdl_off(monkeypatch):
    from fp4kit import _plan

    plain = _Recorder()
    monkeypatch.setattr(_torch_exec, "_driver_launch", lambda: plain)
    monkeypatch.setattr(_torch_exec, "PDL", True)
    monkeypatch.setattr(_torch_exec, "_pdl_refused", 0)
    _plan.FAST_CALLS["marker"] = 1
    _refusing_launch(801)(0x1234, 77, 0x5678)       # 801: CUDA_ERROR_NOT_SUPPORTED
    # the same kernel, grid, block, stream and arguments through cuLaunchKernel
    assert plain.calls == [(0x1234, 3, 2, 1, 256, 1, 1, 0, 77, 0x5678, 0)]
    assert _torch_exec.PDL is False and _torch_exec._pdl_refused == 801
    assert "marker" not in _plan.FAST_CALLS               # plans dropped: rebuilt with plain launches


def test_failed_launch_error_is_raised_and_pdl_stays_on(monkeypatch):
    plain = _Recorder(fail=RuntimeError("CUDA_ERROR_INVALID_VALUE"))
    monkeypatch.setattr(_torch_exec, "_driver_launch", lambda: plain)
    monkeypatch.setattr(_torch_exec, "PDL", True)
    monkeypatch.setattr(_torch_exec, "_pdl_refused", 0)
    import pytest

    with pytest.raises(RuntimeError, match="INVALID_VALUE"):
        _refusing_launch(1)(0x1234, 0, 0)
    assert len(plain.calls) == 1 and _torch_exec.PDL is True and _torch_exec._pdl_refused == 0


def test_successful_programmatic_launch_passes_its_configuration():
    seen = []

    def fake(cfg_address, f, params, extra):
        cfg = _torch_exec._LaunchConfig.from_address(cfg_address)
        attr = cfg.attrs[0]
        seen.append((f, params, extra, cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ, cfg.blockDimX, cfg.blockDimY,
                     cfg.sharedMemBytes, cfg.hStream, cfg.numAttrs, attr.id, attr.value))
        return 0

    launch = _torch_exec._PdlLaunch((5, 1, 1), 128, fake)
    launch(0xABC, 0x99, 0xDEF)
    launch(0xABC, None, 0xDEF)                            # the legacy default stream
    assert seen == [(0xABC, 0xDEF, None, 5, 1, 1, 128, 1, 0, 0x99, 1, 6, 1),
                    (0xABC, 0xDEF, None, 5, 1, 1, 128, 1, 0, None, 1, 6, 1)]


def test_raw_launch_goes_through_pdl_with_the_call_grid(monkeypatch):
    """The one-kernel raw launches (dequantize, group_dequantize fast paths): with PDL and PDL_ALL
    through cuLaunchKernelEx with programmatic serialization, this call's grid, block and stream
    and the packed arguments; PDL_ALL or PDL False (also a PDL switched off after a refusal):
    cuLaunchKernel with the same values."""
    import threading

    plain, ex = _Recorder(), []

    def launch_ex(cfg, f, params, extra):
        c = _torch_exec._LaunchConfig.from_address(cfg)
        attr = c.attrs[0]
        args = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
        vals = [ctypes.c_uint64.from_address(args[i]).value for i in range(3)]
        ex.append((f, c.gridDimX, c.gridDimY, c.gridDimZ, c.blockDimX, c.hStream, c.numAttrs, attr.id, attr.value,
                   vals, extra))
        return 0
    monkeypatch.setattr(_torch_exec, "_driver_launch", lambda: plain)
    monkeypatch.setattr(_torch_exec, "_launch_ex", lambda: launch_ex)
    monkeypatch.setattr(_torch_exec, "_function_handle", lambda module, kernel: 0xF00)
    monkeypatch.setattr(_torch_exec, "_ensure_context", lambda: None)
    monkeypatch.setattr(_torch_exec, "_RAW_TLS", threading.local())
    monkeypatch.setattr(_torch_exec, "_RAW_FUNCS", {})
    monkeypatch.setattr(_torch_exec, "PDL", True)
    monkeypatch.setattr(_torch_exec, "PDL_ALL", True)
    _torch_exec.raw_launch(0, "dequantize", "k", 5462, (11, 22, 33), 0xABC)
    _torch_exec.raw_launch(0, "dequantize", "k", 7, (44, 55, 66), 0xDEF)
    serial = _torch_exec._CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    assert ex == [(0xF00, 5462, 1, 1, 256, 0xABC, 1, serial, 1, [11, 22, 33], None),
                  (0xF00, 7, 1, 1, 256, 0xDEF, 1, serial, 1, [44, 55, 66], None)]
    assert not plain.calls
    for switch in ("PDL_ALL", "PDL"):
        monkeypatch.setattr(_torch_exec, switch, False)
        _torch_exec.raw_launch(0, "dequantize", "k", 9, (1, 2, 3), 0x77)
        (f, gx, gy, gz, bx, by, bz, shm, stream, params, extra), = plain.calls[-1:]
        assert (f, gx, gy, gz, bx, by, bz, shm, stream, extra) == (0xF00, 9, 1, 1, 256, 1, 1, 0, 0x77, 0)
        args = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
        assert [ctypes.c_uint64.from_address(args[i]).value for i in range(3)] == [1, 2, 3]
        monkeypatch.setattr(_torch_exec, switch, True)
    assert len(ex) == 2 and len(plain.calls) == 2


def test_first_kernel_pdl_only_with_nothing_queued_before_it():
    """A plan's first kernel takes PDL only when the call queues no stream work ahead of it (a
    cleared, copied or filled buffer, an arena with zero ranges): then the kernel ahead is the
    previous call's."""
    t = _torch_exec
    launch = (t._OP_LAUNCH, 0, 0xF, (1, 1, 1), 256, ())
    dims = (t._OP_LAUNCH_DIMS, 0, 0xF, (1, 1, 1), 256, ((), 0, 0))
    empty = (t._OP_EMPTY, 0, (4,), None, True, True)
    view = (t._OP_VIEW, 1, 0, 0, 4, None)
    arena = lambda zeros: (t._OP_ARENA, 512, None, (), (), zeros)  # noqa: E731
    assert t._nothing_before_first_launch((empty, view, arena(()), launch, (t._OP_ZERO_FILL, 0) + (None,) * 4))
    assert t._nothing_before_first_launch((empty, dims))
    assert t._nothing_before_first_launch(())
    for ahead in ((t._OP_ZEROS, 0, (1,), None, 4, None), (t._OP_ZERO_FILL, 0, None, None, None, None),
                  (t._OP_COPY, 1, 0, None, None, None), (t._OP_FILL, 0, (4,), None, 7, None), arena(((0, 4),))):
        assert not t._nothing_before_first_launch((empty, ahead, launch)), ahead

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
    assert _torch_exec.PDL is True


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
    assert found == 32      # amax 4, dequantize 1, grouped 13, quantize 8, quantize_cols 1, rht 1, swizzle 4
    types = (SRC / "common" / "types.cuh").read_text()
    assert 'asm volatile("griddepcontrol.wait;" ::: "memory");' in types

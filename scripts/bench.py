#!/usr/bin/env python3
"""fp4kit benchmarks: time per op/format/axis/shape against a device-to-device copy of the same
bytes and a torch.compile'd PyTorch implementation of the same numerics.

Method: inputs are PyTorch CUDA tensors (so fp4kit runs on torch's current stream); each figure
is the median of many CUDA-event-timed runs after warm-up, rotating among enough input buffers to
exceed the L2 cache (quantize: bfloat16 inputs; dequantize: quantized tensors; swizzle: scale
matrices). "us (device)" puts a GPU spin ahead of the first event that outlasts the host's work of
queueing the call, so the events time the call's kernels back to back (the device time a CUDA graph
or a busy training step sees); the spin is capped (SPIN_CAP_S) and a row says when a run came back
late at the cap. "us (eager)" is the same call timed without the spin, host time included. Bytes
moved = input read once + every output written once (codes, scales, amax). "copy %" = device time
of a device-to-device copy moving the same number of bytes (read + write) measured in the same run
/ device time of the op. Every quantize, dequantize and swizzle_scales row has a torch.compile
baseline (the PyTorch functions below), timed the same way and checked byte for byte against
fp4kit.reference on the first, middle and last rows of each operand before it is timed; a baseline
whose bytes differ is reported so in its row and gets no speed-up.

Usage: python scripts/bench.py [--quick] [--only SECTIONS] [--shapes MxK,...] [--formats FMT,...]
                               [--no-startup] [--no-baselines] [--csv out.csv] [--md out.md]
"""
from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

DEVICE = "cuda"        # where the inputs live (the CPU tests of this script set "cpu")


def _torch():
    import torch
    return torch


# --------------------------------------------------------------------------------------------
# timing

SPIN_CAP_S = 0.05      # longest GPU spin ahead of a timed run, seconds


def _clock_hz() -> float:
    torch = _torch()
    try:
        return float(torch.cuda.get_device_properties(0).clock_rate) * 1e3   # kHz -> Hz
    except Exception:
        return 2.0e9


class Timing(float):
    """A median time in microseconds (usable as a float) that says how it was taken: `late` of
    `runs` runs were kept although the GPU spin had ended before the host queued the call (their
    time includes host time), `capped` when the spin reached SPIN_CAP_S."""

    late: int
    capped: bool
    runs: int

    def __new__(cls, us: float, late: int = 0, capped: bool = False, runs: int = 0):
        t = super().__new__(cls, us)
        t.late, t.capped, t.runs = late, capped, runs
        return t

    def note(self) -> str:
        """'' for a clean measurement, else what went wrong (for the row)."""
        parts = [f"spin at its {SPIN_CAP_S * 1e3:.0f} ms cap"] if self.capped else []
        if self.late:
            parts.append(f"{self.late} of {self.runs} runs late (host time included)")
        return ", ".join(parts)


def time_fn(fn, reps: int = 50, warmup: int = 5, mode: str = "device") -> Timing:
    """Median microseconds of fn() between two CUDA events on torch's current stream.

    mode "device": a GPU spin (torch.cuda._sleep) is queued before the first event and lasts longer
    than the host needs to queue fn()'s work, so the events time the kernels back to back: device
    time, as in a CUDA graph or a busy training step. Runs where the spin ended before the host had
    queued everything are detected (the first event already complete) and repeated with a spin twice
    as long, up to SPIN_CAP_S (and 4 x reps tries); a late run past that is kept and counted in the
    result's `late` (`capped` says the cap was reached).
    mode "eager": no spin; host time before the first launch counts (what a synchronised loop sees).
    """
    torch = _torch()
    t0 = time.perf_counter()
    for _ in range(warmup):
        fn()
    host_s = (time.perf_counter() - t0) / warmup
    torch.cuda.synchronize()
    sleep = getattr(torch.cuda, "_sleep", None) if mode == "device" else None
    hz = _clock_hz()
    cap = int(SPIN_CAP_S * hz)
    cycles = min(int(max(4 * host_s, 100e-6) * hz), cap)
    times: list[float] = []
    tries = late_kept = 0
    while len(times) < reps:
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        if sleep is not None:
            sleep(cycles)
        a.record()
        fn()
        b.record()
        late = sleep is not None and a.query()      # spin over before fn was queued
        b.synchronize()
        tries += 1
        if late and cycles < cap and tries < 4 * reps:
            cycles = min(2 * cycles, cap)
            continue
        late_kept += bool(late)
        times.append(a.elapsed_time(b) * 1e3)
    return Timing(statistics.median(times), late=late_kept, capped=sleep is not None and cycles >= cap, runs=reps)


def rotating(make, nbytes_each: int, l2_bytes: int = 64 << 20):
    """Enough independent inputs that their total exceeds the L2 cache; returns a cycling getter."""
    n = max(2, -(-2 * l2_bytes // max(nbytes_each, 1)))
    n = min(n, 16)
    bufs = [make(i) for i in range(n)]
    state = {"i": 0}

    def nxt():
        state["i"] = (state["i"] + 1) % n
        return bufs[state["i"]]
    nxt.bufs, nxt.state = bufs, state
    return nxt


def with_amax(nxt):
    """For a getter from rotating(): a getter of (buffer, its own amax as a (1,) float32 tensor), the
    same buffer order. NVFP4 "supplied amax" rows pass each input its own amax, as a caller that
    knows it does: one amax for all the rotated inputs (scaled 1x, 2x, ...) would push the larger
    ones' blocks into saturation, which takes the slower encode (item 113 of docs/performance.md)."""
    amaxes = [b.float().abs().amax().reshape(1) for b in nxt.bufs]

    def get():
        x = nxt()
        return x, amaxes[nxt.state["i"]]
    return get


def copy_us(nbytes: int, reps: int) -> Timing:
    """A device-to-device copy moving `nbytes` in total (nbytes/2 read + nbytes/2 written)."""
    torch = _torch()
    half = max(nbytes // 2, 16)
    src = rotating(lambda i: torch.empty(half, dtype=torch.uint8, device=DEVICE), half)
    dst = torch.empty(half, dtype=torch.uint8, device=DEVICE)
    return time_fn(lambda: dst.copy_(src()), reps=reps)     # device time (see time_fn)


# --------------------------------------------------------------------------------------------
# torch.compile baselines: PyTorch code for the same numerics (SPEC.md sections 2-6: rounding to
# nearest even, rule rceil, NVFP4 with one global amax), on any device. A user would write much the
# same; FP8 elements use torch's float8 casts (NaN fixed up: they keep NaN's sign, SPEC gives 0x7F),
# FP6 elements an exponent / mantissa split, E2M1 elements thresholds.

class FormatSpec(NamedTuple):
    """What the baselines need of a format, as plain values (torch.compile takes them as constants)."""
    name: str
    block: int
    packed: bool          # FP4: two codes per byte
    nvfp4: bool
    elem: str             # "e4m3", "e5m2", "e2m3", "e3m2", "e2m1"
    ebits: int
    mbits: int
    bias: int
    emax_value: float     # largest finite element value
    nan_code: int         # the code NaN encodes to (sign bit clear)
    fp8: str              # torch dtype of FP8 elements ("float8_e4m3fn", "float8_e5m2"), else ""


def format_spec(fmt: str) -> FormatSpec:
    import fp4kit
    f = fp4kit.FORMATS[fmt]
    e = f.elem
    fp8 = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}.get(e.name, "")
    return FormatSpec(f.name, f.block, f.packed, f.is_nvfp4, e.name, e.ebits, e.mbits, e.bias, e.max, e.nan_code, fp8)


_F6 = float(np.float32(1) / np.float32(6))            # fp32_RN(1/6) = 0x3E2AAAAB, exact as a Python float
_F2688 = float(np.float32(1) / np.float32(2688))      # fp32_RN(1/2688)


def _pow2_torch(k):
    """2^k as float32 from bits, for an int32 tensor k in [-126, 127] (exact)."""
    torch = _torch()
    return ((k + 127) << 23).view(torch.float32)


def _e8m0_rceil_torch(v):
    torch = _torch()
    b = v.view(torch.int32)
    e = (b >> 23) & 0xFF
    m = b & 0x7FFFFF
    bump = (m > 0) & (e != 254) & ~((e == 0) & (m <= 0x400000))
    E = e + bump.to(torch.int32)
    E = torch.where(torch.isinf(v), torch.full_like(E, 254), E)
    return E


def _encode_torch(y, spec: FormatSpec):
    """SPEC section 2's encode of float32 y to element codes, one per element: uint8 for FP8, int32
    for FP6 / FP4 (narrowed, or packed then narrowed, by the caller), as the first, specialised
    baselines did (the generalised form of the forty-sixth session ran slower on the H200)."""
    torch = _torch()
    nan = torch.isnan(y)
    if spec.fp8:
        vmax = spec.emax_value
        # NaN enters the cast as +NaN (its sign cleared in the float domain, fused into the cast):
        # E4M3's +NaN is 0x7F. E5M2's cast gives fp16's top byte (0x7E), so its code is set after.
        q = torch.where(nan, y.abs(), y.clamp(-vmax, vmax)).to(getattr(torch, spec.fp8)).view(torch.uint8)
        if spec.elem == "e5m2":
            q = torch.where(nan, torch.full_like(q, spec.nan_code), q)
        return q
    a = y.abs()
    if spec.elem == "e2m1":
        # E2M1 nearest-even thresholds: 0.25 0.75 1.25 1.75 2.5 3.5 5 (ties to the even code)
        code = ((a > 0.25).int() + (a >= 0.75).int() + (a > 1.25).int() + (a >= 1.75).int()
                + (a > 2.5).int() + (a >= 3.5).int() + (a > 5.0).int())
    else:
        # FP6: exponent e = max(floor(log2 a), emin) read from a's bits, then round a / 2^(e - mbits)
        # to the nearest integer, ties to even (exact: a power-of-two multiply); a mantissa that
        # rounds up to 2^(mbits + 1) carries into the exponent by the addition below.
        emin = 1 - spec.bias
        a = torch.where(nan, torch.zeros_like(a), a).clamp(max=spec.emax_value)
        e = (((a.view(torch.int32) >> 23) & 0xFF) - 127).clamp(min=emin)
        n = torch.round(a * _pow2_torch(spec.mbits - e)).to(torch.int32)
        code = ((e - emin) << spec.mbits) + n
    code = code | ((torch.signbit(y) & ~nan).int() << (spec.ebits + spec.mbits))
    return torch.where(nan, torch.full_like(code, spec.nan_code), code)


def _decode_torch(codes, spec: FormatSpec):
    """uint8 element codes (unpacked) -> their float32 values (exact)."""
    torch = _torch()
    if spec.fp8:
        return codes.view(getattr(torch, spec.fp8)).float()
    c = codes.to(torch.int32)
    e = (c >> spec.mbits) & ((1 << spec.ebits) - 1)
    m = c & ((1 << spec.mbits) - 1)
    mag = (m + (e > 0).int() * (1 << spec.mbits)).float() * _pow2_torch(e.clamp(min=1) - spec.bias - spec.mbits)
    # the sign as a bit: Inductor's Triton code negates as 0 - x, which makes -0 of the code 0x8 +0
    # (the H200 run of the forty-sixth session; eager PyTorch and Inductor on the CPU keep -0)
    sign = ((c >> (spec.ebits + spec.mbits)) & 1) << 31
    return (mag.view(torch.int32) | sign).view(torch.float32)


def _pack_fp4_torch(q):
    """(R, C) 4-bit codes (any integer dtype) -> (R, C/2) uint8, element 2k in the low nibble."""
    torch = _torch()
    R, C = q.shape
    q = q.reshape(R, C // 2, 2)
    return (q[..., 0] | (q[..., 1] << 4)).to(torch.uint8)


def _unpack_fp4_torch(p):
    torch = _torch()
    R, C2 = p.shape
    return torch.stack((p & 0xF, p >> 4), dim=-1).reshape(R, 2 * C2)


def _swizzle_torch(s):
    """(R, C) compact scales -> (roundup(R, 128), roundup(C, 4)) swizzled (SPEC section 6)."""
    torch = _torch()
    R, C = s.shape
    Rp, Cp = -(-R // 128) * 128, -(-C // 4) * 4
    if (Rp, Cp) != (R, C):
        s = torch.nn.functional.pad(s, (0, Cp - C, 0, Rp - R))
    return s.reshape(Rp // 128, 4, 32, Cp // 4, 4).permute(0, 3, 2, 1, 4).reshape(Rp, Cp)


def _unswizzle_torch(s, R, C):
    Rp, Cp = s.shape
    return s.reshape(Rp // 128, Cp // 4, 32, 4, 4).permute(0, 3, 2, 1, 4).reshape(Rp, Cp)[:R, :C]


def _blocks_torch(x2, block):
    """(R, C) -> float32 (R, ceil(C / block), block), a partial last block padded with zeros."""
    torch = _torch()
    R, C = x2.shape
    nb = -(-C // block)
    xf = x2.float()
    if nb * block != C:
        xf = torch.nn.functional.pad(xf, (0, nb * block - C))
    return xf.reshape(R, nb, block)


def _unblock_torch(yb, C):
    """(R, nb, block) codes -> (R, C): the padding of a partial last block cut off. Applied to the
    codes, after the encode: the encode on (R, C) values (a reshape, then a slice, of the scaled
    blocks) ran the H200's MXFP8 baseline at 109 us against 77 us (Inductor, 8192^2, forty-sixth
    session)."""
    R, nb, block = yb.shape
    y = yb.reshape(R, nb * block)
    return y if nb * block == C else y[:, :C]


def _nanless(a):
    torch = _torch()
    return torch.where(torch.isnan(a), torch.zeros_like(a), a)


def _amax_torch(x):
    """NVFP4's global amax: max |x| with NaN ignored, float32 (1,)."""
    return _nanless(x.float().abs()).amax().reshape(1)


def _mx_operand_torch(x2, spec: FormatSpec):
    """MX rowwise operand of (R, C): (codes uint8 (R, C or C/2), compact E8M0 scales (R, ceil(C/32)))."""
    torch = _torch()
    R, C = x2.shape
    xb = _blocks_torch(x2, spec.block)
    amax = _nanless(xb.abs()).amax(-1)
    E = _e8m0_rceil_torch(amax * float(np.float32(1) / np.float32(spec.emax_value)))   # fp32_RN(1/max)
    k = 127 - E
    s_inv = torch.where(k == -127, torch.full_like(k, 0x00400000), (k.clamp(-126, 127) + 127) << 23).view(torch.float32)
    q = _unblock_torch(_encode_torch(xb * s_inv[..., None], spec), C)
    return (_pack_fp4_torch(q) if spec.packed else q.to(torch.uint8)), E.to(torch.uint8)


def _nvfp4_operand_torch(x2, amax, spec: FormatSpec):
    """NVFP4 rowwise operand of (R, C) under the global amax (1,): (codes (R, C/2), compact E4M3 scales)."""
    torch = _torch()
    R, C = x2.shape
    xb = _blocks_torch(x2, 16)
    FMAX = torch.finfo(torch.float32).max
    # Divisions in float64, then one rounding to float32: Triton's float32 `/` (what Inductor emits)
    # is div.full.f32, up to 2 ulp off, and made this baseline's bytes differ from the reference at
    # 16384^2 on the H100. A float64 quotient of two float32 values rounds to float32 exactly as
    # the float32 IEEE division does (it cannot land on a float32 midpoint).
    s_enc = (2688.0 / amax.double()).float().nan_to_num(nan=FMAX).clamp(max=FMAX)
    s_enc = torch.where((amax == 0) | (s_enc == 0), torch.ones_like(s_enc), s_enc)
    s_dec = (1.0 / s_enc.double()).float()
    b = _nanless(xb.abs()).amax(-1)
    sf = (b * (s_enc * _F6)).clamp(max=448.0).to(torch.float8_e4m3fn)
    enc = (1.0 / (sf.float() * s_dec).double()).float().clamp(max=FMAX)
    q = _unblock_torch(_encode_torch(xb * enc[..., None], spec), C)
    return _pack_fp4_torch(q), sf.view(torch.uint8)


def quantize_torch(x, amax, spec: FormatSpec, axis: str = "rowwise", layout: str = "compact", amax_given: bool = True):
    """The PyTorch twin of fp4kit.quantize(x, spec.name, axis=axis, scale_layout=layout[, amax=amax])
    for 2-D x: (codes, scales) of the rowwise operand, then of the columnwise one (the same on x's
    transpose), as `axis` asks. NVFP4 uses `amax` when `amax_given`, else computes it; MX formats
    ignore it."""
    if spec.nvfp4 and not amax_given:
        amax = _amax_torch(x)
    outs = []
    for t in ([x] if axis != "columnwise" else []) + ([x.t()] if axis != "rowwise" else []):
        q, s = _nvfp4_operand_torch(t, amax, spec) if spec.nvfp4 else _mx_operand_torch(t, spec)
        outs += [q, _swizzle_torch(s) if layout == "swizzled" else s]
    return tuple(outs)


_CANONICAL_NAN = {"float32": 0x7FC00000, "bfloat16": 0x7FC0, "float16": 0x7E00}   # as fp4kit.reference's


def dequantize_torch(codes, scales, amax, spec: FormatSpec, cols: int, dtype: str = "bfloat16", layout: str = "swizzled"):
    """The PyTorch twin of fp4kit.dequantize of one operand: codes (R, cols or cols/2), scales
    (compact or swizzled), NVFP4 amax (1,) -> (R, cols) of `dtype`, every NaN the canonical one."""
    torch = _torch()
    R = codes.shape[0]
    nb = -(-cols // spec.block)
    sc = _unswizzle_torch(scales, R, nb) if layout == "swizzled" else scales
    v = _decode_torch(_unpack_fp4_torch(codes) if spec.packed else codes, spec)
    if spec.nvfp4:
        s = (sc.view(torch.float8_e4m3fn).float() * amax.float()) * _F2688
    else:                                        # 2^(E-127); E = 0: 2^-127 (subnormal), 255: NaN
        E = sc.to(torch.int32)
        bits = torch.where(E == 0, torch.full_like(E, 0x00400000), E << 23)
        s = torch.where(E == 255, torch.full_like(E, 0x7FC00000), bits).view(torch.float32)
    y = v * s[:, :, None].expand(R, nb, spec.block).reshape(R, nb * spec.block)[:, :cols]
    out = y.to(getattr(torch, dtype))
    ib = torch.int32 if dtype == "float32" else torch.int16
    return torch.where(torch.isnan(y), torch.full_like(out.view(ib), _CANONICAL_NAN[dtype]), out.view(ib)).view(out.dtype)


# --------------------------------------------------------------------------------------------
# checking a baseline against fp4kit.reference

def _host(t):
    """A torch tensor as a NumPy array with the same bits (bfloat16 as ml_dtypes.bfloat16)."""
    import ml_dtypes
    torch = _torch()
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def _host_amax(x) -> np.ndarray:
    """The reference's global amax of x (max |x|, NaN ignored), computed on the host a slice at a time."""
    a = np.float32(0)
    for i in range(0, x.shape[0], 1024):
        a = np.fmax(a, np.fmax.reduce(np.abs(_host(x[i:i + 1024]).astype(np.float32)), axis=None, initial=0))
    return np.array([a], np.float32)


def sample_rows(n: int, k: int = 64) -> list[int]:
    """Rows of an operand a baseline is checked on: the first, middle and last k (all when n <= 3k)."""
    if n <= 3 * k:
        return list(range(n))
    mid = n // 2 - k // 2
    return list(range(k)) + list(range(mid, mid + k)) + list(range(n - k, n))


def check_quantize(outs, x, amax, fmt: str, axis: str, layout: str) -> str | None:
    """None when a quantize baseline's outputs (codes, scales per operand) hold the reference's bytes
    on sample_rows() of each operand (swizzled scales: those rows, and every padding byte 0), else
    what differs. `amax`: NVFP4's supplied amax, None to use the reference's own of x."""
    import fp4kit
    from fp4kit.reference.golden import byte_diff
    torch = _torch()
    f = fp4kit.FORMATS[fmt]
    M, K = x.shape
    kw = {"amax": _host_amax(x) if amax is None else _host(amax).astype(np.float32).reshape(-1)} if f.is_nvfp4 else {}
    names = {"rowwise": ["rowwise"], "columnwise": ["columnwise"], "both": ["rowwise", "columnwise"]}[axis]
    if len(outs) != 2 * len(names):
        return f"{len(outs)} outputs, expected {2 * len(names)}"
    for i, name in enumerate(names):
        codes, scales = outs[2 * i], outs[2 * i + 1]
        rows, cols = (M, K) if name == "rowwise" else (K, M)
        S = sample_rows(rows)
        idx = torch.tensor(S, dtype=torch.long, device=x.device)
        xs = x.index_select(0, idx) if name == "rowwise" else x.index_select(1, idx).t()
        ref = fp4kit.reference.quantize(_host(xs), fmt, **kw).rowwise
        got_s = _host(scales)
        if layout == "swizzled":
            try:
                compact = fp4kit.reference.unswizzle_scales(got_s, (rows, f.num_blocks(cols)))
            except ValueError as e:
                return f"{name} swizzled scales: {e}"
            d = byte_diff(got_s, fp4kit.reference.swizzle_scales(compact), f"{name} swizzled scales")
            if d:
                return d
            got_s = compact
        for what, got, want in (("codes", _host(codes.index_select(0, idx)), ref.data),
                                ("scales", np.ascontiguousarray(got_s[S]), ref.scales)):
            d = byte_diff(got, want, f"{name} {what} (rows {S[0]}-{S[-1]} sampled)")
            if d:
                return d
    return None


def check_dequantize(y, codes, scales, amax, fmt: str, cols: int, dtype: str, layout: str) -> str | None:
    """None when a dequantize baseline's output y holds the reference's bits on sample_rows(), else
    what differs."""
    import fp4kit
    from fp4kit.reference.api import dequantize_operand
    from fp4kit.reference.golden import byte_diff
    torch = _torch()
    f = fp4kit.FORMATS[fmt]
    R = codes.shape[0]
    S = sample_rows(R)
    idx = torch.tensor(S, dtype=torch.long, device=codes.device)
    sc = _host(scales)
    compact = fp4kit.reference.unswizzle_scales(sc, (R, f.num_blocks(cols))) if layout == "swizzled" else sc
    op = fp4kit.Operand(data=_host(codes.index_select(0, idx)), scales=np.ascontiguousarray(compact[S]),
                        scale_layout="compact", amax=None if amax is None else _host(amax), rows=len(S), cols=cols,
                        format=fmt)
    return byte_diff(_host(y.index_select(0, idx)), dequantize_operand(op, dtype),
                     f"dequantize->{dtype} (rows {S[0]}-{S[-1]} sampled)")


class Baseline(NamedTuple):
    us: float | None      # device time of the compiled baseline (None: it did not run)
    exact: bool           # its bytes are the reference's (only then does a row give a speed-up)
    label: str            # the row's "baseline" cell


def compile_baseline(fn):
    """torch.compile as the baselines use it: one static kernel per shape (with automatic dynamic
    shapes the second shape's kernel measured slower and, for NVFP4, not byte-exact), the whole
    function one graph (a graph break is an error, not a silently slower baseline)."""
    return _torch().compile(fn, dynamic=False, fullgraph=True)


def _why(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return type(e).__name__ + (f": {text[0][:100]}" if text else "")


def compiled_baseline(fn, get_args, check, reps: int, split=None) -> Baseline:
    """Compile fn, run it on get_args() (the op's rotating inputs), check its output with
    check(out, *args) (None or what differs), then time it as the op is timed. `split`: when fn
    does not compile or run, a callable that builds the same computation from smaller compiled
    functions (quantize "both": one per operand), tried before giving up; the label says so."""
    torch = _torch()
    how = "torch.compile"
    try:
        torch.compiler.reset()          # a fresh cache: no recompile limit reached across rows
        args = get_args()
        f = compile_baseline(fn)
        out = f(*args)
    except Exception as e:              # torch.compile unavailable or failing: say so in the table
        if split is None:
            return Baseline(None, False, f"torch.compile n/a ({_why(e)})")
        try:
            torch.compiler.reset()
            f = split()
            out = f(*args)
        except Exception as e2:
            return Baseline(None, False, f"torch.compile n/a ({_why(e)}; per operand: {_why(e2)})")
        how = f"torch.compile per operand (as one function: {_why(e)[:80]})"
    try:
        diff = check(out, *args)
    except Exception as e:
        diff = f"the check raised {_why(e)}"
    del out
    try:
        us = time_fn(lambda: f(*get_args()), reps=reps)
    except Exception as e:
        return Baseline(None, False, f"{how}, timing failed ({_why(e)})")
    if diff:
        return Baseline(us, False, f"{how} (bytes exact vs reference: NO: {diff[:160]}; {us:.1f} us, no speed-up given)")
    return Baseline(us, True, f"{how} (bytes exact vs reference: yes)")


def quantize_baseline(fmt: str, axis: str, layout: str, amax_given: bool, nxa, reps: int) -> Baseline:
    """quantize_torch for one quantize row, on its rotating inputs nxa() -> (x, amax). "both" is one
    compiled function (Inductor may share the reads), else one per operand (see compiled_baseline)."""
    spec = format_spec(fmt)

    def body(x, amax):
        return quantize_torch(x, amax, spec, axis, layout, amax_given)

    def check(outs, x, amax):
        return check_quantize(outs, x, amax if amax_given else None, fmt, axis, layout)

    def split():
        row, col = (compile_baseline(lambda x, amax, a=a: quantize_torch(x, amax, spec, a, layout, amax_given))
                    for a in ("rowwise", "columnwise"))
        return lambda x, amax: row(x, amax) + col(x, amax)
    return compiled_baseline(body, nxa, check, reps, split if axis == "both" else None)


def dequantize_baseline(fmt: str, dtype: str, cols: int, get_args, reps: int) -> Baseline:
    """dequantize_torch for one dequantize row (swizzled scales); get_args() -> (codes, scales, amax)."""
    spec = format_spec(fmt)

    def body(codes, scales, amax):
        return dequantize_torch(codes, scales, amax, spec, cols, dtype, "swizzled")

    def check(y, codes, scales, amax):
        return check_dequantize(y, codes, scales, amax, fmt, cols, dtype, "swizzled")
    return compiled_baseline(body, get_args, check, reps)


def swizzle_baseline(nxt, reps: int) -> Baseline:
    """_swizzle_torch for the swizzle_scales rows, checked on every byte."""
    import fp4kit
    from fp4kit.reference.golden import byte_diff

    def check(out, c):
        return byte_diff(_host(out), fp4kit.reference.swizzle_scales(_host(c)), "swizzled scales")
    return compiled_baseline(_swizzle_torch, lambda: (nxt(),), check, reps)


# --------------------------------------------------------------------------------------------

def _bytes_out(fmt, M, K, axis):
    import fp4kit
    f = fp4kit.FORMATS[fmt]
    n = 0
    ops = {"rowwise": [(M, K)], "columnwise": [(K, M)], "both": [(M, K), (K, M)]}[axis]
    for r, c in ops:
        n += r * f.packed_len(c) + r * f.num_blocks(c) + (4 if f.is_nvfp4 else 0)
    return n


def _row(op, fmt, axis, layout, variant, shape, us, nbytes, copy, eager=None, base=None, exact=True, label=""):
    """One row of the table / CSV. speed-up = base / us when a baseline time `base` is given and
    `exact` (a baseline whose bytes differ from the reference's gets none); `timing` notes the
    measurements that came back late (Timing.note)."""
    notes = [f"{what}: {t.note()}" for what, t in (("op", us), ("copy", copy), ("baseline", base))
             if isinstance(t, Timing) and t.note()]
    return dict(op=op, format=fmt, axis=axis, layout=layout, variant=variant, shape=shape, us=us, bytes=nbytes,
                gbs=nbytes / us / 1e3, copy_pct=100 * copy / us, eager_us=eager, baseline_us=base,
                speedup=(base / us) if base and exact else None, baseline_exact=label, timing="; ".join(notes))


def _base_fields(b: Baseline | None) -> dict:
    return {} if b is None else dict(base=b.us, exact=b.exact, label=b.label)


def bench_quantize(rows, shapes, formats, axes, reps, baselines=True):
    import fp4kit
    torch = _torch()
    for (M, K) in shapes:
        mk = lambda i: (torch.randn(M, K, device=DEVICE, dtype=torch.float32) *  # noqa: E731
                        (1 + i)).to(torch.bfloat16)
        nxa = with_amax(rotating(mk, M * K * 2))
        for fmt in formats:
            for axis in axes:
                for layout in ("compact", "swizzled"):
                    if layout == "swizzled" and axis == "columnwise":
                        continue
                    variants = ["computed amax", "supplied amax"] if fmt == "nvfp4" else [""]
                    for vname in variants:
                        supplied = vname == "supplied amax"

                        def fn(sup=supplied):   # supplied: each input its own amax
                            x, a = nxa()
                            return fp4kit.quantize(x, fmt, axis=axis, scale_layout=layout, amax=a if sup else None)
                        us = time_fn(fn, reps=reps)
                        eager = time_fn(fn, reps=max(5, reps // 2), mode="eager")
                        nbytes = M * K * 2 + _bytes_out(fmt, M, K, axis)
                        cu = copy_us(nbytes, reps)
                        b = quantize_baseline(fmt, axis, layout, supplied, nxa, reps) if baselines else None
                        rows.append(_row("quantize", fmt, axis, layout, vname, f"{M}x{K}", us, nbytes, cu, eager,
                                         **_base_fields(b)))
                        _emit(rows)


def torchao_mxfp8():
    """torchao's MX cast (E4M3, blocks of 32, RCEIL when the installed version has it) as
    (callable x -> (scales, codes) uint8 tensors, label), or (None, why) when torchao is absent."""
    try:
        from torchao.prototype.mx_formats import mx_tensor
        from torchao.prototype.mx_formats.config import ScaleCalculationMode
    except Exception as e:  # not installed, or an incompatible version
        return None, f"torchao not importable ({type(e).__name__}: {str(e)[:60]})"
    torch = _torch()
    mode = getattr(ScaleCalculationMode, "RCEIL", None)
    kw = {"scaling_mode": mode} if mode is not None else {}

    def call(x):
        out = mx_tensor.to_mx(x, torch.float8_e4m3fn, 32, **kw)
        if isinstance(out, tuple):
            scale, data = out
        else:                                     # versions returning an MXTensor
            scale = getattr(out, "scale", None)
            scale = out._scale_e8m0 if scale is None else scale
            data = getattr(out, "qdata", None)
            data = out._data if data is None else data
        return scale.view(torch.uint8), data.view(torch.uint8)
    return call, "torchao to_mx" + (" (RCEIL)" if mode is not None else " (its default rule)")


def torchao_nvfp4():
    """torchao's NVFP4 cast (its PyTorch path `nvfp4_quantize`: blocks of 16, E4M3 block scales
    under the per-tensor scale torchao derives from an amax) as (callable (x, amax) -> (scales,
    codes) uint8 tensors, label), or (None, why) when torchao or that function is absent. torchao
    divides by its block scales where SPEC multiplies by an encode factor, so its bytes may differ
    from the reference; the row says whether they do."""
    try:
        from torchao.prototype.mx_formats import nvfp4_tensor
        quant, to_scale = nvfp4_tensor.nvfp4_quantize, nvfp4_tensor.per_tensor_amax_to_scale
    except Exception as e:  # not installed, or an incompatible version
        return None, f"torchao NVFP4 not importable ({type(e).__name__}: {str(e)[:60]})"
    torch = _torch()

    def call(x, amax):
        scales, data = quant(x, 16, to_scale(amax))
        return scales.view(torch.uint8), data.view(torch.uint8)
    return call, "torchao nvfp4_quantize"


def torchao_rows(shapes) -> int:
    """Rows bench_torchao adds: one per shape for each torchao cast that imports."""
    return len(shapes) * ((torchao_mxfp8()[0] is not None) + (torchao_nvfp4()[0] is not None))


def bench_torchao(rows, shapes, reps):
    """torchao's MXFP8 E4M3 and NVFP4 casts (torch.compile'd, as torchao uses them) against fp4kit,
    rowwise (NVFP4 with a supplied amax, the same for both)."""
    import fp4kit
    import ml_dtypes
    torch = _torch()
    call, label = torchao_mxfp8()
    if call is None:
        print(f"| (torchao baseline skipped: {label}) |", flush=True)
    for (M, K) in shapes if call is not None else ():
        nxt = rotating(lambda i: (torch.randn(M, K, device=DEVICE) * (1 + i)).to(torch.bfloat16), M * K * 2)
        sample = nxt()
        try:
            f = torch.compile(call, dynamic=False)
            scale, data = f(sample)
            xs = sample.view(torch.int16).cpu().numpy().view(ml_dtypes.bfloat16)
            ref = fp4kit.reference.quantize(xs, "mxfp8_e4m3")
            exact = bool(np.array_equal(data.reshape(M, K).cpu().numpy(), ref.rowwise.data) and
                         np.array_equal(scale.reshape(ref.rowwise.scales.shape).cpu().numpy(), ref.rowwise.scales))
            base = time_fn(lambda: f(nxt()), reps=reps)
        except Exception as e:
            print(f"| (torchao baseline failed at {M}x{K}: {type(e).__name__}: {str(e)[:80]}) |", flush=True)
            continue
        us = time_fn(lambda: fp4kit.quantize(nxt(), "mxfp8_e4m3"), reps=reps)
        nbytes = M * K * 2 + _bytes_out("mxfp8_e4m3", M, K, "rowwise")
        cu = copy_us(nbytes, reps)
        rows.append(_row("quantize", "mxfp8_e4m3", "rowwise", "compact", "vs torchao", f"{M}x{K}", us, nbytes, cu,
                         base=base, label=f"{label}, torch.compile (bytes exact vs reference: {'yes' if exact else 'NO'})"))
        _emit(rows)
    call, label = torchao_nvfp4()
    if call is None:
        print(f"| (torchao NVFP4 baseline skipped: {label}) |", flush=True)
        return
    for (M, K) in shapes:
        nxa = with_amax(rotating(lambda i: (torch.randn(M, K, device=DEVICE) * (1 + i)).to(torch.bfloat16),
                                 M * K * 2))
        sample, amax_t = nxa()
        try:
            f = torch.compile(call, dynamic=False)
            scale, data = f(sample, amax_t)
            xs = sample.view(torch.int16).cpu().numpy().view(ml_dtypes.bfloat16)
            ref = fp4kit.reference.quantize(xs, "nvfp4", amax=amax_t.cpu().numpy())
            exact = bool(np.array_equal(data.reshape(ref.rowwise.data.shape).cpu().numpy(), ref.rowwise.data) and
                         np.array_equal(scale.reshape(ref.rowwise.scales.shape).cpu().numpy(), ref.rowwise.scales))
            base = time_fn(lambda: f(*nxa()), reps=reps)
        except Exception as e:
            print(f"| (torchao NVFP4 baseline failed at {M}x{K}: {type(e).__name__}: {str(e)[:80]}) |", flush=True)
            continue

        def ours():
            x, a = nxa()
            return fp4kit.quantize(x, "nvfp4", amax=a)
        us = time_fn(ours, reps=reps)
        nbytes = M * K * 2 + _bytes_out("nvfp4", M, K, "rowwise")
        cu = copy_us(nbytes, reps)
        rows.append(_row("quantize", "nvfp4", "rowwise", "compact", "supplied amax, vs torchao", f"{M}x{K}", us, nbytes,
                         cu, base=base,
                         label=f"{label}, torch.compile (bytes exact vs reference: {'yes' if exact else 'NO'})"))
        _emit(rows)


def bench_dequantize(rows, shapes, formats, reps, baselines=True):
    """Rowwise dequantize (swizzled scales) of several quantized tensors in turn, enough to exceed
    L2 as the copy's buffers do, each quantized from its own bfloat16 input (scaled 1x, 2x, ...)."""
    import fp4kit
    torch = _torch()
    for (M, K) in shapes:
        for fmt in formats:
            def make(i):
                x = (torch.randn(M, K, device=DEVICE) * (1 + i)).to(torch.bfloat16)
                return fp4kit.quantize(x, fmt, axis="rowwise", scale_layout="swizzled")
            qbytes = _bytes_out(fmt, M, K, "rowwise")
            nq = rotating(make, qbytes)

            def parts():
                op = nq().rowwise
                return op.data, op.scales, op.amax
            for dt in ("bfloat16", "float16", "float32"):
                us = time_fn(lambda: fp4kit.dequantize(nq(), dtype=dt), reps=reps)
                eager = time_fn(lambda: fp4kit.dequantize(nq(), dtype=dt), reps=max(5, reps // 2), mode="eager")
                nbytes = qbytes + M * K * (4 if dt == "float32" else 2)
                cu = copy_us(nbytes, reps)
                b = dequantize_baseline(fmt, dt, K, parts, reps) if baselines else None
                rows.append(_row(f"dequantize->{dt}", fmt, "rowwise", "swizzled", "", f"{M}x{K}", us, nbytes, cu, eager,
                                 **_base_fields(b)))
                _emit(rows)


def bench_swizzle(rows, shapes, reps, baselines=True):
    """swizzle_scales of (M, K/16) scale matrices, several in turn (rotating, as the copy)."""
    import fp4kit
    torch = _torch()
    for (M, K) in shapes:
        C = K // 16
        nxt = rotating(lambda i: torch.randint(0, 255, (M, C), device=DEVICE, dtype=torch.uint8), M * C)
        us = time_fn(lambda: fp4kit.swizzle_scales(nxt()), reps=reps)
        eager = time_fn(lambda: fp4kit.swizzle_scales(nxt()), reps=max(5, reps // 2), mode="eager")
        nbytes = 2 * M * C
        cu = copy_us(nbytes, reps)
        b = swizzle_baseline(nxt, reps) if baselines else None
        rows.append(_row("swizzle_scales", "-", "-", "swizzled", "", f"{M}x{C}", us, nbytes, cu, eager,
                         **_base_fields(b)))
        _emit(rows)


def _skewed_dims(G, total, seed=0, multiple=2):
    """G member row counts summing to `total`, skewed (Zipf-like) with empty members in the mix;
    each a multiple of `multiple` (2: FP4 columnwise packs M; 128: token counts padded per expert)."""
    rng = np.random.default_rng(seed)
    w = 1.0 / np.arange(1, G + 1) ** 1.1
    w[rng.permutation(G)[: max(1, G // 8)]] = 0.0          # some experts get no tokens
    w = rng.permutation(w)
    d = (np.floor(w / w.sum() * total / multiple) * multiple).astype(np.int64)
    d[np.argmax(d)] += total - d.sum()
    return [int(v) for v in d]


def _moe_dims(G, total, multiple):
    """The grouped rows' member sizes: (dims, the same as a device int64 tensor, each member's first
    row, the row's variant text)."""
    torch = _torch()
    dims = _skewed_dims(G, total, seed=G, multiple=multiple)
    dims_dev = torch.tensor(dims, dtype=torch.int64, device=DEVICE)
    starts = np.cumsum([0] + dims[:-1])
    return dims, dims_dev, starts, f"device dims, skewed, {sum(1 for d in dims if d == 0)} empty, M_i % {multiple} == 0"


def bench_grouped(rows, reps, K=7168, total=65536, groups=(8, 64)):
    """MoE grouped quantize: one launch (device dims) vs one single-tensor launch per member."""
    import fp4kit
    torch = _torch()
    x = (torch.randn(total, K, device=DEVICE)).to(torch.bfloat16)
    for G, multiple in ((g, m) for g in groups for m in (128, 2)):
        dims, dims_dev, starts, vname = _moe_dims(G, total, multiple)
        # NVFP4 rowwise and "both" also with one supplied amax per member (no statistics pass); MXFP4
        # rowwise beside MXFP8's (the one-K rows kernel)
        amax = torch.full((G,), 4.0, device=DEVICE)
        # and "both" of MXFP8 (staged squares), MXFP4 and MXFP6 (one-tile kernel), with compact scales
        # too (staged, then group_unswizzle_scales)
        # and "both" of MXFP4 / NVFP4 with stochastic rounding (one K: the one-tile _sr kernel)
        for fmt, axis, sup, layout, sr in (("mxfp8_e4m3", "rowwise", False, "swizzled", False),
                                           ("mxfp4_e2m1", "rowwise", False, "swizzled", False),
                                           ("mxfp8_e4m3", "both", False, "swizzled", False),
                                           ("mxfp8_e4m3", "both", False, "compact", False),
                                           ("mxfp4_e2m1", "both", False, "swizzled", False),
                                           ("mxfp4_e2m1", "both", False, "compact", False),
                                           ("mxfp6_e2m3", "both", False, "swizzled", False),
                                           ("mxfp6_e2m3", "both", False, "compact", False),
                                           ("nvfp4", "rowwise", False, "swizzled", False),
                                           ("nvfp4", "rowwise", True, "swizzled", False),
                                           ("nvfp4", "both", False, "swizzled", False),
                                           ("nvfp4", "both", True, "swizzled", False),
                                           ("mxfp4_e2m1", "both", False, "swizzled", True),
                                           ("nvfp4", "both", False, "swizzled", True)):
            kw = dict(axis=axis, scale_layout=layout)
            if sr:
                kw.update(rounding="stochastic", seed=7)
            a = amax if sup else None
            us = time_fn(lambda: fp4kit.group_quantize(x, fmt, first_dims=dims_dev, amax=a, **kw), reps=reps)
            per = [(x[s:s + m], amax[g:g + 1] if sup else None) for g, (s, m) in enumerate(zip(starts, dims)) if m]
            # the per-member loop: as many timed runs as the grouped op (its median is the baseline)
            us_loop = time_fn(lambda: [fp4kit.quantize(p, fmt, amax=pa, **kw) for p, pa in per], reps=max(20, reps))
            nbytes = total * K * 2 + _bytes_out(fmt, total, K, axis)
            cu = copy_us(nbytes, reps)
            rows.append(_row(f"group_quantize G={G}", fmt, axis, layout,
                             vname + (", supplied amax" if sup else "") + (", stochastic" if sr else ""),
                             f"{total}x{K}", us, nbytes, cu, base=us_loop, label="vs per-member launches"))
            _emit(rows)


def bench_group_dequantize(rows, reps, K=7168, total=65536, sets=((8, 128), (64, 2)),
                           formats=("mxfp8_e4m3", "mxfp6_e2m3", "mxfp4_e2m1", "nvfp4")):
    """MoE grouped dequantize (rowwise, swizzled scales, device dims): one launch vs one single-tensor
    dequantize per member of the same bytes. One input per row: the quantized group and the output
    (0.4-0.5 GB and 0.9-1.9 GB at 65536 x 7168) are far beyond L2, so no rotation is needed."""
    import fp4kit
    torch = _torch()
    x = (torch.randn(total, K, device=DEVICE)).to(torch.bfloat16)
    for G, multiple in sets:
        dims, dims_dev, starts, vname = _moe_dims(G, total, multiple)
        for fmt in formats:
            g = fp4kit.group_quantize(x, fmt, first_dims=dims_dev, axis="rowwise", scale_layout="swizzled")
            per = [fp4kit.quantize(x[s:s + m], fmt, axis="rowwise", scale_layout="swizzled")
                   for s, m in zip(starts, dims) if m]
            for dt in ("bfloat16", "float32"):
                us = time_fn(lambda: fp4kit.group_dequantize(g, dtype=dt), reps=reps)
                us_loop = time_fn(lambda: [fp4kit.dequantize(q, dtype=dt) for q in per], reps=max(20, reps))
                nbytes = _bytes_out(fmt, total, K, "rowwise") + total * K * (2 if dt == "bfloat16" else 4)
                if fp4kit.FORMATS[fmt].is_nvfp4:   # one amax per member, not one
                    nbytes += 4 * (G - 1)
                cu = copy_us(nbytes, reps)
                rows.append(_row(f"group_dequantize->{dt} G={G}", fmt, "rowwise", "swizzled", vname, f"{total}x{K}",
                                 us, nbytes, cu, base=us_loop, label="vs per-member launches"))
                _emit(rows)


def bench_recipes(rows, reps, shape=(8192, 8192)):
    """NVFP4 recipes: fused RHT (swizzled scales from the kernel) vs RHT compact + separate swizzle;
    stochastic vs nearest rounding (NVFP4 and MXFP4), each row against a copy of its own bytes."""
    import fp4kit
    torch = _torch()
    M, K = shape
    nxt = rotating(lambda i: (torch.randn(M, K, device=DEVICE) * (1 + i)).to(torch.bfloat16), M * K * 2)
    copies: dict[int, Timing] = {}

    def copy_of(nb):
        if nb not in copies:
            copies[nb] = copy_us(nb, reps)
        return copies[nb]
    nbytes = M * K * 2 + _bytes_out("nvfp4", M, K, "both")

    def unfused():
        q = fp4kit.quantize(nxt(), "nvfp4", axis="both", rht=True, scale_layout="compact")
        fp4kit.swizzle_scales(q.rowwise.scales)
        fp4kit.swizzle_scales(q.columnwise.scales)
    us_f = time_fn(lambda: fp4kit.quantize(nxt(), "nvfp4", axis="both", rht=True, scale_layout="swizzled"), reps=reps)
    us_u = time_fn(unfused, reps=reps)
    rows.append(_row("quantize rht (fused swizzle)", "nvfp4", "both", "swizzled", "rht", f"{M}x{K}", us_f, nbytes,
                     copy_of(nbytes), base=us_u, label="vs rht compact + swizzle_scales"))
    _emit(rows)
    for fmt in ("nvfp4", "mxfp4_e2m1"):
        us_n = time_fn(lambda: fp4kit.quantize(nxt(), fmt, axis="both"), reps=reps)
        us_s = time_fn(lambda: fp4kit.quantize(nxt(), fmt, axis="both", rounding="stochastic", seed=7), reps=reps)
        nb = M * K * 2 + _bytes_out(fmt, M, K, "both")
        rows.append(_row("quantize stochastic", fmt, "both", "compact", "seed=7", f"{M}x{K}", us_s, nb, copy_of(nb),
                         base=us_n, label=f"SR cost {100 * (us_s / us_n - 1):+.0f}% vs nearest"))
        _emit(rows)


def bench_small(reps=200, rounds=5):
    """Host time per call once warm, M in 1, 16, 128 and K = 4096: a bfloat16 PyTorch tensor and a
    float16 CuPy array (both take the fast path). Each configuration is warmed up (100 calls), then
    timed `rounds` times over `reps` calls (wall clock, synchronised after each round), the rounds of
    all configurations interleaved so that a slow spell of the host falls on all of them; returns
    (M, input, format, median, fastest, slowest round) in us per call. The process's CPU moves these
    more than the rows differ (on a lent H100 VM one vCPU ran the same calls 1.45x slower than
    another: docs/performance.md, fortieth session); --cpu pins it."""
    import cupy
    import fp4kit
    torch = _torch()
    configs = []
    for M in (1, 16, 128):
        xt = torch.randn(M, 4096, device="cuda").to(torch.bfloat16)
        for lib, x in (("torch bfloat16", xt), ("cupy float16", cupy.asarray(xt.float().cpu().numpy(), cupy.float16))):
            for fmt in ("mxfp8_e4m3", "nvfp4"):
                for _ in range(100):
                    fp4kit.quantize(x, fmt)
                configs.append((M, lib, fmt, x))
    torch.cuda.synchronize()
    times: list[list[float]] = [[] for _ in configs]
    for _ in range(rounds):
        for i, (_, _, fmt, x) in enumerate(configs):
            t = time.perf_counter()
            for _ in range(reps):
                fp4kit.quantize(x, fmt)
            times[i].append((time.perf_counter() - t) / reps * 1e6)
            torch.cuda.synchronize()
    return [(M, lib, fmt, statistics.median(ts), min(ts), max(ts)) for (M, lib, fmt, _), ts in zip(configs, times)]


class Startup(NamedTuple):
    cold: float | None      # seconds of fp4kit.warmup() with an empty cache (None: not measured)
    warm: float | None      # the same with the cache the cold run filled
    cubins: int | None      # cubins the cold run compiled
    error: str = ""         # why a figure is missing


STARTUP_TIMEOUT_S = 600.0   # per process (a cold start compiled the whole modules in 55 s on an H100)


def bench_startup(timeout: float = STARTUP_TIMEOUT_S) -> Startup:
    """Cold start (empty cache: compile everything) and warm start (disk cache) in fresh processes.
    A machine that has compiled the same programs before (the GPU tests, an earlier run) answers
    NVRTC from a cache outside fp4kit's, so the cold figure is a compile only as the first run on a
    freshly started machine (docs/performance.md, thirty-seventh session). Never raises: a process
    that fails or outlasts `timeout` gives a Startup whose `error` says so."""
    code = ("import time; t0=time.time(); import fp4kit; t=time.time(); fp4kit.warmup(); e=time.time(); "
            "print(e-t, e-t0)")
    env = dict(os.environ, PYTHONPATH=str(ROOT))

    def run(what):
        try:
            p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"{what} start took over {timeout:.0f} s") from None
        if p.returncode != 0:
            tail = (p.stderr.strip().splitlines() or [""])[-1][:160]
            raise RuntimeError(f"{what} start exited with status {p.returncode}: {tail}")
        try:
            a, b = (float(v) for v in p.stdout.split()[-2:])
        except ValueError:
            raise RuntimeError(f"{what} start printed {p.stdout.strip()[-80:]!r}, not two times") from None
        return a, b
    cold = warm = n_cubins = None
    try:
        with tempfile.TemporaryDirectory() as d:
            env["FP4KIT_CACHE_DIR"] = d
            cold, cold_total = run("cold")
            n_cubins = len(list(Path(d).glob("*.cubin")))
            warm, warm_total = run("warm")
    except Exception as e:
        r = Startup(cold, warm, n_cubins, str(e) if isinstance(e, RuntimeError) else _why(e))
        print(f"startup: not measured ({r.error})", flush=True)
        return r
    print(f"startup: cold warmup {cold:.2f} s ({n_cubins} cubins compiled into an empty cache; process "
          f"{cold_total:.2f} s with imports), warm {warm:.2f} s (process {warm_total:.2f} s)", flush=True)
    return Startup(cold, warm, n_cubins)


_PROGRESS = None       # fp4kit.cli.Progress over the expected rows: progress and time left on stderr
_REPORT = None         # Report of the run: the table and CSV rewritten after every row


# Single tensors off the multiples of 128 / 16 (the "ragged" section): M = 8200 puts every other
# columnwise code row off a 16-byte boundary (FP8: 8200 bytes; FP4: 4100), the case of token counts
# that are not padded. "both" in both scale layouts; NVFP4 with computed and supplied amax.
RAGGED_SHAPES = [(8200, 8192)]
RAGGED_FORMATS = ("mxfp8_e4m3", "mxfp6_e2m3", "mxfp4_e2m1", "nvfp4")


def _quantize_rows(shapes, formats, axes) -> int:
    per_fmt = sum((1 if a == "columnwise" else 2) for a in axes)   # rowwise and "both": both layouts
    return len(shapes) * sum(per_fmt * (2 if f == "nvfp4" else 1) for f in formats)


def expected_rows(shapes, formats, axes, groups=4, grouped_ops=14, grouped_dequantize=16) -> int:
    """Rows the benchmark will print (mirrors the loops below), for the progress line's estimate."""
    quant = _quantize_rows(shapes, formats, axes) + _quantize_rows(RAGGED_SHAPES, RAGGED_FORMATS, ("both",))
    return quant + len(shapes) * len(formats) * 3 + len(shapes) + 3 + groups * grouped_ops + grouped_dequantize


def _emit(rows):
    print(_fmt_row(rows[-1]), flush=True)
    if _REPORT is not None:
        _REPORT.write(rows)
    if _PROGRESS is not None:
        r = rows[-1]
        _PROGRESS.update(note=f"{r['op']} {r['format']} {r['axis']} {r['shape']}")


def _cell(text) -> str:
    """Free text made safe for a markdown table cell (no '|', one line)."""
    return " ".join(str(text).replace("|", "/").split())


def _fmt_row(r):
    sp = f"{r['speedup']:.2f}x" if r.get("speedup") else "-"
    eager = f"{r['eager_us']:.1f}" if r.get("eager_us") else "-"
    nbytes = str(r["bytes"]) if r.get("bytes") is not None else "-"
    label = r.get("baseline_exact") or ""
    if r.get("timing"):
        label = f"{label} [timing: {r['timing']}]".strip()
    return (f"| {r['op']} | {r['format']} | {r['axis']} | {r['layout']} | {r['variant']} | {r['shape']} | "
            f"{r['us']:.1f} | {nbytes} | {r['gbs']:.0f} | {r['copy_pct']:.0f}% | {eager} | {sp} | {_cell(label)} |")


HEADER = ("| op | format | axis | scales | variant | shape | us (device) | bytes | GB/s | copy % "
          "| us (eager, host incl.) | speed-up vs baseline | baseline |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|")


SECTIONS = ("quantize", "ragged", "torchao", "dequantize", "swizzle", "recipes", "grouped", "grouped_dequantize",
            "small", "startup")


def tail_lines(small, startup, cpu=None):
    """The lines after the op rows (which were printed as they came): the small-input table when
    that section ran, the start-up line when it ran (or why it has no figures); nothing otherwise."""
    tail = []
    if small:
        tail += ["", "| M x 4096 | input | format | host us/call (median of rounds) | fastest - slowest round |",
                 "|---|---|---|---|---|"]
        tail += [f"| {M} | {lib} | {f} | {h:.1f} | {lo:.1f} - {hi:.1f} |" for M, lib, f, h, lo, hi in small]
        tail += ["", f"(host times pinned to CPU {cpu})" if cpu is not None else "(host times not pinned: --cpu N pins them)"]
    error = getattr(startup, "error", "") if startup else ""
    if error:
        cold = f" (cold start {startup[0]:.1f} s, {startup[2]} cubins, before that)" if startup[0] is not None else ""
        tail += ["", f"start-up (cold and warm start in fresh processes) not measured: {error}{cold}"]
    elif startup:
        tail += ["", f"cold start (compile everything, {startup[2]} cubins into an empty cache): {startup[0]:.1f} s; "
                 f"warm start (disk cache): {startup[1]:.2f} s (a compile only on a freshly started machine: "
                 "one that compiled the same programs before answers from a cache outside fp4kit's)"]
    return tail


class Report:
    """The run's markdown table (--md) and CSV (--csv), rewritten after every row, so that a run cut
    short (an exception, a kill) keeps the rows it measured, and once more at the end. The CSV's
    first column is the device, on every row (csv readers see one header line)."""

    def __init__(self, md: str, csv_path: str, device: str):
        self.md, self.csv, self.device = md, csv_path, device

    def write(self, rows, tail=(), note: str = ""):
        lines = [f"# fp4kit benchmarks on {self.device}", "", HEADER] + [_fmt_row(r) for r in rows] + list(tail)
        if note:
            lines += ["", note]
        Path(self.md).write_text("\n".join(lines) + "\n")
        with open(self.csv, "w", newline="") as fh:
            fields = ["device"] + [k for k in dict.fromkeys(k for r in rows for k in r) if k != "device"]
            w = csv.DictWriter(fh, fieldnames=fields)
            w.writeheader()
            w.writerows(dict(r, device=self.device) for r in rows)


def _fp4_shape_error(shapes, formats, run) -> str | None:
    """Why --shapes cannot be run with the FP4 formats selected, or None. FP4 packs two codes per
    byte along the block axis: quantize ("columnwise"/"both" included) needs even M and K, rowwise
    dequantize an even K."""
    import fp4kit
    fp4 = [f for f in formats if fp4kit.FORMATS[f].packed]
    if not fp4 or not {"quantize", "dequantize"} & set(run):
        return None
    bad = [f"{M}x{K}" for M, K in shapes if K % 2 or ("quantize" in run and M % 2)]
    if not bad:
        return None
    need = "even M and K" if "quantize" in run else "an even K"
    return (f"--shapes: {', '.join(bad)}: the FP4 formats selected ({', '.join(fp4)}) pack two codes per byte "
            f"along the quantized axis, so {'quantize' if 'quantize' in run else 'dequantize'} needs {need}; "
            f"choose such shapes, or --formats without FP4 formats")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one shape, fewer formats and repetitions")
    ap.add_argument("--csv", default=os.path.join(os.environ.get("OUT", "."), "bench.csv"))
    ap.add_argument("--md", default=os.path.join(os.environ.get("OUT", "."), "bench.md"))
    ap.add_argument("--no-startup", action="store_true")
    ap.add_argument("--no-baselines", action="store_true",
                    help="skip the torch.compile baselines of the quantize / dequantize / swizzle rows (each "
                         "compiles first: seconds per row)")
    ap.add_argument("--shapes", default="", metavar="MxK,...",
                    help="the quantize / dequantize / swizzle shapes instead of the defaults (e.g. 4096x4096,2048x7168)")
    ap.add_argument("--formats", default="", metavar="FMT,...",
                    help="the quantize / dequantize / ragged formats instead of the defaults (e.g. nvfp4)")
    ap.add_argument("--only", default="", metavar="SECTIONS",
                    help="comma-separated subset of " + ",".join(SECTIONS) + " (default: all)")
    ap.add_argument("--compare", default="", metavar="REF.md",
                    help="after the run, compare its rows with a reference table (e.g. docs/bench-h100.md; "
                         "scripts/bench_compare.py) and write the report beside --md")
    ap.add_argument("--cpu", type=int, default=None, metavar="N",
                    help="run the small-input section pinned to CPU N (its host times depend on the CPU the "
                         "process gets: on a lent H100 VM one vCPU read 1.45x another, docs/performance.md)")
    args = ap.parse_args(argv)
    if args.compare:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import bench_compare
        try:
            ref_rows = bench_compare.parse_table(Path(args.compare).read_text()).rows
        except OSError as e:
            ap.error(f"--compare: cannot read {args.compare!r}: {e.strerror or e}")
        if not ref_rows:
            ap.error(f"--compare: {args.compare!r} holds no scripts/bench.py row")
    if args.cpu is not None and args.cpu not in os.sched_getaffinity(0):
        ap.error(f"--cpu: CPU {args.cpu} is not one this process may run on "
                 f"({', '.join(map(str, sorted(os.sched_getaffinity(0))))})")
    only = [s for s in args.only.split(",") if s]
    bad = sorted(set(only) - set(SECTIONS))
    if bad:
        ap.error(f"--only: unknown section(s) {', '.join(bad)}; choose from {', '.join(SECTIONS)}")
    run = set(only or SECTIONS)
    try:
        custom = [tuple(int(d) for d in sh.lower().split("x")) for sh in args.shapes.split(",") if sh]
    except ValueError:
        custom = None
    if custom is None or any(len(sh) != 2 or min(sh) < 1 for sh in custom):
        ap.error(f"--shapes: expected MxK[,MxK...] with positive M and K, got {args.shapes!r}")
    fmts = [f for f in args.formats.split(",") if f]
    import fp4kit
    unknown = sorted(set(fmts) - set(fp4kit.FORMATS))
    if unknown:
        ap.error(f"--formats: unknown format(s) {', '.join(unknown)}; choose from {', '.join(fp4kit.FORMATS)}")
    if args.quick:
        shapes, reps = [(8192, 8192)], 20
        formats = ("mxfp8_e4m3", "mxfp4_e2m1", "nvfp4")
        axes = ("rowwise", "both")
    else:
        shapes, reps = [(8192, 8192), (16384, 16384)], 50
        formats = tuple(fp4kit.FORMATS)
        axes = ("rowwise", "columnwise", "both")
    if custom:
        shapes = custom
    ragged_formats = RAGGED_FORMATS
    if fmts:
        formats = tuple(fmts)
        ragged_formats = tuple(f for f in RAGGED_FORMATS if f in fmts)
    why = _fp4_shape_error(shapes, formats, run)
    if why:
        ap.error(why)
    baselines = not args.no_baselines
    torch = _torch()
    fp4kit.warmup()
    dev = torch.cuda.get_device_name()
    rows: list[dict] = []
    print(f"# fp4kit benchmarks on {dev}\n\n{HEADER}", flush=True)
    global _PROGRESS, _REPORT
    from fp4kit.cli import Progress
    n_rows = expected_rows(shapes, formats, axes) + torchao_rows(shapes)
    if only or fmts:
        n_rows = None
    _REPORT = report = Report(args.md, args.csv, dev)
    report.write(rows)
    small: list = []
    startup = None
    stopped = ""
    try:
        with Progress(total=n_rows, label="bench") as _PROGRESS:
            if "quantize" in run:
                bench_quantize(rows, shapes, formats, axes, reps, baselines)
            if "ragged" in run:
                bench_quantize(rows, RAGGED_SHAPES, ragged_formats, ("both",), reps, baselines)
            if "torchao" in run:
                bench_torchao(rows, shapes, reps)
            if "dequantize" in run:
                bench_dequantize(rows, shapes, formats, reps, baselines)
            if "swizzle" in run:
                bench_swizzle(rows, shapes, reps, baselines)
            if "recipes" in run:
                bench_recipes(rows, reps)
            if "grouped" in run:
                bench_grouped(rows, reps)
            if "grouped_dequantize" in run:
                bench_group_dequantize(rows, reps)
        _PROGRESS = None
        if "small" in run:
            affinity = os.sched_getaffinity(0)
            if args.cpu is not None:                    # the small-input section alone runs pinned
                os.sched_setaffinity(0, {args.cpu})
            try:
                small = bench_small()
            finally:
                os.sched_setaffinity(0, affinity)
        if not args.no_startup and "startup" in run:
            startup = bench_startup()
    except BaseException as e:
        stopped = (f"(run stopped early after {len(rows)} rows by {_cell(_why(e))}; the rows above are "
                   "what it measured)")
        raise
    finally:
        _PROGRESS = _REPORT = None
        tail = tail_lines(small, startup, args.cpu)
        report.write(rows, tail, stopped)
        if stopped:
            print(f"\n{stopped}; table in {args.md}, CSV in {args.csv}", flush=True)
    if tail:
        print("\n".join(tail))
    worst = min((r["copy_pct"] for r in rows), default=float("nan"))
    print(f"\nbench summary on {dev}: {len(rows)} rows, worst copy% {worst:.0f}; table in {args.md}, CSV in {args.csv}")
    if args.compare and not rows:
        print(f"no op rows to compare with {args.compare} (sections {', '.join(sorted(run))})")
    elif args.compare:
        out = str(Path(args.md).with_name(Path(args.md).stem + "_compare.md"))
        if bench_compare.main([args.md, "--ref", args.compare, "--out", out, "--brief"]) == 0:
            print(f"comparison with {args.compare} in {out}")


if __name__ == "__main__":
    main()

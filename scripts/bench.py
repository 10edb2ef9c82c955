#!/usr/bin/env python3
"""fp4kit benchmarks: time per op/format/axis/shape against a device-to-device copy of the same
bytes and a torch.compile'd PyTorch implementation of the same numerics.

Method: inputs are PyTorch CUDA tensors (so fp4kit runs on torch's current stream); each figure
is the median of many CUDA-event-timed runs after warm-up, rotating among enough input buffers to
exceed the L2 cache. "us (device)" puts a GPU spin ahead of the first event that outlasts the host's
work of queueing the call, so the events time the call's kernels back to back (the device time a
CUDA graph or a busy training step sees); "us (eager)" is the same call timed without the spin, host
time included. Bytes moved = input read once + every output written once (codes, scales, amax).
"copy %" = device time of a device-to-device copy moving the same number of bytes (read + write)
measured in the same run / device time of the op. torch.compile baselines are timed the same way and
checked byte for byte against the reference on a sample before they are timed.

Usage: python scripts/bench.py [--quick] [--csv out.csv] [--md out.md]
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402


def _torch():
    import torch
    return torch


# --------------------------------------------------------------------------------------------
# timing

def _clock_hz() -> float:
    torch = _torch()
    try:
        return float(torch.cuda.get_device_properties(0).clock_rate) * 1e3   # kHz -> Hz
    except Exception:
        return 2.0e9


def time_fn(fn, reps: int = 50, warmup: int = 5, mode: str = "device") -> float:
    """Median microseconds of fn() between two CUDA events on torch's current stream.

    mode "device": a GPU spin (torch.cuda._sleep) is queued before the first event and lasts longer
    than the host needs to queue fn()'s work, so the events time the kernels back to back: device
    time, as in a CUDA graph or a busy training step. Runs where the spin ended before the host had
    queued everything are detected (the first event already complete) and repeated with a longer spin.
    mode "eager": no spin; host time before the first launch counts (what a synchronised loop sees).
    """
    torch = _torch()
    t0 = time.perf_counter()
    for _ in range(warmup):
        fn()
    host_s = (time.perf_counter() - t0) / warmup
    torch.cuda.synchronize()
    sleep = getattr(torch.cuda, "_sleep", None)
    cycles = int(max(4 * host_s, 100e-6) * _clock_hz())
    times = []
    tries = 0
    while len(times) < reps:
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        if mode == "device" and sleep is not None:
            sleep(cycles)
        a.record()
        fn()
        b.record()
        late = mode == "device" and sleep is not None and a.query()   # spin over before fn was queued
        b.synchronize()
        tries += 1
        if late and tries < 4 * reps:
            cycles *= 2
            continue
        times.append(a.elapsed_time(b) * 1e3)
    return statistics.median(times)


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


def copy_us(nbytes: int, reps: int) -> float:
    """A device-to-device copy moving `nbytes` in total (nbytes/2 read + nbytes/2 written)."""
    torch = _torch()
    half = max(nbytes // 2, 16)
    src = rotating(lambda i: torch.empty(half, dtype=torch.uint8, device="cuda"), half)
    dst = torch.empty(half, dtype=torch.uint8, device="cuda")
    return time_fn(lambda: dst.copy_(src()), reps=reps)     # device time (see time_fn)


# --------------------------------------------------------------------------------------------
# torch.compile baselines (the PyTorch code a user would write for the same numerics)

def _e8m0_rceil_torch(v):
    torch = _torch()
    b = v.view(torch.int32)
    e = (b >> 23) & 0xFF
    m = b & 0x7FFFFF
    bump = (m > 0) & (e != 254) & ~((e == 0) & (m <= 0x400000))
    E = e + bump.to(torch.int32)
    E = torch.where(torch.isinf(v), torch.full_like(E, 254), E)
    return E


def mxfp8_rowwise_torch(x):
    """MXFP8 E4M3 rowwise, rule rceil, compact scales; K % 32 == 0."""
    torch = _torch()
    M, K = x.shape
    xf = x.float().view(M, K // 32, 32)
    a = xf.abs()
    amax = torch.where(torch.isnan(a), torch.zeros_like(a), a).amax(-1)
    R = float(np.float32(1.0) / np.float32(448.0))   # fp32_RN(1/448), exact as a Python float (no `/` on the GPU)
    E = _e8m0_rceil_torch(amax * R)
    k = 127 - E
    s_inv = torch.where(k == -127, torch.full_like(k, 0x00400000), (k.clamp(-126, 127) + 127) << 23).view(torch.float32)
    y = xf * s_inv[..., None]
    q = torch.where(torch.isnan(y), y, y.clamp(-448.0, 448.0)).to(torch.float8_e4m3fn)
    return q.view(M, K).view(torch.uint8), E.to(torch.uint8)


def nvfp4_rowwise_torch(x, amax):
    """NVFP4 rowwise with a supplied global amax (1,), compact scales; K % 16 == 0."""
    torch = _torch()
    M, K = x.shape
    xf = x.float().view(M, K // 16, 16)
    FMAX = torch.finfo(torch.float32).max
    # Divisions in float64, then one rounding to float32: Triton's float32 `/` (what Inductor emits)
    # is div.full.f32, up to 2 ulp off, and made this baseline's bytes differ from the reference at
    # 16384^2 on the H100. A float64 quotient of two float32 values rounds to float32 exactly as
    # the float32 IEEE division does (it cannot land on a float32 midpoint).
    s_enc = (2688.0 / amax.double()).float().nan_to_num(nan=FMAX).clamp(max=FMAX)
    s_enc = torch.where((amax == 0) | (s_enc == 0), torch.ones_like(s_enc), s_enc)
    s_dec = (1.0 / s_enc.double()).float()
    a = xf.abs()
    b = torch.where(torch.isnan(a), torch.zeros_like(a), a).amax(-1)
    mult = s_enc * float(np.float32(1.0) / np.float32(6.0))   # fp32_RN(1/6)
    sf = (b * mult).clamp(max=448.0).to(torch.float8_e4m3fn)
    enc = (1.0 / (sf.float() * s_dec).double()).float().clamp(max=FMAX)
    y = xf * enc[..., None]
    ay = y.abs()
    # E2M1 nearest-even thresholds: 0.25 0.75 1.25 1.75 2.5 3.5 5 (ties to the even code)
    code = ((ay > 0.25).int() + (ay >= 0.75).int() + (ay > 1.25).int() + (ay >= 1.75).int()
            + (ay > 2.5).int() + (ay >= 3.5).int() + (ay > 5.0).int())
    code = torch.where(torch.isnan(ay), torch.full_like(code, 7), code)
    code = code | (torch.signbit(y) & ~torch.isnan(y)).int() << 3
    code = code.view(M, K // 2, 2)
    packed = (code[..., 0] | (code[..., 1] << 4)).to(torch.uint8)
    return packed, sf.view(torch.uint8).view(M, K // 16)


# --------------------------------------------------------------------------------------------

def _bytes_out(fmt, M, K, axis):
    import fp4kit
    f = fp4kit.FORMATS[fmt]
    n = 0
    ops = {"rowwise": [(M, K)], "columnwise": [(K, M)], "both": [(M, K), (K, M)]}[axis]
    for r, c in ops:
        n += r * f.packed_len(c) + r * f.num_blocks(c) + (4 if f.is_nvfp4 else 0)
    return n


def bench_quantize(rows, shapes, formats, axes, reps):
    import fp4kit
    torch = _torch()
    for (M, K) in shapes:
        mk = lambda i: (torch.randn(M, K, device="cuda", dtype=torch.float32) *  # noqa: E731
                        (1 + i)).to(torch.bfloat16)
        nxa = with_amax(rotating(mk, M * K * 2))
        sample, amax_t = nxa()
        for fmt in formats:
            for axis in axes:
                for layout in ("compact", "swizzled"):
                    if layout == "swizzled" and axis != "both":
                        continue
                    variants = ["computed amax", "supplied amax"] if fmt == "nvfp4" else [""]
                    for vname in variants:
                        def fn(sup=vname == "supplied amax"):   # supplied: each input its own amax
                            x, a = nxa()
                            return fp4kit.quantize(x, fmt, axis=axis, scale_layout=layout, amax=a if sup else None)
                        us = time_fn(fn, reps=reps)
                        eager = time_fn(fn, reps=max(5, reps // 2), mode="eager")
                        nbytes = M * K * 2 + _bytes_out(fmt, M, K, axis)
                        cu = copy_us(nbytes, reps)
                        base_us, exact = None, ""
                        if axis == "rowwise" and layout == "compact" and fmt in ("mxfp8_e4m3", "nvfp4") and vname != "computed amax":
                            base_us, exact = _baseline(fmt, sample, amax_t, nxa, reps)
                        rows.append(dict(op="quantize", format=fmt, axis=axis, layout=layout, variant=vname,
                                         shape=f"{M}x{K}", us=us, bytes=nbytes, gbs=nbytes / us / 1e3,
                                         copy_pct=100 * cu / us, eager_us=eager, baseline_us=base_us,
                                         speedup=(base_us / us) if base_us else None, baseline_exact=exact))
                        _emit(rows)


def _baseline(fmt, sample, amax_t, nxa, reps):
    """(device us, label) of the torch.compile baseline on the inputs of nxa (with_amax's getter:
    NVFP4 takes each input's own amax, as fp4kit's row does)."""
    import fp4kit
    import ml_dtypes
    torch = _torch()
    try:
        # dynamic=False: one static kernel per shape (with automatic dynamic shapes the second
        # shape's kernel measured slower and, for NVFP4, not byte-exact)
        if fmt == "mxfp8_e4m3":
            f = torch.compile(mxfp8_rowwise_torch, dynamic=False)
            call = lambda x, a: f(x)  # noqa: E731
        else:
            f = torch.compile(nvfp4_rowwise_torch, dynamic=False)
            call = lambda x, a: f(x, a)  # noqa: E731
        q, s = call(sample, amax_t)
        xs = sample.view(torch.int16).cpu().numpy().view(ml_dtypes.bfloat16)
        kw = {"amax": amax_t.cpu().numpy()} if fmt == "nvfp4" else {}
        ref = fp4kit.reference.quantize(xs, fmt, **kw)
        exact = bool(np.array_equal(q.cpu().numpy(), ref.rowwise.data) and
                     np.array_equal(s.cpu().numpy(), ref.rowwise.scales))
        return time_fn(lambda: call(*nxa()), reps=reps), f"torch.compile (bytes exact vs reference: {'yes' if exact else 'NO'})"
    except Exception as e:  # torch.compile unavailable: say so in the table
        return None, f"torch.compile n/a ({type(e).__name__})"


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
        nxt = rotating(lambda i: (torch.randn(M, K, device="cuda") * (1 + i)).to(torch.bfloat16), M * K * 2)
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
        rows.append(dict(op="quantize", format="mxfp8_e4m3", axis="rowwise", layout="compact", variant="vs torchao",
                         shape=f"{M}x{K}", us=us, bytes=nbytes, gbs=nbytes / us / 1e3, copy_pct=100 * cu / us,
                         baseline_us=base, speedup=base / us,
                         baseline_exact=f"{label}, torch.compile (bytes exact vs reference: {'yes' if exact else 'NO'})"))
        _emit(rows)
    call, label = torchao_nvfp4()
    if call is None:
        print(f"| (torchao NVFP4 baseline skipped: {label}) |", flush=True)
        return
    for (M, K) in shapes:
        nxa = with_amax(rotating(lambda i: (torch.randn(M, K, device="cuda") * (1 + i)).to(torch.bfloat16),
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
        rows.append(dict(op="quantize", format="nvfp4", axis="rowwise", layout="compact",
                         variant="supplied amax, vs torchao", shape=f"{M}x{K}", us=us, bytes=nbytes,
                         gbs=nbytes / us / 1e3, copy_pct=100 * cu / us, baseline_us=base, speedup=base / us,
                         baseline_exact=f"{label}, torch.compile (bytes exact vs reference: {'yes' if exact else 'NO'})"))
        _emit(rows)


def bench_dequantize(rows, shapes, formats, reps):
    import fp4kit
    torch = _torch()
    for (M, K) in shapes:
        x = (torch.randn(M, K, device="cuda")).to(torch.bfloat16)
        for fmt in formats:
            q = fp4kit.quantize(x, fmt, axis="rowwise", scale_layout="swizzled")
            for dt in ("bfloat16", "float32"):
                us = time_fn(lambda: fp4kit.dequantize(q, dtype=dt), reps=reps)
                eager = time_fn(lambda: fp4kit.dequantize(q, dtype=dt), reps=max(5, reps // 2), mode="eager")
                nbytes = _bytes_out(fmt, M, K, "rowwise") + M * K * (2 if dt == "bfloat16" else 4)
                cu = copy_us(nbytes, reps)
                rows.append(dict(op=f"dequantize->{dt}", format=fmt, axis="rowwise", layout="swizzled", variant="",
                                 shape=f"{M}x{K}", us=us, bytes=nbytes, gbs=nbytes / us / 1e3, copy_pct=100 * cu / us,
                                 eager_us=eager, baseline_us=None, speedup=None, baseline_exact=""))
                _emit(rows)


def bench_swizzle(rows, shapes, reps):
    import fp4kit
    torch = _torch()
    for (M, K) in shapes:
        c = torch.randint(0, 255, (M, K // 16), device="cuda", dtype=torch.uint8)
        us = time_fn(lambda: fp4kit.swizzle_scales(c), reps=reps)
        eager = time_fn(lambda: fp4kit.swizzle_scales(c), reps=max(5, reps // 2), mode="eager")
        nbytes = 2 * c.numel()
        cu = copy_us(nbytes, reps)
        rows.append(dict(op="swizzle_scales", format="-", axis="-", layout="swizzled", variant="",
                         shape=f"{M}x{K // 16}", us=us, bytes=nbytes, gbs=nbytes / us / 1e3, copy_pct=100 * cu / us,
                         eager_us=eager, baseline_us=None, speedup=None, baseline_exact=""))
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


def bench_grouped(rows, reps, K=7168, total=65536, groups=(8, 64)):
    """MoE grouped quantize: one launch (device dims) vs one single-tensor launch per member."""
    import fp4kit
    torch = _torch()
    x = (torch.randn(total, K, device="cuda")).to(torch.bfloat16)
    for G, multiple in ((g, m) for g in groups for m in (128, 2)):
        dims = _skewed_dims(G, total, seed=G, multiple=multiple)
        dims_dev = torch.tensor(dims, dtype=torch.int64, device="cuda")
        starts = np.cumsum([0] + dims[:-1])
        vname = f"device dims, skewed, {sum(1 for d in dims if d == 0)} empty, M_i % {multiple} == 0"
        # NVFP4 "both" also with one supplied amax per member (no statistics pass)
        amax = torch.full((G,), 4.0, device="cuda")
        # and "both" of MXFP8 (staged squares), MXFP4 and MXFP6 (one-tile kernel), with compact scales
        # too (staged, then group_unswizzle_scales)
        # and "both" of MXFP4 / NVFP4 with stochastic rounding (one K: the one-tile _sr kernel)
        for fmt, axis, sup, layout, sr in (("mxfp8_e4m3", "rowwise", False, "swizzled", False),
                                           ("mxfp8_e4m3", "both", False, "swizzled", False),
                                           ("mxfp8_e4m3", "both", False, "compact", False),
                                           ("mxfp4_e2m1", "both", False, "swizzled", False),
                                           ("mxfp4_e2m1", "both", False, "compact", False),
                                           ("mxfp6_e2m3", "both", False, "swizzled", False),
                                           ("mxfp6_e2m3", "both", False, "compact", False),
                                           ("nvfp4", "rowwise", False, "swizzled", False),
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
            us_loop = time_fn(lambda: [fp4kit.quantize(p, fmt, amax=pa, **kw) for p, pa in per],
                              reps=max(5, reps // 4))
            nbytes = total * K * 2 + _bytes_out(fmt, total, K, axis)
            cu = copy_us(nbytes, reps)
            rows.append(dict(op=f"group_quantize G={G}", format=fmt, axis=axis, layout=layout,
                             variant=vname + (", supplied amax" if sup else "") + (", stochastic" if sr else ""),
                             shape=f"{total}x{K}", us=us,
                             bytes=nbytes, gbs=nbytes / us / 1e3, copy_pct=100 * cu / us, baseline_us=us_loop,
                             speedup=us_loop / us, baseline_exact="vs per-member launches"))
            _emit(rows)


def bench_recipes(rows, reps, shape=(8192, 8192)):
    """NVFP4 recipes: fused RHT (swizzled scales from the kernel) vs RHT compact + separate swizzle;
    stochastic vs nearest rounding."""
    import fp4kit
    torch = _torch()
    M, K = shape
    nxt = rotating(lambda i: (torch.randn(M, K, device="cuda") * (1 + i)).to(torch.bfloat16), M * K * 2)
    nbytes = M * K * 2 + _bytes_out("nvfp4", M, K, "both")

    def unfused():
        q = fp4kit.quantize(nxt(), "nvfp4", axis="both", rht=True, scale_layout="compact")
        fp4kit.swizzle_scales(q.rowwise.scales)
        fp4kit.swizzle_scales(q.columnwise.scales)
    us_f = time_fn(lambda: fp4kit.quantize(nxt(), "nvfp4", axis="both", rht=True, scale_layout="swizzled"), reps=reps)
    us_u = time_fn(unfused, reps=reps)
    cu = copy_us(nbytes, reps)
    rows.append(dict(op="quantize rht (fused swizzle)", format="nvfp4", axis="both", layout="swizzled", variant="rht",
                     shape=f"{M}x{K}", us=us_f, bytes=nbytes, gbs=nbytes / us_f / 1e3, copy_pct=100 * cu / us_f,
                     baseline_us=us_u, speedup=us_u / us_f, baseline_exact="vs rht compact + swizzle_scales"))
    _emit(rows)
    for fmt in ("nvfp4", "mxfp4_e2m1"):
        us_n = time_fn(lambda: fp4kit.quantize(nxt(), fmt, axis="both"), reps=reps)
        us_s = time_fn(lambda: fp4kit.quantize(nxt(), fmt, axis="both", rounding="stochastic", seed=7), reps=reps)
        nb = M * K * 2 + _bytes_out(fmt, M, K, "both")
        rows.append(dict(op="quantize stochastic", format=fmt, axis="both", layout="compact", variant="seed=7",
                         shape=f"{M}x{K}", us=us_s, bytes=nb, gbs=nb / us_s / 1e3, copy_pct=100 * cu / us_s,
                         baseline_us=us_n, speedup=us_n / us_s, baseline_exact=f"SR cost {100 * (us_s / us_n - 1):+.0f}% vs nearest"))
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


def bench_startup():
    """Cold start (empty cache: compile everything) and warm start (disk cache) in fresh processes.
    A machine that has compiled the same programs before (the GPU tests, an earlier run) answers
    NVRTC from a cache outside fp4kit's, so the cold figure is a compile only as the first run on a
    freshly started machine (docs/performance.md, thirty-seventh session)."""
    code = ("import time; t0=time.time(); import fp4kit; t=time.time(); fp4kit.warmup(); e=time.time(); "
            "print(e-t, e-t0)")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with tempfile.TemporaryDirectory() as d:
        env["FP4KIT_CACHE_DIR"] = d
        run = lambda: [float(v) for v in subprocess.run(  # noqa: E731
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.split()[-2:]]
        cold, cold_total = run()
        n_cubins = len(list(Path(d).glob("*.cubin")))
        warm, warm_total = run()
    print(f"startup: cold warmup {cold:.2f} s ({n_cubins} cubins compiled into an empty cache; process "
          f"{cold_total:.2f} s with imports), warm {warm:.2f} s (process {warm_total:.2f} s)", flush=True)
    return cold, warm, n_cubins


_PROGRESS = None       # fp4kit.cli.Progress over the expected rows: progress and time left on stderr


# Single tensors off the multiples of 128 / 16 (the "ragged" section): M = 8200 puts every other
# columnwise code row off a 16-byte boundary (FP8: 8200 bytes; FP4: 4100), the case of token counts
# that are not padded. "both" in both scale layouts; NVFP4 with computed and supplied amax.
RAGGED_SHAPES = [(8200, 8192)]
RAGGED_FORMATS = ("mxfp8_e4m3", "mxfp6_e2m3", "mxfp4_e2m1", "nvfp4")


def _quantize_rows(shapes, formats, axes) -> int:
    per_fmt = sum((2 if a == "both" else 1) for a in axes)
    return len(shapes) * sum(per_fmt * (2 if f == "nvfp4" else 1) for f in formats)


def expected_rows(shapes, formats, axes, groups=4, grouped_ops=12) -> int:
    """Rows the benchmark will print (mirrors the loops below), for the progress line's estimate."""
    quant = _quantize_rows(shapes, formats, axes) + _quantize_rows(RAGGED_SHAPES, RAGGED_FORMATS, ("both",))
    return quant + len(shapes) * len(formats) * 2 + len(shapes) + 3 + groups * grouped_ops


def _emit(rows):
    print(_fmt_row(rows[-1]), flush=True)
    if _PROGRESS is not None:
        r = rows[-1]
        _PROGRESS.update(note=f"{r['op']} {r['format']} {r['axis']} {r['shape']}")


def _fmt_row(r):
    sp = f"{r['speedup']:.2f}x" if r.get("speedup") else "-"
    eager = f"{r['eager_us']:.1f}" if r.get("eager_us") else "-"
    return (f"| {r['op']} | {r['format']} | {r['axis']} | {r['layout']} | {r['variant']} | {r['shape']} | "
            f"{r['us']:.1f} | {r['gbs']:.0f} | {r['copy_pct']:.0f}% | {eager} | {sp} | {r['baseline_exact']} |")


HEADER = ("| op | format | axis | scales | variant | shape | us (device) | GB/s | copy % | us (eager, host incl.) "
          "| speed-up vs baseline | baseline |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|")


SECTIONS = ("quantize", "ragged", "torchao", "dequantize", "swizzle", "recipes", "grouped", "small", "startup")


def tail_lines(small, startup, cpu=None):
    """The lines after the op rows (which were printed as they came): the small-input table when
    that section ran, the start-up line when it ran; nothing otherwise."""
    tail = []
    if small:
        tail += ["", "| M x 4096 | input | format | host us/call (median of rounds) | fastest - slowest round |",
                 "|---|---|---|---|---|"]
        tail += [f"| {M} | {lib} | {f} | {h:.1f} | {lo:.1f} - {hi:.1f} |" for M, lib, f, h, lo, hi in small]
        tail += ["", f"(host times pinned to CPU {cpu})" if cpu is not None else "(host times not pinned: --cpu N pins them)"]
    if startup:
        tail += ["", f"cold start (compile everything, {startup[2]} cubins into an empty cache): {startup[0]:.1f} s; "
                 f"warm start (disk cache): {startup[1]:.2f} s (a compile only on a freshly started machine: "
                 "one that compiled the same programs before answers from a cache outside fp4kit's)"]
    return tail


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one shape, fewer formats and repetitions")
    ap.add_argument("--csv", default=os.path.join(os.environ.get("OUT", "."), "bench.csv"))
    ap.add_argument("--md", default=os.path.join(os.environ.get("OUT", "."), "bench.md"))
    ap.add_argument("--no-startup", action="store_true")
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
    torch = _torch()
    fp4kit.warmup()
    dev = torch.cuda.get_device_name()
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
    rows = []
    print(f"# fp4kit benchmarks on {dev}\n\n{HEADER}", flush=True)
    global _PROGRESS
    from fp4kit.cli import Progress
    n_rows = expected_rows(shapes, formats, axes) + torchao_rows(shapes)
    if only or fmts:
        n_rows = None
    with Progress(total=n_rows, label="bench") as _PROGRESS:
        if "quantize" in run:
            bench_quantize(rows, shapes, formats, axes, reps)
        if "ragged" in run:
            bench_quantize(rows, RAGGED_SHAPES, ragged_formats, ("both",), reps)
        if "torchao" in run:
            bench_torchao(rows, shapes, reps)
        if "dequantize" in run:
            bench_dequantize(rows, shapes, formats, reps)
        if "swizzle" in run:
            bench_swizzle(rows, shapes, reps)
        if "recipes" in run:
            bench_recipes(rows, reps)
        if "grouped" in run:
            bench_grouped(rows, reps)
    _PROGRESS = None
    small = []
    if "small" in run:
        affinity = os.sched_getaffinity(0)
        if args.cpu is not None:                    # the small-input section alone runs pinned
            os.sched_setaffinity(0, {args.cpu})
        try:
            small = bench_small()
        finally:
            os.sched_setaffinity(0, affinity)
    startup = None if args.no_startup or "startup" not in run else bench_startup()
    with open(args.csv, "w", newline="") as fh:
        fields = list(dict.fromkeys(k for r in rows for k in r))
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    tail = tail_lines(small, startup, args.cpu)
    lines = [f"# fp4kit benchmarks on {dev}", "", HEADER] + [_fmt_row(r) for r in rows] + tail
    Path(args.md).write_text("\n".join(lines) + "\n")
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

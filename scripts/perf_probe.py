#!/usr/bin/env python3
"""Quick per-variant timings (median of CUDA-event-timed runs, rotated inputs) for kernel work.

Usage: PYTHONPATH=. python3 scripts/perf_probe.py [--once NAME | --only PREFIX]
(--once: one call of NAME, for ncu; --only: the variants whose name starts with PREFIX, or with
one of several comma-separated prefixes)
"""
import statistics
import sys

import torch

import fp4kit
import fp4kit._cuda

M = K = 8192


def variants():
    yield "mxfp8 row", lambda x: fp4kit.quantize(x, "mxfp8_e4m3", axis="rowwise")
    yield "mxfp4 row", lambda x: fp4kit.quantize(x, "mxfp4_e2m1", axis="rowwise")
    yield "mxfp6 row", lambda x: fp4kit.quantize(x, "mxfp6_e2m3", axis="rowwise")
    yield "mxfp8 row f32", lambda x: fp4kit.quantize(XF, "mxfp8_e4m3", axis="rowwise")
    yield "mxfp8 col", lambda x: fp4kit.quantize(x, "mxfp8_e4m3", axis="columnwise")
    yield "mxfp8 both", lambda x: fp4kit.quantize(x, "mxfp8_e4m3", axis="both")
    yield "mxfp4 both", lambda x: fp4kit.quantize(x, "mxfp4_e2m1", axis="both")
    yield "mxfp6 both", lambda x: fp4kit.quantize(x, "mxfp6_e2m3", axis="both")
    yield "nvfp4 row amax", lambda x: fp4kit.quantize(x, "nvfp4", axis="rowwise", amax=AM)
    yield "nvfp4 both amax", lambda x: fp4kit.quantize(x, "nvfp4", axis="both", amax=AM)
    yield "nvfp4 both", lambda x: fp4kit.quantize(x, "nvfp4", axis="both")
    yield "nvfp4 row SR", lambda x: fp4kit.quantize(x, "nvfp4", axis="rowwise", amax=AM, rounding="stochastic", seed=7)
    yield "mxfp4 both SR", lambda x: fp4kit.quantize(x, "mxfp4_e2m1", axis="both", rounding="stochastic", seed=7)
    yield "nvfp4 both SR", lambda x: fp4kit.quantize(x, "nvfp4", axis="both", amax=AM, rounding="stochastic", seed=7)
    yield "nvfp4 rht both swz", lambda x: fp4kit.quantize(x, "nvfp4", axis="both", rht=True, scale_layout="swizzled")
    yield "dq mxfp8 bf16", lambda x: fp4kit.dequantize(QD["mxfp8_e4m3"], dtype="bfloat16")
    yield "dq mxfp8 f32", lambda x: fp4kit.dequantize(QD["mxfp8_e4m3"], dtype="float32")
    yield "dq nvfp4 bf16", lambda x: fp4kit.dequantize(QD["nvfp4"], dtype="bfloat16")
    yield "dq mxfp4 bf16", lambda x: fp4kit.dequantize(QD["mxfp4_e2m1"], dtype="bfloat16")
    yield "dq e5m2 f16", lambda x: fp4kit.dequantize(QD["mxfp8_e5m2"], dtype="float16")
    yield "swizzle 8192x512", lambda x: fp4kit.swizzle_scales(SC)
    yield "swizzle 16384x1024", lambda x: fp4kit.swizzle_scales(SC2)
    yield "amax global", lambda x: fp4kit._cuda.compute_amax(_cp(x), "bfloat16")
    yield "amax rht", lambda x: fp4kit._cuda.compute_amax(_cp(x), "bfloat16", "rht")
    yield "copy 2x128MB", lambda x: COPY.copy_(x)
    for G in (8, 64):
        for fmt, short in (("mxfp8_e4m3", "mxfp8"), ("nvfp4", "nvfp4")):
            for axis in ("rowwise", "both"):
                yield (f"grp{G} {short} {axis[:4]}",
                       lambda x, G=G, fmt=fmt, axis=axis: fp4kit.group_quantize(
                           GX, fmt, first_dims=GDIMS[G], axis=axis, scale_layout="swizzled"))
    for fmt, short in (("mxfp8_e4m3", "mxfp8"), ("nvfp4", "nvfp4")):
        for axis in ("rowwise", "both"):
            yield (f"grp8 M%128 {short} {axis[:4]}",
                   lambda x, fmt=fmt, axis=axis: fp4kit.group_quantize(
                       GX, fmt, first_dims=GDIMS["8a"], axis=axis, scale_layout="swizzled"))
    yield "big mxfp8 row", lambda x: fp4kit.quantize(GX, "mxfp8_e4m3", axis="rowwise")
    yield "big nvfp4 row amax", lambda x: fp4kit.quantize(GX, "nvfp4", axis="rowwise", amax=AM)
    yield "big nvfp4 both", lambda x: fp4kit.quantize(GX, "nvfp4", axis="both", scale_layout="swizzled")
    yield "big grp1 mxfp8 row", lambda x: fp4kit.group_quantize(GX, "mxfp8_e4m3", first_dims=GDIMS[1], axis="rowwise")
    yield "big grp1 nvfp4 row amax", lambda x: fp4kit.group_quantize(GX, "nvfp4", first_dims=GDIMS[1], axis="rowwise", amax=AM)
    yield "grp copy 2x940MB", lambda x: GCOPY.copy_(GX)


def _cp(x):
    import cupy
    return cupy.from_dlpack(x.view(torch.int16)).view(cupy.uint16)


AM = None
COPY = None
XF = None
GX = GCOPY = None
GDIMS = {}
QD = {}
SC = SC2 = None


def main():
    global AM, COPY, XF
    xs = [(torch.randn(M, K, device="cuda") * (1 + i)).to(torch.bfloat16) for i in range(4)]
    XF = torch.randn(M // 2, K, device="cuda")   # 128 MiB of float32 (same bytes as one bf16 input)
    global GX, GCOPY
    sys.path.insert(0, __import__("os").path.dirname(__file__))
    from bench import _skewed_dims
    GX = torch.randn(65536, 7168, device="cuda").to(torch.bfloat16)      # MoE: 65536 tokens, K = 7168
    GCOPY = torch.empty_like(GX)
    GDIMS[1] = torch.tensor([65536], dtype=torch.int64, device="cuda")
    for G in (8, 64):
        GDIMS[G] = torch.tensor(_skewed_dims(G, 65536, seed=G), dtype=torch.int64, device="cuda")
    GDIMS["8a"] = torch.tensor(_skewed_dims(8, 65536, seed=8, multiple=128), dtype=torch.int64, device="cuda")
    COPY = torch.empty_like(xs[0])
    global SC, SC2
    for fmt in ("mxfp8_e4m3", "mxfp8_e5m2", "nvfp4", "mxfp4_e2m1"):
        QD[fmt] = fp4kit.quantize(xs[0], fmt, axis="rowwise")
    SC = torch.randint(0, 255, (M, K // 16), device="cuda", dtype=torch.uint8)
    SC2 = torch.randint(0, 255, (2 * M, K // 8), device="cuda", dtype=torch.uint8)
    AM = xs[0].float().abs().amax().reshape(1)
    once = sys.argv[2] if len(sys.argv) > 2 and sys.argv[1] == "--once" else None
    only = sys.argv[2] if len(sys.argv) > 2 and sys.argv[1] == "--only" else None   # name prefix
    for name, fn in variants():
        if only is not None and not any(name.startswith(o) for o in only.split(",")):
            continue
        if once is not None:
            if name == once:
                fn(xs[0]); fn(xs[1]); torch.cuda.synchronize()
            continue
        for i in range(3):
            fn(xs[i % 4])
        torch.cuda.synchronize()
        t = []
        for i in range(20):
            a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
            a.record()
            for j in range(10):
                fn(xs[j % 4])
            b.record(); b.synchronize()
            t.append(a.elapsed_time(b) * 1e2)
        # kernel-only device time per call (CUPTI through torch.profiler), by kernel
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for j in range(8):
                fn(xs[j % 4])
            torch.cuda.synchronize()
        ker = {}
        for ev in prof.events():
            if ev.device_type == torch.autograd.DeviceType.CUDA:
                ker[ev.name] = ker.get(ev.name, 0.0) + ev.time_range.elapsed_us() / 8
        dev = sum(ker.values())
        parts = ", ".join(f"{k[:28]} {v:.1f}" for k, v in sorted(ker.items(), key=lambda kv: -kv[1])[:3])
        print(f"{name:22s} loop {statistics.median(t):7.1f} us/call  kernels {dev:7.1f} us  [{parts}]", flush=True)

if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Probe: how much of a quantize op's device time is the element encode? Times fp4kit.quantize
(device time, bench.py's method) with the real kernels, or, with --move, with quantize.cu and
quantize_cols.cu compiled with FP4KIT_MOVE_ONLY defined, where encode_seg (common/quantize_tile.cuh)
stores top bits of the inputs instead of codes: every load, scale, store and launch unchanged, the
bytes wrong on purpose, so the time left is the ceiling of the kernels' access pattern (the
results: docs/performance.md item 113). GPU only; run once per mode in the same device call.

Usage: PYTHONPATH=. python3 scripts/move_probe.py [--move] [--shapes 8192x8192,16384x16384]
"""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from fp4kit import _loader  # noqa: E402

# the modules whose kernels take encode_seg, built move-only; scripts/compile_check.py compiles them
# too, so the probe's build cannot rot unseen
MOVE_MODULES = ("quantize_cols", "quantize")

FORMATS = ["mxfp8_e4m3", "mxfp6_e2m3", "mxfp4_e2m1", "nvfp4"]
AXES = ["rowwise", "columnwise", "both"]
LAYOUTS = ["compact", "swizzled"]


def build_move_only(module: str, arch: str) -> bytes:
    """The cubin of cuda_src/<module>.cu compiled with FP4KIT_MOVE_ONLY defined (NVRTC, no GPU)."""
    sources = _loader._read_sources()
    sources[f"{module}_move.cu"] = f'#define FP4KIT_MOVE_ONLY 1\n#include "{module}.cu"\n'
    return _loader._compile(f"{module}_move", arch, sources, _loader.options_for(arch))


def main():
    import torch

    import fp4kit
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench import copy_us, rotating, time_fn

    ap = argparse.ArgumentParser()
    ap.add_argument("--move", action="store_true")
    ap.add_argument("--shapes", default="8192x8192,16384x16384")
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    if args.move:
        real = _loader.build_cubin
        tmp = tempfile.mkdtemp(prefix="fp4kit_move_")

        def build(module, arch, use_cache=True):
            if module not in MOVE_MODULES:
                return real(module, arch, use_cache)
            path = os.path.join(tmp, f"{module}_move-{arch}.cubin")
            if not os.path.exists(path):
                with open(path, "wb") as f:
                    f.write(build_move_only(module, arch))
            return path
        _loader.build_cubin = build
    mode = "move-only" if args.move else "real"
    for sh in args.shapes.split(","):
        M, K = (int(v) for v in sh.split("x"))
        nxt = rotating(lambda i: (torch.randn(M, K, device="cuda") * (1 + i)).to(torch.bfloat16), M * K * 2)
        amax = torch.full((1,), 4.0, device="cuda")
        for fmt in FORMATS:
            for axis in AXES:
                for layout in LAYOUTS:
                    kw = dict(axis=axis, scale_layout=layout)
                    if fmt == "nvfp4":
                        kw["amax"] = amax
                    q = fp4kit.quantize(nxt(), fmt, **kw)
                    nbytes = M * K * 2 + q.nbytes
                    t = time_fn(lambda: fp4kit.quantize(nxt(), fmt, **kw), reps=args.reps)
                    c = copy_us(nbytes, args.reps)
                    print(f"{mode:9s} {sh:12s} {fmt:11s} {axis:10s} {layout:8s} {t:9.1f} us "
                          f"{100 * c / t:6.1f} % of copy", flush=True)


if __name__ == "__main__":
    main()

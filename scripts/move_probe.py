#!/usr/bin/env python3
"""Probe: how much of a quantize op's device time is the element encode? Times fp4kit.quantize
(device time, bench.py's method) with the real kernels, or, with --move, with quantize.cu and
quantize_cols.cu compiled with FP4KIT_MOVE_ONLY defined, where encode_seg (common/quantize_tile.cuh)
stores top bits of the inputs instead of codes: every load, scale, store and launch unchanged, the
bytes wrong on purpose, so the time left is the ceiling of the kernels' access pattern (the
results: docs/performance.md item 113). GPU only; run once per mode in the same device call.

Usage (both modes in one device call, so that the lines compare on one card):
    export PYTHONPATH=$PWD
    python3 scripts/move_probe.py [--shapes 8192x8192,16384x16384] [--formats nvfp4,...]
    python3 scripts/move_probe.py --move [the same options]
NVFP4 gets each input's own amax (bench.with_amax).
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


def move_only_sources() -> dict:
    """cuda_src's sources plus a module <m>_move for each m of MOVE_MODULES: cuda_src/<m>.cu with
    FP4KIT_MOVE_ONLY defined."""
    sources = _loader._read_sources()
    for m in MOVE_MODULES:
        sources[f"{m}_move.cu"] = f'#define FP4KIT_MOVE_ONLY 1\n#include "{m}.cu"\n'
    return sources


def build_move_only(module: str, arch: str) -> bytes:
    """The cubin of cuda_src/<module>.cu compiled with FP4KIT_MOVE_ONLY defined (NVRTC, no GPU)."""
    return _loader._compile(f"{module}_move", arch, move_only_sources(), _loader.options_for(arch))


def main():
    import torch

    import fp4kit
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench import copy_us, rotating, time_fn, with_amax

    ap = argparse.ArgumentParser()
    ap.add_argument("--move", action="store_true")
    ap.add_argument("--shapes", default="8192x8192,16384x16384")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--formats", default=",".join(FORMATS))
    args = ap.parse_args()
    if args.move:
        real = _loader.build_cubin
        tmp = tempfile.mkdtemp(prefix="fp4kit_move_")

        def build(module, arch, use_cache=True, part=None):
            if module not in MOVE_MODULES:
                return real(module, arch, use_cache, part)
            # the whole move-only module serves every part (each part's kernels are in it)
            path = os.path.join(tmp, f"{module}_move-{arch}.cubin")
            if not os.path.exists(path):
                with open(path, "wb") as f:
                    f.write(build_move_only(module, arch))
            return path
        _loader.build_cubin = build
    mode = "move-only" if args.move else "real"
    for sh in args.shapes.split(","):
        M, K = (int(v) for v in sh.split("x"))
        nxa = with_amax(rotating(lambda i: (torch.randn(M, K, device="cuda") * (1 + i)).to(torch.bfloat16),
                                 M * K * 2))
        for fmt in args.formats.split(","):
            for axis in AXES:
                for layout in LAYOUTS:
                    def call():   # NVFP4: each input with its own amax (bench.with_amax)
                        x, a = nxa()
                        return fp4kit.quantize(x, fmt, axis=axis, scale_layout=layout,
                                               amax=a if fmt == "nvfp4" else None)
                    nbytes = M * K * 2 + call().nbytes
                    t = time_fn(call, reps=args.reps)
                    c = copy_us(nbytes, args.reps)
                    print(f"{mode:9s} {sh:12s} {fmt:11s} {axis:10s} {layout:8s} {t:9.1f} us "
                          f"{100 * c / t:6.1f} % of copy", flush=True)


if __name__ == "__main__":
    main()

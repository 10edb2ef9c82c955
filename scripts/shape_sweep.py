#!/usr/bin/env python3
"""How one op's efficiency depends on the shape: time per call, GB/s and % of a device-to-device
copy of the same bytes, for several (M, K) at once (CUDA events around 10 back-to-back calls on
inputs rotated among buffers that exceed L2; median of 15).

Usage: PYTHONPATH=. python3 scripts/shape_sweep.py [--ops mxfp8-row,nvfp4-row,...]
                                                   [--shapes 8192x8192,8192x7168,...] [--stage FMT,...|none]
"""
import argparse
import statistics

import torch

import fp4kit

OPS = {
    "mxfp8-row": lambda x, am: fp4kit.quantize(x, "mxfp8_e4m3", axis="rowwise"),
    "mxfp8-col": lambda x, am: fp4kit.quantize(x, "mxfp8_e4m3", axis="columnwise"),
    "mxfp8-both": lambda x, am: fp4kit.quantize(x, "mxfp8_e4m3", axis="both"),
    "mxfp8-both-swz": lambda x, am: fp4kit.quantize(x, "mxfp8_e4m3", axis="both", scale_layout="swizzled"),
    "mxfp8-row-swz": lambda x, am: fp4kit.quantize(x, "mxfp8_e4m3", axis="rowwise", scale_layout="swizzled"),
    "mxfp4-row": lambda x, am: fp4kit.quantize(x, "mxfp4_e2m1", axis="rowwise"),
    "mxfp4-both": lambda x, am: fp4kit.quantize(x, "mxfp4_e2m1", axis="both"),
    "mxfp6-row": lambda x, am: fp4kit.quantize(x, "mxfp6_e2m3", axis="rowwise"),
    "mxfp6-both": lambda x, am: fp4kit.quantize(x, "mxfp6_e2m3", axis="both"),
    "nvfp4-row": lambda x, am: fp4kit.quantize(x, "nvfp4", axis="rowwise", amax=am),
    "nvfp4-both": lambda x, am: fp4kit.quantize(x, "nvfp4", axis="both", amax=am),
}


def _grouped(fmt, layout):
    """group_quantize rowwise of the (M, K) input as 8 skewed members (device dims, sizes % 128)."""
    def run(x, am):
        key = (x.shape[0], layout)
        if key not in _DIMS:
            import os
            import sys
            sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
            from bench import _skewed_dims
            _DIMS[key] = torch.tensor(_skewed_dims(8, x.shape[0], seed=8, multiple=128), dtype=torch.int64,
                                      device="cuda")
        return fp4kit.group_quantize(x, fmt, first_dims=_DIMS[key], axis="rowwise", scale_layout=layout)
    return run


_DIMS = {}
OPS["grp8-mxfp8-row"] = _grouped("mxfp8_e4m3", "compact")
OPS["grp8-mxfp8-row-swz"] = _grouped("mxfp8_e4m3", "swizzled")


def out_bytes(q):
    if hasattr(q, "rowwise_data"):                  # a GroupedQuantizedTensor: its rowwise buffers
        return sum(int(b.nbytes) for b in (q.rowwise_data, q.rowwise_scales) if b is not None)
    n = 0
    for op in (q.rowwise, q.columnwise):
        if op is not None:
            n += op.data.nbytes + op.scales.nbytes
    return n


def timed(fn, xs, reps=15, inner=10):
    for i in range(3):
        fn(xs[i % len(xs)])
    torch.cuda.synchronize()
    t = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        for j in range(inner):
            fn(xs[j % len(xs)])
        b.record()
        b.synchronize()
        t.append(a.elapsed_time(b) * 1e3 / inner)
    return statistics.median(t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default="mxfp8-row,nvfp4-row")
    ap.add_argument("--shapes", default="8192x8192,8192x7168,8192x8320,16384x8192,16384x7168,4096x16384,32768x7168")
    ap.add_argument("--stage", default=None,
                    help="formats whose compact scales go through the swizzled staging buffer "
                         "(fp4kit._plan.STAGED_SCALE_FORMATS; comma-separated, or 'none')")
    ap.add_argument("--rows-max-lw", type=int, default=None,
                    help="fp4kit._plan.ROWS_MAX_LW (the rows kernel's widest CTA row: 2^lw segments of 16)")
    a = ap.parse_args()
    if a.rows_max_lw is not None:
        from fp4kit import _plan
        _plan.ROWS_MAX_LW = a.rows_max_lw
        _plan.clear_plans()
        print(f"rows kernel: lw <= {a.rows_max_lw}")
    if a.stage is not None:
        from fp4kit import _plan
        _plan.STAGED_SCALE_FORMATS.clear()
        _plan.STAGED_SCALE_FORMATS.update(f for f in a.stage.split(",") if f and f != "none")
        _plan.clear_plans()
        print(f"staged formats: {sorted(_plan.STAGED_SCALE_FORMATS)}")
    print(f"{'op':12s} {'shape':>12s} {'us':>8s} {'GB/s':>7s} {'copy%':>6s}")
    for shape in a.shapes.split(","):
        M, K = (int(v) for v in shape.split("x"))
        nbuf = max(2, -(-200 * 2**20 // (M * K * 2)))        # rotate over > 200 MiB
        xs = [(torch.randn(M, K, device="cuda") * (1 + i)).to(torch.bfloat16) for i in range(nbuf)]
        am = xs[0].float().abs().amax().reshape(1)
        for name in a.ops.split(","):
            fn = OPS[name]
            nbytes = M * K * 2 + out_bytes(fn(xs[0], am))
            src = torch.empty(nbytes // 2 + 1, dtype=torch.uint8, device="cuda")
            dsts = [torch.empty_like(src) for _ in range(2)]
            srcs = [src, torch.empty_like(src)]
            us = timed(lambda x, fn=fn: fn(x, am), xs)
            cu = timed(lambda i: dsts[i].copy_(srcs[i]), [0, 1])
            print(f"{name:12s} {shape:>12s} {us:8.1f} {nbytes / us / 1e3:7.0f} {100 * cu / us:5.0f}%", flush=True)
        del xs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

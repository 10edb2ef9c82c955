#!/usr/bin/env python3
"""Probe (docs/performance.md item 114): the _quad "both" kernel (MXFP8 E4M3 / MXFP4, bfloat16) with
a raster CTA order (_quadr) and with compact scales written by the square itself instead of the
staging buffer + unswizzle_scales launch (_quadc, _quadrc). Bytes against fp4kit.quantize on poisoned
outputs; kernel time against fp4kit.quantize (compact: staged + unswizzle; swizzled). GPU only.
"""
import argparse
import os
import sys

import cupy as cp
import numpy as np
import torch

import fp4kit
from fp4kit import _loader

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import copy_us, rotating, time_fn  # noqa: E402

ROW, COL, SWZ, VEC, COLSWZ, ROWSWZ = 1, 2, 4, 256, 512, 1024
FMTS = {0: "mxfp8_e4m3", 4: "mxfp4_e2m1"}


def launch(f, suffix, x, M, K, outs, compact):
    fn = _loader.get_function("quantize", f"quantize_f{f}_d1{suffix}")
    flags = ROW | COL | VEC | (ROWSWZ | COLSWZ if compact else SWZ)
    rd, rs, cd, cs = outs
    fn(((M // 128) * (K // 128),), (1024,), (np.intp(x.data_ptr()), np.int64(M), np.int64(K), rd, rs, cd, cs,
                                             np.intp(0), np.intp(0), np.int32(flags), np.uint64(0), np.uint32(0)))


def outputs(f, M, K, compact, fill=None):
    pk = 2 if f == 4 else 1
    mk = (lambda *s: cp.full(s, fill, cp.uint8)) if fill is not None else (lambda *s: cp.empty(s, cp.uint8))
    if compact:
        return mk(M, K // pk), mk(M, K // 32), mk(K, M // pk), mk(K, M // 32)
    return mk(M, K // pk), mk(M * K // 32), mk(K, M // pk), mk(K * M // 32)


def check():
    bad = 0
    for f in FMTS:
        for (M, K) in [(128, 128), (1152, 1024), (2048, 384), (1024, 8192), (3200, 1152)]:
            x = (torch.randn(M, K, device="cuda") * 3).to(torch.bfloat16)
            x.view(-1)[::997] = float("nan")
            x.view(-1)[5::1999] = float("inf")
            for suffix, compact in (("_quadr", False), ("_quadc", True), ("_quadrc", True)):
                q = fp4kit.quantize(x, FMTS[f], axis="both", scale_layout="compact" if compact else "swizzled")
                outs = outputs(f, M, K, compact, fill=0xA5)
                launch(f, suffix, x, M, K, outs, compact)
                want = [q.rowwise.data, q.rowwise.scales, q.columnwise.data, q.columnwise.scales]
                for name, got, w in zip(("row data", "row scales", "col data", "col scales"), outs, want):
                    w = cp.asarray(w).view(cp.uint8).reshape(got.shape)
                    if not bool((got == w).all()):
                        bad += 1
                        print(f"MISMATCH f{f}{suffix} {M}x{K} {name}: {int((got != w).sum())} bytes")
    print(f"quad check: {bad} mismatches")
    return bad


def bench(shapes, reps):
    for sh in shapes.split(","):
        M, K = (int(v) for v in sh.split("x"))
        nxt = rotating(lambda i: (torch.randn(M, K, device="cuda") * (1 + i)).to(torch.bfloat16), M * K * 2)
        for f in FMTS:
            res = {}
            q = fp4kit.quantize(nxt(), FMTS[f], axis="both")
            nbytes = M * K * 2 + q.nbytes
            c = copy_us(nbytes, reps)
            for layout in ("compact", "swizzled"):
                res[f"fp4kit {layout}"] = time_fn(lambda: fp4kit.quantize(nxt(), FMTS[f], axis="both",
                                                                         scale_layout=layout), reps=reps)
            for suffix, compact in (("_quad", False), ("_quadr", False), ("_quadc", True), ("_quadrc", True)):
                outs = outputs(f, M, K, compact)
                res[f"{suffix} {'compact' if compact else 'swizzled'}"] = time_fn(
                    lambda: launch(f, suffix, nxt(), M, K, outs, compact), reps=reps)
            print(f"\n{sh} {FMTS[f]} both, bfloat16; copy of the same bytes {c:.1f} us")
            for k, t in res.items():
                print(f"  {k:22s} {t:8.1f} us {100 * c / t:6.1f} % of copy")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="8192x8192,16384x16384,65536x7168,4096x4096")
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    print(torch.cuda.get_device_name())
    bad = check()
    bench(args.shapes, args.reps)
    print(f"\nquad check: {bad} mismatches")
    raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()

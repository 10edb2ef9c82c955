"""``python -m fp4kit check`` on a GPU: every kernel against the reference, byte for byte.

The matrix: op x format x option set x shape, on random data with special values sprinkled in
(NaN, +-inf, +-0, fp32/bf16 subnormals, values past the element max), plus the golden cases and the
conformance vectors through the GPU path. Each job quantizes on the device (outputs poisoned with
0xA5 before the launch), quantizes on the CPU with the reference, and compares with
``fp4kit.compare``; dequantize (float32, bfloat16, float16) and swizzle/unswizzle are checked too.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

import numpy as np

from .formats import FORMATS

SHAPES_QUICK = [(0, 64), (1, 16), (3, 48), (127, 96), (128, 128), (993, 512)]
SHAPES_DEFAULT = SHAPES_QUICK + [(4096, 7168)]
SHAPES_FULL = SHAPES_DEFAULT + [(8192, 8192)]


@dataclass
class Job:
    fmt: str
    shape: tuple
    dtype: str
    kwargs: dict = field(default_factory=dict)
    special: bool = True

    @property
    def name(self) -> str:
        opts = ",".join(f"{k}={v}" for k, v in self.kwargs.items())
        return f"{self.fmt} {self.shape} {self.dtype} {opts}"


def variants(fmt: str, shape, dtype: str):
    """Option sets for one format and shape (only those SPEC allows for it)."""
    f = FORMATS[fmt]
    M = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
    K = shape[-1]
    axis = "both"
    if f.packed and M % 2:
        axis = "rowwise"
    if f.packed and K % 2:
        axis = "columnwise"
    out: list[dict] = []
    if f.is_mx:
        out.append(dict(axis=axis, scale_layout="compact", scale_rule="rceil"))
        out.append(dict(axis=axis, scale_layout="swizzled", scale_rule="floor"))
        if f.packed:
            out.append(dict(axis=axis, scale_layout="swizzled", rounding="stochastic", seed=1234567))
    else:
        out.append(dict(axis=axis, scale_layout="compact"))
        out.append(dict(axis=axis, scale_layout="swizzled", amax="supplied"))
        out.append(dict(axis=axis, scale_layout="swizzled", tile_2d=True))
        out.append(dict(axis=axis, scale_layout="compact", row_scaled=True))
        out.append(dict(axis=axis, scale_layout="swizzled", rounding="stochastic", seed=2**40 + 7))
        if dtype == "bfloat16" and M % 16 == 0 and axis != "rowwise":
            out.append(dict(axis=axis, scale_layout="swizzled", rht=True))
            out.append(dict(axis=axis, scale_layout="compact", rht=True, rht_sign_mask=0))
    return out


def make_input(shape, dtype: str, seed: int, special: bool = True) -> np.ndarray:
    import ml_dtypes
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-6, 7, n))).astype(np.float32)
    if special and n:
        k = max(1, n // 500)
        idx = rng.integers(0, n, k * 6)
        x[idx[:k]] = np.nan
        x[idx[:k:2]] = -np.nan   # NaN with the sign bit set
        x[idx[k:2 * k]] = np.inf
        x[idx[2 * k:3 * k]] = -np.inf
        x[idx[3 * k:4 * k]] = -0.0
        x[idx[4 * k:5 * k]] = np.float32(1e-40) * rng.standard_normal(k).astype(np.float32)
        x[idx[5 * k:6 * k]] *= np.float32(1e4)
    dt = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[dtype]
    with np.errstate(over="ignore"):
        return x.reshape(shape).astype(dt)


def to_device(x: np.ndarray, lib: str = "auto"):
    """NumPy -> device array: CuPy for float32/float16, PyTorch for bfloat16 (CuPy has none)."""
    import ml_dtypes
    if x.dtype == np.dtype(ml_dtypes.bfloat16) or lib == "torch":
        import torch
        bits = torch.from_numpy(np.ascontiguousarray(x).view(np.int16 if x.dtype.itemsize == 2 else np.int32))
        t = bits.cuda()
        if x.dtype == np.dtype(ml_dtypes.bfloat16):
            return t.view(torch.bfloat16)
        return t.view(torch.float16 if x.dtype == np.float16 else torch.float32)
    import cupy as cp
    return cp.asarray(x)


def _jobs(shapes, formats):
    jobs = []
    dtypes = ("float32", "bfloat16", "float16")
    for si, shape in enumerate(shapes):
        big = int(np.prod(shape)) > 4_000_000
        for fi, fmt in enumerate(formats):
            for dt in (("bfloat16",) if big else dtypes):
                for kw in variants(fmt, shape, dt):
                    if not big and dt != dtypes[(si + fi) % 3] and "rht" not in kw and kw is not variants(fmt, shape, dt)[0]:
                        continue  # every dtype runs the first variant; other variants rotate dtypes
                    jobs.append(Job(fmt, shape, dt, kw))
    return jobs


def _run_job(job: Job, seed: int):
    import fp4kit
    from .comparator import to_numpy
    x = make_input(job.shape, job.dtype, seed)
    kw = dict(job.kwargs)
    M = int(np.prod(job.shape[:-1]))
    ref_kw = dict(kw)
    if kw.get("amax") == "supplied":
        a = np.array([np.float32(3.5) * np.float32(seed % 7 + 1)], np.float32)
        ref_kw["amax"] = a
        kw["amax"] = to_device(a)
    elif kw.get("row_scaled") and seed % 2:
        a = np.abs(np.random.default_rng(seed).standard_normal(M)).astype(np.float32) * 4
        ref_kw["amax"] = a
        kw["amax"] = to_device(a)
    exp = fp4kit.reference.quantize(x, job.fmt, **ref_kw)
    xd = to_device(x)
    from . import _cuda
    _cuda.set_poison(True)
    got = fp4kit.quantize(xd, job.fmt, **kw)
    rep = fp4kit.compare(got, exp, x=x)
    details = [] if rep.ok else [str(rep)]
    # dequantize every operand to every dtype
    for operand in ("rowwise", "columnwise"):
        if getattr(exp, operand) is None:
            continue
        for dt in ("float32", "bfloat16", "float16"):
            yr = fp4kit.reference.dequantize(exp, dtype=dt, operand=operand)
            yg = to_numpy(fp4kit.dequantize(got, dtype=dt, operand=operand))
            nd = _float_bits_differ(yg, yr)
            if nd:
                details.append(f"dequantize {operand} -> {dt}: {nd} differing values")
    return not details, "\n".join(details)


def _float_bits_differ(got: np.ndarray, want: np.ndarray) -> int:
    """Values whose bits differ (NaNs included: both sides write the canonical NaN). -1: shape."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return -1
    it = np.uint16 if got.itemsize == 2 else np.uint32
    gi, wi = np.ascontiguousarray(got).view(it), np.ascontiguousarray(want).view(it)
    return int((gi != wi).sum())


def _swizzle_jobs(shapes):
    import fp4kit
    import cupy as cp
    out = []
    for r, c in [(0, 3), (1, 1), (3, 5), (127, 3), (128, 4), (129, 5), (993, 17), (4096, 224)] + \
            [(s[0], -(-s[1] // 16)) for s in shapes]:
        a = np.random.default_rng(r * 7 + c).integers(0, 256, (r, c)).astype(np.uint8)
        s_ref = fp4kit.reference.swizzle_scales(a)
        s_gpu = cp.asnumpy(fp4kit.swizzle_scales(cp.asarray(a)))
        back = cp.asnumpy(fp4kit.unswizzle_scales(cp.asarray(s_ref), (r, c)))
        ok = np.array_equal(s_ref, s_gpu) and np.array_equal(back, a)
        out.append(("swizzle", f"({r},{c})", ok, "" if ok else "swizzle/unswizzle mismatch"))
    return out


def run(quick: bool = False, full: bool = False, formats=None) -> int:
    """Run the GPU matrix; print a progress line and a summary table; return the exit status."""
    import fp4kit
    from .cli import Progress
    fmts = tuple(formats) if formats else tuple(FORMATS)
    shapes = SHAPES_QUICK if quick else SHAPES_FULL if full else SHAPES_DEFAULT
    t0 = time.time()
    fp4kit.warmup()
    print(f"kernels compiled/loaded in {time.time() - t0:.1f} s")
    jobs = _jobs(shapes, fmts)
    results = []  # (format, op, case, passed, detail)
    with Progress(total=len(jobs), label="kernels vs reference") as p:
        for i, job in enumerate(jobs):
            try:
                ok, detail = _run_job(job, seed=1000 + i)
            except Exception as e:  # a crash is a failure with its message
                ok, detail = False, f"{type(e).__name__}: {e}"
            results.append((job.fmt, "quantize+dequantize", f"{job.shape} {job.dtype} " +
                            " ".join(f"{k}={v}" for k, v in job.kwargs.items()), ok, detail))
            p.update(note=job.name)
    for op, case, ok, detail in _swizzle_jobs(shapes):
        results.append(("-", op, case, ok, detail))
    from .comparator import to_numpy

    def gq(x, fmt, **kw):
        kw = {k: (to_device(v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
        return fp4kit.quantize(to_device(x), fmt, **kw)

    def gdq(q, **kw):
        return to_numpy(fp4kit.dequantize(q, **kw))
    for label, modname in (("golden", "golden"), ("vectors", "vectors")):
        try:
            mod = __import__(f"fp4kit.reference.{modname}", fromlist=["run_all"])
            recs = mod.run_all(quantize=gq, dequantize=gdq, to_numpy=to_numpy, formats=fmts)
        except Exception as e:
            results.append(("-", label, "run_all", False, f"{type(e).__name__}: {e}"))
            continue
        for rec in recs:
            results.append((rec[0], f"{label} {rec[1]}", rec[2], bool(rec[3]), rec[4] if len(rec) > 4 else ""))
    bad = [r for r in results if not r[3]]
    by: dict[tuple[str, str], tuple[int, int]] = {}
    for f_, op, case, ok, _ in results:
        k = (f_, op)
        a, b = by.get(k, (0, 0))
        by[k] = (a + ok, b + 1)
    print(f"\n{'format':<12} {'op':<22} {'passed':>8}")
    for (f_, op), (a, b) in sorted(by.items()):
        print(f"{f_:<12} {op:<22} {a:>4}/{b:<4} {'ok' if a == b else 'FAIL'}")
    for f_, op, case, ok, detail in bad[:20]:
        print(f"\nFAIL {f_} {op} {case}\n{detail}")
    dev = _device_name()
    print(f"\nGPU check on {dev}: {len(results) - len(bad)}/{len(results)} passed, {len(bad)} mismatches "
          f"({time.time() - t0:.0f} s)")
    return 1 if bad else 0


def _device_name() -> str:
    try:
        import cupy as cp
        return cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"].decode()
    except Exception:
        return "unknown GPU"


if __name__ == "__main__":
    sys.exit(run(quick="--quick" in sys.argv, full="--full" in sys.argv))

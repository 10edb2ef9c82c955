"""Conformance vectors: a fixed, seeded set of quantize / dequantize problems and the reference's bytes.

Contract
--------
* Every vector is a ``VectorSpec`` (name, format, shape, input dtype, input recipe, seed, quantize
  options, supplied-amax recipe, dequantize dtype). ``SPECS`` is the complete, ordered list; it
  spans every format x axis x scale layout x scale rule x input dtype, the NVFP4 variants (computed
  and supplied amax, tile_2d, row_scaled, RHT with the default mask, mask 0 and another mask,
  stochastic rounding with several seeds), odd / N-D / empty shapes and special values.
* Inputs are regenerated from their seeds with SplitMix64 (plain uint64 arithmetic, no NumPy
  random API whose streams could change between versions). Each value is built exactly in the
  input dtype: sign * (1 + m / 2^p) * 2^e with a per-block base exponent, plus, by recipe, fp32 /
  bf16 / fp16 subnormals, +-0, +-inf, NaN and the dtype's largest finite values.
* ``data/vectors.npz`` stores, per vector, the sha256 of the input bytes and, per output array
  (``rowwise.data``, ``rowwise.scales``, ``rowwise.amax``, the same for ``columnwise``, and
  ``dequantize.<operand>.<dtype>``), its dtype, shape and sha256; outputs of small vectors are
  also stored whole, so a mismatch there shows the differing bytes. Total size well under 2 MB.
* ``python -m fp4kit.reference.vectors --regenerate`` rewrites the file from the reference;
  ``tests/reference/test_vectors.py`` regenerates in memory and compares, so any change of the
  reference's bytes (or of the inputs) must be deliberate.

Use from another backend::

    from fp4kit.reference import vectors
    for case in vectors.iter_cases():          # VectorCase(name, x, kwargs, expected)
        q = my_quantize(case.x, **case.kwargs) # kwargs include fmt=..., and amax= when supplied
        for key, exp in case.expected.items():
            got = vectors.output(q, key, dequantize=my_dequantize)   # "rowwise.data", "dequantize.rowwise.float16", ...
            problem = exp.check(to_numpy(got))                      # None when bit-identical
    vectors.run_all(quantize=my_quantize, dequantize=my_dequantize, to_numpy=to_numpy)
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import ml_dtypes
import numpy as np

from .golden import byte_diff

__all__ = ["VectorSpec", "VectorCase", "Expected", "SPECS", "DATA_PATH", "make_input", "spec_kwargs",
           "compute_outputs", "build_store", "load_store", "iter_cases", "output", "run_all", "regenerate"]

FORMAT_VERSION = 1
DATA_PATH = Path(__file__).resolve().parent / "data" / "vectors.npz"
FULL_CASE_BYTES = 3072          # store every output of a vector whose outputs total at most this
FULL_KEY_BYTES = 64             # and every output array this small (amax vectors)

_DT = {"float32": np.dtype(np.float32), "bfloat16": np.dtype(ml_dtypes.bfloat16), "float16": np.dtype(np.float16)}
#           mantissa bits, smallest normal exponent, largest exponent
_DT_BITS = {"float32": (23, -126, 127), "bfloat16": (7, -126, 127), "float16": (10, -14, 15)}


# ---------------------------------------------------------------------------------------------
# seeded inputs

_GAMMA = np.uint64(0x9E3779B97F4A7C15)


def splitmix64(seed: int, n: int) -> np.ndarray:
    """n uint64 outputs of SplitMix64 started at `seed` (Steele, Lea, Flood 2014)."""
    with np.errstate(over="ignore"):
        z = np.uint64(seed & 0xFFFFFFFFFFFFFFFF) + np.arange(1, n + 1, dtype=np.uint64) * _GAMMA
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _uniform_int(raw: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Integers in [lo, hi] from uint64 draws (tiny modulo bias is irrelevant here)."""
    return (raw % np.uint64(hi - lo + 1)).astype(np.int64) + lo


RECIPES = ("normal", "wide", "tiny", "special", "special_finite")


def make_input(shape, dtype: str, recipe: str, seed: int) -> np.ndarray:
    """The input array of a vector: exact values of `dtype`, reproducible from (recipe, seed)."""
    n = math.prod(shape)
    p, emin, emax = _DT_BITS[dtype]
    if n == 0:
        return np.zeros(shape, dtype=_DT[dtype])
    K = shape[-1]
    r = splitmix64(seed, 4 * n).reshape(4, n)
    idx = np.arange(n)
    row, col = idx // K, idx % K
    group = row * (-(-K // 16)) + col // 16                   # per 16-element group of a row
    gbase = splitmix64(seed ^ 0x5A5A5A5A, int(group.max()) + 1)
    sign = np.where((r[0] >> np.uint64(63)) == 1, -1.0, 1.0)
    mant = 1.0 + (r[1] & np.uint64((1 << p) - 1)).astype(np.float64) / float(1 << p)
    if recipe in ("normal", "special", "special_finite"):
        base, jitter = _uniform_int(gbase[group], -3, 3), _uniform_int(r[2], -3, 0)
    elif recipe == "wide":
        lo, hi = max(emin + 12, -40), min(emax - 1, 40)
        base, jitter = _uniform_int(gbase[group], lo, hi), _uniform_int(r[2], -12, 0)
    elif recipe == "tiny":
        base, jitter = _uniform_int(gbase[group], emin + 1, emin + 6), _uniform_int(r[2], -3, 0)
    else:
        raise ValueError(f"recipe: expected one of {RECIPES}, got {recipe!r}")
    e = np.clip(base + jitter, emin, emax)
    v = np.ldexp(sign * mant, e)                               # exact: a power-of-two scaling
    if recipe == "tiny":                                        # a third are subnormals of the dtype
        sub = (r[3] % np.uint64(3)) == 0
        k = (r[1] % np.uint64((1 << p) - 1)).astype(np.float64) + 1.0
        v = np.where(sub, sign * k * 2.0 ** (emin - p), v)
    if recipe.startswith("special"):
        big = (2.0 - 2.0 ** -p) * 2.0 ** emax                # the dtype's largest finite value
        # NaN entries are placeholders here; their bits are set explicitly below (+NaN and -NaN)
        table = [np.nan, np.nan, 0.0, -0.0, 2.0 ** (emin - p), -(2.0 ** (emin - p)),
                 (2.0 ** p - 1) * 2.0 ** (emin - p), 2.0 ** emin, big, -big]
        if recipe == "special":
            table += [np.inf, -np.inf]
        pick = (r[3] % np.uint64(20)) == 0                     # about 5% specials
        which = _uniform_int(r[3] >> np.uint64(8), 0, len(table) - 1)
        v = np.where(pick, np.array(table)[which], v)
    nan = np.isnan(v)
    x = np.where(nan, 0.0, v).astype(_DT[dtype])
    back = x.astype(np.float64)
    if not (back == np.where(nan, 0.0, v)).all():  # the construction above is exact by design
        raise AssertionError(f"make_input: values not exact in {dtype}")
    if nan.any():
        u = x.view(np.uint32 if dtype == "float32" else np.uint16)
        qnan = {"float32": 0x7FC00000, "bfloat16": 0x7FC0, "float16": 0x7E00}[dtype]
        sbit = {"float32": 0x80000000, "bfloat16": 0x8000, "float16": 0x8000}[dtype]
        neg = (r[0] >> np.uint64(63)) == 1
        u[nan] = np.where(neg, qnan | sbit, qnan)[nan].astype(u.dtype)
    return x.reshape(shape)


def _supplied_amax(x: np.ndarray, how: str, row_scaled: bool, seed: int) -> np.ndarray:
    """A caller's amax derived from max|x| (NaN ignored) by an exact power-of-two factor or set to 0."""
    xf = np.abs(x.astype(np.float32).reshape(-1, x.shape[-1] if x.ndim else 1))
    xf = np.where(np.isnan(xf), np.float32(0), xf)
    a = xf.max(axis=1, initial=np.float32(0)) if row_scaled else np.array([xf.max(initial=np.float32(0))])
    if how == "exact":
        out = a
    elif how == "half":       # smaller than the data: block scales saturate
        out = a * np.float32(0.5)
    elif how == "double":
        out = a * np.float32(2.0)
    elif how == "zero":
        out = np.zeros_like(a)
    elif how == "random":     # unrelated positive values
        raw = splitmix64(seed ^ 0xA3A3, a.size)
        out = (1.0 + (raw & np.uint64(7)).astype(np.float64) / 8) * np.exp2(_uniform_int(raw >> np.uint64(8), -4, 6))
    else:
        raise ValueError(f"amax recipe: {how!r}")
    return np.asarray(out, dtype=np.float32).reshape(-1)


# ---------------------------------------------------------------------------------------------
# the vector set

@dataclass(frozen=True)
class VectorSpec:
    name: str
    fmt: str
    shape: tuple
    dtype: str
    recipe: str
    seed: int
    options: tuple = ()          # quantize keyword arguments (amax excluded), as (key, value) pairs
    amax: str | None = None      # supplied-amax recipe (NVFP4): exact / half / double / zero / random
    dequant: str = "float32"     # dtype of the dequantize outputs stored for this vector


MX_FORMATS = ("mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4_e2m1")
DTYPES = ("float32", "bfloat16", "float16")
AXES = ("rowwise", "columnwise", "both")
SHAPES = ((1, 16), (3, 48), (130, 96), (16, 34), (64, 64), (2, 3, 40), (256, 32), (1, 1), (5, 7), (34, 130))
RHT_SHAPES = ((16, 34), (128, 96), (32, 48), (48, 16), (2, 8, 34))


def _fp4_ok(shape, axis: str) -> bool:
    M = math.prod(shape[:-1])
    K = shape[-1]
    return (axis == "columnwise" or K % 2 == 0) and (axis == "rowwise" or M % 2 == 0)


def _build_specs() -> tuple:
    specs = []
    counter = [0]

    def add(fmt, shape, dtype, recipe, amax=None, **options):
        i = counter[0]
        counter[0] += 1
        o = dict(options)
        parts = [f"v{i:03d}", fmt, dtype, "x".join(map(str, shape)), recipe, o.get("axis", "rowwise")]
        if o.get("scale_layout") == "swizzled":
            parts.append("swizzled")
        if "scale_rule" in o:
            parts.append(o["scale_rule"])
        parts += [k for k in ("tile_2d", "row_scaled") if o.get(k)]
        if o.get("rht"):
            parts.append(f"rht{o.get('rht_sign_mask', 0xD7E8):04x}")
        if o.get("rounding") == "stochastic":
            parts.append(f"sr{o.get('seed', 0):x}")
        if amax:
            parts.append(f"amax-{amax}")
        specs.append(VectorSpec("_".join(parts), fmt, tuple(shape), dtype, recipe, 1000 + i, tuple(options.items()),
                                amax, DTYPES[i % 3]))

    k = 0
    # MX: every format x rule x dtype x axis x layout, shapes and recipes rotating
    for fmt in MX_FORMATS:
        for rule in ("rceil", "floor"):
            for dtype in DTYPES:
                for axis in AXES:
                    for layout in ("compact", "swizzled"):
                        shape = SHAPES[k % len(SHAPES)]
                        while fmt == "mxfp4_e2m1" and not _fp4_ok(shape, axis):
                            k += 1
                            shape = SHAPES[k % len(SHAPES)]
                        add(fmt, shape, dtype, ("normal", "wide", "tiny")[k % 3], axis=axis, scale_layout=layout,
                            scale_rule=rule)
                        k += 1
        for dtype in DTYPES:   # special values, both operands, both layouts
            add(fmt, (130, 96), dtype, "special", axis="both", scale_layout="swizzled")
            add(fmt, (34, 64), dtype, "special_finite", axis="both", scale_rule="floor")
    # MXFP4 stochastic rounding
    for i, seed in enumerate((0, 1, 0x0123456789ABCDEF, 2 ** 64 - 1)):
        add("mxfp4_e2m1", ((64, 64), (130, 96), (2, 34), (16, 34))[i], DTYPES[i % 3], ("normal", "wide")[i % 2],
            axis="both", rounding="stochastic", seed=seed)
    # NVFP4 base: dtype x axis x layout
    for dtype in DTYPES:
        for axis in AXES:
            for layout in ("compact", "swizzled"):
                shape = SHAPES[k % len(SHAPES)]
                while not _fp4_ok(shape, axis):
                    k += 1
                    shape = SHAPES[k % len(SHAPES)]
                add("nvfp4", shape, dtype, ("normal", "wide", "tiny")[k % 3], axis=axis, scale_layout=layout)
                k += 1
        add("nvfp4", (130, 96), dtype, "special", axis="both")
        add("nvfp4", (64, 64), dtype, "special_finite", axis="both", scale_layout="swizzled")
        # supplied amax
        for how in ("exact", "half", "double", "zero"):
            add("nvfp4", (34, 64), dtype, "normal", amax=how, axis="both")
        # 2D blocks
        add("nvfp4", (130, 96), dtype, "wide", axis="both", tile_2d=True)
        add("nvfp4", (16, 34), dtype, "normal", axis="both", tile_2d=True, scale_layout="swizzled")
        # row-scaled
        add("nvfp4", (34, 64), dtype, "wide", axis="both", row_scaled=True)
        add("nvfp4", (130, 48), dtype, "special_finite", axis="rowwise", row_scaled=True)
        add("nvfp4", (34, 64), dtype, "normal", amax="random", axis="both", row_scaled=True, scale_layout="swizzled")
    # RHT (bfloat16 only)
    for i, mask in enumerate((0xD7E8, 0, 0x1234, 0xFFFF)):
        for j, axis in enumerate(("columnwise", "both")):
            add("nvfp4", RHT_SHAPES[(2 * i + j) % len(RHT_SHAPES)], "bfloat16", ("normal", "wide")[j], axis=axis,
                rht=True, rht_sign_mask=mask)
    add("nvfp4", (128, 96), "bfloat16", "special_finite", axis="both", rht=True)
    add("nvfp4", (32, 48), "bfloat16", "normal", amax="half", axis="both", rht=True)
    add("nvfp4", (32, 48), "bfloat16", "wide", axis="both", rht=True, tile_2d=True)
    # NVFP4 stochastic rounding
    for i, seed in enumerate((0, 1, 0x0123456789ABCDEF, 2 ** 64 - 1, 2 ** 32)):
        add("nvfp4", ((64, 64), (130, 96), (2, 34), (16, 34), (4, 2, 16))[i], DTYPES[i % 3],
            ("normal", "wide")[i % 2], axis="both", rounding="stochastic", seed=seed)
    add("nvfp4", (32, 48), "bfloat16", "normal", axis="both", rounding="stochastic", seed=7, rht=True)
    add("nvfp4", (32, 64), "float32", "normal", axis="both", rounding="stochastic", seed=7, tile_2d=True)
    # N-D and empty shapes
    for fmt in ("mxfp8_e4m3", "mxfp6_e3m2", "mxfp4_e2m1", "nvfp4"):
        add(fmt, (2, 3, 4, 32), "bfloat16", "normal", axis="both")
        add(fmt, (0, 32), "float32", "normal", axis="both", scale_layout="swizzled")
        add(fmt, (4, 0), "float16", "normal", axis="both")
    return tuple(specs)


SPECS: tuple = _build_specs()


def spec_kwargs(spec: VectorSpec, x: np.ndarray | None = None) -> dict:
    """Keyword arguments of quantize for `spec` (fmt included; amax built from x when supplied)."""
    kw = {"fmt": spec.fmt, **dict(spec.options)}
    if spec.amax is not None:
        if x is None:
            x = make_input(spec.shape, spec.dtype, spec.recipe, spec.seed)
        kw["amax"] = _supplied_amax(x, spec.amax, bool(kw.get("row_scaled")), spec.seed)
    return kw


# ---------------------------------------------------------------------------------------------
# outputs

def output(q, key: str, dequantize=None):
    """One output of a quantize result: "rowwise.data" / ".scales" / ".amax" (also columnwise),
    or "dequantize.<operand>.<dtype>" computed with `dequantize` (default: the reference's)."""
    if key.startswith("dequantize."):
        _, operand, dtype = key.split(".")
        if dequantize is None:
            from .api import dequantize
        return dequantize(q, dtype=dtype, operand=operand)
    operand, field = key.split(".")
    op = getattr(q, operand)
    return None if op is None else getattr(op, field)


def output_keys(spec: VectorSpec) -> list:
    from ..formats import FORMATS
    axis = dict(spec.options).get("axis", "rowwise")
    keys = []
    for operand in ("rowwise", "columnwise"):
        if axis in (operand, "both"):
            keys += [f"{operand}.data", f"{operand}.scales"]
            if FORMATS[spec.fmt].is_nvfp4:
                keys.append(f"{operand}.amax")
            keys.append(f"dequantize.{operand}.{spec.dequant}")
    return keys


def compute_outputs(spec: VectorSpec, quantize=None, dequantize=None, to_numpy=None):
    """(x, {key: ndarray}) for one vector with the given callables (default: the reference)."""
    if quantize is None:
        from .api import quantize
    to_numpy = to_numpy or (lambda a: a)
    x = make_input(spec.shape, spec.dtype, spec.recipe, spec.seed)
    kw = spec_kwargs(spec, x)
    fmt = kw.pop("fmt")
    q = quantize(x, fmt, **kw)
    out = {}
    for key in output_keys(spec):
        with np.errstate(over="ignore", invalid="ignore"):
            v = output(q, key, dequantize)
        out[key] = None if v is None else np.ascontiguousarray(np.asarray(to_numpy(v)))
    return x, out


def _sha(a: np.ndarray) -> bytes:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).digest()


def _spec_json() -> str:
    return json.dumps([asdict(s) for s in SPECS], sort_keys=True, default=list)


def build_store(specs=SPECS) -> dict:
    """Compute every vector with the reference; returns the arrays written to vectors.npz."""
    meta, digests, blob, xsha = [], [], [], []
    pos = 0
    for ci, spec in enumerate(specs):
        x, outs = compute_outputs(spec)
        xsha.append(np.frombuffer(_sha(x), dtype=np.uint8))
        total = sum(a.nbytes for a in outs.values())
        for key, a in outs.items():
            full = total <= FULL_CASE_BYTES or a.nbytes <= FULL_KEY_BYTES
            meta.append({"case": ci, "key": key, "dtype": str(a.dtype), "shape": list(a.shape),
                         "offset": pos if full else -1, "nbytes": int(a.nbytes)})
            digests.append(np.frombuffer(_sha(a), dtype=np.uint8))
            if full:
                blob.append(np.frombuffer(a.tobytes(), dtype=np.uint8))
                pos += a.nbytes
    return {
        "format_version": np.array(FORMAT_VERSION),
        "spec_sha256": np.array(hashlib.sha256(_spec_json().encode()).hexdigest()),
        "case_names": np.array([s.name for s in specs]),
        "case_x_sha256": np.stack(xsha) if xsha else np.zeros((0, 32), np.uint8),
        "meta": np.array(json.dumps(meta)),
        "sha256": np.stack(digests) if digests else np.zeros((0, 32), np.uint8),
        "blob": np.concatenate(blob) if blob else np.zeros(0, np.uint8),
    }


def regenerate(path: Path | str = DATA_PATH) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **build_store())
    return path


def load_store(path: Path | str = DATA_PATH) -> dict:
    with np.load(path, allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


# ---------------------------------------------------------------------------------------------
# the vectors for other backends

_ML = {"bfloat16": np.dtype(ml_dtypes.bfloat16)}


def _dtype(name: str) -> np.dtype:
    return _ML.get(name) or np.dtype(name)


@dataclass(frozen=True)
class Expected:
    """One expected output: dtype, shape, sha256 of its bytes, and the bytes when stored whole."""

    dtype: str
    shape: tuple
    sha256: str
    data: np.ndarray | None = None

    def check(self, got) -> str | None:
        """None when `got` (a NumPy array) has this dtype, shape and exact bytes; else what differs."""
        if got is None:
            return "missing (None)"
        got = np.ascontiguousarray(np.asarray(got))
        if str(got.dtype) != self.dtype or tuple(got.shape) != self.shape:
            return f"dtype/shape {got.dtype} {tuple(got.shape)}, expected {self.dtype} {self.shape}"
        if hashlib.sha256(got.tobytes()).hexdigest() == self.sha256:
            return None
        if self.data is not None:
            return byte_diff(got, self.data) or "sha256 differs"
        return "sha256 differs (regenerate the reference output in memory with vectors.compute_outputs to see where)"


@dataclass(frozen=True)
class VectorCase:
    name: str
    x: np.ndarray
    kwargs: dict          # quantize(x, **kwargs): fmt, axis, scale_layout, ..., amax (NumPy) when supplied
    expected: dict        # key -> Expected
    spec: VectorSpec


def iter_cases(path: Path | str = DATA_PATH, formats=None):
    """Yield a VectorCase(name, x, kwargs, expected) per vector, expected outputs from the stored file."""
    store = load_store(path)
    meta = json.loads(str(store["meta"]))
    names = [str(n) for n in store["case_names"]]
    by_case: dict[int, dict] = {}
    for m, d in zip(meta, store["sha256"]):
        data = None
        if m["offset"] >= 0:
            raw = store["blob"][m["offset"]:m["offset"] + m["nbytes"]]
            data = raw.view(_dtype(m["dtype"])).reshape(m["shape"])
        by_case.setdefault(m["case"], {})[m["key"]] = Expected(m["dtype"], tuple(m["shape"]), bytes(d).hex(), data)
    specs = {s.name: s for s in SPECS}
    for ci, name in enumerate(names):
        spec = specs.get(name)
        if spec is None:
            raise ValueError(f"vectors: stored case {name!r} is not in SPECS; regenerate the vectors file")
        if formats is not None and spec.fmt not in formats:
            continue
        x = make_input(spec.shape, spec.dtype, spec.recipe, spec.seed)
        if bytes(store["case_x_sha256"][ci]) != _sha(x):
            raise ValueError(f"vectors: the regenerated input of {name!r} differs from the stored one")
        yield VectorCase(name, x, spec_kwargs(spec, x), by_case.get(ci, {}), spec)


def run_all(quantize=None, dequantize=None, to_numpy=None, formats=None, path: Path | str = DATA_PATH) -> list:
    """Check every vector: two records per vector, (format, "quantize" | "dequantize", name, passed, detail)."""
    if quantize is None:
        from .api import quantize
    to_numpy = to_numpy or (lambda a: a)
    out = []
    for case in iter_cases(path, formats):
        kw = dict(case.kwargs)
        fmt = kw.pop("fmt")
        try:
            q = quantize(case.x, fmt, **kw)
        except Exception as e:
            out.append((fmt, "quantize", case.name, False, f"raised {type(e).__name__}: {e}"))
            continue
        for op in ("quantize", "dequantize"):
            problems = []
            for key, exp in case.expected.items():
                if key.startswith("dequantize.") != (op == "dequantize"):
                    continue
                try:
                    with np.errstate(over="ignore", invalid="ignore"):
                        got = output(q, key, dequantize)
                    p = exp.check(None if got is None else to_numpy(got))
                except Exception as e:
                    p = f"raised {type(e).__name__}: {e}"
                if p:
                    problems.append(f"{key}: {p}")
            out.append((fmt, op, case.name, not problems, "; ".join(problems) or "bit-identical"))
    return out


def compare_stores(a: dict, b: dict) -> list:
    """Differences between two stores (lists of strings; empty when identical in content)."""
    diffs = []
    for k in ("format_version", "spec_sha256"):
        if str(a[k]) != str(b[k]):
            diffs.append(f"{k}: {a[k]} != {b[k]}")
    na, nb = [str(n) for n in a["case_names"]], [str(n) for n in b["case_names"]]
    if na != nb:
        diffs.append(f"case names differ: {sorted(set(na) ^ set(nb))[:10]}")
        return diffs
    for i, n in enumerate(na):
        if not np.array_equal(a["case_x_sha256"][i], b["case_x_sha256"][i]):
            diffs.append(f"{n}: input differs")
    ma, mb = json.loads(str(a["meta"])), json.loads(str(b["meta"]))
    if len(ma) != len(mb):
        diffs.append(f"number of outputs {len(ma)} != {len(mb)}")
        return diffs
    for i, (x, y) in enumerate(zip(ma, mb)):
        where = f"{na[x['case']]} {x['key']}"
        if x != y:
            diffs.append(f"{where}: metadata {x} != {y}")
        elif not np.array_equal(a["sha256"][i], b["sha256"][i]):
            diffs.append(f"{where}: bytes differ")
    if not diffs and not np.array_equal(a["blob"], b["blob"]):
        diffs.append("stored bytes differ")
    return diffs


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m fp4kit.reference.vectors",
                                description="Conformance vectors of the fp4kit reference.")
    p.add_argument("--regenerate", action="store_true", help="rewrite the vectors file from the reference")
    p.add_argument("--out", default=str(DATA_PATH), help=f"file to write or check (default {DATA_PATH})")
    p.add_argument("--list", action="store_true", help="list the vectors")
    a = p.parse_args(argv)
    if a.list:
        for s in SPECS:
            print(s.name)
        return 0
    if a.regenerate:
        path = regenerate(a.out)
        print(f"wrote {len(SPECS)} vectors to {path} ({path.stat().st_size} bytes)")
        return 0
    diffs = compare_stores(load_store(a.out), build_store())
    for d in diffs[:50]:
        print(d)
    print(f"{len(SPECS)} vectors: " + ("identical to the stored file" if not diffs else f"{len(diffs)} differences"))
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())

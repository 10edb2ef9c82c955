#!/usr/bin/env python3
"""Does the planned grouped launcher issue what the imperative one before it issued? (CPU only.)

Loads fp4kit/_cuda_grouped.py as it was at git revision REV (default 9eebd4f, the last one before
fp4kit._cuda_grouped.build_group_quantize_plan) beside the current one, runs both grouped quantize
launchers through a fake CuPy that records every allocation and kernel launch, over every format,
axis, scale layout, input dtype, recipe (rht, row_scaled, tile_2d, stochastic rounding), dims kind
(device dims of kinds same / varying_first with the last dims written by the metadata launch,
varying_last with an int M, varying_both; host dims), a caller's amax or none, dbias, and sizes that
reach every kernel choice (the rows kernels, the one-tile kernel with and without staged compact
scales, the 128 x 128 squares, the persistent kernels), and reports the cases that differ.

Arrays are named by their first appearance as a kernel argument, so the two launchers may allocate
in another order; an argument is (array, byte offset), whether it was passed as a slice or as a
pointer; each array's allocation (empty / zeros / full value / host values, shape, dtype) and the
results (by name) must match too. The old launcher's caller uploaded host dims (one array, first
then last) and allocated the uninitialised last dims of device-dims kind varying_first and the
filled first dims of varying_last; the trace of the old side does the same before the launcher.
Since the thirty-fifth session the metadata launch copies a caller's device dims into the plan's
own buffers, which every later launch and the result read: the old side's trace passes such
copies (new empty arrays) as its device dims, and the new side's group_meta compares without its
two trailing source arguments (checked to be the caller's arrays or null).
Since the forty-third session the columnwise amaxes of the statistics pass start 16 bytes on from
the rowwise ones (results at addresses JAX accepts): the old side gets the same layout by an edit
of its source (OLD_EDITS). Since the forty-fourth session host dims start their last dims 16 bytes
on too (after a padding int64 when G is odd): the old side's upload has the same gap. Since the
fifty-fourth session the MXFP6 one-tile kernel reads the bands' descriptors from 16-bit input: the
old side takes the same rule by an edit (OLD_EDITS).
Since the fifty-eighth session plain one-K rowwise calls with rows-kernel blocks of at most 64 rows
take group_quantize_rowsd (each member tiled on its own, from the band descriptors): those cases are
compared with fp4kit._cuda_grouped.ROWS_DIRECT off, i.e. with the kernel they replaced. Since the
sixtieth session row-scaled NVFP4 with one K computes its amaxes in group_amax_rows_cols: compared
with AMAX_ROWS_COLS off (group_stats), and NVFP4's extended recipes with one K (but stochastic
rounding alone) take group_quantize1_f5_d<D>_ext / _rht / _rs / _t2d: compared with ONE_TILE_EXT off; NVFP4 rht with one
K computes its amaxes in group_amax_plain_rht_bf16: compared with AMAX_PLAIN_RHT off.
Output poisoning is off (the planned launcher poisons every EMPTY buffer when it is on, the old
one did not poison its metadata buffers).

    python scripts/group_plan_equivalence.py [REV]
"""
import itertools
import os
import sys
import types

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
from _git_module import module_at  # noqa: E402  (scripts/)
from fp4kit import _cuda, _plan  # noqa: E402
from fp4kit import _cuda_grouped as new  # noqa: E402
from fp4kit._grouped_device import _bounds  # noqa: E402
from fp4kit._grouped_views import grouped_layout  # noqa: E402
from fp4kit._validate import group_options  # noqa: E402
from fp4kit.formats import FORMATS  # noqa: E402

REV = sys.argv[1] if len(sys.argv) > 1 else "9eebd4f"
def _amax_store_before(amax, rows, cols):
    """fp4kit._cuda.amax_store as it was at 9eebd4f (the old launcher imports it; it was removed
    with the launcher): one nvfp4_amax_out launch into new (n,) float32 copies of the caller's amax."""
    b = _plan._Builder()
    n = int(amax.size)
    rs = b.buffer((n,), "float32", _plan.EMPTY) if rows else None
    cs = b.buffer((n,), "float32", _plan.EMPTY) if cols else None
    _plan._amax_out(b, _plan._AMAX, n if rows or cols else 0, 0x7FFFFFFF, rs, cs, _cuda._sm_count())
    bufs = _cuda.run_plan(b.plan((rs, cs)), None, amax)
    return tuple(None if o is None else bufs[o] for o in (rs, cs))


if not hasattr(_cuda, "amax_store"):
    _cuda.amax_store = _amax_store_before
# the forty-third session's layout of the statistics buffer: columnwise amaxes from the next 16 bytes
# and since the fifty-fourth session MXFP6 from 16-bit input reads the bands' descriptors in the
# one-tile kernel, as the packed formats do (new._band_descriptors), and its "both" takes the
# _both / _boths kernels
OLD_EDITS = (("        c0 = (na + nc + 1) & ~1\n",
              "        ca = -(-na // 4) * 4\n        c0 = (ca + nc + 1) & ~1\n"),
             ("a_col = col_t = zbuf[na:na + nc]", "a_col = col_t = zbuf[ca:ca + nc]"),
             ("descriptors=one and f.packed,", "descriptors=one and _band_descriptors(f, input_dtype),"),
             ("            if f.packed:\n                band_arg = band[_band_desc_offset(",
              "            if _band_descriptors(f, input_dtype):\n                band_arg = band[_band_desc_offset("),
             ("            both = f.packed and opts.want_rowwise",
              "            both = _band_descriptors(f, input_dtype) and opts.want_rowwise"))
old = module_at(REPO, REV, "fp4kit/_cuda_grouped.py", "fp4kit._cuda_grouped_before", edits=OLD_EDITS)
old._band_descriptors = new._band_descriptors

BASE = 1 << 44          # fake device addresses: BASE * allocation number (+ offsets)
EVENTS = []
ALLOCS = {}             # allocation number -> (kind, shape, dtype, value)


class FakeArray:
    count = 0

    def __init__(self, shape, dtype, base=None, off=0):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.size = int(np.prod(self.shape))
        if base is None:
            FakeArray.count += 1
            self.id = FakeArray.count
        else:
            self.id = base.id
        self.off = off
        self.data = types.SimpleNamespace(ptr=BASE * self.id + off)
        self.flags = types.SimpleNamespace(c_contiguous=True)

    def __getitem__(self, sl):
        start = sl.start or 0
        stop = self.shape[0] if sl.stop is None else sl.stop
        return FakeArray((stop - start,), self.dtype, self, self.off + start * self.dtype.itemsize)

    def reshape(self, *shape):
        return FakeArray((self.size,), self.dtype, self, self.off)

    def view(self, dtype):
        return FakeArray(self.shape, dtype, self, self.off)

    def fill(self, v):
        EVENTS.append(("fill", self.id, v))

    def astype(self, dtype):
        a = _new_alloc("astype", self.shape, dtype, self.id)
        EVENTS.append(("astype", self.id, a.id))
        return a


def _new_alloc(kind, shape, dtype, value=None):
    a = FakeArray(shape, dtype)
    ALLOCS[a.id] = (kind, a.shape, str(a.dtype), value)
    return a


def _norm(a):
    if isinstance(a, FakeArray):
        return ("arr", a.id, a.off)
    v = int(a)
    if v >= BASE:
        return ("arr", v // BASE, v % BASE)
    return (type(a).__name__, v)


def _launcher(module, kernel):
    def launch(grid, block, args):
        EVENTS.append(("launch", module, kernel, tuple(grid), tuple(block), tuple(_norm(a) for a in args)))
    return launch


cp = types.SimpleNamespace(
    uint8=np.uint8, int32=np.int32, int64=np.int64, float32=np.float32, float64=np.float64,
    empty=lambda shape, dtype: _new_alloc("empty", shape if isinstance(shape, tuple) else (shape,), dtype),
    zeros=lambda shape, dtype: _new_alloc("zeros", shape if isinstance(shape, tuple) else (shape,), dtype),
    full=lambda shape, v, dtype: _new_alloc("full", shape, dtype, int(v)),
    asarray=lambda a: _new_alloc("host", np.asarray(a).shape, np.asarray(a).dtype, tuple(int(v) for v in np.asarray(a).reshape(-1))),
    ascontiguousarray=lambda a, dtype=None: a,
)
cp.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDevice=lambda: 0))

SM = 132
for m in (old, new, _cuda):
    m._cp = lambda: cp
    m._fn = _launcher
    m._poison = False
old._empty = _cuda._empty
old._sm_count = lambda: SM
old._resident_per_sm = lambda fn, fallback: 3
new._sm_count_of = lambda dev: SM
new._resident_per_sm = lambda fn, fallback: 3
_cuda._SM_COUNTS.clear()
_cuda._SM_COUNTS[0] = SM


def canonical(events, results):
    """Launches with arrays renamed by first appearance; allocations of the named arrays; results."""
    names = {}

    def rename(a):
        if a[0] != "arr":
            return a
        if a[1] not in names:
            names[a[1]] = len(names)
        return ("arr", names[a[1]], a[2])

    out = []
    for e in events:
        if e[0] == "launch" and e[2] == "group_meta" and len(e[5]) == 22:
            # the caller's device dims, which group_meta copies into the plan's fd / ld since the
            # thirty-fifth session (the old side's trace passes those copies as its dims): only the
            # two source arguments are new, and they are the caller's arrays or null
            for a in e[5][20:]:
                assert a == ("uint64", 0) or ALLOCS[a[1]][0] in ("input_fd", "input_ld"), a
            e = e[:5] + (e[5][:20],)
        if e[0] == "launch":
            # group_quantize1_f<4|5>_d<D>_boths is group_quantize1_f<F>_d<D>_both with swizzled scales and the
            # rceil rule as compile-time facts (same parameters, same bytes): it compares as _both
            k = e[2][:-1] if e[2].startswith("group_quantize1_") and e[2].endswith("_boths") else e[2]
            # group_quantize_f<4|5>_d<D>_sr (thirty-eighth session) is the full persistent kernel with
            # every option but stochastic rounding compiled out (same parameters, same bytes)
            k = k[:-3] if k.startswith("group_quantize_f") and k.endswith("_sr") else k
            out.append(e[:2] + (k,) + e[3:5] + (tuple(rename(a) for a in e[5]),))
        elif e[0] == "astype":
            out.append(("astype", rename(("arr", e[1], 0))[1], rename(("arr", e[2], 0))[1]))
        else:
            out.append((e[0], rename(("arr", e[1], 0))[1]) + e[2:])
    res = {k: (None if v is None else rename(_norm(v))) for k, v in sorted(results.items()) if v is not None}
    allocs = {names[i]: ALLOCS[i] for i in names if i in ALLOCS}
    # an astype's source by its name too (raw numbers shift with the new side's unnamed inputs)
    allocs = {k: (v[:3] + (names.get(v[3], v[3]),) if v[0] == "astype" else v) for k, v in allocs.items()}
    return out, allocs, res


def trace(which, x_shape, dtype, opts, kind, first, last, amax_n, dbias, G, n_el, caps, Kshared, rows_total):
    EVENTS.clear()
    ALLOCS.clear()
    FakeArray.count = 0
    x = _new_alloc("input", x_shape, np.uint16 if dtype == "bfloat16" else dtype)
    amax = _new_alloc("input_amax", (amax_n,), np.float32) if amax_n is not None else None
    host = first is not None
    fill_last = kind == "varying_first" and not host
    if which == "old":
        if host:
            # the forty-fourth session's layout: the last dims from the next 16 bytes (G odd: a gap)
            d = cp.asarray(np.array(list(first) + [0] * (G & 1) + list(last), np.int64))
            fd, ld = d[:G], d[G + (G & 1):]
        else:   # device dims: the copies the new launcher's group_meta makes of the caller's arrays
            if kind == "varying_last":
                fd = cp.full((G,), 5, np.int64)
            else:
                fd = _cuda._empty((G,), np.int64)
            ld = _cuda._empty((G,), np.int64) if fill_last else (
                None if kind == "varying_first" else _cuda._empty((G,), np.int64))
        res = old.group_quantize(x, dtype, opts, fd, ld, G, n_el, caps, amax, dbias=dbias, Kshared=Kshared,
                                 rows_total=rows_total, fill_last=fill_last)
    else:
        if host:
            fd = ld = None
            dims = ("host", tuple(first), tuple(last))
        else:
            fd = None if kind == "varying_last" else _new_alloc("input_fd", (G,), np.int64)
            ld = None if kind == "varying_first" else _new_alloc("input_ld", (G,), np.int64)
            dims = ("dev", 5 if kind == "varying_last" else None, fill_last)
        res = new.group_quantize(x, dtype, opts, fd, ld, G, n_el, caps, amax, dbias=dbias, Kshared=Kshared,
                                 rows_total=rows_total, dims=dims)
    return canonical(list(EVENTS), dict(res))


# (kind, host dims?, first dims, last dims): small members, and MoE-like sizes that reach the
# size-dependent kernel choices (staged compact scales, squares); K % 128 == 0 or not
SHAPES = [
    ("varying_first", [32, 0, 64], 128), ("varying_first", [16, 48], 96), ("varying_first", [130, 2, 256], 64),
    ("varying_first", [4096, 0, 8192, 20480, 128], 7168), ("varying_first", [6000, 2000, 3000], 4096),
    ("varying_first", [100, 200], 0), ("varying_first", [0, 0], 64),
    ("same", [64] * 3, 256), ("same", [8192] * 8, 7168),
    ("varying_last", [5] * 3, [64, 0, 32]), ("varying_both", [32, 16, 64], [64, 32, 0]),
]
n = bad = moved = direct = amax_rc = one_ext = rht1 = 0
kernels = set()
for fmt in FORMATS:
    for (kind, first, last), host, axis, layout, dtype, rec, given, dbias in itertools.product(
            SHAPES, (False, True), ("rowwise", "columnwise", "both"), ("compact", "swizzled"),
            ("float32", "bfloat16", "float16"), ("plain", "rht", "row_scaled", "tile_2d", "stochastic"),
            (False, True), (False, True)):
        f = FORMATS[fmt]
        if kind in ("varying_first", "same"):
            K = last
            last = [K] * len(first)
        if kind == "varying_last" and host:
            first = [5] * len(last)
        G = len(first)
        if rec == "rht" and (not f.is_nvfp4 or dtype != "bfloat16" or axis == "rowwise"
                             or any(m % 16 for m in first)):
            continue
        if rec in ("row_scaled", "tile_2d") and not f.is_nvfp4:
            continue
        if rec == "stochastic" and f.name not in ("nvfp4", "mxfp4_e2m1"):
            continue
        if given and (not f.is_nvfp4 or rec == "row_scaled"):
            continue
        if dbias and (kind not in ("same", "varying_first") or rec != "plain" or layout == "swizzled"):
            continue
        if f.packed and any((m * k) % 2 for m, k in zip(first, last)):
            continue
        kw = dict(axis=axis, scale_layout=layout, seed=9)
        if rec != "plain" and rec != "stochastic":
            kw[rec] = True
        if rec == "stochastic":
            kw["rounding"] = "stochastic"
        try:
            opts, db = group_options(dtype, fmt, kw, dbias)
        except (TypeError, ValueError):
            continue
        if kind in ("varying_first", "same"):
            Kshared, rows_total, x_shape = last[0], sum(first), (sum(first), last[0])
            n_el = sum(first) * last[0]
        else:
            Kshared, rows_total = None, None
            n_el = sum(m * k for m, k in zip(first, last))
            x_shape = (n_el,)
        Mshared = first[0] if kind == "varying_last" else None
        if host:
            lay = grouped_layout(f, opts, first, last)
            caps = {"srow": lay.scale_offsets_rowwise[-1], "scol": lay.scale_offsets_columnwise[-1],
                    "arow": lay.amax_offsets_rowwise[-1], "acol": lay.amax_offsets_columnwise[-1]}
        else:
            caps = _bounds(kind, f, opts, G, n_el, Mshared, Kshared)
        amax_n = G if given else None
        _plan.clear_plans()
        args = (x_shape, dtype, opts, kind, first if host else None, last if host else None, amax_n, db, G, n_el,
                caps, Kshared, rows_total)
        a = trace("old", *args)
        b = trace("new", *args)
        kernels |= {e[2] for e in b[0] if e[0] == "launch"}
        if any(e[0] == "launch" and e[2].startswith("group_quantize1_") and e[2].endswith("_sr") for e in b[0]):
            # stochastic rounding alone with one K takes the one-tile kernel since the thirty-eighth
            # session (band descriptors, another grid): not comparable with the old launcher's
            # persistent kernel; the GPU tests check its bytes against the reference
            moved += 1
            continue
        # launches that replaced the old launcher's, compared with the old ones (the switch off); the
        # GPU tests check their bytes:
        # - plain one-K rowwise with blocks of at most 64 rows takes group_quantize_rowsd since the
        #   fifty-eighth session (members tiled one by one: another grid and the band descriptors);
        # - row-scaled NVFP4 with one K computes its amaxes in group_amax_rows_cols since the
        #   sixtieth session (group_stats before);
        # - NVFP4's extended recipes but stochastic rounding alone take the one-tile kernels
        #   group_quantize1_f5_d<D>_ext / _rht / _rs / _t2d with one K since the sixtieth session
        #   (group_quantize_f5_d<D>);
        # - NVFP4 rht with one K computes its amaxes in group_amax_plain_rht_bf16 since the sixtieth
        #   session (group_stats before)
        switches = [sw for sw, hit in (("ROWS_DIRECT", lambda k: k.startswith("group_quantize_rowsd")),
                                       ("AMAX_ROWS_COLS", lambda k: k.startswith("group_amax_rows_cols")),
                                       ("AMAX_PLAIN_RHT", lambda k: k == "group_amax_plain_rht_bf16"),
                                       ("ONE_TILE_EXT", lambda k: k.startswith("group_quantize1_")
                                        and k.endswith(("_ext", "_rht", "_rs", "_t2d"))))
                    if any(e[0] == "launch" and hit(e[2]) for e in b[0])]
        if switches:
            direct += "ROWS_DIRECT" in switches
            amax_rc += "AMAX_ROWS_COLS" in switches
            one_ext += "ONE_TILE_EXT" in switches
            rht1 += "AMAX_PLAIN_RHT" in switches
            for sw in switches:
                setattr(new, sw, False)
            try:
                _plan.clear_plans()
                b = trace("new", *args)
            finally:
                for sw in switches:
                    setattr(new, sw, True)
        n += 1
        if a != b:
            bad += 1
            if bad <= 3:
                print("differs:", fmt, kind, "host" if host else "device", first, last, dtype, kw, "amax" if given else "",
                      "dbias" if dbias else "")
                for e1, e2 in itertools.zip_longest(a[0], b[0]):
                    print("   ", "==" if e1 == e2 else "!=", e1, "|", e2)
                if a[1] != b[1]:
                    print("    allocations:", a[1], "|", b[1])
                if a[2] != b[2]:
                    print("    results:", a[2], "|", b[2])
print(f"group_quantize: {n} cases, {bad} with different traces ({moved} more with stochastic rounding and one K "
      f"run group_quantize1_..._sr, not compared; {direct} run group_quantize_rowsd, compared with ROWS_DIRECT "
      f"off; {amax_rc} run group_amax_rows_cols, compared with AMAX_ROWS_COLS off; {one_ext} run "
      f"group_quantize1_..._ext / _rht / _rs / _t2d, compared with ONE_TILE_EXT off; {rht1} run group_amax_plain_rht_bf16, compared "
      f"with AMAX_PLAIN_RHT off); {len(kernels)} kernels launched: "
      + ", ".join(sorted({k.split('_f')[0] if '_f' in k else k for k in kernels})))
sys.exit(1 if bad or not n else 0)

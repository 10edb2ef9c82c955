"""The comparator: byte-for-byte comparison of two quantized results, with every difference classified.

``fp4kit.compare(got, expected, x=None)`` takes two QuantizedTensors (or Operands, or
GroupedQuantizedTensors) whose arrays may live in any library, compares ``uint8`` views with
exact equality field by field (``rowwise.data``, ``rowwise.scales``, ``rowwise.amax``, ...) and
classifies each differing byte:

* ``nibble order swapped``     FP4 byte whose two nibbles are the expected ones, swapped;
* ``sign of zero``             +0 vs -0 element code;
* ``saturation vs NaN``        the type's max code where NaN was expected, or the reverse;
* ``rounding tie flipped``     neighbouring codes where the scaled input sits exactly on a midpoint
                               (needs ``x``); ``rounding off by one code`` otherwise;
* ``scale off by one code``    a scale byte one code away;
* ``swizzled byte misplaced``  a swizzled scale byte that belongs to another (row, block);
* ``padding not zero``         a non-zero byte in the padding of a swizzled scale buffer;
* ``amax differs`` / ``other``.

Structural differences come first, in ``errors``: another kind of result (a QuantizedTensor
against an Operand, say), format, shape, scale layout, operand set or group dims. Bytes are compared only where they mean the same thing: results of different
formats or shapes are not compared byte for byte, and scales in different layouts are not compared.

The report is truthy when everything matches, counts per field and per kind, and shows the first
few mismatches with their (row, block) and, when ``x`` is given, the input block (``x`` also
tells a flipped rounding tie from another off-by-one code).
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .formats import FORMATS
from .tensor import GroupedQuantizedTensor, Operand, QuantizedTensor

__all__ = ["compare", "CompareReport", "Mismatch", "to_numpy"]


def to_numpy(a):
    """Any host or device array -> NumPy (uint8 / float32 views kept)."""
    if a is None or isinstance(a, np.ndarray):
        return a
    if hasattr(a, "get") and type(a).__module__.startswith("cupy"):
        return a.get()
    mod = type(a).__module__
    if mod.startswith("torch"):
        t = a.detach()
        if str(t.dtype) == "torch.bfloat16":
            import ml_dtypes
            return t.view(__import__("torch").int16).cpu().numpy().view(ml_dtypes.bfloat16)
        return t.cpu().numpy()
    return np.asarray(a)


@dataclass
class Mismatch:
    """One differing byte (or value): where, got and expected, its class, its (row, block) and,
    when ``compare`` was given ``x``, the input block. ``==`` compares everything but the input
    block (an array, which is shown, not compared)."""

    field: str
    index: tuple           # position in the field's array
    got: int | float
    expected: int | float
    kind: str
    block: tuple | None = None      # (row, block) of the operand it belongs to
    input_block: np.ndarray | None = dataclasses.field(default=None, compare=False)

    def __str__(self) -> str:
        g = f"0x{self.got:02x}" if isinstance(self.got, (int, np.integer)) else repr(self.got)
        e = f"0x{self.expected:02x}" if isinstance(self.expected, (int, np.integer)) else repr(self.expected)
        s = f"{self.field}{list(self.index)}: got {g}, expected {e} ({self.kind})"
        if self.block is not None:
            s += f" in (row, block) {self.block}"
        if self.input_block is not None:
            s += f"\n      input block: {np.array2string(self.input_block, precision=6, max_line_width=120)}"
        return s


@dataclass
class FieldReport:
    total: int
    differing: int = 0
    kinds: Counter = field(default_factory=Counter)


@dataclass
class CompareReport:
    """What ``fp4kit.compare`` found: truthy when every byte matches.

    ``errors``: structural differences (kind of result, format, shape, layout, operand set,
    group dims);
    ``fields``: per compared field (``rowwise.data`` ...) its byte count, differing bytes and their
    kinds; ``mismatches``: the first ``max_shown`` differing bytes; ``differing``: their total.
    Prints as a summary.
    """

    fields: dict = field(default_factory=dict)
    mismatches: list = field(default_factory=list)
    errors: list = field(default_factory=list)   # structural problems (missing operand, shapes)
    max_shown: int = 8

    @property
    def ok(self) -> bool:
        return not self.errors and all(f.differing == 0 for f in self.fields.values())

    def __bool__(self) -> bool:
        return self.ok

    @property
    def differing(self) -> int:
        return sum(f.differing for f in self.fields.values())

    def __str__(self) -> str:
        if self.ok:
            head = "match: every byte equal"
        elif self.errors:
            head = f"MISMATCH: {len(self.errors)} structural difference(s), {self.differing} differing bytes"
        else:
            head = f"MISMATCH: {self.differing} differing bytes"
        lines = [head]
        lines += [f"  error: {e}" for e in self.errors]
        for name, f in self.fields.items():
            kinds = ", ".join(f"{k}: {n}" for k, n in f.kinds.most_common())
            lines.append(f"  {name:<22} {f.differing:>8} / {f.total:<10} {kinds}")
        if self.mismatches:
            lines.append(f"  first {len(self.mismatches)} mismatches:")
            lines += [f"    {m}" for m in self.mismatches]
        return "\n".join(lines)

    __repr__ = __str__

    def _add_all(self, fname: str, kinds: np.ndarray, names: tuple, mismatch: Callable[[int], Mismatch]):
        """Count the differing bytes of field `fname` at once: the j-th (row-major order) is of
        class ``names[kinds[j]]``. Classes are counted in the order they first occur; only the
        first bytes, while fewer than ``max_shown`` are kept, become Mismatch objects
        (``mismatch(j)``), so a field of millions of differing bytes costs array operations."""
        n = int(len(kinds))
        if not n:
            return
        f = self.fields[fname]
        f.differing += n
        codes, first, counts = np.unique(kinds, return_index=True, return_counts=True)
        for k in np.argsort(first, kind="stable"):
            f.kinds[names[int(codes[k])]] += int(counts[k])
        room = min(n, max(0, self.max_shown - len(self.mismatches)))
        self.mismatches += [mismatch(j) for j in range(room)]


def _as_u8(a) -> np.ndarray:
    a = to_numpy(a)
    return np.ascontiguousarray(a).view(np.uint8) if a.dtype != np.uint8 else np.ascontiguousarray(a)


_CODE_KINDS = ("sign of zero", "saturation vs NaN", "rounding tie flipped", "rounding off by one code", "other")


def _code_kinds(g: np.ndarray, e: np.ndarray, elem, scaled: np.ndarray | None = None,
                known: np.ndarray | None = None) -> np.ndarray:
    """The class (an index into _CODE_KINDS) of each pair of differing element codes `g`, `e`
    (int64 arrays, sign bit included), the first rule that holds:

    * both magnitudes zero: ``sign of zero``;
    * magnitudes {max code, NaN code} with one sign (types with NaN), or, for types without NaN,
      got the NaN code (positive max) where the scaled input is NaN: ``saturation vs NaN``;
    * one sign, magnitudes one code apart: ``rounding tie flipped`` when the scaled input's
      magnitude is exactly the midpoint of the two codes' values, else ``rounding off by one code``;
    * ``other``.

    `scaled`: each element's input times its block's scale factor (float32) where ``known``
    (default: everywhere), or None without ``x``.
    """
    sign = 1 << (elem.bits - 1)
    gm, em = g & (sign - 1), e & (sign - 1)
    same_sign = (g & sign) == (e & sign)
    zero = (gm == 0) & (em == 0) & (g != e)
    none = np.zeros(g.shape, dtype=bool)
    if scaled is not None and known is None:
        known = np.ones(g.shape, dtype=bool)
    if elem.has_nan:
        mx, nan = elem.max_code, elem.nan_code
        sat = (((gm == mx) | (gm == nan)) & ((em == mx) | (em == nan))            # {gm, em} == {mx, nan}
               & ((gm == mx) | (em == mx)) & ((gm == nan) | (em == nan)) & same_sign)
    elif scaled is not None:
        sat = (g == elem.nan_code) & (e != g) & known & np.isnan(scaled)
    else:
        sat = none
    near = same_sign & (np.abs(gm - em) == 1)
    tie = none
    if scaled is not None and near.any():
        from .reference.numerics import decode
        at = np.flatnonzero(near & known & np.isfinite(scaled))
        mid = (decode(gm[at].astype(np.uint8), elem).astype(np.float64)
               + decode(em[at].astype(np.uint8), elem).astype(np.float64)) / 2
        tie = none.copy()
        tie[at] = np.abs(scaled[at].astype(np.float64)) == mid
    return np.select([zero, sat, tie, near], [0, 1, 2, 3], default=4)


def _scale_factors(exp: Operand) -> np.ndarray:
    """float32 (rows, blocks): what the quantizer multiplied each block's inputs by before the
    element encode, rebuilt from `exp`'s own scales (and amax) with the reference's formulas:
    MX ``2^(127 - E)``; NVFP4 ``min(fp32(1 / fp32(decode(sf) * S_dec)), FLT_MAX)``."""
    from .reference.layouts import unswizzle
    from .reference.numerics import FLT_MAX, decode, e8m0_scale
    from .reference.nvfp4 import s_enc
    sc = to_numpy(exp.scales)
    if exp.scale_layout == "swizzled":
        sc = unswizzle(sc, exp.scale_shape)
    if not FORMATS[exp.format].is_nvfp4:
        return e8m0_scale(sc)
    senc = s_enc(np.asarray(to_numpy(exp.amax), dtype=np.float32)).reshape(-1, 1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        sdec = np.float32(1) / senc
        return np.minimum(np.float32(1) / (decode(sc, "e4m3") * sdec), FLT_MAX).astype(np.float32)


def _compare_operand(rep: CompareReport, name: str, got: Operand, exp: Operand, x2=None, transposed=False):
    if got.format != exp.format:
        rep.errors.append(f"{name}.format: got {got.format!r}, expected {exp.format!r} "
                          f"(codes and scales of different formats are not compared)")
        return
    if (got.rows, got.cols) != (exp.rows, exp.cols):
        rep.errors.append(f"{name}: got a {got.rows}x{got.cols} operand, expected {exp.rows}x{exp.cols} "
                          f"(bytes not compared)")
        return
    gd, ed = _as_u8(got.data), _as_u8(exp.data)
    fname = f"{name}.data"
    if gd.shape != ed.shape:
        rep.errors.append(f"{fname}: shape {gd.shape} != expected {ed.shape}")
    else:
        rep.fields[fname] = FieldReport(total=int(ed.size))
        _compare_codes(rep, fname, gd, ed, exp, x2, transposed)
    if got.scale_layout != exp.scale_layout:
        rep.errors.append(f"{name}.scale_layout: got {got.scale_layout!r}, expected {exp.scale_layout!r} "
                          f"(scales not compared)")
    else:
        _compare_scales(rep, f"{name}.scales", got, exp)
    if exp.amax is not None or got.amax is not None:
        fname = f"{name}.amax"
        ga, ea = to_numpy(got.amax), to_numpy(exp.amax)
        rep.fields[fname] = FieldReport(total=0 if ea is None else int(ea.size))
        if ga is None or ea is None or ga.shape != ea.shape:
            rep.errors.append(f"{fname}: got {None if ga is None else ga.shape}, expected {None if ea is None else ea.shape}")
        elif ga.dtype != ea.dtype:         # like codes in another dtype: not the same bytes
            rep.errors.append(f"{fname}: dtype {ga.dtype}, expected {ea.dtype} (values not compared)")
        else:
            gb, eb = ga.astype(np.float32).view(np.uint32), ea.astype(np.float32).view(np.uint32)
            diff = np.argwhere(gb != eb)

            def amax_mismatch(j: int) -> Mismatch:
                i = tuple(int(v) for v in diff[j])
                return Mismatch(fname, i, float(ga[i]), float(ea[i]), "amax differs")
            rep._add_all(fname, np.zeros(len(diff), dtype=np.int64), ("amax differs",), amax_mismatch)


def _compare_codes(rep: CompareReport, fname: str, gd: np.ndarray, ed: np.ndarray, exp: Operand, x2, transposed):
    """Count and classify the differing code bytes of one operand (same shape), vectorised.

    Packed FP4: a byte holding the expected two codes swapped is ``nibble order swapped`` (block of
    column 2c); otherwise the low nibble (column 2c) is classified when it differs, else the high
    one (column 2c + 1). Given ``x2`` (the operand's input, (cols, rows) when `transposed`), each
    classified element's input times its block's scale factor tells a flipped rounding tie."""
    f = FORMATS[exp.format]
    rr, cc = np.nonzero(gd != ed)                   # row-major, as np.argwhere
    if not len(rr):
        return
    g, e = gd[rr, cc].astype(np.int64), ed[rr, cc].astype(np.int64)
    swapped = None
    if f.packed:
        swapped = ((g >> 4) | ((g & 0xF) << 4)) == e
        low = (g & 0xF) != (e & 0xF)
        col = np.where(low | swapped, 2 * cc, 2 * cc + 1)
        sh = np.where(low, 0, 4)
        gc, ec = (g >> sh) & 0xF, (e >> sh) & 0xF
    else:
        col, gc, ec = cc, g, e
    scaled = known = None
    if x2 is not None:
        mult = _scale_factors(exp)
        known = col < exp.cols                      # a padding nibble has no input
        cl = np.minimum(col, max(exp.cols - 1, 0))
        xv = x2[cl, rr] if transposed else x2[rr, cl]
        with np.errstate(over="ignore", invalid="ignore"):
            scaled = np.asarray(xv).astype(np.float32) * mult[rr, cl // f.block]   # fp32 * fp32, as the encode
    kinds = _code_kinds(gc, ec, f.elem, scaled, known) + 1
    if swapped is not None:
        kinds[swapped] = 0
    names = ("nibble order swapped",) + _CODE_KINDS

    def code_mismatch(j: int) -> Mismatch:
        r, c = int(rr[j]), int(cc[j])
        blk = (r, int(col[j]) // f.block)
        ib = None
        if x2 is not None:
            b0, b1 = blk[1] * f.block, min((blk[1] + 1) * f.block, exp.cols)
            ib = x2[b0:b1, r] if transposed else x2[r, b0:b1]
        return Mismatch(fname, (r, c), int(g[j]), int(e[j]), names[int(kinds[j])], blk, ib)
    rep._add_all(fname, kinds, names, code_mismatch)


def _compare_scales(rep: CompareReport, fname: str, got: Operand, exp: Operand):
    from .reference.layouts import swizzled_offset
    gs, es = _as_u8(got.scales), _as_u8(exp.scales)
    if gs.shape != es.shape:
        rep.errors.append(f"{fname}: shape {gs.shape} != expected {es.shape}")
        return
    rep.fields[fname] = FieldReport(total=int(es.size))
    diff = np.argwhere(gs != es)
    if not len(diff):
        return
    flat = np.ravel_multi_index(tuple(diff.T), es.shape) if es.ndim else np.zeros(len(diff), dtype=np.int64)
    ge, ee = gs.reshape(-1), es.reshape(-1)
    g, e = ge[flat].astype(np.int64), ee[flat].astype(np.int64)
    names = ("padding not zero", "scale off by one code", "swizzled byte misplaced", "other")
    one = np.abs(g - e) == 1
    R, C = exp.scale_shape
    if exp.scale_layout == "swizzled":
        # map every flat swizzled offset back to its compact (row, block), -1 for padding
        owner = np.full(es.size, -1, dtype=np.int64)
        ii, jj = np.meshgrid(np.arange(R), np.arange(C), indexing="ij")
        owner[swizzled_offset(ii, jj, C).reshape(-1)] = (ii * C + jj).reshape(-1)
        # which byte values the real entries of each 512-byte (128x4 block) tile hold: a got byte
        # equal to another entry of its own tile is a misplaced one
        real = np.flatnonzero(owner >= 0)
        in_tile = np.zeros((max(es.size // 512, 1), 256), dtype=bool)
        in_tile[real // 512, ee[real]] = True
        o = owner[flat]
        kinds = np.select([o < 0, one, in_tile[flat // 512, g]], [0, 1, 2], default=3)

        def block(j: int) -> tuple | None:
            return None if o[j] < 0 else (int(o[j] // C), int(o[j] % C))
    else:
        kinds = np.where(one, 1, 3)

        def block(j: int) -> tuple | None:
            return (int(diff[j][0]), int(diff[j][1]))

    def scale_mismatch(j: int) -> Mismatch:
        return Mismatch(fname, tuple(int(v) for v in diff[j]), int(g[j]), int(e[j]), names[int(kinds[j])], block(j))
    rep._add_all(fname, kinds, names, scale_mismatch)


def _same_structure(rep: CompareReport, got, exp) -> bool:
    """Format and shape (grouped: format; kind, reported only) of two results, reported up front;
    False when their bytes cannot be compared at all. (Operand sets and scale layouts are reported per operand.)"""
    same = True
    if got.format != exp.format:
        rep.errors.append(f"format: got {got.format!r}, expected {exp.format!r} "
                          f"(codes and scales of different formats are not compared)")
        same = False
    if isinstance(exp, GroupedQuantizedTensor):
        if got.kind != exp.kind:           # the members' dims decide whether bytes compare
            rep.errors.append(f"kind: got {got.kind!r}, expected {exp.kind!r}")
    elif tuple(got.shape) != tuple(exp.shape):
        rep.errors.append(f"shape: got {tuple(got.shape)}, expected {tuple(exp.shape)} (bytes not compared)")
        same = False
    return same


def _compare_dbias(rep: CompareReport, got_dbias, exp_dbias, xs) -> None:
    """Grouped dbias (G, K) within SPEC's tolerance, 1e-6 * sum |x| per column of each member
    (summation order is free). With the members' inputs `xs` that is the bound used; without them,
    1e-6 times the sum of the member's finite |dbias| stands in for it. A non-finite expected
    value must match exactly (inf by sign; NaN by being NaN), and a NaN where a finite value is
    expected is a mismatch."""
    eb = to_numpy(exp_dbias).astype(np.float64)
    rep.fields["dbias"] = FieldReport(total=int(eb.size))
    gb = None if got_dbias is None else to_numpy(got_dbias)
    if gb is None or gb.shape != eb.shape:
        rep.errors.append("dbias: missing or wrong shape" if gb is None else
                          f"dbias: shape {gb.shape} != expected {eb.shape}")
        return
    g64 = gb.astype(np.float64)
    finite = np.isfinite(eb)
    with np.errstate(invalid="ignore", over="ignore"):
        if xs is not None and eb.ndim == 2 and len(xs) == eb.shape[0] and all(
                xm.ndim == 2 and xm.shape[1] == eb.shape[1] for xm in xs):
            x64 = [xm.astype(np.float64) for xm in xs]
            tol = 1e-6 * np.stack([np.where(np.isfinite(xm), np.abs(xm), 0.0).sum(axis=0) for xm in x64]) \
                if x64 else np.zeros(eb.shape)
        else:
            tol = 1e-6 * np.where(finite, np.abs(eb), 0.0).sum(axis=-1, keepdims=True)
        bad = np.where(finite, ~(np.abs(g64 - eb) <= tol + 1e-30),
                       ~((g64 == eb) | (np.isnan(g64) & np.isnan(eb))))
    diff = np.argwhere(bad)

    def dbias_mismatch(j: int) -> Mismatch:
        i = tuple(int(v) for v in diff[j])
        return Mismatch("dbias", i, float(gb[i]), float(eb[i]), "dbias beyond tolerance")
    rep._add_all("dbias", np.zeros(len(diff), dtype=np.int64), ("dbias beyond tolerance",), dbias_mismatch)


_RESULT_TYPES = (QuantizedTensor, Operand, GroupedQuantizedTensor)


def _what(obj) -> str:
    """'a QuantizedTensor', 'an Operand', 'a grouped result' (the three things compare takes)."""
    if isinstance(obj, GroupedQuantizedTensor):
        return "a grouped result"
    return "an Operand" if isinstance(obj, Operand) else "a QuantizedTensor"


def _host_input(x, what: str) -> np.ndarray:
    """`x` (a NumPy or device array) on the host, or a TypeError naming x; `what` says which
    input that is."""
    if not hasattr(x, "shape") or not hasattr(x, "dtype"):
        raise TypeError(f"x: expected {what} (a NumPy or device array), got {type(x).__name__}")
    xn = to_numpy(x)
    if type(xn) is not np.ndarray and isinstance(xn, np.ndarray):     # np.matrix, masked arrays
        from .reference.api import plain_ndarray
        xn = plain_ndarray(xn, "x")
    return _check_real(xn)


def _input(x, shape: tuple, what: str) -> np.ndarray:
    """`x` on the host as float32 of `shape`, or a TypeError / ValueError naming x."""
    xn = _host_input(x, what)
    if tuple(xn.shape) != tuple(shape):
        raise ValueError(f"x: expected shape {tuple(shape)} ({what}), got {tuple(xn.shape)}")
    return xn.astype(np.float32)


def _check_real(xn: np.ndarray) -> np.ndarray:
    """x's values as real numbers (float, int, bool; ml_dtypes floats are kind "V"), or a TypeError
    naming x: strings would fail to convert without a word about x, and complex values would lose
    their imaginary parts silently."""
    if xn.dtype.kind not in "fiubV":
        raise TypeError(f"x: expected a real-valued array (the input that was quantized), got dtype {xn.dtype}")
    return xn


def compare(got, expected, x=None, max_shown: int = 8) -> CompareReport:
    """Compare `got` with `expected` byte for byte; see the module docstring for the classes.

    Args:
        got, expected: QuantizedTensor, Operand or GroupedQuantizedTensor (any array library).
            Two different kinds of result are a structural difference (``rep.errors``); anything
            else is a TypeError.
        x: optional input (NumPy or device array) to show each mismatch's input block and to tell
            a flipped rounding tie from another off-by-one code: the array `expected` was quantized
            from (its shape); for an Operand, that operand's own (rows, cols) input (x for a
            rowwise operand, x^T for a columnwise one); for a grouped result, the members'
            elements back to back (sum(M_i*K_i) elements, 1-D or 2-D).
        max_shown: how many mismatches the report keeps in detail (an integer >= 0).

    Example:
        >>> import numpy as np, fp4kit
        >>> x = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
        >>> rep = fp4kit.compare(fp4kit.quantize(x, "nvfp4"), fp4kit.reference.quantize(x, "nvfp4"))
        >>> bool(rep), rep.differing
        (True, 0)
    """
    for name, v in (("got", got), ("expected", expected)):
        if not isinstance(v, _RESULT_TYPES):
            raise TypeError(f"{name}: expected a QuantizedTensor, Operand or GroupedQuantizedTensor, "
                            f"got {type(v).__name__}")
    if isinstance(max_shown, bool) or not isinstance(max_shown, (int, np.integer)):
        raise TypeError(f"max_shown: expected an integer >= 0, got {type(max_shown).__name__} {max_shown!r}")
    if max_shown < 0:
        raise ValueError(f"max_shown: expected an integer >= 0, got {max_shown}")
    rep = CompareReport(max_shown=int(max_shown))
    if _what(got) != _what(expected):
        rep.errors.append(f"got is {_what(got)}, expected {_what(expected)}")
        return rep
    if isinstance(expected, GroupedQuantizedTensor):           # and got: the kinds are the same
        if not _same_structure(rep, got, expected):
            return rep
        gdims, edims = got.host_dims(), expected.host_dims()
        if gdims != edims:
            rep.errors.append(f"dims: got first_dims={gdims[0]}, last_dims={gdims[1]}; expected "
                              f"first_dims={edims[0]}, last_dims={edims[1]} (members not compared)")
            return rep
        sizes = [m * k for m, k in zip(*edims)]
        xs = None
        if x is not None:
            xn = _host_input(x, "the input that `expected` was quantized from")
            if xn.ndim not in (1, 2) or xn.size != sum(sizes):
                raise ValueError(f"x: expected the members' sum(M_i*K_i)={sum(sizes)} elements back to back "
                                 f"(1-D or 2-D) that `expected` was quantized from, got shape {tuple(xn.shape)}")
            flat, off, xs = xn.reshape(-1), 0, []
            for (m, k), n in zip(zip(*edims), sizes):
                xs.append(flat[off:off + n].reshape(m, k))
                off += n
        from ._grouped_views import member_views              # the dims read above, not again
        for i, (gm, em) in enumerate(zip(member_views(got, gdims), member_views(expected, edims))):
            sub = compare(gm, em, x=None if xs is None else xs[i], max_shown=max_shown)
            for k, v in sub.fields.items():
                rep.fields[f"[{i}].{k}"] = v
            rep.mismatches += [dataclasses.replace(m, field=f"[{i}].{m.field}")      # the field's key in rep.fields
                               for m in sub.mismatches][: max(0, max_shown - len(rep.mismatches))]
            rep.errors += [f"[{i}] {e}" for e in sub.errors]
        if expected.dbias is not None:
            _compare_dbias(rep, got.dbias, expected.dbias, xs)
        elif got.dbias is not None:
            rep.errors.append("dbias: got one, expected none")
        return rep
    if isinstance(expected, Operand):
        x2 = None if x is None else _input(x, (expected.rows, expected.cols),
                                        "the operand's own input: x for a rowwise operand, x^T for a columnwise one")
        _compare_operand(rep, "operand", got, expected, x2)
        return rep
    if not _same_structure(rep, got, expected):
        return rep
    x2 = None
    if x is not None:
        x2 = _input(x, expected.shape, "the input that `expected` was quantized from").reshape(expected.M, expected.K)
    for name in ("rowwise", "columnwise"):
        g, e = getattr(got, name), getattr(expected, name)
        if e is None and g is None:
            continue
        if g is None or e is None:
            rep.errors.append(f"{name}: present in {'expected' if g is None else 'got'} only")
            continue
        _compare_operand(rep, name, g, e, x2 if not (name == "columnwise" and expected.options.rht) else None,
                         transposed=(name == "columnwise"))
    return rep

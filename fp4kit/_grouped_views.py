"""Grouped-tensor bookkeeping shared by every backend: offsets, scale offsets, member views.

Only slicing and reshape are used on arrays, so NumPy, CuPy and PyTorch buffers all give views.
"""
from __future__ import annotations

import numbers
import operator
from dataclasses import dataclass
from typing import Any, Iterator

from .formats import FORMATS
from .tensor import Operand, QuantizedTensor, swizzled_shape

__all__ = ["GroupLayout", "grouped_layout", "member_index", "member_view", "member_views", "GroupedArray"]


@dataclass(frozen=True)
class GroupLayout:
    offsets: tuple                   # element offsets, G + 1 entries
    scale_offsets_rowwise: tuple     # byte offsets of each member's scale matrix, G + 1 entries
    scale_offsets_columnwise: tuple
    amax_offsets_rowwise: tuple      # float offsets into the amax vector, G + 1 entries
    amax_offsets_columnwise: tuple


def _scale_bytes(f, rows: int, cols: int, layout: str) -> int:
    r, c = rows, f.num_blocks(cols)
    if layout == "swizzled":
        r, c = swizzled_shape(r, c)
    return r * c


def grouped_layout(f, opts, first, last) -> GroupLayout:
    offs, srow, scol, arow, acol = [0], [0], [0], [0], [0]
    for m, k in zip(first, last):
        offs.append(offs[-1] + m * k)
        srow.append(srow[-1] + _scale_bytes(f, m, k, opts.scale_layout))
        scol.append(scol[-1] + _scale_bytes(f, k, m, opts.scale_layout))
        arow.append(arow[-1] + (m if opts.row_scaled else 1))
        acol.append(acol[-1] + (k if opts.row_scaled else 1))
    return GroupLayout(tuple(offs), tuple(srow), tuple(scol), tuple(arow), tuple(acol))


def member_index(i, n: int) -> int:
    """A member index as a list takes it: anything operator.index accepts (int, NumPy integers,
    bool), negative from the end; IndexError out of range."""
    try:
        k = operator.index(i)
    except TypeError:
        raise TypeError(f"index: expected an int, got {type(i).__name__}") from None
    j = k + n if k < 0 else k
    if not 0 <= j < n:
        raise IndexError(f"index: group has {n} members, got {k}")
    return j


def member_view(g, i: int) -> QuantizedTensor:
    """Member i of group g as a QuantizedTensor of views (reads the host dims once: a
    synchronisation for dims on the device)."""
    i = member_index(i, len(g))
    first, last = g.host_dims()
    return next(_members(g, first, last, (i,)))


def member_views(g, dims=None) -> Iterator[QuantizedTensor]:
    """Every member of group g, in order, from one read of the dims (or `dims`, (first, last) as
    host_dims gives them) and one layout (linear in G; indexing g[i] for each i would rebuild the
    layout, O(G) a member). Lazy: a member is built when reached (for JAX, whose slices are
    copies, one member's copies at a time)."""
    first, last = g.host_dims() if dims is None else dims
    return _members(g, first, last, range(len(first)))


def _members(g, first, last, which) -> Iterator[QuantizedTensor]:
    f = FORMATS[g.format]
    opts = g.options
    lay = grouped_layout(f, opts, first, last)

    def member(i):
        m, k = first[i], last[i]
        e0 = lay.offsets[i] // 2 if f.packed else lay.offsets[i]

        def operand(data, scales, amax, soffs, aoffs, rows, cols):
            if data is None:
                return None
            nbytes = rows * f.packed_len(cols)
            d = data[e0:e0 + nbytes].reshape(rows, f.packed_len(cols))
            sshape = (rows, f.num_blocks(cols))
            if opts.scale_layout == "swizzled":
                sshape = swizzled_shape(*sshape)
            s = scales[soffs[i]:soffs[i + 1]].reshape(sshape)
            a = amax[aoffs[i]:aoffs[i + 1]] if amax is not None else None
            return Operand(data=d, scales=s, scale_layout=opts.scale_layout, amax=a, rows=rows, cols=cols,
                           format=f.name)

        row = operand(g.rowwise_data, g.rowwise_scales, g.rowwise_amax, lay.scale_offsets_rowwise,
                      lay.amax_offsets_rowwise, m, k)
        col = operand(g.columnwise_data, g.columnwise_scales, g.columnwise_amax, lay.scale_offsets_columnwise,
                      lay.amax_offsets_columnwise, k, m)
        return QuantizedTensor(format=f.name, shape=(m, k), rowwise=row, columnwise=col, options=opts,
                               input_dtype=g.input_dtype)

    return (member(i) for i in which)


@dataclass(frozen=True, eq=False)
class GroupedArray:
    """A flat buffer of G members (member i at element offsets[i]) with its group metadata.

    From a GPU group whose dims live on the device, `first_dims` / `last_dims` are those device
    arrays and `offsets` is None; `group` is then that GroupedQuantizedTensor, and `host_dims()` or
    indexing a member synchronises once to read the dims (raising ValueError if the device flagged
    them, as `group.check()`)."""

    data: Any
    kind: str
    first_dims: tuple
    last_dims: tuple
    offsets: tuple
    operand: str = "rowwise"
    group: Any = None

    def __post_init__(self):
        """A GroupedArray built by hand: its metadata agree with each other and with the buffer's
        length (shapes only, no device sync). fp4kit's own results skip this (_grouped_array)."""
        from .tensor import GROUP_KINDS
        if self.kind not in GROUP_KINDS:
            raise ValueError(f"kind: expected one of {GROUP_KINDS}, got {self.kind!r}")
        if self.operand not in ("rowwise", "columnwise"):
            raise ValueError(f"operand: expected 'rowwise' or 'columnwise', got {self.operand!r}")
        if not hasattr(self.data, "shape"):
            raise TypeError(f"data: expected a flat array (NumPy or device), got {type(self.data).__name__}")
        for name in ("first_dims", "last_dims"):
            if isinstance(getattr(self, name), list):
                object.__setattr__(self, name, tuple(getattr(self, name)))
        first, last = self.first_dims, self.last_dims
        if not (isinstance(first, tuple) and isinstance(last, tuple)):
            if self.offsets is not None:
                raise ValueError("offsets: dims on the device go with offsets None")
            return
        for name, dims in (("first_dims", first), ("last_dims", last)):
            for i, v in enumerate(dims):
                if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 0:
                    raise ValueError(f"{name}[{i}]: expected a non-negative integer, got {v!r}")
        if len(first) != len(last):
            raise ValueError(f"last_dims: expected one per member, {len(first)} as first_dims, got {len(last)}")
        want = [0]
        for m, k in zip(first, last):
            want.append(want[-1] + int(m) * int(k))
        if self.offsets is not None and tuple(self.offsets) != tuple(want):
            raise ValueError(f"offsets: expected the running sums of M_i * K_i, {tuple(want)[:9]}"
                             f"{' ...' if len(want) > 9 else ''}, got {tuple(self.offsets)[:9]}")
        n = 1
        for d in self.data.shape:
            n *= int(d)
        if len(self.data.shape) != 1 or n != want[-1]:
            raise ValueError(f"data: expected a flat array of the members' {want[-1]} elements, "
                             f"got shape {tuple(self.data.shape)}")

    def __len__(self) -> int:
        return len(self.first_dims)

    def __repr__(self) -> str:   # the metadata, never the buffer's contents (nor a device sync)
        where = "device" if self.offsets is None else "host"
        dt = getattr(self.data, "dtype", "?")
        return (f"GroupedArray: {len(self)} members ({self.kind}, {self.operand}, dims on the {where}), "
                f"{type(self.data).__name__} of {int(getattr(self.data, 'size', 0)):,} {dt} elements")

    def host_dims(self) -> tuple[tuple, tuple]:
        """(first_dims, last_dims) as host tuples (synchronises when they live on the device)."""
        if self.offsets is None and self.group is not None:
            return self.group.host_dims()
        return self.first_dims, self.last_dims

    def __getitem__(self, i: int):
        i = member_index(i, len(self))
        first, last = self.host_dims()
        m, k = first[i], last[i]
        if self.offsets is None:   # device-side dims: the member's offset from the host copy
            start = sum(a * b for a, b in zip(first[:i], last[:i]))
        else:
            start = self.offsets[i]
        shape = (m, k) if self.operand == "rowwise" else (k, m)
        return self.data[start:start + m * k].reshape(shape)

    def __iter__(self):
        """The members in order, from one read of the dims (linear in G)."""
        first, last = self.host_dims()
        start = 0
        for m, k in zip(first, last):
            shape = (m, k) if self.operand == "rowwise" else (k, m)
            yield self.data[start:start + m * k].reshape(shape)
            start += m * k


def _grouped_array(**fields) -> GroupedArray:
    """A GroupedArray of fp4kit's own results (its metadata are the group's), without the checks."""
    ga = object.__new__(GroupedArray)
    defaults = {"operand": "rowwise", "group": None}
    ga.__dict__.update((f, fields[f] if f in fields else defaults[f]) for f in _GA_FIELDS)
    return ga


_GA_FIELDS = ("data", "kind", "first_dims", "last_dims", "offsets", "operand", "group")

"""Result types: Operand, QuantizedTensor and GroupedQuantizedTensor.

Arrays inside are NumPy arrays for the reference and the caller's device arrays for the CUDA
backend; these classes never import an array library.
"""
from __future__ import annotations

import numbers
import operator
from dataclasses import dataclass, field
from typing import Any

from .formats import DTYPES, FORMATS, SCALE_LAYOUTS, get_format

__all__ = ["Operand", "QuantizeOptions", "QuantizedTensor", "GroupedQuantizedTensor", "swizzled_shape"]


def _roundup(n: int, m: int) -> int:
    return -(-n // m) * m


def swizzled_shape(rows: int, cols: int) -> tuple[int, int]:
    """Shape of the swizzled (128x4) scale buffer of a compact (rows, cols) scale matrix."""
    return (_roundup(rows, 128), _roundup(cols, 4))


@dataclass(frozen=True)
class QuantizeOptions:
    """Validated options of one quantize call (amax arrays are kept out: they live on the operands)."""

    format: str
    axis: str = "rowwise"
    scale_layout: str = "compact"
    scale_rule: str = "rceil"
    tile_2d: bool = False
    row_scaled: bool = False
    rht: bool = False
    rht_sign_mask: int = 0xD7E8
    rounding: str = "nearest"
    seed: int = 0

    def __post_init__(self):     # quantize builds one per new signature (cached): hand-built ones checked too
        from ._validate import check_options_values
        check_options_values(self)

    @property
    def fmt(self):
        return FORMATS[self.format]

    @property
    def want_rowwise(self) -> bool:
        return self.axis in ("rowwise", "both")

    @property
    def want_columnwise(self) -> bool:
        return self.axis in ("columnwise", "both")


@dataclass(frozen=True, eq=False)
class Operand:
    """One quantized operand: codes, scale codes, their layout, and the NVFP4 amax.

    `rows x cols` is the logical element shape of the operand: (M, K) for the rowwise operand and
    (K, M) for the columnwise one. Blocks run along `cols`. `data` is uint8 `(rows, cols)`, or
    `(rows, cols // 2)` for FP4; `scales` is uint8 `(rows, ceil(cols / block))` when compact and
    `swizzled_shape(...)` of that when swizzled; `amax` is float32 `(1,)`, `(rows,)` when row-scaled,
    or None for MX formats. `nbytes` counts data, scales and amax.

    Like the other result types, it holds arrays, so ``==`` is identity (and the object is
    hashable by identity); compare contents byte for byte with ``fp4kit.compare``.
    """

    data: Any
    scales: Any
    scale_layout: str
    amax: Any
    rows: int
    cols: int
    format: str

    def __post_init__(self):
        if self.scale_layout not in SCALE_LAYOUTS:
            raise ValueError(f"scale_layout: expected one of {SCALE_LAYOUTS}, got {self.scale_layout!r}")
        fmt = get_format(self.format, "format")
        if not isinstance(self.format, str):        # a Format object: keep its name, as everywhere
            object.__setattr__(self, "format", fmt.name)
        for name in ("data", "scales"):
            if not hasattr(getattr(self, name), "shape"):
                raise TypeError(f"{name}: expected a uint8 array (NumPy or device), got {type(getattr(self, name)).__name__}")
        if self.amax is not None and not hasattr(self.amax, "shape"):
            raise TypeError(f"amax: expected a float32 array (NumPy or device) or None, got {type(self.amax).__name__}")
        for name in ("rows", "cols"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 0:
                raise ValueError(f"{name}: expected a non-negative integer, got {v!r}")
            if type(v) is not int:                  # NumPy integers: plain ints, as QuantizedTensor.shape
                object.__setattr__(self, name, int(v))
        _check_amax(self, fmt, "amax")
        if fmt.packed and self.cols % 2:
            raise ValueError(f"cols: {fmt.name} packs two codes per byte along each row, so an operand's "
                             f"cols must be even, got {self.cols}")
        want = (self.rows, fmt.packed_len(self.cols))
        if tuple(self.data.shape) != want:
            raise ValueError(f"data: expected shape {want}, got {tuple(self.data.shape)}")
        if tuple(self.scales.shape) != self.scales_shape:
            raise ValueError(f"scales: expected shape {self.scales_shape}, got {tuple(self.scales.shape)}")

    @property
    def scale_shape(self) -> tuple[int, int]:
        """Shape of the compact scale matrix."""
        return (self.rows, FORMATS[self.format].num_blocks(self.cols))

    @property
    def scales_shape(self) -> tuple[int, int]:
        """Shape of `scales` as stored (compact or swizzled)."""
        r, c = self.scale_shape
        return swizzled_shape(r, c) if self.scale_layout == "swizzled" else (r, c)

    @property
    def nbytes(self) -> int:
        """Bytes of data, scales and amax."""
        n = int(self.data.nbytes) + int(self.scales.nbytes)
        return n + (int(self.amax.nbytes) if self.amax is not None else 0)

    def __repr__(self) -> str:  # shapes and the amax, never the arrays' contents
        from ._display import operand_repr
        return operand_repr(self)


def _check_amax(op: Operand, fmt, name: str) -> None:
    """An operand's amax is there exactly for NVFP4, of shape (1,) or (rows,) (shapes only)."""
    if fmt.is_nvfp4:
        if op.amax is None:
            raise ValueError(f"{name}: an NVFP4 operand needs its float32 amax, shape (1,) or ({op.rows},) "
                             f"(row-scaled), got None")
        if tuple(op.amax.shape) not in ((1,), (op.rows,)):
            raise ValueError(f"{name}: expected shape (1,) or ({op.rows},), got {tuple(op.amax.shape)}")
    elif op.amax is not None:
        raise ValueError(f"{name}: only NVFP4 operands carry an amax; format {fmt.name!r} takes None, "
                         f"got an array of shape {tuple(op.amax.shape)}")


@dataclass(frozen=True, eq=False)
class QuantizedTensor:
    """The result of `quantize`: the rowwise and/or columnwise operand of one tensor.

    Fields: `format` (name), `shape` (the input's shape), `rowwise` / `columnwise` (Operand, or
    None when not requested), `options` (the validated QuantizeOptions), `input_dtype`. `M`, `K`:
    the input flattened to 2-D; `nbytes`: bytes of both operands; `operand(name)`: one operand,
    ValueError when absent. ``==`` is identity: compare contents with ``fp4kit.compare``.
    """

    format: str
    shape: tuple
    rowwise: Operand | None
    columnwise: Operand | None
    options: QuantizeOptions
    input_dtype: str = "float32"

    def __post_init__(self):
        if self.rowwise is None and self.columnwise is None:
            raise ValueError("QuantizedTensor needs at least one operand")
        _check_parts(self)

    @property
    def M(self) -> int:
        m = 1
        for d in self.shape[:-1]:
            m *= int(d)
        return m

    @property
    def K(self) -> int:
        return int(self.shape[-1])

    @property
    def nbytes(self) -> int:
        return sum(op.nbytes for op in (self.rowwise, self.columnwise) if op is not None)

    def operand(self, name: str) -> Operand:
        if name not in ("rowwise", "columnwise"):
            raise ValueError(f"operand: expected 'rowwise' or 'columnwise', got {name!r}")
        op = getattr(self, name)
        if op is None:
            raise ValueError(f"operand: this tensor was quantized with axis={self.options.axis!r} and has no {name} operand")
        return op

    def __repr__(self) -> str:  # short and useful; the notebook helpers extend this
        from ._display import quantized_repr
        return quantized_repr(self)

    def _repr_html_(self) -> str:
        from ._display import quantized_html
        return quantized_html(self)


def _check_parts(q: QuantizedTensor) -> None:
    """The parts of a QuantizedTensor agree (one built by hand from stored bytes included): one
    format, operand dims (M, K) / (K, M) from `shape`, an NVFP4 amax of shape (1,) or (rows,).
    Reads shapes only (no array library, no device sync); dtypes are checked where the arrays are
    read (reference.api.dequantize_operand for NumPy arrays)."""
    fmt = get_format(q.format, "format")
    shape = q.shape
    if not isinstance(shape, tuple) or len(shape) == 0:
        raise ValueError(f"shape: expected the input's shape (ndim >= 1), got {shape!r}")
    try:
        ints = tuple(operator.index(d) for d in shape if not isinstance(d, bool))
    except TypeError:
        ints = ()
    if len(ints) != len(shape) or min(ints) < 0:
        raise ValueError(f"shape: expected non-negative integers, got {shape!r}")
    if any(type(d) is not int for d in shape):          # NumPy / torch integers: plain ints from here on
        object.__setattr__(q, "shape", ints)
        shape = ints
    for name in ("rowwise", "columnwise"):
        op = getattr(q, name)
        if op is not None and not isinstance(op, Operand):
            raise TypeError(f"{name}: expected an Operand or None, got {type(op).__name__}")
    if not isinstance(q.options, QuantizeOptions):
        raise TypeError(f"options: expected QuantizeOptions (a result's .options), got {type(q.options).__name__}")
    if q.options.format != fmt.name:
        raise ValueError(f"options: expected QuantizeOptions of format {fmt.name!r}, got {q.options.format!r}")
    if q.input_dtype not in DTYPES:
        raise ValueError(f"input_dtype: expected one of {list(DTYPES)}, got {q.input_dtype!r}")
    if q.options.rht and q.input_dtype != "bfloat16":
        raise ValueError(f"options: rht=True quantizes bfloat16 input only, got input_dtype={q.input_dtype!r}")
    M, K = q.M, q.K
    for name, op, want, dims in (("rowwise", q.rowwise, (M, K), "(M, K)"), ("columnwise", q.columnwise, (K, M), "(K, M)")):
        if op is None:
            continue
        if op.format != fmt.name:
            raise ValueError(f"{name}: expected a {fmt.name!r} operand, got format {op.format!r}")
        if (op.rows, op.cols) != want:
            raise ValueError(f"{name}: expected the {dims} = {want} operand of shape {shape}, got {op.rows}x{op.cols}")
        _check_amax(op, fmt, f"{name}.amax")
    for name, op in (("rowwise", q.rowwise), ("columnwise", q.columnwise)):   # the options describe the operands
        wanted = q.options.want_rowwise if name == "rowwise" else q.options.want_columnwise
        if (op is not None) != wanted:
            raise ValueError(f"{name}: options.axis={q.options.axis!r} " + ("asks for it, got None" if wanted else
                             "does not ask for it, got an Operand") + " (replace the options too: "
                             "dataclasses.replace(q.options, axis=...))")
        if op is not None and op.scale_layout != q.options.scale_layout:
            raise ValueError(f"{name}.scale_layout: expected options.scale_layout={q.options.scale_layout!r}, "
                             f"got {op.scale_layout!r}")


_new = object.__new__


def _operand_unchecked(data, scales, scale_layout: str, amax, rows: int, cols: int, format: str) -> Operand:
    """An Operand without Operand.__post_init__'s checks, for fp4kit's own results whose layout was
    already checked (quantize's fast paths, PyTorch and CuPy, build the first result of each call
    signature with the public constructor and later ones with this). Same fields, same order, same class."""
    op = _new(Operand)
    op.__dict__.update(data=data, scales=scales, scale_layout=scale_layout, amax=amax, rows=rows, cols=cols,
                       format=format)
    return op


def _quantized_unchecked(format: str, shape: tuple, rowwise, columnwise, options: QuantizeOptions,
                         input_dtype: str) -> QuantizedTensor:
    """A QuantizedTensor without __post_init__'s check (at least one operand), for the same use as
    _operand_unchecked."""
    q = _new(QuantizedTensor)
    q.__dict__.update(format=format, shape=shape, rowwise=rowwise, columnwise=columnwise, options=options,
                      input_dtype=input_dtype)
    return q


def _options_with_seed(opts: QuantizeOptions, seed: int) -> QuantizeOptions:
    """`opts` with another seed, for an int seed in [0, 2**64 - 1] (the seed's only check, which
    depends on no other option)."""
    o = _new(QuantizeOptions)
    d = o.__dict__
    d.update(opts.__dict__)
    d["seed"] = seed
    return o


@dataclass(frozen=True, eq=False)
class GroupedQuantizedTensor:
    """The result of `group_quantize`: G members stored back to back (SPEC section 7).

    `first_dims`/`last_dims` are host tuples of ints (length G); `offsets` are element offsets
    (G + 1 entries); `scale_offsets_rowwise` / `scale_offsets_columnwise` are byte offsets of each
    member's scale matrix in the concatenated scale buffers (G + 1 entries). `rowwise_data` etc.
    are flat 1-D uint8 buffers; `amax_*` are float32 (NVFP4; None for MX): (G,), one per member, or
    with row_scaled one per row, (sum M_i,) rowwise and (sum K_i,) columnwise.

    A GPU result from device-side dims keeps those dims as device int64 arrays, with `offsets`
    None and the scale offsets empty (reading them would synchronise): `host_dims()`, `g[i]`,
    `group_dequantize(g)[i]` and the printed forms read the dims once when needed (after `check()`).
    """

    format: str
    kind: str
    first_dims: tuple
    last_dims: tuple
    offsets: tuple
    options: QuantizeOptions
    rowwise_data: Any = None
    rowwise_scales: Any = None
    rowwise_amax: Any = None
    columnwise_data: Any = None
    columnwise_scales: Any = None
    columnwise_amax: Any = None
    scale_offsets_rowwise: tuple = ()
    scale_offsets_columnwise: tuple = ()
    dbias: Any = None
    input_dtype: str = "float32"
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        _check_group(self)

    def __len__(self) -> int:
        if isinstance(self.first_dims, tuple):       # host dims: their length (extra is a plain dict)
            return len(self.first_dims)
        return int(self.extra["G"]) if "G" in self.extra else len(self.first_dims)

    @property
    def nbytes(self) -> int:
        """Bytes of the codes, scales and amax of every member (as QuantizedTensor.nbytes; dbias
        is not counted)."""
        from ._display import _grouped_bytes
        return _grouped_bytes(self)

    def check(self) -> None:
        """GPU results with device-side dims: wait for the device and raise ValueError if the
        metadata kernel flagged the dims (negative, over the bound, odd FP4 axis, ...). Host-side
        dims were checked before any launch, so this is a no-op for them."""
        flag = self.extra.get("error_flag")
        if flag is None:
            return
        from ._grouped_device import decode_error
        from .comparator import to_numpy
        code = int(to_numpy(flag).reshape(-1)[0])
        if code:
            raise ValueError(f"group dims (device): {decode_error(code)} (error flags 0x{code:x}); nothing was written")

    def host_dims(self) -> tuple[tuple, tuple]:
        """(first_dims, last_dims) as host tuples (synchronises when they live on the device)."""
        if isinstance(self.first_dims, tuple):
            return self.first_dims, self.last_dims
        from .comparator import to_numpy
        self.check()
        return (tuple(int(v) for v in to_numpy(self.first_dims)), tuple(int(v) for v in to_numpy(self.last_dims)))

    def __getitem__(self, i: int) -> QuantizedTensor:
        from ._grouped_views import member_view
        return member_view(self, i)

    def __iter__(self):
        from ._grouped_views import member_views
        return member_views(self)

    def __repr__(self) -> str:
        from ._display import grouped_repr
        return grouped_repr(self)

    def _repr_html_(self) -> str:
        from ._display import grouped_html
        return grouped_html(self)


GROUP_KINDS = ("same", "varying_first", "varying_last", "varying_both")


def _check_group(g: GroupedQuantizedTensor) -> None:
    """The metadata of a GroupedQuantizedTensor built through its constructor (by hand, or by
    dataclasses.replace) agree, so members and group_dequantize never fail with an IndexError or
    KeyError: the format, kind and options; host dims as tuples of G non-negative ints each, the
    element offsets and scale offsets of those dims (where given). Device dims (GPU results) and
    the arrays themselves are not read here (no device sync)."""
    fmt = get_format(g.format, "format")
    if not isinstance(g.format, str):
        object.__setattr__(g, "format", fmt.name)
    if g.kind not in GROUP_KINDS:
        raise ValueError(f"kind: expected one of {GROUP_KINDS}, got {g.kind!r}")
    if not isinstance(g.options, QuantizeOptions):
        raise TypeError(f"options: expected QuantizeOptions (a result's .options), got {type(g.options).__name__}")
    if g.options.format != fmt.name:
        raise ValueError(f"options: expected QuantizeOptions of format {fmt.name!r}, got {g.options.format!r}")
    if not isinstance(g.extra, dict):
        raise TypeError(f"extra: expected a dict, got {type(g.extra).__name__}")
    if g.input_dtype not in DTYPES:
        raise ValueError(f"input_dtype: expected one of {list(DTYPES)}, got {g.input_dtype!r}")
    for name in ("first_dims", "last_dims"):      # host dims given as a list: a tuple, as group_quantize gives
        if isinstance(getattr(g, name), list):
            object.__setattr__(g, name, tuple(getattr(g, name)))
    first, last = g.first_dims, g.last_dims
    if not (isinstance(first, tuple) and isinstance(last, tuple)):
        if g.offsets is not None:
            raise ValueError("offsets: a group whose dims live on the device has offsets None (reading the dims "
                             "would synchronise); give host dims as tuples of ints")
        return                              # device dims: checked by the kernels (g.check())
    for name, dims in (("first_dims", first), ("last_dims", last)):
        for i, v in enumerate(dims):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 0:
                raise ValueError(f"{name}[{i}]: expected a non-negative integer, got {v!r}")
    if any(type(v) is not int for v in first + last):
        first, last = tuple(int(v) for v in first), tuple(int(v) for v in last)
        object.__setattr__(g, "first_dims", first)
        object.__setattr__(g, "last_dims", last)
    if len(first) != len(last):
        raise ValueError(f"last_dims: expected one per member, {len(first)} as first_dims, got {len(last)}")
    if "G" in g.extra and g.extra["G"] != len(first):
        raise ValueError(f"extra['G']: expected the number of members, {len(first)}, got {g.extra['G']!r}")
    same_first, same_last = len(set(first)) <= 1, len(set(last)) <= 1
    if not {"same": same_first and same_last, "varying_first": same_last, "varying_last": same_first}.get(g.kind, True):
        raise ValueError(f"kind: {g.kind!r} does not describe first_dims {_short(first)} and last_dims {_short(last)}")
    from ._grouped_views import grouped_layout
    lay = grouped_layout(fmt, g.options, first, last)
    for name, want in (("offsets", lay.offsets), ("scale_offsets_rowwise", lay.scale_offsets_rowwise),
                       ("scale_offsets_columnwise", lay.scale_offsets_columnwise)):
        got = getattr(g, name)
        if got is None or (name != "offsets" and len(got) == 0):
            continue
        if tuple(got) != want:
            raise ValueError(f"{name}: expected {_short(want)} for first_dims and last_dims, got {_short(tuple(got))}")
    # the buffers: present as options.axis asks, flat, of the layout's lengths (shapes only: no sync)
    n_codes = lay.offsets[-1] // 2 if fmt.packed else lay.offsets[-1]
    for op, wanted, soffs, aoffs in (("rowwise", g.options.want_rowwise, lay.scale_offsets_rowwise, lay.amax_offsets_rowwise),
                                     ("columnwise", g.options.want_columnwise, lay.scale_offsets_columnwise,
                                      lay.amax_offsets_columnwise)):
        for part, n in (("data", n_codes), ("scales", soffs[-1]), ("amax", aoffs[-1] if fmt.is_nvfp4 else None)):
            name, a = f"{op}_{part}", getattr(g, f"{op}_{part}")
            if n is None or not wanted:
                if a is not None:
                    why = f"format {fmt.name!r} has no amax" if n is None else f"options.axis={g.options.axis!r}"
                    raise ValueError(f"{name}: expected None ({why}), got an array")
                continue
            if a is None or not hasattr(a, "shape"):
                raise ValueError(f"{name}: expected a flat array of {n} entries (options.axis={g.options.axis!r}), "
                                 f"got {type(a).__name__}")
            if tuple(a.shape) != (n,):
                raise ValueError(f"{name}: expected shape ({n},) for first_dims and last_dims, got {tuple(a.shape)}")


def _short(t: tuple) -> str:
    return str(t) if len(t) <= 8 else f"({', '.join(map(str, t[:4]))}, ..., {t[-1]}) ({len(t)} entries)"

"""Short, useful text and HTML summaries of quantized results (repr / _repr_html_).

Works for NumPy and device arrays alike: only shapes, ``nbytes`` and the tiny amax vectors are read,
never the codes or scales (no large host copies).
"""
from __future__ import annotations

import html

import numpy as np

from .formats import FORMATS

_IN_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def _nbytes(a) -> int:
    if a is None:
        return 0
    n = getattr(a, "nbytes", None)
    if n is not None:
        return int(n)
    try:  # PyTorch-like objects without nbytes
        return int(a.numel()) * int(a.element_size())
    except Exception:
        return 0


def _small_host(a, limit: int = 1 << 16):
    """A small array (amax) as NumPy float32, or None when it cannot (or should not) be read."""
    if a is None:
        return None
    if isinstance(a, np.ndarray):           # host memory: always read (no device sync, no copy)
        return np.asarray(a, dtype=np.float32).reshape(-1)
    try:
        n = 1
        for s in a.shape:
            n *= int(s)
        if n > limit:
            return None
        from .comparator import to_numpy
        return np.asarray(to_numpy(a), dtype=np.float32).reshape(-1)
    except Exception:
        return None


def _amax_text(a) -> str:
    if a is None:
        return "-"
    v = _small_host(a)
    if v is None:
        return f"{tuple(a.shape)} on device, not read"
    if v.size == 1:
        return f"{float(v[0]):.6g}"
    if v.size == 0:
        return "(0,)"
    return f"({v.size},) per row, max {_nanmax(v):.6g}"


def _nanmax(v: np.ndarray) -> float:
    """np.nanmax without its all-NaN RuntimeWarning (NaN then)."""
    finite_or_inf = v[~np.isnan(v)]
    return float(finite_or_inf.max()) if finite_or_inf.size else float("nan")


def _in_bytes(shape, input_dtype: str) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n * _IN_BYTES.get(input_dtype, 4)


def _ratio(in_bytes: int, out_bytes: int) -> str:
    return f"{in_bytes / out_bytes:.2f}x" if out_bytes and in_bytes else "-"


def _rows(q):
    out = []
    for name in ("rowwise", "columnwise"):
        op = getattr(q, name)
        if op is None:
            continue
        out.append((name, f"{op.rows}x{op.cols}", op.scale_layout, f"{tuple(op.scales.shape)}",
                    f"{op.nbytes:,}", _amax_text(op.amax)))
    return out


def _extras(o, fmt) -> list[str]:
    extras = [k for k in ("tile_2d", "row_scaled", "rht") if getattr(o, k)]
    if o.rht and o.rht_sign_mask != 0xD7E8:
        extras[-1] = f"rht(mask=0x{o.rht_sign_mask:04X})"
    if o.rounding == "stochastic":
        extras.append(f"stochastic(seed={o.seed})")
    if fmt.is_mx:
        extras.append(f"scale_rule={o.scale_rule}")
    return extras


def _summary(q) -> str:
    f = FORMATS[q.format]
    ratio = _ratio(_in_bytes(q.shape, q.input_dtype), q.nbytes)
    extras = _extras(q.options, f)
    return (f"{q.format} {tuple(q.shape)} from {q.input_dtype}, {q.nbytes:,} bytes "
            f"(compression {ratio} vs the input)" + (f", {', '.join(extras)}" if extras else ""))


def quantized_repr(q) -> str:
    lines = [f"QuantizedTensor: {_summary(q)}"]
    for name, shape, lay, sshape, nb, amax in _rows(q):
        lines.append(f"  {name:<10} {shape:>13} codes, {lay} scales {sshape}, {nb} bytes, amax {amax}")
    return "\n".join(lines)


def operand_repr(op) -> str:
    return (f"Operand: {op.format} {op.rows}x{op.cols}, codes {tuple(op.data.shape)}, {op.scale_layout} "
            f"scales {tuple(op.scales.shape)}, {op.nbytes:,} bytes, amax {_amax_text(op.amax)}")


def _format_line(f) -> str:
    second = f", second level {f.second_level}" if f.second_level else ""
    return (f"{f.element.upper()} elements (max {f.element_max:g}), blocks of {f.block}, "
            f"{f.scale.upper()} scales{second}")


_CSS = ("<style>.fp4kit-t{border-collapse:collapse;font-family:monospace;font-size:90%}"
        ".fp4kit-t td,.fp4kit-t th{border:1px solid #ccc;padding:2px 8px;text-align:right}"
        ".fp4kit-t th{background:#f3f3f3}</style>")


def _table(head, rows) -> str:
    h = "".join(f"<th>{html.escape(c)}</th>" for c in head)
    b = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="fp4kit-t"><tr>{h}</tr>{b}</table>'


def quantized_html(q) -> str:
    f = FORMATS[q.format]
    rows = []
    for name in ("rowwise", "columnwise"):
        op = getattr(q, name)
        if op is None:
            continue
        rows.append((name, f"{op.rows} x {op.cols}", f"{tuple(op.data.shape)}", f"{_nbytes(op.data):,}",
                     op.scale_layout, f"{tuple(op.scales.shape)}", f"{_nbytes(op.scales):,}",
                     _amax_text(op.amax)))
    head = ("operand", "rows x cols", "codes", "code bytes", "scales", "scale shape", "scale bytes", "amax")
    return (f"<div>{_CSS}<b>QuantizedTensor</b> {html.escape(_summary(q))}<br>"
            f"<small>{html.escape(_format_line(f))}</small>{_table(head, rows)}</div>")


def _grouped_bytes(g) -> int:
    return sum(_nbytes(getattr(g, f"{o}_{p}")) for o in ("rowwise", "columnwise") for p in ("data", "scales", "amax"))


def _grouped_dims(g) -> tuple[tuple, tuple, str]:
    """(first, last, note): host dims to show. Device-side dims are read once (the display has to
    wait for them); dims the device flagged as invalid are not shown, the note says why."""
    if isinstance(g.first_dims, tuple):
        return g.first_dims, g.last_dims, ""
    try:
        first, last = g.host_dims()   # checks the device's error flags first
    except ValueError as e:
        return (), (), f"dims not shown: {e}"
    return first, last, ""


def _grouped_summary(g) -> str:
    G = len(g)
    first, last, note = _grouped_dims(g)
    dims = note or ", ".join(f"{m}x{k}" for m, k in list(zip(first, last))[:6])
    more = ", ..." if G > 6 and not note else ""
    ops = [n for n in ("rowwise", "columnwise") if getattr(g, f"{n}_data") is not None]
    in_bytes = sum(m * k for m, k in zip(first, last)) * _IN_BYTES.get(g.input_dtype, 4)
    nb = _grouped_bytes(g)
    extras = _extras(g.options, FORMATS[g.format])
    return (f"{g.format}, kind {g.kind}, {G} members [{dims}{more}] from {g.input_dtype}, "
            f"operands {'+'.join(ops)}, {g.options.scale_layout} scales, {nb:,} bytes "
            f"(compression {_ratio(in_bytes, nb)} vs the input)" + (f", {', '.join(extras)}" if extras else ""))


def _grouped_amax(g) -> list[str]:
    out = []
    for name in ("rowwise", "columnwise"):
        a = getattr(g, f"{name}_amax")
        if a is None:
            continue
        v = _small_host(a)
        if v is None:
            out.append(f"{name} amax {tuple(a.shape)} on device, not read")
        elif v.size:
            shown = ", ".join(f"{x:.4g}" for x in v[:6]) + (", ..." if v.size > 6 else "")
            out.append(f"{name} amax ({v.size},) [{shown}]")
    return out


def grouped_repr(g) -> str:
    lines = [f"GroupedQuantizedTensor: {_grouped_summary(g)}"]
    lines += [f"  {a}" for a in _grouped_amax(g)]
    if g.dbias is not None:
        lines.append(f"  dbias {tuple(g.dbias.shape)}")
    return "\n".join(lines)


def grouped_html(g) -> str:
    f = FORMATS[g.format]
    rows = []
    first, last, _ = _grouped_dims(g)
    e0 = 0
    for i, (m, k) in enumerate(list(zip(first, last))[:16]):
        rows.append((i, f"{m} x {k}", e0))
        e0 += m * k
    head = ("member", "M x K", "element offset")
    more = f"<small>... {len(g) - 16} more members</small>" if len(g) > 16 else ""
    amax = "".join(f"<br><small>{html.escape(a)}</small>" for a in _grouped_amax(g))
    return (f"<div>{_CSS}<b>GroupedQuantizedTensor</b> {html.escape(_grouped_summary(g))}<br>"
            f"<small>{html.escape(_format_line(f))}</small>{amax}{_table(head, rows)}{more}</div>")

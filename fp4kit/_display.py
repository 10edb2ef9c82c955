"""Short, useful text and HTML summaries of quantized results (repr / _repr_html_)."""
from __future__ import annotations

import html

from .formats import FORMATS

_IN_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def _amax_text(a) -> str:
    if a is None:
        return "-"
    try:
        n = int(a.shape[0])
        if n == 1:
            return f"{float(a[0]):.6g}"
        return f"({n},) per row"
    except Exception:  # device arrays that refuse host reads
        return "on device"


def _rows(q):
    out = []
    for name in ("rowwise", "columnwise"):
        op = getattr(q, name)
        if op is None:
            continue
        out.append((name, f"{op.rows}x{op.cols}", op.scale_layout, f"{tuple(op.scales.shape)}",
                    f"{op.nbytes:,}", _amax_text(op.amax)))
    return out


def _summary(q) -> str:
    n_in = 1
    for s in q.shape:
        n_in *= int(s)
    in_bytes = n_in * _IN_BYTES.get(q.input_dtype, 4)
    ratio = f"{in_bytes / q.nbytes:.2f}x" if q.nbytes else "-"
    o = q.options
    extras = [k for k in ("tile_2d", "row_scaled", "rht") if getattr(o, k)]
    if o.rounding == "stochastic":
        extras.append(f"stochastic(seed={o.seed})")
    if FORMATS[q.format].is_mx:
        extras.append(f"scale_rule={o.scale_rule}")
    return (f"{q.format} {tuple(q.shape)} from {q.input_dtype}, {q.nbytes:,} bytes "
            f"(compression {ratio} vs the input)" + (f", {', '.join(extras)}" if extras else ""))


def quantized_repr(q) -> str:
    lines = [f"QuantizedTensor: {_summary(q)}"]
    for name, shape, lay, sshape, nb, amax in _rows(q):
        lines.append(f"  {name:<10} {shape:>13} codes, {lay} scales {sshape}, {nb} bytes, amax {amax}")
    return "\n".join(lines)


def quantized_html(q) -> str:
    head = "<tr><th>operand</th><th>rows x cols</th><th>scales</th><th>scale shape</th><th>bytes</th><th>amax</th></tr>"
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in _rows(q))
    return f"<div><b>QuantizedTensor</b>: {html.escape(_summary(q))}<table>{head}{body}</table></div>"


def grouped_repr(g) -> str:
    G = len(g)
    dims = ", ".join(f"{m}x{k}" for m, k in list(zip(g.first_dims, g.last_dims))[:6])
    more = ", ..." if G > 6 else ""
    ops = [n for n in ("rowwise", "columnwise") if getattr(g, f"{n}_data") is not None]
    return (f"GroupedQuantizedTensor: {g.format}, kind {g.kind}, {G} members [{dims}{more}], "
            f"operands {'+'.join(ops)}, {g.options.scale_layout} scales")


def grouped_html(g) -> str:
    return f"<div>{html.escape(grouped_repr(g))}</div>"

"""Plots of what quantization did to a tensor (matplotlib, optional: ``pip install "fp4kit[plot]"``).

``import fp4kit`` never imports matplotlib; each function imports it when called and returns a
``matplotlib.figure.Figure`` (not registered with pyplot, so nothing accumulates and a notebook
shows it once when it is the cell's value; save it with ``fig.savefig(path)``).
"""
from __future__ import annotations

import numpy as np

from .analysis import compact_scales, error_report, operand_codes, operand_reference, scale_values
from .comparator import to_numpy
from .formats import FORMATS, get_format
from .tensor import QuantizedTensor

__all__ = ["plot_histogram", "plot_scale_heatmap", "plot_format_comparison", "DEFAULT_RECIPES"]

_INSTALL = 'fp4kit plots need matplotlib: pip install "fp4kit[plot]" (or pip install matplotlib)'


def _figure(**kw):
    try:
        from matplotlib.figure import Figure
    except ImportError as e:  # also raised when sys.modules["matplotlib"] is None
        raise ImportError(_INSTALL) from e
    return Figure(**kw)


def _grid(elem) -> np.ndarray:
    """Positive representable values of an element type (codes 1 .. max_code)."""
    from .reference.numerics import decode
    return decode(np.arange(1, elem.max_code + 1, dtype=np.uint8), elem).astype(np.float64)


def plot_histogram(x, fmt_or_q, operand: str = "rowwise", bins: int = 200, **quantize_options):
    """Histogram of |x| / scale (the values the element encoder sees) against the element grid.

    Args:
        x: the input (NumPy or device array, ndim >= 1).
        fmt_or_q: a format name (then ``x`` is quantized here with ``quantize_options``) or the
            QuantizedTensor of ``x``.
        operand: "rowwise" or "columnwise" (compared with x^T, or its RHT when the recipe uses rht).
        bins: histogram bins on a log2 axis.

    Each element's |value| is divided by its block's decode scale (MX: 2^(E-127); NVFP4:
    e4m3(sf) * amax / 2688); vertical lines mark every positive value of the element type; the
    shaded band beyond the max saturates, values below half the smallest subnormal become 0.

    Returns:
        matplotlib.figure.Figure

    Example:
        >>> import numpy as np
        >>> from fp4kit.plot import plot_histogram
        >>> x = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
        >>> fig = plot_histogram(x, "nvfp4")       # doctest: +SKIP
        >>> fig.savefig("hist.png")                # doctest: +SKIP
    """
    fig = _figure(figsize=(8, 3.6), layout="constrained")
    q = fmt_or_q
    if not isinstance(q, QuantizedTensor):
        from . import api
        f = get_format(fmt_or_q)
        if operand == "columnwise" and quantize_options.get("axis", "rowwise") == "rowwise":
            quantize_options["axis"] = "columnwise"
        q = api.quantize(x, f.name, **quantize_options)
    f = FORMATS[q.format]
    elem = f.elem
    op = q.operand(operand)
    ref, what = operand_reference(x, q, operand)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        s = np.abs(ref.astype(np.float64)) / scale_values(op)
    s = s[np.isfinite(s)]
    grid = _grid(elem)
    lo, hi = grid[0] / 64, elem.max * 2
    nz = s[(s >= lo) & (s <= hi)]
    below = int(np.sum(s < grid[0] / 2))
    above = int(np.sum(s > elem.max))
    ax = fig.add_subplot()
    edges = np.geomspace(lo, hi, bins + 1)
    ax.hist(nz, bins=edges, color="#4C72B0", alpha=0.85, label="|x| / block scale")
    ax.set_xscale("log", base=2)
    for k, g in enumerate(grid):
        ax.axvline(g, color="#C44E52", lw=0.6, alpha=0.6, label=f"{elem.name.upper()} grid" if k == 0 else None)
    ax.axvspan(elem.max, hi, color="#C44E52", alpha=0.08, label=f"saturates to {elem.max:g}")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("|x| / scale (log2 axis)")
    ax.set_ylabel("elements")
    codes = operand_codes(op)
    n = max(codes.size, 1)
    mag = codes & np.uint8((1 << (elem.bits - 1)) - 1)
    ax.set_title(f"{q.format} {operand} (vs {what}): {len(grid)} positive grid values; "
                 f"{100 * np.mean(mag == elem.max_code) if codes.size else 0:.1f}% at the max code, "
                 f"{100 * above / n:.1f}% above it, {100 * below / n:.1f}% round to 0", fontsize=9)
    ax.legend(fontsize=8, loc="upper left")
    return fig


def plot_scale_heatmap(q, operand: str = "rowwise", max_cells: int = 512):
    """Heat map of the per-block scales of one operand: rows x blocks, coloured by log2(scale).

    Args:
        q: a QuantizedTensor (NumPy or device arrays; scales are copied to the host).
        operand: "rowwise" or "columnwise".
        max_cells: larger matrices are reduced by taking the max over row/column bands.

    MX scales show the E8M0 exponent E - 127; NVFP4 scales show log2 of the E4M3 scale value
    (zero scales, from all-zero blocks, are drawn in grey).

    Returns:
        matplotlib.figure.Figure

    Example:
        >>> import numpy as np, fp4kit
        >>> from fp4kit.plot import plot_scale_heatmap
        >>> q = fp4kit.quantize(np.random.default_rng(0).standard_normal((64, 256)).astype(np.float32), "mxfp4_e2m1")
        >>> fig = plot_scale_heatmap(q)            # doctest: +SKIP
    """
    if not isinstance(q, QuantizedTensor):
        raise TypeError(f"q: expected a QuantizedTensor, got {type(q).__name__}")
    fig = _figure(figsize=(7, 4.2), layout="constrained")
    f = FORMATS[q.format]
    op = q.operand(operand)
    s = compact_scales(op)
    from .reference.numerics import decode
    if f.is_mx:
        v = np.where(s == 255, np.nan, s.astype(np.float64) - 127)
        label = "E8M0 exponent (scale = 2^value)"
    else:
        d = decode(s, "e4m3").astype(np.float64)
        with np.errstate(divide="ignore"):
            v = np.where(d > 0, np.log2(d), np.nan)
        label = "log2(E4M3 block scale)"
    note = ""
    R, C = v.shape
    fr, fc = max(1, -(-R // max_cells)), max(1, -(-C // max_cells))
    if (fr, fc) != (1, 1):
        pad = np.full((-(-R // fr) * fr, -(-C // fc) * fc), np.nan)
        pad[:R, :C] = v
        with np.errstate(invalid="ignore"):
            import warnings
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                v = np.nanmax(pad.reshape(pad.shape[0] // fr, fr, pad.shape[1] // fc, fc), axis=(1, 3))
        note = f" (max over {fr}x{fc} cells)"
    ax = fig.add_subplot()
    cmap = _cmap("viridis")
    im = ax.imshow(np.ma.masked_invalid(v), aspect="auto", interpolation="nearest", cmap=cmap)
    fig.colorbar(im, ax=ax, label=label)
    ax.set_xlabel(f"block along the {'K' if operand == 'rowwise' else 'M'} axis ({f.block} elements each){note}")
    ax.set_ylabel("row of the operand" + (" (= column of x)" if operand == "columnwise" else ""))
    ax.set_title(f"{q.format} {operand} scales: {R} x {C} blocks, {op.scale_layout} layout", fontsize=9)
    return fig


def _cmap(name):
    import matplotlib
    cmap = matplotlib.colormaps[name]
    if hasattr(cmap, "with_extremes"):
        return cmap.with_extremes(bad="#bbbbbb")
    cmap = cmap.copy()
    cmap.set_bad("#bbbbbb")
    return cmap


# label -> (format, quantize options); the NVFP4 recipes of SPEC section 4.
DEFAULT_RECIPES = {
    "nvfp4 rht": ("nvfp4", {"rht": True}),
    "nvfp4 2d": ("nvfp4", {"tile_2d": True}),
    "nvfp4 row-scaled": ("nvfp4", {"row_scaled": True}),
    "nvfp4 stochastic": ("nvfp4", {"rounding": "stochastic", "seed": 1}),
}


def format_comparison(x, formats=None, recipes=None):
    """{label: ErrorReport} for every format (default options) and recipe, both operands.

    Of the defaults (``formats`` or ``recipes`` left None), those that this shape does not allow
    (RHT needs a multiple of 16 rows, a columnwise FP4 operand an even number) are left out with a
    warning; a format or recipe the caller names raises as ``quantize`` would.

    A recipe with ``rht=True`` quantizes ``x`` cast to bfloat16 (RHT needs bfloat16 input) and its
    columnwise figures are taken against the transformed x^T (the 16-point Hadamard transform used
    here is orthonormal, so SNRs stay comparable up to the bfloat16 rounding of the transform).
    """
    from . import api
    entries = [(name, name, {}, formats is None) for name in (list(FORMATS) if formats is None else list(formats))]
    for label, r in (DEFAULT_RECIPES if recipes is None else recipes).items():
        fmt, opts = r if isinstance(r, tuple) else ("nvfp4", r)
        entries.append((label, fmt, dict(opts), recipes is None))
    xn = to_numpy(x) if isinstance(x, np.ndarray) else x
    out, left_out = {}, []
    for label, fmt, opts, default in entries:
        xi = xn
        if opts.get("rht") and isinstance(xi, np.ndarray):
            import ml_dtypes
            if xi.dtype != ml_dtypes.bfloat16:
                xi = xi.astype(ml_dtypes.bfloat16)
        opts.setdefault("axis", "both")
        try:
            q = api.quantize(xi, fmt, **opts)
        except ValueError as e:
            if not default:                   # what the caller named must work
                raise
            left_out.append(f"{label} ({e})")  # a default this shape does not allow
            continue
        out[label] = error_report(xi, q)
    if left_out:
        import warnings
        warnings.warn("format_comparison: left out the defaults this input's shape does not allow: "
                      + "; ".join(left_out), UserWarning, stacklevel=2)
    return out


def plot_format_comparison(x, formats=None, recipes=None, metric: str = "snr_db"):
    """Bar chart of one error figure per format and recipe, rowwise and columnwise side by side.

    Args:
        x: the tensor to quantize (NumPy or device array).
        formats: format names (default: all of ``fp4kit.FORMATS``), default options.
        recipes: {label: (format, quantize options)} or {label: NVFP4 options}; default
            ``DEFAULT_RECIPES`` (NVFP4 with RHT, 2D tiles, row scaling, stochastic rounding).
        metric: an ``OperandError`` field: "snr_db" (default, higher is better), "mse",
            "max_abs_error", "max_rel_error", "saturated" or "zeroed" (another: ValueError, at once).

    Returns:
        matplotlib.figure.Figure (the figures are in ``fp4kit.plot.format_comparison``).

    Example:
        >>> import numpy as np
        >>> from fp4kit.plot import plot_format_comparison
        >>> x = np.random.default_rng(0).standard_normal((64, 128)).astype(np.float32)
        >>> fig = plot_format_comparison(x, formats=["mxfp8_e4m3", "nvfp4"], recipes={})  # doctest: +SKIP
    """
    names = {"snr_db": "SNR (dB, higher is better)", "mse": "MSE", "max_abs_error": "max abs error",
             "max_rel_error": "max relative error", "saturated": "fraction saturated", "zeroed": "fraction zeroed"}
    if metric not in names:
        raise ValueError(f"metric: expected one of {', '.join(map(repr, names))}, got {metric!r}")
    fig = _figure(figsize=(9, 3.8), layout="constrained")
    reps = format_comparison(x, formats, recipes)
    labels = list(reps)
    vals = {op: [getattr(reps[k][op], metric) for k in labels] for op in ("rowwise", "columnwise")}
    ax = fig.add_subplot()
    pos = np.arange(len(labels))
    w = 0.4
    for i, (op, color) in enumerate((("rowwise", "#4C72B0"), ("columnwise", "#DD8452"))):
        v = np.asarray(vals[op], dtype=np.float64)
        bars = ax.bar(pos + (i - 0.5) * w, np.where(np.isfinite(v), v, 0), w, label=op, color=color)
        for b, val in zip(bars, v):
            txt = f"{val:.1f}" if metric == "snr_db" else f"{val:.2g}"
            ax.annotate(txt, (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom",
                        fontsize=7, xytext=(0, 1), textcoords="offset points")
    ax.set_xticks(pos, labels, rotation=25, ha="right", fontsize=8)
    ax.set_ylabel(names[metric])
    shape = next(iter(reps.values())).shape if reps else ()
    ax.set_title(f"quantization error per format / recipe, x of shape {tuple(shape)} "
                 f"(rht: columnwise vs the transformed x^T)", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return fig

"""Plots of what quantization did to a tensor (matplotlib, optional: ``pip install "fp4kit[plot]"``).

``import fp4kit`` never imports matplotlib; each function imports it when called and returns a
``matplotlib.figure.Figure`` (not registered with pyplot, so nothing accumulates and a notebook
shows it once when it is the cell's value; save it with ``fig.savefig(path)``).
"""
from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping

import numpy as np

from ._interop import dtype_name, library_of
from ._validate import QUANTIZE_OPTION_NAMES, check_choice, flat_2d, quantize_options
from .analysis import compact_scales, error_report, operand_reference, scale_values
from .comparator import to_numpy
from .formats import FORMATS, Format, get_format
from .tensor import GroupedQuantizedTensor, QuantizedTensor

__all__ = ["plot_histogram", "plot_scale_heatmap", "plot_format_comparison", "DEFAULT_RECIPES"]

_INSTALL = 'fp4kit plots need matplotlib: pip install "fp4kit[plot]" (or pip install matplotlib)'


def _figure(**kw):
    try:
        from matplotlib.figure import Figure
    except ImportError as e:  # also raised when sys.modules["matplotlib"] is None
        raise ImportError(_INSTALL) from e
    return Figure(**kw)


def _count(name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{name}: expected an integer >= 1, got {type(v).__name__} {v!r}")
    if v < 1:
        raise ValueError(f"{name}: expected an integer >= 1, got {v}")
    return int(v)


def _pct(v: float) -> str:
    return "-" if np.isnan(v) else f"{100 * v:.1f}%"


def _grid(elem) -> np.ndarray:
    """Positive representable values of an element type (codes 1 .. max_code)."""
    from .reference.numerics import decode
    return decode(np.arange(1, elem.max_code + 1, dtype=np.uint8), elem).astype(np.float64)


def plot_histogram(x, fmt_or_q, operand: str = "rowwise", bins: int = 200, **quantize_options):
    """Histogram of |x| / scale (the values the element encoder sees) against the element grid.

    Args:
        x: the input (NumPy or device array, ndim >= 1).
        fmt_or_q: a format name (then ``x`` is quantized here with ``quantize_options``) or the
            QuantizedTensor of ``x`` (then no options: TypeError).
        operand: "rowwise" or "columnwise" (compared with x^T, or its RHT when the recipe uses rht).
        bins: histogram bins on a log2 axis (an integer >= 1).

    Each element's |value| is divided by its block's decode scale (MX: 2^(E-127); NVFP4:
    e4m3(sf) * amax / 2688); vertical lines mark every positive value of the element type; the
    shaded band beyond the max saturates, values below half the smallest subnormal become 0. The
    title's saturated and zeroed fractions are ``error_report(x, q)``'s (over finite inputs).

    Returns:
        matplotlib.figure.Figure

    Example:
        >>> import numpy as np
        >>> from fp4kit.plot import plot_histogram
        >>> x = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
        >>> fig = plot_histogram(x, "nvfp4")       # doctest: +SKIP
        >>> fig.savefig("hist.png")                # doctest: +SKIP
    """
    check_choice("operand", operand, ("rowwise", "columnwise"))
    bins = _count("bins", bins)
    q = fmt_or_q
    if isinstance(q, QuantizedTensor):
        if quantize_options:
            raise TypeError(f"{', '.join(quantize_options)}: quantize options go with a format name only; "
                            f"fmt_or_q is a QuantizedTensor (already quantized)")
        q.operand(operand)
        rep = error_report(x, q)            # x must be what q was quantized from (else ValueError)
    elif not isinstance(q, (str, Format)):
        hint = " (plot one member of a grouped result: g[i])" if isinstance(q, GroupedQuantizedTensor) else ""
        raise TypeError(f"fmt_or_q: expected a format name or a QuantizedTensor, got {type(q).__name__}{hint}")
    else:
        f = get_format(q, "fmt_or_q")
    fig = _figure(figsize=(8, 3.6), layout="constrained")
    if not isinstance(q, QuantizedTensor):
        from . import api
        if operand == "columnwise" and quantize_options.get("axis", "rowwise") == "rowwise":
            quantize_options["axis"] = "columnwise"
        q = api.quantize(x, f.name, **quantize_options)
        rep = error_report(x, q)
    o = rep[operand]
    elem = FORMATS[q.format].elem
    op = q.operand(operand)
    ref, what = operand_reference(x, q, operand)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        s = np.abs(ref.astype(np.float64)) / scale_values(op)
    s = s[np.isfinite(s)]
    grid = _grid(elem)
    lo, hi = grid[0] / 64, elem.max * 2
    nz = s[(s >= lo) & (s <= hi)]
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
    lost = f"; {o.lost} finite inputs decode to non-finite values" if o.lost else ""
    ax.set_title(f"{q.format} {operand} (vs {what}): {len(grid)} positive grid values; "
                 f"{_pct(o.saturated)} at the max code, {_pct(above / o.finite if o.finite else np.nan)} "
                 f"above it, {_pct(o.zeroed)} of non-zero inputs round to 0{lost}", fontsize=9)
    ax.legend(fontsize=8, loc="upper left")
    return fig


def plot_scale_heatmap(q, operand: str = "rowwise", max_cells: int = 512):
    """Heat map of the per-block scales of one operand: rows x blocks, coloured by log2(scale).

    Args:
        q: a QuantizedTensor (NumPy or device arrays; scales are copied to the host).
        operand: "rowwise" or "columnwise".
        max_cells: larger matrices are reduced by taking the max over row/column bands (an
            integer >= 1).

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
    max_cells = _count("max_cells", max_cells)
    op = q.operand(operand)
    fig = _figure(figsize=(7, 4.2), layout="constrained")
    f = FORMATS[q.format]
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
    if v.size:
        im = ax.imshow(np.ma.masked_invalid(v), aspect="auto", interpolation="nearest", cmap=_cmap("viridis"))
        fig.colorbar(im, ax=ax, label=label)
    else:                               # an empty operand (0 rows or columns): nothing to draw
        ax.text(0.5, 0.5, "no blocks", ha="center", va="center", transform=ax.transAxes)
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


def _entries(formats, recipes) -> list:
    """format_comparison's [(label, where, format name, quantize options, default)], each checked:
    a bad entry raises before anything is quantized, naming it (``recipes['a']: ...``)."""
    single = isinstance(formats, (str, Format))
    if formats is not None and not single and not isinstance(formats, Iterable):
        raise TypeError(f"formats: expected a format name or a list of them, got {type(formats).__name__}")
    names = list(FORMATS) if formats is None else [formats] if single else list(formats)
    entries = []
    for i, fmt in enumerate(names):
        where = "formats" if single else f"formats[{i}]"
        name = get_format(fmt, where).name
        entries.append((name, where, name, {"axis": "both"}, formats is None))
    if recipes is not None and not isinstance(recipes, Mapping):
        raise TypeError(f"recipes: expected a mapping {{label: options dict or (format, options dict)}}, "
                        f"got {type(recipes).__name__}")
    keys = QUANTIZE_OPTION_NAMES + ("amax",)
    for label, r in (DEFAULT_RECIPES if recipes is None else recipes).items():
        where = f"recipes[{label!r}]"
        if isinstance(r, Mapping):
            fmt, opts = "nvfp4", r
        elif isinstance(r, (tuple, list)) and len(r) == 2 and isinstance(r[1], Mapping):
            fmt, opts = r[0], r[1]
        else:
            raise TypeError(f"{where}: expected a dict of quantize options or a (format, options dict) pair, "
                            f"got {type(r).__name__} {r!r}")
        bad = [k for k in opts if k not in keys]
        if bad:
            raise TypeError(f"{where}: {bad[0]!r} is not an option of quantize; expected some of {list(keys)}")
        entries.append((label, where, get_format(fmt, where).name, {"axis": "both", **opts}, recipes is None))
    seen = set()
    for label, where, *_ in entries:
        if label in seen:
            raise ValueError(f"{where}: the label {label!r} is taken by another format or recipe; rename it")
        seen.add(label)
    return entries


def _bfloat16(x):
    """x cast to bfloat16 through its own library, or None for a library without bfloat16 (CuPy)."""
    if isinstance(x, np.ndarray):
        import ml_dtypes
        return x.astype(ml_dtypes.bfloat16)
    lib = library_of(x)
    if lib == "torch":
        import torch
        return x.to(torch.bfloat16)
    if lib == "jax":
        import jax.numpy as jnp
        return x.astype(jnp.bfloat16)
    return None


def format_comparison(x, formats=None, recipes=None):
    """{label: ErrorReport} for every format (default options) and recipe, both operands.

    ``formats``: a format name (or Format), or a list of them (labelled by name); ``recipes``:
    {label: NVFP4 options dict, or (format, options dict)}. Every entry is checked before anything
    is quantized (a bad one raises naming it, e.g. ``recipes['a']: ...``; labels must be unique).
    Of the defaults (``formats`` or ``recipes`` left None), those that this shape does not allow
    (RHT needs a multiple of 16 rows, a columnwise FP4 operand an even number) are left out with a
    warning (when none is left, the first one's error is raised); a format or recipe the caller
    names raises as ``quantize`` would.

    A recipe with ``rht=True`` quantizes ``x`` cast to bfloat16 (RHT needs bfloat16 input; a device
    array is cast by its library, PyTorch or JAX: CuPy has no bfloat16, so pass such x as bfloat16
    another way) and its columnwise figures are taken against the transformed x^T (the 16-point
    Hadamard transform used here is orthonormal, so SNRs stay comparable up to the bfloat16
    rounding of the transform).
    """
    from . import api
    if not hasattr(x, "shape") or not hasattr(x, "dtype"):
        raise api._bad_input(x)
    flat_2d(x.shape)                                # a 0-d x: ValueError, as quantize says
    entries = _entries(formats, recipes)
    xn = to_numpy(x) if isinstance(x, np.ndarray) else x
    dtype = dtype_name(xn)
    jobs, left_out, first = [], [], None
    for label, where, fmt, opts, default in entries:
        xi = _bfloat16(xn) if opts.get("rht") and dtype != "bfloat16" else xn
        try:
            if xi is None:
                raise TypeError(f"x: rht=True needs bfloat16 input, and fp4kit cannot cast a {type(xn).__name__} "
                                f"to bfloat16 (CuPy has no bfloat16): pass x as a NumPy, PyTorch or JAX array")
            quantize_options(tuple(xi.shape), dtype_name(xi), fmt, **{k: v for k, v in opts.items() if k != "amax"})
        except (TypeError, ValueError) as e:
            if not default:                 # what the caller named must work
                raise type(e)(f"{where}: {e}") from None
            if xi is not None and not (isinstance(e, ValueError) and str(e).startswith("x:")):
                raise                       # not a limit of this input's shape (or array library)
            left_out.append(f"{label} ({e})")
            first = first or e
            continue
        jobs.append((label, xi, fmt, opts))
    if first is not None and not jobs:
        raise first
    if left_out:
        import warnings
        warnings.warn("format_comparison: left out the defaults this input does not allow: "
                      + "; ".join(left_out), UserWarning, stacklevel=2)
    return {label: error_report(xi, api.quantize(xi, fmt, **opts)) for label, xi, fmt, opts in jobs}


def plot_format_comparison(x, formats=None, recipes=None, metric: str = "snr_db"):
    """Bar chart of one error figure per format and recipe, rowwise and columnwise side by side.

    Args:
        x: the tensor to quantize (NumPy or device array).
        formats: format names (default: all of ``fp4kit.FORMATS``), default options.
        recipes: {label: (format, quantize options)} or {label: NVFP4 options}; default
            ``DEFAULT_RECIPES`` (NVFP4 with RHT, 2D tiles, row scaling, stochastic rounding).
        metric: an ``OperandError`` field: "snr_db" (default, higher is better), "mse",
            "max_abs_error", "max_rel_error", "saturated" or "zeroed" (another: ValueError, at once).

    An infinite figure (an exact result's SNR) is a hatched bar past the finite ones, labelled
    "exact" (SNR) or "inf"; an operand a recipe does not produce has no bar (labelled "-").

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
    if not isinstance(metric, str):
        raise TypeError(f"metric: expected one of {', '.join(map(repr, names))}, got {type(metric).__name__}")
    if metric not in names:
        raise ValueError(f"metric: expected one of {', '.join(map(repr, names))}, got {metric!r}")
    fig = _figure(figsize=(9, 3.8), layout="constrained")
    reps = format_comparison(x, formats, recipes)
    labels = list(reps)
    got = [{o.operand: getattr(o, metric) for o in reps[k].operands} for k in labels]
    vals = {op: np.array([g.get(op, np.nan) for g in got], dtype=np.float64) for op in ("rowwise", "columnwise")}
    fin = np.concatenate(list(vals.values()))
    fin = fin[np.isfinite(fin)]
    hi, lo = max(np.max(fin, initial=0.0), 0.0), min(np.min(fin, initial=0.0), 0.0)
    pad = 0.15 * ((hi - lo) or 1.0)         # +-inf bars reach past every finite one
    ax = fig.add_subplot()
    pos = np.arange(len(labels))
    w = 0.4
    for i, (op, color) in enumerate((("rowwise", "#4C72B0"), ("columnwise", "#DD8452"))):
        v = vals[op]
        h = np.select([np.isnan(v), v == np.inf, v == -np.inf], [0.0, hi + pad, lo - pad], v)
        bars = ax.bar(pos + (i - 0.5) * w, h, w, label=op, color=color)
        for b, val in zip(bars, v):
            if np.isnan(val):
                txt = "-"
            elif np.isinf(val):
                txt = "exact" if metric == "snr_db" and val > 0 else f"{val:g}"
                b.set_hatch("//")
                b.set_edgecolor("white")
            else:
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
